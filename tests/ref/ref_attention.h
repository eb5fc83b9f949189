/* Double-precision reference of flashcl's attention semantics (DESIGN.md).
 * Used by the tests and by fa-bench's correctness check. Inputs are dense,
 * host-side, already rounded to the dtype under test:
 *   not varlen: q [batch][seqlen_q][heads_q][head_dim],  k [batch][seqlen_k][heads_kv][head_dim],
 *               v [batch][seqlen_k][heads_kv][head_dim_v], o like q with head_dim_v
 *   varlen:     the same with [batch][seqlen] replaced by [total tokens] and
 *               sequence b spanning tokens cu_seqlens[b] .. cu_seqlens[b+1]-1.
 *   lse: [batch][heads_q][seqlen_q] (varlen: [heads_q][total_q]). */
#ifndef FCL_REF_ATTENTION_H
#define FCL_REF_ATTENTION_H
#include <stdint.h>

typedef struct {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, head_dim_v;
  double  softmax_scale; /* 0: 1/sqrt(head_dim) */
  int     causal;
  int64_t window_left, window_right; /* -1: unlimited */
  double  softcap;                   /* > 0 enables */
  const double  *alibi_slopes;       /* NULL or [heads_q] */
  const int32_t *cu_seqlens_q;       /* NULL or host [batch+1] */
  const int32_t *cu_seqlens_k;       /* NULL or host [batch+1] */
  int64_t        diag_shift;         /* query i sits at key i + sk - sq + diag_shift */
  /* Dropout (0: none): a visible P_ij is kept where ref_dropout_keep of
   * (seed, offset, p, n) says so, n from (b, h, i, j) within the sequence
   * and seqlen_q, seqlen_k above, and then scaled by 1 / (1 - p); lse is
   * the softmax's before dropout. Give p as the float the descriptor holds. */
  double         dropout_p;
  uint64_t       dropout_seed, dropout_offset;
} ref_attention_problem;

/* One output row: query i of sequence b, head h. out has head_dim_v values.
 * Returns the natural-log lse (-INFINITY when the row sees no key; out = 0). */
double ref_attention_row(const ref_attention_problem *p, const double *q,
                         const double *k, const double *v, int64_t b,
                         int64_t h, int64_t i, double *out);

/* A bound on the magnitude of the logits the kernel computes before the
 * softcap: the maximum over visible (query, key) pairs of
 * |scale| * sum_c |q_c k_c| + slope * |i + sk - sq + diag_shift - j|. Tests scale the f32
 * part of their tolerance with it. */
double ref_attention_logit_bound(const ref_attention_problem *p, const double *q,
                                 const double *k);

/* Sequence b's lengths and first token (varlen) or first row (dense). */
void ref_attention_seq(const ref_attention_problem *p, int64_t b, int64_t *sq,
                       int64_t *sk, int64_t *q_tok0, int64_t *k_tok0);
/* The visible key range [*lo, *hi] of query i of a sequence of sq queries
 * and sk keys (empty when lo > hi): windows, and causal as window_right 0. */
void ref_attention_visible_keys(const ref_attention_problem *p, int64_t sq,
                                int64_t sk, int64_t i, int64_t *lo, int64_t *hi);
/* The longest key sequence (varlen: over cu_seqlens_k). */
int64_t ref_attention_max_seqlen_k(const ref_attention_problem *p);

/* The whole forward pass; lse may be NULL. */
void ref_attention_forward(const ref_attention_problem *p, const double *q,
                           const double *k, const double *v, double *o,
                           double *lse);

/* Whether (b, h, i, j), i and j within sequence b, survives dropout (1
 * without dropout). */
int ref_attention_kept(const ref_attention_problem *p, int64_t b, int64_t h, int64_t i,
                       int64_t j);
/* The probabilities fcl_attention_probs returns: dense
 * [batch][heads_q][seqlen_q][seqlen_k], P = exp(s - lse) at visible
 * positions, -P where dropout drops them (not rescaled), 0 elsewhere and
 * past a sequence's lengths. lse: NULL (the reference's own) or laid out as
 * ref_attention_forward's (the one fcl_attention_probs is given). */
void ref_attention_probs(const ref_attention_problem *p, const double *q, const double *k,
                         const double *lse, double *probs);
#endif

/* ---- Gradients (ref_attention_grad.c) -------------------------------------
 * Appended block: the double-precision backward pass of the same semantics. */
#ifndef FCL_REF_ATTENTION_GRAD_H
#define FCL_REF_ATTENTION_GRAD_H
/* dq, dk, dv of L = sum(dout * o) where o = ref_attention_forward(q, k, v)
 * (with dropout, for its fixed mask Z and s = 1 / (1 - p): dv sums Z s P
 * dout, dP_ij = Z s <dout_i, v_j>, dS = P (dP - delta), delta from the
 * dropped o):
 * dout is laid out like o, dq like q, dk like k, dv like v (dense, as
 * above). Every element of dq, dk, dv is written: a query row that sees no
 * key gets 0, a key that no query sees gets 0. dk/dv of a kv head sum over
 * the query heads of its group. ALiBi is a constant bias (no gradient);
 * with softcap the chain rule includes 1 - tanh^2(x / softcap). */
void ref_attention_backward(const ref_attention_problem *p, const double *q,
                            const double *k, const double *v,
                            const double *dout, double *dq, double *dk,
                            double *dv);

/* The same with delta_i = <dout_i, o_given_i> computed from a given o (like
 * o; NULL: the reference's own), the way a FlashAttention backward uses the
 * forward's stored o. The difference from ref_attention_backward is exactly
 * the effect of o_given's deviation on the gradients (dv does not depend on
 * it). */
void ref_attention_backward_given_o(const ref_attention_problem *p, const double *q,
                                    const double *k, const double *v,
                                    const double *dout, const double *o_given,
                                    double *dq, double *dk, double *dv);
/* The same, and (mq, mk not NULL) the magnitudes of the terms behind dq and
 * dk: sum_j P_ij (|dP_ij| + |D_i|) scale |k_j| (|q_i| for dk), times the
 * softcap's derivative. dq and dk come from dP_ij - D_i, which cancel where
 * P is nearly one-hot (one visible key): there the gradient is a few f32
 * roundings of these terms, whatever its own size. */
void ref_attention_backward_terms(const ref_attention_problem *p, const double *q,
                                  const double *k, const double *v, const double *dout,
                                  const double *o_given, double *dq, double *dk, double *dv,
                                  double *mq, double *mk);

/* Whether key j of sequence b is visible to at least one query of that
 * sequence (for any head: the mask does not depend on the head). */
int ref_attention_key_seen(const ref_attention_problem *p, int64_t b, int64_t j);
#endif
