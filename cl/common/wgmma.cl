/* requires: common/mma_common.cl common/wgmma_ops.cl */
/* Hopper warpgroup products (wgmma) for 16-bit operands (prepend dtype.cl,
 * mma_warp.cl, mma_common.cl, wgmma_ops.cl). NVIDIA's OpenCL C compiler
 * targets sm_90 and refuses wgmma, so each sm_90a instruction is written
 * as an inline-assembly comment behind the marker FCL90A: the compiler
 * fills in its operands and keeps it; a program built with -DFCL_SM90A=1
 * is then rebuilt by the host from its PTX with the markers removed and
 * the target sm_90a (core/ptx_retarget.c, docs/wgmma_route.md).
 *
 * A warpgroup is 4 consecutive warps (128 work-items); warp w of it owns
 * rows 16 w .. 16 w + 15 of the m64 product, in mma.sync's m16n8 layouts
 * (mma_common.cl), so the fragments and accumulators of the m16n8k16
 * kernels carry over.
 *
 * Local tiles (R rows of W elements, R a multiple of 8) come in two
 * layouts, by W (WG_AT):
 *  - W a multiple of 64: rows of 128 bytes (64 elements) in column blocks
 *    of R rows, the 16-byte chunks of row r permuted by chunk ^ (r % 8):
 *    wgmma's 128-byte swizzle, whose reads meet no bank conflicts; tiles
 *    aligned to 1024 bytes;
 *  - else "core matrices" of 8 rows of 16 bytes, 128 contiguous bytes each
 *    (no swizzle), element (r, c) at (r / 8) 8 W + (c / 8) 64 + (r % 8) 8
 *    + c % 8.
 * Either way a 16-byte chunk of 8 elements of one row is contiguous, for
 * cp.async and ldmatrix. wgmma reads a tile through a descriptor:
 * wg_desc_k for an operand whose rows are m or n and columns k (K-major:
 * Q and K in S = Q K^T), wg_desc_n for one whose rows are k (N-major: V
 * in O = P V); the byte offsets it holds are, K-major and N-major:
 *   swizzled:  LBO unused / 128 R (next 64 columns), SBO 1024 (next 8 rows);
 *   core:      LBO 128 (next k chunk) / 16 W (next 8 k rows),
 *              SBO 16 W (next 8 rows) / 128 (next n chunk).
 */
#define WG_SWZ(w) ((w) % 64 == 0)
#define WG_CORE(r, c, w) (((r) >> 3) * 8 * (w) + ((c) >> 3) * 64 + ((r) & 7) * 8 + ((c) & 7))
#define WG_SW128(r, c, rows) \
  (((c) >> 6) * (rows) * 64 + (r) * 64 + (((((c) >> 3) & 7) ^ ((r) & 7)) << 3) + ((c) & 7))
#define WG_AT(r, c, rows, w) (WG_SWZ(w) ? WG_SW128(r, c, rows) : WG_CORE(r, c, w))

#if FCL_MMA_EMULATE
/* Emulated: a descriptor keeps what the hardware's does (start, LBO, SBO,
 * swizzle) with the tile's base for addresses, and each wgmma is the
 * warp's m16n8k16 products (mma_common.cl's emulation) on fragments
 * gathered through it; fences, commits and waits are nothing. */
typedef struct {
  __local const ushort *base; /* 1024-byte aligned where swizzled */
  int start, lbo, sbo, swz;   /* bytes from base */
} wg_desc_t;
inline wg_desc_t wg_make(__local const ushort *base, int start, int lbo, int sbo, int swz) {
  wg_desc_t d = {base, start, lbo, sbo, swz};
  return d;
}
/* Element (k, mn) of an operand, as the hardware addresses it. */
inline uint wg_at(wg_desc_t d, int k, int mn, int nmajor) {
  int a;
  if (d.swz) { /* 128-byte rows; chunk bits 4-6 ^= row bits 7-9 */
    a = nmajor ? d.start + (k >> 3) * d.sbo + (k & 7) * 128 + (mn >> 6) * d.lbo + (mn & 63) * 2
               : d.start + (mn >> 3) * d.sbo + (mn & 7) * 128 + k * 2;
    a ^= ((a >> 7) & 7) << 4;
  } else {
    a = nmajor ? d.start + (k >> 3) * d.lbo + (mn >> 3) * d.sbo + (k & 7) * 16 + (mn & 7) * 2
               : d.start + (mn >> 3) * d.sbo + (k >> 3) * d.lbo + (mn & 7) * 16 + (k & 7) * 2;
  }
  return d.base[a >> 1];
}
inline uint wg_pair(wg_desc_t d, int k, int mn, int nmajor) {
  return wg_at(d, k, mn, nmajor) | (wg_at(d, k + 1, mn, nmajor) << 16);
}
/* The B fragment of n8 tile i: this lane's column g, rows 2t, 2t+1 and 2t+8, 2t+9. */
inline uint2 wg_bfrag(wg_desc_t b, int i, int nmajor) {
  const int lane = MMA_LANE, g = lane >> 2, t = lane & 3;
  return (uint2)(wg_pair(b, 2 * t, 8 * i + g, nmajor), wg_pair(b, 2 * t + 8, 8 * i + g, nmajor));
}
inline void wg_rs_e(float4 *c, int n, uint4 a, wg_desc_t b, int nmajor, __local uint *emu) {
  for (int i = 0; i < n / 8; ++i) c[i] = mma_16816(a, wg_bfrag(b, i, nmajor), c[i]);
}
inline void wg_ss_e(float4 *c, int n, wg_desc_t a, wg_desc_t b, __local uint *emu) {
  const int lane = MMA_LANE, g = lane >> 2, t = lane & 3;
  const int m = (((int)get_local_id(0) >> 5) & 3) * 16 + g; /* the warp's rows of the 64 */
  const uint4 af = (uint4)(wg_pair(a, 2 * t, m, 0), wg_pair(a, 2 * t, m + 8, 0),
                           wg_pair(a, 2 * t + 8, m, 0), wg_pair(a, 2 * t + 8, m + 8, 0));
  for (int i = 0; i < n / 8; ++i) c[i] = mma_16816(af, wg_bfrag(b, i, 0), c[i]);
}
#define WG_TIE(c, n)
#define WG_TIE_A(a, n)
#define WG_RENEW_A(a, n)
inline void wg_fence_proxy(void) {}
inline void wg_fence(void) {}
inline void wg_commit(void) {}
inline void wg_wait0(void) {}
inline void wg_wait1(void) {}
#else
/* A descriptor: start (bytes from base), LBO, SBO, swizzle (1: 128 B). */
typedef ulong wg_desc_t;
inline wg_desc_t wg_make(__local const ushort *base, int start, int lbo, int sbo, int swz) {
  return (ulong)(((MMA_SADDR(base) + (uint)start) & 0x3ffffu) >> 4) |
         ((ulong)((uint)lbo >> 4) << 16) | ((ulong)((uint)sbo >> 4) << 32) | ((ulong)swz << 62);
}

/* Ties the n float4 of c to this point of the program: reads of c after
 * it wait for it, writes before it are done by it (CUTLASS's fence on
 * operands). wgmma's accumulators change in the background between the
 * product and wg_wait0, which the compiler does not know: tied after the
 * wait, no read of them is hoisted above it; tied before wg_fence, no
 * write sinks below the fence. */
#define WG_TIE(c, n)                                                                   \
  MMA_UNROLL for (int i_ = 0; i_ < (n); ++i_) {                                       \
    float x_ = c[i_].x, y_ = c[i_].y, z_ = c[i_].z, w_ = c[i_].w;                      \
    FCL_ASM volatile("" : "+f"(x_), "+f"(y_), "+f"(z_), "+f"(w_)::"memory");          \
    c[i_] = (float4)(x_, y_, z_, w_);                                                 \
  }

/* The same for n uint4 A fragments, which wgmma reads in the background.
 * ptxas (CUDA 13.0's and the 580 driver's) takes a wgmma's A registers as
 * dead once it is waited for, even where a loop reads them again: keep A
 * fragments fresh each iteration (P), or in local memory (Q). */
#define WG_TIE_A(a, n)                                                                 \
  MMA_UNROLL for (int i_ = 0; i_ < (n); ++i_) {                                       \
    uint x_ = a[i_].x, y_ = a[i_].y, z_ = a[i_].z, w_ = a[i_].w;                       \
    FCL_ASM volatile("" : "+r"(x_), "+r"(y_), "+r"(z_), "+r"(w_)::"memory");          \
    a[i_] = (uint4)(x_, y_, z_, w_);                                                  \
  }

/* Loop-invariant A fragments (Q in registers) rewritten in place after each
 * wait for the products that read them, as x ^ 0 with a 0 that ptxas cannot
 * fold (lanemask_lt & lanemask_eq): ptxas takes them as dead at the wait
 * (WG_TIE_A), and an instruction that reads them there keeps them alive;
 * a fresh copy for each product would take as many registers again. */
#define WG_RENEW_A(a, n)                                                               \
  do {                                                                                 \
    uint z_;                                                                           \
    FCL_ASM volatile("{ .reg .b32 t_;\n\tmov.u32 %0, %%lanemask_lt;\n\t"                \
                     "mov.u32 t_, %%lanemask_eq;\n\tand.b32 %0, %0, t_; }"                \
                     : "=r"(z_));                                                      \
    MMA_UNROLL for (int i_ = 0; i_ < (n); ++i_) a[i_] ^= (uint4)(z_);                  \
  } while (0)

/* Writes of the generic proxy (stores, cp.async) to local memory made
 * visible to wgmma's reads; before the barrier that publishes a tile. */
inline void wg_fence_proxy(void) {
  FCL_ASM volatile("// FCL90A fence.proxy.async.shared::cta;" ::: "memory");
}
/* Before a batch of wgmma: registers written since are settled. */
inline void wg_fence(void) { FCL_ASM volatile("// FCL90A wgmma.fence.sync.aligned;" ::: "memory"); }
inline void wg_commit(void) {
  FCL_ASM volatile("// FCL90A wgmma.commit_group.sync.aligned;" ::: "memory");
}
inline void wg_wait0(void) {
  FCL_ASM volatile("// FCL90A wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
/* All but the last committed group (groups finish in order). */
inline void wg_wait1(void) {
  FCL_ASM volatile("// FCL90A wgmma.wait_group.sync.aligned 1;" ::: "memory");
}

#endif

/* K-major: the k16 slice from column k0 of rows row0 .. row0 + 63 (or
 * the N rows of B) of a tile of rows x w. */
inline wg_desc_t wg_desc_k(__local const ushort *t, int rows, int w, int row0, int k0) {
  return WG_SWZ(w) ? wg_make(t, 2 * WG_SW128(row0, k0, rows), 16, 1024, 1)
                   : wg_make(t, 2 * WG_CORE(row0, k0, w), 128, 16 * w, 0);
}
/* N-major: rows k0 .. k0 + 15 of a tile of rows x w (all its columns). */
inline wg_desc_t wg_desc_n(__local const ushort *t, int rows, int w, int k0) {
  return WG_SWZ(w) ? wg_make(t, 2 * WG_SW128(k0, 0, rows), 128 * rows, 1024, 1)
                   : wg_make(t, 2 * WG_CORE(k0, 0, w), 16 * w, 128, 0);
}

/* wgmma_ops.cl's product of N = n: A and B in local memory (WG_SS), A in
 * registers and B N-major (WG_RS) or K-major (WG_RSK). */
#define WG_CAT(a, b) a##b
#define WG_SS(n) WG_CAT(wg_ss_n, n)
#define WG_RS(n) WG_CAT(wg_rs_n, n)
#define WG_RSK(n) WG_CAT(wg_rsk_n, n)
/* One score product acc = A B^T over dim_, issued only (after wg_fence;
 * no commit), with the kernel's tiles of bm_ and bn_ rows (macros of one
 * number: WG_SS pastes bn_): B the bn_ rows of b, K-major in local memory;
 * A the warpgroup's 64 rows from row0 of a (a tile of bm_ rows, K-major in
 * local memory: WG_SS_ISSUE) or dim_ / 16 A fragments af in registers
 * (WG_RSK_ISSUE). */
#define WG_SS_ISSUE(acc, a, row0, b, dim_, bm_, bn_)                                          \
  MMA_UNROLL for (int kk_ = 0; kk_ < dim_ / 16; ++kk_)                                        \
    WG_SS(bn_)(acc, wg_desc_k(a, bm_, dim_, row0, kk_ * 16),                                  \
               wg_desc_k(b, bn_, dim_, 0, kk_ * 16))
#define WG_RSK_ISSUE(acc, af, b, dim_, bn_)                                                   \
  MMA_UNROLL for (int kk_ = 0; kk_ < dim_ / 16; ++kk_)                                        \
    WG_RSK(bn_)(acc, af[kk_], wg_desc_k(b, bn_, dim_, 0, kk_ * 16))

/* Rows r and r + 8 of x (row stride ss from base) as n A fragments of 16
 * columns each (m16n8k16's layout, this lane's columns); rows at or past
 * lim are 0. Offsets and strides are multiples of 8 elements: A operands
 * kept in registers (the backward's K, or Q and dO). */
inline void wg_afrags(uint4 *a, int n, __global const ushort *x, long base, long ss, int r,
                      int lim) {
  const int t4 = get_local_id(0) & 3;
  __global const uint *p0 = (__global const uint *)(x + base + (long)r * ss);
  __global const uint *p1 = (__global const uint *)(x + base + (long)(r + 8) * ss);
  MMA_UNROLL for (int kk = 0; kk < n; ++kk) {
    a[kk].x = r < lim ? p0[8 * kk + t4] : 0u;
    a[kk].y = r + 8 < lim ? p1[8 * kk + t4] : 0u;
    a[kk].z = r < lim ? p0[8 * kk + 4 + t4] : 0u;
    a[kk].w = r + 8 < lim ? p1[8 * kk + 4 + t4] : 0u;
  }
}

/* Loads rows row0 .. row0 + rows of src (row_stride apart; rows from
 * nvalid on are 0) into a tile of width columns (the head dim; WG_AT) by
 * 16-byte cp.async (every offset a multiple of 8 elements). Work-items
 * take the chunks of one swizzled row, or consecutive rows of one core
 * matrix, in turn: 128 contiguous bytes of local memory by 8 of them.
 * Where nthreads is a multiple of 8 * width / 8 (a warpgroup's 128 at
 * head dims 16, 32, 64, 128), a work-item keeps its column and moves
 * nthreads / (width / 8) rows, a multiple of 8, a pass: its addresses are
 * a first one and fixed steps, with no index arithmetic a chunk. */
/* Chunk e of such a tile: its row r and first column c. */
#define WG_CHUNK(e, cpr, width, r, c)                                            \
  const int r = WG_SWZ(width) ? (e) / (cpr) : ((e) & 7) + ((e) / (8 * (cpr))) * 8; \
  const int c = WG_SWZ(width) ? ((e) - r * (cpr)) * 8 : (((e) >> 3) % (cpr)) * 8
inline void wg_tile_load(__local ushort *dst, int rows, int width, const __global ushort *src,
                         long base, long row_stride, int row0, int nvalid, int lid, int nthreads) {
  const int cpr = width / 8;
  if (nthreads % (8 * cpr)) {
    for (int e = lid; e < rows * cpr; e += nthreads) {
      WG_CHUNK(e, cpr, width, r, c);
      const bool in = row0 + r < nvalid;
      mma_cp16b((__local uchar *)(dst + WG_AT(r, c, rows, width)),
                (const __global uchar *)(src + base + (in ? (long)(row0 + r) * row_stride + c : 0)),
                in ? 16u : 0u);
    }
    return;
  }
  const int dr = nthreads / cpr; /* rows a pass */
  WG_CHUNK(lid, cpr, width, r, c); /* the first; the next dr rows on */
  __local uchar *d = (__local uchar *)(dst + WG_AT(r, c, rows, width));
  const int dstep = 2 * (WG_SWZ(width) ? dr * 64 : dr * width); /* bytes */
  const __global uchar *s0 = (const __global uchar *)(src + base);
  const __global uchar *s = (const __global uchar *)(src + base + (long)(row0 + r) * row_stride + c);
  const long sstep = 2 * (long)dr * row_stride;
  MMA_UNROLL for (int p = 0; p < (rows * cpr + nthreads - 1) / nthreads; ++p) {
    /* No test where the passes cover the tile exactly (lid < nthreads):
     * a branch after a step's last wait serializes its products (C7513,
     * docs/wgmma_route.md). */
    if ((rows * cpr) % nthreads == 0 || lid + p * nthreads < rows * cpr) {
      const bool in = row0 + r + p * dr < nvalid;
      mma_cp16b(d + p * dstep, in ? s + p * sstep : s0, in ? 16u : 0u);
    }
  }
}

/* mma_tile_scan on such a tile: bit r of bits[] for every row r that
 * holds an inf or NaN; with zero, those values replaced by 0. */
inline void wg_tile_scan(__local ushort *tile, int rows, int width, int zero,
                         volatile __local uint *bits, int lid, int nthreads) {
  const int cpr = width / 8;
  const ushort8 ex = (ushort8)((ushort)MMA_EXP);
  for (int e = lid; e < rows * cpr; e += nthreads) {
    const int r = e / cpr;
    __local uint4 *p = (__local uint4 *)(tile + WG_AT(r, (e - r * cpr) * 8, rows, width));
    const ushort8 x = as_ushort8(*p);
    const short8 bad = (x & ex) == ex;
    if (any(bad)) {
      if (zero) *p = as_uint4(x & ~as_ushort8(bad));
      atomic_or(&bits[r >> 5], 1u << (r & 31));
    }
  }
}
