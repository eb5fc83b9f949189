/* fa-bench: the driver's host cost of one kernel launch, measured on the
 * library's own queue with an empty kernel of 24 arguments (launch.cl). */
#ifndef FCL_BENCH_LAUNCH_COST_H
#define FCL_BENCH_LAUNCH_COST_H

#include "flashcl.h"

/* The kernel's arguments set once, then `launches` clEnqueueNDRangeKernel
 * (global 128, local 128) in bursts of `burst` back to back, a clFinish
 * after each (untimed), as the loop mode's steps run their layers; each
 * launch timed alone on the host (a queue thousands deep costs the driver
 * more a launch than the loop's ever is):
 * *ms is their mean without an event, *event_ms with one requested (and
 * released right after, as a library that keeps only some of them would).
 * *dev_ms: the kernel's mean
 * device time (its event's end - start, one launch at a time), the floor
 * of any kernel's time as events report it; NAN where the queue does not
 * profile. 0 on success. */
int bench_launch_cost(fcl_context *ctx, int launches, int burst, double *ms, double *event_ms,
                      double *dev_ms);

#endif
