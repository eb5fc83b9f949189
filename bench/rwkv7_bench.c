/* fa-bench, RWKV7: fcl_rwkv7_forward (op rwkv7-fwd) and fcl_rwkv7_backward
 * (op rwkv7-bwd) on dense [batch, T, heads, dim] tensors from fixed seeds,
 * made as fla's tests/ops/test_rwkv7.py makes them (ref_rwkv7_fill): r, k,
 * v uniform on [-1, 1], w in the models' range -0.6065 .. 0, a = -kk and
 * b = kk * U(0, 0.1) with kk L2-normalised; dout uniform; rounded to the
 * dtype. With an initial state h0 (f32, U(-1, 1)), as a model's step and
 * a chunk of a long sequence have: the forward also writes ht, the
 * backward dh0 (dht NULL); the default scale.
 *
 * GB/s counts the minimal HBM traffic, each tensor read or written once:
 * forward reads r, w, k, a, b, v, h0 and writes o, ht; backward reads r, w,
 * k, a, b, v, h0, dout and writes dr, dw, dk, da, db, dv, dh0.
 *
 * Check, against ref_rwkv7 (tests/ref/ref_rwkv7.c) fed the same rounded
 * inputs, with test_rwkv7's tolerances (|got - ref| <= tol * max|ref| per
 * tensor; tol 1e-4 f32 and the f32 states, 3e-3 f16, 2e-2 bf16):
 *   B*T*H*K*V <= 5e7: the whole outputs of the timed call (PASS);
 *   larger: batch 0's slices (sequences are independent), every value of
 *     the timed call's outputs finite (PASS-b0). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_rwkv7.h"
#include "test_util.h"
#include "rwkv7_bench.h"

static const char *const out_names[N_OUT7] = {"o", "dr", "dw", "dk", "dv", "da", "db"};

#ifndef FULL_CHECK_MAX
#define FULL_CHECK_MAX 5e7 /* B*T*H*K*V */
#endif

size_t rwkv7_rows(const r7shape *s, int64_t nb) { return (size_t)(nb * s->t * s->h); }
static int64_t in_dim(const r7shape *s, int i) { return i == IV || i == IDO ? s->v : s->k; }
static int64_t out_dim(const r7shape *s, int i) { return i == OO || i == ODV ? s->v : s->k; }
size_t rwkv7_state_n(const r7shape *s, int64_t nb) {
  return (size_t)(nb * s->h * s->k * s->v);
}

void rwkv7_inputs_free(r7inputs *in) {
  for (int i = 0; i < N_IN7; i++) {
    free(in->x[i]);
    if (in->bx[i]) clReleaseMemObject(in->bx[i]);
  }
  for (int i = 0; i < N_OUT7; i++) {
    free(in->ref[i]);
    if (in->by[i]) clReleaseMemObject(in->by[i]);
  }
  free(in->h0), free(in->ref_st);
  if (in->bh0) clReleaseMemObject(in->bh0);
  if (in->bst) clReleaseMemObject(in->bst);
  memset(in, 0, sizeof *in);
}

/* The inputs, a token at a time (ref_rwkv7_fill on one row of heads),
 * encoded in the dtype. */
int rwkv7_inputs_make(fcl_context *ctx, const r7shape *s, int bwd, r7inputs *in) {
  const size_t es = tu_dtype_size(s->dt), nrow = rwkv7_rows(s, s->b), ns = rwkv7_state_n(s, s->b);
  memset(in, 0, sizeof *in);
  int ok = 1;
  for (int i = 0; i < N_IN7; i++)
    if (i != IDO || bwd) ok &= (in->x[i] = malloc(nrow * (size_t)in_dim(s, i) * es + 1)) != NULL;
  ok &= (in->h0 = malloc(ns * sizeof(float) + 1)) != NULL;
  double *tmp = malloc((size_t)(s->h * (5 * s->k + 2 * s->v)) * sizeof(double));
  ok &= tmp != NULL;
  tu_rng g;
  tu_rng_seed(&g, 7);
  const ref_rwkv7_problem one = {1, 1, s->h, s->k, s->v, 0.0, 0, NULL};
  const size_t hk = (size_t)(s->h * s->k), hv = (size_t)(s->h * s->v);
  for (size_t tok = 0; ok && tok < (size_t)(s->b * s->t); tok++) {
    double *x[N_IN7] = {tmp, tmp + hk, tmp + 2 * hk, tmp + 5 * hk, tmp + 3 * hk, tmp + 4 * hk,
                        tmp + 5 * hk + hv};
    ref_rwkv7_fill(&g, &one, REF_RWKV7_W_MODEL, x[IR], x[IW], x[IK], x[IV], x[IA], x[IB]);
    if (bwd) tu_fill_uniform(&g, x[IDO], hv, -1, 1);
    for (int i = 0; i < N_IN7; i++) {
      if (!in->x[i]) continue;
      const size_t n = i == IV || i == IDO ? hv : hk;
      for (size_t e = 0; e < n; e++) tu_encode((char *)in->x[i] + (tok * n + e) * es, x[i][e], s->dt);
    }
  }
  for (size_t e = 0; ok && e < ns; e++) in->h0[e] = (float)tu_rng_range(&g, -1, 1);
  free(tmp);
  cl_int err = ok ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  for (int i = 0; i < N_IN7 && err == CL_SUCCESS; i++)
    if (in->x[i]) in->bx[i] = bench_upload(ctx, in->x[i], nrow * (size_t)in_dim(s, i) * es, &err);
  if (err == CL_SUCCESS) in->bh0 = bench_upload(ctx, in->h0, ns * sizeof(float), &err);
  for (int i = bwd ? ODR : OO; i <= (bwd ? ODB : OO) && err == CL_SUCCESS; i++)
    in->by[i] = bench_upload(ctx, NULL, nrow * (size_t)out_dim(s, i) * es, &err);
  if (err == CL_SUCCESS) in->bst = bench_upload(ctx, NULL, ns * sizeof(float), &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "fa-bench: could not allocate or upload the RWKV7 inputs (OpenCL error %d)\n",
            err);
    rwkv7_inputs_free(in);
    return -1;
  }
  return 0;
}

typedef struct {
  const r7shape  *s;
  const r7inputs *in;
  int             bwd;
} r7call;

fcl_tensor rwkv7_view(cl_mem m, const r7shape *s, int64_t dim) {
  fcl_tensor x = {m, 0, s->dt, {s->t * s->h * dim, s->h * dim, dim, 1}};
  return x;
}

fcl_rwkv7_desc rwkv7_desc(const r7shape *s) {
  fcl_rwkv7_desc d = FCL_RWKV7_DESC_INIT;
  d.batch = s->b, d.seqlen = s->t, d.heads = s->h, d.head_dim_k = s->k, d.head_dim_v = s->v;
  /* The inputs' w lie in the models' range (and stay there rounded to the
   * dtype), so the call makes the models' promise, as fla's chunked kernels
   * assume: the library may take its chunked form (--params
   * rwkv7_recurrent:... forces the recurrent one). */
  d.decay_lower_bound = -0.60653066f;
  return d;
}

static fcl_status call(fcl_context *ctx, const void *arg) {
  const r7call *c = arg;
  const r7shape *s = c->s;
  const r7inputs *in = c->in;
  const fcl_rwkv7_desc d = rwkv7_desc(s);
  fcl_tensor x[N_IN7], y[N_OUT7];
  for (int i = 0; i < N_IN7; i++) x[i] = rwkv7_view(in->bx[i], s, in_dim(s, i));
  for (int i = 0; i < N_OUT7; i++) y[i] = rwkv7_view(in->by[i], s, out_dim(s, i));
  fcl_status st =
      c->bwd ? fcl_rwkv7_backward(ctx, &d, &x[IR], &x[IW], &x[IK], &x[IV], &x[IA], &x[IB],
                                  in->bh0, &x[IDO], NULL, &y[ODR], &y[ODW], &y[ODK], &y[ODV],
                                  &y[ODA], &y[ODB], in->bst)
             : fcl_rwkv7_forward(ctx, &d, &x[IR], &x[IW], &x[IK], &x[IV], &x[IA], &x[IB],
                                 in->bh0, &y[OO], in->bst);
  if (st != FCL_OK)
    fprintf(stderr, "fa-bench: fcl_rwkv7_%s: %s\n", c->bwd ? "backward" : "forward",
            fcl_context_last_error(ctx));
  return st;
}

/* The reference over the first nb sequences; 0 or -1 (memory). */
static int make_reference(const r7shape *s, int bwd, int64_t nb, r7inputs *in) {
  const size_t nrow = rwkv7_rows(s, nb), ns = rwkv7_state_n(s, nb);
  double *x[N_IN7] = {NULL}, *h0 = malloc(ns * sizeof *h0);
  int rc = -1;
  for (int i = 0; i < N_IN7; i++) {
    if (!in->x[i]) continue;
    if (!(x[i] = malloc(nrow * (size_t)in_dim(s, i) * sizeof(double)))) goto done;
    bench_decode(in->x[i], s->dt, nrow * (size_t)in_dim(s, i), x[i]);
  }
  for (int i = bwd ? ODR : OO; i <= (bwd ? ODB : OO); i++)
    if (!(in->ref[i] = malloc(nrow * (size_t)out_dim(s, i) * sizeof(double)))) goto done;
  if (!h0 || !(in->ref_st = malloc(ns * sizeof(double)))) goto done;
  for (size_t e = 0; e < ns; e++) h0[e] = in->h0[e];
  const ref_rwkv7_problem p = {nb, s->t, s->h, s->k, s->v, 0.0, 0, NULL};
  const ref_rwkv7_in rin = {x[IR], x[IW], x[IK], x[IV], x[IA], x[IB], h0};
  if (bwd) {
    const ref_rwkv7_grads g = {in->ref[ODR], in->ref[ODW], in->ref[ODK], in->ref[ODV],
                               in->ref[ODA], in->ref[ODB], in->ref_st};
    if (ref_rwkv7_backward(&p, &rin, x[IDO], NULL, &g)) goto done;
  } else {
    ref_rwkv7_forward(&p, &rin, in->ref[OO], in->ref_st);
  }
  in->ref_batch = (int)nb;
  rc = 0;
done:
  if (rc) {
    for (int i = 0; i < N_OUT7; i++) free(in->ref[i]), in->ref[i] = NULL;
    free(in->ref_st), in->ref_st = NULL;
  }
  for (int i = 0; i < N_IN7; i++) free(x[i]);
  free(h0);
  return rc;
}

int rwkv7_compare(const r7shape *s, const char *op, const char *name, const void *raw,
                   fcl_dtype t, const double *ref, size_t n, tu_tol tol, double *err) {
  double *got = malloc(n * sizeof *got + 1);
  if (!got) return 0;
  bench_decode(raw, t, n, got);
  const tu_cmp c = tu_compare(got, ref, n, tol, 0);
  free(got);
  double e = c.n_bad && !isfinite(c.worst_err) ? INFINITY : c.max_err;
  if (isfinite(e) && c.ref_max > 0) e /= c.ref_max;
  if (e > *err) *err = e;
  if (!c.ok)
    fprintf(stderr,
            "fa-bench: %s T=%lld %s: %s[%zu]: got %.9g, ref %.9g, err %.3g, allowed %.3g "
            "(max|ref| %.3g); %zu bad\n",
            op, (long long)s->t, tu_dtype_name(s->dt), name, c.worst, c.worst_got, c.worst_ref,
            c.worst_err, c.worst_allowed, c.ref_max, c.n_bad);
  return c.ok;
}

/* Whether the n values of raw (dtype t) are all finite; a message if not. */
static int finite(const r7shape *s, const char *op, const char *name, const void *raw,
                  fcl_dtype t, size_t n) {
  const size_t bad = n ? bench_count_nonfinite(raw, t, n) : 0;
  if (bad)
    fprintf(stderr, "fa-bench: %s T=%lld %s: %zu of %zu %s values are not finite\n", op,
            (long long)s->t, tu_dtype_name(s->dt), bad, n, name);
  return !bad;
}

const char *rwkv7_check(fcl_context *ctx, const r7shape *s, int bwd, r7inputs *in,
                        bench_row *res) {
  const char *op = bwd ? "rwkv7-bwd" : "rwkv7-fwd";
  const size_t es = tu_dtype_size(s->dt), ns = rwkv7_state_n(s, s->b);
  const int full = (double)s->b * (double)s->t * (double)s->h * (double)s->k * (double)s->v <=
                   FULL_CHECK_MAX;
  const int64_t nb = full ? s->b : 1;
  const int first = bwd ? ODR : OO, last = bwd ? ODB : OO;
  cl_command_queue queue = fcl_context_queue(ctx);
  const r7call c = {s, in, bwd};
  for (int i = first; i <= last; i++)
    if (tu_buffer_repoison(queue, in->by[i], rwkv7_rows(s, s->b) * (size_t)out_dim(s, i) * es))
      return "ERROR";
  if (tu_buffer_repoison(queue, in->bst, ns * sizeof(float)) || call(ctx, &c) != FCL_OK ||
      clFinish(queue))
    return "ERROR";
  if (in->ref_batch != nb && make_reference(s, bwd, nb, in)) {
    fprintf(stderr, "fa-bench: out of host memory for the %s reference\n", op);
    return "ERROR";
  }
  const size_t big = rwkv7_rows(s, s->b) * (size_t)(s->k > s->v ? s->k : s->v) * es;
  unsigned char *raw = malloc((big > ns * 4 ? big : ns * 4) + 1);
  if (!raw) return "ERROR";
  double *err = bwd ? &res->err_grad : &res->err_o;
  *err = 0;
  int ok = 1;
  for (int i = first; i <= last && ok >= 0; i++) {
    const size_t n = rwkv7_rows(s, s->b) * (size_t)out_dim(s, i);
    if (bench_read(ctx, in->by[i], n * es, raw)) ok = -1;
    /* Batch 0 comes first: its slice is the first nb*T*H*dim values; the
     * rest must be finite. */
    else ok &= rwkv7_compare(s, op, out_names[i], raw, s->dt, in->ref[i],
                       rwkv7_rows(s, nb) * (size_t)out_dim(s, i), tu_tol_rwkv6(s->dt), err) &
               finite(s, op, out_names[i], raw, s->dt, full ? 0 : n);
  }
  if (ok >= 0 && bench_read(ctx, in->bst, ns * sizeof(float), raw)) ok = -1;
  if (ok >= 0)
    ok &= rwkv7_compare(s, op, bwd ? "dh0" : "ht", raw, FCL_F32, in->ref_st, rwkv7_state_n(s, nb),
                  tu_tol_rwkv6_state(), err) &
          finite(s, op, bwd ? "dh0" : "ht", raw, FCL_F32, full ? 0 : ns);
  free(raw);
  return ok < 0 ? "ERROR" : !ok ? "FAIL" : full ? "PASS" : "PASS-b0";
}

void rwkv7_time(fcl_context *ctx, const bench_args *a, const r7shape *s, int bwd,
                const r7inputs *in, bench_row *r) {
  const r7call c = {s, in, bwd};
  r->ms = bench_time(ctx, call, NULL, &c, a->warmup, a->iters, &r->wall_ms);
  if (r->ms < 0) r->ms = r->wall_ms = NAN, r->check = "ERROR";
}
