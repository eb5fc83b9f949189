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

inline void mma_cp_commit(void) {}
inline void mma_cp_wait_all(void) {}
#endif

/* The special paths' barriers and shuffles (non-finite operands of masked
 * products, see mma_common.cl) run under a condition uniform over the
 * work-group; emulated, they run always (with the same results): PoCL
 * compiles barriers under conditions much more slowly. */
#if FCL_MMA_EMULATE
#define MMA_SPECIAL(c) if (1)
#else
#define MMA_SPECIAL(c) if (c)
#endif

/* The first bit of bits[] (n bits) set at or after from, else n. */
inline int mma_next_bit(const uint *bits, int n, int from) {
  MMA_UNROLL for (int w = 0; w < (n + 31) / 32; ++w) {
    uint x = w < (from >> 5) ? 0u : bits[w];
    if (w == (from >> 5)) x &= ~0u << (from & 31);
    if (x != 0u) return min(w * 32 + 31 - (int)clz(x & (0u - x)), n);
  }
  return n;
}
