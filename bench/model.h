/* fa-bench cost models of attention: the conventional FLOP count, the
 * instruction model of the Metal FlashAttention port, and memory traffic. */
#ifndef FCL_BENCH_MODEL_H
#define FCL_BENCH_MODEL_H

#include <stdint.h>

#include "flashcl.h"

typedef struct {
  int64_t   b, h, hkv, sq, sk, d, dv; /* h: query heads */
  fcl_dtype t;
  int       causal;
  double    dropout;    /* dropout_p (0: none) */
  const int32_t *cu; /* varlen: b + 1 offsets of packed sequences (sq = sk =
                      * the longest; queries and keys alike), else NULL */
} attn_shape;

/* 2*B*H*Nq*Nk*(D+Dv) (= 4*B*H*Nq*Nk*D), halved when causal; 2.5 times that
 * for the backward pass. */
double attn_flops(const attn_shape *s, int bwd);
/* (query, key) pairs that a query head sees: Nq*Nk, or the count under the
 * bottom-right causal mask (about Nq*Nk/2 when Nq = Nk). */
double attn_pairs(const attn_shape *s);
/* Instructions (an FMA, an exp or another ALU op each counts 1) of the
 * Metal port's model, per visible pair and query head: forward D+Dv+5
 * ((2D+5)N^2 when D = Dv); backward, split into a dQ pass (2D+Dv+5: S,
 * dP, dQ) and a dK/dV pass (2D+2Dv+5: S, dP, dV, dK), 4D+3Dv+10 ((7D+10)N^2
 * when D = Dv, the model's (3D+5) + (4D+5)). Times B*H. */
double attn_instrs(const attn_shape *s, int bwd);
/* Bytes of the least traffic: every input read once and every output
 * written once (fwd: q, k, v in, o and the f32 lse out; bwd: q, k, v, o,
 * dout, lse in, dq, dk, dv out). unfused adds the materialised f32 scores:
 * S written and read, P written and read, 16*B*H*Nq*Nk bytes. */
double attn_bytes(const attn_shape *s, int bwd, int unfused);

#endif
