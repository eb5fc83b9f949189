/* fa-bench helpers: random inputs, buffers, the timing loop (device time
 * from OpenCL profiling events, wall time beside it). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "test_util.h"

bench_row bench_row_init(bench_op op) {
  bench_row r;
  memset(&r, 0, sizeof r);
  r.op = op;
  r.impl = "flashcl";
  r.causal = -1, r.algorithm = -1;
  r.ms = r.wall_ms = r.flops = r.instrs = r.bytes = r.gain = NAN;
  r.err_o = r.err_lse = r.err_grad = -1;
  r.check = "SKIP";
  r.context = r.page_size = r.num_splits = -1, r.append = -1;
  r.host_ms = r.launch_ms = r.launch_event_ms = r.empty_dev_ms = r.b2b_ms = r.empty_b2b_ms = NAN;
  return r;
}

int bench_failed(const char *check) { return !strcmp(check, "FAIL") || !strcmp(check, "ERROR"); }

void *bench_uniform(fcl_dtype t, size_t n, uint64_t seed, double lo, double hi) {
  size_t es = tu_dtype_size(t);
  unsigned char *p = malloc(n * es + 1);
  tu_rng rng;
  tu_rng_seed(&rng, seed);
  for (size_t i = 0; p && i < n; i++) tu_encode(p + i * es, tu_rng_range(&rng, lo, hi), t);
  return p;
}

double bench_elem(const void *p, fcl_dtype t, size_t i) {
  return tu_decode((const unsigned char *)p + i * tu_dtype_size(t), t);
}

void bench_decode(const void *p, fcl_dtype t, size_t n, double *dst) {
  const size_t es = tu_dtype_size(t);
  for (size_t i = 0; i < n; i++) dst[i] = tu_decode((const unsigned char *)p + i * es, t);
}

cl_mem bench_upload(fcl_context *ctx, const void *host, size_t bytes, cl_int *err) {
  cl_mem m = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, err);
  if (*err == CL_SUCCESS && host && bytes)
    *err = clEnqueueWriteBuffer(fcl_context_queue(ctx), m, CL_TRUE, 0, bytes, host, 0, NULL,
                                NULL);
  return m;
}

int bench_read(fcl_context *ctx, cl_mem buf, size_t bytes, void *dst) {
  cl_int err =
      clEnqueueReadBuffer(fcl_context_queue(ctx), buf, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
  if (err != CL_SUCCESS) fprintf(stderr, "fa-bench: reading an output failed (OpenCL error %d)\n", err);
  return err != CL_SUCCESS;
}

size_t bench_count_nonfinite(const void *p, fcl_dtype t, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += !isfinite(bench_elem(p, t, i));
  return bad;
}

double bench_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int bench_set_timing(fcl_context *ctx, int on) {
  return fcl_context_set_option(ctx, FCL_OPTION_TIMING, on) == FCL_OK;
}

int bench_f32_precision(fcl_context *ctx) {
  int64_t v = 0;
  return fcl_context_get_option(ctx, FCL_OPTION_F32_PRECISION, &v) == FCL_OK ? (int)v : 0;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

double bench_median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int library_ms(fcl_context *ctx, const void *arg, double *ms) {
  (void)arg;
  fcl_status st = fcl_context_last_op_time(ctx, ms);
  if (st != FCL_OK)
    fprintf(stderr, "fa-bench: fcl_context_last_op_time: %s\n", fcl_context_last_error(ctx));
  return st != FCL_OK;
}

double bench_time(fcl_context *ctx, bench_call call, bench_device_ms device_ms, const void *arg,
                  int warmup, int iters, double *wall_ms) {
  cl_command_queue queue = fcl_context_queue(ctx);
  double *t = malloc(2 * (size_t)iters * sizeof *t), *w = t + iters, med = -1;
  if (!device_ms) device_ms = library_ms;
  *wall_ms = -1;
  if (!t || clFinish(queue)) goto done;
  for (int i = 0; i < warmup; i++)
    if (call(ctx, arg) != FCL_OK || clFinish(queue)) goto done;
  for (int i = 0; i < iters; i++) {
    double t0 = bench_now_ms();
    if (call(ctx, arg) != FCL_OK || clFinish(queue)) goto done;
    w[i] = bench_now_ms() - t0;
    if (device_ms(ctx, arg, &t[i])) goto done;
  }
  med = bench_median(t, iters);
  *wall_ms = bench_median(w, iters);
done:
  free(t);
  return med;
}

int bench_qrow_cmp(const void *x, const void *y) {
  const bench_qrow *a = x, *b = y;
  return a->b != b->b ? (a->b > b->b) - (a->b < b->b)
       : a->h != b->h ? (a->h > b->h) - (a->h < b->h)
                      : (a->i > b->i) - (a->i < b->i);
}
