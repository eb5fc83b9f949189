/* requires: attention/attention_common.cl common/wgmma.cl attention/attention_bwd_mma_dkdv.cl */
/* The dK/dV kernel of the backward on Hopper's warpgroup products (after
 * attention_bwd_mma.cl, attention_bwd_mma_dq.cl and
 * attention_bwd_mma_dkdv.cl, with wgmma_ops.cl and wgmma.cl prepended;
 * built with -DFCL_SM90A=1 as wgmma.cl says). The walk of
 * attention_bwd_mma_dkdv.cl with its four products on wgmma: a work-group
 * of WK_WARPS warps (1 or 2 warpgroups of 64 keys) owns 16 * WK_WARPS keys
 * of one kv head, K and V in local memory (WK_LOCAL_OPS = 2) or K in
 * registers as wgmma's A fragments (WK_LOCAL_OPS = 1: 32 registers at D =
 * 128, and 16 KiB of local memory for a second stage), and walks tiles of
 * WK_BLOCK_N queries of every query head of its group, in WK_STAGES
 * buffers:
 *   S^T = K Q^T, dP^T = V dO^T   (A from local memory or registers, B
 *                                 K-major);
 *   dV += P^T dO, dK += dS^T Q   (A from registers; B the same Q and dO
 *                                 tiles, read N-major).
 * With one stage each tile's four products run one after another. With
 * two or three, step t issues S^T and dP^T of tile t and dV, dK of tile
 * t - 1 together, and forms tile t's P^T and dS^T while the tensor cores
 * do tile t - 1's (FlashAttention-3's overlap within a warpgroup, as the
 * forward's step). With three, tile t + 1 comes into the third buffer
 * meanwhile; with two, into tile t - 1's once its products are done.
 * Each warp keeps its 16 keys' accumulators in mma.sync's layouts, so the
 * scores, masks, stores and dropout (BM_DROP) are attention_bwd_mma.cl's.
 * lse and delta come to registers from global memory, a lane's columns
 * only: 48 KiB holds K, V and the tiles and nothing else (D = 128: 64 keys
 * and 32 queries).
 * The walk over (query head, tile) advances by one each step, without a
 * division.
 * Only in the build without FCL_NONFINITE: heads whose flag is set (an inf
 * or NaN in K, Q or dO) run attention_bwd_mma_dkdv.cl's kernel of the
 * other build, so no inf or NaN meets a masked product here. Every wgmma
 * is waited for in the iteration that issues it, with no branch between
 * (ptxas serializes them otherwise: docs/wgmma_route.md). */
#if !FCL_NONFINITE

/* Its work-group and tiles (attention_bwd_mma.cl's BM_WG ...). */
#define WK_WG BM_WG(WK_WARPS)
#define WK_BLOCK_M BM_BLOCK_M(WK_WARPS)
#define WK_NT BM_NT(WK_BLOCK_N)
#ifndef WK_LOCAL_OPS
#define WK_LOCAL_OPS 2
#endif
#define WK_KREG (WK_LOCAL_OPS == 1)
/* The keep bits zb of this lane's pairs in tile (h, i0), as
 * attention_bwd_mma_dkdv.cl draws them (rows keys, columns queries), where
 * on_: before the tile's products are issued, as the wgmma forward draws
 * its own (there, drawn between a product and its wait, they made ptxas
 * serialize the products: C7513). Without dropout none (BM_DROP then
 * ignores zb). */
#if FCL_DROPOUT
#define WK_DROP_BITS(on_)                                                                     \
  uint zb[MMA_DROP_WORDS(WK_BLOCK_N)];                                                        \
  if (on_)                                                                                    \
  MMA_DROP_ROWS_BITS(zb, WK_BLOCK_N, BM_DROP_INDEX(h, i0, j0 + warp * 16), (ulong)seqlen_k,   \
                     drop_args_)
#else
#define WK_DROP_BITS(on_) (void)0
#endif

#if MT != 1 || HEAD_DIM % 16 || HEAD_DIM_V % 16 || HEAD_DIM > 128 || HEAD_DIM_V > 128 || \
    WK_BLOCK_N % 16 || WK_BLOCK_N > 128 || WK_WARPS % 4 || WK_WARPS > 8 ||                \
    WK_STAGES < 1 || WK_STAGES > 3 || WK_LOCAL_OPS < 1 || WK_LOCAL_OPS > 2
#error "attention_bwd_wgmma_dkdv: head dims and WK_BLOCK_N among wgmma's N, 4 or 8 warps, WK_LOCAL_OPS 1 or 2"
#endif

/* Declares sc and dp (nt_ float4 each), runs issue_ (their products,
 * issued only: sc = A1 B1^T over HEAD_DIM, dp = A2 B2^T over HEAD_DIM_V)
 * and waits for them. dK/dV's S^T and dP^T (A: K, V; B: Q, dO), dQ's S and
 * dP (A: Q, dO; B: K, V); A from local memory (WK_SCORES_ISSUE) or K, or Q
 * and dO, from registers. */
#define WK_SCORES_RUN(sc, dp, issue_, nt_)                                                    \
  WK_SCORES_DECL(sc, dp, nt_);                                                                \
  wg_fence();                                                                                 \
  issue_;                                                                                     \
  wg_commit();                                                                                \
  wg_wait0();                                                                                 \
  WG_TIE(sc, nt_);                                                                            \
  WG_TIE(dp, nt_)
/* WK_SCORES_RUN's accumulators: declared, zeroed, tied (before wg_fence). */
#define WK_SCORES_DECL(sc, dp, nt_)                                                           \
  float4 sc[nt_], dp[nt_];                                                                    \
  MMA_UNROLL for (int n_ = 0; n_ < nt_; ++n_) sc[n_] = dp[n_] = (float4)(0.0f);               \
  WG_TIE(sc, nt_);                                                                            \
  WG_TIE(dp, nt_)
/* Both score products with A from local memory: sc over HEAD_DIM (a1, b1),
 * dp over HEAD_DIM_V (a2, b2). */
#define WK_SCORES_ISSUE(sc, dp, a1, a2, row0, b1, b2, bm_, bn_)                                 \
  WG_SS_ISSUE(sc, a1, row0, b1, HEAD_DIM, bm_, bn_);                                            \
  WG_SS_ISSUE(dp, a2, row0, b2, HEAD_DIM_V, bm_, bn_)

/* bm_ds of a plain score (no MMA_GENERAL) with the mask as selects on vis:
 * P and dS exactly 0 where !vis, whatever the score, dP or delta. */
inline float wk_ds_sel(float s, float dp, bool vis, float qk_scale, float lse2, float dlt,
                       float scale, float *p_out) {
  const float e = mma_exp2(fma(s, qk_scale, -lse2)); /* asm: not under the select */
  const float p = vis ? e : 0.0f;
  *p_out = p;
  return vis ? p * (dp - dlt) * scale : 0.0f;
}

__kernel __attribute__((reqd_work_group_size(WK_WG, 1, 1)))
void fcl_attention_bwd_wgmma_dkdv(BM_COMMON_ARGS, __global fcl_elem *dk, BM_TENSOR(dk),
                                  __global fcl_elem *dv, BM_TENSOR(dv)) {
#if !WK_KREG
  __local ushort k_s[WK_BLOCK_M * HEAD_DIM] __attribute__((aligned(1024)));
#endif
  __local ushort v_s[WK_BLOCK_M * HEAD_DIM_V] __attribute__((aligned(1024)));
  __local ushort q_s[WK_STAGES * WK_BLOCK_N * HEAD_DIM] __attribute__((aligned(1024)));
  __local ushort o_s[WK_STAGES * WK_BLOCK_N * HEAD_DIM_V] __attribute__((aligned(1024))); /* dO */
  MMA_EMU_DECL(WK_WARPS)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  BM_KV_HEAD;
  if (nf_flags[hk] != 0) return; /* attention_bwd_mma_dkdv.cl's, built with FCL_NONFINITE */
  BM_KV_BLOCK(WK_BLOCK_M);
  const int kr0 = (warp >> 2) * 64;                 /* this warpgroup's keys in the block */
  const int ra = j0 + warp * 16 + g, rb = ra + 8;   /* this lane's keys */

  /* Tiles t = 0 .. ntiles of BLOCK_N queries, per_head of them for each
   * query head of the group, named (th, tr) (BM_KV_WALK, BM_TILE_NEXT). */
  BM_KV_WALK(WK_BLOCK_N);
  /* Tile (th, tr)'s Q and dO into stage stg (committed as one group).
   * WK_LOAD_IF copies it where on_, else fills the stage with zeros (no
   * byte read; the head clamped to the group), without a branch: one
   * after a step's last wait serializes the step's products (C7513). */
#define WK_LOAD(th_, tr_, stg_) WK_LOAD_IF(th_, tr_, stg_, true)
#define WK_LOAD_IF(th_, tr_, stg_, on_)                                                        \
  do {                                                                                         \
    const int h_ = BM_TILE_HEAD(min(th_, group - 1)), i_ = BM_TILE_ROW0(tr_, WK_BLOCK_N);      \
    const int nv_ = (on_) ? s.sq : 0;                                                          \
    wg_tile_load(q_s + (stg_) * WK_BLOCK_N * HEAD_DIM, WK_BLOCK_N, HEAD_DIM, q,                \
                 bm_base(q_off, q_sb, q_ss, q_sh, b, s.q_tok, h_), q_ss, i_, nv_, lid, WK_WG); \
    wg_tile_load(o_s + (stg_) * WK_BLOCK_N * HEAD_DIM_V, WK_BLOCK_N, HEAD_DIM_V, dout,         \
                 bm_base(do_off, do_sb, do_ss, do_sh, b, s.q_tok, h_), do_ss, i_, nv_, lid,    \
                 WK_WG);                                                                       \
    mma_cp_commit();                                                                           \
  } while (0)

#if WK_KREG
  wg_tile_load(v_s, WK_BLOCK_M, HEAD_DIM_V, v, vb, v_ss, j0, sk, lid, WK_WG);
  mma_cp_commit();
  if (ntiles > 0) WK_LOAD(0, 0, 0);
  uint4 kf[HEAD_DIM / 16]; /* K, A fragments */
  wg_afrags(kf, HEAD_DIM / 16, k, kb, k_ss, ra, sk);
  /* S^T = K Q^T, dP^T = V dO^T of the tiles qt, ot, issued only; after
   * their wait, K is renewed (WG_RENEW_A) and tied. */
#define WK_KV_SCORES_ISSUE(sc, dp, qt, ot)                                                    \
  WG_RSK_ISSUE(sc, kf, qt, HEAD_DIM, WK_BLOCK_N);                                             \
  WG_SS_ISSUE(dp, v_s, kr0, ot, HEAD_DIM_V, WK_BLOCK_M, WK_BLOCK_N)
#define WK_KV_SCORES_DONE()                                                                   \
  do {                                                                                        \
    WG_RENEW_A(kf, HEAD_DIM / 16);                                                            \
    WG_TIE_A(kf, HEAD_DIM / 16);                                                              \
  } while (0)
#else
  wg_tile_load(k_s, WK_BLOCK_M, HEAD_DIM, k, kb, k_ss, j0, sk, lid, WK_WG);
  wg_tile_load(v_s, WK_BLOCK_M, HEAD_DIM_V, v, vb, v_ss, j0, sk, lid, WK_WG);
  mma_cp_commit();
  if (ntiles > 0) WK_LOAD(0, 0, 0);
#define WK_KV_SCORES_ISSUE(sc, dp, qt, ot) \
  WK_SCORES_ISSUE(sc, dp, k_s, v_s, kr0, qt, ot, WK_BLOCK_M, WK_BLOCK_N)
#define WK_KV_SCORES_DONE() (void)0
#endif

  float4 gk[HEAD_DIM / 8], gv[HEAD_DIM_V / 8];
  MMA_UNROLL for (int n = 0; n < HEAD_DIM / 8; ++n) gk[n] = (float4)(0.0f);
  MMA_UNROLL for (int n = 0; n < HEAD_DIM_V / 8; ++n) gv[n] = (float4)(0.0f);

  /* Tile (th, tr)'s query head h and first row i0, and this lane's
   * columns' lse (log2; +inf: no P) and delta, in flight while the copies
   * are waited for and S^T and dP^T are formed. A whole tile loads them at
   * fixed offsets from one address; the last tile of a head, which may
   * reach past sq, at columns clamped to sq and then selected (a load
   * under a condition may become a branch, one per load). No product is
   * in flight here, so the branch between the two costs no serialization. */
#define WK_STATS(th_, tr_)                                                                    \
  const int h = BM_TILE_HEAD(th_), i0 = BM_TILE_ROW0(tr_, WK_BLOCK_N);                        \
  float2 l2[WK_NT], dl[WK_NT];                                                                \
  {                                                                                           \
    const long st_ = s.stat_row0 + (long)h * stat_sh;                                         \
    if (i0 + WK_BLOCK_N <= s.sq) {                                                            \
      __global const float *lp_ = lse + st_ + i0 + 2 * t4, *dp_ = delta + st_ + i0 + 2 * t4;  \
      MMA_UNROLL for (int n = 0; n < WK_NT; ++n) {                                            \
        const float la = lp_[n * 8], lb = lp_[n * 8 + 1];                                     \
        l2[n] = (float2)(la == -INFINITY ? INFINITY : la * FCL_LOG2E,                         \
                         lb == -INFINITY ? INFINITY : lb * FCL_LOG2E);                        \
        dl[n] = (float2)(dp_[n * 8], dp_[n * 8 + 1]);                                         \
      }                                                                                       \
    } else {                                                                                  \
      MMA_UNROLL for (int n = 0; n < WK_NT; ++n) {                                            \
        const int c = i0 + n * 8 + 2 * t4;                                                    \
        const long ca = st_ + min(c, s.sq - 1), cb = st_ + min(c + 1, s.sq - 1);              \
        const float la = lse[ca], lb = lse[cb], da = delta[ca], db = delta[cb];               \
        l2[n] = (float2)(c < s.sq && la != -INFINITY ? la * FCL_LOG2E : INFINITY,             \
                         c + 1 < s.sq && lb != -INFINITY ? lb * FCL_LOG2E : INFINITY);        \
        dl[n] = (float2)(c < s.sq ? da : 0.0f, c + 1 < s.sq ? db : 0.0f);                     \
      }                                                                                       \
    }                                                                                         \
  }
  /* Every (key, query) pair of tile (h, i0) inside the window and sq. */
#define WK_FULL                                                                               \
  (i0 + WK_BLOCK_N <= s.sq && j0 >= i0 + WK_BLOCK_N - 1 + diag - wl && j_last <= i0 + diag + wr)
  /* P^T and dS^T of tile (h, i0) from its sc and dp (rows keys, columns
   * queries) as A fragments pf_, dsf_ (NT / 2 uint4 each, k = queries). */
#define WK_GRADS(pf_, dsf_)                                                                   \
  {                                                                                           \
    const float slope_l2 = (flags & 2) ? alibi[h] * FCL_LOG2E : 0.0f;                         \
    const bool full = WK_FULL;                                                                \
    MMA_UNROLL for (int n = 0; n < WK_NT; ++n) {                                              \
      const int i = i0 + n * 8 + 2 * t4;                                                      \
      float p0, p1, p2, p3;                                                                   \
      float4 ds;                                                                              \
      dp[n] = BM_DROP(dp[n], zb, n);                                                          \
      ds.x = bm_ds(sc[n].x, dp[n].x, i, ra, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2, \
                   slope_l2, l2[n].x, dl[n].x, scale, &p0);                                   \
      ds.y = bm_ds(sc[n].y, dp[n].y, i + 1, ra, full, diag, sq, sk, wl, wr, qk_scale,         \
                   softcap_l2, slope_l2, l2[n].y, dl[n].y, scale, &p1);                       \
      ds.z = bm_ds(sc[n].z, dp[n].z, i, rb, full, diag, sq, sk, wl, wr, qk_scale, softcap_l2, \
                   slope_l2, l2[n].x, dl[n].x, scale, &p2);                                   \
      ds.w = bm_ds(sc[n].w, dp[n].w, i + 1, rb, full, diag, sq, sk, wl, wr, qk_scale,         \
                   softcap_l2, slope_l2, l2[n].y, dl[n].y, scale, &p3);                       \
      MMA_PACK_A(pf_, n, BM_DROP((float4)(p0, p1, p2, p3), zb, n)); /* dV's P */              \
      MMA_PACK_A(dsf_, n, ds);                                                                \
    }                                                                                         \
  }
  /* dV += P^T dO and dK += dS^T Q of the tile in qt_, ot_, issued only
   * (after wg_fence; no commit). */
#define WK_GRAD_PRODUCTS(pf_, dsf_, qt_, ot_)                                                   \
  MMA_UNROLL for (int kk = 0; kk < WK_BLOCK_N / 16; ++kk) /* dO: rows k */                      \
    WG_RS(HEAD_DIM_V)(gv, pf_[kk], wg_desc_n(ot_, WK_BLOCK_N, HEAD_DIM_V, kk * 16));            \
  MMA_UNROLL for (int kk = 0; kk < WK_BLOCK_N / 16; ++kk) /* Q: rows k */                       \
    WG_RS(HEAD_DIM)(gk, dsf_[kk], wg_desc_n(qt_, WK_BLOCK_N, HEAD_DIM, kk * 16))

  /* General scores branch (softcap's tanh), and ptxas would serialize the
   * overlapped step around the branch (C7513): their builds run each
   * tile's products one after another, in two of the buffers. */
#define WK_OVERLAP (WK_STAGES >= 2 && !MMA_GENERAL)
#if !WK_OVERLAP
  int th = 0, tr = 0; /* tile t */
  for (int t = 0; t < ntiles; ++t) {
    const int cur = WK_STAGES >= 2 ? (t & 1) : 0;
    WK_STATS(th, tr);
    BM_TILE_NEXT(th, tr, nh, nr);
    mma_cp_wait_all(); /* tile t (and, the first time, K and V) */
    wg_fence_proxy();
    barrier(CLK_LOCAL_MEM_FENCE);
    /* With two stages the next tile comes into the one that tile t - 1
     * read: every warpgroup waited for its products before the barrier. */
    if (WK_STAGES >= 2 && t + 1 < ntiles) WK_LOAD(nh, nr, cur ^ 1);
    __local const ushort *qt = q_s + cur * WK_BLOCK_N * HEAD_DIM;
    __local const ushort *ot = o_s + cur * WK_BLOCK_N * HEAD_DIM_V;
    WK_DROP_BITS(1);

    /* S^T = K Q^T, dP^T = V dO^T */
    WK_SCORES_RUN(sc, dp, WK_KV_SCORES_ISSUE(sc, dp, qt, ot), WK_NT);
    WK_KV_SCORES_DONE();
    uint4 pf[WK_NT / 2], dsf[WK_NT / 2];
    WK_GRADS(pf, dsf);

    WG_TIE(gv, HEAD_DIM_V / 8);
    WG_TIE(gk, HEAD_DIM / 8);
    wg_fence();
    WK_GRAD_PRODUCTS(pf, dsf, qt, ot);
    wg_commit();
    wg_wait0();
    WG_TIE_A(pf, WK_NT / 2); /* P^T and dS^T stay until here (wgmma.cl) */
    WG_TIE_A(dsf, WK_NT / 2);
    WG_TIE(gv, HEAD_DIM_V / 8);
    WG_TIE(gk, HEAD_DIM / 8);
    if (WK_STAGES == 1) { /* the next tile into the one stage, once all have read it */
      barrier(CLK_LOCAL_MEM_FENCE);
      if (t + 1 < ntiles) WK_LOAD(nh, nr, 0);
    }
    th = nh, tr = nr;
  }
#else
  /* Step t: S^T and dP^T of tile t (HAS_S) and dV, dK of tile t - 1 from
   * pf, dsf (HAS_G), issued together; tile t's P^T and dS^T formed while
   * the latter run. Tile t is in buffer t % STAGES, t - 1 in the one
   * before. With three, t + 1 comes into the third at the step's start:
   * tile t - 2 left it, its products waited for in step t - 1 by every
   * warpgroup before the barrier. With two, into tile t - 1's at the
   * step's end, after the wait for its products and a barrier (at the
   * first step, which has none, at the start). The first step (S only)
   * and the last (G only) are peeled off, so that no branch lies between
   * a product and its wait (docs/wgmma_route.md). */
  /* WK_GRADS without a branch, for the step below: ptxas serializes the
   * products in flight around one (C7513). The scores are plain (no
   * MMA_GENERAL). Key r sees query i where (uint)(r - diag - i + wl) <=
   * wl + wr (every pair of a full tile) and i < sq: a query past sq adds
   * to every key's dK and dV, so its P and dS must be exactly 0 even where
   * V holds an inf. Keys past sk are not stored. */
#define WK_GRADS_SEL(pf_, dsf_)                                                               \
  {                                                                                           \
    const bool full = WK_FULL;                                                                \
    const uint range = full ? 0xffffffffu : (uint)(wl + wr);                                  \
    const int da = ra - diag - i0 - 2 * t4 + wl, db = da + 8; /* rb = ra + 8 */               \
    const int ql = s.sq - i0 - 2 * t4;                        /* query n * 8 + e < ql */      \
    MMA_UNROLL for (int n = 0; n < WK_NT; ++n) {                                              \
      float p0, p1, p2, p3;                                                                   \
      float4 ds;                                                                              \
      const bool q0 = n * 8 < ql, q1 = n * 8 + 1 < ql;                                        \
      dp[n] = BM_DROP(dp[n], zb, n);                                                          \
      ds.x = wk_ds_sel(sc[n].x, dp[n].x, q0 & ((uint)(da - 8 * n) <= range), qk_scale,        \
                       l2[n].x, dl[n].x, scale, &p0);                                         \
      ds.y = wk_ds_sel(sc[n].y, dp[n].y, q1 & ((uint)(da - 8 * n - 1) <= range), qk_scale,    \
                       l2[n].y, dl[n].y, scale, &p1);                                         \
      ds.z = wk_ds_sel(sc[n].z, dp[n].z, q0 & ((uint)(db - 8 * n) <= range), qk_scale,        \
                       l2[n].x, dl[n].x, scale, &p2);                                         \
      ds.w = wk_ds_sel(sc[n].w, dp[n].w, q1 & ((uint)(db - 8 * n - 1) <= range), qk_scale,    \
                       l2[n].y, dl[n].y, scale, &p3);                                         \
      MMA_PACK_A(pf_, n, BM_DROP((float4)(p0, p1, p2, p3), zb, n)); /* dV's P */              \
      MMA_PACK_A(dsf_, n, ds);                                                                \
    }                                                                                         \
  }
#define WK_STEP(HAS_S, HAS_G)                                                                     \
  do {                                                                                            \
    WK_STATS(HAS_S ? th : 0, HAS_S ? tr : 0); /* the last step (no S) uses none of it */          \
    BM_TILE_NEXT(th, tr, nh, nr);                                                                 \
    mma_cp_wait_all(); /* tile t (and, the first time, K and V) */                                \
    wg_fence_proxy();                                                                             \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
    if (HAS_S && (WK_STAGES == 3 || !HAS_G) && t + 1 < ntiles)                                    \
      WK_LOAD(nh, nr, (t + 1) % WK_STAGES);                                                       \
    __local const ushort *qt = q_s + (t % WK_STAGES) * WK_BLOCK_N * HEAD_DIM;                     \
    __local const ushort *ot = o_s + (t % WK_STAGES) * WK_BLOCK_N * HEAD_DIM_V;                   \
    __local const ushort *qp = q_s + ((t + WK_STAGES - 1) % WK_STAGES) * WK_BLOCK_N * HEAD_DIM;   \
    __local const ushort *op = o_s + ((t + WK_STAGES - 1) % WK_STAGES) * WK_BLOCK_N * HEAD_DIM_V; \
    WK_DROP_BITS(HAS_S);                                                                          \
    WK_SCORES_DECL(sc, dp, WK_NT);                                                                \
    WG_TIE(gv, HEAD_DIM_V / 8);                                                                   \
    WG_TIE(gk, HEAD_DIM / 8);                                                                     \
    WG_TIE_A(pf, WK_NT / 2);                                                                      \
    WG_TIE_A(dsf, WK_NT / 2);                                                                     \
    wg_fence();                                                                                   \
    if (HAS_S) {                                                                                  \
      WK_KV_SCORES_ISSUE(sc, dp, qt, ot); /* S^T = K Q^T, dP^T = V dO^T */                        \
      wg_commit();                                                                                \
    }                                                                                             \
    if (HAS_G) {                                                                                  \
      WK_GRAD_PRODUCTS(pf, dsf, qp, op);                                                          \
      wg_commit();                                                                                \
    }                                                                                             \
    uint4 pn[WK_NT / 2], dsn[WK_NT / 2]; /* tile t's */                                           \
    if (HAS_S) {                                                                                  \
      if (HAS_G) wg_wait1(); /* S^T and dP^T; dV and dK may go on */                              \
      else wg_wait0();                                                                            \
      WG_TIE(sc, WK_NT);                                                                          \
      WG_TIE(dp, WK_NT);                                                                          \
      WK_GRADS_SEL(pn, dsn);                                                                      \
    }                                                                                             \
    wg_wait0();                                                                                   \
    WG_TIE_A(pf, WK_NT / 2); /* tile t - 1's stay until here, not under tile t's */               \
    WG_TIE_A(dsf, WK_NT / 2);                                                                     \
    WG_TIE(gv, HEAD_DIM_V / 8);                                                                   \
    WG_TIE(gk, HEAD_DIM / 8);                                                                     \
    if (HAS_S) {                                                                                  \
      /* K's fragments (WK_KREG) renewed after the last wait, as measured in                      \
       * calls 80-84; between the two waits ptxas 13.0 serializes nothing                         \
       * either (the C7513 of calls 76-77 came from the branch at the end) */                     \
      WK_KV_SCORES_DONE();                                                                        \
      MMA_UNROLL for (int n_ = 0; n_ < WK_NT / 2; ++n_) pf[n_] = pn[n_], dsf[n_] = dsn[n_];       \
    }                                                                                             \
    if (WK_STAGES == 2 && HAS_S && HAS_G) { /* tile t - 1's buffer is free now */                 \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
      WK_LOAD_IF(nh, nr, (t + 1) % 2, t + 1 < ntiles);                                            \
    }                                                                                             \
    th = nh, tr = nr;                                                                             \
  } while (0)

  if (ntiles > 0) {
    uint4 pf[WK_NT / 2], dsf[WK_NT / 2]; /* tile t - 1's P^T and dS^T */
    MMA_UNROLL for (int n = 0; n < WK_NT / 2; ++n) pf[n] = dsf[n] = (uint4)(0u);
    int t = 0, th = 0, tr = 0; /* tile t */
    WK_STEP(1, 0);
    for (t = 1; t < ntiles; ++t) WK_STEP(1, 1);
    WK_STEP(0, 1); /* t = ntiles */
  }
#undef WK_STEP
#undef WK_GRADS_SEL
#endif
#undef WK_OVERLAP
#undef WK_STATS
#undef WK_FULL
#undef WK_GRADS
#undef WK_GRAD_PRODUCTS
#undef WK_LOAD
#undef WK_LOAD_IF
#undef WK_KV_SCORES_ISSUE
#undef WK_KV_SCORES_DONE

  mma_cp_wait_all(); /* K and V (or V), where no tile ran */
  const long dkb = bm_base(dk_off, dk_sb, dk_ss, dk_sh, b, s.k_tok, hk);
  const long dvb = bm_base(dv_off, dv_sb, dv_ss, dv_sh, b, s.k_tok, hk);
  BM_STORE_ROWS(dk, dkb, dk_ss, HEAD_DIM, HEAD_DIM / 8, gk, ra, rb, sk);
  BM_STORE_ROWS(dv, dvb, dv_ss, HEAD_DIM_V, HEAD_DIM_V / 8, gv, ra, rb, sk);
}

#undef WK_KREG
#undef WK_DROP_BITS

#endif /* !FCL_NONFINITE */
