/* Double-precision reference of flashcl's RWKV6 semantics (DESIGN.md,
 * "RWKV6 semantics"), forward and backward. Inputs are dense host arrays,
 * already rounded to the dtype under test:
 *   not varlen: r, k, w [batch][seqlen][heads][head_dim_k],
 *               v, o    [batch][seqlen][heads][head_dim_v]
 *   varlen:     the same with [batch][seqlen] replaced by [total tokens],
 *               sequence b spanning tokens cu_seqlens[b] .. cu_seqlens[b+1]-1.
 *   u:  [heads][head_dim_k]
 *   h0, ht, dht, dh0: [batch][heads][head_dim_k][head_dim_v] (batch = number
 *               of sequences when varlen).
 * Per (sequence, head), from S = h0 (or 0), for each step t (last to first
 * when reverse):
 *   o_t[j]  = sum_i scale * r_t[i] * (S[i][j] + u[i] * k_t[i] * v_t[j])
 *   S[i][j] = S[i][j] * exp(w_t[i]) + k_t[i] * v_t[j]
 * ht = the final S. */
#ifndef FCL_REF_RWKV6_H
#define FCL_REF_RWKV6_H
#include <stdint.h>

typedef struct {
  int64_t batch, seqlen, heads, head_dim_k, head_dim_v;
  double  scale;             /* 0: 1/sqrt(head_dim_k) */
  int     reverse;
  const int32_t *cu_seqlens; /* NULL or host [batch+1] */
} ref_rwkv6_problem;

/* The scale actually used. */
double  ref_rwkv6_scale(const ref_rwkv6_problem *p);
/* Rows of the dense arrays: batch*seqlen, or cu_seqlens[batch] when varlen. */
int64_t ref_rwkv6_tokens(const ref_rwkv6_problem *p);

/* o must hold tokens*heads*head_dim_v values; h0 and ht may be NULL. */
void ref_rwkv6_forward(const ref_rwkv6_problem *p, const double *r, const double *k,
                       const double *v, const double *w, const double *u,
                       const double *h0, double *o, double *ht);

/* Gradients of L = sum(dout * o) + sum(dht * ht). h0 and dht may be NULL
 * (zero); dh0 may be NULL (not wanted). dr, dk, dv, dw are shaped like r, k,
 * v, w; du like u (summed over sequences and time). Returns 0, or -1 when
 * out of memory. The states are recomputed from checkpoints, so memory
 * stays O(sqrt(T) * K * V) per head. */
int ref_rwkv6_backward(const ref_rwkv6_problem *p, const double *r, const double *k,
                       const double *v, const double *w, const double *u,
                       const double *h0, const double *dout, const double *dht,
                       double *dr, double *dk, double *dv, double *dw, double *du,
                       double *dh0);
#endif
