/* Double-precision reference of the attention forward pass (DESIGN.md,
 * "Attention semantics"). Written for clarity, not speed. */
#include "ref_attention.h"
#include "ref_philox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Sequence b's lengths and first token (varlen) or row (dense). */
void ref_attention_seq(const ref_attention_problem *p, int64_t b, int64_t *sq,
                       int64_t *sk, int64_t *q_tok0, int64_t *k_tok0) {
  if (p->cu_seqlens_q) {
    *q_tok0 = p->cu_seqlens_q[b];
    *k_tok0 = p->cu_seqlens_k[b];
    *sq = p->cu_seqlens_q[b + 1] - p->cu_seqlens_q[b];
    *sk = p->cu_seqlens_k[b + 1] - p->cu_seqlens_k[b];
  } else {
    *q_tok0 = b * p->seqlen_q;
    *k_tok0 = b * p->seqlen_k;
    *sq = p->seqlen_q;
    *sk = p->seqlen_k;
  }
}

/* The visible key range [*lo, *hi] of query i (empty when lo > hi). Causal
 * is window_right = 0 combined with any window_left. */
void ref_attention_visible_keys(const ref_attention_problem *p, int64_t sq,
                                int64_t sk, int64_t i, int64_t *lo, int64_t *hi) {
  const int64_t diag = i + sk - sq + p->diag_shift;
  int64_t wr = p->window_right;
  if (p->causal) wr = 0; /* any right window >= 0 intersected with causal is 0 */
  *lo = 0;
  *hi = sk - 1;
  if (p->window_left >= 0) *lo = max64(*lo, diag - p->window_left);
  if (wr >= 0) *hi = min64(*hi, diag + wr);
}

static double row_impl(const ref_attention_problem *p, const double *q,
                       const double *k, const double *v, int64_t b, int64_t h,
                       int64_t i, double *out, double *scores) {
  int64_t sq, sk, q0, k0;
  ref_attention_seq(p, b, &sq, &sk, &q0, &k0);
  const int64_t hq = p->heads_q, hkv = p->heads_kv, d = p->head_dim,
                dv = p->head_dim_v;
  const int64_t hk = h / (hq / hkv);
  for (int64_t c = 0; c < dv; ++c) out[c] = 0.0;

  int64_t lo, hi;
  ref_attention_visible_keys(p, sq, sk, i, &lo, &hi);
  if (lo > hi) return -INFINITY;

  const double scale = p->softmax_scale != 0.0 ? p->softmax_scale : 1.0 / sqrt((double)d);
  const double slope = p->alibi_slopes ? p->alibi_slopes[h] : 0.0;
  const double *qr = q + ((q0 + i) * hq + h) * d;
  double m = -INFINITY;
  for (int64_t j = lo; j <= hi; ++j) {
    const double *kr = k + ((k0 + j) * hkv + hk) * d;
    double s = 0.0;
    for (int64_t c = 0; c < d; ++c) s += qr[c] * kr[c];
    s *= scale;
    if (p->softcap > 0.0) s = p->softcap * tanh(s / p->softcap);
    if (p->alibi_slopes) s -= slope * (double)llabs(i + sk - sq + p->diag_shift - j);
    scores[j - lo] = s;
    if (s > m) m = s;
  }
  /* The denominator sums every visible key; dropout then zeroes the
   * dropped ones' weights and scales the kept ones by 1 / (1 - p). */
  const double keep_scale = 1.0 / (1.0 - p->dropout_p);
  double sum = 0.0;
  for (int64_t j = lo; j <= hi; ++j) {
    const double e = exp(scores[j - lo] - m);
    const double *vr = v + ((k0 + j) * hkv + hk) * dv;
    sum += e;
    if (!ref_attention_kept(p, b, h, i, j)) continue;
    for (int64_t c = 0; c < dv; ++c) out[c] += e * keep_scale * vr[c];
  }
  for (int64_t c = 0; c < dv; ++c) out[c] /= sum;
  return m + log(sum);
}

int ref_attention_kept(const ref_attention_problem *p, int64_t b, int64_t h, int64_t i,
                       int64_t j) {
  if (p->dropout_p == 0.0) return 1;
  return ref_dropout_keep(p->dropout_seed, p->dropout_offset, p->dropout_p,
                          ref_dropout_index(b, h, i, j, p->heads_q, p->seqlen_q, p->seqlen_k));
}

void ref_attention_probs(const ref_attention_problem *p, const double *q, const double *k,
                         const double *lse, double *probs) {
  const int64_t hq = p->heads_q, hkv = p->heads_kv, d = p->head_dim;
  const int64_t SQ = p->seqlen_q, SK = p->seqlen_k;
  const double scale = p->softmax_scale != 0.0 ? p->softmax_scale : 1.0 / sqrt((double)d);
  double *s = malloc(sizeof(double) * (size_t)max64(1, SK));
  if (!s) abort();
  memset(probs, 0, sizeof(double) * (size_t)(p->batch * hq * SQ * SK));
  const int64_t total_q = p->cu_seqlens_q ? p->cu_seqlens_q[p->batch] : 0;
  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t sq, sk, q0, k0;
    ref_attention_seq(p, b, &sq, &sk, &q0, &k0);
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t hk = h / (hq / hkv);
      const double slope = p->alibi_slopes ? p->alibi_slopes[h] : 0.0;
      for (int64_t i = 0; i < sq; ++i) {
        int64_t lo, hi;
        ref_attention_visible_keys(p, sq, sk, i, &lo, &hi);
        if (lo > hi) continue;
        const double *qr = q + ((q0 + i) * hq + h) * d;
        double m = -INFINITY, sum = 0.0;
        for (int64_t j = lo; j <= hi; ++j) {
          const double *kr = k + ((k0 + j) * hkv + hk) * d;
          double x = 0.0;
          for (int64_t c = 0; c < d; ++c) x += qr[c] * kr[c];
          x *= scale;
          if (p->softcap > 0.0) x = p->softcap * tanh(x / p->softcap);
          x -= slope * (double)llabs(i + sk - sq + p->diag_shift - j);
          s[j] = x;
          m = x > m ? x : m;
        }
        for (int64_t j = lo; j <= hi; ++j) sum += exp(s[j] - m);
        double l = m + log(sum);
        if (lse) l = p->cu_seqlens_q ? lse[h * total_q + q0 + i] : lse[(b * hq + h) * SQ + i];
        double *row = probs + ((b * hq + h) * SQ + i) * SK;
        for (int64_t j = lo; j <= hi; ++j) {
          const double pr = exp(s[j] - l);
          row[j] = ref_attention_kept(p, b, h, i, j) ? pr : -pr;
        }
      }
    }
  }
  free(s);
}

int64_t ref_attention_max_seqlen_k(const ref_attention_problem *p) {
  if (!p->cu_seqlens_k) return p->seqlen_k;
  int64_t m = 0;
  for (int64_t b = 0; b < p->batch; ++b)
    m = max64(m, p->cu_seqlens_k[b + 1] - p->cu_seqlens_k[b]);
  return m;
}

double ref_attention_row(const ref_attention_problem *p, const double *q,
                         const double *k, const double *v, int64_t b, int64_t h,
                         int64_t i, double *out) {
  double *scores = malloc(sizeof(double) * (size_t)max64(1, ref_attention_max_seqlen_k(p)));
  if (!scores) abort();
  const double lse = row_impl(p, q, k, v, b, h, i, out, scores);
  free(scores);
  return lse;
}

void ref_attention_forward(const ref_attention_problem *p, const double *q,
                           const double *k, const double *v, double *o,
                           double *lse) {
  double *scores = malloc(sizeof(double) * (size_t)max64(1, ref_attention_max_seqlen_k(p)));
  if (!scores) abort();
  const int64_t hq = p->heads_q, dv = p->head_dim_v;
  const int64_t total_q = p->cu_seqlens_q ? p->cu_seqlens_q[p->batch] : 0;
  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t sq, sk, q0, k0;
    ref_attention_seq(p, b, &sq, &sk, &q0, &k0);
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        const double l = row_impl(p, q, k, v, b, h, i, o + ((q0 + i) * hq + h) * dv, scores);
        if (!lse) continue;
        if (p->cu_seqlens_q) lse[h * total_q + q0 + i] = l;
        else lse[(b * hq + h) * p->seqlen_q + i] = l;
      }
  }
  free(scores);
}

double ref_attention_logit_bound(const ref_attention_problem *p, const double *q,
                                 const double *k) {
  const int64_t hq = p->heads_q, hkv = p->heads_kv, d = p->head_dim;
  const double scale =
      fabs(p->softmax_scale != 0.0 ? p->softmax_scale : 1.0 / sqrt((double)d));
  double bound = 0.0;
  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t sq, sk, q0, k0;
    ref_attention_seq(p, b, &sq, &sk, &q0, &k0);
    for (int64_t i = 0; i < sq; ++i) {
      int64_t lo, hi;
      ref_attention_visible_keys(p, sq, sk, i, &lo, &hi);
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t hk = h / (hq / hkv);
        const double *qr = q + ((q0 + i) * hq + h) * d;
        const double slope = p->alibi_slopes ? fabs(p->alibi_slopes[h]) : 0.0;
        for (int64_t j = lo; j <= hi; ++j) {
          const double *kr = k + ((k0 + j) * hkv + hk) * d;
          double s = 0.0;
          for (int64_t c = 0; c < d; ++c) s += fabs(qr[c] * kr[c]);
          s = s * scale + slope * (double)llabs(i + sk - sq + p->diag_shift - j);
          if (s > bound) bound = s;
        }
      }
    }
  }
  return bound;
}
