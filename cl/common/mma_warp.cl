/* Warp-level helpers shared by the tensor-core kernels of every dtype
 * (mma_common.cl: f16/bf16, mma_tf32.cl: f32): the inline-assembly keyword,
 * shuffles, exp2, cp.async groups, the emulation's scratch, and bit scans.
 *
 * A warp is 32 consecutive work-items. With FCL_MMA_EMULATE=1 every helper
 * is computed in software through local memory and work-group barriers, so
 * that the kernels' indexing can be tested on a CPU (PoCL). Every helper
 * must then be reached by all work-items of the work-group together, as in
 * the kernels' uniform loops.
 */
#ifndef FCL_MMA_EMULATE
#define FCL_MMA_EMULATE 0
#endif

#if !FCL_MMA_EMULATE
/* The inline-assembly keyword the compiler takes (the host tries asm, then
 * __asm__). */
#ifndef FCL_ASM
#define FCL_ASM asm
#endif
#define MMA_UNROLL _Pragma("unroll")
#define MMA_NO_UNROLL _Pragma("unroll 1")
/* Scratch of the emulation: nothing on the GPU. */
#define MMA_EMU_DECL(warps)
#define MMA_EMU
#define MMA_EMU_PARAM

/* The shared-window address of a __local pointer. */
#define MMA_SADDR(p) ((uint)(size_t)(p))

inline float mma_shfl_xor(float x, int m) {
  uint r;
  FCL_ASM volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=r"(r) : "r"(as_uint(x)), "r"(m));
  return as_float(r);
}
/* The word of lane ^ m, bits as they are. */
inline uint mma_shfl_xor_u(uint x, int m) {
  uint r;
  FCL_ASM volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=r"(r) : "r"(x), "r"(m));
  return r;
}
/* Two words of lane src (any lane of the warp, per lane). */
inline uint2 mma_shfl_idx2(uint2 x, int src) {
  uint r0, r1;
  FCL_ASM volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=r"(r0) : "r"(x.x), "r"(src));
  FCL_ASM volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=r"(r1) : "r"(x.y), "r"(src));
  return (uint2)(r0, r1);
}

/* 2^x by the special-function unit (-inf gives 0). */
inline float mma_exp2(float x) {
  float r;
  FCL_ASM("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/* 16 bytes global -> local without registers; bytes past src_bytes (0 or
 * 16) are zero-filled, and nothing is read when it is 0. */
inline void mma_cp16b(__local uchar *dst, const __global uchar *src, uint src_bytes) {
  FCL_ASM volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"(MMA_SADDR(dst)), "l"((ulong)src), "r"(src_bytes) : "memory");
}
inline void mma_cp_commit(void) { FCL_ASM volatile("cp.async.commit_group;" ::: "memory"); }
inline void mma_cp_wait_all(void) { FCL_ASM volatile("cp.async.wait_group 0;" ::: "memory"); }
/* Waits until at most n (a literal) groups committed last are in flight. */
#define MMA_CP_WAIT(n) MMA_CP_WAIT_(n)
#define MMA_CP_WAIT_(n) FCL_ASM volatile("cp.async.wait_group " #n ";" ::: "memory")

#else /* FCL_MMA_EMULATE */
#define MMA_UNROLL
#define MMA_NO_UNROLL
/* Per warp, per lane: 8 words to exchange fragments through. */
#define MMA_EMU_DECL(warps) \
  __local uint mma_emu_s[(warps) * 256]; \
  __local uint *emu = mma_emu_s;
#define MMA_EMU , emu
#define MMA_EMU_PARAM , __local uint *emu

#define MMA_LANE ((int)get_local_id(0) & 31)
#define MMA_WARP_S(emu) ((emu) + ((int)get_local_id(0) >> 5) * 256)

inline float mma_shfl_xor_e(float x, int m, __local uint *emu) {
  __local uint *w = MMA_WARP_S(emu);
  const int lane = MMA_LANE;
  w[lane] = as_uint(x);
  barrier(CLK_LOCAL_MEM_FENCE);
  const float y = as_float(w[lane ^ m]);
  barrier(CLK_LOCAL_MEM_FENCE);
  return y;
}
#define mma_shfl_xor(x, m) mma_shfl_xor_e((x), (m), emu)
inline uint mma_shfl_xor_u_e(uint x, int m, __local uint *emu) {
  __local uint *w = MMA_WARP_S(emu);
  const int lane = MMA_LANE;
  w[lane] = x;
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint y = w[lane ^ m];
  barrier(CLK_LOCAL_MEM_FENCE);
  return y;
}
#define mma_shfl_xor_u(x, m) mma_shfl_xor_u_e((x), (m), emu)
inline uint2 mma_shfl_idx2_e(uint2 x, int src, __local uint *emu) {
  __local uint *w = MMA_WARP_S(emu);
  const int lane = MMA_LANE;
  w[2 * lane] = x.x;
  w[2 * lane + 1] = x.y;
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint2 y = (uint2)(w[2 * src], w[2 * src + 1]);
  barrier(CLK_LOCAL_MEM_FENCE);
  return y;
}
#define mma_shfl_idx2(x, src) mma_shfl_idx2_e((x), (src), emu)

#define mma_exp2(x) native_exp2(x)

inline void mma_cp16b(__local uchar *dst, const __global uchar *src, uint src_bytes) {
  for (int e = 0; e < 16; ++e) dst[e] = src_bytes ? src[e] : (uchar)0;
}
inline void mma_cp_commit(void) {}
inline void mma_cp_wait_all(void) {}
#define MMA_CP_WAIT(n)
#endif

/* Rows [row0, row0 + rows) of a strided matrix into a local tile of pitch
 * ld, width bytes a row (a multiple of 16), by nthreads work-items with
 * 16-byte cp.async copies; zero past nvalid rows and cols bytes. Every size,
 * offset and stride in bytes, multiples of 16 (the dtype helpers,
 * mma_common.cl and mma_tf32.cl, scale theirs). */
inline void mma_tile_cp16(__local uchar *dst, int ld, int rows, int width,
                          const __global uchar *src, long base, long row_stride,
                          int row0, int nvalid, int cols, int lid, int nthreads) {
  const int cpr = width / 16;
  /* Whole rows a pass (the kernels' shapes; constants once inlined): each
   * work-item copies one column chunk of every rstep-th row, its address
   * advanced by an add, not recomputed from the index (a division, 64-bit
   * products: 28 instructions a copy in SASS, as many as the mma). */
  if (nthreads % cpr == 0 && rows % (nthreads / cpr) == 0) {
    const int rstep = nthreads / cpr, r = lid / cpr, c = (lid - r * cpr) * 16;
    const __global uchar *p = src + base + (long)(row0 + r) * row_stride + c;
    const long pstep = (long)rstep * row_stride;
    MMA_UNROLL for (int i = 0; i < rows / rstep; ++i) {
      const bool ok = row0 + r + i * rstep < nvalid && c < cols;
      mma_cp16b(dst + (r + i * rstep) * ld + c, ok ? p : src, ok ? 16u : 0u);
      p += pstep;
    }
    return;
  }
  for (int e = lid; e < rows * cpr; e += nthreads) {
    const int r = e / cpr, c = (e - r * cpr) * 16;
    const bool ok = row0 + r < nvalid && c < cols;
    const __global uchar *p = ok ? src + base + (long)(row0 + r) * row_stride + c : src;
    mma_cp16b(dst + r * ld + c, p, ok ? 16u : 0u);
  }
}

/* The special paths' barriers and shuffles (non-finite operands of masked
 * products, see mma_common.cl) run under a condition uniform over the
 * work-group; emulated, they run always (with the same results): PoCL
 * compiles barriers under conditions much more slowly. */
#if FCL_MMA_EMULATE
#define MMA_SPECIAL(c) if (1)
#else
#define MMA_SPECIAL(c) if (c)
#endif

/* Copies a tile scan's nw words (mma_tile_scan, tf32_tile_scan; after the
 * barrier that shows them) to the private out[], or zeros where !on (no
 * tile was scanned); whether any row was flagged. */
inline bool mma_tile_flags(const volatile __local uint *bits, bool on, uint *out, int nw) {
  bool any_set = false;
  MMA_UNROLL for (int w = 0; w < nw; ++w) {
    out[w] = on ? bits[w] : 0u;
    any_set |= out[w] != 0u;
  }
  return any_set;
}

/* The first bit of bits[] (n bits) set at or after from, else n. */
inline int mma_next_bit(const uint *bits, int n, int from) {
  MMA_UNROLL for (int w = 0; w < (n + 31) / 32; ++w) {
    uint x = w < (from >> 5) ? 0u : bits[w];
    if (w == (from >> 5)) x &= ~0u << (from & 31);
    if (x != 0u) return min(w * 32 + 31 - (int)clz(x & (0u - x)), n);
  }
  return n;
}

/* ---- Fix-ups by class --------------------------------------------------
 * A fix-up (mma_common.cl, "Non-finite operands") adds terms that are each
 * 0, inf or NaN to values of a lane's fragment array (acc or s) chosen at
 * run time. Indexing the array at run time moves it to memory (NVIDIA's
 * compiler does), and a fix-up unrolled over the array keeps its loads in
 * flight, which costs the whole kernel registers, and so work-groups an SM
 * (docs/defaults.md). So a
 * fix-up sums its terms by class into 2-bit codes (0: none, 1: +inf,
 * 2: -inf, 3: NaN), a byte a float4, 16 float4 at most, and applies them in
 * one unrolled pass. Sums of such terms depend on their classes only. */
typedef struct {
  ulong lo, hi;
} mma_nf;

inline uint mma_nf_code(float x) {
  return isnan(x) ? 3u : x > 0.0f ? 1u : x < 0.0f ? 2u : 0u;
}
inline float mma_nf_value(uint c) {
  return c == 1u ? INFINITY : c == 2u ? -INFINITY : c == 3u ? NAN : 0.0f;
}
inline uint mma_nf_byte(mma_nf f, int n) {
  return (uint)((n < 8 ? f.lo : f.hi) >> (8 * (n & 7))) & 0xffu;
}
inline float4 mma_nf_get(mma_nf f, int n) {
  const uint b = mma_nf_byte(f, n);
  return (float4)(mma_nf_value(b & 3u), mma_nf_value((b >> 2) & 3u),
                  mma_nf_value((b >> 4) & 3u), mma_nf_value(b >> 6));
}
/* f with the terms t (each 0 or not finite) added to float4 number n. */
inline mma_nf mma_nf_add(mma_nf f, int n, float4 t) {
  const float4 o = mma_nf_get(f, n) + t;
  const ulong b = mma_nf_code(o.x) | mma_nf_code(o.y) << 2 | mma_nf_code(o.z) << 4 |
                  mma_nf_code(o.w) << 6;
  const int sh = 8 * (n & 7);
  if (n < 8) f.lo = (f.lo & ~(0xfful << sh)) | b << sh;
  else f.hi = (f.hi & ~(0xfful << sh)) | b << sh;
  return f;
}
/* arr[0 .. n) (float4) plus f's sums, or replaced by them where given. */
#define MMA_NF_APPLY(arr, n, f, replace)                                      \
  MMA_UNROLL for (int n_ = 0; n_ < (n); ++n_) {                                \
    const uint b_ = mma_nf_byte(f, n_);                                        \
    if (b_ != 0u) {                                                            \
      const float4 t_ = mma_nf_get(f, n_);                                     \
      if (b_ & 3u) arr[n_].x = (replace) ? t_.x : arr[n_].x + t_.x;            \
      if (b_ & 12u) arr[n_].y = (replace) ? t_.y : arr[n_].y + t_.y;           \
      if (b_ & 48u) arr[n_].z = (replace) ? t_.z : arr[n_].z + t_.z;           \
      if (b_ & 192u) arr[n_].w = (replace) ? t_.w : arr[n_].w + t_.w;          \
    }                                                                          \
  }

#define MMA_AS_IS(x) (x)

/* The class sums of a product's fix-up for one tile row: CONV(src[at + d])
 * is element d of the row, read again from memory; for each of the lane's column
 * pairs d < ncols of 0 .. 8 nout (C layout: columns 8 n + 2 t + {0, 1})
 * holding inf or NaN, a0 times them (row r0, when vis0) and a1 times them
 * (row r1, when vis1) are added to f. One pair at a time, not unrolled. */
#define MMA_NF_GATHER(f, nout, src, at, CONV, ncols, a0, a1, vis0, vis1)    \
  MMA_NO_UNROLL for (int n_ = 0; n_ < (nout); ++n_) {                         \
    const int d_ = n_ * 8 + 2 * (lane & 3);                                    \
    const float x0_ = d_ < (ncols) ? CONV(src[(at) + d_]) : 0.0f;              \
    const float x1_ = d_ + 1 < (ncols) ? CONV(src[(at) + d_ + 1]) : 0.0f;      \
    const bool f0_ = !isfinite(x0_), f1_ = !isfinite(x1_);                     \
    if (f0_ || f1_)                                                            \
      f = mma_nf_add(f, n_, (float4)(f0_ && (vis0) ? (a0) * x0_ : 0.0f,        \
                                     f1_ && (vis0) ? (a0) * x1_ : 0.0f,        \
                                     f0_ && (vis1) ? (a1) * x0_ : 0.0f,        \
                                     f1_ && (vis1) ? (a1) * x1_ : 0.0f));      \
  }
