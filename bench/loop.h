/* fa-bench loop mode (--layers L --steps N): calls made the way a model's
 * decode step makes them. A step enqueues L calls of one operation back to
 * back, one a layer (each on its own KV cache or recurrent state, the same
 * q and o buffers), and ends with one clFinish. The per-call figures, each
 * a bench_row field:
 *   wall_ms   the step's wall time / L (median over the timed steps)
 *   host_ms   the time spent inside the L calls (CLOCK_MONOTONIC around
 *             each) / L (median over the timed steps)
 *   ms        the mean device time of the L calls of one more step, run
 *             untimed with the library's timing on (fcl_context_last_op_time
 *             after each call, which waits)
 *   b2b_ms    a call's device time with the step's calls run back to back
 *             behind a spinning kernel (back_to_back.h), the like of a
 *             CUDA graph's replay (median over the timed steps' count)
 *   launch_ms, launch_event_ms  the driver's host time for one bare launch
 *             (launch_cost.h), measured after the timed steps.
 * The ops' files (decode_loop.c, rwkv6_loop.c, rwkv7_loop.c) set up the layers and check
 * the last layer's output of the device-time step. */
#ifndef FCL_BENCH_LOOP_H
#define FCL_BENCH_LOOP_H

#include "bench.h"

/* One layer's call in step `step`; nothing but the fcl_* call, its
 * arguments prepared beforehand, so that its time is the library's. */
typedef fcl_status (*bench_layer_call)(fcl_context *ctx, const void *arg, int layer, int step);

typedef struct {
  fcl_context     *ctx;
  bench_layer_call call;
  const void      *arg;
  int              layers;
  int              step; /* steps run so far (warm-up included): the next step's index */
} bench_loop;

/* One warm-up step, then `steps` timed steps, the back-to-back steps, then
 * the bare launches. Fills r->wall_ms, host_ms, b2b_ms, launch_ms, launch_event_ms, events_off, layers,
 * steps and kernels_per_call. 0, or -1 with the reason on stderr. */
int bench_loop_time(bench_loop *lp, int steps, int kernels_per_call, bench_row *r);
/* One more step with the library's timing on, reading each call's device
 * time: r->ms is their mean (NAN where the queue does not profile). The
 * timing stays on afterwards (the other ops' rows need it). 0 or -1. */
int bench_loop_device_step(bench_loop *lp, bench_row *r);

/* The recurrent ops' states (rwkv6_loop.c, rwkv7_loop.c): two f32 states
 * of n floats for each of `layers` layers, layer l's at [2 l] (filled:
 * uniform on [-1, 1), the last layer's from another seed than the others',
 * so that a check of the last layer catches a call that read or wrote
 * another layer's state) and [2 l + 1] (not filled). NULL, with a message
 * naming op, if they cannot be made. bench_loop_states_free releases them. */
cl_mem *bench_loop_states(fcl_context *ctx, const char *op, size_t n, int layers);
void    bench_loop_states_free(cl_mem *st, int layers);
/* Their device-time step (bench_loop_device_step), the last layer read
 * for the check first where check is set: h0_buf, the state that step
 * reads (n floats), into h0, and o (o_bytes) and ht_buf poisoned so that
 * the check sees what the step wrote. 0 or -1. */
int bench_loop_state_step(bench_loop *lp, int check, cl_mem h0_buf, float *h0, size_t n,
                          cl_mem o, size_t o_bytes, cl_mem ht_buf, bench_row *r);

#endif
