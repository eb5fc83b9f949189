/* Double-precision reference of the attention backward pass (DESIGN.md,
 * "Attention semantics"): the gradients of L = sum(dout * o). Written for
 * clarity, not speed; it recomputes each row's softmax from q, k, v.
 *
 * Per (sequence, query head h, query i) with visible keys j in [lo, hi]:
 *   x_j  = scale * <q_i, k_j>
 *   s_j  = softcap > 0 ? softcap * tanh(x_j / softcap) : x_j;  s_j -= alibi
 *   P_j  = exp(s_j - lse_i),   o_i = sum_j P_j v_j
 *   dP_j = <dout_i, v_j>,      delta_i = <dout_i, o_i>  (o_i: this P's, or given)
 *   dS_j = P_j (dP_j - delta_i)
 *   dX_j = dS_j * (softcap > 0 ? 1 - tanh^2(x_j / softcap) : 1)
 *   dq_i += scale * dX_j * k_j;  dk_j += scale * dX_j * q_i;  dv_j += P_j dout_i
 * with k_j, v_j, dk_j, dv_j those of kv head h / (heads_q / heads_kv).
 * Dropout (mask Z_j, s = 1 / (1 - p)): o_i = sum_j Z_j s P_j v_j, dP_j = Z_j s
 * <dout_i, v_j> and dv_j += Z_j s P_j dout_i; the rest as above. */
#include "ref_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t gmax64(int64_t a, int64_t b) { return a > b ? a : b; }

int ref_attention_key_seen(const ref_attention_problem *p, int64_t b, int64_t j) {
  int64_t sq, sk, q0, k0;
  ref_attention_seq(p, b, &sq, &sk, &q0, &k0);
  if (j < 0 || j >= sk) return 0;
  for (int64_t i = 0; i < sq; ++i) {
    int64_t lo, hi;
    ref_attention_visible_keys(p, sq, sk, i, &lo, &hi);
    if (lo <= j && j <= hi) return 1;
  }
  return 0;
}

void ref_attention_backward(const ref_attention_problem *p, const double *q,
                            const double *k, const double *v, const double *dout,
                            double *dq, double *dk, double *dv) {
  ref_attention_backward_given_o(p, q, k, v, dout, NULL, dq, dk, dv);
}

void ref_attention_backward_given_o(const ref_attention_problem *p, const double *q,
                                    const double *k, const double *v,
                                    const double *dout, const double *o_given,
                                    double *dq, double *dk, double *dv) {
  ref_attention_backward_terms(p, q, k, v, dout, o_given, dq, dk, dv, NULL, NULL);
}

void ref_attention_backward_terms(const ref_attention_problem *p, const double *q,
                                  const double *k, const double *v, const double *dout,
                                  const double *o_given, double *dq, double *dk, double *dv,
                                  double *mq, double *mk) {
  const int64_t hq = p->heads_q, hkv = p->heads_kv, d = p->head_dim,
                dvd = p->head_dim_v, group = hq / hkv;
  int64_t tq, tk; /* token rows of q and of k */
  if (p->cu_seqlens_q) {
    tq = p->cu_seqlens_q[p->batch];
    tk = p->cu_seqlens_k[p->batch];
  } else {
    tq = p->batch * p->seqlen_q;
    tk = p->batch * p->seqlen_k;
  }
  memset(dq, 0, sizeof(double) * (size_t)(tq * hq * d));
  memset(dk, 0, sizeof(double) * (size_t)(tk * hkv * d));
  memset(dv, 0, sizeof(double) * (size_t)(tk * hkv * dvd));
  if (mq) memset(mq, 0, sizeof(double) * (size_t)(tq * hq * d));
  if (mk) memset(mk, 0, sizeof(double) * (size_t)(tk * hkv * d));

  const size_t nk = (size_t)gmax64(1, ref_attention_max_seqlen_k(p));
  double *x = malloc(sizeof(double) * nk);  /* scale * q.k            */
  double *s = malloc(sizeof(double) * nk);  /* the logit after cap/bias */
  double *pr = malloc(sizeof(double) * nk); /* P                      */
  double *z = malloc(sizeof(double) * nk);  /* dropout: Z s (1 without) */
  double *o = malloc(sizeof(double) * (size_t)gmax64(1, dvd));
  if (!x || !s || !pr || !z || !o) abort();
  const double keep_scale = 1.0 / (1.0 - p->dropout_p);
  const double scale =
      p->softmax_scale != 0.0 ? p->softmax_scale : 1.0 / sqrt((double)d);

  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t sq, sk, q0, k0;
    ref_attention_seq(p, b, &sq, &sk, &q0, &k0);
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t hk = h / group;
      const double slope = p->alibi_slopes ? p->alibi_slopes[h] : 0.0;
      for (int64_t i = 0; i < sq; ++i) {
        int64_t lo, hi;
        ref_attention_visible_keys(p, sq, sk, i, &lo, &hi);
        if (lo > hi) continue; /* sees no key: o = 0, no gradient anywhere */
        const double *qr = q + ((q0 + i) * hq + h) * d;
        const double *dor = dout + ((q0 + i) * hq + h) * dvd;
        double *dqr = dq + ((q0 + i) * hq + h) * d;
        /* Forward: logits, max, P, o. */
        double m = -INFINITY;
        for (int64_t j = lo; j <= hi; ++j) {
          const double *kr = k + ((k0 + j) * hkv + hk) * d;
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += qr[c] * kr[c];
          x[j - lo] = scale * dot;
          double sj = x[j - lo];
          if (p->softcap > 0.0) sj = p->softcap * tanh(sj / p->softcap);
          sj -= slope * (double)llabs(i + sk - sq + p->diag_shift - j);
          s[j - lo] = sj;
          if (sj > m) m = sj;
        }
        double sum = 0.0;
        for (int64_t j = lo; j <= hi; ++j) {
          pr[j - lo] = exp(s[j - lo] - m);
          sum += pr[j - lo];
        }
        for (int64_t c = 0; c < dvd; ++c) o[c] = 0.0;
        for (int64_t j = lo; j <= hi; ++j) {
          pr[j - lo] /= sum;
          z[j - lo] = ref_attention_kept(p, b, h, i, j) ? keep_scale : 0.0;
          const double *vr = v + ((k0 + j) * hkv + hk) * dvd;
          for (int64_t c = 0; c < dvd; ++c) o[c] += pr[j - lo] * z[j - lo] * vr[c];
        }
        const double *od = o_given ? o_given + ((q0 + i) * hq + h) * dvd : o;
        double delta = 0.0;
        for (int64_t c = 0; c < dvd; ++c) delta += dor[c] * od[c];
        /* Backward through softmax, softcap and the scaled dot product. */
        for (int64_t j = lo; j <= hi; ++j) {
          const double *kr = k + ((k0 + j) * hkv + hk) * d;
          const double *vr = v + ((k0 + j) * hkv + hk) * dvd;
          double *dkr = dk + ((k0 + j) * hkv + hk) * d;
          double *dvr = dv + ((k0 + j) * hkv + hk) * dvd;
          const double pj = pr[j - lo];
          double dp = 0.0;
          for (int64_t c = 0; c < dvd; ++c) dp += dor[c] * vr[c];
          dp *= z[j - lo]; /* dropout: the kept, rescaled dP; a dropped one 0 */
          double dx = pj * (dp - delta), tcap = 1.0;
          if (p->softcap > 0.0) {
            const double t = tanh(x[j - lo] / p->softcap);
            tcap = 1.0 - t * t;
            dx *= tcap;
          }
          const double g = dx * scale; /* d L / d <q_i, k_j> */
          for (int64_t c = 0; c < d; ++c) {
            dqr[c] += g * kr[c];
            dkr[c] += g * qr[c];
          }
          if (mq && mk) {
            const double gm = pj * (fabs(dp) + fabs(delta)) * tcap * scale;
            double *mqr = mq + ((q0 + i) * hq + h) * d;
            double *mkr = mk + ((k0 + j) * hkv + hk) * d;
            for (int64_t c = 0; c < d; ++c) {
              mqr[c] += gm * fabs(kr[c]);
              mkr[c] += gm * fabs(qr[c]);
            }
          }
          for (int64_t c = 0; c < dvd; ++c) dvr[c] += pj * z[j - lo] * dor[c];
        }
      }
    }
  }
  free(x);
  free(s);
  free(pr);
  free(z);
  free(o);
}
