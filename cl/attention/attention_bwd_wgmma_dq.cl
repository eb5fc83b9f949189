/* requires: attention/attention_bwd_wgmma_dkdv.cl */
/* The dQ kernel of the backward on Hopper's warpgroup products (after
 * attention_bwd_wgmma_dkdv.cl, whose header says how the two are built and
 * which heads they take). The walk of attention_bwd_mma_dq.cl with its
 * three products on wgmma: a work-group of WQ_WARPS warps (1 or 2
 * warpgroups of 64 query rows) owns 16 * WQ_WARPS rows of one query head,
 * Q and dO in local memory (WQ_LOCAL_OPS = 2: both operands of S and dP
 * there) or in registers as wgmma's A fragments (WQ_LOCAL_OPS = 1: 64
 * registers at D = 128, and 32 KiB of local memory for two more stages),
 * and walks tiles of WQ_BLOCK_N keys in
 * WQ_STAGES buffers:
 *   S = Q K^T, dP = dO V^T   (A from local memory or registers, B K-major);
 *   dQ += dS K               (dS from registers; B the same K tile, read
 *                             N-major).
 * Three stages overlap dQ's product of key tile t - 1 with the scores of
 * tile t, as the dK/dV kernel's three-stage step does.
 * Each warp's 16 rows keep mma.sync's layouts (attention_bwd_mma.cl's
 * scores and stores, and its dropout: BM_DROP). Only in the build without
 * FCL_NONFINITE. */
#if !FCL_NONFINITE

/* Its work-group and tiles (attention_bwd_mma.cl's BM_WG ...). */
#define WQ_WG BM_WG(WQ_WARPS)
#define WQ_BLOCK_M BM_BLOCK_M(WQ_WARPS)
#define WQ_NT BM_NT(WQ_BLOCK_N)

#ifndef WQ_LOCAL_OPS
#define WQ_LOCAL_OPS 2
#endif
#define WQ_AREG (WQ_LOCAL_OPS == 1)
/* The keep bits zb of this lane's pairs in the key tile from j0, as
 * attention_bwd_mma_dq.cl draws them, where on_: before the tile's
 * products are issued, as the wgmma forward draws its own (there, drawn
 * between a product and its wait, they made ptxas serialize the products:
 * C7513). Without dropout none (BM_DROP then ignores zb). */
#if FCL_DROPOUT
#define WQ_DROP_BITS(on_)                                                                     \
  uint zb[MMA_DROP_WORDS(WQ_BLOCK_N)];                                                        \
  if (on_)                                                                                    \
  MMA_DROP_COLS_BITS(zb, WQ_BLOCK_N, BM_DROP_INDEX(h, ra, j0), BM_DROP_INDEX(h, rb, j0),      \
                     drop_args_)
#else
#define WQ_DROP_BITS(on_) (void)0
#endif
#if MT != 1 || WQ_BLOCK_N % 16 || WQ_BLOCK_N > 128 || WQ_WARPS % 4 || WQ_WARPS > 8 || \
    WQ_STAGES < 1 || WQ_STAGES > 3 || WQ_LOCAL_OPS < 1 || WQ_LOCAL_OPS > 2
#error "attention_bwd_wgmma_dq: WQ_BLOCK_N among wgmma's N, 4 or 8 warps, WQ_LOCAL_OPS 1 or 2"
#endif

__kernel __attribute__((reqd_work_group_size(WQ_WG, 1, 1)))
void fcl_attention_bwd_wgmma_dq(BM_COMMON_ARGS, __global fcl_elem *dq, BM_TENSOR(dq)) {
#if !WQ_AREG
  __local ushort q_s[WQ_BLOCK_M * HEAD_DIM] __attribute__((aligned(1024)));
  __local ushort o_s[WQ_BLOCK_M * HEAD_DIM_V] __attribute__((aligned(1024))); /* dO */
#endif
  __local ushort k_s[WQ_STAGES * WQ_BLOCK_N * HEAD_DIM] __attribute__((aligned(1024)));
  __local ushort v_s[WQ_STAGES * WQ_BLOCK_N * HEAD_DIM_V] __attribute__((aligned(1024)));
  MMA_EMU_DECL(WQ_WARPS)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int rblk = get_num_groups(0) - 1 - get_group_id(0); /* the most keys first */
  const int b = get_group_id(2) / heads_q, h = get_group_id(2) % heads_q;
  const int hk = h / group;
  if (nf_flags[hk] != 0) return; /* attention_bwd_mma_dq.cl's, built with FCL_NONFINITE */
  const bm_seq s = bm_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, flags & 4, stat_sb);
  const int i0 = rblk * WQ_BLOCK_M;
  if (i0 >= s.sq) return;
  const long qb = bm_base(q_off, q_sb, q_ss, q_sh, b, s.q_tok, h);
  const long dob = bm_base(do_off, do_sb, do_ss, do_sh, b, s.q_tok, h);
  const long kb = bm_base(k_off, k_sb, k_ss, k_sh, b, s.k_tok, hk);
  const long vb = bm_base(v_off, v_sb, v_ss, v_sh, b, s.k_tok, hk);
  const int diag = s.sk - s.sq + diag_shift, sk = s.sk, sq = s.sq; /* row i at key i + diag */
  const float slope_l2 = (flags & 2) ? alibi[h] * FCL_LOG2E : 0.0f;
  const int qr0 = (warp >> 2) * 64;               /* this warpgroup's rows in the block */
  const int ra = i0 + warp * 16 + g, rb = ra + 8; /* this lane's rows */
  float lse2[2], dl[2];
  MMA_UNROLL for (int e = 0; e < 2; ++e) {
    const long st = s.stat_row0 + (long)h * stat_sh + min(ra + 8 * e, s.sq - 1);
    const float a = lse[st];
    lse2[e] = a == -INFINITY ? INFINITY : a * FCL_LOG2E;
    dl[e] = delta[st];
  }
  const int i_last = min(i0 + WQ_BLOCK_M, s.sq) - 1;
  const int j_lo = max(0, i0 + diag - wl);
  const int j_hi = min(sk - 1, i_last + diag + wr);
  const int jt0 = (j_lo / WQ_BLOCK_N) * WQ_BLOCK_N;
  const int ntiles = j_hi >= jt0 ? (j_hi - jt0) / WQ_BLOCK_N + 1 : 0;
  /* Key tile it's K and V into stage stg (committed as one group). */
#define WQ_LOAD(it_, stg_)                                                                         \
  do {                                                                                             \
    wg_tile_load(k_s + (stg_) * WQ_BLOCK_N * HEAD_DIM, WQ_BLOCK_N, HEAD_DIM, k, kb, k_ss,          \
                 jt0 + (it_) * WQ_BLOCK_N, sk, lid, WQ_WG);                                        \
    wg_tile_load(v_s + (stg_) * WQ_BLOCK_N * HEAD_DIM_V, WQ_BLOCK_N, HEAD_DIM_V, v, vb, v_ss,      \
                 jt0 + (it_) * WQ_BLOCK_N, sk, lid, WQ_WG);                                        \
    mma_cp_commit();                                                                               \
  } while (0)

#if WQ_AREG
  uint4 qf[HEAD_DIM / 16], of[HEAD_DIM_V / 16]; /* Q and dO, A fragments */
  if (ntiles > 0) WQ_LOAD(0, 0);
  wg_afrags(qf, HEAD_DIM / 16, q, qb, q_ss, ra, s.sq);
  wg_afrags(of, HEAD_DIM_V / 16, dout, dob, do_ss, ra, s.sq);
  /* S = Q K^T, dP = dO V^T of the tiles kt, vt, issued only; after their
   * wait, Q and dO are renewed (WG_RENEW_A) and tied. */
#define WQ_SCORES_ISSUE(sc, dp, kt, vt)                                                       \
  WG_RSK_ISSUE(sc, qf, kt, HEAD_DIM, WQ_BLOCK_N);                                             \
  WG_RSK_ISSUE(dp, of, vt, HEAD_DIM_V, WQ_BLOCK_N)
#define WQ_SCORES_DONE()                                                                      \
  do {                                                                                        \
    WG_RENEW_A(qf, HEAD_DIM / 16);                                                            \
    WG_RENEW_A(of, HEAD_DIM_V / 16);                                                          \
    WG_TIE_A(qf, HEAD_DIM / 16);                                                              \
    WG_TIE_A(of, HEAD_DIM_V / 16);                                                            \
  } while (0)
#else
  wg_tile_load(q_s, WQ_BLOCK_M, HEAD_DIM, q, qb, q_ss, i0, s.sq, lid, WQ_WG);
  wg_tile_load(o_s, WQ_BLOCK_M, HEAD_DIM_V, dout, dob, do_ss, i0, s.sq, lid, WQ_WG);
  mma_cp_commit();
  if (ntiles > 0) WQ_LOAD(0, 0);
#define WQ_SCORES_ISSUE(sc, dp, kt, vt) \
  WK_SCORES_ISSUE(sc, dp, q_s, o_s, qr0, kt, vt, WQ_BLOCK_M, WQ_BLOCK_N)
#define WQ_SCORES_DONE() (void)0
#endif

  float4 acc[HEAD_DIM / 8];
  MMA_UNROLL for (int n = 0; n < HEAD_DIM / 8; ++n) acc[n] = (float4)(0.0f);

  /* Every (row, key) pair of key tile j0 inside the window and sk. */
#define WQ_FULL \
  (j0 >= i_last + diag - wl && j0 + WQ_BLOCK_N - 1 <= i0 + diag + wr && j0 + WQ_BLOCK_N <= sk)
  /* General scores walk two of three buffers (the dK/dV kernel says why). */
#define WQ_OVERLAP (WQ_STAGES == 3 && !MMA_GENERAL)
#if !WQ_OVERLAP
  for (int it = 0; it < ntiles; ++it) {
    const int j0 = jt0 + it * WQ_BLOCK_N, cur = WQ_STAGES >= 2 ? (it & 1) : 0;
    mma_cp_wait_all(); /* tile it (and, the first time, Q and dO) */
    wg_fence_proxy();
    barrier(CLK_LOCAL_MEM_FENCE);
    /* With two stages the next tile comes into the one that tile it - 1
     * read: every warpgroup waited for its products before the barrier. */
    if (WQ_STAGES >= 2 && it + 1 < ntiles) WQ_LOAD(it + 1, cur ^ 1);
    __local const ushort *kt = k_s + cur * WQ_BLOCK_N * HEAD_DIM;
    __local const ushort *vt = v_s + cur * WQ_BLOCK_N * HEAD_DIM_V;
    WQ_DROP_BITS(1);

    WK_SCORES_RUN(sc, dp, WQ_SCORES_ISSUE(sc, dp, kt, vt), WQ_NT); /* S = Q K^T, dP = dO V^T */
    WQ_SCORES_DONE();

    const bool full = WQ_FULL;
    uint4 dsf[WQ_NT / 2]; /* dS as A fragments, k = keys */
    MMA_UNROLL for (int n = 0; n < WQ_NT; ++n) {
      const int j = j0 + n * 8 + 2 * t4;
      float4 ds;
      float p;
      dp[n] = BM_DROP(dp[n], zb, n);
      ds.x = bm_ds(sc[n].x, dp[n].x, ra, j, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2,
                   slope_l2, lse2[0], dl[0], scale, &p);
      ds.y = bm_ds(sc[n].y, dp[n].y, ra, j + 1, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2,
                   slope_l2, lse2[0], dl[0], scale, &p);
      ds.z = bm_ds(sc[n].z, dp[n].z, rb, j, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2,
                   slope_l2, lse2[1], dl[1], scale, &p);
      ds.w = bm_ds(sc[n].w, dp[n].w, rb, j + 1, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2,
                   slope_l2, lse2[1], dl[1], scale, &p);
      MMA_PACK_A(dsf, n, ds);
    }

    WG_TIE(acc, HEAD_DIM / 8);
    wg_fence();
    MMA_UNROLL for (int kk = 0; kk < WQ_BLOCK_N / 16; ++kk) /* K: rows k */
      WG_RS(HEAD_DIM)(acc, dsf[kk], wg_desc_n(kt, WQ_BLOCK_N, HEAD_DIM, kk * 16));
    wg_commit();
    wg_wait0();
    WG_TIE_A(dsf, WQ_NT / 2); /* dS stays until here (wgmma.cl) */
    WG_TIE(acc, HEAD_DIM / 8);
    if (WQ_STAGES == 1) { /* the next tile into the one stage, once all have read it */
      barrier(CLK_LOCAL_MEM_FENCE);
      if (it + 1 < ntiles) WQ_LOAD(it + 1, 0);
    }
  }
#else
  /* dS of key tile j0 from sc and dp, select-masked (wk_ds_sel): key j
   * sees row r where (uint)(j - r - diag + wl) <= wl + wr, and j < sk (K
   * past sk is 0, but dS there need not be finite). */
#define WQ_DS_SEL(dsf_)                                                                       \
  {                                                                                           \
    const bool full = WQ_FULL;                                                                \
    const uint range = full ? 0xffffffffu : (uint)(wl + wr);                                  \
    const int da = j0 + 2 * t4 - ra - diag + wl, db = da - 8; /* rb = ra + 8 */               \
    const int kl = sk - j0 - 2 * t4;                          /* key n * 8 + e < kl */        \
    MMA_UNROLL for (int n = 0; n < WQ_NT; ++n) {                                              \
      float4 ds;                                                                              \
      float p;                                                                                \
      const bool k0 = n * 8 < kl, k1 = n * 8 + 1 < kl;                                        \
      dp[n] = BM_DROP(dp[n], zb, n);                                                          \
      ds.x = wk_ds_sel(sc[n].x, dp[n].x, k0 & ((uint)(da + 8 * n) <= range), qk_scale,        \
                       lse2[0], dl[0], scale, &p);                                            \
      ds.y = wk_ds_sel(sc[n].y, dp[n].y, k1 & ((uint)(da + 8 * n + 1) <= range), qk_scale,    \
                       lse2[0], dl[0], scale, &p);                                            \
      ds.z = wk_ds_sel(sc[n].z, dp[n].z, k0 & ((uint)(db + 8 * n) <= range), qk_scale,        \
                       lse2[1], dl[1], scale, &p);                                            \
      ds.w = wk_ds_sel(sc[n].w, dp[n].w, k1 & ((uint)(db + 8 * n + 1) <= range), qk_scale,    \
                       lse2[1], dl[1], scale, &p);                                            \
      MMA_PACK_A(dsf_, n, ds);                                                                \
    }                                                                                         \
  }
  /* Step it: S and dP of key tile it (HAS_S) and dQ += dS K of tile it - 1
   * (HAS_G), issued together (the dK/dV kernel's WK_STEP). */
#define WQ_STEP(HAS_S, HAS_G)                                                                 \
  do {                                                                                        \
    const int j0 = jt0 + it * WQ_BLOCK_N;                                                     \
    mma_cp_wait_all(); /* tile it (and, the first time, Q and dO) */                          \
    wg_fence_proxy();                                                                         \
    barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    if (HAS_S && it + 1 < ntiles) WQ_LOAD(it + 1, (it + 1) % 3);                              \
    __local const ushort *kt = k_s + (it % 3) * WQ_BLOCK_N * HEAD_DIM;                        \
    __local const ushort *vt = v_s + (it % 3) * WQ_BLOCK_N * HEAD_DIM_V;                      \
    __local const ushort *kp = k_s + ((it + 2) % 3) * WQ_BLOCK_N * HEAD_DIM;                  \
    WQ_DROP_BITS(HAS_S);                                                                      \
    WK_SCORES_DECL(sc, dp, WQ_NT);                                                            \
    WG_TIE(acc, HEAD_DIM / 8);                                                                \
    WG_TIE_A(dsf, WQ_NT / 2);                                                                 \
    wg_fence();                                                                               \
    if (HAS_S) {                                                                              \
      WQ_SCORES_ISSUE(sc, dp, kt, vt); /* S = Q K^T, dP = dO V^T */                           \
      wg_commit();                                                                            \
    }                                                                                         \
    if (HAS_G) {                                                                              \
      MMA_UNROLL for (int kk = 0; kk < WQ_BLOCK_N / 16; ++kk) /* K of tile it - 1: rows k */  \
        WG_RS(HEAD_DIM)(acc, dsf[kk], wg_desc_n(kp, WQ_BLOCK_N, HEAD_DIM, kk * 16));          \
      wg_commit();                                                                            \
    }                                                                                         \
    uint4 dsn[WQ_NT / 2]; /* tile it's */                                                     \
    if (HAS_S) {                                                                              \
      if (HAS_G) wg_wait1(); /* S and dP; dQ's product may go on */                           \
      else wg_wait0();                                                                        \
      WG_TIE(sc, WQ_NT);                                                                      \
      WG_TIE(dp, WQ_NT);                                                                      \
      WQ_SCORES_DONE();                                                                       \
      WQ_DS_SEL(dsn);                                                                         \
    }                                                                                         \
    wg_wait0();                                                                               \
    WG_TIE_A(dsf, WQ_NT / 2); /* tile it - 1's stays until here */                            \
    WG_TIE(acc, HEAD_DIM / 8);                                                                \
    if (HAS_S) {                                                                              \
      MMA_UNROLL for (int n_ = 0; n_ < WQ_NT / 2; ++n_) dsf[n_] = dsn[n_];                    \
    }                                                                                         \
  } while (0)

  if (ntiles > 0) {
    uint4 dsf[WQ_NT / 2]; /* tile it - 1's dS */
    MMA_UNROLL for (int n = 0; n < WQ_NT / 2; ++n) dsf[n] = (uint4)(0u);
    int it = 0;
    WQ_STEP(1, 0);
    for (it = 1; it < ntiles; ++it) WQ_STEP(1, 1);
    WQ_STEP(0, 1); /* it = ntiles */
  }
#undef WQ_STEP
#undef WQ_DS_SEL
#endif
#undef WQ_OVERLAP
#undef WQ_FULL
#undef WQ_LOAD
#undef WQ_SCORES_ISSUE
#undef WQ_SCORES_DONE
#undef WQ_AREG
#undef WQ_DROP_BITS

  mma_cp_wait_all(); /* Q and dO, where no tile ran */
  const long dqb = bm_base(dq_off, dq_sb, dq_ss, dq_sh, b, s.q_tok, h);
  BM_STORE_ROWS(dq, dqb, dq_ss, HEAD_DIM, HEAD_DIM / 8, acc, ra, rb, s.sq);
}

#endif /* !FCL_NONFINITE */
