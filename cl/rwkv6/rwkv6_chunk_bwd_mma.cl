/* requires: rwkv6/rwkv6_chunk_out_mma.cl */
/* The first phase of the chunked RWKV6 backward's dr dk dw kernel on
 * NVIDIA tensor cores (prepend what rwkv6_chunk_out_mma.cl needs; then
 * rwkv6_chunk_bwd.cl, whose fcl_rwkv6_chunk_dk calls this in place of its
 * portable loop when RW_DK_MMA is 1): per chunk and BK key columns,
 *   dA[t][s] = scale * dO_t . v_s (s <= t),  qs[t][i] = dO_t . S[i],
 *   ks[s][i] = v_s . D[i],                   dg[i] = D[i] . S[i],
 * the first three in m16n8k16 mma.sync (dO, v as stored; S, D rounded to
 * 16 bits, as stored for 16-bit data; f32 data split, as
 * rwkv6_chunk_rows.cl says), one warp per
 * sub-chunk of 16 rows, over value tiles of BV columns; dg in f32. The
 * results land where the portable loop puts them (da packed by rows, qs
 * and ks [TC][BK], dg_s). WG = TC / 16 warps. */
#define RW_DK_MMA 1
#define RW_DG_TERMS (16 / (int)sizeof(rw_ck_t)) /* checkpoint elements a dg partial sums */
#define LDB (BV + 8) /* 16-bit tile pitch: 16-byte rows, ldmatrix */
/* The first phase's floats of the kernel's pool: its 16-bit tiles, then
 * dg's partial sums (rwkv6_chunk_bwd.cl sizes the pool by it). */
#define RW_DK_P1 (RW_PARTS * (TC + BK) * LDB + BK * BV / 4)

#if TC % 16 || BK % 16 || BV % 16 || WG != TC * 2
#error "the tensor-core dr dk dw: TC, BK, BV multiples of 16 and TC / 16 warps"
#endif

static inline void rw_dk_products_mma(const __global fcl_elem *v, const __global fcl_elem *dout,
                               RW_TENSOR(v), RW_TENSOR(do), const __global rw_ck_t *cks,
                               const __global rw_ck_t *ckd, long ck_at, rw_seq s, int p0,
                               int nt, int k0, float scale, int flags, __local float *pool,
                               __local float *da, __local float *qs, __local float *ks,
                               __local float *dg_s, int lid MMA_EMU_PARAM) {
  /* Each tile and, split, its lo twin right after it. */
  __local ushort *do16 = (__local ushort *)pool, *v16 = do16 + RW_PARTS * TC * LDB;
  __local ushort *S16 = v16 + RW_PARTS * TC * LDB, *D16 = S16 + RW_PARTS * BK * LDB;
  __local float *dg_p = (__local float *)(D16 + RW_PARTS * BK * LDB); /* [BK][BV / RW_DG_TERMS] */
  const int lt = RW_LO(TC * LDB), lb = RW_LO(BK * LDB);
  const int lane = lid & 31, warp = lid >> 5, g = lane >> 2, tq = lane & 3;
  float4 a_acc[2 * NSUB], q_acc[BK / 8], k_acc[BK / 8];
  MMA_UNROLL for (int n = 0; n < 2 * NSUB; ++n) a_acc[n] = (float4)(0.0f);
  MMA_UNROLL for (int n = 0; n < BK / 8; ++n) q_acc[n] = k_acc[n] = (float4)(0.0f);
  float dg = 0.0f;
  for (int j0 = 0; j0 < V_DIM; j0 += BV) {
    rw_rows16(do16, lt, LDB, TC, BV, V_DIM - j0, dout, RW_T(do), j0, s, p0, flags, lid, WG);
    rw_rows16(v16, lt, LDB, TC, BV, V_DIM - j0, v, RW_T(v), j0, s, p0, flags, lid, WG);
    mma_cp_commit();
    /* S and D's rows k0 .. k0 + BK, columns j0 .. j0 + BV, by 16-byte loads;
     * D . S (dw's base) in f32 from the same loads: of the 16-bit
     * checkpoints as stored (RW_CK16), else of f32 ones, split here. */
#if RW_CK16
    MMA_UNROLL for (int q = 0; q < FCL_CEIL_DIV(BK * BV / 8, WG); ++q) {
      const int e = lid + q * WG, i = e / (BV / 8), j = (e - i * (BV / 8)) * 8;
      const bool ok = e < BK * BV / 8 && nt > 0 && j0 + j < V_DIM;
      const long at = ck_at + (long)(k0 + i) * V_DIM + j0 + j;
      const uint4 xs = ok ? *(const __global uint4 *)(cks + at) : (uint4)(0u);
      const uint4 xd = ok ? *(const __global uint4 *)(ckd + at) : (uint4)(0u);
      if (e < BK * BV / 8) {
        *(__local uint4 *)(S16 + i * LDB + j) = xs, *(__local uint4 *)(D16 + i * LDB + j) = xd;
        const uint ps[4] = {xs.x, xs.y, xs.z, xs.w}, pd[4] = {xd.x, xd.y, xd.z, xd.w};
        float x = 0.0f;
        MMA_UNROLL for (int h = 0; h < 8; ++h) {
          const uint sh = (uint)(h & 1) * 16u;
          x = fma(MMA_OP_F32((ushort)(pd[h >> 1] >> sh)),
                  MMA_OP_F32((ushort)(ps[h >> 1] >> sh)), x);
        }
        dg_p[i * (BV / RW_DG_TERMS) + j / RW_DG_TERMS] = x;
      }
    }
#else
    MMA_UNROLL for (int q = 0; q < FCL_CEIL_DIV(BK * BV / 4, WG); ++q) {
      const int e = lid + q * WG, i = e / (BV / 4), j = (e - i * (BV / 4)) * 4;
      const bool ok = e < BK * BV / 4 && nt > 0 && j0 + j < V_DIM;
      const long at = ck_at + (long)(k0 + i) * V_DIM + j0 + j;
      const float4 xs = ok ? *(const __global float4 *)(cks + at) : (float4)(0.0f);
      const float4 xd = ok ? *(const __global float4 *)(ckd + at) : (float4)(0.0f);
      if (e < BK * BV / 4) {
        rw_st16(S16, i * LDB + j, lb, xs.x), rw_st16(S16, i * LDB + j + 1, lb, xs.y);
        rw_st16(S16, i * LDB + j + 2, lb, xs.z), rw_st16(S16, i * LDB + j + 3, lb, xs.w);
        rw_st16(D16, i * LDB + j, lb, xd.x), rw_st16(D16, i * LDB + j + 1, lb, xd.y);
        rw_st16(D16, i * LDB + j + 2, lb, xd.z), rw_st16(D16, i * LDB + j + 3, lb, xd.w);
        dg_p[i * (BV / RW_DG_TERMS) + j / RW_DG_TERMS] =
            fma(xd.w, xs.w, fma(xd.z, xs.z, fma(xd.y, xs.y, xd.x * xs.x)));
      }
    }
#endif
    mma_cp_wait_all();
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < BK) /* in a fixed order */
      for (int jj = 0; jj < BV / RW_DG_TERMS; ++jj) dg += dg_p[lid * (BV / RW_DG_TERMS) + jj];
    barrier(CLK_LOCAL_MEM_FENCE);
    MMA_UNROLL for (int kk = 0; kk < BV / 16; ++kk) {
      const int ra = (warp * 16 + (lane & 15)) * LDB + kk * 16 + (lane >> 4) * 8;
      const uint4 ad = mma_ldsm_x4(do16, ra), av = mma_ldsm_x4(v16, ra);
      const uint4 adl = RW_LDSM_LO(do16, lt, ra), avl = RW_LDSM_LO(v16, lt, ra);
      const int rb = ((lane >> 4) * 8 + (lane & 7)) * LDB + kk * 16 + ((lane >> 3) & 1) * 8;
      MMA_UNROLL for (int J = 0; J < NSUB; ++J) {
        MMA_SPECIAL(J <= warp) { /* dA's blocks s <= t (emulated: all, kept if so) */
          const uint4 b = mma_ldsm_x4(v16, J * 16 * LDB + rb);
          const uint4 bl = RW_LDSM_LO(v16, lt, J * 16 * LDB + rb);
          const float4 c0 = RW_MMA(ad, adl, b.xy, bl.xy, a_acc[2 * J]);
          const float4 c1 = RW_MMA(ad, adl, b.zw, bl.zw, a_acc[2 * J + 1]);
          if (J <= warp) a_acc[2 * J] = c0, a_acc[2 * J + 1] = c1;
        }
      }
      MMA_UNROLL for (int ip = 0; ip < BK / 16; ++ip) {
        const int o = ip * 16 * LDB + rb;
        const uint4 bs = mma_ldsm_x4(S16, o), bsl = RW_LDSM_LO(S16, lb, o);
        const uint4 bd = mma_ldsm_x4(D16, o), bdl = RW_LDSM_LO(D16, lb, o);
        q_acc[2 * ip] = RW_MMA(ad, adl, bs.xy, bsl.xy, q_acc[2 * ip]);
        q_acc[2 * ip + 1] = RW_MMA(ad, adl, bs.zw, bsl.zw, q_acc[2 * ip + 1]);
        k_acc[2 * ip] = RW_MMA(av, avl, bd.xy, bdl.xy, k_acc[2 * ip]);
        k_acc[2 * ip + 1] = RW_MMA(av, avl, bd.zw, bdl.zw, k_acc[2 * ip + 1]);
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

/* The second phase's sums over other sub-chunks on tensor cores: for t in
 * sub-chunk I (warp I) and key column i,
 *   xr[t][i] = sum_{J<I} ex[I-1][J][i] sum_{s in J} dA[t][s] k_s[i] fk_s[i]
 *   xk[s][i] = sum_{J>I} ex[J-1][I][i] sum_{t in J} dA[t][s] r_t[i] fq_t[i]
 * without the pairs (t, t - 1) and (s + 1, s), which the portable loop
 * adds apart. Products over 16 positions a k-step: dA (rounded to 16 bits,
 * its excluded pair set to 0) times k fk ex (r fq ex) rounded to 16 bits,
 * f32 accumulation; every factor e^{..} <= 1 (rwkv6_chunk_common.cl), so
 * nothing overflows the 16-bit operands that the inputs do not. Results
 * to xr and xk ([TC][BK], where the portable loop reads them). */
static inline void rw_dk_intra_mma(__local const float *da, __local const float *r_s,
                                   __local const float *k_s, __local const float *fq,
                                   __local const float *fk, __local const float *ex,
                                   __local float *xr, __local float *xk,
                                   int lid MMA_EMU_PARAM) {
  const int lane = lid & 31, I = lid >> 5, g = lane >> 2, tq = lane & 3;
  const int r0 = I * 16 + g, r1 = r0 + 8; /* this lane's rows: t (dr), s (dk) */
  float4 cr[BK / 8], ck[BK / 8];
  MMA_UNROLL for (int n = 0; n < BK / 8; ++n) cr[n] = ck[n] = (float4)(0.0f);
  MMA_UNROLL for (int J = 0; J < NSUB; ++J) {
    /* dr: A = dA[rows of I][s in J], B = (k fk ex)[s in J][i] (J < I). */
    MMA_SPECIAL(J < I) { /* emulated: every warp, kept where J < I */
      const int s0 = J * 16 + 2 * tq;
      float a[8]; /* (r0, s0), (r0, s0+1), (r1, s0), (r1, s0+1), then s + 8 */
      MMA_UNROLL for (int h = 0; h < 2; ++h) {
        const int s = s0 + 8 * h;
        a[4 * h] = da[RW_TRI(r0, s)], a[4 * h + 1] = da[RW_TRI(r0, s + 1)];
        a[4 * h + 2] = da[RW_TRI(r1, s)], a[4 * h + 3] = da[RW_TRI(r1, s + 1)];
      }
      if (g == 0 && tq == 3 && J == I - 1) a[5] = 0.0f; /* (t, t - 1), t = 16 I */
      const uint4 af = (uint4)(mma_pack(a[0], a[1]), mma_pack(a[2], a[3]),
                               mma_pack(a[4], a[5]), mma_pack(a[6], a[7]));
      const uint4 afl = (uint4)(RW_PACK_LO(a[0], a[1], af.x), RW_PACK_LO(a[2], a[3], af.y),
                                RW_PACK_LO(a[4], a[5], af.z), RW_PACK_LO(a[6], a[7], af.w));
      const int xi = ((max(I, 1) - 1) * NSUB + J) * BK;
      MMA_UNROLL for (int n = 0; n < BK / 8; ++n) {
        const int i = n * 8 + g;
        float b[4];
        MMA_UNROLL for (int q = 0; q < 4; ++q) {
          const int s = s0 + (q & 1) + 8 * (q >> 1);
          b[q] = k_s[s * BK + i] * fk[s * BK + i] * ex[xi + i];
        }
        const uint2 bh = (uint2)(mma_pack(b[0], b[1]), mma_pack(b[2], b[3]));
        const uint2 bl = (uint2)(RW_PACK_LO(b[0], b[1], bh.x), RW_PACK_LO(b[2], b[3], bh.y));
        const float4 c = RW_MMA(af, afl, bh, bl, cr[n]);
        if (J < I) cr[n] = c;
      }
    }
    /* dk: A = dA^T[rows s of I][t in J], B = (r fq ex)[t in J][i] (J > I). */
    MMA_SPECIAL(J > I) {
      const int t0 = J * 16 + 2 * tq;
      float a[8]; /* (r0, t0), (r0, t0+1), (r1, t0), (r1, t0+1), then t + 8 */
      MMA_UNROLL for (int h = 0; h < 2; ++h) {
        const int t = t0 + 8 * h;
        a[4 * h] = da[RW_TRI(t, r0)], a[4 * h + 1] = da[RW_TRI(t + 1, r0)];
        a[4 * h + 2] = da[RW_TRI(t, r1)], a[4 * h + 3] = da[RW_TRI(t + 1, r1)];
      }
      if (g == 7 && tq == 0 && J == I + 1) a[2] = 0.0f; /* (s + 1, s), s = 16 I + 15 */
      const uint4 af = (uint4)(mma_pack(a[0], a[1]), mma_pack(a[2], a[3]),
                               mma_pack(a[4], a[5]), mma_pack(a[6], a[7]));
      const uint4 afl = (uint4)(RW_PACK_LO(a[0], a[1], af.x), RW_PACK_LO(a[2], a[3], af.y),
                                RW_PACK_LO(a[4], a[5], af.z), RW_PACK_LO(a[6], a[7], af.w));
      const int xi = ((max(J, 1) - 1) * NSUB + I) * BK;
      MMA_UNROLL for (int n = 0; n < BK / 8; ++n) {
        const int i = n * 8 + g;
        float b[4];
        MMA_UNROLL for (int q = 0; q < 4; ++q) {
          const int t = t0 + (q & 1) + 8 * (q >> 1);
          b[q] = r_s[t * BK + i] * fq[t * BK + i] * ex[xi + i];
        }
        const uint2 bh = (uint2)(mma_pack(b[0], b[1]), mma_pack(b[2], b[3]));
        const uint2 bl = (uint2)(RW_PACK_LO(b[0], b[1], bh.x), RW_PACK_LO(b[2], b[3], bh.y));
        const float4 c = RW_MMA(af, afl, bh, bl, ck[n]);
        if (J > I) ck[n] = c;
      }
    }
  }
  MMA_UNROLL for (int n = 0; n < BK / 8; ++n) {
    const int i = n * 8 + 2 * tq;
    xr[r0 * BK + i] = cr[n].x, xr[r0 * BK + i + 1] = cr[n].y;
    xr[r1 * BK + i] = cr[n].z, xr[r1 * BK + i + 1] = cr[n].w;
    xk[r0 * BK + i] = ck[n].x, xk[r0 * BK + i + 1] = ck[n].y;
    xk[r1 * BK + i] = ck[n].z, xk[r1 * BK + i + 1] = ck[n].w;
  }
}
