/* FlashAttention-2 forward on Hopper's warpgroup products (prepend
 * dtype.cl, attention_common.cl, mma_warp.cl, mma_common.cl, wgmma_ops.cl,
 * wgmma.cl; built with -DFCL_SM90A=1 and rebuilt by the host for sm_90a,
 * as wgmma.cl says); f16 and bf16 storage.
 *
 * The structure of attention_fwd_mma.cl with MT = 1: a work-group of
 * WARPS = 4 or 8 warps (one or two warpgroups) owns BLOCK_M = 16 * WARPS
 * query rows of one (batch, head); each warp keeps its 16 rows' S and O
 * accumulators in registers in mma.sync's layouts, so the online
 * softmax, the masks, the non-finite fix-up and the store are
 * attention_common.cl's. The products are wgmma m64nNk16, each a batch of
 * HEAD_DIM / 16 or BLOCK_N / 16 instructions committed and waited for as
 * one: S = Q K^T with N = BLOCK_N, Q and K both K-major in local memory
 * (as FlashAttention-3; Q in registers cost 64 of them at D = 128, and
 * ptxas lets a loop-invariant A fragment be overwritten: wgmma.cl), and
 * O += P V with N = HEAD_DIM_V, P from registers and V N-major.
 * Tiles live in local memory as core matrices (wgmma.cl) and come in by
 * cp.async: V of tile t while S of tile t is computed, K of tile t+1
 * while P V of tile t is.
 * Head dims: multiples of 16, HEAD_DIM_V and BLOCK_N among wgmma_ops.cl's
 * N (16, 32, 48, 64, 96, 128); every offset and stride of q, k and v a
 * multiple of 8 elements.
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
#define WG_CAT(a, b) a##b
#define WG_SS(n) WG_CAT(wg_ss_n, n)
#define WG_RS(n) WG_CAT(wg_rs_n, n)

#if HEAD_DIM % 16 || HEAD_DIM_V % 16 || BLOCK_N % 16 || HEAD_DIM > 128 || HEAD_DIM_V > 128 || \
    BLOCK_N > 128 || (WARPS != 4 && WARPS != 8)
#error "attention_fwd_wgmma: head dims and BLOCK_N multiples of 16 up to 128, 4 or 8 warps"
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_attention_fwd_wgmma(ATTN_FWD_PARAMS(ushort), const __global int *nf_flags) {
  __local ushort q_s[BLOCK_M * HEAD_DIM] __attribute__((aligned(128)));
  __local ushort k_s[BLOCK_N * HEAD_DIM] __attribute__((aligned(128)));
  __local ushort v_s[BLOCK_N * HEAD_DIM_V] __attribute__((aligned(128)));
  __local uint nf_s[NFW];
  MMA_EMU_DECL(WARPS)

  MMA_FWD_TILE(); /* attention_common.cl */

  wg_tile_load(q_s, BLOCK_M, HEAD_DIM, q, q_base, q_ss, i0, sq, lid, WG);
  if (ntiles > 0) wg_tile_load(k_s, BLOCK_N, HEAD_DIM, k, k_base, k_ss, jt0, sk, lid, WG);
  mma_cp_commit();
  /* This warpgroup's 64 rows of Q: rows m, k step 128 B */
  const int q0 = WG_CORE((warp >> 2) * 64, 0, HEAD_DIM);

  float4 acc[NT_O];
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  MMA_UNROLL for (int n = 0; n < NT_O; ++n) acc[n] = (float4)(0.0f);
  const int r0 = i0 + warp * 16 + g, r1 = r0 + 8;

  for (int it = 0; it < ntiles; ++it) {
    const int j0 = jt0 + it * BLOCK_N;
    /* K of this tile (and at first Q) has landed; V's buffer is free */
    mma_cp_wait_all();
    wg_fence_proxy();
    barrier(CLK_LOCAL_MEM_FENCE);
    wg_tile_load(v_s, BLOCK_N, HEAD_DIM_V, v, v_base, v_ss, j0, sk, lid, WG);
    mma_cp_commit();
    const bool some_masked = FCL_NONFINITE && !(j0 >= i_last + diag - window_left &&
                               min(j0 + BLOCK_N, sk) - 1 <= i0 + diag + window_right);
    if (some_masked && lid < NFW) nf_s[lid] = 0u;

    float4 s[NT_S];
    MMA_UNROLL for (int n = 0; n < NT_S; ++n) s[n] = (float4)(0.0f);
    WG_TIE(s, NT_S);
    wg_fence();
    MMA_UNROLL for (int kk = 0; kk < KQ; ++kk) /* K: rows n, k step 128 B */
      WG_SS(BLOCK_N)(s, wg_desc(q_s, q0 + kk * 128, 128u, 16u * HEAD_DIM),
                     wg_desc(k_s, kk * 128, 128u, 16u * HEAD_DIM));
    wg_commit();
    wg_wait0();
    WG_TIE(s, NT_S);

    uint4 pf[NT_S / 2];
    { /* declares mu0, mu1 (attention_common.cl) */
      MMA_SOFTMAX_STEP_OF(s, acc, m0, m1, l0, l1, r0, r1);
      MMA_UNROLL for (int n = 0; n < NT_S; ++n) {
        const float4 x = s[n];
        float4 p;
#if MMA_GENERAL
        p = (float4)(mma_exp2(x.x - mu0), mma_exp2(x.y - mu0), mma_exp2(x.z - mu1),
                     mma_exp2(x.w - mu1));
#else
        const float4 xs = x * qk_scale; /* rounded as the maximum was (attention_fwd_mma.cl) */
        p = (float4)(mma_exp2(xs.x - mu0), mma_exp2(xs.y - mu0), mma_exp2(xs.z - mu1),
                     mma_exp2(xs.w - mu1));
#endif
        l0 += p.x + p.y;
        l1 += p.z + p.w;
        const uint lo = mma_pack(p.x, p.y), hi = mma_pack(p.z, p.w);
        if (n & 1) pf[n / 2].z = lo, pf[n / 2].w = hi;
        else pf[n / 2].x = lo, pf[n / 2].y = hi;
      }
    }

    mma_cp_wait_all(); /* V of this tile */
    wg_fence_proxy();
    barrier(CLK_LOCAL_MEM_FENCE); /* and every warpgroup is done with K */
    if (it + 1 < ntiles) {
      wg_tile_load(k_s, BLOCK_N, HEAD_DIM, k, k_base, k_ss, j0 + BLOCK_N, sk, lid, WG);
      mma_cp_commit();
    }
    uint nfb[NFW] = {0u};
    bool nf_any = false;
    if (some_masked) wg_tile_scan(v_s, BLOCK_N, HEAD_DIM_V, 1, nf_s, lid, WG);
    MMA_SPECIAL(some_masked) {
      wg_fence_proxy();
      barrier(CLK_LOCAL_MEM_FENCE);
      MMA_UNROLL for (int w = 0; w < NFW; ++w) {
        nfb[w] = some_masked ? nf_s[w] : 0u;
        nf_any |= nfb[w] != 0u;
      }
    }
    WG_TIE(acc, NT_O);
    WG_TIE_A(pf, NT_S / 2);
    wg_fence();
    MMA_UNROLL for (int kk = 0; kk < BLOCK_N / 16; ++kk) /* V: rows k, k step 16 W B */
      WG_RS(HEAD_DIM_V)(acc, pf[kk], wg_desc(v_s, kk * 16 * HEAD_DIM_V, 16u * HEAD_DIM_V, 128u));
    wg_commit();
    wg_wait0();
    WG_TIE(acc, NT_O);
    MMA_SPECIAL(nf_any) /* uniform over the work-group */
      MMA_FIX_NONFINITE(acc, NT_O, pf, nfb, v, v_base, v_ss, j0, HEAD_DIM_V, r0, r1, FWD_VISIBLE);
  }

  mma_cp_wait_all(); /* Q's copies, where no key tile ran */
  MMA_FWD_STORE_OF(acc, m0, m1, l0, l1, r0, r1); /* attention_common.cl */
}
