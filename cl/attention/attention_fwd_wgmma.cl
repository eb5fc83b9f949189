/* requires: attention/attention_common.cl common/wgmma.cl attention/attention_dropout_mma.cl */
/* FlashAttention-2 forward on Hopper's warpgroup products (prepend
 * dtype.cl, attention_common.cl, mma_warp.cl, mma_common.cl, wgmma_ops.cl,
 * wgmma.cl; built with -DFCL_SM90A=1 and rebuilt by the host for sm_90a,
 * as wgmma.cl says); f16 and bf16 storage.
 *
 * The structure of attention_fwd_mma.cl with MT = 1: a work-group of
 * WARPS = 4, 8, 12 or 16 warps (1 to 4 warpgroups) owns BLOCK_M = 16 * WARPS
 * query rows of one (batch, head); each warp keeps its 16 rows' S and O
 * accumulators in registers in mma.sync's layouts, so the online
 * softmax, the masks, the non-finite fix-up and the store are
 * attention_common.cl's. The products are wgmma m64nNk16, each a batch of
 * HEAD_DIM / 16 or BLOCK_N / 16 instructions committed as one group:
 * S = Q K^T with N = BLOCK_N, Q and K both K-major in local memory (as
 * FlashAttention-3; LOCAL_OPS = 2) or Q in registers as wgmma's A
 * fragments (LOCAL_OPS = 1: 32 registers a lane at D = 128, renewed after
 * each wait for S, WG_RENEW_A in wgmma.cl; its 16 KiB of local memory go
 * to the key tiles), and
 * O += P V with N = HEAD_DIM_V, P from registers and V N-major.
 * Tiles live in local memory in wgmma.cl's layouts (128-byte swizzle
 * where a head dim is a multiple of 64) and come in by cp.async (the loop
 * below says when).
 * Head dims: multiples of 16, HEAD_DIM_V and BLOCK_N among wgmma_ops.cl's
 * N (16, 32, 48, 64, 96, 128); every offset and stride of q, k and v a
 * multiple of 8 elements.
 * With FCL_DROPOUT, attention_fwd_mma.cl's dropout: the keep bits of tile
 * it drawn at its step's start, before any product is issued (drawn
 * between S's issue and its wait, ptxas 13.0 serialized the products:
 * C7513), P of dropped pairs 0 after the row sums, every V tile scanned in
 * the build with FCL_NONFINITE, whose fix-up adds kept pairs only.
 */
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef HEAD_DIM_V
#define HEAD_DIM_V HEAD_DIM
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef BLOCK_N
#define BLOCK_N 64
#endif
#pragma OPENCL FP_CONTRACT OFF /* as attention_fwd_mma.cl */
#ifndef MMA_GENERAL
#define MMA_GENERAL 1
#endif
#ifndef FCL_NONFINITE
#define FCL_NONFINITE 1
#endif

#define WG (WARPS * 32)
#define BLOCK_M (16 * WARPS)
#define NT_S (BLOCK_N / 8)
#define NT_O (HEAD_DIM_V / 8)
#define KQ (HEAD_DIM / 16)
#define NFW FCL_MMA_NFW(BLOCK_N)
#ifndef LOCAL_OPS
#define LOCAL_OPS 2
#endif
#define QREG (LOCAL_OPS == 1)

#if HEAD_DIM % 16 || HEAD_DIM_V % 16 || BLOCK_N % 16 || HEAD_DIM > 128 || HEAD_DIM_V > 128 || \
    BLOCK_N > 128 || WARPS % 4 || WARPS > 16 || LOCAL_OPS < 1 || LOCAL_OPS > 2
#error "attention_fwd_wgmma: head dims and BLOCK_N multiples of 16 up to 128, 4 to 16 warps, LOCAL_OPS 1 or 2"
#endif

/* The keep bits zb of this lane's pairs in tile it (attention_common.cl's
 * MMA_FWD_DROP_BITS), drawn where the step computes S (on_); none without
 * dropout (MMA_P_FRAGMENTS_OF then ignores zb). */
#if FCL_DROPOUT
#define FWD_DROP_BITS(on_)                                                                         \
  uint zb[MMA_DROP_WORDS(BLOCK_N)];                                                                \
  if (on_) MMA_FWD_DROP_BITS(zb, r0, r1)
#else
#define FWD_DROP_BITS(on_) (void)0
#endif

/* One step of the loop below (step it: S of tile it where HAS_S, P V of
 * tile it - 1 where HAS_PV), written once for the three places it runs
 * with constants: the first step (S only) and the last (P V only) are
 * peeled off, because ptxas runs every wgmma of the kernel one after
 * another where a branch lies between a product and its wait (its info
 * line C7514; docs/wgmma_route.md). P is tied after the P V wait for the
 * same reason (C7513): else the next tile's P goes into its registers. */
#define FWD_STEP(HAS_S, HAS_PV)                                                                    \
  do {                                                                                             \
    const bool has_s = HAS_S, has_pv = HAS_PV;                                                     \
    const int j0 = jt0 + it * BLOCK_N, jp = j0 - BLOCK_N; /* this tile, the one before */          \
    __local ushort *kc = k_s + (it & 1) * BLOCK_N * HEAD_DIM;       /* K of tile it */             \
    __local ushort *kn = k_s + ((it + 1) & 1) * BLOCK_N * HEAD_DIM; /* free until K of it + 1 */   \
    __local ushort *vp = v_s + ((it + 1) & 1) * BLOCK_N * HEAD_DIM_V; /* V of tile it - 1 */       \
    mma_cp_wait_all(); /* K of tile it, V of tile it - 1 */                                        \
    wg_fence_proxy();                                                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    /* V of the tile before, where some (row, key) pair of it is masked or dropped:                \
     * its inf and NaN zeroed and flagged (attention_fwd_mma.cl); the flags                        \
     * in kn's buffer, not yet loaded. */                                                          \
    const bool some_masked =                                                                       \
        FCL_NONFINITE && has_pv &&                                                                 \
        (FCL_DROPOUT || !(jp >= i_last + diag - window_left &&                                     \
                          min(jp + BLOCK_N, sk) - 1 <= i0 + diag + window_right));                 \
    uint nfb[NFW] = {0u};                                                                          \
    bool nf_any = false;                                                                           \
    MMA_SPECIAL(some_masked) {                                                                     \
      __local uint *nf_s = (__local uint *)kn;                                                     \
      if (some_masked && lid < NFW) nf_s[lid] = 0u;                                                \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                \
      if (some_masked) wg_tile_scan(vp, BLOCK_N, HEAD_DIM_V, 1, nf_s, lid, WG);                    \
      wg_fence_proxy();                                                                            \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                \
      nf_any = mma_tile_flags(nf_s, some_masked, nfb, NFW);                                        \
      barrier(CLK_LOCAL_MEM_FENCE); /* every flag read before kn's copy */                         \
    }                                                                                              \
    if (has_s) {                                                                                   \
      if (it + 1 < ntiles)                                                                         \
        wg_tile_load(kn, BLOCK_N, HEAD_DIM, k, k_base, k_ss, j0 + BLOCK_N, sk, lid, WG);           \
      wg_tile_load(v_s + (it & 1) * BLOCK_N * HEAD_DIM_V, BLOCK_N, HEAD_DIM_V, v, v_base, v_ss,    \
                   j0, sk, lid, WG);                                                               \
      mma_cp_commit();                                                                             \
    }                                                                                              \
    FWD_DROP_BITS(has_s); /* keep bits of tile it: zb */                                           \
                                                                                                   \
    float4 s[NT_S];                                                                                \
    MMA_UNROLL for (int n = 0; n < NT_S; ++n) s[n] = (float4)(0.0f);                               \
    WG_TIE(s, NT_S);                                                                               \
    WG_TIE(acc, NT_O);                                                                             \
    WG_TIE_A(pf, NT_S / 2);                                                                        \
    wg_fence();                                                                                    \
    if (has_s) {                                                                                   \
      FWD_S_ISSUE(s, kc); /* S = Q K^T */                                                          \
      wg_commit();                                                                                 \
    }                                                                                              \
    if (has_pv) {                                                                                  \
      MMA_UNROLL for (int kk = 0; kk < BLOCK_N / 16; ++kk) /* V: rows k */                         \
        WG_RS(HEAD_DIM_V)(acc, pf[kk], wg_desc_n(vp, BLOCK_N, HEAD_DIM_V, kk * 16));               \
      wg_commit();                                                                                 \
    }                                                                                              \
    uint4 pn[NT_S / 2]; /* P of this tile */                                                       \
    float alpha0 = 1.0f, alpha1 = 1.0f; /* O's rescaling for this tile's maxima */                 \
    if (has_s) {                                                                                   \
      if (has_pv) wg_wait1(); /* S; P V may go on */                                               \
      else wg_wait0();                                                                             \
      WG_TIE(s, NT_S);                                                                             \
      FWD_S_DONE();                                                                                \
      float4 unscaled[NT_O]; /* O is rescaled below, once P V is done: a dead copy */              \
      MMA_UNROLL for (int n = 0; n < NT_O; ++n) unscaled[n] = (float4)(0.0f);                      \
      { /* declares al0, al1, mu0, mu1 (attention_common.cl) */                                    \
        MMA_SOFTMAX_STEP_OF(s, unscaled, m0, m1, l0, l1, r0, r1);                                  \
        alpha0 = al0, alpha1 = al1;                                                                \
        MMA_P_FRAGMENTS_OF(s, pn, l0, l1, zb); /* attention_common.cl */                           \
      }                                                                                            \
    }                                                                                              \
    wg_wait0(); /* P V of the tile before */                                                       \
    WG_TIE_A(pf, NT_S / 2); /* P stays in its registers until here, not under P of this tile */    \
    WG_TIE(acc, NT_O);                                                                             \
    MMA_SPECIAL(nf_any) /* uniform over the work-group */                                          \
      MMA_FIX_NONFINITE(acc, NT_O, pf, nfb, v, v_base, v_ss, jp, HEAD_DIM_V, r0, r1,               \
                        FWD_VISIBLE_KEPT, BLOCK_N);                                                \
    if (has_s) {                                                                                   \
      MMA_UNROLL for (int n = 0; n < NT_O; ++n) acc[n] *= (float4)(alpha0, alpha0, alpha1, alpha1);\
      MMA_UNROLL for (int n = 0; n < NT_S / 2; ++n) pf[n] = pn[n];                                 \
    }                                                                                              \
  } while (0)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_attention_fwd_wgmma(ATTN_FWD_PARAMS(ushort), __global int *nf_work) {
  ATTN_FWD_UNPACK
#if !QREG
  __local ushort q_s[BLOCK_M * HEAD_DIM] __attribute__((aligned(1024)));
#endif
  __local ushort k_s[2 * BLOCK_N * HEAD_DIM] __attribute__((aligned(1024)));   /* two tiles */
  __local ushort v_s[2 * BLOCK_N * HEAD_DIM_V] __attribute__((aligned(1024))); /* two tiles */
  __local uint nf_seen_s;
  MMA_EMU_DECL(WARPS)

  MMA_FWD_WORK(nf_work) { /* one query tile (attention_common.cl) */
    MMA_FWD_TILE(nf_work);

#if !QREG
    wg_tile_load(q_s, BLOCK_M, HEAD_DIM, q, q_base, q_ss, i0, sq, lid, WG);
#endif
    if (ntiles > 0) wg_tile_load(k_s, BLOCK_N, HEAD_DIM, k, k_base, k_ss, jt0, sk, lid, WG);
    mma_cp_commit();
    /* S of the key tile in kt, issued only (wgmma.cl's issue loops); with
     * Q in registers, Q is renewed and tied after its wait. */
#if QREG
    uint4 qf[KQ]; /* this lane's rows of Q, A fragments */
    wg_afrags(qf, KQ, q, q_base, q_ss, i0 + warp * 16 + g, sq);
#define FWD_S_ISSUE(s_, kt_) WG_RSK_ISSUE(s_, qf, kt_, HEAD_DIM, BLOCK_N)
#define FWD_S_DONE()                                                                               \
  do {                                                                                             \
    WG_RENEW_A(qf, KQ);                                                                            \
    WG_TIE_A(qf, KQ);                                                                              \
  } while (0)
#else
    const int q0 = (warp >> 2) * 64; /* this warpgroup's rows of Q */
#define FWD_S_ISSUE(s_, kt_) WG_SS_ISSUE(s_, q_s, q0, kt_, HEAD_DIM, BLOCK_M, BLOCK_N)
#define FWD_S_DONE() (void)0
#endif

    float4 acc[NT_O];
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    MMA_UNROLL for (int n = 0; n < NT_O; ++n) acc[n] = (float4)(0.0f);
    const int r0 = i0 + warp * 16 + g, r1 = r0 + 8;
    uint4 pf[NT_S / 2]; /* P of the tile before */
    MMA_UNROLL for (int n = 0; n < NT_S / 2; ++n) pf[n] = (uint4)(0u);

    /* Step it computes S of tile it (it < ntiles) and O += P V of tile
     * it - 1 (it > 0), both issued before either is waited for: the softmax
     * of tile it runs while the tensor cores do P V of the tile before
     * (FlashAttention-3's overlap within a warpgroup). K and V have two
     * buffers each, taken in turn: K of tile it + 1 and V of tile it come in
     * during step it, a whole step ahead, into the buffers that steps it - 1
     * and it - 2 finished with; one barrier a step. (K in one buffer,
     * loaded half a step ahead after a second barrier, measured the same on
     * the H100 and the H200, docs/defaults.md: what the copies cost is their
     * instructions, wgmma.cl.) */
    if (ntiles > 0) {
      int it = 0;
      FWD_STEP(1, 0);
      for (it = 1; it < ntiles; ++it) FWD_STEP(1, 1);
      FWD_STEP(0, 1); /* it = ntiles */
    }

#undef FWD_S_ISSUE
#undef FWD_S_DONE
    mma_cp_wait_all(); /* Q's copy (Q in local memory), where no key tile ran */
    bool nf_seen = false; /* a NaN stored (attention_common.cl) */
    MMA_FWD_STORE_OF(acc, m0, m1, l0, l1, r0, r1, nf_seen);
    MMA_FWD_REPORT(nf_work, nf_seen, &nf_seen_s);
  }
}
