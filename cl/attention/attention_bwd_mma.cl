/* FlashAttention-2 backward on NVIDIA tensor cores (prepend dtype.cl,
 * attention_common.cl and mma_common.cl); f16 and bf16 storage, no float
 * atomics: delta, dQ and dK/dV are separate kernels, and each gradient
 * element is summed by one lane in a fixed order.
 *
 * fcl_attention_bwd_mma_dq: a work-group of WARPS warps owns
 * BLOCK_M = 16 * MT * WARPS query rows (MT m16 tiles a warp, Q and dO
 * fragments in registers) and walks key tiles of BLOCK_N keys:
 * S = Q K^T, dP = dO V^T, P = exp2(S - lse), dS = P (dP - delta) scaled,
 * dQ += dS K.
 * fcl_attention_bwd_mma_dkdv: a work-group of KV_WARPS warps owns
 * 16 * MT * KV_WARPS keys of one kv head (K in local memory, V fragments in
 * registers) and walks tiles of KV_BLOCK_N queries of every query head of
 * its group (KV_STAGES in flight): S^T = K Q^T,
 * dP^T = V dO^T, dV += P^T dO, dK += dS^T Q.
 * With MT = 2 every B fragment read from local memory (K and V tiles for
 * dQ, Q and dO tiles for dK/dV) feeds two mma, as FlashAttention-2's 32
 * rows a warp do.
 * P and dS are rounded to the storage type for the products that use them.
 * Head dims are padded with zeros to multiples of 16.
 * Masked pairs: P and dS are selected to exactly 0 (whatever the score, dP
 * or delta), and the B tiles of dS K, P^T dO and dS^T Q are scanned, on
 * tiles with masked pairs only, for inf and NaN that the mma would multiply
 * by those zeros (mma_common.cl, "Non-finite operands"), with FCL_NONFINITE:
 * built with and without it, a work-group runs in the build that its kv
 * head's flag (nf_flags, set by cl/nonfinite_flags.cl from K, Q and dO)
 * chooses.
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
/* Tiles in flight: with 2, the next tile of the walk (K and V for dQ; Q,
 * dO, lse and delta for dK/dV) is loaded while this one is worked on. */
#ifndef STAGES
#define STAGES 1
#endif
/* dK/dV's own warps, tile and stages (fcl_attention_bwd_mma_dkdv below
 * takes them in place of WARPS, BLOCK_N and STAGES). */
#ifndef KV_WARPS
#define KV_WARPS 4
#endif
#ifndef KV_BLOCK_N
#define KV_BLOCK_N 64
#endif
#ifndef KV_STAGES
#define KV_STAGES 1
#endif
#ifndef MMA_GENERAL
#define MMA_GENERAL 1
#endif
#ifndef FCL_NONFINITE
#define FCL_NONFINITE 1
#endif

#define WG (WARPS * 32)
#define BLOCK_M (16 * MT * WARPS)
#define DP ((HEAD_DIM + 15) / 16 * 16)
#define DVP ((HEAD_DIM_V + 15) / 16 * 16)
#define LDK (DP + 8)
#define LDV (DVP + 8)
#define NT (BLOCK_N / 8)
#define NFW ((BLOCK_N + 31) / 32)
/* One stage's two tiles (dQ: K and V; dK/dV: Q and dO), and the space of
 * all stages, which first holds the block's own rows (dQ: Q and dO; dK/dV:
 * V). local_bytes() in src/attention/attention_bwd_mma.c mirrors them. */
#define BM_TILE (BLOCK_N * (LDK + LDV))
#define DQ_SIZE FCL_MAX(STAGES * BM_TILE, BLOCK_M * (LDK + LDV))
#define DKDV_SIZE FCL_MAX(STAGES * BM_TILE, BLOCK_M * LDV)
#define ST_PER ((BLOCK_N + WG - 1) / WG) /* lse and delta values a work-item loads */

#if BLOCK_N % 16 || KV_BLOCK_N % 16 || DP > 256 || DVP > 256
#error "BLOCK_N and KV_BLOCK_N must be multiples of 16 and head dims at most 256"
#endif

/* Per-sequence geometry: token offsets (varlen) or -1 (batch-indexed). */
typedef struct {
  int  sq, sk;
  long q_tok, k_tok, stat_row0;
} bm_seq;

inline bm_seq bm_sequence(int b, int seqlen_q, int seqlen_k, const __global int *cu_q,
                          const __global int *cu_k, int varlen, long stat_sb) {
  bm_seq s = {seqlen_q, seqlen_k, -1, -1, (long)b * stat_sb};
  if (varlen) {
    s.q_tok = cu_q[b];
    s.k_tok = cu_k[b];
    s.sq = cu_q[b + 1] - cu_q[b];
    s.sk = cu_k[b + 1] - cu_k[b];
    s.stat_row0 = s.q_tok;
  }
  return s;
}

inline long bm_base(long off, long sb, long ss, long sh, int b, long tok0, int h) {
  return off + (tok0 < 0 ? (long)b * sb : tok0 * ss) + (long)h * sh;
}

/* Query i sees key j (i past the end sees nothing). */
#define BM_VISIBLE(i, j) ((i) < sq && attn_visible(i, j, diag, sk, wl, wr))

/* dS of one element (scale included), and P; lse2 = +inf gives P = 0. A
 * masked pair gives exactly 0 for both, even where its score, dP or delta
 * is NaN or inf (from q, k, v, dO or o of a pair that must not meet). */
inline float bm_ds(float s, float dp, int i, int j, bool full, int diag, int sq, int sk,
                   int wl, int wr, float qk_scale, float softcap_l2, float slope_l2,
                   float lse2, float dlt, float scale, float *p_out) {
#if MMA_GENERAL
  float t;
  const float x = attn_score(s, i, j, diag, qk_scale, softcap_l2, slope_l2, &t);
  float p = mma_exp2(x - lse2);
#else
  float p = mma_exp2(fma(s, qk_scale, -lse2));
#endif
  const bool hide = !full && !BM_VISIBLE(i, j);
  if (hide) p = 0.0f;
  float g = p * (dp - dlt);
#if MMA_GENERAL
  if (softcap_l2 > 0.0f) g *= 1.0f - t * t;
#endif
  *p_out = p;
  return hide ? 0.0f : g * scale;
}

#define BM_TENSOR(n) long n##_off, long n##_sb, long n##_ss, long n##_sh
#define BM_COMMON_ARGS                                                          \
  const __global ushort *q, const __global ushort *k, const __global ushort *v, \
      const __global ushort *dout, const __global float *lse,                   \
      const __global float *delta, const __global float *alibi,                 \
      const __global int *cu_q, const __global int *cu_k, BM_TENSOR(q),         \
      BM_TENSOR(k), BM_TENSOR(v), BM_TENSOR(do), long stat_sb, long stat_sh,    \
      int seqlen_q, int seqlen_k, int heads_q, int group, int wl, int wr,       \
      int diag_shift, float qk_scale, float softcap_l2, float scale, int flags, \
      const __global int *nf_flags

/* Packs two C fragments (n tiles 2c, 2c + 1) as the A fragment of chunk c. */
#define MMA_PACK_A(dst_, n_, v_)                                           \
  do {                                                                     \
    const uint lo_ = mma_pack((v_).x, (v_).y), hi_ = mma_pack((v_).z, (v_).w); \
    if ((n_) & 1) { dst_[(n_) / 2].z = lo_; dst_[(n_) / 2].w = hi_; }      \
    else          { dst_[(n_) / 2].x = lo_; dst_[(n_) / 2].y = hi_; }      \
  } while (0)

/* acc[mt][0 .. 2 * nb) += A[mt] (16 x BLOCK_N, fragments a[mt]) times the
 * local tile (BLOCK_N rows of pitch ld), read transposed: 16 output
 * columns a step, each B fragment feeding the warp's MT tiles. */
#define MMA_ACC_T(acc, a, tile, ld, nb)                                              \
  MMA_UNROLL for (int kk_ = 0; kk_ < BLOCK_N / 16; ++kk_) {                          \
    MMA_UNROLL for (int c_ = 0; c_ < (nb); ++c_) {                                   \
      const uint4 b_ = mma_ldsm_x4_t(                                                \
          tile, (kk_ * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * (ld) + c_ * 16 +   \
                    (lane >> 4) * 8);                                                \
      MMA_UNROLL for (int mt_ = 0; mt_ < MT; ++mt_) {                                \
        acc[mt_][2 * c_] = mma_16816(a[mt_][kk_], b_.xy, acc[mt_][2 * c_]);          \
        acc[mt_][2 * c_ + 1] = mma_16816(a[mt_][kk_], b_.zw, acc[mt_][2 * c_ + 1]);  \
      }                                                                              \
    }                                                                                \
  }

/* s[mt][0 .. NT) += A[mt] (16 x 16 * nk, fragments a[mt]) times the tile's
 * rows, as B (BLOCK_N rows of pitch ld: row n is column n of B). */
#define MMA_SCORES(s, a, tile, ld, nk)                                              \
  MMA_UNROLL for (int kk_ = 0; kk_ < (nk); ++kk_) {                                 \
    MMA_UNROLL for (int np_ = 0; np_ < NT / 2; ++np_) {                             \
      const uint4 b_ = mma_ldsm_x4(                                                 \
          tile, (np_ * 16 + (lane >> 4) * 8 + (lane & 7)) * (ld) + kk_ * 16 +       \
                    ((lane >> 3) & 1) * 8);                                         \
      MMA_UNROLL for (int mt_ = 0; mt_ < MT; ++mt_) {                               \
        s[mt_][2 * np_] = mma_16816(a[mt_][kk_], b_.xy, s[mt_][2 * np_]);           \
        s[mt_][2 * np_ + 1] = mma_16816(a[mt_][kk_], b_.zw, s[mt_][2 * np_ + 1]);   \
      }                                                                             \
    }                                                                               \
  }

/* The m16 tile mt of this warp: its first row within the block. */
#define MT_ROW(mt) ((warp * MT + (mt)) * 16)

/* Rows r0, r1 (this lane's of one m16 tile, those below lim) of the C
 * fragments acc[0 .. nt) to dst: columns d < width. */
#define BM_STORE_ROWS(dst, base, stride, width, nt, acc, r0, r1, lim)               \
  MMA_UNROLL for (int n_ = 0; n_ < (nt); ++n_) {                                    \
    const int d_ = n_ * 8 + 2 * t4;                                                 \
    if ((r0) < (lim)) {                                                             \
      const long at_ = (base) + (long)(r0) * (stride) + d_;                         \
      if (d_ < (width)) FCL_STORE(dst, at_, acc[n_].x);                             \
      if (d_ + 1 < (width)) FCL_STORE(dst, at_ + 1, acc[n_].y);                     \
    }                                                                               \
    if ((r1) < (lim)) {                                                             \
      const long at_ = (base) + (long)(r1) * (stride) + d_;                         \
      if (d_ < (width)) FCL_STORE(dst, at_, acc[n_].z);                             \
      if (d_ + 1 < (width)) FCL_STORE(dst, at_ + 1, acc[n_].w);                     \
    }                                                                               \
  }

/* delta_i = sum_d dO[i][d] * O[i][d], stored like lse: the diagonal of
 * dO O^T by the same mma sequence that forms dP = dO V^T, so that where P is
 * one-hot (O = V exactly) dP - delta is exactly 0, as in the reference. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_attention_bwd_mma_delta(
    const __global ushort *o, const __global ushort *dout, __global float *delta,
    const __global int *cu_q, const __global int *cu_k, BM_TENSOR(o), BM_TENSOR(do),
    long stat_sb, long stat_sh, int seqlen_q, int seqlen_k, int heads_q, int varlen) {
  __local ushort o_s[BLOCK_M * LDV] __attribute__((aligned(16)));
  __local ushort do_s[BLOCK_M * LDV] __attribute__((aligned(16)));
  __local float dsum_s[BLOCK_M];
  MMA_EMU_DECL(WARPS)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int b = get_group_id(2) / heads_q, h = get_group_id(2) % heads_q;
  const bm_seq s = bm_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, varlen, stat_sb);
  const int i0 = get_group_id(0) * BLOCK_M;
  if (i0 >= s.sq) return;
  const long ob = bm_base(o_off, o_sb, o_ss, o_sh, b, s.q_tok, h);
  const long dob = bm_base(do_off, do_sb, do_ss, do_sh, b, s.q_tok, h);
  mma_tile_load(o_s, LDV, BLOCK_M, DVP, o, ob, o_ss, i0, s.sq, HEAD_DIM_V, lid, WG);
  mma_tile_load(do_s, LDV, BLOCK_M, DVP, dout, dob, do_ss, i0, s.sq, HEAD_DIM_V, lid, WG);
  mma_cp_commit();
  mma_cp_wait_all();
  barrier(CLK_LOCAL_MEM_FENCE);
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
    float4 d0 = (float4)(0.0f), d1 = (float4)(0.0f);
    MMA_UNROLL for (int kk = 0; kk < DVP / 16; ++kk) {
      const uint4 a = mma_ldsm_x4(do_s, (MT_ROW(mt) + (lane & 15)) * LDV + kk * 16 + (lane >> 4) * 8);
      const uint4 bo = mma_ldsm_x4(
          o_s, (MT_ROW(mt) + (lane >> 4) * 8 + (lane & 7)) * LDV + kk * 16 + ((lane >> 3) & 1) * 8);
      d0 = mma_16816(a, bo.xy, d0);
      d1 = mma_16816(a, bo.zw, d1);
    }
    /* (g, g) sits in tile 0 and (g + 8, g + 8) in tile 1, both with lane
     * 4 g + g / 2; they go out through local memory, one work-item a row. */
    if (t4 == g >> 1) {
      dsum_s[MT_ROW(mt) + g] = (g & 1) ? d0.y : d0.x;
      dsum_s[MT_ROW(mt) + g + 8] = (g & 1) ? d1.w : d1.z;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int r = lid; r < BLOCK_M; r += WG)
    if (i0 + r < s.sq) delta[s.stat_row0 + (long)h * stat_sh + i0 + r] = dsum_s[r];
}

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
      MMA_UNROLL for (int w = 0; w < NFW; ++w) {
        nfb[w] = some_masked ? nfc[w] : 0u;
        nf_any |= nfb[w] != 0u;
      }
    }
    float4 sc[MT][NT], dp[MT][NT];
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_UNROLL for (int n = 0; n < NT; ++n) sc[mt][n] = dp[mt][n] = (float4)(0.0f);
    MMA_SCORES(sc, qf, k_s, LDK, DP / 16);
    MMA_SCORES(dp, dof, v_s, LDV, DVP / 16);
    const bool full = j0 >= i_last + diag - wl && j0 + BLOCK_N - 1 <= i0 + diag + wr &&
                      j0 + BLOCK_N <= sk;
    uint4 dsf[MT][NT / 2];
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_UNROLL for (int n = 0; n < NT; ++n) {
        const int j = j0 + n * 8 + 2 * t4, ra = rr[mt][0], rb = rr[mt][1];
        const float la = lse2[mt][0], lb = lse2[mt][1], da = dl[mt][0], db = dl[mt][1];
        float4 ds;
        float p;
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
    MMA_ACC_T(acc, dsf, k_s, LDK, DP / 16);
    MMA_SPECIAL(nf_any)
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
        MMA_FIX_NONFINITE(acc[mt], DP / 8, dsf[mt], nfb, k, kb, k_ss, j0, HEAD_DIM, rr[mt][0],
                          rr[mt][1], BM_VISIBLE);
  }

  const long dqb = bm_base(dq_off, dq_sb, dq_ss, dq_sh, b, s.q_tok, h);
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
    BM_STORE_ROWS(dq, dqb, dq_ss, HEAD_DIM, DP / 8, acc[mt], rr[mt][0], rr[mt][1], s.sq);
}

/* Key r seen by query c. */
#define KV_VISIBLE(r, c) BM_VISIBLE(c, r)

/* From here on the work-group and tiles are dK/dV's: every size above
 * (WG, BLOCK_M, NT, NFW, the tiles' and the fix-ups') follows, being a
 * macro of these. */
#undef WARPS
#undef BLOCK_N
#undef STAGES
#define WARPS KV_WARPS
#define BLOCK_N KV_BLOCK_N
#define STAGES KV_STAGES

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_attention_bwd_mma_dkdv(BM_COMMON_ARGS, __global fcl_elem *dk, BM_TENSOR(dk),
                                __global fcl_elem *dv, BM_TENSOR(dv)) {
  __local ushort k_s[BLOCK_M * LDK] __attribute__((aligned(16))); /* this block's keys */
  /* V of the block, then each stage's Q and dO tiles */
  __local ushort qd_s[DKDV_SIZE] __attribute__((aligned(16)));
  __local float st_s[STAGES][2 * BLOCK_N]; /* lse (log2, +inf: no P) and delta of the tile */
  __local uint nf_s[STAGES][2 * NFW];      /* queries of the Q, dO tiles holding inf or NaN */
  MMA_EMU_DECL(WARPS)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int heads_kv = heads_q / group;
  const int b = get_group_id(2) / heads_kv, hk = get_group_id(2) % heads_kv;
  if ((nf_flags[hk] != 0) != FCL_NONFINITE) return; /* the other build's */
  const bm_seq s = bm_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, flags & 4, stat_sb);
  const int j0 = get_group_id(0) * BLOCK_M; /* first blocks have the most queries */
  if (j0 >= s.sk) return;
  const long kb = bm_base(k_off, k_sb, k_ss, k_sh, b, s.k_tok, hk);
  const long vb = bm_base(v_off, v_sb, v_ss, v_sh, b, s.k_tok, hk);
  const int diag = s.sk - s.sq + diag_shift, sk = s.sk, sq = s.sq; /* row i at key i + diag */
  const int j_last = min(j0 + BLOCK_M, sk) - 1;
  const int i_lo = max(0, j0 - diag - wr);
  const int i_hi = min(s.sq - 1, j_last - diag + wl);
  int rk[MT][2]; /* this lane's keys of each m16 tile */
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
    rk[mt][0] = j0 + MT_ROW(mt) + g, rk[mt][1] = rk[mt][0] + 8;

  mma_tile_load(k_s, LDK, BLOCK_M, DP, k, kb, k_ss, j0, sk, HEAD_DIM, lid, WG);
  mma_tile_load(qd_s, LDV, BLOCK_M, DVP, v, vb, v_ss, j0, sk, HEAD_DIM_V, lid, WG);
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
  const int it0 = i_lo / BLOCK_N;
  const int per_head = i_hi >= it0 * BLOCK_N ? (i_hi - it0 * BLOCK_N) / BLOCK_N + 1 : 0;
  const int ntiles = per_head * group;
#define TILE_HEAD(t_) (hk * group + (t_) / per_head)
#define TILE_ROW0(t_) ((it0 + (t_) % per_head) * BLOCK_N)
  /* Tile t's Q and dO into stage stg. */
#define DKDV_LOAD(t_, stg_)                                                                   \
  do {                                                                                        \
    const int h_ = TILE_HEAD(t_), i_ = TILE_ROW0(t_);                                         \
    __local ushort *q_ = qd_s + (stg_) * BM_TILE;                                             \
    mma_tile_load(q_, LDK, BLOCK_N, DP, q, bm_base(q_off, q_sb, q_ss, q_sh, b, s.q_tok, h_),  \
                  q_ss, i_, s.sq, HEAD_DIM, lid, WG);                                         \
    mma_tile_load(q_ + BLOCK_N * LDK, LDV, BLOCK_N, DVP, dout,                                \
                  bm_base(do_off, do_sb, do_ss, do_sh, b, s.q_tok, h_), do_ss, i_, s.sq,      \
                  HEAD_DIM_V, lid, WG);                                                       \
    mma_cp_commit();                                                                          \
  } while (0)
  /* Tile t's lse (log2; +inf: no P) and delta, this work-item's share, into
   * registers (STATS) and then stage stg (STATS_STORE). */
#define DKDV_STATS(t_, x_)                                                                    \
  do {                                                                                        \
    const int i_ = TILE_ROW0(t_);                                                             \
    const long st_ = s.stat_row0 + (long)TILE_HEAD(t_) * stat_sh;                             \
    MMA_UNROLL for (int e_ = 0; e_ < ST_PER; ++e_) {                                          \
      const int c_ = lid + e_ * WG;                                                           \
      const bool in_ = c_ < BLOCK_N && i_ + c_ < s.sq;                                        \
      const float l_ = in_ ? lse[st_ + i_ + c_] : -INFINITY;                                  \
      x_[e_][0] = l_ == -INFINITY ? INFINITY : l_ * FCL_LOG2E;                                \
      x_[e_][1] = in_ ? delta[st_ + i_ + c_] : 0.0f;                                          \
    }                                                                                         \
  } while (0)
#define DKDV_STATS_STORE(stg_, x_)                                                            \
  MMA_UNROLL for (int e_ = 0; e_ < ST_PER; ++e_)                                              \
    if (lid + e_ * WG < BLOCK_N) {                                                            \
      st_s[stg_][lid + e_ * WG] = x_[e_][0];                                                  \
      st_s[stg_][BLOCK_N + lid + e_ * WG] = x_[e_][1];                                        \
    }
  float stx[ST_PER][2]; /* a tile's lse and delta on their way to local memory */
  barrier(CLK_LOCAL_MEM_FENCE); /* V is in registers: its space takes the tiles */
  if (lid < STAGES * 2 * NFW) nf_s[lid / (2 * NFW)][lid % (2 * NFW)] = 0u;
  if (STAGES == 2 && ntiles > 0) {
    DKDV_LOAD(0, 0);
    DKDV_STATS(0, stx);
    DKDV_STATS_STORE(0, stx);
  }
  for (int t = 0; t < ntiles; ++t) {
    const int h = TILE_HEAD(t), i0 = TILE_ROW0(t), cur = STAGES == 2 ? (t & 1) : 0;
    const long qb = bm_base(q_off, q_sb, q_ss, q_sh, b, s.q_tok, h);
    const long dob = bm_base(do_off, do_sb, do_ss, do_sh, b, s.q_tok, h);
    const float slope_l2 = (flags & 2) ? alibi[h] * FCL_LOG2E : 0.0f;
    __local ushort *const q_s = qd_s + cur * BM_TILE, *const do_s = q_s + BLOCK_N * LDK;
    __local const float *const stc = st_s[cur];
    __local uint *const nfc = nf_s[cur];
    /* Some (query, key) pair is masked (queries past the end are zeros). */
    const int i_end = min(i0 + BLOCK_N, s.sq) - 1;
    const bool some_masked = FCL_NONFINITE && !(j0 >= i_end + diag - wl && j_last <= i0 + diag + wr);
    if (STAGES == 1) {
      if (t > 0) barrier(CLK_LOCAL_MEM_FENCE); /* everyone is done with the last tiles */
      DKDV_LOAD(t, 0);
      DKDV_STATS(t, stx);
      DKDV_STATS_STORE(0, stx);
      if (some_masked && lid < 2 * NFW) nfc[lid] = 0u;
    }
    mma_cp_wait_all();
    barrier(CLK_LOCAL_MEM_FENCE);
    const bool next = STAGES == 2 && t + 1 < ntiles;
    if (next) {
      /* The other stage's last readers (tile t - 1) are past the barrier;
       * lse and delta go to it after this tile's products. */
      DKDV_LOAD(t + 1, cur ^ 1);
      DKDV_STATS(t + 1, stx);
      if (lid < 2 * NFW) nf_s[cur ^ 1][lid] = 0u;
    }
    uint nfq[NFW] = {0u}, nfo[NFW] = {0u};
    bool nfq_any = false, nfo_any = false;
    if (some_masked) { /* Q and dO stay as they are for the scores, then lose
                        * their inf and NaN for the products */
      mma_tile_scan(q_s, LDK, BLOCK_N, DP, 0, nfc, lid, WG);
      mma_tile_scan(do_s, LDV, BLOCK_N, DVP, 0, nfc + NFW, lid, WG);
    }
    MMA_SPECIAL(some_masked) {
      barrier(CLK_LOCAL_MEM_FENCE);
      MMA_UNROLL for (int w = 0; w < NFW; ++w) {
        nfq[w] = some_masked ? nfc[w] : 0u;
        nfo[w] = some_masked ? nfc[NFW + w] : 0u;
        nfq_any |= nfq[w] != 0u;
        nfo_any |= nfo[w] != 0u;
      }
    }
    float4 sc[MT][NT], dp[MT][NT];
    MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
      MMA_UNROLL for (int n = 0; n < NT; ++n) sc[mt][n] = dp[mt][n] = (float4)(0.0f);
    {
      uint4 kf[MT][DP / 16];
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
        MMA_UNROLL for (int kk = 0; kk < DP / 16; ++kk)
          kf[mt][kk] =
              mma_ldsm_x4(k_s, (MT_ROW(mt) + (lane & 15)) * LDK + kk * 16 + (lane >> 4) * 8);
      MMA_SCORES(sc, kf, q_s, LDK, DP / 16);
    }
    MMA_SCORES(dp, vf, do_s, LDV, DVP / 16);
    const bool full = i0 + BLOCK_N <= s.sq && j0 >= i0 + BLOCK_N - 1 + diag - wl &&
                      j_last <= i0 + diag + wr;
    uint4 pf[MT][NT / 2], dsf[MT][NT / 2];
    MMA_UNROLL for (int n = 0; n < NT; ++n) {
      const int c = n * 8 + 2 * t4, i = i0 + c;
      const float la = stc[c], lb = stc[c + 1];
      const float da = stc[BLOCK_N + c], db = stc[BLOCK_N + c + 1];
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
        const int ra = rk[mt][0], rb = rk[mt][1];
        float p0, p1, p2, p3;
        float4 ds;
        ds.x = bm_ds(sc[mt][n].x, dp[mt][n].x, i, ra, full, diag, sq, sk, wl, wr, qk_scale,
                     softcap_l2, slope_l2, la, da, scale, &p0);
        ds.y = bm_ds(sc[mt][n].y, dp[mt][n].y, i + 1, ra, full, diag, sq, sk, wl, wr,
                     qk_scale, softcap_l2, slope_l2, lb, db, scale, &p1);
        ds.z = bm_ds(sc[mt][n].z, dp[mt][n].z, i, rb, full, diag, sq, sk, wl, wr, qk_scale,
                     softcap_l2, slope_l2, la, da, scale, &p2);
        ds.w = bm_ds(sc[mt][n].w, dp[mt][n].w, i + 1, rb, full, diag, sq, sk, wl, wr,
                     qk_scale, softcap_l2, slope_l2, lb, db, scale, &p3);
        MMA_PACK_A(pf[mt], n, (float4)(p0, p1, p2, p3));
        MMA_PACK_A(dsf[mt], n, ds);
      }
    }
    /* Flags uniform over the work-group; rows are keys, tile rows queries. */
    MMA_SPECIAL(nfq_any || nfo_any) {
      barrier(CLK_LOCAL_MEM_FENCE); /* the scores are done with Q and dO */
      if (nfq_any) mma_tile_scan(q_s, LDK, BLOCK_N, DP, 1, nfc, lid, WG);
      if (nfo_any) mma_tile_scan(do_s, LDV, BLOCK_N, DVP, 1, nfc + NFW, lid, WG);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    MMA_ACC_T(gv, pf, do_s, LDV, DVP / 16);
    MMA_SPECIAL(nfo_any)
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
        MMA_FIX_NONFINITE(gv[mt], DVP / 8, pf[mt], nfo, dout, dob, do_ss, i0, HEAD_DIM_V,
                          rk[mt][0], rk[mt][1], KV_VISIBLE);
    MMA_ACC_T(gk, dsf, q_s, LDK, DP / 16);
    MMA_SPECIAL(nfq_any)
      MMA_UNROLL for (int mt = 0; mt < MT; ++mt)
        MMA_FIX_NONFINITE(gk[mt], DP / 8, dsf[mt], nfq, q, qb, q_ss, i0, HEAD_DIM, rk[mt][0],
                          rk[mt][1], KV_VISIBLE);
    if (next) DKDV_STATS_STORE(cur ^ 1, stx);
  }

  const long dkb = bm_base(dk_off, dk_sb, dk_ss, dk_sh, b, s.k_tok, hk);
  const long dvb = bm_base(dv_off, dv_sb, dv_ss, dv_sh, b, s.k_tok, hk);
  MMA_UNROLL for (int mt = 0; mt < MT; ++mt) {
    BM_STORE_ROWS(dk, dkb, dk_ss, HEAD_DIM, DP / 8, gk[mt], rk[mt][0], rk[mt][1], sk);
    BM_STORE_ROWS(dv, dvb, dv_ss, HEAD_DIM_V, DVP / 8, gv[mt], rk[mt][0], rk[mt][1], sk);
  }
}
