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
 * Local tiles are stored in "core matrices" of 8 rows of 16 bytes (8
 * elements), 128 contiguous bytes each: a tile of R rows and W columns
 * (W a multiple of 8) keeps element (r, c) at
 *   (r / 8) * 8 W + (c / 8) * 64 + (r % 8) * 8 + c % 8      (elements).
 * The 16-byte chunk (r, c / 8) is contiguous, so cp.async and ldmatrix
 * work on it as on a padded row-major tile. Read by wgmma through a
 * descriptor (start address, and the byte offsets between core matrices
 * along the product's k and along its m or n):
 *   rows are n, columns k (K-major, B = 0):   k step 128 B, n step 16 W B;
 *   rows are k, columns n (N-major, B = 1):   k step 16 W B, n step 128 B.
 */
#define WG_CORE(r, c, w) (((r) >> 3) * 8 * (w) + ((c) >> 3) * 64 + ((r) & 7) * 8 + ((c) & 7))

#if FCL_MMA_EMULATE
/* Emulated: a descriptor keeps the tile's address and steps, and each
 * wgmma is the warp's m16n8k16 products (mma_common.cl's emulation) on
 * fragments gathered from the tiles as the descriptors address them;
 * fences, commits and waits are nothing. */
typedef struct {
  __local const ushort *p;
  int kstep, mnstep; /* elements */
} wg_desc_t;
inline wg_desc_t wg_desc(__local const ushort *base, int off, uint kstep, uint mnstep) {
  wg_desc_t d = {base + off, (int)kstep / 2, (int)mnstep / 2};
  return d;
}
/* Element (k, mn) of a descriptor's tile: K-major (rows mn) or N-major. */
inline uint wg_at(wg_desc_t d, int k, int mn, int nmajor) {
  const int r = nmajor ? k : mn, c = nmajor ? mn : k;
  return d.p[(nmajor ? (k >> 3) * d.kstep + (mn >> 3) * d.mnstep
                     : (mn >> 3) * d.mnstep + (k >> 3) * d.kstep) + (r & 7) * 8 + (c & 7)];
}
inline uint wg_pair(wg_desc_t d, int k, int mn, int nmajor) {
  return wg_at(d, k, mn, nmajor) | (wg_at(d, k + 1, mn, nmajor) << 16);
}
/* The B fragment of n8 tile i: this lane's column g, rows 2t, 2t+1 and 2t+8, 2t+9. */
inline uint2 wg_bfrag(wg_desc_t b, int i, int nmajor) {
  const int lane = MMA_LANE, g = lane >> 2, t = lane & 3;
  return (uint2)(wg_pair(b, 2 * t, 8 * i + g, nmajor), wg_pair(b, 2 * t + 8, 8 * i + g, nmajor));
}
inline void wg_rs_e(float4 *c, int n, uint4 a, wg_desc_t b, __local uint *emu) {
  for (int i = 0; i < n / 8; ++i) c[i] = mma_16816(a, wg_bfrag(b, i, 1), c[i]);
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
inline void wg_fence_proxy(void) {}
inline void wg_fence(void) {}
inline void wg_commit(void) {}
inline void wg_wait0(void) {}
inline void wg_wait1(void) {}
#else
/* The descriptor of a tile from element offset off of base (no swizzle):
 * bits 0-13 address / 16, 16-29 k step / 16, 32-45 m/n step / 16. */
inline ulong wg_desc(__local const ushort *base, int off, uint kstep, uint mnstep) {
  return (ulong)((MMA_SADDR(base + off) & 0x3ffffu) >> 4) | ((ulong)(kstep >> 4) << 16) |
         ((ulong)(mnstep >> 4) << 32);
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

/* Loads rows row0 .. row0 + rows of src (row_stride apart; rows from
 * nvalid on are 0) into a core-matrix tile of width columns (the head
 * dim) by 16-byte cp.async (every offset a multiple of 8 elements).
 * Work-items take consecutive rows of one chunk column: 8 of them fill one
 * core matrix's 128 bytes. */
inline void wg_tile_load(__local ushort *dst, int rows, int width, const __global ushort *src,
                         long base, long row_stride, int row0, int nvalid, int lid, int nthreads) {
  const int cpr = width / 8;
  for (int e = lid; e < rows * cpr; e += nthreads) {
    const int r = (e & 7) + (e / (8 * cpr)) * 8, c = ((e >> 3) % cpr) * 8;
    const bool in = row0 + r < nvalid;
    mma_cp16b((__local uchar *)(dst + WG_CORE(r, c, width)),
              (const __global uchar *)(src + base + (in ? (long)(row0 + r) * row_stride + c : 0)),
              in ? 16u : 0u);
  }
}

/* mma_tile_scan on a core-matrix tile: bit r of bits[] for every row r
 * that holds an inf or NaN; with zero, those values replaced by 0. */
inline void wg_tile_scan(__local ushort *tile, int rows, int width, int zero,
                         volatile __local uint *bits, int lid, int nthreads) {
  const int cpr = width / 8;
  const ushort8 ex = (ushort8)((ushort)MMA_EXP);
  for (int e = lid; e < rows * cpr; e += nthreads) {
    const int r = e / cpr;
    __local uint4 *p = (__local uint4 *)(tile + WG_CORE(r, (e - r * cpr) * 8, width));
    const ushort8 x = as_ushort8(*p);
    const short8 bad = (x & ex) == ex;
    if (any(bad)) {
      if (zero) *p = as_uint4(x & ~as_ushort8(bad));
      atomic_or(&bits[r >> 5], 1u << (r & 31));
    }
  }
}
