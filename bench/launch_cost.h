/* fa-bench: the driver's host cost of one kernel launch, measured on the
 * library's own queue with an empty kernel of 24 arguments (launch.cl). */
#ifndef FCL_BENCH_LAUNCH_COST_H
#define FCL_BENCH_LAUNCH_COST_H

#include "flashcl.h"

/* The kernel's arguments set once, then `launches` clEnqueueNDRangeKernel
 * back to back (global 128, local 128), each timed alone on the host:
 * *ms is their mean without an event, *event_ms with one requested (and
 * released right after, as a library that keeps only some of them would).
 * A clFinish ends each run, outside the times. *dev_ms: the kernel's mean
 * device time (its event's end - start, one launch at a time), the floor
 * of any kernel's time as events report it; NAN where the queue does not
 * profile. 0 on success. */
int bench_launch_cost(fcl_context *ctx, int launches, double *ms, double *event_ms,
                      double *dev_ms);

#endif
