/* requires: common/dtype.cl common/mma_warp.cl */
/* Tensor-core helpers for 16-bit operands on NVIDIA GPUs through inline
 * PTX (prepend dtype.cl and mma_warp.cl; FCL_DTYPE 1 = f16, 2 = bf16 picks
 * the mma operand type; 0 = f32 data split into bf16 pairs, MMA_SPLIT).
 *
 * Fragments follow PTX's m16n8k16 layouts: A (16x16, row) is a uint4 of
 * packed 16-bit pairs, B (16x8, col) a uint2, C/D (16x8 f32) a float4;
 * lane = 4 * g + t holds rows g and g + 8. Emulated (FCL_MMA_EMULATE=1) as
 * mma_warp.cl says. Local tiles are addressed as (base, element offset) so
 * that both versions share one interface.
 */
#if FCL_DTYPE == 1
#define MMA_T "f16"
#elif FCL_DTYPE == 2 || FCL_DTYPE == 0
#define MMA_T "bf16"
#else
#error "the mma helpers need FCL_DTYPE 0 (f32 as split bf16), 1 (f16) or 2 (bf16)"
#endif
/* f32 data (FCL_DTYPE 0) on bf16 operands: a kernel that takes it splits
 * every operand x into hi = x rounded and lo = x - hi rounded (8 + 8
 * significant bits, bf16 keeping f32's range) and sums hi hi + hi lo +
 * lo hi: each product then errs by about 2^-17 of its size ("3xBF16"). */
#define MMA_SPLIT (FCL_DTYPE == 0)
/* Whether the split's lo parts enter the products: not where
 * FCL_F32_PRECISION_MEDIUM permits one bf16 product (hi hi). The tiles
 * keep their layout either way. */
#define MMA_SPLIT_PRODUCTS (MMA_SPLIT && FCL_F32_PRECISION < 2)

/* An operand's bits back to f32. */
#if FCL_DTYPE == 1
#define MMA_OP_F32(h) fcl_f16_bits_to_f32(h)
#else
#define MMA_OP_F32(h) fcl_bf16_to_f32(h)
#endif

#if !FCL_MMA_EMULATE

inline float4 mma_16816(uint4 a, uint2 b, float4 c) {
  float d0, d1, d2, d3;
  FCL_ASM("mma.sync.aligned.m16n8k16.row.col.f32." MMA_T "." MMA_T ".f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
      : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y),
        "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  return (float4)(d0, d1, d2, d3);
}

/* Four 8x8 matrices; lane 8 * i + r gives the row r address of matrix i. */
inline uint4 mma_ldsm_x4(__local const ushort *base, int off) {
  uint r0, r1, r2, r3;
  FCL_ASM volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(MMA_SADDR(base + off)) : "memory");
  return (uint4)(r0, r1, r2, r3);
}
inline uint4 mma_ldsm_x4_t(__local const ushort *base, int off) {
  uint r0, r1, r2, r3;
  FCL_ASM volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(MMA_SADDR(base + off)) : "memory");
  return (uint4)(r0, r1, r2, r3);
}


/* Packs (lo, hi) rounded to nearest even into one register. */
inline uint mma_pack(float lo, float hi) {
  uint r;
  FCL_ASM("cvt.rn." MMA_T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
/* x rounded to nearest even in the operand dtype: its bits (MMA_OP_F32
 * reads them back), by the one conversion instruction. */
inline ushort mma_round(float x) { return (ushort)(mma_pack(x, 0.0f) & 0xffffu); }


#else /* FCL_MMA_EMULATE */

inline ushort mma_round(float x) {
#if FCL_DTYPE != 1
  return fcl_f32_to_bf16(x);
#else
  ushort h[1];
  vstore_half_rte(x, 0, (__private half *)h);
  return h[0];
#endif
}

inline float mma_elem(uint pair, int hi) {
  const ushort h = (ushort)(hi ? pair >> 16 : pair & 0xffffu);
  return MMA_OP_F32(h);
}


/* Lane 4g + t holds A's rows g, g + 8 at columns 2t, 2t + 1 (x, y) and
 * 2t + 8, 2t + 9 (z, w), and B's column g at rows 2t, 2t + 1 (x) and
 * 2t + 8, 2t + 9 (y). Each operand goes through the warp's scratch as
 * floats, converted once by the lane that holds it (A's 16x16 fill it, so
 * B, transposed, follows in a second round); the lane's two rows and two
 * columns come back as float16s for its 4 outputs. Unoptimised builds
 * (Oclgrind, PoCL's emulated tests) spend their time here, hence the
 * vector loads and the unrolled sums. */
#define MMA_DOT16_(a, b, s)                                                             \
  s = fma(a.s0, b.s0, s), s = fma(a.s1, b.s1, s), s = fma(a.s2, b.s2, s),               \
  s = fma(a.s3, b.s3, s), s = fma(a.s4, b.s4, s), s = fma(a.s5, b.s5, s),               \
  s = fma(a.s6, b.s6, s), s = fma(a.s7, b.s7, s), s = fma(a.s8, b.s8, s),               \
  s = fma(a.s9, b.s9, s), s = fma(a.sa, b.sa, s), s = fma(a.sb, b.sb, s),               \
  s = fma(a.sc, b.sc, s), s = fma(a.sd, b.sd, s), s = fma(a.se, b.se, s),               \
  s = fma(a.sf, b.sf, s)
inline float4 mma_16816_e(uint4 a, uint2 b, float4 c, __local uint *emu) {
  __local float *w = (__local float *)MMA_WARP_S(emu);
  const int lane = MMA_LANE, g = lane >> 2, t = lane & 3;
  /* A[row][k] at w[16 row + k] */
  vstore2((float2)(mma_elem(a.x, 0), mma_elem(a.x, 1)), 0, w + 16 * g + 2 * t);
  vstore2((float2)(mma_elem(a.y, 0), mma_elem(a.y, 1)), 0, w + 16 * (g + 8) + 2 * t);
  vstore2((float2)(mma_elem(a.z, 0), mma_elem(a.z, 1)), 0, w + 16 * g + 2 * t + 8);
  vstore2((float2)(mma_elem(a.w, 0), mma_elem(a.w, 1)), 0, w + 16 * (g + 8) + 2 * t + 8);
  barrier(CLK_LOCAL_MEM_FENCE);
  const float16 a0 = vload16(0, w + 16 * g), a1 = vload16(0, w + 16 * (g + 8));
  barrier(CLK_LOCAL_MEM_FENCE);
  /* B[k][col] at w[16 col + k] */
  vstore2((float2)(mma_elem(b.x, 0), mma_elem(b.x, 1)), 0, w + 16 * g + 2 * t);
  vstore2((float2)(mma_elem(b.y, 0), mma_elem(b.y, 1)), 0, w + 16 * g + 2 * t + 8);
  barrier(CLK_LOCAL_MEM_FENCE);
  const float16 b0 = vload16(0, w + 16 * (2 * t)), b1 = vload16(0, w + 16 * (2 * t + 1));
  barrier(CLK_LOCAL_MEM_FENCE);
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  MMA_DOT16_(a0, b0, s0);
  MMA_DOT16_(a0, b1, s1);
  MMA_DOT16_(a1, b0, s2);
  MMA_DOT16_(a1, b1, s3);
  return c + (float4)(s0, s1, s2, s3);
}
#define mma_16816(a, b, c) mma_16816_e((a), (b), (c), emu)

inline uint4 mma_ldsm_e(__local const ushort *base, int off, int trans,
                        __local uint *emu) {
  __local uint *w = MMA_WARP_S(emu);
  const int lane = MMA_LANE;
  w[lane] = (uint)off;
  barrier(CLK_LOCAL_MEM_FENCE);
  uint r[4];
  const int g = lane >> 2, t = lane & 3;
  for (int i = 0; i < 4; ++i) {
    ushort e0, e1;
    if (!trans) {
      const int row = (int)w[8 * i + g];
      e0 = base[row + 2 * t];
      e1 = base[row + 2 * t + 1];
    } else {
      e0 = base[(int)w[8 * i + 2 * t] + g];
      e1 = base[(int)w[8 * i + 2 * t + 1] + g];
    }
    r[i] = (uint)e0 | ((uint)e1 << 16);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return (uint4)(r[0], r[1], r[2], r[3]);
}
#define mma_ldsm_x4(base, off) mma_ldsm_e((base), (off), 0, emu)
#define mma_ldsm_x4_t(base, off) mma_ldsm_e((base), (off), 1, emu)

inline uint mma_pack(float lo, float hi) {
  return (uint)mma_round(lo) | ((uint)mma_round(hi) << 16);
}

#endif

/* What mma_round leaves of x, rounded (the lo part of a split). */
inline ushort mma_round_lo(float x, ushort hi) { return mma_round(x - MMA_OP_F32(hi)); }

/* The lo parts of a split pair: what mma_pack(x0, x1)'s rounding left of
 * each, rounded. */
inline uint mma_pack_lo(float x0, float x1, uint hi) {
  return mma_pack(x0 - MMA_OP_F32((ushort)(hi & 0xffffu)), x1 - MMA_OP_F32((ushort)(hi >> 16)));
}

/* 8 elements global -> local (mma_cp16b in mma_warp.cl). */
inline void mma_cp16(__local ushort *base, int off, const __global ushort *src,
                     uint src_bytes) {
  mma_cp16b((__local uchar *)(base + off), (const __global uchar *)src, src_bytes);
}

/* Rows [row0, row0 + rows) of a strided matrix into a local tile of pitch
 * ld and width (a multiple of 8) columns, by nthreads work-items; zero past
 * nvalid rows and cols columns. MMA_VEC: 16-byte cp.async copies (every
 * offset and row stride a multiple of 8 elements, cols too); otherwise
 * 16-bit loads and stores. */
#ifndef MMA_VEC
#define MMA_VEC 0
#endif
inline void mma_tile_load(__local ushort *dst, int ld, int rows, int width,
                          const __global ushort *src, long base, long row_stride,
                          int row0, int nvalid, int cols, int lid, int nthreads) {
#if MMA_VEC
  mma_tile_cp16((__local uchar *)dst, 2 * ld, rows, 2 * width, (const __global uchar *)src,
                2 * base, 2 * row_stride, row0, nvalid, 2 * cols, lid, nthreads);
#else
  for (int e = lid; e < rows * width; e += nthreads) {
    const int r = e / width, c = e - r * width;
    ushort x = 0;
    if (row0 + r < nvalid && c < cols) x = src[base + (long)(row0 + r) * row_stride + c];
    dst[r * ld + c] = x;
  }
#endif
}

/* ---- Non-finite operands of masked products ------------------------------
 * A masked (query, key) pair must contribute nothing, whatever its values
 * (DESIGN.md; the portable kernels skip it). An mma multiplies the masked
 * pair's exact 0 (P or dS) by the other operand all the same, and 0 * NaN
 * or 0 * inf is NaN, which then reaches every row of the 16-row tile. So
 * a kernel scans the B-operand tile of each tile with masked pairs
 * (mma_tile_scan; fully visible tiles keep the pure mma path), multiplies
 * flagged tiles with their non-finite entries zeroed, and adds the
 * products of those entries back for the visible pairs only
 * (MMA_FIX_NONFINITE): slow, but only where such values are present. */

/* The exponent bits of the storage type: all set means inf or NaN. */
#if FCL_DTYPE == 2
#define MMA_EXP 0x7f80
#else
#define MMA_EXP 0x7c00
#endif


/* Sets bit r of bits[] (cleared beforehand, visible after a barrier) for
 * every row r of a local tile (rows x width, width and pitch ld multiples of
 * 8, 16-byte aligned) that holds an inf or NaN; with zero, replaces those
 * values by 0. By nthreads work-items. */
inline void mma_tile_scan(__local ushort *tile, int ld, int rows, int width, int zero,
                          volatile __local uint *bits, int lid, int nthreads) {
  const int cpr = width / 8;
  const ushort8 ex = (ushort8)((ushort)MMA_EXP);
  for (int e = lid; e < rows * cpr; e += nthreads) {
    const int r = e / cpr;
    __local uint4 *p = (__local uint4 *)(tile + r * ld + (e - r * cpr) * 8); /* 16-byte rows */
    const ushort8 x = as_ushort8(*p);
    const short8 bad = (x & ex) == ex;
    if (any(bad)) {
      if (zero) *p = as_uint4(x & ~as_ushort8(bad));
      atomic_or(&bits[r >> 5], 1u << (r & 31));
    }
  }
}


/* After acc += A T by the mma over a tile T of bn_ rows whose
 * non-finite values counted as 0: adds A[r][c] * T[c][d] back for the tile
 * rows c flagged in bits[] (a private copy of mma_tile_scan's words), each
 * of this lane's columns d < ncols of acc[0 .. nout) whose T[c][d] (read
 * again from src[base + (row0 + c) * stride + d]) is inf or NaN, and this
 * lane's rows r in {r0, r1} (its rows g and g + 8 of the warp's 16) for
 * which VIS(r, row0 + c) holds. A[r][c] is the rounded value of the warp's
 * packed A fragments a[] that the mma used, fetched from the lane of the
 * quad that holds it (every lane of the warp takes part: bits[] must be
 * uniform). Summed by class (mma_warp.cl, "Fix-ups by class"). Uses the
 * caller's lane. */
#define MMA_FIX_NONFINITE(acc, nout, a, bits, src, base, stride, row0, ncols, r0, r1, VIS, bn_) \
  do {                                                                                 \
    mma_nf nf_ = {0ul, 0ul};                                                           \
    for (int c_ = mma_next_bit(bits, bn_, 0); c_ < bn_;                                \
         c_ = mma_next_bit(bits, bn_, c_ + 1)) {                                       \
      uint4 af_ = a[0];                                                                \
      MMA_UNROLL for (int kk_ = 1; kk_ < bn_ / 16; ++kk_)                              \
        if ((c_ >> 4) == kk_) af_ = a[kk_];                                            \
      /* rows g and g + 8, columns 8 (c_ & 8) + 2 t + {0, 1}: lane 4 g + t */          \
      const uint2 w_ = mma_shfl_idx2((c_ & 8) ? af_.zw : af_.xy,                       \
                                     (lane & ~3) | ((c_ & 7) >> 1));                   \
      const int sh_ = (c_ & 1) * 16;                                                   \
      const float a0_ = FCL_RAW_F32((ushort)(w_.x >> sh_));                            \
      const float a1_ = FCL_RAW_F32((ushort)(w_.y >> sh_));                            \
      const int j_ = (row0) + c_;                                                      \
      const long at_ = (base) + (long)j_ * (stride);                                   \
      MMA_NF_GATHER(nf_, nout, src, at_, FCL_RAW_F32, ncols, a0_, a1_, VIS((r0), j_),  \
                    VIS((r1), j_));                                                    \
    }                                                                                  \
    MMA_NF_APPLY(acc, nout, nf_, 0);                                                   \
  } while (0)

