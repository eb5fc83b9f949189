/* Warp-level tensor-core helpers for NVIDIA GPUs through inline PTX (prepend
 * dtype.cl; FCL_DTYPE 1 = f16, 2 = bf16 picks the mma operand type).
 *
 * A warp is 32 consecutive work-items. Fragments follow PTX's m16n8k16
 * layouts: A (16x16, row) is a uint4 of packed 16-bit pairs, B (16x8, col)
 * a uint2, C/D (16x8 f32) a float4; lane = 4 * g + t holds rows g and g + 8.
 *
 * With FCL_MMA_EMULATE=1 every helper is computed in software through local
 * memory and work-group barriers, so that the kernels' indexing can be
 * tested on a CPU (PoCL). Every helper must then be reached by all
 * work-items of the work-group together, as in the kernels' uniform loops.
 * Local tiles are addressed as (base, element offset) so that both versions
 * share one interface.
 */
#ifndef FCL_MMA_EMULATE
#define FCL_MMA_EMULATE 0
#endif
#if FCL_DTYPE == 1
#define MMA_T "f16"
#elif FCL_DTYPE == 2
#define MMA_T "bf16"
#else
#error "the mma helpers need FCL_DTYPE 1 (f16) or 2 (bf16)"
#endif

#if !FCL_MMA_EMULATE
/* The inline-assembly keyword the compiler takes (the host tries asm, then
 * __asm__). */
#ifndef FCL_ASM
#define FCL_ASM asm
#endif
#define MMA_UNROLL _Pragma("unroll")
/* Scratch of the emulation: nothing on the GPU. */
#define MMA_EMU_DECL(warps)
#define MMA_EMU
#define MMA_EMU_PARAM

/* The shared-window address of a __local pointer. */
#define MMA_SADDR(p) ((uint)(size_t)(p))

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

inline float mma_shfl_xor(float x, int m) {
  uint r;
  FCL_ASM volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=r"(r) : "r"(as_uint(x)), "r"(m));
  return as_float(r);
}

/* 2^x by the special-function unit (-inf gives 0). */
inline float mma_exp2(float x) {
  float r;
  FCL_ASM("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/* Packs (lo, hi) rounded to nearest even into one register. */
inline uint mma_pack(float lo, float hi) {
  uint r;
  FCL_ASM("cvt.rn." MMA_T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/* 16 bytes global -> local without registers; bytes past src_bytes (0 or
 * 16) are zero-filled, and nothing is read when it is 0. */
inline void mma_cp16(__local ushort *base, int off, const __global ushort *src,
                     uint src_bytes) {
  FCL_ASM volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"(MMA_SADDR(base + off)), "l"((ulong)src), "r"(src_bytes)
               : "memory");
}
inline void mma_cp_commit(void) { FCL_ASM volatile("cp.async.commit_group;" ::: "memory"); }
inline void mma_cp_wait_all(void) { FCL_ASM volatile("cp.async.wait_group 0;" ::: "memory"); }

#else /* FCL_MMA_EMULATE */
#define MMA_UNROLL
/* Per warp, per lane: 8 words to exchange fragments through. */
#define MMA_EMU_DECL(warps) \
  __local uint mma_emu_s[(warps) * 256]; \
  __local uint *emu = mma_emu_s;
#define MMA_EMU , emu
#define MMA_EMU_PARAM , __local uint *emu

inline float mma_elem(uint pair, int hi) {
  const ushort h = (ushort)(hi ? pair >> 16 : pair & 0xffffu);
  return FCL_RAW_F32(h);
}

#define MMA_LANE ((int)get_local_id(0) & 31)
#define MMA_WARP_S(emu) ((emu) + ((int)get_local_id(0) >> 5) * 256)

inline float4 mma_16816_e(uint4 a, uint2 b, float4 c, __local uint *emu) {
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
    for (int kk = 0; kk < 16; ++kk) {
      const int ka = (kk & 7) >> 1, hi = kk & 1;
      const uint ap = w[((row & 7) * 4 + ka) * 8 + (row >> 3) + 2 * (kk >> 3)];
      const uint bp = w[(col * 4 + ka) * 8 + 4 + (kk >> 3)];
      sum = fma(mma_elem(ap, hi), mma_elem(bp, hi), sum);
    }
    out[e] += sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return (float4)(out[0], out[1], out[2], out[3]);
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

#define mma_exp2(x) native_exp2(x)

inline ushort mma_round(float x) {
#if FCL_DTYPE == 2
  return fcl_f32_to_bf16(x);
#else
  ushort h[1];
  vstore_half_rte(x, 0, (__private half *)h);
  return h[0];
#endif
}
inline uint mma_pack(float lo, float hi) {
  return (uint)mma_round(lo) | ((uint)mma_round(hi) << 16);
}

inline void mma_cp16(__local ushort *base, int off, const __global ushort *src,
                     uint src_bytes) {
  for (int e = 0; e < 8; ++e) base[off + e] = src_bytes ? src[e] : (ushort)0;
}
inline void mma_cp_commit(void) {}
inline void mma_cp_wait_all(void) {}
#endif

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
  const int cpr = width / 8;
  for (int e = lid; e < rows * cpr; e += nthreads) {
    const int r = e / cpr, c = (e - r * cpr) * 8;
    const bool ok = row0 + r < nvalid && c < cols;
    const __global ushort *p = ok ? src + base + (long)(row0 + r) * row_stride + c : src;
    mma_cp16(dst, r * ld + c, p, ok ? 16u : 0u);
  }
#else
  for (int e = lid; e < rows * width; e += nthreads) {
    const int r = e / width, c = e - r * width;
    ushort x = 0;
    if (row0 + r < nvalid && c < cols) x = src[base + (long)(row0 + r) * row_stride + c];
    dst[r * ld + c] = x;
  }
#endif
}
