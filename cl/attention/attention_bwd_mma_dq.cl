/* requires: attention/attention_bwd_mma.cl */
/* The dQ kernel of the tensor-core backward (after attention_bwd_mma.cl,
 * whose header tells the algorithm): a work-group of WARPS warps owns
 * BLOCK_M query rows and walks key tiles of BLOCK_N keys, STAGES in
 * flight. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_attention_bwd_mma_dq(BM_COMMON_ARGS, __global fcl_elem *dq, BM_TENSOR(dq)) {
  /* Q and dO of the block, then each stage's K and V tiles (16-byte rows) */
  __local ushort kv_s[DQ_SIZE] __attribute__((aligned(16)));
  __local uint nf_s[STAGES][NFW]; /* keys of the stage's K tile holding inf or NaN */
  MMA_EMU_DECL(WARPS)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int rblk = get_num_groups(0) - 1 - get_group_id(0);
  const int b = get_group_id(2) / heads_q, h = get_group_id(2) % heads_q;
  const int hk = h / group;
  if ((nf_flags[hk] != 0) != FCL_NONFINITE) return; /* the other build's */
  const bm_seq s = bm_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, flags & 4, stat_sb);
  const int i0 = rblk * BLOCK_M;
  if (i0 >= s.sq) return;
  const long qb = bm_base(q_off, q_sb, q_ss, q_sh, b, s.q_tok, h);
  const long dob = bm_base(do_off, do_sb, do_ss, do_sh, b, s.q_tok, h);
  const long kb = bm_base(k_off, k_sb, k_ss, k_sh, b, s.k_tok, hk);
  const long vb = bm_base(v_off, v_sb, v_ss, v_sh, b, s.k_tok, hk);
  const int diag = s.sk - s.sq + diag_shift, sk = s.sk, sq = s.sq; /* row i at key i + diag */
  const float slope_l2 = (flags & 2) ? alibi[h] * FCL_LOG2E : 0.0f;
  int rr[MT][2]; /* this lane's rows of each m16 tile */
  float lse2[MT][2], dl[MT][2];
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
    MMA_UNROLL for (int e = 0; e < 2; ++e) {
      const long st = s.stat_row0 + (long)h * stat_sh + min(i0 + MT_ROW(mt) + g + 8 * e, s.sq - 1);
      const float a = lse[st];
      rr[mt][e] = i0 + MT_ROW(mt) + g + 8 * e;
      lse2[mt][e] = a == -INFINITY ? INFINITY : a * FCL_LOG2E;
      dl[mt][e] = delta[st];
    }
  const int i_last = min(i0 + BLOCK_M, s.sq) - 1;
  const int j_lo = max(0, i0 + diag - wl);
  const int j_hi = min(sk - 1, i_last + diag + wr);

  mma_tile_load(kv_s, LDK, BLOCK_M, DP, q, qb, q_ss, i0, s.sq, HEAD_DIM, lid, WG);
  mma_tile_load(kv_s + BLOCK_M * LDK, LDV, BLOCK_M, DVP, dout, dob, do_ss, i0, s.sq, HEAD_DIM_V,
                lid, WG);
  mma_cp_commit();
  mma_cp_wait_all();
  barrier(CLK_LOCAL_MEM_FENCE);
  uint4 qf[MT][DP / 16], dof[MT][DVP / 16];
  float4 acc[MT][DP / 8];
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
    MMA_UNROLL for (int kk = 0; kk < DP / 16; ++kk)
      qf[mt][kk] = mma_ldsm_x4(kv_s, (MT_ROW(mt) + (lane & 15)) * LDK + kk * 16 + (lane >> 4) * 8);
    MMA_UNROLL for (int kk = 0; kk < DVP / 16; ++kk)
      dof[mt][kk] = mma_ldsm_x4(kv_s + BLOCK_M * LDK,
                                (MT_ROW(mt) + (lane & 15)) * LDV + kk * 16 + (lane >> 4) * 8);
    MMA_UNROLL for (int n = 0; n < DP / 8; ++n) acc[mt][n] = (float4)(0.0f);
  }

  /* Key tile it's K and V into stage stg. */
#define DQ_LOAD(it_, stg_)                                                                 \
  do {                                                                                     \
    __local ushort *k_ = kv_s + (stg_) * BM_TILE;                                          \
    mma_tile_load(k_, LDK, BLOCK_N, DP, k, kb, k_ss, jt0 + (it_) * BLOCK_N, sk, HEAD_DIM,   \
                  lid, WG);                                                                \
    mma_tile_load(k_ + BLOCK_N * LDK, LDV, BLOCK_N, DVP, v, vb, v_ss,                      \
                  jt0 + (it_) * BLOCK_N, sk, HEAD_DIM_V, lid, WG);                         \
    mma_cp_commit();                                                                       \
  } while (0)
  const int jt0 = (j_lo / BLOCK_N) * BLOCK_N;
  const int ntiles = j_hi >= jt0 ? (j_hi - jt0) / BLOCK_N + 1 : 0;
  barrier(CLK_LOCAL_MEM_FENCE); /* Q and dO are in registers: their space takes the tiles */
  if (lid < STAGES * NFW) nf_s[lid / NFW][lid % NFW] = 0u;
  if (STAGES == 2 && ntiles > 0) DQ_LOAD(0, 0);
  for (int it = 0; it < ntiles; ++it) {
    const int j0 = jt0 + it * BLOCK_N, cur = STAGES == 2 ? (it & 1) : 0;
    __local ushort *const k_s = kv_s + cur * BM_TILE, *const v_s = k_s + BLOCK_N * LDK;
    __local uint *const nfc = nf_s[cur];
    /* Some (row, key) pair of the tile is masked (keys past the end are zeros). */
    const bool some_masked = FCL_NONFINITE &&
        !(j0 >= i_last + diag - wl && min(j0 + BLOCK_N, sk) - 1 <= i0 + diag + wr);
    if (STAGES == 1) {
      if (it > 0) barrier(CLK_LOCAL_MEM_FENCE); /* everyone is done with the last tiles */
      DQ_LOAD(it, 0);
      if (some_masked && lid < NFW) nfc[lid] = 0u;
    }
    mma_cp_wait_all();
    barrier(CLK_LOCAL_MEM_FENCE);
    if (STAGES == 2 && it + 1 < ntiles) {
      /* The other stage's last readers (tile it - 1) are past the barrier. */
      DQ_LOAD(it + 1, cur ^ 1);
      if (lid < NFW) nf_s[cur ^ 1][lid] = 0u;
    }
    uint nfb[NFW] = {0u};
    bool nf_any = false;
    /* K stays as it is for S, then loses its inf and NaN for dS K */
    if (some_masked) mma_tile_scan(k_s, LDK, BLOCK_N, DP, 0, nfc, lid, WG);
    MMA_SPECIAL(some_masked) {
      barrier(CLK_LOCAL_MEM_FENCE);
      nf_any = mma_tile_flags(nfc, some_masked, nfb, NFW);
    }
#if FCL_DROPOUT /* keep bits of the lane's pairs, drawn before the scores live */
    uint zb[MT][MMA_DROP_WORDS(BLOCK_N)];
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_DROP_COLS_BITS(zb[mt], BLOCK_N, BM_DROP_INDEX(h, rr[mt][0], j0),
                         BM_DROP_INDEX(h, rr[mt][1], j0), drop_args_);
#endif
    float4 sc[MT][NT], dp[MT][NT];
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_UNROLL for (int n = 0; n < NT; ++n) sc[mt][n] = dp[mt][n] = (float4)(0.0f);
    MMA_SCORES(sc, qf, k_s, LDK, DP / 16, NT);
    MMA_SCORES(dp, dof, v_s, LDV, DVP / 16, NT);
    const bool full = j0 >= i_last + diag - wl && j0 + BLOCK_N - 1 <= i0 + diag + wr &&
                      j0 + BLOCK_N <= sk;
    uint4 dsf[MT][NT / 2];
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_UNROLL for (int n = 0; n < NT; ++n) {
        const int j = j0 + n * 8 + 2 * t4, ra = rr[mt][0], rb = rr[mt][1];
        const float la = lse2[mt][0], lb = lse2[mt][1], da = dl[mt][0], db = dl[mt][1];
        float4 ds;
        float p;
        dp[mt][n] = BM_DROP(dp[mt][n], zb[mt], n);
        ds.x = bm_ds(sc[mt][n].x, dp[mt][n].x, ra, j, full, diag, sq, sk, wl, wr, qk_scale,
                     softcap_l2, slope_l2, la, da, scale, &p);
        ds.y = bm_ds(sc[mt][n].y, dp[mt][n].y, ra, j + 1, full, diag, sq, sk, wl, wr, qk_scale,
                     softcap_l2, slope_l2, la, da, scale, &p);
        ds.z = bm_ds(sc[mt][n].z, dp[mt][n].z, rb, j, full, diag, sq, sk, wl, wr, qk_scale,
                     softcap_l2, slope_l2, lb, db, scale, &p);
        ds.w = bm_ds(sc[mt][n].w, dp[mt][n].w, rb, j + 1, full, diag, sq, sk, wl, wr, qk_scale,
                     softcap_l2, slope_l2, lb, db, scale, &p);
        MMA_PACK_A(dsf[mt], n, ds);
      }
    MMA_SPECIAL(nf_any) { /* uniform over the work-group */
      barrier(CLK_LOCAL_MEM_FENCE); /* S is done with K */
      if (nf_any) mma_tile_scan(k_s, LDK, BLOCK_N, DP, 1, nfc, lid, WG);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    MMA_ACC_T(acc, dsf, k_s, LDK, DP / 16, BLOCK_N);
    MMA_SPECIAL(nf_any)
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
        MMA_FIX_NONFINITE(acc[mt], DP / 8, dsf[mt], nfb, k, kb, k_ss, j0, HEAD_DIM, rr[mt][0],
                          rr[mt][1], BM_VISIBLE, BLOCK_N);
  }

  const long dqb = bm_base(dq_off, dq_sb, dq_ss, dq_sh, b, s.q_tok, h);
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
    BM_STORE_ROWS(dq, dqb, dq_ss, HEAD_DIM, DP / 8, acc[mt], rr[mt][0], rr[mt][1], s.sq);
}
