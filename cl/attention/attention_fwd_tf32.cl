/* requires: attention/attention_common.cl common/mma_tf32.cl attention/attention_dropout_mma.cl */
/* FlashAttention-2 forward for f32 on NVIDIA tensor cores (prepend
 * dtype.cl, attention_common.cl and mma_tf32.cl): both products in 3xTF32,
 * so the result keeps f32 accuracy at tensor-core speed; in one TF32
 * product each where FCL_F32_PRECISION permits (MMA_TF32_PRODUCT).
 *
 * As in attention_fwd_mma.cl: a work-group of WARPS warps owns
 * BLOCK_M = 16 * WARPS query rows of one (batch, head); a warp owns 16
 * rows and keeps Q, S and the O accumulator in registers (f32), and walks
 * the visible key tiles of BLOCK_N keys with the online softmax in the log2
 * domain. K and V tiles pass through local memory, double-buffered (V of
 * tile t loads during S of tile t, K of tile t + 1 during P V of tile t);
 * with MMA_VEC by cp.async.
 *
 * The k index of each m16n8k8 step is numbered so that every operand is
 * one load: in S = Q K^T, step kk covers head-dim columns 8 kk .. 8 kk + 7
 * with fragment k = t standing for column 8 kk + 2t and k = t + 4 for
 * 8 kk + 2t + 1 (Q and K then come in pairs); in O += P V, S tile n is the
 * A fragment as it stands (k = t is key 2t of the tile, k = t + 4 key
 * 2t + 1), and B reads V rows 2t and 2t + 1.
 * Pitches: K rows (8-byte loads, 16 lanes a phase) LDK = 8 or 24 mod 32
 * words, V rows (4-byte loads of rows 2t, 2t + 1) LDV = 4 mod 8: no bank
 * conflicts. With FCL_NONFINITE, every K and V tile is scanned for inf and
 * NaN, which 3xTF32 cannot carry (mma_tf32.cl, "Non-finite values of K and
 * V"); built with and without it, a work-group runs in the build that its
 * kv head's flag (set by cl/nonfinite_flags.cl) chooses: the build without
 * lists the flagged heads' tiles for the other (MMA_FWD_WORK,
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
#define BLOCK_N 32
#endif
#ifndef MMA_GENERAL
#define MMA_GENERAL 1
#endif
#ifndef FCL_NONFINITE
#define FCL_NONFINITE 1
#endif
/* x * scale - mu must not become an fma (see attention_fwd_mma.cl). */
#pragma OPENCL FP_CONTRACT OFF

#define WG (WARPS * 32)
#define BLOCK_M (16 * WARPS)
/* Padded head dims and tile pitches: attention_abi.h, which the host's
 * local-memory check (FCL_TF32_FWD_LOCAL) reads too. */
#define DP FCL_TF32_PAD(HEAD_DIM)
#define DVP FCL_TF32_PAD(HEAD_DIM_V)
#define LDK FCL_TF32_LDK(HEAD_DIM)
#define LDV FCL_TF32_LDV(HEAD_DIM_V)
#define NT_S (BLOCK_N / 8)
#define NT_O (DVP / 8)
#define KQ (DP / 8)
#define NFW FCL_MMA_NFW(BLOCK_N)
/* Output tiles per pass of P V: registers for the fresh sums against
 * splitting P once per pass (8 rather than 4 measured faster at D=128 on
 * the H100: docs/defaults.md). */
#ifndef TF32_OC
#define TF32_OC (NT_O < 8 ? NT_O : 8)
#endif

#if BLOCK_N % 8 || DP > 256 || DVP > 256
#error "BLOCK_N must be a multiple of 8 and head dims at most 256"
#endif


/* Q of row r, columns c and c + 1 (zero outside the matrix). */
inline float2 tf32_q_pair(const __global float *q, long base, long ss, int r, int sq, int c) {
  float2 x = (float2)(0.0f);
  if (r < sq) {
    const long at = base + (long)r * ss + c;
    if (c < HEAD_DIM) x.x = q[at];
    if (c + 1 < HEAD_DIM) x.y = q[at + 1];
  }
  return x;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_attention_fwd_tf32(
    ATTN_FWD_PARAMS(float), /* attention_common.cl */
    __global int *nf_work)
{
  ATTN_FWD_UNPACK
  __local float k_s[BLOCK_N * LDK] __attribute__((aligned(16)));
  __local float v_s[BLOCK_N * LDV] __attribute__((aligned(16)));
  __local uint nf_s[NFW];  /* rows of the V tile holding inf or NaN */
  __local uint nfk_s[NFW]; /* and of the K tile */
  MMA_EMU_DECL(WARPS)

  MMA_FWD_WORK(nf_work) { /* one query tile (attention_common.cl) */
    MMA_FWD_TILE(nf_work); /* declares the tile's rows and key range */
    const int r0 = i0 + warp * 16 + g, r1 = r0 + 8; /* this lane's rows */

    if (ntiles > 0)
      tf32_tile_load(k_s, LDK, BLOCK_N, DP, k, k_base, k_ss, jt0, sk, HEAD_DIM, lid, WG);
    mma_cp_commit();
    /* Q stays f32 in registers (split per use: fewer registers than both
     * parts); A fragment order (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4). */
    float4 qf[KQ];
    MMA_UNROLL for (int kk = 0; kk < KQ; ++kk) {
      const float2 x0 = tf32_q_pair(q, q_base, q_ss, r0, sq, kk * 8 + 2 * t4);
      const float2 x1 = tf32_q_pair(q, q_base, q_ss, r1, sq, kk * 8 + 2 * t4);
      qf[kk] = (float4)(x0.x, x1.x, x0.y, x1.y);
    }

    float4 acc[NT_O];
    MMA_UNROLL for (int n = 0; n < NT_O; ++n) acc[n] = (float4)(0.0f);
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

    for (int it = 0; it < ntiles; ++it) {
      const int j0 = jt0 + it * BLOCK_N;
      if (FCL_NONFINITE && lid < NFW) nfk_s[lid] = 0u;
      /* K of this tile has landed; V's buffer is free */
      mma_cp_wait_all();
      barrier(CLK_LOCAL_MEM_FENCE);
      if (FCL_NONFINITE) tf32_tile_scan(k_s, LDK, BLOCK_N, DP, nfk_s, lid, WG);
      tf32_tile_load(v_s, LDV, BLOCK_N, DVP, v, v_base, v_ss, j0, sk, HEAD_DIM_V, lid, WG);
      mma_cp_commit();
      if (FCL_NONFINITE && lid < NFW) nf_s[lid] = 0u;
      if (FCL_NONFINITE) barrier(CLK_LOCAL_MEM_FENCE); /* the K tile scanned */
      uint nfb[NFW];
      bool nf_any = mma_tile_flags(nfk_s, FCL_NONFINITE, nfb, NFW);

#if FCL_DROPOUT
      uint zb[MMA_DROP_WORDS(BLOCK_N)]; /* keep bits of the lane's pairs (attention_common.cl) */
      MMA_FWD_DROP_BITS(zb, r0, r1);
#endif
      float4 s[NT_S];
      MMA_UNROLL for (int n = 0; n < NT_S; ++n) s[n] = (float4)(0.0f);
      MMA_UNROLL for (int kk = 0; kk < KQ; ++kk) {
        const tf32_a qa = tf32_split_a(qf[kk]);
        MMA_UNROLL for (int n = 0; n < NT_S; ++n) {
          const float2 kx = vload2(0, k_s + (n * 8 + g) * LDK + kk * 8 + 2 * t4);
          const tf32_b kb = tf32_split_b(kx);
          s[n] = MMA_TF32_PRODUCT(qa, kb, s[n]);
        }
      }
      MMA_SPECIAL(nf_any) /* uniform over the work-group */
        TF32_FIX_SCORES(s, q, q_base, q_ss, sq, nfb, k, k_base, k_ss, j0, HEAD_DIM);

      MMA_SOFTMAX_STEP(); /* declares mu0, mu1 (attention_common.cl) */

      MMA_UNROLL for (int n = 0; n < NT_S; ++n) {
        const float4 x = s[n];
  #if MMA_GENERAL
        const float4 p = (float4)(mma_exp2(x.x - mu0), mma_exp2(x.y - mu0),
                                  mma_exp2(x.z - mu1), mma_exp2(x.w - mu1));
  #else
        /* The product rounded as the row maximum was (attention_fwd_mma.cl). */
        const float4 xs = x * qk_scale;
        const float4 p = (float4)(mma_exp2(xs.x - mu0), mma_exp2(xs.y - mu0),
                                  mma_exp2(xs.z - mu1), mma_exp2(xs.w - mu1));
  #endif
        l0 += p.x + p.y;
        l1 += p.z + p.w;
        const float4 q = MMA_FWD_DROP(p, zb, n); /* dropped pairs 0 */
        s[n] = (float4)(q.x, q.z, q.y, q.w); /* A fragment order */
      }

      mma_cp_wait_all(); /* V of this tile */
      barrier(CLK_LOCAL_MEM_FENCE);
      if (it + 1 < ntiles)
        tf32_tile_load(k_s, LDK, BLOCK_N, DP, k, k_base, k_ss, j0 + BLOCK_N, sk, HEAD_DIM, lid,
                       WG);
      mma_cp_commit();
      if (FCL_NONFINITE) {
        tf32_tile_scan(v_s, LDV, BLOCK_N, DVP, nf_s, lid, WG);
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      nf_any = mma_tile_flags(nf_s, FCL_NONFINITE, nfb, NFW);
      /* O += P V, TF32_OC output tiles at a time: the tile's products are
       * summed in fresh accumulators, then added to O in f32. The tensor cores
       * cut their sums toward zero, so one accumulator carried over all keys
       * drifts by up to an ulp of O per mma (3 seqlen_k / 8 of them:
       * docs/defaults.md has what that came to); over one tile's
       * 3 BLOCK_N / 8 the
       * cuts stay small and their signs vary from tile to tile. */
      MMA_UNROLL for (int c0 = 0; c0 < NT_O; c0 += TF32_OC) {
        float4 part[TF32_OC];
        MMA_UNROLL for (int c = 0; c < TF32_OC; ++c) part[c] = (float4)(0.0f);
        MMA_UNROLL for (int n = 0; n < NT_S; ++n) {
          const tf32_a pa = tf32_split_a(s[n]);
          const __local float *vr = v_s + (n * 8 + 2 * t4) * LDV + g;
          MMA_UNROLL for (int c = 0; c < TF32_OC; ++c) {
            const int dn = c0 + c;
            if (dn < NT_O) {
              const tf32_b vb = tf32_split_b((float2)(vr[dn * 8], vr[LDV + dn * 8]));
              part[c] = MMA_TF32_PRODUCT(pa, vb, part[c]);
            }
          }
        }
        MMA_UNROLL for (int c = 0; c < TF32_OC; ++c)
          if (c0 + c < NT_O) acc[c0 + c] += part[c];
      }
      MMA_SPECIAL(nf_any) /* uniform over the work-group */
        TF32_FIX_NONFINITE(acc, NT_O, s, nfb, v, v_base, v_ss, j0, HEAD_DIM_V, r0, r1,
                           FWD_VISIBLE_KEPT);
    }

    MMA_FWD_STORE(); /* o and lse of the lane's rows (attention_common.cl) */
  }
}
