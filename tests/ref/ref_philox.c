/* Philox-4x32-10 from SC'11's definition, and the dropout mask (ref_philox.h). */
#include "ref_philox.h"

/* One round: two 32x32 -> 64-bit products of words 0 and 2 with the
 * round multipliers, then the S-box-free Feistel-like permutation. */
static void round4x32(uint32_t c[4], const uint32_t k[2]) {
  const uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
  const uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
  const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
  const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
  const uint32_t n0 = hi1 ^ c[1] ^ k[0], n1 = lo1, n2 = hi0 ^ c[3] ^ k[1], n3 = lo0;
  c[0] = n0, c[1] = n1, c[2] = n2, c[3] = n3;
}

void ref_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
  uint32_t k[2] = {key[0], key[1]};
  for (int r = 0; r < 10; ++r) {
    if (r > 0) { /* the key schedule: Weyl increments between rounds */
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    round4x32(c, k);
  }
  for (int i = 0; i < 4; ++i) out[i] = c[i];
}

uint32_t ref_dropout_threshold(double p) { return (uint32_t)(p * 4294967296.0); }

int ref_dropout_keep(uint64_t seed, uint64_t offset, double p, uint64_t n) {
  const uint64_t g = n / 4;
  const uint32_t ctr[4] = {(uint32_t)g, (uint32_t)(g >> 32), (uint32_t)offset,
                           (uint32_t)(offset >> 32)};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t w[4];
  ref_philox4x32_10(ctr, key, w);
  return w[n % 4] >= ref_dropout_threshold(p);
}

uint64_t ref_dropout_index(int64_t b, int64_t h, int64_t i, int64_t j, int64_t heads_q,
                           int64_t seqlen_q, int64_t seqlen_k) {
  return (((uint64_t)b * (uint64_t)heads_q + (uint64_t)h) * (uint64_t)seqlen_q + (uint64_t)i) *
             (uint64_t)seqlen_k + (uint64_t)j;
}
