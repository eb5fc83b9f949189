/* Tensor-core helpers for f32 data on NVIDIA GPUs (prepend dtype.cl with
 * FCL_DTYPE 0, and mma_warp.cl): mma.sync m16n8k8 on TF32 operands, used three
 * times per product ("3xTF32") so that f32 inputs keep f32 accuracy.
 *
 * A value x is split into big = x rounded to TF32 (10 mantissa bits, to
 * nearest) and small = x - big (exact in f32), itself rounded to TF32. Then
 * a * b = a_big * b_big + a_big * b_small + a_small * b_big up to
 * |a_small * b_small| and the rounding of small: about 2^-22 |a b|, the
 * order of f32's own rounding, where one TF32 product errs by 2^-11.
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

inline uint tf32_round(float x) {
  uint r;
  FCL_ASM("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}


/* 16 bytes global -> local; zero-filled when src_bytes is 0. */
inline void mma_cp16f(__local float *dst, const __global float *src, uint src_bytes) {
  FCL_ASM volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"(MMA_SADDR(dst)), "l"((ulong)src), "r"(src_bytes) : "memory");
}

#else /* FCL_MMA_EMULATE */

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
    float sum = 0.0f;
    for (int kk = 0; kk < 8; ++kk) {
      /* A (row, kk) is in lane 4 * (row & 7) + (kk & 3), register
       * (row >> 3) + 2 * (kk >> 2); B (kk, col) in lane 4 * col + (kk & 3),
       * register kk >> 2. The hardware ignores the low 13 bits. */
      const uint ap = w[((row & 7) * 4 + (kk & 3)) * 8 + (row >> 3) + 2 * (kk >> 2)];
      const uint bp = w[(col * 4 + (kk & 3)) * 8 + 4 + (kk >> 2)];
      sum = fma(as_float(ap & 0xffffe000u), as_float(bp & 0xffffe000u), sum);
    }
    out[e] += sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return (float4)(out[0], out[1], out[2], out[3]);
}
#define mma_1688(a, b, c) mma_1688_e((a), (b), (c), emu)

/* To nearest, ties away from zero, as cvt.rna: add half a TF32 ulp to the
 * magnitude bits and cut. */
inline uint tf32_round(float x) {
  const uint u = as_uint(x);
  return isfinite(x) ? (u + 0x1000u) & 0xffffe000u : u;
}


inline void mma_cp16f(__local float *dst, const __global float *src, uint src_bytes) {
  for (int e = 0; e < 4; ++e) dst[e] = src_bytes ? src[e] : 0.0f;
}
#endif

/* The two TF32 parts of x: big in .x, small in .y. */
inline uint2 tf32_split(float x) {
  const uint big = tf32_round(x);
  return (uint2)(big, tf32_round(x - as_float(big)));
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
  const int cpr = width / 4;
  for (int e = lid; e < rows * cpr; e += nthreads) {
    const int r = e / cpr, c = (e - r * cpr) * 4;
    const bool ok = row0 + r < nvalid && c < cols;
    const __global float *p = ok ? src + base + (long)(row0 + r) * row_stride + c : src;
    mma_cp16f(dst + r * ld + c, p, ok ? 16u : 0u);
  }
#else
  for (int e = lid; e < rows * width; e += nthreads) {
    const int r = e / width, c = e - r * width;
    float x = 0.0f;
    if (row0 + r < nvalid && c < cols) x = src[base + (long)(row0 + r) * row_stride + c];
    dst[r * ld + c] = x;
  }
#endif
}
