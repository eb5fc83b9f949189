/* fa-bench internals shared by its files: one row of results, random inputs,
 * device buffers and the timing loop. */
#ifndef FCL_BENCH_H
#define FCL_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "flashcl.h"

/* One line of output. Fields that do not apply to an op are -1 (causal,
 * algorithm), NAN (ms, tflops, gbps) or negative (the errors); they print as
 * "-" in the table, empty in CSV and null in JSON. */
typedef struct {
  bench_op    op;
  int64_t     b, h, hkv, sq, sk, d, dv; /* RWKV6: hkv = h, sq = sk = T, d = K, dv = V */
  fcl_dtype   t;
  int         causal;    /* 0, 1; -1 for RWKV6 */
  int         algorithm; /* an fcl_rwkv6_algorithm; -1 for attention */
  double      ms, tflops, gbps;
  double      err_o, err_lse; /* max |got - ref| of the output (and lse) */
  double      err_grad;       /* max over gradients of max|got - ref| / max|ref| */
  const char *check;          /* PASS, PASS-slice, PASS-b0, UNCHECKED, FAIL, SKIP, ERROR */
} bench_row;

/* A row with every result field "not measured" and check SKIP. */
bench_row bench_row_init(bench_op op);
/* Whether a check verdict makes fa-bench exit 1 (FAIL, ERROR). */
int       bench_failed(const char *check);

/* n values of dtype t, uniform on [lo, hi), rounded to t, from a fixed seed;
 * NULL when out of memory. */
void  *bench_uniform(fcl_dtype t, size_t n, uint64_t seed, double lo, double hi);
/* Element i of an array of dtype t. */
double bench_elem(const void *p, fcl_dtype t, size_t i);
/* Decodes n elements of dtype t into doubles. */
void   bench_decode(const void *p, fcl_dtype t, size_t n, double *dst);
/* A read-write buffer of `bytes`, filled from host when it is not NULL. */
cl_mem bench_upload(fcl_context *ctx, const void *host, size_t bytes, cl_int *err);
/* Blocking read of the first `bytes` of buf; 0 on success. */
int    bench_read(fcl_context *ctx, cl_mem buf, size_t bytes, void *dst);
/* How many of n elements of dtype t are NaN or infinite. */
size_t bench_count_nonfinite(const void *p, fcl_dtype t, size_t n);

/* Median wall time in ms of call(arg), each run between clFinish and read
 * from CLOCK_MONOTONIC, after `warmup` untimed runs; negative on error. */
double bench_time(fcl_context *ctx, fcl_status (*call)(fcl_context *, const void *),
                  const void *arg, int warmup, int iters);

/* Each runs op for every combination of the argument lists that applies to
 * it and hands each row to emit. They return 1 if a setup step failed
 * (allocation), else 0; failed checks are only in the rows. */
typedef void (*bench_emit)(const bench_row *row);
int bench_attention(fcl_context *ctx, const bench_args *a, bench_op op, bench_emit emit);
int bench_rwkv6(fcl_context *ctx, const bench_args *a, bench_op op, bench_emit emit);

#endif
