/* requires: attention/attention_dropout.cl common/mma_warp.cl */
/* Dropout's keep bits in the tensor-core kernels (the mask itself:
 * attention_dropout.cl), for the C fragment of an m16n8 product: lane
 * 4 g + t4 holds rows g and g + 8, columns 2 t4 and 2 t4 + 1. Four bits in
 * the fragment's float4 order: bit 0 (row g, column 2 t4), bit 1 (g,
 * 2 t4 + 1), bit 2 (g + 8, 2 t4), bit 3 (g + 8, 2 t4 + 1).
 *
 * One Philox call gives four consecutive elements (a group: 4n .. 4n + 3).
 * A lane's own elements are never four consecutive ones, so the lanes that
 * hold runs of consecutive elements draw the run's groups together, one
 * call a lane, and exchange the bits by shuffles: one call a lane and tile
 * where the runs start 4-aligned (seqlen_k a multiple of 4), two (some
 * lanes) where not, against one a pair or one an element drawn alone.
 * Every lane of the warp must take part (shuffles). */
#ifndef FCL_DROPOUT
#define FCL_DROPOUT 0 /* 1: dropout */
#endif

/* Runs along the columns (the keys of the forward's and dQ's S): ea and eb
 * the elements of column 0 of rows g and g + 8. The quad's lanes t4 = 0, 1
 * draw row g's eight elements (lane t4 the group (ea >> 2) + (t4 & 1), lane
 * 0 also the third where ea is not 4-aligned), lanes 2 and 3 row g + 8's. */
inline uint mma_drop_cols(ulong ea, ulong eb, int t4, fcl_attn_dropout_scalars a MMA_EMU_PARAM) {
  const uint hi = (uint)t4 & 1u;
  const ulong e = (t4 & 2) ? eb : ea;
  uint w = attn_drop_keep4((e >> 2) + hi, a) << (4u * hi);
  if (hi == 0u && (e & 3ul) != 0ul) w |= attn_drop_keep4((e >> 2) + 2ul, a) << 8;
  w |= mma_shfl_xor_u(w, 1);           /* the run's groups: bit (e & 3) + x is e + x */
  const uint x = mma_shfl_xor_u(w, 2); /* the other row's */
  const uint wa = (t4 & 2) ? x : w, wb = (t4 & 2) ? w : x;
  const uint sa = (uint)(ea & 3ul) + 2u * (uint)t4, sb = (uint)(eb & 3ul) + 2u * (uint)t4;
  return (((wa >> sa) & 3u) | (((wb >> sb) & 3u) << 2));
}

/* Runs along the rows (the keys of dK/dV's S^T, whose columns are
 * queries): ea and eb the elements of row 0 in columns 2 t4 and 2 t4 + 1.
 * The eight lanes of a column pair (one t4) draw its 2 x 16 elements: lane
 * g the group (e >> 2) + (g & 3) of column 2 t4 + (g >> 2), lanes g = 0, 4
 * also the fifth where e is not 4-aligned. */
inline uint mma_drop_rows(ulong ea, ulong eb, int g, fcl_attn_dropout_scalars a MMA_EMU_PARAM) {
  const uint k = (uint)g & 3u;
  const ulong e = (g & 4) ? eb : ea;
  uint w = attn_drop_keep4((e >> 2) + k, a) << (4u * k);
  if (k == 0u && (e & 3ul) != 0ul) w |= attn_drop_keep4((e >> 2) + 4ul, a) << 16;
  w |= mma_shfl_xor_u(w, 4);
  w |= mma_shfl_xor_u(w, 8);            /* the column's groups */
  const uint x = mma_shfl_xor_u(w, 16); /* the other column's */
  const uint wa = (g & 4) ? x : w, wb = (g & 4) ? w : x;
  const uint sa = (uint)(ea & 3ul) + (uint)g, sb = (uint)(eb & 3ul) + (uint)g;
  return ((wa >> sa) & 1u) | (((wb >> sb) & 1u) << 1) | (((wa >> (sa + 8u)) & 1u) << 2) |
         (((wb >> (sb + 8u)) & 1u) << 3);
}

/* x's kept elements (bits of m, in float4 order) times s, the dropped ones
 * 0: selected, so that a NaN or inf of a dropped pair stays out. */
inline float4 mma_drop_apply(float4 x, uint m, float s) {
  return (float4)((m & 1u) ? x.x * s : 0.0f, (m & 2u) ? x.y * s : 0.0f,
                  (m & 4u) ? x.z * s : 0.0f, (m & 8u) ? x.w * s : 0.0f);
}

/* Words of keep bits of a tile of bn columns (four an n8 tile), and the
 * bits of n8 tile n of such words kb. */
#define MMA_DROP_WORDS(bn) (((bn) / 8 + 7) / 8)
#define MMA_DROP_BITS_OF(kb, n) (((kb)[(n) / 8] >> (4 * ((n) % 8))) & 15u)
/* kb[MMA_DROP_WORDS(bn)]: mma_drop_cols's bits of the n8 tiles of a tile of
 * bn columns whose column 0 is element e0 in row g and e1 in row g + 8. */
#define MMA_DROP_COLS_BITS(kb, bn, e0, e1, a)                                    \
  do {                                                                           \
    const ulong e0_ = (e0), e1_ = (e1);                                          \
    MMA_UNROLL for (int w_ = 0; w_ < MMA_DROP_WORDS(bn); ++w_) (kb)[w_] = 0u;     \
    MMA_UNROLL for (int n_ = 0; n_ < (bn) / 8; ++n_)                             \
      (kb)[n_ / 8] |= mma_drop_cols(e0_ + 8 * n_, e1_ + 8 * n_, t4, a MMA_EMU)     \
                      << (4 * (n_ % 8));                                         \
  } while (0)
/* kb[MMA_DROP_WORDS(bn)]: mma_drop_rows's bits of the n8 tiles of a tile of
 * bn columns, column c + 2 t4 of n8 tile c / 8 holding element e0 + c * step
 * in row 0 (step: the elements from one column to the next). */
#define MMA_DROP_ROWS_BITS(kb, bn, e0, step, a)                                  \
  do {                                                                           \
    const ulong e0_ = (e0), st_ = (step);                                        \
    MMA_UNROLL for (int w_ = 0; w_ < MMA_DROP_WORDS(bn); ++w_) (kb)[w_] = 0u;     \
    MMA_UNROLL for (int n_ = 0; n_ < (bn) / 8; ++n_) {                           \
      const ulong ea_ = e0_ + (ulong)(8 * n_ + 2 * t4) * st_;                    \
      (kb)[n_ / 8] |= mma_drop_rows(ea_, ea_ + st_, g, a MMA_EMU) << (4 * (n_ % 8));  \
    }                                                                            \
  } while (0)
