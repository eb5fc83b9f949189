/* The dK/dV kernel of the backward on wgmma with K and V in registers
 * (WK_LOCAL_OPS = 1; after attention_bwd_wgmma_dkdv.cl, whose header says
 * how it is built and which heads it takes). Two work-groups of one
 * warpgroup each own the same 64 keys of one kv head (grid dimension 1
 * says which), hold them as wgmma's A fragments and split the gradients:
 *   part 0 (K):     S^T = K Q^T,                 dV += P^T dO;
 *   part 1 (K, V):  S^T = K Q^T, dP^T = V dO^T,  dK += dS^T Q.
 * Each holds one accumulator (64 registers at D = 128, where
 * attention_bwd_wgmma_dkdv.cl's one warpgroup holds both and spills), and
 * local memory holds only the Q and dO tiles: three stages of 32 queries
 * at D = 128, where K and V in local memory leave room for one. S^T is
 * formed twice (five products a tile, not four), so that the two share
 * nothing: part 1 is the dQ kernel's walk with keys and queries swapped.
 * Each walks the three-stage step of attention_bwd_wgmma_dkdv.cl (the
 * gradient product of tile t - 1 under the scores of tile t). Each step's
 * products and their waits lie inside one part's branch, none across it
 * (ptxas serializes them otherwise). */
#if !FCL_NONFINITE && WK_LOCAL_OPS == 1

#if WARPS != 4 || STAGES != 3
#error "attention_bwd_wgmma_dkdv_split: 4 warps (a warpgroup on 64 keys), 3 stages"
#endif
#define WS_RSK(n) WK_CAT(wg_rsk_n, n)
#if MMA_GENERAL /* softcap's tanh branches: serialized, but right */
#define WS_GRADS WK_GRADS
#else
#define WS_GRADS WK_GRADS_SEL
#endif

/* One step of part 0: S^T of tile t (HAS_S; into P^T, pn) issued with
 * dV += P^T dO of tile t - 1 (HAS_G; pf and the dO tile in op). */
#define WS_STEP_DV(HAS_S, HAS_G, acc, pf)                                                     \
  {                                                                                           \
    float4 sc[NT], dp[NT]; /* dp: 0, unused */                                                \
    MMA_UNROLL for (int n_ = 0; n_ < NT; ++n_) sc[n_] = dp[n_] = (float4)(0.0f);              \
    WG_TIE(sc, NT);                                                                           \
    WG_TIE(acc, HEAD_DIM_V / 8);                                                              \
    WG_TIE_A(pf, NT / 2);                                                                     \
    wg_fence();                                                                               \
    if (HAS_S) {                                                                              \
      MMA_UNROLL for (int kk = 0; kk < HEAD_DIM / 16; ++kk)                                   \
        WS_RSK(BLOCK_N)(sc, kf[kk], wg_desc_k(qt, BLOCK_N, HEAD_DIM, 0, kk * 16));            \
      wg_commit();                                                                            \
    }                                                                                         \
    if (HAS_G) {                                                                              \
      MMA_UNROLL for (int kk = 0; kk < BLOCK_N / 16; ++kk)                                    \
        WK_RS(HEAD_DIM_V)(acc, pf[kk], wg_desc_n(op, BLOCK_N, HEAD_DIM_V, kk * 16));          \
      wg_commit();                                                                            \
    }                                                                                         \
    uint4 pn[NT / 2], dsn[NT / 2];                                                            \
    if (HAS_S) {                                                                              \
      if (HAS_G) wg_wait1();                                                                  \
      else wg_wait0();                                                                        \
      WG_TIE(sc, NT);                                                                         \
      WG_RENEW_A(kf, HEAD_DIM / 16);                                                          \
      WG_TIE_A(kf, HEAD_DIM / 16);                                                            \
      WS_GRADS(pn, dsn);                                                                      \
    }                                                                                         \
    wg_wait0();                                                                               \
    WG_TIE_A(pf, NT / 2);                                                                     \
    WG_TIE(acc, HEAD_DIM_V / 8);                                                              \
    if (HAS_S) {                                                                              \
      MMA_UNROLL for (int n_ = 0; n_ < NT / 2; ++n_) pf[n_] = pn[n_];                         \
    }                                                                                         \
  }
/* One step of part 1: S^T and dP^T of tile t (HAS_S; into dS^T, pf)
 * issued with dK += dS^T Q of tile t - 1 (HAS_G; the Q tile in qp). */
#define WS_STEP_DK(HAS_S, HAS_G, acc, pf)                                                     \
  {                                                                                           \
    float4 sc[NT], dp[NT];                                                                    \
    MMA_UNROLL for (int n_ = 0; n_ < NT; ++n_) sc[n_] = dp[n_] = (float4)(0.0f);              \
    WG_TIE(sc, NT);                                                                           \
    WG_TIE(dp, NT);                                                                           \
    WG_TIE(acc, HEAD_DIM / 8);                                                                \
    WG_TIE_A(pf, NT / 2);                                                                     \
    wg_fence();                                                                               \
    if (HAS_S) {                                                                              \
      MMA_UNROLL for (int kk = 0; kk < HEAD_DIM / 16; ++kk)                                   \
        WS_RSK(BLOCK_N)(sc, kf[kk], wg_desc_k(qt, BLOCK_N, HEAD_DIM, 0, kk * 16));            \
      MMA_UNROLL for (int kk = 0; kk < HEAD_DIM_V / 16; ++kk)                                 \
        WS_RSK(BLOCK_N)(dp, vf[kk], wg_desc_k(ot, BLOCK_N, HEAD_DIM_V, 0, kk * 16));          \
      wg_commit();                                                                            \
    }                                                                                         \
    if (HAS_G) {                                                                              \
      MMA_UNROLL for (int kk = 0; kk < BLOCK_N / 16; ++kk)                                    \
        WK_RS(HEAD_DIM)(acc, pf[kk], wg_desc_n(qp, BLOCK_N, HEAD_DIM, kk * 16));              \
      wg_commit();                                                                            \
    }                                                                                         \
    uint4 pn[NT / 2], dsn[NT / 2];                                                            \
    if (HAS_S) {                                                                              \
      if (HAS_G) wg_wait1();                                                                  \
      else wg_wait0();                                                                        \
      WG_TIE(sc, NT);                                                                         \
      WG_TIE(dp, NT);                                                                         \
      WG_RENEW_A(kf, HEAD_DIM / 16);                                                          \
      WG_RENEW_A(vf, HEAD_DIM_V / 16);                                                        \
      WG_TIE_A(kf, HEAD_DIM / 16);                                                            \
      WG_TIE_A(vf, HEAD_DIM_V / 16);                                                          \
      WS_GRADS(pn, dsn);                                                                      \
    }                                                                                         \
    wg_wait0();                                                                               \
    WG_TIE_A(pf, NT / 2);                                                                     \
    WG_TIE(acc, HEAD_DIM / 8);                                                                \
    if (HAS_S) {                                                                              \
      MMA_UNROLL for (int n_ = 0; n_ < NT / 2; ++n_) pf[n_] = dsn[n_];                        \
    }                                                                                         \
  }
/* Step t: tile t is in buffer t % 3, t - 1 in (t + 2) % 3, and t + 1
 * comes into the third, which tile t - 2 left: its products were waited
 * for in step t - 1, before this barrier. */
#define WS_STEP(HAS_S, HAS_G)                                                                 \
  do {                                                                                        \
    WK_STATS(HAS_S ? t : 0); /* the last step (no S) uses none of it */                       \
    mma_cp_wait_all();                                                                        \
    wg_fence_proxy();                                                                         \
    barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    if (HAS_S && t + 1 < ntiles) WK_LOAD(t + 1, (t + 1) % 3);                                 \
    __local const ushort *qt = q_s + (t % 3) * BLOCK_N * HEAD_DIM;                            \
    __local const ushort *ot = o_s + (t % 3) * BLOCK_N * HEAD_DIM_V;                          \
    __local const ushort *qp = q_s + ((t + 2) % 3) * BLOCK_N * HEAD_DIM;                      \
    __local const ushort *op = o_s + ((t + 2) % 3) * BLOCK_N * HEAD_DIM_V;                    \
    if (dk_part) WS_STEP_DK(HAS_S, HAS_G, acc, pf) else WS_STEP_DV(HAS_S, HAS_G, acc, pf)    \
  } while (0)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_attention_bwd_wgmma_dkdv(BM_COMMON_ARGS, __global fcl_elem *dk, BM_TENSOR(dk),
                                  __global fcl_elem *dv, BM_TENSOR(dv)) {
  __local ushort q_s[STAGES * BLOCK_N * HEAD_DIM] __attribute__((aligned(1024)));
  __local ushort o_s[STAGES * BLOCK_N * HEAD_DIM_V] __attribute__((aligned(1024))); /* dO */
  MMA_EMU_DECL(WARPS)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const bool dk_part = get_group_id(1) == 1;
  const int heads_kv = heads_q / group;
  const int b = get_group_id(2) / heads_kv, hk = get_group_id(2) % heads_kv;
  if (nf_flags[hk] != 0) return; /* attention_bwd_mma_dkdv.cl's, built with FCL_NONFINITE */
  const bm_seq s = bm_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, flags & 4, stat_sb);
  const int j0 = get_group_id(0) * 64;
  if (j0 >= s.sk) return;
  const long kb = bm_base(k_off, k_sb, k_ss, k_sh, b, s.k_tok, hk);
  const long vb = bm_base(v_off, v_sb, v_ss, v_sh, b, s.k_tok, hk);
  const int diag = s.sk - s.sq + diag_shift, sk = s.sk, sq = s.sq; /* row i at key i + diag */
  const int j_last = min(j0 + 64, sk) - 1;
  const int i_lo = max(0, j0 - diag - wr);
  const int i_hi = min(s.sq - 1, j_last - diag + wl);
  const int ra = j0 + warp * 16 + g, rb = ra + 8; /* this lane's keys */

  BM_KV_WALK(BLOCK_N); /* attention_bwd_wgmma_dkdv.cl's tiles */
  if (ntiles > 0) WK_LOAD(0, 0);
  uint4 kf[HEAD_DIM / 16], vf[HEAD_DIM_V / 16];
  wg_afrags(kf, HEAD_DIM / 16, k, kb, k_ss, ra, sk);
  MMA_UNROLL for (int n = 0; n < HEAD_DIM_V / 16; ++n) vf[n] = (uint4)(0u);
  if (dk_part) wg_afrags(vf, HEAD_DIM_V / 16, v, vb, v_ss, ra, sk);
#define WS_ACC_N ((HEAD_DIM > HEAD_DIM_V ? HEAD_DIM : HEAD_DIM_V) / 8)
  float4 acc[WS_ACC_N]; /* dK or dV */
  MMA_UNROLL for (int n = 0; n < WS_ACC_N; ++n) acc[n] = (float4)(0.0f);

  if (ntiles > 0) {
    uint4 pf[NT / 2]; /* tile t - 1's dS^T or P^T */
    MMA_UNROLL for (int n = 0; n < NT / 2; ++n) pf[n] = (uint4)(0u);
    int t = 0;
    WS_STEP(1, 0);
    for (t = 1; t < ntiles; ++t) WS_STEP(1, 1);
    WS_STEP(0, 1); /* t = ntiles */
  }
  mma_cp_wait_all(); /* where no tile ran */
  if (dk_part) {
    const long db = bm_base(dk_off, dk_sb, dk_ss, dk_sh, b, s.k_tok, hk);
    BM_STORE_ROWS(dk, db, dk_ss, HEAD_DIM, HEAD_DIM / 8, acc, ra, rb, sk);
  } else {
    const long db = bm_base(dv_off, dv_sb, dv_ss, dv_sh, b, s.k_tok, hk);
    BM_STORE_ROWS(dv, db, dv_ss, HEAD_DIM_V, HEAD_DIM_V / 8, acc, ra, rb, sk);
  }
}
#undef WS_ACC_N

#undef WS_STEP
#undef WS_STEP_DK
#undef WS_STEP_DV
#undef WS_GRADS
#undef WS_RSK
#endif /* !FCL_NONFINITE && WK_LOCAL_OPS == 1 */
#if !FCL_NONFINITE
#undef WK_HEAD
#undef WK_ROW0
#undef WK_LOAD
#undef WK_STATS
#undef WK_FULL
#undef WK_GRADS
#undef WK_GRADS_SEL
#endif
