/* Row loads of the chunked RWKV6 tensor-core kernels (prepend dtype.cl,
 * rwkv6_common.cl, mma_warp.cl, mma_common.cl; FCL_DTYPE 1 or 2). Rows
 * are positions of one sequence-head, 0 past its end. Where RW_ALIGNED
 * says that every row of every operand starts at a multiple of 16 bytes, 8
 * elements go in one 16-byte copy; else element by element. Also the
 * 16-bit rounding store they share. */

/* x rounded to the 16-bit dtype (mma_round, mma_common.cl), stored at p[i]. */
inline void rw_st16(__local ushort *p, int i, float x) { p[i] = mma_round(x); }

/* Element offset of column col0 of position p of a strided operand. */
#define RW_ROW_AT(x, pos) (rw_at(RW_T(x), s, rw_time((pos), s.n, flags), flags) + col0)

/* Positions [p0, p0 + nrow) x columns [col0, col0 + ncol) (ncol a multiple
 * of 8) into dst[nrow][ld] as stored, 0 from column col0 + cols on (cols a
 * multiple of 8): by cp.async where aligned (the caller commits and
 * waits), else by loads. */
inline void rw_rows16(__local ushort *dst, int ld, int nrow, int ncol, int cols,
                      const __global fcl_elem *src, long src_off, long src_sb, long src_ss,
                      long src_sh, int col0, rw_seq s, int p0, int flags, int lid,
                      int nthreads) {
  const int cpr = ncol / 8, total = nrow * cpr;
  const __global ushort *src16 = (const __global ushort *)src;
  MMA_UNROLL for (int q = 0; q < FCL_CEIL_DIV(total, nthreads); ++q) {
    const int e = lid + q * nthreads, t = e / cpr, c = (e - t * cpr) * 8, p = p0 + t;
    const bool ok = e < total && p < s.n && c < cols;
    const long at = ok ? RW_ROW_AT(src, p) + c : 0;
    if (e < total) {
      if (flags & RW_ALIGNED) {
        mma_cp16b((__local uchar *)(dst + t * ld + c), (const __global uchar *)(src16 + at),
                  ok ? 16u : 0u);
      } else {
        ushort x[8];
        MMA_UNROLL for (int i = 0; i < 8; ++i) x[i] = ok ? src16[at + i] : (ushort)0;
        MMA_UNROLL for (int i = 0; i < 8; ++i) dst[t * ld + c + i] = x[i];
      }
    }
  }
}

/* ... into f32 dst[nrow][ld], by 16-byte loads where aligned. */
inline void rw_rows16f(__local float *dst, int ld, int nrow, int ncol,
                       const __global fcl_elem *src, long src_off, long src_sb, long src_ss,
                       long src_sh, int col0, rw_seq s, int p0, int flags, int lid,
                       int nthreads) {
  const int cpr = ncol / 8, total = nrow * cpr;
  const __global ushort *src16 = (const __global ushort *)src;
  MMA_UNROLL for (int q = 0; q < FCL_CEIL_DIV(total, nthreads); ++q) {
    const int e = lid + q * nthreads, t = e / cpr, c = (e - t * cpr) * 8, p = p0 + t;
    const bool ok = e < total && p < s.n;
    const long at = ok ? RW_ROW_AT(src, p) + c : 0;
    ushort x[8];
    if (flags & RW_ALIGNED) {
      const uint4 v = ok ? *(const __global uint4 *)(src16 + at) : (uint4)(0u);
      const uint u[4] = {v.x, v.y, v.z, v.w};
      MMA_UNROLL for (int i = 0; i < 4; ++i)
        x[2 * i] = (ushort)(u[i] & 0xffffu), x[2 * i + 1] = (ushort)(u[i] >> 16);
    } else {
      MMA_UNROLL for (int i = 0; i < 8; ++i) x[i] = ok ? src16[at + i] : (ushort)0;
    }
    if (e < total) MMA_UNROLL for (int i = 0; i < 8; ++i) dst[t * ld + c + i] = FCL_RAW_F32(x[i]);
  }
}
#undef RW_ROW_AT
