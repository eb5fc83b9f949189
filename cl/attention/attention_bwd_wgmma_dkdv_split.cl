/* The dK/dV kernel of the backward on wgmma with K and V in registers
 * (WK_LOCAL_OPS = 1; after attention_bwd_wgmma_dkdv.cl, whose header says
 * how it is built and which heads it takes). A work-group of two
 * warpgroups owns 64 keys of one kv head and splits the four products
 * between them, each warpgroup holding one of K and V as wgmma's A
 * fragments (32 registers at D = 128) and one of dV and dK:
 *   warpgroup 0:  S^T = K Q^T,   P^T from it,        dV += P^T dO;
 *   warpgroup 1:  dP^T = V dO^T, dS^T = P^T (dP^T - delta), dK += dS^T Q.
 * Warpgroup 0 hands P^T (times the scale, and softcap's derivative) over
 * in local memory, each work-item to the one of warpgroup 1 that holds
 * the same keys and queries. Both warpgroups issue the same instructions
 * on their own operands, so no product lies in divergent code. Local
 * memory holds only the Q and dO tiles (WK_STAGES <= 2 of them) and the
 * hand-over: 40 KiB at D = 128 and tiles of 32 in two stages, where
 * attention_bwd_wgmma_dkdv.cl's K and V leave room for one. */
#if !FCL_NONFINITE && WK_LOCAL_OPS == 1

#if WARPS != 8 || HEAD_DIM != HEAD_DIM_V || STAGES > 2
#error "attention_bwd_wgmma_dkdv_split: 8 warps, HEAD_DIM == HEAD_DIM_V, 1 or 2 stages"
#endif
#define WS_KEYS 64
#define WS_RSK(n) WK_CAT(wg_rsk_n, n)

/* P of one element of S^T (query i, key j), and in *pm what dS takes of
 * it: P times the scale and softcap's derivative; both exactly 0 where
 * the pair is masked (bm_ds's terms). */
inline float ws_p(float s, int i, int j, bool full, int diag, int sq, int sk, int wl, int wr,
                  float qk_scale, float softcap_l2, float slope_l2, float lse2, float scale,
                  float *pm) {
#if MMA_GENERAL
  float t;
  const float x = attn_score(s, i, j, diag, qk_scale, softcap_l2, slope_l2, &t);
  const float e = mma_exp2(x - lse2);
  const float c = softcap_l2 > 0.0f ? scale * (1.0f - t * t) : scale;
#else
  const float e = mma_exp2(fma(s, qk_scale, -lse2));
  const float c = scale;
#endif
  const float p = full || BM_VISIBLE(i, j) ? e : 0.0f;
  *pm = p * c;
  return p;
}

/* dS of one element from the hand-over pm and dP: exactly 0 where masked,
 * whatever dP (V may hold an inf). */
inline float ws_ds(float pm, float dp, int i, int j, bool full, int diag, int sq, int sk, int wl,
                   int wr, float dlt) {
  return full || BM_VISIBLE(i, j) ? pm * (dp - dlt) : 0.0f;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_attention_bwd_wgmma_dkdv(BM_COMMON_ARGS, __global fcl_elem *dk, BM_TENSOR(dk),
                                  __global fcl_elem *dv, BM_TENSOR(dv)) {
  __local ushort q_s[STAGES * BLOCK_N * HEAD_DIM] __attribute__((aligned(1024)));
  __local ushort o_s[STAGES * BLOCK_N * HEAD_DIM_V] __attribute__((aligned(1024))); /* dO */
  __local float4 pm_s[NT * 128]; /* the hand-over: [n][work-item of a warpgroup] */
  MMA_EMU_DECL(WARPS)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const bool dk_side = warp >= 4; /* warpgroup 1: V, dP^T, dK */
  const int heads_kv = heads_q / group;
  const int b = get_group_id(2) / heads_kv, hk = get_group_id(2) % heads_kv;
  if (nf_flags[hk] != 0) return; /* attention_bwd_mma_dkdv.cl's, built with FCL_NONFINITE */
  const bm_seq s = bm_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, flags & 4, stat_sb);
  const int j0 = get_group_id(0) * WS_KEYS;
  if (j0 >= s.sk) return;
  const long kb = bm_base(k_off, k_sb, k_ss, k_sh, b, s.k_tok, hk);
  const long vb = bm_base(v_off, v_sb, v_ss, v_sh, b, s.k_tok, hk);
  const int diag = s.sk - s.sq + diag_shift, sk = s.sk, sq = s.sq; /* row i at key i + diag */
  const int j_last = min(j0 + WS_KEYS, sk) - 1;
  const int i_lo = max(0, j0 - diag - wr);
  const int i_hi = min(s.sq - 1, j_last - diag + wl);
  const int ra = j0 + (warp & 3) * 16 + g, rb = ra + 8; /* this lane's keys */

  BM_KV_WALK(BLOCK_N); /* attention_bwd_wgmma_dkdv.cl's tiles */
  if (ntiles > 0) WK_LOAD(0, 0);
  uint4 af[HEAD_DIM / 16]; /* K or V */
  wg_afrags(af, HEAD_DIM / 16, dk_side ? v : k, dk_side ? vb : kb, dk_side ? v_ss : k_ss, ra, sk);
  float4 acc[HEAD_DIM / 8]; /* dV or dK */
  MMA_UNROLL for (int n = 0; n < HEAD_DIM / 8; ++n) acc[n] = (float4)(0.0f);

  for (int t = 0; t < ntiles; ++t) {
    const int cur = STAGES == 2 ? (t & 1) : 0;
    WK_STATS(t);
    mma_cp_wait_all();
    wg_fence_proxy();
    barrier(CLK_LOCAL_MEM_FENCE);
    /* With two stages the next tile comes into the one that tile t - 1
     * read: both warpgroups waited for its products before the barrier. */
    if (STAGES == 2 && t + 1 < ntiles) WK_LOAD(t + 1, cur ^ 1);
    __local const ushort *qt = q_s + cur * BLOCK_N * HEAD_DIM;
    __local const ushort *ot = o_s + cur * BLOCK_N * HEAD_DIM_V;

    /* S^T = K Q^T, or dP^T = V dO^T */
    float4 x[NT];
    MMA_UNROLL for (int n = 0; n < NT; ++n) x[n] = (float4)(0.0f);
    WG_TIE(x, NT);
    __local const ushort *bx = dk_side ? ot : qt;
    wg_fence();
    MMA_UNROLL for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
      WS_RSK(BLOCK_N)(x, af[kk], wg_desc_k(bx, BLOCK_N, HEAD_DIM, 0, kk * 16));
    wg_commit();
    wg_wait0();
    WG_TIE(x, NT);
    WG_RENEW_A(af, HEAD_DIM / 16); /* wgmma.cl: kept for the next tile */
    WG_TIE_A(af, HEAD_DIM / 16);

    /* P^T (warpgroup 0, which hands pm over) or dS^T, as A fragments */
    const bool full = WK_FULL;
    const float slope_l2 = (flags & 2) ? alibi[h] * FCL_LOG2E : 0.0f;
    uint4 fr[NT / 2];
    if (!dk_side) {
      MMA_UNROLL for (int n = 0; n < NT; ++n) {
        const int i = i0 + n * 8 + 2 * t4;
        float p0, p1, p2, p3, m0, m1, m2, m3;
        p0 = ws_p(x[n].x, i, ra, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2, slope_l2,
                  l2[n].x, scale, &m0);
        p1 = ws_p(x[n].y, i + 1, ra, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2,
                  slope_l2, l2[n].y, scale, &m1);
        p2 = ws_p(x[n].z, i, rb, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2, slope_l2,
                  l2[n].x, scale, &m2);
        p3 = ws_p(x[n].w, i + 1, rb, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2,
                  slope_l2, l2[n].y, scale, &m3);
        pm_s[n * 128 + (lid & 127)] = (float4)(m0, m1, m2, m3);
        MMA_PACK_A(fr, n, (float4)(p0, p1, p2, p3));
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (dk_side) {
      MMA_UNROLL for (int n = 0; n < NT; ++n) {
        const int i = i0 + n * 8 + 2 * t4;
        const float4 pm = pm_s[n * 128 + (lid & 127)];
        float4 ds;
        ds.x = ws_ds(pm.x, x[n].x, i, ra, full, diag, sq, sk, wl, wr, dl[n].x);
        ds.y = ws_ds(pm.y, x[n].y, i + 1, ra, full, diag, sq, sk, wl, wr, dl[n].y);
        ds.z = ws_ds(pm.z, x[n].z, i, rb, full, diag, sq, sk, wl, wr, dl[n].x);
        ds.w = ws_ds(pm.w, x[n].w, i + 1, rb, full, diag, sq, sk, wl, wr, dl[n].y);
        MMA_PACK_A(fr, n, ds);
      }
    }

    /* dV += P^T dO, or dK += dS^T Q */
    __local const ushort *bg = dk_side ? qt : ot;
    WG_TIE(acc, HEAD_DIM / 8);
    wg_fence();
    MMA_UNROLL for (int kk = 0; kk < BLOCK_N / 16; ++kk)
      WK_RS(HEAD_DIM)(acc, fr[kk], wg_desc_n(bg, BLOCK_N, HEAD_DIM, kk * 16));
    wg_commit();
    wg_wait0();
    WG_TIE_A(fr, NT / 2);
    WG_TIE(acc, HEAD_DIM / 8);
    if (STAGES == 1) { /* the next tile into the one stage, once all have read it */
      barrier(CLK_LOCAL_MEM_FENCE);
      if (t + 1 < ntiles) WK_LOAD(t + 1, 0);
    }
  }
  mma_cp_wait_all();
  __global fcl_elem *dst = dk_side ? dk : dv;
  const long db = dk_side ? bm_base(dk_off, dk_sb, dk_ss, dk_sh, b, s.k_tok, hk)
                          : bm_base(dv_off, dv_sb, dv_ss, dv_sh, b, s.k_tok, hk);
  BM_STORE_ROWS(dst, db, (dk_side ? dk_ss : dv_ss), HEAD_DIM, HEAD_DIM / 8, acc, ra, rb, sk);
}

#undef WS_KEYS
#undef WS_RSK
#endif /* !FCL_NONFINITE && WK_LOCAL_OPS == 1 */
#if !FCL_NONFINITE
#undef WK_HEAD
#undef WK_ROW0
#undef WK_LOAD
#undef WK_STATS
#undef WK_FULL
#endif
