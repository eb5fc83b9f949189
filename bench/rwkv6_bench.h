/* fa-bench, RWKV6: the case's shape, its inputs and the helpers shared by
 * rwkv6_bench.c (one call timed) and rwkv6_loop.c (loop mode). */
#ifndef FCL_BENCH_RWKV6_H
#define FCL_BENCH_RWKV6_H

#include "bench.h"

typedef struct {
  int64_t   b, t, h, k, v;
  fcl_dtype dt;
  fcl_rwkv6_algorithm alg;
  /* the check's tolerance: dt's, or bf16's for f32 where the context's
   * FCL_OPTION_F32_PRECISION is MEDIUM (one bf16 product) */
  fcl_dtype tol_dt;
} rshape;

enum { R, K, V, W, DO, N_IN };      /* host inputs (u apart) */
enum { O, DR, DK, DV, DW, N_OUT };  /* device outputs */

typedef struct {
  void  *x[N_IN], *u;               /* host copies in the dtype */
  cl_mem bx[N_IN], bu;              /* device inputs */
  cl_mem by[N_OUT], bdu;            /* device outputs */
  int    ref_batch;                 /* 0: no reference yet; else B or 1 */
  double *ref[N_OUT], *ref_du;      /* reference outputs over ref_batch */
} rinputs;

/* Token-head rows: B*T*H. */
size_t rwkv6_tokens(const rshape *s);
/* The inputs (and dout with bwd) on host and device, the outputs on the
 * device; 0, or -1 with a message. */
int    rwkv6_inputs_make(fcl_context *ctx, const rshape *s, int bwd, rinputs *in);
void   rwkv6_inputs_free(rinputs *in);
/* A dense [batch, T, heads, dim] view of m. */
fcl_tensor     rwkv6_view(cl_mem m, const rshape *s, int64_t dim);
fcl_rwkv6_desc rwkv6_desc(const rshape *s, int64_t batch);
/* Compares n values of raw (dtype raw_t) with ref, with the tolerance of
 * s->dt; updates *err (absolute, or relative to max|ref|) and reports the
 * worst on stderr. 1 if they agree. */
int rwkv6_compare(const rshape *s, const char *op, const char *name, const void *raw,
                  fcl_dtype raw_t, const double *ref, size_t n, int64_t dim, int relative,
                  double *err);

/* Runs the call once and compares its outputs with the reference: the
 * verdict, the errors in *res. */
const char *rwkv6_check(fcl_context *ctx, const rshape *s, int bwd, rinputs *in,
                        bench_row *res);
/* Times the call (a's warm-up and iterations) into r's ms and wall_ms. */
void rwkv6_time(fcl_context *ctx, const bench_args *a, const rshape *s, int bwd, rinputs *in,
                bench_row *r);

/* Loop mode on this case (rwkv6_loop.c): times it into *r, checks the last
 * layer (r->check); plans: through public plans (impl flashcl-plan). 1 if a
 * setup step failed, else 0. */
int rwkv6_loop_case(fcl_context *ctx, const bench_args *a, int plans, const rshape *s,
                    const rinputs *in, bench_row *r);

#endif
