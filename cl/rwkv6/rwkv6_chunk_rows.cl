/* requires: rwkv6/rwkv6_chunk_common.cl common/mma_common.cl */
/* Row loads of the chunked RWKV6 tensor-core kernels (prepend dtype.cl,
 * rwkv6_common.cl, mma_warp.cl, mma_common.cl; FCL_DTYPE 0, 1 or 2). Rows
 * are positions of one sequence-head, 0 past its end. Where RW_ALIGNED
 * says that every row of every operand starts at a multiple of 16 bytes,
 * 16 bytes (RW_EPC elements) go in one copy; else element by element.
 * f32 data (MMA_SPLIT, mma_common.cl) gives each 16-bit operand tile a lo
 * twin at a fixed element offset from it: RW_LO(n) for a tile of n
 * elements, 0 where nothing is split. Also the rounding store they share
 * and the checkpoints' element type. */
#define RW_EPC (16 / (int)sizeof(fcl_raw)) /* stored elements in 16 bytes */
#if MMA_SPLIT
#define RW_LO(n) (n)
#else
#define RW_LO(n) 0
#endif
#define RW_PARTS (1 + MMA_SPLIT) /* tiles an operand takes */
/* The chunk-boundary checkpoints: 16-bit data keeps them rounded to the
 * operand dtype, as every product that reads them takes them (half the
 * bytes of f32 to write and read); split f32 keeps f32. */
#define RW_CK16 (!MMA_SPLIT)
#if RW_CK16
typedef ushort rw_ck_t;
#else
typedef float rw_ck_t;
#endif

/* x rounded to the operand dtype (mma_round, mma_common.cl), stored at
 * p[i]; split, what that left of x rounded at p[i + lo]. */
inline void rw_st16(__local ushort *p, int i, int lo, float x) {
  const ushort hi = mma_round(x);
  p[i] = hi;
#if MMA_SPLIT_PRODUCTS
  p[i + lo] = mma_round_lo(x, hi);
#endif
}

/* An ldmatrix of a split tile's lo twin; 0 (and no load) unsplit or
 * where the lo parts take no part in the products (MMA_SPLIT_PRODUCTS). */
#if MMA_SPLIT_PRODUCTS
#define RW_LDSM_LO(base, lo, off) mma_ldsm_x4((base) + (lo), (off))
#define RW_LDSM_LO_T(base, lo, off) mma_ldsm_x4_t((base) + (lo), (off))
#else
#define RW_LDSM_LO(base, lo, off) ((uint4)(0u))
#define RW_LDSM_LO_T(base, lo, off) ((uint4)(0u))
#endif
/* c + a b over split operands (ah, al) and (bh, bl): hi hi + hi lo + lo hi,
 * the small terms first; unsplit, the one product. */
#if MMA_SPLIT_PRODUCTS
#define RW_MMA(ah, al, bh, bl, c) mma_16816((ah), (bh), mma_16816((ah), (bl), mma_16816((al), (bh), (c))))
#else
#define RW_MMA(ah, al, bh, bl, c) mma_16816((ah), (bh), (c))
#endif
/* A packed pair (x0, x1) and its lo twin (0 unsplit). */
#if MMA_SPLIT_PRODUCTS
#define RW_PACK_LO(x0, x1, hi) mma_pack_lo((x0), (x1), (hi))
#else
#define RW_PACK_LO(x0, x1, hi) 0u
#endif

/* Element offset of column col0 of position p of a strided operand. */
#define RW_ROW_AT(x, pos) (rw_at(RW_T(x), s, rw_time((pos), s.n, flags), flags) + col0)

/* Positions [p0, p0 + nrow) x columns [col0, col0 + ncol) (ncol a multiple
 * of RW_EPC) into dst[nrow][ld] as stored, 0 from column col0 + cols on
 * (cols a multiple of RW_EPC): by cp.async where aligned (the caller
 * commits and waits), else by loads. */
inline void rw_rows(__local fcl_raw *dst, int ld, int nrow, int ncol, int cols,
                    const __global fcl_elem *src, long src_off, long src_sb, long src_ss,
                    long src_sh, int col0, rw_seq s, int p0, int flags, int lid, int nthreads) {
  const int cpr = ncol / RW_EPC, total = nrow * cpr;
  const __global fcl_raw *raw = (const __global fcl_raw *)src;
  MMA_UNROLL for (int q = 0; q < FCL_CEIL_DIV(total, nthreads); ++q) {
    const int e = lid + q * nthreads, t = e / cpr, c = (e - t * cpr) * RW_EPC, p = p0 + t;
    const bool ok = e < total && p < s.n && c < cols;
    const long at = ok ? RW_ROW_AT(src, p) + c : 0;
    if (e < total) {
      if (flags & RW_ALIGNED) {
        mma_cp16b((__local uchar *)(dst + t * ld + c), (const __global uchar *)(raw + at),
                  ok ? 16u : 0u);
      } else {
        fcl_raw x[RW_EPC];
        MMA_UNROLL for (int i = 0; i < RW_EPC; ++i) x[i] = ok ? raw[at + i] : (fcl_raw)0;
        MMA_UNROLL for (int i = 0; i < RW_EPC; ++i) dst[t * ld + c + i] = x[i];
      }
    }
  }
}

/* ... into the 16-bit operand tile dst[nrow][ld] (ncol and cols multiples
 * of 8): as stored, or split (its lo twin at dst + lo) from loads of f32. */
inline void rw_rows16(__local ushort *dst, int lo, int ld, int nrow, int ncol, int cols,
                      const __global fcl_elem *src, long src_off, long src_sb, long src_ss,
                      long src_sh, int col0, rw_seq s, int p0, int flags, int lid,
                      int nthreads) {
#if MMA_SPLIT
  const int cpr = ncol / 8, total = nrow * cpr;
  MMA_UNROLL for (int q = 0; q < FCL_CEIL_DIV(total, nthreads); ++q) {
    const int e = lid + q * nthreads, t = e / cpr, c = (e - t * cpr) * 8, p = p0 + t;
    const bool ok = e < total && p < s.n && c < cols;
    const long at = ok ? RW_ROW_AT(src, p) + c : 0;
    float x[8];
    if (flags & RW_ALIGNED) {
      const float4 a = ok ? *(const __global float4 *)(src + at) : (float4)(0.0f);
      const float4 b = ok ? *(const __global float4 *)(src + at + 4) : (float4)(0.0f);
      x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z,
      x[7] = b.w;
    } else {
      MMA_UNROLL for (int i = 0; i < 8; ++i) x[i] = ok ? src[at + i] : 0.0f;
    }
    if (e < total) MMA_UNROLL for (int i = 0; i < 8; ++i) rw_st16(dst, t * ld + c + i, lo, x[i]);
  }
#else
  (void)lo;
  rw_rows((__local fcl_raw *)dst, ld, nrow, ncol, cols, src, src_off, src_sb, src_ss, src_sh,
          col0, s, p0, flags, lid, nthreads);
#endif
}

/* ... into f32 dst[nrow][ld] (ncol a multiple of 8), by 16-byte loads where
 * aligned. */
inline void rw_rows16f(__local float *dst, int ld, int nrow, int ncol,
                       const __global fcl_elem *src, long src_off, long src_sb, long src_ss,
                       long src_sh, int col0, rw_seq s, int p0, int flags, int lid,
                       int nthreads) {
  const int cpr = ncol / RW_EPC, total = nrow * cpr;
  const __global fcl_raw *raw = (const __global fcl_raw *)src;
  MMA_UNROLL for (int q = 0; q < FCL_CEIL_DIV(total, nthreads); ++q) {
    const int e = lid + q * nthreads, t = e / cpr, c = (e - t * cpr) * RW_EPC, p = p0 + t;
    const bool ok = e < total && p < s.n;
    const long at = ok ? RW_ROW_AT(src, p) + c : 0;
    fcl_raw x[RW_EPC];
    if (flags & RW_ALIGNED) {
      const uint4 v = ok ? *(const __global uint4 *)(raw + at) : (uint4)(0u);
#if FCL_DTYPE == 0
      x[0] = as_float(v.x), x[1] = as_float(v.y), x[2] = as_float(v.z), x[3] = as_float(v.w);
#else
      const uint u[4] = {v.x, v.y, v.z, v.w};
      MMA_UNROLL for (int i = 0; i < 4; ++i)
        x[2 * i] = (ushort)(u[i] & 0xffffu), x[2 * i + 1] = (ushort)(u[i] >> 16);
#endif
    } else {
      MMA_UNROLL for (int i = 0; i < RW_EPC; ++i) x[i] = ok ? raw[at + i] : (fcl_raw)0;
    }
    if (e < total)
      MMA_UNROLL for (int i = 0; i < RW_EPC; ++i) dst[t * ld + c + i] = FCL_RAW_F32(x[i]);
  }
}
#undef RW_ROW_AT
