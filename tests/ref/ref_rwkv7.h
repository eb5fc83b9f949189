/* Double-precision reference of flashcl's RWKV7 semantics (DESIGN.md,
 * "RWKV7 semantics"), forward and backward. Inputs are dense host arrays,
 * already rounded to the dtype under test:
 *   not varlen: r, w, k, a, b [batch][seqlen][heads][head_dim_k],
 *               v, o          [batch][seqlen][heads][head_dim_v]
 *   varlen:     the same with [batch][seqlen] replaced by [total tokens],
 *               sequence n spanning tokens cu_seqlens[n] .. cu_seqlens[n+1]-1.
 *   h0, ht, dht, dh0: [batch][heads][head_dim_k][head_dim_v] (batch = number
 *               of sequences when varlen).
 * Per (sequence, head), from S = h0 (or 0), for each step t (last to first
 * when reverse):
 *   S'[i][j] = exp(w_t[i]) S[i][j] + b_t[i] sum_m a_t[m] S[m][j] + k_t[i] v_t[j]
 *   o_t[j]   = scale sum_i r_t[i] S'[i][j]
 * ht = the final S. */
#ifndef FCL_REF_RWKV7_H
#define FCL_REF_RWKV7_H
#include <stdint.h>

#include "test_util.h"

typedef struct {
  int64_t batch, seqlen, heads, head_dim_k, head_dim_v;
  double  scale;             /* 0: 1/sqrt(head_dim_k) */
  int     reverse;
  const int32_t *cu_seqlens; /* NULL or host [batch+1] */
} ref_rwkv7_problem;

/* The scale actually used. */
double  ref_rwkv7_scale(const ref_rwkv7_problem *p);
/* Rows of the dense arrays: batch*seqlen, or cu_seqlens[batch] when varlen. */
int64_t ref_rwkv7_tokens(const ref_rwkv7_problem *p);

/* The inputs of one problem (h0 may be NULL: zero). */
typedef struct {
  const double *r, *w, *k, *v, *a, *b, *h0;
} ref_rwkv7_in;

/* o must hold tokens*heads*head_dim_v values; ht may be NULL. */
void ref_rwkv7_forward(const ref_rwkv7_problem *p, const ref_rwkv7_in *in, double *o,
                       double *ht);

/* Gradients of L = sum(dout * o) + sum(dht * ht) (dht may be NULL: zero).
 * dr, dw, dk, da, db are shaped like r; dv like v; dh0 (NULL: not wanted)
 * like h0. Returns 0, or -1 when out of memory. The states are recomputed
 * from checkpoints every ~sqrt(T) steps, so memory stays O(sqrt(T) K V). */
typedef struct {
  double *dr, *dw, *dk, *dv, *da, *db, *dh0;
} ref_rwkv7_grads;
int ref_rwkv7_backward(const ref_rwkv7_problem *p, const ref_rwkv7_in *in, const double *dout,
                       const double *dht, const ref_rwkv7_grads *g);

/* Inputs as fla's tests/ops/test_rwkv7.py makes them: r, k, v uniform in
 * [-1, 1]; w of the kind below; a = -kk, b = kk * U(0, 0.1) with kk a
 * uniform [-1, 1] vector L2-normalised over K per (token, head). Arrays
 * shaped as above (tokens from ref_rwkv7_tokens). */
typedef enum {
  REF_RWKV7_W_STRONG, /* U(-8, -6): fla's fused-recurrent test             */
  REF_RWKV7_W_MODEL,  /* U(-exp(-0.5), 0): the models' range, -0.6065 .. 0 */
  REF_RWKV7_W_ZERO    /* 0: no decay                                       */
} ref_rwkv7_decay;
void ref_rwkv7_fill(tu_rng *g, const ref_rwkv7_problem *p, ref_rwkv7_decay kind, double *r,
                    double *w, double *k, double *v, double *a, double *b);
#endif
