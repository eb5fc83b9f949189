/* requires: common/dtype.cl common/mma_warp.cl */
/* Tensor-core helpers for f32 data on NVIDIA GPUs (prepend dtype.cl with
 * FCL_DTYPE 0, and mma_warp.cl): mma.sync m16n8k8 on TF32 operands, used three
 * times per product ("3xTF32") so that f32 inputs keep f32 accuracy.
 *
 * A value x is split into big = x rounded to TF32 (10 mantissa bits, to
 * nearest) and small = x - big (exact in f32), which the tensor cores cut to
 * TF32. Then a * b = a_big * b_big + a_big * b_small + a_small * b_big up
 * to |a_small * b_small| (2^-22 |a b|) and the cuts of the small parts
 * (below 2^-21 |a b| in each cross term; 2^-21.0 the largest measured over
 * the three products): the order of f32's own rounding, where one TF32
 * product errs by 2^-11.
 *
 * Fragments (PTX m16n8k8 .tf32, lane = 4 * g + t): A (16x8, row) is a uint4
 * holding (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); B (8x8, col) a
 * uint2 holding (t, g), (t + 4, g); C/D (16x8 f32) a float4 holding
 * (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1). The kernels number
 * the k index of a fragment freely (a sum does not care), which lets A come
 * straight from a C tile and B from one 8-byte load.
 *
 * Emulated (FCL_MMA_EMULATE=1) as mma_warp.cl says.
 */
#if FCL_DTYPE != 0
#error "the TF32 helpers are for f32 data (FCL_DTYPE 0)"
#endif

typedef struct { uint4 big, small; } tf32_a;
typedef struct { uint2 big, small; } tf32_b;

#if !FCL_MMA_EMULATE

inline float4 mma_1688(uint4 a, uint2 b, float4 c) {
  float d0, d1, d2, d3;
  FCL_ASM("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
      : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y),
        "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  return (float4)(d0, d1, d2, d3);
}


#else /* FCL_MMA_EMULATE */

/* The tensor cores add the exact products to c and cut the sum toward zero
 * (no rounding to nearest), so a long chain of mma into one accumulator
 * drifts toward zero. Modelled where doubles exist: the exact sum, then
 * round toward zero. */
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define TF32_EMU_SUM double
#define TF32_EMU_OUT(x) convert_float_rtz(x)
#else
#define TF32_EMU_SUM float
#define TF32_EMU_OUT(x) (x)
#endif

inline float4 mma_1688_e(uint4 a, uint2 b, float4 c, __local uint *emu) {
  __local uint *w = MMA_WARP_S(emu);
  const int lane = MMA_LANE;
  w[lane * 8 + 0] = a.x; w[lane * 8 + 1] = a.y;
  w[lane * 8 + 2] = a.z; w[lane * 8 + 3] = a.w;
  w[lane * 8 + 4] = b.x; w[lane * 8 + 5] = b.y;
  barrier(CLK_LOCAL_MEM_FENCE);
  float out[4] = {c.x, c.y, c.z, c.w};
  const int g = lane >> 2, t = lane & 3;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
    TF32_EMU_SUM sum = out[e];
    for (int kk = 0; kk < 8; ++kk) {
      /* A (row, kk) is in lane 4 * (row & 7) + (kk & 3), register
       * (row >> 3) + 2 * (kk >> 2); B (kk, col) in lane 4 * col + (kk & 3),
       * register kk >> 2. The hardware ignores the low 13 bits. */
      const uint ap = w[((row & 7) * 4 + (kk & 3)) * 8 + (row >> 3) + 2 * (kk >> 2)];
      const uint bp = w[(col * 4 + (kk & 3)) * 8 + 4 + (kk >> 2)];
      sum += (TF32_EMU_SUM)as_float(ap & 0xffffe000u) * as_float(bp & 0xffffe000u);
    }
    out[e] = TF32_EMU_OUT(sum);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return (float4)(out[0], out[1], out[2], out[3]);
}
#define mma_1688(a, b, c) mma_1688_e((a), (b), (c), emu)

#endif

/* 4 floats global -> local (mma_cp16b in mma_warp.cl). */
inline void mma_cp16f(__local float *dst, const __global float *src, uint src_bytes) {
  mma_cp16b((__local uchar *)dst, (const __global uchar *)src, src_bytes);
}

/* The two TF32 parts of x: big in .x, small in .y. big is x rounded to
 * nearest by an integer add and mask: cvt.rna's result for finite x, without
 * its inf/NaN guard, which ptxas turns into a compare and a select. small =
 * x - big goes in as it stands: the tensor cores drop its low 13 bits, i.e.
 * cut it toward zero, an error below 2^-10 of small (2^-21 of x) where
 * rounding it too gave 2^-22. 3 instructions a value instead of 7 (cvt.rna
 * is 4 in SASS, the second 3), which made the 3xTF32 forward faster with
 * the same error (docs/defaults.md). Non-finite x: small is NaN (inf -
 * inf, or NaN - big), so every
 * product with it is NaN, as with cvt.rna. */
inline uint2 tf32_split(float x) {
  const uint big = (as_uint(x) + 0x1000u) & 0xffffe000u;
  return (uint2)(big, as_uint(x - as_float(big)));
}
inline tf32_a tf32_split_a(float4 x) {
  const uint2 e0 = tf32_split(x.x), e1 = tf32_split(x.y);
  const uint2 e2 = tf32_split(x.z), e3 = tf32_split(x.w);
  tf32_a r;
  r.big = (uint4)(e0.x, e1.x, e2.x, e3.x);
  r.small = (uint4)(e0.y, e1.y, e2.y, e3.y);
  return r;
}
inline tf32_b tf32_split_b(float2 x) {
  const uint2 e0 = tf32_split(x.x), e1 = tf32_split(x.y);
  tf32_b r;
  r.big = (uint2)(e0.x, e1.x);
  r.small = (uint2)(e0.y, e1.y);
  return r;
}
/* c + a b in 3xTF32; the small cross terms first. */
#define MMA_3XTF32(a, b, c) \
  mma_1688((a).big, (b).big, mma_1688((a).big, (b).small, mma_1688((a).small, (b).big, (c))))
/* c + a b as the f32 precision allows: one TF32 product of the rounded
 * parts from FCL_F32_PRECISION_HIGH on (the small parts then go unused and
 * the compiler drops them), 3xTF32 otherwise. */
#if FCL_F32_PRECISION >= 1
#define MMA_TF32_PRODUCT(a, b, c) mma_1688((a).big, (b).big, (c))
#else
#define MMA_TF32_PRODUCT(a, b, c) MMA_3XTF32(a, b, c)
#endif

/* Rows [row0, row0 + rows) of a strided f32 matrix into a local tile of
 * pitch ld and width (a multiple of 4) columns, by nthreads work-items;
 * zero past nvalid rows and cols columns. MMA_VEC: 16-byte cp.async copies
 * (every offset and row stride a multiple of 4 elements, cols too). */
#ifndef MMA_VEC
#define MMA_VEC 0
#endif
inline void tf32_tile_load(__local float *dst, int ld, int rows, int width,
                           const __global float *src, long base, long row_stride,
                           int row0, int nvalid, int cols, int lid, int nthreads) {
#if MMA_VEC
  mma_tile_cp16((__local uchar *)dst, 4 * ld, rows, 4 * width, (const __global uchar *)src,
                4 * base, 4 * row_stride, row0, nvalid, 4 * cols, lid, nthreads);
#else
  for (int e = lid; e < rows * width; e += nthreads) {
    const int r = e / width, c = e - r * width;
    float x = 0.0f;
    if (row0 + r < nvalid && c < cols) x = src[base + (long)(row0 + r) * row_stride + c];
    dst[r * ld + c] = x;
  }
#endif
}

/* ---- Non-finite values of K and V ---------------------------------------
 * 3xTF32 cannot carry inf or NaN: inf splits into inf + NaN, a small part
 * of 0 times an infinite big part is NaN, and a masked pair's exact 0 times
 * NaN is NaN all the same (mma_common.cl, "Non-finite operands"). So every
 * K and V tile is scanned (tf32_tile_scan: such values zeroed in local
 * memory, their rows flagged); where some were found, the scores of the
 * flagged keys are computed again in f32 (TF32_FIX_SCORES) and the
 * products of the flagged V values added back for the visible pairs only
 * (TF32_FIX_NONFINITE). A q holding inf still gives NaN scores in its row
 * where the reference may give -inf. */

/* Sets bit r of bits[] (cleared beforehand, visible after a barrier) for
 * every row r of a local f32 tile (rows x width, width and pitch ld
 * multiples of 4, 16-byte aligned) holding an inf or NaN, and zeroes those
 * values. By nthreads work-items. */
inline void tf32_tile_scan(__local float *tile, int ld, int rows, int width,
                           volatile __local uint *bits, int lid, int nthreads) {
  const int cpr = width / 4;
  const uint4 ex = (uint4)(0x7f800000u);
  for (int e = lid; e < rows * cpr; e += nthreads) {
    const int r = e / cpr;
    __local float4 *p = (__local float4 *)(tile + r * ld + (e - r * cpr) * 4);
    const uint4 x = as_uint4(*p);
    const int4 bad = (x & ex) == ex;
    if (any(bad)) {
      *p = as_float4(x & ~as_uint4(bad));
      atomic_or(&bits[r >> 5], 1u << (r & 31));
    }
  }
}

/* After acc += P V over a tile whose non-finite V values counted as 0: adds
 * P[r][c] V[c][d] back for the tile rows c flagged in bits[] (a private copy
 * of tf32_tile_scan's words), this lane's columns d < ncols of acc[0 ..
 * nout) whose V[c][d] (read again from v[base + (row0 + c) * stride + d])
 * is inf or NaN, and this lane's rows r in {r0, r1} for which VIS(r,
 * row0 + c) holds. P[r][c] comes from p[c / 8] (A fragment order) of the
 * lane of the quad that holds it: every lane of the warp takes part. */
#define TF32_FIX_NONFINITE(acc, nout, p, bits, v, base, stride, row0, ncols, r0, r1, VIS)\
  do {                                                                                  \
    mma_nf nf_ = {0ul, 0ul};                                                            \
    for (int c_ = mma_next_bit(bits, BLOCK_N, 0); c_ < BLOCK_N;                         \
         c_ = mma_next_bit(bits, BLOCK_N, c_ + 1)) {                                    \
      float4 pf_ = p[0];                                                                \
      MMA_UNROLL for (int n_ = 1; n_ < BLOCK_N / 8; ++n_)                               \
        if ((c_ >> 3) == n_) pf_ = p[n_];                                               \
      /* rows g and g + 8 at key 8 (c_ / 8) + 2 t + (c_ & 1): lane 4 g + t */           \
      const uint2 w_ = mma_shfl_idx2(as_uint2((c_ & 1) ? pf_.zw : pf_.xy),              \
                                     (lane & ~3) | ((c_ & 7) >> 1));                    \
      const int j_ = (row0) + c_;                                                       \
      const long at_ = (base) + (long)j_ * (stride);                                    \
      MMA_NF_GATHER(nf_, nout, v, at_, MMA_AS_IS, ncols, as_float(w_.x), as_float(w_.y),\
                    VIS((r0), j_), VIS((r1), j_));                                      \
    }                                                                                   \
    MMA_NF_APPLY(acc, nout, nf_, 0);                                                    \
  } while (0)

/* After S = Q K^T over a tile whose non-finite K values counted as 0: the
 * scores of the keys flagged in bits[], whose true values are inf or NaN,
 * replaced by the class sum of Q's products with those values (q[q_base +
 * r q_ss + d], read again for rows r0 and r1 through tf32_q_pair), the
 * quad's partial sums added by shuffles, and taken by the lane that holds
 * the score (mma_warp.cl, "Fix-ups by class"). Every lane of the warp
 * takes part. */
#define TF32_FIX_SCORES(s, q, q_base, q_ss, sq, bits, k, base, stride, row0, ncols)     \
  do {                                                                                  \
    mma_nf nf_ = {0ul, 0ul};                                                            \
    for (int c_ = mma_next_bit(bits, BLOCK_N, 0); c_ < BLOCK_N;                         \
         c_ = mma_next_bit(bits, BLOCK_N, c_ + 1)) {                                    \
      const long at_ = (base) + (long)((row0) + c_) * (stride);                         \
      float p0_ = 0.0f, p1_ = 0.0f;                                                     \
      MMA_NO_UNROLL for (int kk_ = 0; kk_ < KQ; ++kk_) {                                \
        const int d_ = kk_ * 8 + 2 * (lane & 3);                                        \
        const float x0_ = d_ < (ncols) ? k[at_ + d_] : 0.0f;                            \
        const float x1_ = d_ + 1 < (ncols) ? k[at_ + d_ + 1] : 0.0f;                    \
        const bool f0_ = !isfinite(x0_), f1_ = !isfinite(x1_);                          \
        if (f0_ || f1_) {                                                               \
          const float2 q0_ = tf32_q_pair(q, q_base, q_ss, r0, sq, d_);                  \
          const float2 q1_ = tf32_q_pair(q, q_base, q_ss, r1, sq, d_);                  \
          if (f0_) p0_ += q0_.x * x0_, p1_ += q1_.x * x0_;                              \
          if (f1_) p0_ += q0_.y * x1_, p1_ += q1_.y * x1_;                              \
        }                                                                               \
      }                                                                                 \
      p0_ += mma_shfl_xor(p0_, 1);                                                      \
      p1_ += mma_shfl_xor(p1_, 1);                                                      \
      p0_ += mma_shfl_xor(p0_, 2);                                                      \
      p1_ += mma_shfl_xor(p1_, 2);                                                      \
      if ((lane & 3) == ((c_ & 7) >> 1))                                                \
        nf_ = mma_nf_add(nf_, c_ >> 3, (c_ & 1) ? (float4)(0.0f, p0_, 0.0f, p1_)        \
                                                : (float4)(p0_, 0.0f, p1_, 0.0f));      \
    }                                                                                   \
    MMA_NF_APPLY(s, NT_S, nf_, 1);                                                      \
  } while (0)
