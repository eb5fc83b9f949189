/* Double-precision reference of fcl_attention_kvcache (DESIGN.md, "Attention
 * against a KV cache") and of fcl_attention_merge, built on the attention
 * reference (ref_attention.h). Host arrays are dense doubles, already
 * rounded to the dtype under test:
 *   q, o:          [total_new][heads_q][head_dim | head_dim_v], sequence b's
 *                  n_b new tokens one after another (a dense [batch][seqlen_q]
 *                  array is the same when every n_b = seqlen_q);
 *   k_new, v_new:  [total_new][heads_kv][head_dim | head_dim_v], likewise;
 *   k_cached, v_cached: [sum_b c_b][heads_kv][...]: the c_b cached tokens
 *                  (positions 0 .. c_b - 1) of sequence b, read from the cache
 *                  through block_table / cache_batch_idx, one sequence after
 *                  another;
 *   lse:           [batch][heads_q][seqlen_q], or [heads_q][total_new] when
 *                  lse_varlen (the layout of fcl_attention_forward's lse).
 * Sequence b's keys are its c_b cached tokens followed, with an append, by
 * its n_b new ones; its queries are the last n_b positions of the keys
 * (bottom-right), masked and biased as by ref_attention_forward with
 * seqlen_q = n_b and seqlen_k = c_b (+ n_b). */
#ifndef FCL_REF_KVCACHE_H
#define FCL_REF_KVCACHE_H
#include <stdint.h>

typedef struct {
  int64_t batch, heads_q, heads_kv, head_dim, head_dim_v;
  double  softmax_scale; /* 0: 1/sqrt(head_dim) */
  int     causal;
  int64_t window_left, window_right; /* -1: unlimited */
  double  softcap;                   /* > 0 enables */
  const double  *alibi_slopes;       /* NULL or [heads_q] */
  const int32_t *cache_seqlens;      /* [batch]: c_b, tokens cached before the call */
  const int32_t *new_lens;           /* [batch]: n_b, new tokens (queries) */
  int     append;                    /* the keys include the new tokens */
  int     lse_varlen;                /* lse [heads_q][total_new]; else [batch][heads_q][seqlen_q] */
  int64_t seqlen_q;                  /* the lse row length when !lse_varlen */
  const double *rotary_cos, *rotary_sin; /* NULL or [rotary_positions][rotary_dim / 2] */
  int64_t rotary_dim, rotary_positions;
  int     rotary_interleaved;        /* 1: pairs (2i, 2i+1); 0: pairs (i, i + rotary_dim/2) */
} ref_kvcache_problem;

/* Total new tokens, sum of n_b; total cached tokens, sum of c_b. */
int64_t ref_kvcache_total_new(const ref_kvcache_problem *p);
int64_t ref_kvcache_total_cached(const ref_kvcache_problem *p);

/* Rotates x ([heads][head_dim], one token) in place at position pos: for
 * each pair (a, b) of the first rotary_dim dims and angle index j,
 * x_a' = x_a cos - x_b sin, x_b' = x_b cos + x_a sin, cos = rotary_cos[pos][j].
 * No-op without rotary tables. pos must be < rotary_positions. */
void ref_kvcache_rotate(const ref_kvcache_problem *p, double *x, int64_t heads, int64_t pos);
/* The pair partner and angle index of dim e (< rotary_dim): *partner is the
 * other dim of its pair, *sign the sign of the partner's sine term (x_e' =
 * x_e cos + sign * x_partner sin). */
void ref_kvcache_rotary_pair(const ref_kvcache_problem *p, int64_t e, int64_t *partner,
                             int64_t *angle, double *sign);
/* Rotated copy of the new tokens of every sequence (token i of sequence b at
 * position c_b + i): x is [total_new][heads][head_dim] (q or k_new). */
void ref_kvcache_rotate_new(const ref_kvcache_problem *p, const double *x, int64_t heads,
                            double *out);

/* The forward pass, from q and k_new already rotated as the call uses them
 * (k_new_rot: the keys the append wrote; ignored without an append). o and
 * lse (may be NULL) laid out as above. Returns the largest logit bound
 * (ref_attention_logit_bound) over the sequences, for the tolerance. */
double ref_kvcache_forward(const ref_kvcache_problem *p, const double *q_rot,
                           const double *k_cached, const double *v_cached,
                           const double *k_new_rot, const double *v_new, double *o,
                           double *lse);

/* fcl_attention_merge over n parts of the same queries: o and parts[i] are
 * [tokens][heads_q][width] (tokens = batch * seqlen_q, or cu_seqlens_q[batch]
 * when cu_seqlens_q is set), lse and lse_parts[i] laid out as the forward's
 * lse ([batch][heads_q][seqlen_q] or [heads_q][tokens]). lse = log(sum_i
 * exp(lse_i)), o = sum_i exp(lse_i - lse) o_i; a row whose parts are all
 * -inf gets o = 0 and lse = -inf. lse may be NULL. */
void ref_attention_merge(int64_t n, int64_t batch, int64_t seqlen_q, int64_t heads_q,
                         int64_t width, const int32_t *cu_seqlens_q,
                         const double *const *parts, const double *const *lse_parts,
                         double *o, double *lse);
#endif
