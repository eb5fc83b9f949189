/* Host Philox-4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers:
 * as easy as 1, 2, 3", SC'11) and the dropout mask flashcl derives from it
 * (flashcl.h, fcl_attention_desc.dropout_p), written from the paper's
 * definition for the tests to check the kernels' generator against. */
#ifndef FCL_REF_PHILOX_H
#define FCL_REF_PHILOX_H
#include <stdint.h>

/* Ten rounds on counter ctr with key key; out receives the four words. */
void ref_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* The keep threshold of dropout probability p: (uint32_t)(p * 2^32), p in [0, 1). */
uint32_t ref_dropout_threshold(double p);

/* Whether element n = ((b * heads_q + h) * seqlen_q + i) * seqlen_k + j is
 * kept: word n % 4 of Philox with key (seed lo, seed hi) and counter
 * (n/4 lo, n/4 hi, offset lo, offset hi) reaches the threshold of p. p = 0
 * keeps everything. */
int ref_dropout_keep(uint64_t seed, uint64_t offset, double p, uint64_t n);

/* The element index n of (b, h, i, j), i and j within the sequence and
 * seqlen_q, seqlen_k the problem's (with varlen the maxima). */
uint64_t ref_dropout_index(int64_t b, int64_t h, int64_t i, int64_t j, int64_t heads_q,
                           int64_t seqlen_q, int64_t seqlen_k);
#endif
