/* requires: attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl */
/* The dK/dV kernel of the tensor-core backward (after attention_bwd_mma.cl,
 * whose header tells the algorithm, and attention_bwd_mma_dq.cl): a
 * work-group of KV_WARPS warps owns 16 * MT * KV_WARPS keys of one kv head
 * and walks tiles of KV_BLOCK_N queries of every query head of its group,
 * KV_STAGES in flight. */
/* Key r seen by query c. */
#define KV_VISIBLE(r, c) BM_VISIBLE(c, r)
/* ... and kept (dropout): dV's fix-up of non-finite dO adds those only. */
#if FCL_DROPOUT
#define KV_VISIBLE_KEPT(r, c)                                                   \
  (KV_VISIBLE(r, c) && attn_drop_keep(BM_DROP_INDEX(h, c, r), drop_args_))
#else
#define KV_VISIBLE_KEPT KV_VISIBLE
#endif


__kernel __attribute__((reqd_work_group_size(KV_WG, 1, 1)))
void fcl_attention_bwd_mma_dkdv(BM_COMMON_ARGS, __global fcl_elem *dk, BM_TENSOR(dk),
                                __global fcl_elem *dv, BM_TENSOR(dv)) {
  __local ushort k_s[KV_BLOCK_M * LDK] __attribute__((aligned(16))); /* this block's keys */
  /* V of the block, then each stage's Q and dO tiles */
  __local ushort qd_s[DKDV_SIZE] __attribute__((aligned(16)));
  __local float st_s[KV_STAGES][2 * KV_BLOCK_N]; /* lse (log2, +inf: no P) and delta of the tile */
  __local uint nf_s[KV_STAGES][2 * KV_NFW];      /* queries of the Q, dO tiles holding inf or NaN */
  MMA_EMU_DECL(KV_WARPS)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  BM_KV_HEAD;
  if ((nf_flags[hk] != 0) != FCL_NONFINITE) return; /* the other build's */
  BM_KV_BLOCK(KV_BLOCK_M);
  int rk[MT][2]; /* this lane's keys of each m16 tile */
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
    rk[mt][0] = j0 + MT_ROW(mt) + g, rk[mt][1] = rk[mt][0] + 8;

  mma_tile_load(k_s, LDK, KV_BLOCK_M, DP, k, kb, k_ss, j0, sk, HEAD_DIM, lid, KV_WG);
  mma_tile_load(qd_s, LDV, KV_BLOCK_M, DVP, v, vb, v_ss, j0, sk, HEAD_DIM_V, lid, KV_WG);
  mma_cp_commit();
  mma_cp_wait_all();
  barrier(CLK_LOCAL_MEM_FENCE);
  uint4 vf[MT][DVP / 16];
  float4 gk[MT][DP / 8], gv[MT][DVP / 8];
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
    MMA_UNROLL for (int kk = 0; kk < DVP / 16; ++kk)
      vf[mt][kk] = mma_ldsm_x4(qd_s, (MT_ROW(mt) + (lane & 15)) * LDV + kk * 16 + (lane >> 4) * 8);
    MMA_UNROLL for (int n = 0; n < DP / 8; ++n) gk[mt][n] = (float4)(0.0f);
    MMA_UNROLL for (int n = 0; n < DVP / 8; ++n) gv[mt][n] = (float4)(0.0f);
  }

  /* The walk: tiles t = 0 .. ntiles of BLOCK_N queries, per_head of them
   * for each query head of the group. */
  BM_KV_WALK(KV_BLOCK_N);
  /* Tile (th, tr)'s Q and dO into stage stg. */
#define DKDV_LOAD(th_, tr_, stg_)                                                               \
  do {                                                                                          \
    const int h_ = BM_TILE_HEAD(th_), i_ = BM_TILE_ROW0(tr_, KV_BLOCK_N);                       \
    __local ushort *q_ = qd_s + (stg_) * KV_TILE;                                               \
    mma_tile_load(q_, LDK, KV_BLOCK_N, DP, q, bm_base(q_off, q_sb, q_ss, q_sh, b, s.q_tok, h_), \
                  q_ss, i_, s.sq, HEAD_DIM, lid, KV_WG);                                        \
    mma_tile_load(q_ + KV_BLOCK_N * LDK, LDV, KV_BLOCK_N, DVP, dout,                            \
                  bm_base(do_off, do_sb, do_ss, do_sh, b, s.q_tok, h_), do_ss, i_, s.sq,        \
                  HEAD_DIM_V, lid, KV_WG);                                                      \
    mma_cp_commit();                                                                            \
  } while (0)
  /* Tile (th, tr)'s lse (log2; +inf: no P) and delta, this work-item's share, into
   * registers (STATS) and then stage stg (STATS_STORE). */
#define DKDV_STATS(th_, tr_, x_)                                                              \
  do {                                                                                        \
    const int i_ = BM_TILE_ROW0(tr_, KV_BLOCK_N);                                             \
    const long st_ = s.stat_row0 + (long)BM_TILE_HEAD(th_) * stat_sh;                         \
    MMA_UNROLL for (int e_ = 0; e_ < KV_ST_PER; ++e_) {                                       \
      const int c_ = lid + e_ * KV_WG;                                                        \
      const bool in_ = c_ < KV_BLOCK_N && i_ + c_ < s.sq;                                     \
      const float l_ = in_ ? lse[st_ + i_ + c_] : -INFINITY;                                  \
      x_[e_][0] = l_ == -INFINITY ? INFINITY : l_ * FCL_LOG2E;                                \
      x_[e_][1] = in_ ? delta[st_ + i_ + c_] : 0.0f;                                          \
    }                                                                                         \
  } while (0)
#define DKDV_STATS_STORE(stg_, x_)                                                               \
  MMA_UNROLL for (int e_ = 0; e_ < KV_ST_PER; ++e_)                                              \
    if (lid + e_ * KV_WG < KV_BLOCK_N) {                                                         \
      st_s[stg_][lid + e_ * KV_WG] = x_[e_][0];                                                  \
      st_s[stg_][KV_BLOCK_N + lid + e_ * KV_WG] = x_[e_][1];                                     \
    }
  float stx[KV_ST_PER][2]; /* a tile's lse and delta on their way to local memory */
  barrier(CLK_LOCAL_MEM_FENCE); /* V is in registers: its space takes the tiles */
  if (lid < KV_STAGES * 2 * KV_NFW) nf_s[lid / (2 * KV_NFW)][lid % (2 * KV_NFW)] = 0u;
  if (KV_STAGES == 2 && ntiles > 0) {
    DKDV_LOAD(0, 0, 0);
    DKDV_STATS(0, 0, stx);
    DKDV_STATS_STORE(0, stx);
  }
  int th = 0, tr = 0; /* tile t */
  for (int t = 0; t < ntiles; ++t) {
    const int h = BM_TILE_HEAD(th), i0 = BM_TILE_ROW0(tr, KV_BLOCK_N),
              cur = KV_STAGES == 2 ? (t & 1) : 0;
    BM_TILE_NEXT(th, tr, nh, nr);
    const long qb = bm_base(q_off, q_sb, q_ss, q_sh, b, s.q_tok, h);
    const long dob = bm_base(do_off, do_sb, do_ss, do_sh, b, s.q_tok, h);
    const float slope_l2 = (flags & 2) ? alibi[h] * FCL_LOG2E : 0.0f;
    __local ushort *const q_s = qd_s + cur * KV_TILE, *const do_s = q_s + KV_BLOCK_N * LDK;
    __local const float *const stc = st_s[cur];
    __local uint *const nfc = nf_s[cur];
    /* Some (query, key) pair is masked (queries past the end are zeros), or
     * dropped. */
    const int i_end = min(i0 + KV_BLOCK_N, s.sq) - 1;
    const bool some_masked =
        FCL_NONFINITE && (FCL_DROPOUT || !(j0 >= i_end + diag - wl && j_last <= i0 + diag + wr));
    if (KV_STAGES == 1) {
      if (t > 0) barrier(CLK_LOCAL_MEM_FENCE); /* everyone is done with the last tiles */
      DKDV_LOAD(th, tr, 0);
      DKDV_STATS(th, tr, stx);
      DKDV_STATS_STORE(0, stx);
      if (some_masked && lid < 2 * KV_NFW) nfc[lid] = 0u;
    }
    mma_cp_wait_all();
    barrier(CLK_LOCAL_MEM_FENCE);
    const bool next = KV_STAGES == 2 && t + 1 < ntiles;
    if (next) {
      /* The other stage's last readers (tile t - 1) are past the barrier;
       * lse and delta go to it after this tile's products. */
      DKDV_LOAD(nh, nr, cur ^ 1);
      DKDV_STATS(nh, nr, stx);
      if (lid < 2 * KV_NFW) nf_s[cur ^ 1][lid] = 0u;
    }
    uint nfq[KV_NFW] = {0u}, nfo[KV_NFW] = {0u};
    bool nfq_any = false, nfo_any = false;
    if (some_masked) { /* Q and dO stay as they are for the scores, then lose
                        * their inf and NaN for the products */
      mma_tile_scan(q_s, LDK, KV_BLOCK_N, DP, 0, nfc, lid, KV_WG);
      mma_tile_scan(do_s, LDV, KV_BLOCK_N, DVP, 0, nfc + KV_NFW, lid, KV_WG);
    }
    MMA_SPECIAL(some_masked) {
      barrier(CLK_LOCAL_MEM_FENCE);
      nfq_any = mma_tile_flags(nfc, some_masked, nfq, KV_NFW);
      nfo_any = mma_tile_flags(nfc + KV_NFW, some_masked, nfo, KV_NFW);
    }
#if FCL_DROPOUT /* keep bits of the lane's pairs, drawn before the scores live */
    uint zb[MT][MMA_DROP_WORDS(KV_BLOCK_N)];
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_DROP_ROWS_BITS(zb[mt], KV_BLOCK_N, BM_DROP_INDEX(h, i0, j0 + MT_ROW(mt)),
                         (ulong)seqlen_k, drop_args_);
#endif
    float4 sc[MT][KV_NT], dp[MT][KV_NT];
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_UNROLL for (int n = 0; n < KV_NT; ++n) sc[mt][n] = dp[mt][n] = (float4)(0.0f);
    {
      uint4 kf[MT][DP / 16];
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
        MMA_UNROLL for (int kk = 0; kk < DP / 16; ++kk)
          kf[mt][kk] =
              mma_ldsm_x4(k_s, (MT_ROW(mt) + (lane & 15)) * LDK + kk * 16 + (lane >> 4) * 8);
      MMA_SCORES(sc, kf, q_s, LDK, DP / 16, KV_NT);
    }
    MMA_SCORES(dp, vf, do_s, LDV, DVP / 16, KV_NT);
    const bool full = i0 + KV_BLOCK_N <= s.sq && j0 >= i0 + KV_BLOCK_N - 1 + diag - wl &&
                      j_last <= i0 + diag + wr;
    uint4 pf[MT][KV_NT / 2], dsf[MT][KV_NT / 2];
    MMA_UNROLL for (int n = 0; n < KV_NT; ++n) {
      const int c = n * 8 + 2 * t4, i = i0 + c;
      const float la = stc[c], lb = stc[c + 1];
      const float da = stc[KV_BLOCK_N + c], db = stc[KV_BLOCK_N + c + 1];
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
        const int ra = rk[mt][0], rb = rk[mt][1];
        float p0, p1, p2, p3;
        float4 ds;
        dp[mt][n] = BM_DROP(dp[mt][n], zb[mt], n);
        ds.x = bm_ds(sc[mt][n].x, dp[mt][n].x, i, ra, full, diag, sq, sk, wl, wr, qk_scale,
                     softcap_l2, slope_l2, la, da, scale, &p0);
        ds.y = bm_ds(sc[mt][n].y, dp[mt][n].y, i + 1, ra, full, diag, sq, sk, wl, wr,
                     qk_scale, softcap_l2, slope_l2, lb, db, scale, &p1);
        ds.z = bm_ds(sc[mt][n].z, dp[mt][n].z, i, rb, full, diag, sq, sk, wl, wr, qk_scale,
                     softcap_l2, slope_l2, la, da, scale, &p2);
        ds.w = bm_ds(sc[mt][n].w, dp[mt][n].w, i + 1, rb, full, diag, sq, sk, wl, wr,
                     qk_scale, softcap_l2, slope_l2, lb, db, scale, &p3);
        MMA_PACK_A(pf[mt], n, BM_DROP((float4)(p0, p1, p2, p3), zb[mt], n)); /* dV's P */
        MMA_PACK_A(dsf[mt], n, ds);
      }
    }
    /* Flags uniform over the work-group; rows are keys, tile rows queries. */
    MMA_SPECIAL(nfq_any || nfo_any) {
      barrier(CLK_LOCAL_MEM_FENCE); /* the scores are done with Q and dO */
      if (nfq_any) mma_tile_scan(q_s, LDK, KV_BLOCK_N, DP, 1, nfc, lid, KV_WG);
      if (nfo_any) mma_tile_scan(do_s, LDV, KV_BLOCK_N, DVP, 1, nfc + KV_NFW, lid, KV_WG);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    MMA_ACC_T(gv, pf, do_s, LDV, DVP / 16, KV_BLOCK_N);
    MMA_SPECIAL(nfo_any)
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
        MMA_FIX_NONFINITE(gv[mt], DVP / 8, pf[mt], nfo, dout, dob, do_ss, i0, HEAD_DIM_V,
                          rk[mt][0], rk[mt][1], KV_VISIBLE_KEPT, KV_BLOCK_N);
    MMA_ACC_T(gk, dsf, q_s, LDK, DP / 16, KV_BLOCK_N);
    MMA_SPECIAL(nfq_any)
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
        MMA_FIX_NONFINITE(gk[mt], DP / 8, dsf[mt], nfq, q, qb, q_ss, i0, HEAD_DIM, rk[mt][0],
                          rk[mt][1], KV_VISIBLE, KV_BLOCK_N);
    if (next) DKDV_STATS_STORE(cur ^ 1, stx);
    th = nh, tr = nr;
  }

  const long dkb = bm_base(dk_off, dk_sb, dk_ss, dk_sh, b, s.k_tok, hk);
  const long dvb = bm_base(dv_off, dv_sb, dv_ss, dv_sh, b, s.k_tok, hk);
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
    BM_STORE_ROWS(dk, dkb, dk_ss, HEAD_DIM, DP / 8, gk[mt], rk[mt][0], rk[mt][1], sk);
    BM_STORE_ROWS(dv, dvb, dv_ss, HEAD_DIM_V, DVP / 8, gv[mt], rk[mt][0], rk[mt][1], sk);
  }
}
