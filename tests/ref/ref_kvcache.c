/* Double-precision reference of attention against a KV cache and of the
 * merge of partial results (ref_kvcache.h): each sequence's keys are put
 * together from its cached and new tokens and handed to the attention
 * reference. Written for clarity, not speed. */
#include "ref_kvcache.h"

#include "ref_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *xalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) abort();
  return p;
}

int64_t ref_kvcache_total_new(const ref_kvcache_problem *p) {
  int64_t t = 0;
  for (int64_t b = 0; b < p->batch; ++b) t += p->new_lens[b];
  return t;
}

int64_t ref_kvcache_total_cached(const ref_kvcache_problem *p) {
  int64_t t = 0;
  for (int64_t b = 0; b < p->batch; ++b) t += p->cache_seqlens[b];
  return t;
}

void ref_kvcache_rotary_pair(const ref_kvcache_problem *p, int64_t e, int64_t *partner,
                             int64_t *angle, double *sign) {
  const int64_t half = p->rotary_dim / 2;
  if (p->rotary_interleaved) {
    *angle = e / 2;
    *partner = e ^ 1;
    *sign = (e & 1) ? 1.0 : -1.0; /* x_2i' = x_2i c - x_2i+1 s; x_2i+1' = x_2i+1 c + x_2i s */
  } else {
    *angle = e % half;
    *partner = e < half ? e + half : e - half;
    *sign = e < half ? -1.0 : 1.0;
  }
}

void ref_kvcache_rotate(const ref_kvcache_problem *p, double *x, int64_t heads, int64_t pos) {
  if (!p->rotary_cos || p->rotary_dim <= 0) return;
  const int64_t d = p->head_dim, rd = p->rotary_dim, half = rd / 2;
  const double *cs = p->rotary_cos + pos * half, *sn = p->rotary_sin + pos * half;
  double tmp[512];
  for (int64_t h = 0; h < heads; ++h) {
    double *row = x + h * d;
    for (int64_t e = 0; e < rd; ++e) {
      int64_t partner, j;
      double sign;
      ref_kvcache_rotary_pair(p, e, &partner, &j, &sign);
      tmp[e] = row[e] * cs[j] + sign * row[partner] * sn[j];
    }
    memcpy(row, tmp, sizeof(double) * (size_t)rd);
  }
}

void ref_kvcache_rotate_new(const ref_kvcache_problem *p, const double *x, int64_t heads,
                            double *out) {
  const int64_t d = p->head_dim;
  int64_t t = 0;
  for (int64_t b = 0; b < p->batch; ++b)
    for (int64_t i = 0; i < p->new_lens[b]; ++i, ++t) {
      memcpy(out + t * heads * d, x + t * heads * d, sizeof(double) * (size_t)(heads * d));
      ref_kvcache_rotate(p, out + t * heads * d, heads, p->cache_seqlens[b] + i);
    }
}

double ref_kvcache_forward(const ref_kvcache_problem *p, const double *q_rot,
                           const double *k_cached, const double *v_cached,
                           const double *k_new_rot, const double *v_new, double *o,
                           double *lse) {
  const int64_t hq = p->heads_q, hk = p->heads_kv, d = p->head_dim, dv = p->head_dim_v;
  const int64_t total_new = ref_kvcache_total_new(p);
  double bound = 0.0;
  int64_t q0 = 0, c0 = 0; /* first new token, first cached token of sequence b */
  for (int64_t b = 0; b < p->batch; ++b) {
    const int64_t c = p->cache_seqlens[b], n = p->new_lens[b];
    const int64_t sk = c + (p->append ? n : 0);
    double *k = xalloc(sizeof(double) * (size_t)(sk * hk * d + 1));
    double *v = xalloc(sizeof(double) * (size_t)(sk * hk * dv + 1));
    memcpy(k, k_cached + c0 * hk * d, sizeof(double) * (size_t)(c * hk * d));
    memcpy(v, v_cached + c0 * hk * dv, sizeof(double) * (size_t)(c * hk * dv));
    if (p->append && n > 0) {
      memcpy(k + c * hk * d, k_new_rot + q0 * hk * d, sizeof(double) * (size_t)(n * hk * d));
      memcpy(v + c * hk * dv, v_new + q0 * hk * dv, sizeof(double) * (size_t)(n * hk * dv));
    }
    ref_attention_problem a;
    memset(&a, 0, sizeof a);
    a.batch = 1; a.seqlen_q = n; a.seqlen_k = sk;
    a.heads_q = hq; a.heads_kv = hk; a.head_dim = d; a.head_dim_v = dv;
    a.softmax_scale = p->softmax_scale;
    a.causal = p->causal;
    a.window_left = p->window_left;
    a.window_right = p->window_right;
    a.softcap = p->softcap;
    a.alibi_slopes = p->alibi_slopes;
    double *l = xalloc(sizeof(double) * (size_t)(hq * n + 1));
    if (n > 0) {
      ref_attention_forward(&a, q_rot + q0 * hq * d, k, v, o + q0 * hq * dv, l);
      const double bb = ref_attention_logit_bound(&a, q_rot + q0 * hq * d, k);
      if (bb > bound) bound = bb;
    }
    if (lse)
      for (int64_t h = 0; h < hq; ++h)
        for (int64_t i = 0; i < n; ++i) {
          const size_t at = p->lse_varlen ? (size_t)(h * total_new + q0 + i)
                                          : (size_t)((b * hq + h) * p->seqlen_q + i);
          lse[at] = l[h * n + i];
        }
    free(k); free(v); free(l);
    q0 += n;
    c0 += c;
  }
  return bound;
}

void ref_attention_merge(int64_t n, int64_t batch, int64_t seqlen_q, int64_t heads_q,
                         int64_t width, const int32_t *cu_seqlens_q,
                         const double *const *parts, const double *const *lse_parts,
                         double *o, double *lse) {
  const int64_t tokens = cu_seqlens_q ? cu_seqlens_q[batch] : batch * seqlen_q;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads_q; ++h) {
      size_t at;
      if (cu_seqlens_q) {
        at = (size_t)(h * tokens + t);
      } else {
        const int64_t b = t / seqlen_q, i = t % seqlen_q;
        at = (size_t)((b * heads_q + h) * seqlen_q + i);
      }
      double m = -INFINITY;
      for (int64_t p = 0; p < n; ++p)
        if (lse_parts[p][at] > m) m = lse_parts[p][at];
      double *row = o + (t * heads_q + h) * width;
      for (int64_t e = 0; e < width; ++e) row[e] = 0.0;
      if (m == -INFINITY) {
        if (lse) lse[at] = -INFINITY;
        continue;
      }
      double sum = 0.0;
      for (int64_t p = 0; p < n; ++p) sum += exp(lse_parts[p][at] - m);
      const double total = m + log(sum);
      for (int64_t p = 0; p < n; ++p) {
        const double w = exp(lse_parts[p][at] - total);
        if (w == 0.0) continue; /* a part with lse -inf adds nothing, whatever its o */
        const double *src = parts[p] + (t * heads_q + h) * width;
        for (int64_t e = 0; e < width; ++e) row[e] += w * src[e];
      }
      if (lse) lse[at] = total;
    }
}
