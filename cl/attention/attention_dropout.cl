/* requires: attention/attention_abi.h */
/* Attention dropout's mask (flashcl.h, fcl_attention_desc.dropout_p): a
 * function of the seed, the offset and the element's place in the problem
 * only, so a backward pass regenerates exactly its forward's mask whatever
 * tiles either ran with, on any device.
 *
 * Philox-4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
 * easy as 1, 2, 3", SC'11): ten rounds of two 32x32->64-bit products on a
 * four-word counter, the two-word key bumped by the Weyl constants between
 * rounds. Element n = ((b * heads_q + h) * seqlen_q + i) * seqlen_k + j takes
 * word n % 4 of the block of counter (n / 4, offset); it is kept where that
 * word reaches the threshold (uint)(p * 2^32). */

inline uint4 fcl_philox4x32_10(uint4 c, uint2 key) {
  for (int r = 0; r < 10; ++r) {
    const uint lo0 = 0xD2511F53u * c.x, hi0 = mul_hi(0xD2511F53u, c.x);
    const uint lo1 = 0xCD9E8D57u * c.z, hi1 = mul_hi(0xCD9E8D57u, c.z);
    c = (uint4)(hi1 ^ c.y ^ key.x, lo1, hi0 ^ c.w ^ key.y, lo0);
    key += (uint2)(0x9E3779B9u, 0xBB67AE85u);
  }
  return c;
}

/* The keep bits of the four elements 4g .. 4g + 3 (bit t: element 4g + t). */
inline uint attn_drop_keep4(ulong g, fcl_attn_dropout_scalars a) {
  const uint4 w = fcl_philox4x32_10(
      (uint4)((uint)g, (uint)(g >> 32), (uint)a.drop_offset_lo, (uint)a.drop_offset_hi),
      (uint2)((uint)a.drop_seed_lo, (uint)a.drop_seed_hi));
  const uint t = (uint)a.drop_threshold;
  return (w.x >= t ? 1u : 0u) | (w.y >= t ? 2u : 0u) | (w.z >= t ? 4u : 0u) |
         (w.w >= t ? 8u : 0u);
}

/* The element index of (b, h, i, j): i and j within the sequence, seqlen_q
 * and seqlen_k the problem's (the maxima with varlen). */
inline ulong attn_drop_index(int b, int h, int i, int j, int heads_q, int seqlen_q,
                             int seqlen_k) {
  return (((ulong)b * (ulong)heads_q + (ulong)h) * (ulong)seqlen_q + (ulong)i) *
             (ulong)seqlen_k + (ulong)j;
}

/* Whether element n is kept. */
inline bool attn_drop_keep(ulong n, fcl_attn_dropout_scalars a) {
  return (attn_drop_keep4(n >> 2, a) >> (uint)(n & 3)) & 1u;
}

/* The dropout arguments of a forward kernel (ATTN_FWD_UNPACK names their
 * fields one by one). */
#define ATTN_FWD_DROPOUT                                                         \
  ((fcl_attn_dropout_scalars){attn_args_.drop_threshold, attn_args_.drop_seed_lo, \
                              attn_args_.drop_seed_hi, attn_args_.drop_offset_lo, \
                              attn_args_.drop_offset_hi, attn_args_.drop_scale})
