/* fa-bench, RWKV7: the case's shape, its inputs and the helpers of
 * rwkv7_bench.c (one call timed, checked) that rwkv7_loop.c (loop mode)
 * and rwkv7_run.c (the op's cases) share. */
#ifndef FCL_BENCH_RWKV7_H
#define FCL_BENCH_RWKV7_H

#include "bench.h"
#include "test_util.h" /* tu_tol */

typedef struct {
  int64_t   b, t, h, k, v;
  fcl_dtype dt;
} r7shape;

enum { IR, IW, IK, IV, IA, IB, IDO, N_IN7 };              /* inputs, dtype   */
enum { OO, ODR, ODW, ODK, ODV, ODA, ODB, N_OUT7 };        /* outputs, dtype  */

typedef struct {
  void   *x[N_IN7];
  float  *h0;
  cl_mem  bx[N_IN7], bh0, by[N_OUT7], bst; /* bst: ht (forward) or dh0 (backward) */
  int     ref_batch;                       /* 0: none yet */
  double *ref[N_OUT7], *ref_st;
} r7inputs;

/* The inputs (and dout with bwd) on host and device, the outputs on the
 * device; 0, or -1 with a message. */
int  rwkv7_inputs_make(fcl_context *ctx, const r7shape *s, int bwd, r7inputs *in);
void rwkv7_inputs_free(r7inputs *in);
/* Runs the call once and compares its outputs with the reference: the
 * verdict, the errors in *res. */
const char *rwkv7_check(fcl_context *ctx, const r7shape *s, int bwd, r7inputs *in,
                        bench_row *res);
/* Times the call (a's warm-up and iterations) into r's ms and wall_ms. */
void rwkv7_time(fcl_context *ctx, const bench_args *a, const r7shape *s, int bwd,
                const r7inputs *in, bench_row *r);
/* Token-head rows of the first nb sequences: nb*T*H. */
size_t rwkv7_rows(const r7shape *s, int64_t nb);
/* Floats of the first nb sequences' states: nb*H*K*V. */
size_t rwkv7_state_n(const r7shape *s, int64_t nb);
/* A dense [batch, T, heads, dim] view of m. */
fcl_tensor rwkv7_view(cl_mem m, const r7shape *s, int64_t dim);
/* The case's descriptor (the models' decay bound, the default scale). */
fcl_rwkv7_desc rwkv7_desc(const r7shape *s);
/* n values of raw (dtype t) against ref with tolerance tol; the worst
 * relative error into *err, a message on a failure. 1 if they agree. */
int rwkv7_compare(const r7shape *s, const char *op, const char *name, const void *raw,
                  fcl_dtype t, const double *ref, size_t n, tu_tol tol, double *err);

/* Loop mode on this forward case (rwkv7_loop.c): times it into *r and
 * checks the last layer (r->check). 1 if a setup step failed, else 0. */
int rwkv7_loop_case(fcl_context *ctx, const bench_args *a, const r7shape *s,
                    const r7inputs *in, bench_row *r);

#endif
