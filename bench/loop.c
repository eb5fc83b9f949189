/* fa-bench loop mode: the timed steps and the device-time step (see loop.h). */
#include "loop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "back_to_back.h"
#include "launch_cost.h"
#include "test_util.h"

#define BARE_LAUNCHES 2000

/* One step: the L calls and a clFinish. *host_ms (if not NULL) gets the
 * time spent inside the calls. 0 or -1. */
static int run_step(bench_loop *lp, double *host_ms) {
  double inside = 0;
  const int step = lp->step++;
  for (int l = 0; l < lp->layers; l++) {
    const double t0 = bench_now_ms();
    const fcl_status st = lp->call(lp->ctx, lp->arg, l, step);
    inside += bench_now_ms() - t0;
    if (st != FCL_OK) {
      fprintf(stderr, "fa-bench: loop: layer %d of step %d: %s\n", l, step,
              fcl_context_last_error(lp->ctx));
      return -1;
    }
  }
  if (clFinish(fcl_context_queue(lp->ctx))) {
    fprintf(stderr, "fa-bench: loop: clFinish failed\n");
    return -1;
  }
  if (host_ms) *host_ms = inside;
  return 0;
}

int bench_loop_time(bench_loop *lp, int steps, int kernels_per_call, bench_row *r) {
  double *wall = malloc(2 * (size_t)steps * sizeof *wall), *host = wall + steps;
  int rc = -1;
  r->layers = lp->layers, r->steps = steps, r->kernels_per_call = kernels_per_call;
  /* The timed steps run as an application would: without per-kernel
   * profiling events (FCL_OPTION_TIMING off). */
  r->events_off = bench_set_timing(lp->ctx, 0);
  if (!wall || clFinish(fcl_context_queue(lp->ctx)) || run_step(lp, NULL)) goto done;
  for (int i = 0; i < steps; i++) {
    const double t0 = bench_now_ms();
    if (run_step(lp, &host[i])) goto done;
    wall[i] = (bench_now_ms() - t0) / lp->layers;
    host[i] /= lp->layers;
  }
  r->wall_ms = bench_median(wall, steps);
  r->host_ms = bench_median(host, steps);
  if (bench_loop_b2b(lp, steps, r)) goto done;
  if (bench_launch_cost(lp->ctx, BARE_LAUNCHES, lp->layers, &r->launch_ms, &r->launch_event_ms,
                        &r->empty_dev_ms))
    r->launch_ms = r->launch_event_ms = r->empty_dev_ms = NAN; /* the row keeps the rest */
  rc = 0;
done:
  bench_set_timing(lp->ctx, 1);
  free(wall);
  return rc;
}

int bench_loop_device_step(bench_loop *lp, bench_row *r) {
  double sum = 0;
  int timed = 1;
  const int step = lp->step++;
  bench_set_timing(lp->ctx, 1);
  for (int l = 0; l < lp->layers; l++) {
    double ms = 0;
    if (lp->call(lp->ctx, lp->arg, l, step) != FCL_OK) {
      fprintf(stderr, "fa-bench: loop: layer %d of the device-time step: %s\n", l,
              fcl_context_last_error(lp->ctx));
      return -1;
    }
    if (timed && fcl_context_last_op_time(lp->ctx, &ms) != FCL_OK) {
      fprintf(stderr, "fa-bench: loop: no device time: %s\n", fcl_context_last_error(lp->ctx));
      timed = 0;
    }
    sum += ms;
  }
  r->ms = timed ? sum / lp->layers : NAN;
  return clFinish(fcl_context_queue(lp->ctx)) ? -1 : 0;
}

cl_mem *bench_loop_states(fcl_context *ctx, const char *op, size_t n, int layers) {
  const size_t bytes = n * sizeof(float);
  cl_mem *st = calloc(2 * (size_t)layers, sizeof *st);
  void *other = bench_uniform(FCL_F32, n, 21, -1, 1), *last = bench_uniform(FCL_F32, n, 22, -1, 1);
  cl_int err = st && other && last ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  for (int l = 0; l < layers && err == CL_SUCCESS; l++) {
    st[2 * l] = bench_upload(ctx, l == layers - 1 ? last : other, bytes, &err);
    if (err == CL_SUCCESS) st[2 * l + 1] = bench_upload(ctx, NULL, bytes, &err);
  }
  free(other), free(last);
  if (err == CL_SUCCESS) return st;
  fprintf(stderr, "fa-bench: %s --layers %d: could not allocate the states (%.3g GB "
          "each layer; OpenCL error %d)\n", op, layers, 2.0 * (double)bytes * 1e-9, err);
  bench_loop_states_free(st, layers);
  return NULL;
}

void bench_loop_states_free(cl_mem *st, int layers) {
  for (int i = 0; st && i < 2 * layers; i++)
    if (st[i]) clReleaseMemObject(st[i]);
  free(st);
}

int bench_loop_state_step(bench_loop *lp, int check, cl_mem h0_buf, float *h0, size_t n,
                          cl_mem o, size_t o_bytes, cl_mem ht_buf, bench_row *r) {
  cl_command_queue queue = fcl_context_queue(lp->ctx);
  if (check && (bench_read(lp->ctx, h0_buf, n * sizeof *h0, h0) ||
                tu_buffer_repoison(queue, o, o_bytes) ||
                tu_buffer_repoison(queue, ht_buf, n * sizeof(float))))
    return -1;
  return bench_loop_device_step(lp, r);
}
