/* fa-bench internals shared by its files: one row of results, random inputs,
 * device buffers and the timing loop. */
#ifndef FCL_BENCH_H
#define FCL_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "flashcl.h"

/* One line of output. Fields that do not apply are -1 (causal, algorithm),
 * NAN (times, counts, gain) or negative (the errors); they print as "-" in
 * the table, empty in CSV and null in JSON. The rates (TFLOP/s, GB/s) and
 * the utilisations are derived from the counts when the row is printed. */
typedef struct {
  bench_op    op;
  const char *impl;      /* "flashcl", or "unfused" (--baseline) */
  int64_t     b, h, hkv, sq, sk, d, dv; /* RWKV6: hkv = h, sq = sk = T, d = K, dv = V */
  fcl_dtype   t;
  int         causal;    /* 0, 1; -1 for RWKV6 */
  double      dropout;   /* attention's dropout_p (0: none) */
  int         algorithm; /* an fcl_rwkv6_algorithm; -1 for attention */
  double      ms;        /* median device time (OpenCL profiling events) */
  double      wall_ms;   /* median wall time of the same calls, clFinish to clFinish */
  double      flops;     /* conventional FLOP count (attention only) */
  double      instrs;    /* instruction-model count (attention only; see model.c) */
  double      bytes;     /* memory traffic counted for GB/s (see model.c) */
  double      gain;      /* unfused rows: unfused ms / flashcl ms of the same case */
  double      err_o, err_lse; /* max |got - ref| of the output (and lse) */
  double      err_grad;       /* max over gradients of max|got - ref| / max|ref| */
  const char *check;          /* PASS, PASS-slice, PASS-b0, UNCHECKED, FAIL, SKIP, ERROR */
  /* decode only (-1 otherwise): the cache's layout and the call's options */
  int64_t     context;        /* tokens cached before the call */
  int64_t     page_size;      /* 0: contiguous */
  int64_t     num_splits;     /* 0: the library's choice */
  int         append;         /* 1: k_new, v_new appended in the call */
  fcl_dtype   cache_k, cache_v; /* the caches' formats (t: q's dtype) */
  /* loop mode only (layers 0 otherwise; see loop.h): ms is then the mean
   * device time of a call and wall_ms the step's wall time / layers */
  int         layers, steps, kernels_per_call;
  int         events_off;     /* timed steps ran with the library's timing events off */
  double      host_ms;        /* time inside the fcl_* calls of a step / layers */
  double      launch_ms;      /* one bare clEnqueueNDRangeKernel, no event */
  double      launch_event_ms;/* the same with an event requested (and released) */
  double      empty_dev_ms;   /* the device time (profiling event) of that empty kernel */
  double      b2b_ms;         /* a call's device time, the step's calls back to back */
  double      empty_b2b_ms;   /* the same of an empty kernel: one launch's floor */
} bench_row;

/* A row with every result field "not measured", impl flashcl, check SKIP. */
bench_row bench_row_init(bench_op op);
/* An output row a check samples: (batch, head, query); qsort by that. */
typedef struct { int64_t b, h, i; } bench_qrow;
int bench_qrow_cmp(const void *x, const void *y);
/* Whether a check verdict makes fa-bench exit 1 (FAIL, ERROR). */
int       bench_failed(const char *check);

/* n values of dtype t, uniform on [lo, hi), rounded to t, from a fixed seed;
 * NULL when out of memory. */
void  *bench_uniform(fcl_dtype t, size_t n, uint64_t seed, double lo, double hi);
/* Element i of an array of dtype t. */
double bench_elem(const void *p, fcl_dtype t, size_t i);
/* Decodes n elements of dtype t into doubles. */
void   bench_decode(const void *p, fcl_dtype t, size_t n, double *dst);
/* CLOCK_MONOTONIC in ms. */
double bench_now_ms(void);
/* The median of t[0..n-1] (sorts t). */
double bench_median(double *t, int n);
/* Turns the library's per-kernel timing events on or off where it has the
 * option (FCL_OPTION_TIMING); returns 1 if it has, else 0 (events always on). */
int    bench_set_timing(fcl_context *ctx, int on);
/* The context's FCL_OPTION_F32_PRECISION (an fcl_f32_precision). */
int    bench_f32_precision(fcl_context *ctx);
/* A read-write buffer of `bytes`, filled from host when it is not NULL. */
cl_mem bench_upload(fcl_context *ctx, const void *host, size_t bytes, cl_int *err);
/* Blocking read of the first `bytes` of buf; 0 on success. */
int    bench_read(fcl_context *ctx, cl_mem buf, size_t bytes, void *dst);
/* How many of n elements of dtype t are NaN or infinite. */
size_t bench_count_nonfinite(const void *p, fcl_dtype t, size_t n);

/* An operation to time: call enqueues it on the context's queue; device_ms
 * gives the device time of the last call (first kernel's start to last
 * kernel's end), 0 on success. device_ms NULL means the library's
 * fcl_context_last_op_time. */
typedef fcl_status (*bench_call)(fcl_context *ctx, const void *arg);
typedef int (*bench_device_ms)(fcl_context *ctx, const void *arg, double *ms);

/* Runs call(arg) `warmup` times untimed, then `iters` times, each between
 * two clFinish. Returns the median device time in ms and stores the median
 * wall time (CLOCK_MONOTONIC) in *wall_ms; negative on error. */
double bench_time(fcl_context *ctx, bench_call call, bench_device_ms device_ms, const void *arg,
                  int warmup, int iters, double *wall_ms);

/* Each runs op for every combination of the argument lists that applies to
 * it and hands each row to emit. They return 1 if a setup step failed
 * (allocation), else 0; failed checks are only in the rows. */
typedef void (*bench_emit)(const bench_row *row);
int bench_attention(fcl_context *ctx, const bench_args *a, bench_op op, bench_emit emit);
int bench_rwkv6(fcl_context *ctx, const bench_args *a, bench_op op, bench_emit emit); /* rwkv6_run.c */
int bench_kvcache(fcl_context *ctx, const bench_args *a, bench_emit emit); /* decode_run.c */
int bench_rwkv7(fcl_context *ctx, const bench_args *a, bench_op op, bench_emit emit); /* rwkv7_bench.c */
/* With a->layers, decode and rwkv6-fwd run in loop mode (decode_loop.c,
 * rwkv6_loop.c) instead, one row a case. */

#endif
