/* requires: attention/attention_common.cl common/mma_common.cl attention/attention_dropout_mma.cl */
/* FlashAttention-2 forward on NVIDIA tensor cores (prepend dtype.cl,
 * attention_common.cl and mma_common.cl); f16 and bf16 storage.
 *
 * A work-group of WARPS warps owns BLOCK_M = 16 * MT * WARPS query rows
 * of one (batch, head); each warp owns MT m16 tiles of 16 rows (MT = 2:
 * each K and V fragment read from local memory feeds two mma, as
 * FlashAttention-2's 32 rows a warp do), keeps their Q fragments, S and
 * O accumulators in registers, and walks the visible key tiles of
 * BLOCK_N keys with the online softmax in the log2 domain. S = Q K^T and
 * O += P V run on mma.sync m16n8k16 with f32 accumulation; P is rounded to
 * the storage type for the second product, its row sums stay f32.
 * K and V tiles pass through local memory (rows padded by 16 bytes so that
 * ldmatrix meets no bank conflicts). With MMA_VEC (every offset and stride
 * of q, k, v a multiple of 8 elements, head dims multiples of 8) they come
 * in by cp.async: V of tile t while S of tile t is computed, K of tile t+1
 * while P V of tile t is. Otherwise plain 16-bit loads fill them.
 * Head dims are padded with zeros to multiples of 16 (at most 128 here).
 * With FCL_NONFINITE, a V tile with keys that some rows of the work-group
 * must not see is scanned for inf and NaN, which P V would spread to those
 * rows (0 * NaN is NaN; mma_common.cl, "Non-finite operands"): found ones
 * are zeroed and their products added back for the visible pairs only.
 * Built with and without it; the build without lists its tile for the
 * other where its sums came out inf or NaN (MMA_FWD_WORK,
 * attention_common.cl).
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
#ifndef MT
#define MT 1 /* m16 tiles a warp */
#endif
/* 1: softcap, ALiBi or a non-positive scale, scores transformed one by one;
 * 0: the scale is folded into the exponent. */
/* x * scale - mu must not become an fma (see the exponent below). */
#pragma OPENCL FP_CONTRACT OFF

#ifndef MMA_GENERAL
#define MMA_GENERAL 1
#endif
#ifndef FCL_NONFINITE
#define FCL_NONFINITE 1
#endif

#define WG (WARPS * 32)
#define BLOCK_M (16 * MT * WARPS)
/* Padded head dims and tile pitches: attention_abi.h, which the host's
 * local-memory check (FCL_MMA16_FWD_LOCAL) reads too. */
#define DP FCL_MMA16_PAD(HEAD_DIM)
#define DVP FCL_MMA16_PAD(HEAD_DIM_V)
#define LDK FCL_MMA16_LD(HEAD_DIM)
#define LDV FCL_MMA16_LD(HEAD_DIM_V)
#define NT_S (BLOCK_N / 8)
#define NT_O (DVP / 8)
#define KQ (DP / 16)
#define QV_SIZE FCL_MAX(BLOCK_M * LDK, BLOCK_N * LDV)
#define NFW FCL_MMA_NFW(BLOCK_N)

#if BLOCK_N % 16 || DP > 256 || DVP > 256
#error "BLOCK_N must be a multiple of 16 and head dims at most 256"
#endif

/* Score of one element in the log2 domain, -inf where not visible. */

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_attention_fwd_mma(
    ATTN_FWD_PARAMS(ushort), /* attention_common.cl */
    __global int *nf_work)
{
  ATTN_FWD_UNPACK
  /* 16-byte rows for cp.async and ldmatrix */
  __local ushort k_s[BLOCK_N * LDK] __attribute__((aligned(16)));
  __local ushort qv_s[QV_SIZE] __attribute__((aligned(16))); /* Q, then V tiles */
  __local uint nf_s[NFW]; /* keys of the V tile holding inf or NaN */
  MMA_EMU_DECL(WARPS)

  MMA_FWD_WORK(nf_work) { /* one query tile (attention_common.cl) */
    MMA_FWD_TILE(nf_work); /* declares the tile's rows and key range */

    mma_tile_load(qv_s, LDK, BLOCK_M, DP, q, q_base, q_ss, i0, sq, HEAD_DIM, lid, WG);
    if (ntiles > 0)
      mma_tile_load(k_s, LDK, BLOCK_N, DP, k, k_base, k_ss, jt0, sk, HEAD_DIM, lid, WG);
    mma_cp_commit();
    mma_cp_wait_all();
    barrier(CLK_LOCAL_MEM_FENCE);
    uint4 qf[MT][KQ];
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_UNROLL for (int kk = 0; kk < KQ; ++kk)
        qf[mt][kk] = mma_ldsm_x4(qv_s, ((warp * MT + mt) * 16 + (lane & 15)) * LDK + kk * 16 +
                                           (lane >> 4) * 8);
    barrier(CLK_LOCAL_MEM_FENCE);

    float4 acc[MT][NT_O];
    float m[MT][2], l[MT][2];
    int rr[MT][2]; /* this lane's rows of each m16 tile */
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
      MMA_UNROLL for (int n = 0; n < NT_O; ++n) acc[mt][n] = (float4)(0.0f);
      m[mt][0] = m[mt][1] = -INFINITY;
      l[mt][0] = l[mt][1] = 0.0f;
      rr[mt][0] = i0 + (warp * MT + mt) * 16 + g;
      rr[mt][1] = rr[mt][0] + 8;
    }

    for (int it = 0; it < ntiles; ++it) {
      const int j0 = jt0 + it * BLOCK_N;
      if (it > 0) { /* K of this tile has landed; V's buffer is free */
        mma_cp_wait_all();
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      mma_tile_load(qv_s, LDV, BLOCK_N, DVP, v, v_base, v_ss, j0, sk, HEAD_DIM_V, lid, WG);
      mma_cp_commit();
      /* Some (row, key) pair of the tile is masked (keys past the end are
       * zeros), or dropped: V is scanned below. */
      const bool some_masked = FCL_NONFINITE && (FCL_DROPOUT || !(j0 >= i_last + diag - window_left &&
                                 min(j0 + BLOCK_N, sk) - 1 <= i0 + diag + window_right));
      if (some_masked && lid < NFW) nf_s[lid] = 0u;

#if FCL_DROPOUT
      uint kb[MT][MMA_DROP_WORDS(BLOCK_N)]; /* keep bits of the lane's pairs */
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt) MMA_FWD_DROP_BITS(kb[mt], rr[mt][0], rr[mt][1]);
#endif
      float4 s[MT][NT_S];
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
        MMA_UNROLL for (int n = 0; n < NT_S; ++n) s[mt][n] = (float4)(0.0f);
      MMA_UNROLL for (int kk = 0; kk < KQ; ++kk) {
        MMA_UNROLL for (int np = 0; np < NT_S / 2; ++np) {
          const uint4 bk = mma_ldsm_x4(
              k_s, (np * 16 + (lane >> 4) * 8 + (lane & 7)) * LDK + kk * 16 + ((lane >> 3) & 1) * 8);
          MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
            s[mt][2 * np] = mma_16816(qf[mt][kk], bk.xy, s[mt][2 * np]);
            s[mt][2 * np + 1] = mma_16816(qf[mt][kk], bk.zw, s[mt][2 * np + 1]);
          }
        }
      }

      uint4 pf[MT][NT_S / 2];
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
        /* declares mu0, mu1 (attention_common.cl) */
        MMA_SOFTMAX_STEP_OF(s[mt], acc[mt], m[mt][0], m[mt][1], l[mt][0], l[mt][1], rr[mt][0],
                            rr[mt][1]);
        MMA_P_FRAGMENTS_OF(s[mt], pf[mt], l[mt][0], l[mt][1], kb[mt]); /* attention_common.cl */
      }

      mma_cp_wait_all(); /* V of this tile */
      barrier(CLK_LOCAL_MEM_FENCE);
      if (it + 1 < ntiles) {
        mma_tile_load(k_s, LDK, BLOCK_N, DP, k, k_base, k_ss, j0 + BLOCK_N, sk, HEAD_DIM, lid,
                      WG);
        mma_cp_commit();
      }
      uint nfb[NFW] = {0u};
      bool nf_any = false;
      if (some_masked) mma_tile_scan(qv_s, LDV, BLOCK_N, DVP, 1, nf_s, lid, WG);
      MMA_SPECIAL(some_masked) {
        barrier(CLK_LOCAL_MEM_FENCE);
        nf_any = mma_tile_flags(nf_s, some_masked, nfb, NFW);
      }
      MMA_UNROLL for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
        MMA_UNROLL for (int dp = 0; dp < DVP / 16; ++dp) {
          const uint4 bv = mma_ldsm_x4_t(
              qv_s, (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LDV + dp * 16 + (lane >> 4) * 8);
          MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
            acc[mt][2 * dp] = mma_16816(pf[mt][kk], bv.xy, acc[mt][2 * dp]);
            acc[mt][2 * dp + 1] = mma_16816(pf[mt][kk], bv.zw, acc[mt][2 * dp + 1]);
          }
        }
      }
      MMA_SPECIAL(nf_any) /* uniform over the work-group */
        MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
          MMA_FIX_NONFINITE(acc[mt], NT_O, pf[mt], nfb, v, v_base, v_ss, j0, HEAD_DIM_V,
                            rr[mt][0], rr[mt][1], FWD_VISIBLE_KEPT, BLOCK_N);
    }

    /* o and lse of the lane's rows (attention_common.cl) */
    bool nf_seen = false; /* a NaN stored (attention_common.cl) */
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_FWD_STORE_OF(acc[mt], m[mt][0], m[mt][1], l[mt][0], l[mt][1], rr[mt][0], rr[mt][1],
                       nf_seen);
    MMA_FWD_REPORT(nf_work, nf_seen, &nf_s[0]);
  }
}
