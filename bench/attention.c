/* fa-bench, attention: fcl_attention_forward (op fwd) and
 * fcl_attention_backward (op bwd) on dense [batch, seq, heads, dim] tensors
 * of random values, uniform with mean 0 and variance 1, from fixed seeds,
 * rounded to the dtype.
 *
 * fwd checks 64 sampled rows of o and lse against ref_attention_row.
 * bwd runs one forward (o, lse), then the backward with a random dout, and
 * compares dq, dk, dv with exact double-precision gradients computed here
 * (P = softmax(scale q k^T), dP = dout v^T, dS = P * (dP - delta) with
 * delta_i = sum_j P_ij dP_ij, dq = scale dS k, dk = scale dS^T q, dv = P^T
 * dout; summed over each GQA group for dk, dv): over the whole problem when
 * B*H*Nq*Nk*D <= 2e8, else over the last (batch, kv head) slice -- every
 * query head of its group, all positions -- when group*Nq*Nk*max(D,Dv) <=
 * 2^32, else not at all (UNCHECKED). Every gradient is also checked to be
 * finite.
 *
 * With --varlen the batch is packed (cu_seqlens; every sequence its own
 * length, queries and keys alike): fwd checks sampled rows as above,
 * each against its own sequence; bwd checks the last kv head of the last
 * sequence (PASS-slice).
 *
 * With --baseline, each fwd case also runs the unfused attention of
 * baseline.c on the same buffers, checked the same way (impl "unfused",
 * gain = its time / flashcl's). Rows carry the FLOP, instruction-model and
 * byte counts of model.c; output.c turns them into rates. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "bench.h"
#include "model.h"
#include "ref_attention.h"
#include "test_util.h"

#define CHECK_ROWS 64
#ifndef BWD_FULL_CHECK_MAX
#define BWD_FULL_CHECK_MAX 2e8     /* B*H*Nq*Nk*D */
#endif
#ifndef BWD_SLICE_CHECK_MAX
#define BWD_SLICE_CHECK_MAX 0x1p32 /* group*Nq*Nk*max(D, Dv) */
#endif

typedef attn_shape shape;

typedef struct {       /* host copies and device buffers */
  void  *q, *k, *v, *g;   /* g: dout (bwd only) */
  cl_mem bq, bk, bv, bo, blse, bcu; /* bcu: cu_seqlens (varlen) */
  cl_mem bdo, bgq, bgk, bgv; /* bwd only: dout and the gradients */
} inputs;

/* Sequence b's first query (key) token and its length; all tokens. */
static int64_t q0_of(const shape *s, int64_t b) { return s->cu ? s->cu[b] : b * s->sq; }
static int64_t k0_of(const shape *s, int64_t b) { return s->cu ? s->cu[b] : b * s->sk; }
static int64_t sq_of(const shape *s, int64_t b) { return s->cu ? s->cu[b + 1] - s->cu[b] : s->sq; }
static int64_t sk_of(const shape *s, int64_t b) { return s->cu ? s->cu[b + 1] - s->cu[b] : s->sk; }
static int64_t tq(const shape *s) { return q0_of(s, s->b); }
static int64_t tk(const shape *s) { return k0_of(s, s->b); }

static size_t n_q(const shape *s) { return (size_t)(tq(s) * s->h * s->d); }
static size_t n_k(const shape *s) { return (size_t)(tk(s) * s->hkv * s->d); }
static size_t n_v(const shape *s) { return (size_t)(tk(s) * s->hkv * s->dv); }
static size_t n_o(const shape *s) { return (size_t)(tq(s) * s->h * s->dv); }
static size_t n_lse(const shape *s) { return (size_t)(s->h * tq(s)); }
/* Where lse of (sequence b, head h, row i) is: [b, h, sq], varlen [h, total]. */
static size_t lse_at(const shape *s, int64_t b, int64_t h, int64_t i) {
  return (size_t)(s->cu ? h * tq(s) + s->cu[b] + i : (b * s->h + h) * s->sq + i);
}

static void inputs_free(inputs *in) {
  free(in->q), free(in->k), free(in->v), free(in->g);
  cl_mem m[] = {in->bq,  in->bk,  in->bv,  in->bo,  in->blse,
                in->bdo, in->bgq, in->bgk, in->bgv, in->bcu};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    if (m[i]) clReleaseMemObject(m[i]);
  memset(in, 0, sizeof *in);
}

static int inputs_make(fcl_context *ctx, const shape *s, int bwd, inputs *in) {
  const size_t es = tu_dtype_size(s->t);
  const double a = sqrt(3.0); /* uniform on [-a, a): variance 1 */
  memset(in, 0, sizeof *in);
  in->q = bench_uniform(s->t, n_q(s), 1, -a, a);
  in->k = bench_uniform(s->t, n_k(s), 2, -a, a);
  in->v = bench_uniform(s->t, n_v(s), 3, -a, a);
  if (bwd) in->g = bench_uniform(s->t, n_o(s), 5, -a, a);
  const void *host[9] = {in->q, in->k, in->v, NULL, NULL, in->g, NULL, NULL, NULL};
  cl_mem *dev[9] = {&in->bq, &in->bk, &in->bv, &in->bo, &in->blse,
                    &in->bdo, &in->bgq, &in->bgk, &in->bgv};
  size_t bytes[9] = {n_q(s) * es, n_k(s) * es, n_v(s) * es, n_o(s) * es,
                     n_lse(s) * sizeof(float), n_o(s) * es, n_q(s) * es, n_k(s) * es,
                     n_v(s) * es};
  cl_int err = in->q && in->k && in->v && (!bwd || in->g) ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  for (int i = 0; i < (bwd ? 9 : 5) && err == CL_SUCCESS; i++)
    *dev[i] = bench_upload(ctx, host[i], bytes[i], &err);
  if (s->cu && err == CL_SUCCESS)
    in->bcu = bench_upload(ctx, s->cu, (size_t)(s->b + 1) * sizeof *s->cu, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "fa-bench: could not allocate or upload the inputs (OpenCL error %d)\n",
            err);
    inputs_free(in);
    return -1;
  }
  return 0;
}

typedef struct {
  const shape  *s;
  const inputs *in;
} call_args;

static fcl_attention_desc make_desc(const shape *s, const inputs *in) {
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = s->b, d.seqlen_q = s->sq, d.seqlen_k = s->sk, d.heads_q = s->h;
  d.heads_kv = s->hkv, d.head_dim = s->d, d.head_dim_v = s->dv, d.causal = s->causal;
  d.dropout_p = (float)s->dropout, d.dropout_seed = 0x5eedu; /* offset 0 */
  d.cu_seqlens_q = d.cu_seqlens_k = in->bcu;
  /* varlen: the host copy as well, as an engine gives it (no read back) */
  d.cu_seqlens_q_host = d.cu_seqlens_k_host = in->bcu ? s->cu : NULL;
  return d;
}

/* A tensor's view: [batch, seq, heads, dim], varlen [1, tokens, heads, dim]. */
static fcl_tensor view(const shape *s, cl_mem m, int keys, int64_t heads, int64_t dim) {
  return tu_dense_view(m, s->t, s->cu ? (keys ? tk(s) : tq(s)) : keys ? s->sk : s->sq, heads,
                       dim);
}

static fcl_status forward(fcl_context *ctx, const void *arg) {
  const call_args *c = arg;
  const shape *s = c->s;
  const inputs *in = c->in;
  fcl_attention_desc d = make_desc(s, in);
  fcl_tensor q = view(s, in->bq, 0, s->h, s->d), k = view(s, in->bk, 1, s->hkv, s->d);
  fcl_tensor v = view(s, in->bv, 1, s->hkv, s->dv), o = view(s, in->bo, 0, s->h, s->dv);
  fcl_status st = fcl_attention_forward(ctx, &d, &q, &k, &v, &o, in->blse);
  if (st != FCL_OK)
    fprintf(stderr, "fa-bench: fcl_attention_forward: %s\n", fcl_context_last_error(ctx));
  return st;
}

static fcl_status backward(fcl_context *ctx, const void *arg) {
  const call_args *c = arg;
  const shape *s = c->s;
  const inputs *in = c->in;
  fcl_attention_desc d = make_desc(s, in);
  fcl_tensor q = view(s, in->bq, 0, s->h, s->d), k = view(s, in->bk, 1, s->hkv, s->d);
  fcl_tensor v = view(s, in->bv, 1, s->hkv, s->dv), o = view(s, in->bo, 0, s->h, s->dv);
  fcl_tensor dout = view(s, in->bdo, 0, s->h, s->dv), dq = view(s, in->bgq, 0, s->h, s->d);
  fcl_tensor dk = view(s, in->bgk, 1, s->hkv, s->d), dv = view(s, in->bgv, 1, s->hkv, s->dv);
  fcl_status st =
      fcl_attention_backward(ctx, &d, &q, &k, &v, &o, in->blse, &dout, &dq, &dk, &dv);
  if (st != FCL_OK)
    fprintf(stderr, "fa-bench: fcl_attention_backward: %s\n", fcl_context_last_error(ctx));
  return st;
}

/* ---- forward check ------------------------------------------------------ */

/* Which rows to check: all of them when there are few, else the first, the
 * last, and query positions spread evenly over random (batch, head) pairs. */
static int pick_rows(const shape *s, bench_qrow *r) {
  int64_t total = s->h * tq(s);
  int n = total < CHECK_ROWS ? (int)total : CHECK_ROWS;
  tu_rng rng;
  tu_rng_seed(&rng, 4);
  for (int j = 0; j < n; j++) {
    if (n == total) { /* token t = j / h, head j % h */
      int64_t t = j / s->h, b = 0;
      while (t >= q0_of(s, b + 1)) b++;
      r[j] = (bench_qrow){b, j % s->h, t - q0_of(s, b)};
    } else {
      r[j].b = tu_rng_int(&rng, 0, s->b - 1);
      r[j].h = tu_rng_int(&rng, 0, s->h - 1);
      r[j].i = j * (sq_of(s, r[j].b) - 1) / (n - 1);
    }
  }
  if (n < total) {
    r[0] = (bench_qrow){0, 0, 0};
    r[n - 1] = (bench_qrow){s->b - 1, s->h - 1, sq_of(s, s->b - 1) - 1};
  }
  qsort(r, (size_t)n, sizeof *r, bench_qrow_cmp);
  return n;
}

/* Runs the forward pass (call(ctx, arg): flashcl's or the unfused
 * baseline's, writing in->bo and in->blse) once and compares sampled rows of
 * o and lse with ref_attention_row on a one-head slice of the same
 * (rounded) inputs. */
static const char *check_fwd(fcl_context *ctx, const shape *s, const inputs *in,
                             bench_call call, const void *arg, bench_row *res) {
  size_t es = tu_dtype_size(s->t), dv = (size_t)s->dv;
  cl_command_queue queue = fcl_context_queue(ctx);
  bench_qrow rows[CHECK_ROWS];
  int n = pick_rows(s, rows);
  const char *verdict = "ERROR";

  /* Outputs start as NaN, so a row the kernel never writes fails. */
  if (tu_buffer_repoison(queue, in->bo, n_o(s) * es) ||
      tu_buffer_repoison(queue, in->blse, n_lse(s) * sizeof(float)) ||
      call(ctx, arg) != FCL_OK)
    return verdict;

  ref_attention_problem p = {1, s->sq, s->sk, 1, 1, s->d, s->dv, 0.0, s->causal,
                             -1, -1, 0.0, NULL, NULL, NULL, 0, 0.0, 0, 0};
  double *q = calloc((size_t)(s->sq * s->d), sizeof *q);
  double *k = malloc((size_t)(s->sk * s->d) * sizeof *k);
  double *v = malloc((size_t)s->sk * dv * sizeof *v);
  double *ref = malloc((size_t)n * (dv + 1) * sizeof *ref), *ref_lse = ref + n * dv;
  double *got = malloc((size_t)n * (dv + 1) * sizeof *got), *got_lse = got + n * dv;
  unsigned char *raw = malloc(dv * es);
  double *kmax = calloc((size_t)s->d, sizeof *kmax); /* max_j |k_jc| of a kv slice */
  if (!q || !k || !v || !ref || !got || !raw || !kmax) goto done;

  int64_t group = s->h / s->hkv, kb = -1, kh = -1;
  /* The checked rows' logit bound, scale sum_c |q_c| max_j |k_jc|: the
   * f32 precision's TF32 logits widen the tolerance by it (tu_tol_with_logits
   * with 2^-11 in place of f32's 2^-24, as tests/test_f32_precision.c). */
  double bound = 0.0, vmax = 0.0;
  for (int j = 0; j < n; j++) {
    const bench_qrow *r = &rows[j];
    if (r->b != kb || r->h / group != kh) { /* rows are sorted: load each kv slice once */
      kb = r->b, kh = r->h / group;
      p.seqlen_q = sq_of(s, kb), p.seqlen_k = sk_of(s, kb);
      for (int64_t t = 0; t < p.seqlen_k; t++) {
        size_t at = (size_t)((k0_of(s, kb) + t) * s->hkv + kh);
        for (int64_t x = 0; x < s->d; x++) k[t * s->d + x] = bench_elem(in->k, s->t, at * s->d + x);
        for (size_t x = 0; x < dv; x++) v[t * s->dv + x] = bench_elem(in->v, s->t, at * dv + x);
      }
      for (int64_t x = 0; x < s->d; x++) kmax[x] = 0.0;
      for (int64_t t = 0; t < p.seqlen_k; t++) {
        for (int64_t x = 0; x < s->d; x++) kmax[x] = fmax(kmax[x], fabs(k[t * s->d + x]));
        for (size_t x = 0; x < dv; x++) vmax = fmax(vmax, fabs(v[t * s->dv + x]));
      }
    }
    size_t at = (size_t)((q0_of(s, r->b) + r->i) * s->h + r->h);
    for (int64_t x = 0; x < s->d; x++) q[r->i * s->d + x] = bench_elem(in->q, s->t, at * s->d + x);
    double row_bound = 0.0;
    for (int64_t x = 0; x < s->d; x++) row_bound += fabs(q[r->i * s->d + x]) * kmax[x];
    bound = fmax(bound, row_bound / sqrt((double)s->d));
    ref_lse[j] = ref_attention_row(&p, q, k, v, 0, 0, r->i, ref + j * dv);

    float lse;
    const size_t lse_byte = lse_at(s, r->b, r->h, r->i) * sizeof lse;
    if (clEnqueueReadBuffer(queue, in->bo, CL_TRUE, at * dv * es, dv * es, raw, 0, NULL,
                            NULL) ||
        clEnqueueReadBuffer(queue, in->blse, CL_TRUE, lse_byte, sizeof lse, &lse, 0, NULL,
                            NULL)) {
      fprintf(stderr, "fa-bench: reading the outputs failed\n");
      goto done;
    }
    for (size_t x = 0; x < dv; x++) got[j * dv + x] = bench_elem(raw, s->t, x);
    got_lse[j] = lse;
  }
  /* One TF32 product (FCL_F32_PRECISION_HIGH on) where the flashcl kernel
   * has it: f16's tolerance and TF32 logits. */
  const int tf32 = call == forward && s->t == FCL_F32 && bench_f32_precision(ctx) >= 1;
  const tu_tol to = tf32 ? tu_tol_with_logits(tu_tol_output(FCL_F16), bound * 0x1p13, s->d, vmax)
                         : tu_tol_output(s->t);
  const tu_tol tl = tf32 ? tu_tol_with_logits(tu_tol_lse(), bound * 0x1p13, s->d, 0.0) : tu_tol_lse();
  tu_cmp co = tu_compare(got, ref, (size_t)n * dv, to, 0);
  tu_cmp cl = tu_compare(got_lse, ref_lse, (size_t)n, tl, 1);
  /* max_err covers finite pairs only: a NaN or a wrong infinity shows as inf. */
  res->err_o = co.n_bad && !isfinite(co.worst_err) ? INFINITY : co.max_err;
  res->err_lse = cl.n_bad && !isfinite(cl.worst_err) ? INFINITY : cl.max_err;
  verdict = co.ok && cl.ok ? "PASS" : "FAIL";
  if (!co.ok || !cl.ok) { /* the worst element, on stderr: stdout may be CSV or JSON */
    const tu_cmp *c = co.ok ? &cl : &co;
    const bench_qrow *r = &rows[co.ok ? cl.worst : co.worst / dv];
    fprintf(stderr,
            "fa-bench: fwd (%s) Nq=%lld Nk=%lld %s causal=%d: %s of row b=%lld h=%lld "
            "i=%lld: got %.9g, ref %.9g, err %.3g, allowed %.3g; %zu bad\n",
            call == forward ? "flashcl" : "unfused", (long long)s->sq, (long long)s->sk, tu_dtype_name(s->t), s->causal,
            co.ok ? "lse" : "o", (long long)r->b,
            (long long)r->h, (long long)r->i, c->worst_got, c->worst_ref, c->worst_err,
            c->worst_allowed, c->n_bad);
  }
done:
  free(q), free(k), free(v), free(ref), free(got), free(raw), free(kmax);
  return verdict;
}

/* ---- backward check ----------------------------------------------------- */

/* Per-tensor tolerance of the gradients: |got - ref| <= atol * max|ref|.
 * The kernels accumulate in f32; in f16 and bf16 the inputs o (which feeds
 * delta) and the stored gradients are rounded to the dtype. */
static tu_tol tol_grad(fcl_dtype t) {
  switch (t) {
  case FCL_F32: return (tu_tol){1e-4, 0.0, 0.0};
  case FCL_F16: return (tu_tol){4e-3, 0.0, 0.0};
  case FCL_BF16: return (tu_tol){3e-2, 0.0, 0.0};
  default: break; /* the KV-cache formats: not an operation's dtype */
  }
  return (tu_tol){0, 0, 0};
}

/* Exact gradients of the slice (batch b, kv head hk): dq [group][sq][d] for
 * the query heads hk*group .. hk*group+group-1, dk [sk][d] and dv [sk][dv]
 * summed over them, from the tests' reference (tests/ref_attention_grad.c)
 * run on that slice alone. 0, or -1 when out of memory. */
static int ref_grad_slice(const shape *s, const inputs *in, int64_t b, int64_t hk,
                          double *dq, double *dk, double *dv) {
  const int64_t group = s->h / s->hkv, D = s->d, DV = s->dv, SQ = sq_of(s, b), SK = sk_of(s, b);
  const size_t es = tu_dtype_size(s->t);
  double *q = malloc((size_t)(SQ * group * D) * sizeof *q);
  double *g = malloc((size_t)(SQ * group * DV) * sizeof *g);
  double *dqt = malloc((size_t)(SQ * group * D) * sizeof *dqt);
  double *K = malloc((size_t)(SK * D) * sizeof *K), *V = malloc((size_t)(SK * DV) * sizeof *V);
  int rc = -1;
  if (!q || !g || !dqt || !K || !V) goto done;
  for (int64_t i = 0; i < SQ; i++)
    for (int64_t h = 0; h < group; h++) {
      const size_t at = (size_t)((q0_of(s, b) + i) * s->h + hk * group + h);
      bench_decode((const unsigned char *)in->q + at * D * es, s->t, (size_t)D,
                   q + (i * group + h) * D);
      bench_decode((const unsigned char *)in->g + at * DV * es, s->t, (size_t)DV,
                   g + (i * group + h) * DV);
    }
  for (int64_t j = 0; j < SK; j++) {
    const size_t at = (size_t)((k0_of(s, b) + j) * s->hkv + hk);
    bench_decode((const unsigned char *)in->k + at * D * es, s->t, (size_t)D, K + j * D);
    bench_decode((const unsigned char *)in->v + at * DV * es, s->t, (size_t)DV, V + j * DV);
  }
  const ref_attention_problem p = {.batch = 1, .seqlen_q = SQ, .seqlen_k = SK,
                                   .heads_q = group, .heads_kv = 1, .head_dim = D,
                                   .head_dim_v = DV, .causal = s->causal,
                                   .window_left = -1, .window_right = -1};
  ref_attention_backward(&p, q, K, V, g, dqt, dk, dv);
  for (int64_t h = 0; h < group; h++) /* [sq][group][d] -> [group][sq][d] */
    for (int64_t i = 0; i < SQ; i++)
      memcpy(dq + (h * SQ + i) * D, dqt + (i * group + h) * D, (size_t)D * sizeof *dq);
  rc = 0;
done:
  free(q), free(g), free(dqt), free(K), free(V);
  return rc;
}

/* Runs forward and backward once, then compares the gradients as the file
 * comment says. */
static const char *check_bwd(fcl_context *ctx, const shape *s, const inputs *in,
                             bench_row *res) {
  const size_t es = tu_dtype_size(s->t);
  const size_t nt[3] = {n_q(s), n_k(s), n_v(s)};
  const cl_mem bufs[3] = {in->bgq, in->bgk, in->bgv};
  static const char *const names[3] = {"dq", "dk", "dv"};
  cl_command_queue queue = fcl_context_queue(ctx);
  call_args ca = {s, in};
  const char *verdict = "ERROR";
  unsigned char *raw[3] = {NULL, NULL, NULL};
  double *got[3] = {NULL, NULL, NULL}, *ref[3] = {NULL, NULL, NULL};

  for (int i = 0; i < 3; i++)
    if (tu_buffer_repoison(queue, bufs[i], nt[i] * es)) return verdict;
  if (forward(ctx, &ca) != FCL_OK || backward(ctx, &ca) != FCL_OK || clFinish(queue))
    return verdict;
  size_t nonfinite = 0;
  for (int i = 0; i < 3; i++) {
    if (!(raw[i] = malloc(nt[i] * es + 1))) goto oom;
    if (bench_read(ctx, bufs[i], nt[i] * es, raw[i])) goto done;
    size_t bad = bench_count_nonfinite(raw[i], s->t, nt[i]);
    if (bad)
      fprintf(stderr, "fa-bench: bwd Nq=%lld Nk=%lld %s causal=%d: %zu of %zu %s values are "
              "not finite\n", (long long)s->sq, (long long)s->sk, tu_dtype_name(s->t),
              s->causal, bad, nt[i], names[i]);
    nonfinite += bad;
  }

  const int64_t group = s->h / s->hkv;
  /* the last slice's lengths: every slice's where the check is full; with
   * --varlen the last sequence's, not the longest */
  const int64_t SQ = sq_of(s, s->b - 1), SK = sk_of(s, s->b - 1);
  const double work = (double)s->b * (double)s->h * (double)s->sq * (double)s->sk * (double)s->d;
  const double slice_work = (double)group * (double)SQ * (double)SK *
                            (double)(s->d > s->dv ? s->d : s->dv);
  const int full = work <= BWD_FULL_CHECK_MAX && !s->cu; /* varlen: slices differ */
  if (!full && slice_work > BWD_SLICE_CHECK_MAX) {
    verdict = nonfinite ? "FAIL" : "UNCHECKED";
    goto done;
  }
  /* Slices (b, hk), in order; the arrays hold them one after another. */
  const int64_t n_slices = full ? s->b * s->hkv : 1;
  const size_t per[3] = {(size_t)(group * SQ * s->d), (size_t)(SK * s->d),
                         (size_t)(SK * s->dv)};
  for (int i = 0; i < 3; i++)
    if (!(got[i] = malloc(per[i] * (size_t)n_slices * sizeof(double))) ||
        !(ref[i] = malloc(per[i] * (size_t)n_slices * sizeof(double))))
      goto oom;
  for (int64_t sl = 0; sl < n_slices; sl++) {
    const int64_t b = full ? sl / s->hkv : s->b - 1, hk = full ? sl % s->hkv : s->hkv - 1;
    if (ref_grad_slice(s, in, b, hk, ref[0] + sl * per[0], ref[1] + sl * per[1],
                       ref[2] + sl * per[2]))
      goto oom;
    for (int64_t g = 0; g < group; g++)
      for (int64_t i = 0; i < SQ; i++)
        bench_decode(raw[0] + (size_t)((q0_of(s, b) + i) * s->h + hk * group + g) * s->d * es,
                     s->t, (size_t)s->d, got[0] + sl * per[0] + (g * SQ + i) * s->d);
    for (int64_t j = 0; j < SK; j++) {
      const size_t at = (size_t)((k0_of(s, b) + j) * s->hkv + hk);
      bench_decode(raw[1] + at * s->d * es, s->t, (size_t)s->d, got[1] + sl * per[1] + j * s->d);
      bench_decode(raw[2] + at * s->dv * es, s->t, (size_t)s->dv,
                   got[2] + sl * per[2] + j * s->dv);
    }
  }
  int ok = !nonfinite;
  res->err_grad = 0;
  for (int i = 0; i < 3; i++) {
    tu_cmp c = tu_compare(got[i], ref[i], per[i] * (size_t)n_slices, tol_grad(s->t), 0);
    double rel = c.n_bad && !isfinite(c.worst_err) ? INFINITY
               : c.ref_max > 0 ? c.max_err / c.ref_max : c.max_err;
    if (rel > res->err_grad) res->err_grad = rel;
    if (c.ok) continue;
    ok = 0;
    /* The worst element's coordinates in the tensor [b, seq, head, dim]. */
    const size_t sl = c.worst / per[i], rem = c.worst % per[i];
    const int64_t dim = i == 2 ? s->dv : s->d, x = (int64_t)(rem % (size_t)dim);
    const int64_t b = full ? (int64_t)sl / s->hkv : s->b - 1;
    const int64_t hk = full ? (int64_t)sl % s->hkv : s->hkv - 1;
    const int64_t pos = i == 0 ? (int64_t)(rem / (size_t)dim) % SQ : (int64_t)(rem / (size_t)dim);
    const int64_t head = i == 0 ? hk * group + (int64_t)(rem / (size_t)(dim * SQ)) : hk;
    fprintf(stderr,
            "fa-bench: bwd Nq=%lld Nk=%lld %s causal=%d: %s[b=%lld, pos=%lld, h=%lld, "
            "x=%lld]: got %.9g, ref %.9g, err %.3g, allowed %.3g (max|ref| %.3g); %zu bad\n",
            (long long)s->sq, (long long)s->sk, tu_dtype_name(s->t), s->causal, names[i],
            (long long)b, (long long)pos, (long long)head, (long long)x, c.worst_got,
            c.worst_ref, c.worst_err, c.worst_allowed, c.ref_max, c.n_bad);
  }
  verdict = !ok ? "FAIL" : full ? "PASS" : "PASS-slice";
  goto done;
oom:
  fprintf(stderr, "fa-bench: out of host memory for the bwd check\n");
done:
  for (int i = 0; i < 3; i++) free(raw[i]), free(got[i]), free(ref[i]);
  return verdict;
}

/* ---- driver ------------------------------------------------------------- */

static bench_row row_of(const shape *s, bench_op op, const char *impl) {
  bench_row r = bench_row_init(op);
  const int bwd = op == OP_BWD;
  r.impl = impl;
  r.b = s->b, r.h = s->h, r.hkv = s->hkv, r.sq = s->sq, r.sk = s->sk, r.d = s->d, r.dv = s->dv;
  r.t = s->t, r.causal = s->causal, r.dropout = s->dropout;
  r.flops = attn_flops(s, bwd);
  r.instrs = attn_instrs(s, bwd);
  r.bytes = attn_bytes(s, bwd, !strcmp(impl, "unfused"));
  return r;
}

/* The unfused baseline on the same inputs, after flashcl's row: checked like
 * the fused forward, timed, its gain the ratio of the two times. */
static void run_unfused(fcl_context *ctx, const bench_args *a, const shape *s, const inputs *in,
                        double flashcl_ms, bench_emit emit) {
  bench_row r = row_of(s, OP_FWD, "unfused");
  char why[256];
  if (unfused_skip_reason(ctx, s, why, sizeof why)) {
    fprintf(stderr, "fa-bench: %s\n", why);
    emit(&r); /* check SKIP, no times */
    return;
  }
  unfused_call uc = {s, in->bq, in->bk, in->bv, in->bo, in->blse};
  if (a->check) r.check = check_fwd(ctx, s, in, unfused_forward, &uc, &r);
  if (strcmp(r.check, "ERROR")) {
    r.ms = bench_time(ctx, unfused_forward, unfused_last_ms, &uc, a->warmup, a->iters, &r.wall_ms);
    if (r.ms < 0) r.ms = r.wall_ms = NAN, r.check = "ERROR";
    else r.gain = r.ms / flashcl_ms;
  }
  emit(&r);
}

int bench_attention(fcl_context *ctx, const bench_args *a, bench_op op, bench_emit emit) {
  const int bwd = op == OP_BWD;
  int setup_failed = 0;
  if (bwd && a->baseline)
    fprintf(stderr, "fa-bench: --baseline: the unfused baseline is forward only; bwd runs "
            "flashcl alone\n");
  int32_t cu[BENCH_MAX_LIST + 1] = {0}; /* --varlen: one packed batch */
  int64_t longest = 0;
  for (int i = 0; i < a->n_varlen; i++) {
    cu[i + 1] = cu[i] + (int32_t)a->varlen[i];
    if (a->varlen[i] > longest) longest = a->varlen[i];
  }
  for (int si = 0; si < (a->n_varlen ? 1 : a->n_seqlen); si++) {
    for (int ti = 0; ti < a->n_dtypes; ti++) {
      shape s = {a->n_varlen ? a->n_varlen : a->batch, a->heads, a->heads_kv,
                 a->n_varlen ? longest : a->seqlen_q[si], a->n_varlen ? longest : a->seqlen_k[si],
                 a->head_dim, a->head_dim_v, a->dtypes[ti], 0, a->dropout,
                 a->n_varlen ? cu : NULL};
      inputs in;
      if (inputs_make(ctx, &s, bwd, &in)) {
        setup_failed = 1;
        continue;
      }
      call_args ca = {&s, &in};
      for (int ci = 0; ci < a->n_causal; ci++) {
        s.causal = a->causal[ci];
        bench_row r = row_of(&s, op, "flashcl");
        /* the reference draws no mask: test_attention_dropout checks dropout */
        if (s.dropout > 0) r.check = "UNCHECKED";
        else if (a->check)
          r.check = bwd ? check_bwd(ctx, &s, &in, &r) : check_fwd(ctx, &s, &in, forward, &ca, &r);
        if (strcmp(r.check, "ERROR")) {
          /* bwd: the forward once for o and lse, then time the backward alone. */
          if (bwd && (forward(ctx, &ca) != FCL_OK || clFinish(fcl_context_queue(ctx))))
            r.ms = -1;
          else
            r.ms = bench_time(ctx, bwd ? backward : forward, NULL, &ca, a->warmup, a->iters,
                              &r.wall_ms);
          if (r.ms < 0) r.ms = r.wall_ms = NAN, r.check = "ERROR";
        }
        emit(&r);
        if (a->baseline && !bwd) run_unfused(ctx, a, &s, &in, r.ms, emit);
      }
      inputs_free(&in);
    }
  }
  if (a->baseline) unfused_release();
  return setup_failed;
}
