/* The first phase of the chunked RWKV6 backward's dr dk dw kernel on
 * NVIDIA tensor cores (prepend what rwkv6_chunk_out_mma.cl needs; then
 * rwkv6_chunk_bwd.cl, whose fcl_rwkv6_chunk_dk calls this in place of its
 * portable loop when RW_DK_MMA is 1): per chunk and BK key columns,
 *   dA[t][s] = scale * dO_t . v_s (s <= t),  qs[t][i] = dO_t . S[i],
 *   ks[s][i] = v_s . D[i],                   dg[i] = D[i] . S[i],
 * the first three in m16n8k16 mma.sync (dO, v as stored; S, D rounded to
 * 16 bits), one warp per sub-chunk of 16 rows, over value tiles of BV
 * columns; dg in f32. The results land where the portable loop puts them
 * (da packed by rows, qs and ks [TC][BK], dg_s). WG = TC / 16 warps. */
#define RW_DK_MMA 1
#define LDB (BV + 8) /* 16-bit tile pitch: 16-byte rows, ldmatrix */

#if TC % 16 || BK % 16 || BV % 16 || WG != TC * 2
#error "the tensor-core dr dk dw: TC, BK, BV multiples of 16 and TC / 16 warps"
#endif

static inline void rw_dk_products_mma(const __global fcl_elem *v, const __global fcl_elem *dout,
                               RW_TENSOR(v), RW_TENSOR(do), const __global float *cks,
                               const __global float *ckd, long ck_at, rw_seq s, int p0,
                               int nt, int k0, float scale, int flags, __local float *pool,
                               __local float *da, __local float *qs, __local float *ks,
                               __local float *dg_s, int lid MMA_EMU_PARAM) {
  __local ushort *do16 = (__local ushort *)pool, *v16 = do16 + TC * LDB;
  __local ushort *S16 = v16 + TC * LDB, *D16 = S16 + BK * LDB;
  const int lane = lid & 31, warp = lid >> 5, g = lane >> 2, tq = lane & 3;
  float4 a_acc[2 * NSUB], q_acc[BK / 8], k_acc[BK / 8];
  MMA_UNROLL for (int n = 0; n < 2 * NSUB; ++n) a_acc[n] = (float4)(0.0f);
  MMA_UNROLL for (int n = 0; n < BK / 8; ++n) q_acc[n] = k_acc[n] = (float4)(0.0f);
  float dg = 0.0f;
  const long vb = rw_at(RW_T(v), s, 0, flags), db = rw_at(RW_T(do), s, 0, flags);
  for (int j0 = 0; j0 < V_DIM; j0 += BV) {
    /* Loads in batches of RW_BATCH before their stores (rw_load_chunk). */
    for (int e0 = lid; e0 < TC * BV; e0 += RW_BATCH * WG) {
      ushort xd[RW_BATCH], xv[RW_BATCH];
      MMA_UNROLL for (int q = 0; q < RW_BATCH; ++q) {
        const int e = e0 + q * WG, t = e / BV, j = e - t * BV;
        const bool ok = e < TC * BV && t < nt && j0 + j < V_DIM;
        const long tt = rw_time(min(p0 + t, s.n - 1), s.n, flags);
        xd[q] = ok ? (ushort)FCL_LOAD_RAW(dout, db + tt * do_ss + j0 + j) : (ushort)0;
        xv[q] = ok ? (ushort)FCL_LOAD_RAW(v, vb + tt * v_ss + j0 + j) : (ushort)0;
      }
      MMA_UNROLL for (int q = 0; q < RW_BATCH; ++q) {
        const int e = e0 + q * WG, t = e / BV, j = e - t * BV;
        if (e < TC * BV) do16[t * LDB + j] = xd[q], v16[t * LDB + j] = xv[q];
      }
    }
    for (int e0 = lid; e0 < BK * BV; e0 += RW_BATCH * WG) {
      float xs[RW_BATCH], xd[RW_BATCH];
      MMA_UNROLL for (int q = 0; q < RW_BATCH; ++q) {
        const int e = e0 + q * WG, i = e / BV, j = e - i * BV;
        const bool ok = e < BK * BV && nt > 0 && k0 + i < K_DIM && j0 + j < V_DIM;
        const long at = ck_at + (long)(k0 + i) * V_DIM + j0 + j;
        xs[q] = ok ? cks[at] : 0.0f;
        xd[q] = ok ? ckd[at] : 0.0f;
      }
      MMA_UNROLL for (int q = 0; q < RW_BATCH; ++q) {
        const int e = e0 + q * WG, i = e / BV, j = e - i * BV;
        if (e < BK * BV) rw_st16(S16, i * LDB + j, xs[q]), rw_st16(D16, i * LDB + j, xd[q]);
      }
    }
    if (lid < BK && nt > 0 && k0 + lid < K_DIM) /* in f32: D . S is dw's base */
      MMA_UNROLL for (int jj = 0; jj < BV; ++jj) { /* unrolled: the loads in flight together */
        const long at = ck_at + (long)(k0 + lid) * V_DIM + j0 + jj;
        if (j0 + jj < V_DIM) dg = fma(ckd[at], cks[at], dg);
      }
    barrier(CLK_LOCAL_MEM_FENCE);
    MMA_UNROLL for (int kk = 0; kk < BV / 16; ++kk) {
      const int ra = (warp * 16 + (lane & 15)) * LDB + kk * 16 + (lane >> 4) * 8;
      const uint4 ad = mma_ldsm_x4(do16, ra), av = mma_ldsm_x4(v16, ra);
      const int rb = ((lane >> 4) * 8 + (lane & 7)) * LDB + kk * 16 + ((lane >> 3) & 1) * 8;
      MMA_UNROLL for (int J = 0; J < NSUB; ++J) {
        MMA_SPECIAL(J <= warp) { /* dA's blocks s <= t (emulated: all, kept if so) */
          const uint4 b = mma_ldsm_x4(v16, J * 16 * LDB + rb);
          const float4 c0 = mma_16816(ad, b.xy, a_acc[2 * J]);
          const float4 c1 = mma_16816(ad, b.zw, a_acc[2 * J + 1]);
          if (J <= warp) a_acc[2 * J] = c0, a_acc[2 * J + 1] = c1;
        }
      }
      MMA_UNROLL for (int ip = 0; ip < BK / 16; ++ip) {
        const uint4 bs = mma_ldsm_x4(S16, ip * 16 * LDB + rb);
        const uint4 bd = mma_ldsm_x4(D16, ip * 16 * LDB + rb);
        q_acc[2 * ip] = mma_16816(ad, bs.xy, q_acc[2 * ip]);
        q_acc[2 * ip + 1] = mma_16816(ad, bs.zw, q_acc[2 * ip + 1]);
        k_acc[2 * ip] = mma_16816(av, bd.xy, k_acc[2 * ip]);
        k_acc[2 * ip + 1] = mma_16816(av, bd.zw, k_acc[2 * ip + 1]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  /* Fragments to their places: lane (g, tq) holds rows g, g + 8 and
   * columns 2 tq, 2 tq + 1 of each n8 tile. */
  const int t0 = warp * 16 + g, t1 = t0 + 8;
  MMA_UNROLL for (int n = 0; n < 2 * NSUB; ++n) {
    const int s0 = n * 8 + 2 * tq;
    const float4 x = a_acc[n] * scale;
    if (s0 <= t0) da[RW_TRI(t0, s0)] = x.x;
    if (s0 + 1 <= t0) da[RW_TRI(t0, s0 + 1)] = x.y;
    if (s0 <= t1) da[RW_TRI(t1, s0)] = x.z;
    if (s0 + 1 <= t1) da[RW_TRI(t1, s0 + 1)] = x.w;
  }
  MMA_UNROLL for (int n = 0; n < BK / 8; ++n) {
    const int i = n * 8 + 2 * tq;
    qs[t0 * BK + i] = q_acc[n].x, qs[t0 * BK + i + 1] = q_acc[n].y;
    qs[t1 * BK + i] = q_acc[n].z, qs[t1 * BK + i + 1] = q_acc[n].w;
    ks[t0 * BK + i] = k_acc[n].x, ks[t0 * BK + i + 1] = k_acc[n].y;
    ks[t1 * BK + i] = k_acc[n].z, ks[t1 * BK + i + 1] = k_acc[n].w;
  }
  if (lid < BK) dg_s[lid] = dg;
}
