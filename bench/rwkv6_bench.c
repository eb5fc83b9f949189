/* fa-bench, RWKV6: fcl_rwkv6_forward (op rwkv6-fwd) and fcl_rwkv6_backward
 * (op rwkv6-bwd) on dense [batch, T, heads, dim] tensors from fixed seeds,
 * rounded to the dtype: r, k, v, u and dout uniform on [-1, 1), w =
 * -exp(N(-3, 1)) as in trained RWKV6 models (decays exp(w) near 0.95). No
 * initial or final state (h0, ht, dht, dh0 are NULL); the default scale.
 *
 * GB/s counts the minimal HBM traffic, each tensor read or written once:
 * forward reads r, k, v, w, u and writes o; backward reads r, k, v, w, u,
 * dout and writes dr, dk, dv, dw, du.
 *
 * Check, against ref_rwkv6 (tests/ref_rwkv6.c) fed the same rounded inputs,
 * with the tolerances of tests/test_rwkv6.c (|got - ref| <= tol * max|ref|
 * per tensor; tol 1e-4 f32, 3e-3 f16, 2e-2 bf16):
 *   B*T*H*K*V <= 5e7: the whole outputs of the timed call (PASS);
 *   larger: the reference runs on batch 0 only (sequences are independent).
 *     The timed call's outputs must all be finite, and their batch-0 slices
 *     (o; dr, dk, dv, dw) are compared. du sums over the batch, so it is
 *     compared from a separate fcl_rwkv6_backward call with batch = 1 on the
 *     same buffers (batch 0 comes first in them) (PASS-b0).
 * The reference is computed once per (shape, dtype) and reused for every
 * algorithm.
 *
 * Loop mode (--layers, rwkv6-fwd): rwkv6_loop.c, with an initial and a final
 * state. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ref_rwkv6.h"
#include "rwkv6_bench.h"
#include "test_util.h"

#ifndef FULL_CHECK_MAX
#define FULL_CHECK_MAX 5e7 /* B*T*H*K*V */
#endif

size_t rwkv6_tokens(const rshape *s) { return (size_t)(s->b * s->t * s->h); }
/* Feature count of input or output i (K or V). */
static int64_t in_dim(const rshape *s, int i) { return i == V || i == DO ? s->v : s->k; }
static int64_t out_dim(const rshape *s, int i) { return i == O || i == DV ? s->v : s->k; }

void rwkv6_inputs_free(rinputs *in) {
  for (int i = 0; i < N_IN; i++) {
    free(in->x[i]);
    if (in->bx[i]) clReleaseMemObject(in->bx[i]);
  }
  for (int i = 0; i < N_OUT; i++) {
    free(in->ref[i]);
    if (in->by[i]) clReleaseMemObject(in->by[i]);
  }
  free(in->u), free(in->ref_du);
  if (in->bu) clReleaseMemObject(in->bu);
  if (in->bdu) clReleaseMemObject(in->bdu);
  memset(in, 0, sizeof *in);
}

/* w = -exp(N(-3, 1)), rounded to the dtype. */
static void *decay_data(fcl_dtype t, size_t n, uint64_t seed) {
  const size_t es = tu_dtype_size(t);
  unsigned char *p = malloc(n * es + 1);
  tu_rng rng;
  tu_rng_seed(&rng, seed);
  for (size_t i = 0; p && i < n; i++) tu_encode(p + i * es, -exp(-3.0 + tu_rng_normal(&rng)), t);
  return p;
}

int rwkv6_inputs_make(fcl_context *ctx, const rshape *s, int bwd, rinputs *in) {
  const size_t es = tu_dtype_size(s->dt), nu = (size_t)(s->h * s->k);
  memset(in, 0, sizeof *in);
  int ok = 1;
  for (int i = 0; i < N_IN; i++) {
    if (i == DO && !bwd) continue;
    const size_t n = rwkv6_tokens(s) * (size_t)in_dim(s, i);
    in->x[i] = i == W ? decay_data(s->dt, n, 14) : bench_uniform(s->dt, n, 11 + (uint64_t)i, -1, 1);
    ok &= in->x[i] != NULL;
  }
  in->u = bench_uniform(s->dt, nu, 16, -1, 1);
  cl_int err = ok && in->u ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  for (int i = 0; i < N_IN && err == CL_SUCCESS; i++)
    if (in->x[i]) in->bx[i] = bench_upload(ctx, in->x[i], rwkv6_tokens(s) * (size_t)in_dim(s, i) * es, &err);
  if (err == CL_SUCCESS) in->bu = bench_upload(ctx, in->u, nu * es, &err);
  for (int i = bwd ? DR : O; i <= (bwd ? DW : O) && err == CL_SUCCESS; i++)
    in->by[i] = bench_upload(ctx, NULL, rwkv6_tokens(s) * (size_t)out_dim(s, i) * es, &err);
  if (bwd && err == CL_SUCCESS) in->bdu = bench_upload(ctx, NULL, nu * es, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "fa-bench: could not allocate or upload the RWKV6 inputs (OpenCL error %d)\n",
            err);
    rwkv6_inputs_free(in);
    return -1;
  }
  return 0;
}

typedef struct {
  const rshape  *s;
  const rinputs *in;
  int64_t        batch; /* the desc's batch: s->b, or 1 for the batch-0 check */
} rcall;

fcl_tensor rwkv6_view(cl_mem m, const rshape *s, int64_t dim) {
  fcl_tensor x = {m, 0, s->dt, {s->t * s->h * dim, s->h * dim, dim, 1}};
  return x;
}

fcl_rwkv6_desc rwkv6_desc(const rshape *s, int64_t batch) {
  fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
  d.batch = batch, d.seqlen = s->t, d.heads = s->h;
  d.head_dim_k = s->k, d.head_dim_v = s->v, d.algorithm = s->alg;
  return d;
}

static fcl_status rwkv_forward(fcl_context *ctx, const void *arg) {
  const rcall *c = arg;
  const rshape *s = c->s;
  const rinputs *in = c->in;
  fcl_rwkv6_desc d = rwkv6_desc(c->s, c->batch);
  fcl_tensor r = rwkv6_view(in->bx[R], s, s->k), k = rwkv6_view(in->bx[K], s, s->k),
             v = rwkv6_view(in->bx[V], s, s->v), w = rwkv6_view(in->bx[W], s, s->k),
             o = rwkv6_view(in->by[O], s, s->v);
  fcl_status st = fcl_rwkv6_forward(ctx, &d, &r, &k, &v, &w, in->bu, NULL, &o, NULL);
  if (st != FCL_OK)
    fprintf(stderr, "fa-bench: fcl_rwkv6_forward: %s\n", fcl_context_last_error(ctx));
  return st;
}

static fcl_status rwkv_backward(fcl_context *ctx, const void *arg) {
  const rcall *c = arg;
  const rshape *s = c->s;
  const rinputs *in = c->in;
  fcl_rwkv6_desc d = rwkv6_desc(c->s, c->batch);
  fcl_tensor r = rwkv6_view(in->bx[R], s, s->k), k = rwkv6_view(in->bx[K], s, s->k),
             v = rwkv6_view(in->bx[V], s, s->v), w = rwkv6_view(in->bx[W], s, s->k),
             dout = rwkv6_view(in->bx[DO], s, s->v), dr = rwkv6_view(in->by[DR], s, s->k),
             dk = rwkv6_view(in->by[DK], s, s->k), dv = rwkv6_view(in->by[DV], s, s->v),
             dw = rwkv6_view(in->by[DW], s, s->k);
  fcl_status st = fcl_rwkv6_backward(ctx, &d, &r, &k, &v, &w, in->bu, NULL, &dout, NULL, &dr,
                                     &dk, &dv, &dw, in->bdu, NULL);
  if (st != FCL_OK)
    fprintf(stderr, "fa-bench: fcl_rwkv6_backward: %s\n", fcl_context_last_error(ctx));
  return st;
}

/* Computes the reference over the first nb sequences; 0 or -1 (memory). */
static int make_reference(const rshape *s, int bwd, int64_t nb, rinputs *in) {
  const size_t tok = (size_t)(nb * s->t * s->h), nu = (size_t)(s->h * s->k);
  double *x[N_IN] = {NULL}, *u = malloc(nu * sizeof *u);
  int rc = -1;
  for (int i = 0; i < N_IN; i++) {
    if (i == DO && !bwd) continue;
    if (!(x[i] = malloc(tok * (size_t)in_dim(s, i) * sizeof(double)))) goto done;
    bench_decode(in->x[i], s->dt, tok * (size_t)in_dim(s, i), x[i]);
  }
  for (int i = bwd ? DR : O; i <= (bwd ? DW : O); i++)
    if (!(in->ref[i] = malloc(tok * (size_t)out_dim(s, i) * sizeof(double)))) goto done;
  if (!u || (bwd && !(in->ref_du = malloc(nu * sizeof(double))))) goto done;
  bench_decode(in->u, s->dt, nu, u);
  ref_rwkv6_problem p = {nb, s->t, s->h, s->k, s->v, 0.0, 0, NULL};
  if (bwd) {
    if (ref_rwkv6_backward(&p, x[R], x[K], x[V], x[W], u, NULL, x[DO], NULL, in->ref[DR],
                           in->ref[DK], in->ref[DV], in->ref[DW], in->ref_du, NULL))
      goto done;
  } else {
    ref_rwkv6_forward(&p, x[R], x[K], x[V], x[W], u, NULL, in->ref[O], NULL);
  }
  in->ref_batch = (int)nb;
  rc = 0;
done:
  if (rc) {
    for (int i = 0; i < N_OUT; i++) free(in->ref[i]), in->ref[i] = NULL;
    free(in->ref_du), in->ref_du = NULL;
  }
  for (int i = 0; i < N_IN; i++) free(x[i]);
  free(u);
  return rc;
}

static tu_tol tol_rwkv(fcl_dtype t) {
  switch (t) {
  case FCL_F32: return (tu_tol){1e-4, 0.0, 0.0};
  case FCL_F16: return (tu_tol){3e-3, 0.0, 0.0};
  case FCL_BF16: return (tu_tol){2e-2, 0.0, 0.0};
  default: break; /* the KV-cache formats: not an operation's dtype */
  }
  return (tu_tol){0, 0, 0};
}

static const char *const out_names[N_OUT] = {"o", "dr", "dk", "dv", "dw"};

int rwkv6_compare(const rshape *s, const char *op, const char *name, const void *raw,
                  fcl_dtype raw_t, const double *ref, size_t n, int64_t dim, int relative,
                  double *err) {
  double *got = malloc(n * sizeof *got + 1);
  if (!got) {
    fprintf(stderr, "fa-bench: out of host memory for the %s check\n", op);
    return 0;
  }
  bench_decode(raw, raw_t, n, got);
  tu_cmp c = tu_compare(got, ref, n, tol_rwkv(s->tol_dt), 0);
  free(got);
  double e = c.n_bad && !isfinite(c.worst_err) ? INFINITY : c.max_err;
  if (relative && isfinite(e) && c.ref_max > 0) e /= c.ref_max;
  if (e > *err) *err = e;
  if (!c.ok && !strncmp(name, "du", 2)) {
    fprintf(stderr,
            "fa-bench: %s T=%lld %s %s: %s[h=%lld, x=%lld]: got %.9g, ref %.9g, err %.3g, "
            "allowed %.3g (max|ref| %.3g); %zu bad\n",
            op, (long long)s->t, tu_dtype_name(s->dt), bench_algorithm_name(s->alg), name,
            (long long)(c.worst / (size_t)dim), (long long)(c.worst % (size_t)dim), c.worst_got,
            c.worst_ref, c.worst_err, c.worst_allowed, c.ref_max, c.n_bad);
  } else if (!c.ok) {
    const size_t row = c.worst / (size_t)dim; /* token-head row: [b, t, h] */
    fprintf(stderr,
            "fa-bench: %s T=%lld %s %s: %s[b=%lld, t=%lld, h=%lld, x=%lld]: got %.9g, ref "
            "%.9g, err %.3g, allowed %.3g (max|ref| %.3g); %zu bad\n",
            op, (long long)s->t, tu_dtype_name(s->dt), bench_algorithm_name(s->alg), name,
            (long long)(row / (size_t)(s->t * s->h)), (long long)(row / (size_t)s->h % (size_t)s->t),
            (long long)(row % (size_t)s->h), (long long)(c.worst % (size_t)dim), c.worst_got,
            c.worst_ref, c.worst_err, c.worst_allowed, c.ref_max, c.n_bad);
  }
  return c.ok;
}

const char *rwkv6_check(fcl_context *ctx, const rshape *s, int bwd, rinputs *in,
                        bench_row *res) {
  const char *op = bwd ? "rwkv6-bwd" : "rwkv6-fwd";
  const size_t es = tu_dtype_size(s->dt), nu = (size_t)(s->h * s->k);
  const int full = (double)s->b * (double)s->t * (double)s->h * (double)s->k * (double)s->v <=
                   FULL_CHECK_MAX;
  const int64_t nb = full ? s->b : 1;
  const int first = bwd ? DR : O, last = bwd ? DW : O;
  cl_command_queue queue = fcl_context_queue(ctx);
  rcall c = {s, in, s->b};
  unsigned char *raw = NULL;
  const char *verdict = "ERROR";
  int ok = 1;

  for (int i = first; i <= last; i++)
    if (tu_buffer_repoison(queue, in->by[i], rwkv6_tokens(s) * (size_t)out_dim(s, i) * es)) return verdict;
  if (bwd && tu_buffer_repoison(queue, in->bdu, nu * es)) return verdict;
  if ((bwd ? rwkv_backward : rwkv_forward)(ctx, &c) != FCL_OK || clFinish(queue)) return verdict;
  if (in->ref_batch != nb && make_reference(s, bwd, nb, in)) {
    fprintf(stderr, "fa-bench: out of host memory for the %s reference\n", op);
    return verdict;
  }
  if (!(raw = malloc(rwkv6_tokens(s) * (size_t)(s->k > s->v ? s->k : s->v) * es + nu * es + 1)))
    goto done;
  if (bwd) res->err_grad = 0;
  else res->err_o = 0;
  for (int i = first; i <= last; i++) {
    const size_t n = rwkv6_tokens(s) * (size_t)out_dim(s, i);
    if (bench_read(ctx, in->by[i], n * es, raw)) goto done;
    size_t bad = full ? 0 : bench_count_nonfinite(raw, s->dt, n);
    if (bad) {
      fprintf(stderr, "fa-bench: %s T=%lld %s %s: %zu of %zu %s values are not finite\n", op,
              (long long)s->t, tu_dtype_name(s->dt), bench_algorithm_name(s->alg), bad, n,
              out_names[i]);
      ok = 0;
    }
    /* Batch 0 comes first: its slice is the first nb*T*H*dim values. */
    ok &= rwkv6_compare(s, op, out_names[i], raw, s->dt, in->ref[i],
                        (size_t)(nb * s->t * s->h * out_dim(s, i)), out_dim(s, i), bwd,
                        bwd ? &res->err_grad : &res->err_o);
  }
  if (bwd) {
    if (!full) { /* du of batch 0 alone: a separate call on the same buffers */
      c.batch = 1;
      if (tu_buffer_repoison(queue, in->bdu, nu * es) || rwkv_backward(ctx, &c) != FCL_OK ||
          clFinish(queue))
        goto done;
    }
    if (bench_read(ctx, in->bdu, nu * es, raw)) goto done;
    ok &= rwkv6_compare(s, op, full ? "du" : "du (batch-1 call)", raw, s->dt, in->ref_du, nu,
                        s->k, 1, &res->err_grad);
  }
  verdict = !ok ? "FAIL" : full ? "PASS" : "PASS-b0";
done:
  free(raw);
  return verdict;
}

void rwkv6_time(fcl_context *ctx, const bench_args *a, const rshape *s, int bwd, rinputs *in,
                bench_row *r) {
  rcall c = {s, in, s->b};
  r->ms = bench_time(ctx, bwd ? rwkv_backward : rwkv_forward, NULL, &c, a->warmup, a->iters,
                     &r->wall_ms);
  if (r->ms < 0) r->ms = r->wall_ms = NAN, r->check = "ERROR";
}
