/* Device-free check of the attention backward reference (ref_attention_grad.c):
 *  - dq, dk, dv against central finite differences of L = sum(dout * o),
 *    o = ref_attention_forward(q, k, v), for every element of q, k and v, on
 *    small shapes covering each feature: causal with seqlen_q < seqlen_k and
 *    > (rows that see no key), left/right/both windows with and without
 *    causal, softcap (with an explicit scale), ALiBi, GQA and MQA, varlen
 *    with empty query and empty key sequences, head_dim != head_dim_v, and
 *    everything at once;
 *  - exact zeros: dq of a row that sees no key, dk/dv of a key no query sees;
 *  - GQA: dk/dv equal the sum over the group of the gradients of the same
 *    problem with every kv head repeated per query head (MHA);
 *  - varlen: equal to one dense call per sequence;
 *  - ref_attention_backward_given_o: equal with the reference's own o, and
 *    with another o only dq/dk move, linearly (through delta);
 *  - dropout: with the mask fixed (a function of the positions, not of q, k,
 *    v) the forward is smooth, and the same finite differences check the
 *    backward's Z s dP and Z s P dout (varlen cases skip the per-sequence
 *    split: the mask's index takes the sequence number b). */
#include "ref_attention.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0, g_cases = 0;

#define CHECK(cond, ...) TU_CHECK(g_failures, cond, __VA_ARGS__)

#define MAXSEQ 6

typedef struct {
  const char *name;
  int64_t     b, sq, sk, hq, hkv, d, dv;
  double      scale;
  int         causal;
  int64_t     wl, wr; /* both 0 means no window unless win is set */
  int         win;
  double      softcap;
  int         alibi;
  int         nseq; /* > 0: varlen */
  int32_t     lens_q[MAXSEQ], lens_k[MAXSEQ];
  double      amp; /* q, k in [-amp, amp]; 0 -> 1.5 */
  double      dropout_p; /* > 0: dropout, seed and offset from the case's seed */
} grad_case;

typedef struct {
  ref_attention_problem p;
  int32_t cu_q[MAXSEQ + 1], cu_k[MAXSEQ + 1];
  double  slopes[16];
  int64_t tq, tk; /* token rows */
  size_t  nq, nk, nv, no;
  double *q, *k, *v, *dout, *o;
} prob;

static double *alloc_d(size_t n) {
  double *x = calloc(n ? n : 1, sizeof(double));
  if (!x) abort();
  return x;
}

static void prob_init(prob *P, const grad_case *c, uint64_t seed) {
  memset(P, 0, sizeof *P);
  ref_attention_problem *p = &P->p;
  p->batch = c->b;
  p->seqlen_q = c->sq;
  p->seqlen_k = c->sk;
  if (c->nseq) {
    p->batch = c->nseq;
    p->seqlen_q = p->seqlen_k = 0;
    for (int i = 0; i < c->nseq; ++i) {
      P->cu_q[i + 1] = P->cu_q[i] + c->lens_q[i];
      P->cu_k[i + 1] = P->cu_k[i] + c->lens_k[i];
      if (c->lens_q[i] > p->seqlen_q) p->seqlen_q = c->lens_q[i];
      if (c->lens_k[i] > p->seqlen_k) p->seqlen_k = c->lens_k[i];
    }
    p->cu_seqlens_q = P->cu_q;
    p->cu_seqlens_k = P->cu_k;
    P->tq = P->cu_q[c->nseq];
    P->tk = P->cu_k[c->nseq];
  } else {
    P->tq = c->b * c->sq;
    P->tk = c->b * c->sk;
  }
  p->heads_q = c->hq;
  p->heads_kv = c->hkv;
  p->head_dim = c->d;
  p->head_dim_v = c->dv;
  p->softmax_scale = c->scale;
  p->causal = c->causal;
  p->window_left = c->win ? c->wl : -1;
  p->window_right = c->win ? c->wr : -1;
  p->softcap = c->softcap;
  for (int h = 0; h < 16; ++h) P->slopes[h] = pow(2.0, -2.0 * (h + 1) / (double)c->hq);
  p->alibi_slopes = c->alibi ? P->slopes : NULL;
  p->dropout_p = c->dropout_p;
  p->dropout_seed = seed * 0x9E3779B97F4A7C15u;
  p->dropout_offset = seed + 12345;
  P->nq = (size_t)(P->tq * c->hq * c->d);
  P->nk = (size_t)(P->tk * c->hkv * c->d);
  P->nv = (size_t)(P->tk * c->hkv * c->dv);
  P->no = (size_t)(P->tq * c->hq * c->dv);
  P->q = alloc_d(P->nq);
  P->k = alloc_d(P->nk);
  P->v = alloc_d(P->nv);
  P->dout = alloc_d(P->no);
  P->o = alloc_d(P->no);
  tu_rng r;
  tu_rng_seed(&r, seed);
  const double amp = c->amp > 0 ? c->amp : 1.5;
  tu_fill_uniform(&r, P->q, P->nq, -amp, amp);
  tu_fill_uniform(&r, P->k, P->nk, -amp, amp);
  tu_fill_uniform(&r, P->v, P->nv, -1.0, 1.0);
  tu_fill_uniform(&r, P->dout, P->no, -1.0, 1.0);
}

static void prob_free(prob *P) {
  free(P->q); free(P->k); free(P->v); free(P->dout); free(P->o);
}

static double loss(prob *P) {
  ref_attention_forward(&P->p, P->q, P->k, P->v, P->o, NULL);
  double l = 0.0;
  for (size_t i = 0; i < P->no; ++i) l += P->dout[i] * P->o[i];
  return l;
}

/* Central differences of the loss for every element of x (n values). */
static void finite_diff(prob *P, double *x, size_t n, double *g) {
  const double h = 1e-5;
  for (size_t i = 0; i < n; ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss(P);
    x[i] = x0 - h;
    const double lm = loss(P);
    x[i] = x0;
    g[i] = (lp - lm) / (2.0 * h);
  }
}

/* |ana - fd| <= 1e-6 * max(1, max|fd|) element-wise; returns the worst ratio. */
static double compare_grad(const char *name, const char *what, const double *ana,
                           const double *fd, size_t n) {
  double gmax = 0.0;
  for (size_t i = 0; i < n; ++i) gmax = fmax(gmax, fabs(fd[i]));
  const double tol = 1e-6 * fmax(1.0, gmax);
  double worst = 0.0;
  size_t wi = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = fabs(ana[i] - fd[i]);
    if (!(e <= worst)) { worst = e; wi = i; }
  }
  CHECK(worst <= tol, "%s: %s[%zu] analytic %.12g finite difference %.12g (err %.3g, tol %.3g)",
        name, what, wi, n ? ana[wi] : 0.0, n ? fd[wi] : 0.0, worst, tol);
  return tol > 0 ? worst / tol : 0.0;
}

/* Exact zeros of rows that see no key and of keys no query sees; returns
 * how many such rows there are (printed). */
static void check_zeros(const grad_case *c, prob *P, const double *dq, const double *dk,
                        const double *dv, int *n_empty_q, int *n_unseen_k) {
  const ref_attention_problem *p = &P->p;
  const int64_t hq = p->heads_q, hkv = p->heads_kv, D = p->head_dim, DV = p->head_dim_v;
  double *lse = alloc_d((size_t)(P->tq * hq));
  ref_attention_forward(p, P->q, P->k, P->v, P->o, lse);
  *n_empty_q = *n_unseen_k = 0;
  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t sq = p->seqlen_q, sk = p->seqlen_k, q0 = b * sq, k0 = b * sk;
    if (p->cu_seqlens_q) {
      q0 = P->cu_q[b]; k0 = P->cu_k[b];
      sq = P->cu_q[b + 1] - q0; sk = P->cu_k[b + 1] - k0;
    }
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        const double l = p->cu_seqlens_q ? lse[h * P->tq + q0 + i] : lse[(b * hq + h) * sq + i];
        if (!isinf(l)) continue;
        ++*n_empty_q;
        for (int64_t e = 0; e < D; ++e)
          CHECK(dq[((q0 + i) * hq + h) * D + e] == 0.0, "%s: dq of empty row %lld head %lld not 0",
                c->name, (long long)(q0 + i), (long long)h);
      }
    for (int64_t j = 0; j < sk; ++j) {
      if (ref_attention_key_seen(p, b, j)) continue;
      ++*n_unseen_k;
      for (int64_t h = 0; h < hkv; ++h) {
        for (int64_t e = 0; e < D; ++e)
          CHECK(dk[((k0 + j) * hkv + h) * D + e] == 0.0, "%s: dk of unseen key %lld not 0",
                c->name, (long long)(k0 + j));
        for (int64_t e = 0; e < DV; ++e)
          CHECK(dv[((k0 + j) * hkv + h) * DV + e] == 0.0, "%s: dv of unseen key %lld not 0",
                c->name, (long long)(k0 + j));
      }
    }
  }
  free(lse);
}

/* GQA: the gradients of the problem with kv heads repeated (MHA), summed
 * over each group, equal dk and dv. */
static void check_gqa_expansion(const grad_case *c, prob *P, const double *dk,
                                const double *dv) {
  const ref_attention_problem *p = &P->p;
  const int64_t hq = p->heads_q, hkv = p->heads_kv, g = hq / hkv, D = p->head_dim,
                DV = p->head_dim_v;
  if (g == 1) return;
  ref_attention_problem pe = *p;
  pe.heads_kv = hq;
  double *ke = alloc_d((size_t)(P->tk * hq * D)), *ve = alloc_d((size_t)(P->tk * hq * DV));
  for (int64_t t = 0; t < P->tk; ++t)
    for (int64_t h = 0; h < hq; ++h) {
      memcpy(ke + (t * hq + h) * D, P->k + (t * hkv + h / g) * D, sizeof(double) * (size_t)D);
      memcpy(ve + (t * hq + h) * DV, P->v + (t * hkv + h / g) * DV, sizeof(double) * (size_t)DV);
    }
  double *dqe = alloc_d(P->nq), *dke = alloc_d((size_t)(P->tk * hq * D)),
         *dve = alloc_d((size_t)(P->tk * hq * DV));
  ref_attention_backward(&pe, P->q, ke, ve, P->dout, dqe, dke, dve);
  double err = 0.0, mag = 0.0;
  for (int64_t t = 0; t < P->tk; ++t)
    for (int64_t hk = 0; hk < hkv; ++hk) {
      for (int64_t e = 0; e < D; ++e) {
        double s = 0.0;
        for (int64_t h = hk * g; h < (hk + 1) * g; ++h) s += dke[(t * hq + h) * D + e];
        err = fmax(err, fabs(s - dk[(t * hkv + hk) * D + e]));
        mag = fmax(mag, fabs(s));
      }
      for (int64_t e = 0; e < DV; ++e) {
        double s = 0.0;
        for (int64_t h = hk * g; h < (hk + 1) * g; ++h) s += dve[(t * hq + h) * DV + e];
        err = fmax(err, fabs(s - dv[(t * hkv + hk) * DV + e]));
        mag = fmax(mag, fabs(s));
      }
    }
  CHECK(err <= 1e-12 * fmax(1.0, mag), "%s: GQA dk/dv differ from the summed MHA expansion by %.3g",
        c->name, err);
  free(ke); free(ve); free(dqe); free(dke); free(dve);
}

/* Varlen: each sequence alone as a dense batch-1 problem gives the same. */
static void check_varlen_split(const grad_case *c, prob *P, const double *dq,
                               const double *dk, const double *dv) {
  const ref_attention_problem *p = &P->p;
  if (!p->cu_seqlens_q || p->dropout_p > 0.0) return;
  const int64_t hq = p->heads_q, hkv = p->heads_kv, D = p->head_dim, DV = p->head_dim_v;
  double err = 0.0;
  for (int64_t b = 0; b < p->batch; ++b) {
    const int64_t q0 = P->cu_q[b], k0 = P->cu_k[b];
    const int64_t sq = P->cu_q[b + 1] - q0, sk = P->cu_k[b + 1] - k0;
    if (sq == 0 || sk == 0) continue; /* not a valid dense problem; zeros checked above */
    ref_attention_problem pd = *p;
    pd.batch = 1; pd.seqlen_q = sq; pd.seqlen_k = sk;
    pd.cu_seqlens_q = pd.cu_seqlens_k = NULL;
    double *gq = alloc_d((size_t)(sq * hq * D)), *gk = alloc_d((size_t)(sk * hkv * D)),
           *gv = alloc_d((size_t)(sk * hkv * DV));
    ref_attention_backward(&pd, P->q + q0 * hq * D, P->k + k0 * hkv * D,
                           P->v + k0 * hkv * DV, P->dout + q0 * hq * DV, gq, gk, gv);
    for (int64_t e = 0; e < sq * hq * D; ++e) err = fmax(err, fabs(gq[e] - dq[q0 * hq * D + e]));
    for (int64_t e = 0; e < sk * hkv * D; ++e) err = fmax(err, fabs(gk[e] - dk[k0 * hkv * D + e]));
    for (int64_t e = 0; e < sk * hkv * DV; ++e)
      err = fmax(err, fabs(gv[e] - dv[k0 * hkv * DV + e]));
    free(gq); free(gk); free(gv);
  }
  CHECK(err == 0.0, "%s: varlen differs from per-sequence dense calls by %.3g", c->name, err);
}

static void run_case(const grad_case *c, uint64_t seed) {
  ++g_cases;
  const int before = g_failures;
  prob P;
  prob_init(&P, c, seed);
  double *dq = alloc_d(P.nq), *dk = alloc_d(P.nk), *dv = alloc_d(P.nv);
  /* Poison: the reference must write every element. */
  for (size_t i = 0; i < P.nq; ++i) dq[i] = NAN;
  for (size_t i = 0; i < P.nk; ++i) dk[i] = NAN;
  for (size_t i = 0; i < P.nv; ++i) dv[i] = NAN;
  ref_attention_backward(&P.p, P.q, P.k, P.v, P.dout, dq, dk, dv);
  double *fq = alloc_d(P.nq), *fk = alloc_d(P.nk), *fv = alloc_d(P.nv);
  finite_diff(&P, P.q, P.nq, fq);
  finite_diff(&P, P.k, P.nk, fk);
  finite_diff(&P, P.v, P.nv, fv);
  const double rq = compare_grad(c->name, "dq", dq, fq, P.nq);
  const double rk = compare_grad(c->name, "dk", dk, fk, P.nk);
  const double rv = compare_grad(c->name, "dv", dv, fv, P.nv);
  int n_empty = 0, n_unseen = 0;
  check_zeros(c, &P, dq, dk, dv, &n_empty, &n_unseen);
  check_gqa_expansion(c, &P, dk, dv);
  check_varlen_split(c, &P, dq, dk, dv);
  /* The case must exercise something: nonzero gradients (dq is 0 where
   * every row sees one key: the softmax of one logit is constant). */
  double qmax = 0.0, vmax = 0.0;
  for (size_t i = 0; i < P.nq; ++i) qmax = fmax(qmax, fabs(dq[i]));
  for (size_t i = 0; i < P.nv; ++i) vmax = fmax(vmax, fabs(dv[i]));
  CHECK(vmax > 1e-3, "%s: dv is (almost) zero everywhere: the case tests nothing", c->name);
  if (c->nseq > 0 || c->sk > 1)
    CHECK(qmax > 1e-3, "%s: dq is (almost) zero everywhere: the case tests nothing", c->name);
  printf("%s %-34s | fd err/tol dq %.1e dk %.1e dv %.1e | rows without keys %d, unseen keys %d\n",
         g_failures == before ? "PASS" : "FAIL", c->name, rq, rk, rv, n_empty, n_unseen);
  free(dq); free(dk); free(dv); free(fq); free(fk); free(fv);
  prob_free(&P);
}

#define C(...) {__VA_ARGS__}
static const grad_case cases[] = {
  C(.name = "plain", .b = 2, .sq = 5, .sk = 7, .hq = 2, .hkv = 2, .d = 4, .dv = 4),
  C(.name = "seqlen 1", .b = 1, .sq = 1, .sk = 1, .hq = 1, .hkv = 1, .d = 3, .dv = 3),
  C(.name = "causal sq<sk", .b = 2, .sq = 4, .sk = 9, .hq = 2, .hkv = 2, .d = 3, .dv = 3, .causal = 1),
  C(.name = "causal sq>sk (empty rows)", .b = 2, .sq = 9, .sk = 4, .hq = 2, .hkv = 2, .d = 3, .dv = 3, .causal = 1),
  C(.name = "causal square", .b = 1, .sq = 6, .sk = 6, .hq = 1, .hkv = 1, .d = 5, .dv = 5, .causal = 1),
  C(.name = "window left", .b = 1, .sq = 8, .sk = 8, .hq = 2, .hkv = 2, .d = 3, .dv = 3, .win = 1, .wl = 2, .wr = -1),
  C(.name = "window right", .b = 1, .sq = 8, .sk = 8, .hq = 2, .hkv = 2, .d = 3, .dv = 3, .win = 1, .wl = -1, .wr = 1),
  C(.name = "window both sq<sk", .b = 1, .sq = 6, .sk = 10, .hq = 1, .hkv = 1, .d = 3, .dv = 4, .win = 1, .wl = 2, .wr = 1),
  C(.name = "window both causal sq>sk", .b = 1, .sq = 10, .sk = 6, .hq = 1, .hkv = 1, .d = 3, .dv = 3, .causal = 1, .win = 1, .wl = 1, .wr = 3),
  C(.name = "window sq>sk (empty rows)", .b = 1, .sq = 9, .sk = 4, .hq = 2, .hkv = 2, .d = 3, .dv = 3, .win = 1, .wl = 1, .wr = 1),
  C(.name = "softcap", .b = 1, .sq = 6, .sk = 7, .hq = 2, .hkv = 2, .d = 4, .dv = 4, .softcap = 1.5, .amp = 2.0),
  C(.name = "softcap scale causal", .b = 1, .sq = 7, .sk = 7, .hq = 2, .hkv = 1, .d = 4, .dv = 3, .softcap = 0.8, .scale = 0.7, .causal = 1, .amp = 2.0),
  C(.name = "alibi", .b = 1, .sq = 6, .sk = 6, .hq = 3, .hkv = 3, .d = 3, .dv = 3, .alibi = 1),
  C(.name = "alibi causal sq<sk", .b = 2, .sq = 4, .sk = 7, .hq = 2, .hkv = 1, .d = 3, .dv = 3, .alibi = 1, .causal = 1),
  C(.name = "alibi sq>sk", .b = 1, .sq = 7, .sk = 3, .hq = 2, .hkv = 2, .d = 3, .dv = 3, .alibi = 1),
  C(.name = "GQA 4/2", .b = 2, .sq = 5, .sk = 6, .hq = 4, .hkv = 2, .d = 3, .dv = 3),
  C(.name = "MQA 3/1 causal", .b = 1, .sq = 6, .sk = 5, .hq = 3, .hkv = 1, .d = 3, .dv = 4, .causal = 1),
  C(.name = "varlen empty q and k", .nseq = 5, .lens_q = {3, 0, 5, 2, 1}, .lens_k = {4, 3, 5, 0, 2}, .hq = 2, .hkv = 1, .d = 3, .dv = 3),
  C(.name = "varlen causal", .nseq = 3, .lens_q = {5, 1, 3}, .lens_k = {3, 4, 6}, .hq = 2, .hkv = 2, .d = 3, .dv = 2, .causal = 1),
  C(.name = "d 2 dv 6", .b = 1, .sq = 5, .sk = 6, .hq = 2, .hkv = 2, .d = 2, .dv = 6),
  C(.name = "d 7 dv 1", .b = 1, .sq = 5, .sk = 6, .hq = 2, .hkv = 1, .d = 7, .dv = 1, .causal = 1),
  C(.name = "head dim 1", .b = 2, .sq = 4, .sk = 5, .hq = 1, .hkv = 1, .d = 1, .dv = 1, .amp = 2.5),
  C(.name = "large logits", .b = 1, .sq = 5, .sk = 6, .hq = 1, .hkv = 1, .d = 4, .dv = 4, .amp = 3.0, .scale = 1.0),
  C(.name = "dropout 0.5 GQA causal", .b = 2, .sq = 5, .sk = 7, .hq = 4, .hkv = 2, .d = 3, .dv = 4, .causal = 1, .dropout_p = 0.5),
  C(.name = "dropout 0.2 varlen softcap", .nseq = 3, .lens_q = {4, 0, 6}, .lens_k = {6, 3, 5}, .hq = 2, .hkv = 1, .d = 3, .dv = 3, .softcap = 1.5, .dropout_p = 0.2),
  C(.name = "everything varlen", .nseq = 4, .lens_q = {4, 0, 6, 3}, .lens_k = {6, 2, 4, 0}, .hq = 4, .hkv = 2, .d = 3, .dv = 5, .causal = 1, .win = 1, .wl = 2, .wr = -1, .softcap = 2.0, .alibi = 1, .scale = 0.6),
  C(.name = "everything dense", .b = 2, .sq = 5, .sk = 8, .hq = 3, .hkv = 1, .d = 4, .dv = 2, .win = 1, .wl = 3, .wr = 1, .softcap = 1.0, .alibi = 1),
  C(.name = "everything dense dropout 0.3", .b = 2, .sq = 5, .sk = 8, .hq = 3, .hkv = 1, .d = 4, .dv = 2, .win = 1, .wl = 3, .wr = 1, .softcap = 1.0, .alibi = 1, .dropout_p = 0.3),
};

/* ref_attention_backward_given_o: with the reference's own o it agrees
 * (to rounding); with a perturbed o, dv is unchanged and dq, dk move by
 * exactly the linear effect of delta_i = <dout_i, o_i>:
 *   ddq_i = -scale * d(delta_i) * sum_j P_ij f'_ij k_j,
 * checked here through finite differences in the size of the perturbation. */
static void check_given_o(const grad_case *c0) {
  const int before = g_failures;
  grad_case c = *c0;
  prob P;
  prob_init(&P, &c, 4711);
  double *dq = alloc_d(P.nq), *dk = alloc_d(P.nk), *dv = alloc_d(P.nv);
  double *gq = alloc_d(P.nq), *gk = alloc_d(P.nk), *gv = alloc_d(P.nv);
  double *hq = alloc_d(P.nq), *hk = alloc_d(P.nk), *hv = alloc_d(P.nv);
  double *o = alloc_d(P.no), *o2 = alloc_d(P.no);
  ref_attention_backward(&P.p, P.q, P.k, P.v, P.dout, dq, dk, dv);
  ref_attention_forward(&P.p, P.q, P.k, P.v, o, NULL);
  ref_attention_backward_given_o(&P.p, P.q, P.k, P.v, P.dout, o, gq, gk, gv);
  double e = 0.0;
  for (size_t i = 0; i < P.nq; ++i) e = fmax(e, fabs(gq[i] - dq[i]));
  for (size_t i = 0; i < P.nk; ++i) e = fmax(e, fabs(gk[i] - dk[i]));
  for (size_t i = 0; i < P.nv; ++i) e = fmax(e, fabs(gv[i] - dv[i]));
  CHECK(e <= 1e-12, "%s: given its own o, the gradients differ by %.3g", c.name, e);
  /* Perturb o by t * w and by 2t * w: the change must be linear in t. */
  tu_rng r;
  tu_rng_seed(&r, 99);
  double *w = alloc_d(P.no);
  tu_fill_uniform(&r, w, P.no, -1.0, 1.0);
  for (size_t i = 0; i < P.no; ++i) o2[i] = o[i] + 1e-3 * w[i];
  ref_attention_backward_given_o(&P.p, P.q, P.k, P.v, P.dout, o2, gq, gk, gv);
  for (size_t i = 0; i < P.no; ++i) o2[i] = o[i] + 2e-3 * w[i];
  ref_attention_backward_given_o(&P.p, P.q, P.k, P.v, P.dout, o2, hq, hk, hv);
  CHECK(!memcmp(gv, dv, 8 * P.nv) && !memcmp(hv, dv, 8 * P.nv),
        "%s: dv depends on the given o", c.name);
  double moved = 0.0, nonlin = 0.0;
  for (size_t i = 0; i < P.nq; ++i) {
    moved = fmax(moved, fabs(gq[i] - dq[i]));
    nonlin = fmax(nonlin, fabs((hq[i] - dq[i]) - 2.0 * (gq[i] - dq[i])));
  }
  for (size_t i = 0; i < P.nk; ++i) {
    moved = fmax(moved, fabs(gk[i] - dk[i]));
    nonlin = fmax(nonlin, fabs((hk[i] - dk[i]) - 2.0 * (gk[i] - dk[i])));
  }
  CHECK(moved > 1e-6, "%s: dq/dk do not depend on the given o", c.name);
  CHECK(nonlin <= 1e-9 * moved,
        "%s: the effect of o on dq/dk is not linear (%.3g of %.3g)", c.name, nonlin, moved);
  printf("%s %-34s | given own o: diff %.1e; o + 1e-3 w moves dq/dk by %.2e, non-linear part %.1e\n",
         g_failures == before ? "PASS" : "FAIL", "given o", e, moved, nonlin);
  free(dq); free(dk); free(dv); free(gq); free(gk); free(gv); free(hq); free(hk); free(hv);
  free(o); free(o2); free(w);
  prob_free(&P);
}

/* softmax_scale 0 means 1/sqrt(head_dim): bit-identical gradients. */
static void check_default_scale(void) {
  grad_case c = cases[0];
  prob P, P2;
  prob_init(&P, &c, 99);
  c.scale = 1.0 / sqrt((double)c.d);
  prob_init(&P2, &c, 99);
  double *a = alloc_d(P.nq), *b = alloc_d(P.nk), *cc = alloc_d(P.nv);
  double *a2 = alloc_d(P.nq), *b2 = alloc_d(P.nk), *c2 = alloc_d(P.nv);
  ref_attention_backward(&P.p, P.q, P.k, P.v, P.dout, a, b, cc);
  ref_attention_backward(&P2.p, P2.q, P2.k, P2.v, P2.dout, a2, b2, c2);
  CHECK(!memcmp(a, a2, 8 * P.nq) && !memcmp(b, b2, 8 * P.nk) && !memcmp(cc, c2, 8 * P.nv),
        "scale 0 differs from an explicit 1/sqrt(head_dim)");
  free(a); free(b); free(cc); free(a2); free(b2); free(c2);
  prob_free(&P); prob_free(&P2);
}

int main(void) {
  const double t0 = tu_now();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) run_case(&cases[i], 1000 + i);
  check_default_scale();
  const size_t nc = sizeof cases / sizeof cases[0];
  check_given_o(&cases[nc - 3]); /* everything varlen */
  check_given_o(&cases[nc - 2]); /* everything dense */
  check_given_o(&cases[nc - 1]); /* everything dense, dropout */
  printf("test_reference_grad: %d cases, %d failures, %.1f s\n", g_cases, g_failures,
         tu_now() - t0);
  return g_failures ? 1 : 0;
}
