/* fa-bench loop mode: a step's calls timed back to back (see back_to_back.h). */
#include "back_to_back.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "clprog.h"

#define SPIN_TRIES 4

typedef struct {
  cl_command_queue queue;
  cl_kernel        spin, tail;
  cl_mem           buf;
  double           ns_per_iter; /* the spin's device time a step of its loop */
} b2b;

static cl_ulong stamp(cl_event ev, cl_profiling_info what) {
  cl_ulong t = 0;
  return clGetEventProfilingInfo(ev, what, sizeof t, &t, NULL) ? 0 : t;
}

/* Runs the spin of n steps alone: its device time in ns (0 on error). */
static double spin_alone(b2b *x, int n) {
  const size_t one = 1;
  cl_event ev = NULL;
  double ns = 0;
  if (!clSetKernelArg(x->spin, 1, sizeof n, &n) &&
      !clEnqueueNDRangeKernel(x->queue, x->spin, 1, NULL, &one, &one, 0, NULL, &ev) &&
      !clWaitForEvents(1, &ev))
    ns = (double)(stamp(ev, CL_PROFILING_COMMAND_END) - stamp(ev, CL_PROFILING_COMMAND_START));
  if (ev) clReleaseEvent(ev);
  return ns;
}

/* One step behind a spin of about spin_ns (empty: L empty kernels in place
 * of the calls): *per_call_ms, or NAN where the host was still enqueueing
 * when the spin ended. 0 or -1. */
static int step(b2b *x, bench_loop *lp, int empty, double spin_ns, double *per_call_ms) {
  const size_t one = 1;
  const int n = (int)fmin(spin_ns / x->ns_per_iter + 1, 2e9);
  cl_event e0 = NULL, e1 = NULL;
  int rc = -1;
  *per_call_ms = NAN;
  if (clSetKernelArg(x->spin, 1, sizeof n, &n) ||
      clEnqueueNDRangeKernel(x->queue, x->spin, 1, NULL, &one, &one, 0, NULL, &e0) ||
      clFlush(x->queue))
    goto done;
  const double t0 = bench_now_ms();
  const int s = empty ? lp->step : lp->step++;
  for (int l = 0; l < lp->layers; l++)
    if (empty) {
      if (clEnqueueNDRangeKernel(x->queue, x->tail, 1, NULL, &one, &one, 0, NULL, NULL)) goto done;
    } else if (lp->call(lp->ctx, lp->arg, l, s) != FCL_OK) {
      fprintf(stderr, "fa-bench: back-to-back step, layer %d: %s\n", l,
              fcl_context_last_error(lp->ctx));
      goto done;
    }
  if (clEnqueueNDRangeKernel(x->queue, x->tail, 1, NULL, &one, &one, 0, NULL, &e1) ||
      clFlush(x->queue))
    goto done;
  const double host_ms = bench_now_ms() - t0;
  if (clFinish(x->queue)) goto done;
  const cl_ulong spin0 = stamp(e0, CL_PROFILING_COMMAND_START),
                 spin1 = stamp(e0, CL_PROFILING_COMMAND_END),
                 tail0 = stamp(e1, CL_PROFILING_COMMAND_START);
  /* The spin started after it was enqueued, so a spin longer than the
   * enqueueing of the calls outlasted it. */
  if (spin1 > spin0 && tail0 > spin1 && (double)(spin1 - spin0) * 1e-6 > host_ms)
    *per_call_ms = (double)(tail0 - spin1) * 1e-6 / lp->layers;
  rc = 0;
done:
  if (e0) clReleaseEvent(e0);
  if (e1) clReleaseEvent(e1);
  if (rc) fprintf(stderr, "fa-bench: back-to-back step failed\n");
  return rc;
}

int bench_loop_b2b(bench_loop *lp, int steps, bench_row *r) {
  b2b x = {fcl_context_queue(lp->ctx), NULL, NULL, NULL, 0};
  cl_command_queue_properties props = 0;
  cl_program prog = NULL;
  cl_int err = CL_SUCCESS;
  double *t = calloc((size_t)steps + 1, sizeof *t);
  int rc = -1, ok;
  r->b2b_ms = r->empty_b2b_ms = NAN;
  clGetCommandQueueInfo(x.queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  if (!(props & CL_QUEUE_PROFILING_ENABLE)) return free(t), 0;
  if (!t || !(prog = bench_cl_build(lp->ctx, "launch.cl", ""))) goto done;
  x.spin = clCreateKernel(prog, "bench_spin", &err);
  if (!err) x.tail = clCreateKernel(prog, "bench_tail", &err);
  if (!err) x.buf = clCreateBuffer(fcl_context_cl(lp->ctx), CL_MEM_READ_WRITE, 64, NULL, &err);
  if (!err) err = clSetKernelArg(x.spin, 0, sizeof x.buf, &x.buf);
  if (!err) err = clSetKernelArg(x.tail, 0, sizeof x.buf, &x.buf);
  if (!err) err = clEnqueueFillBuffer(x.queue, x.buf, &(float){1.0f}, sizeof(float), 0, 64, 0,
                                      NULL, NULL);
  if (err) {
    fprintf(stderr, "fa-bench: back-to-back kernels: OpenCL error %d\n", err);
    goto done;
  }
  const int calib = 1 << 16;
  spin_alone(&x, calib); /* the first run may upload the kernel */
  x.ns_per_iter = spin_alone(&x, calib) / calib;
  if (!(x.ns_per_iter > 0)) goto done;
  /* As long as twice the step's host time, and at least a millisecond. */
  double spin_ns = fmax(2e6 * r->host_ms * lp->layers, 1e6);
  bench_set_timing(lp->ctx, 0);
  for (int empty = 0; empty < 2; empty++) {
    ok = 0;
    for (int i = -1; i < steps; i++) {
      double ms = NAN;
      /* A spin too short for the enqueueing is made longer, for good. */
      for (int k = 0; k < SPIN_TRIES; k++, spin_ns *= 2) {
        if (step(&x, lp, empty, spin_ns, &ms)) goto restore;
        if (!isnan(ms)) break;
      }
      if (i >= 0 && !isnan(ms)) t[ok++] = ms;
    }
    if (ok) *(empty ? &r->empty_b2b_ms : &r->b2b_ms) = bench_median(t, ok);
  }
  rc = 0;
restore:
  bench_set_timing(lp->ctx, 1); /* as bench_loop_time leaves it */
done:
  if (x.buf) clReleaseMemObject(x.buf);
  if (x.spin) clReleaseKernel(x.spin);
  if (x.tail) clReleaseKernel(x.tail);
  if (prog) clReleaseProgram(prog);
  free(t);
  return rc;
}
