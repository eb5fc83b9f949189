/* fa-bench's own OpenCL kernels (bench/peak.cl, bench/baseline.cl, embedded at
 * build time): build them for the context's device, time them with profiling
 * events. */
#ifndef FCL_BENCH_CLPROG_H
#define FCL_BENCH_CLPROG_H

#include "flashcl.h"

/* The device of the context's queue. */
cl_device_id bench_cl_device(fcl_context *ctx);
/* Builds the embedded file `name` (e.g. "peak.cl") with `options`; NULL,
 * with the reason and the build log on stderr, on failure. */
cl_program bench_cl_build(fcl_context *ctx, const char *name, const char *options);
/* Device time from the start of `first` to the end of `last` (both
 * complete), in ms; 0 on success. */
int bench_cl_span_ms(cl_event first, cl_event last, double *ms);

#endif
