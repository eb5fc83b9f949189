/* requires: attention/attention_common.cl common/mma_common.cl attention/attention_dropout_mma.cl */
/* FlashAttention-2 backward on NVIDIA tensor cores (prepend dtype.cl,
 * attention_common.cl and mma_common.cl; append attention_bwd_mma_dq.cl
 * and attention_bwd_mma_dkdv.cl); f16 and bf16 storage, no float atomics:
 * delta, dQ and dK/dV are separate kernels, and each gradient element is
 * summed by one lane in a fixed order. This file holds what they share
 * and the delta kernel.
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
 * With FCL_DROPOUT the forward's mask Z is regenerated where the scores
 * are (attention_dropout_mma.cl; BM_DROP): with s = 1/(1-p), dP becomes
 * Z ? s dP : 0 before dS = P (dP - delta), and dV takes Z ? s P : 0
 * (selected, so that a NaN of a dropped pair stays out; the fix-up of dV's
 * non-finite products adds the kept pairs only).
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
/* dK/dV's own warps, tile and stages (fcl_attention_bwd_mma_dkdv's, in
 * attention_bwd_mma_dkdv.cl; WARPS, BLOCK_N and STAGES are delta's and
 * dQ's). */
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

#define DP ((HEAD_DIM + 15) / 16 * 16)
#define DVP ((HEAD_DIM_V + 15) / 16 * 16)
#define LDK (DP + 8)
#define LDV (DVP + 8)
/* A kernel's work-group and tiles from its warps w and tile of bn keys or
 * queries: each kernel names its own (delta's and dQ's below, dK/dV's KV_,
 * Hopper's WK_ and WQ_ in their files), so that no file redefines
 * another's. */
#define BM_WG(w) ((w) * 32)
#define BM_BLOCK_M(w) (16 * MT * (w))
#define BM_NT(bn) ((bn) / 8)
#define BM_NFW(bn) (((bn) + 31) / 32)
/* One stage's two tiles (dQ: K and V; dK/dV: Q and dO). */
#define BM_TILE_OF(bn) ((bn) * (LDK + LDV))
#define WG BM_WG(WARPS)
#define BLOCK_M BM_BLOCK_M(WARPS)
#define NT BM_NT(BLOCK_N)
#define NFW BM_NFW(BLOCK_N)
#define BM_TILE BM_TILE_OF(BLOCK_N)
#define KV_WG BM_WG(KV_WARPS)
#define KV_BLOCK_M BM_BLOCK_M(KV_WARPS)
#define KV_NT BM_NT(KV_BLOCK_N)
#define KV_NFW BM_NFW(KV_BLOCK_N)
#define KV_TILE BM_TILE_OF(KV_BLOCK_N)
/* The space of all stages, which first holds the block's own rows (dQ: Q
 * and dO; dK/dV: V). local_bytes() in src/attention/attention_bwd_mma.c
 * mirrors them. */
#define DQ_SIZE FCL_MAX(STAGES * BM_TILE, BLOCK_M * (LDK + LDV))
#define DKDV_SIZE FCL_MAX(KV_STAGES * KV_TILE, KV_BLOCK_M * LDV)
/* lse and delta values a dK/dV work-item loads */
#define KV_ST_PER ((KV_BLOCK_N + KV_WG - 1) / KV_WG)

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

/* Dropout: the element index of (query head h_, query i, key j) of the
 * kernel's batch b; dP (or P) of n8 tile n scaled where kept and 0 where
 * dropped, by the tile's keep bits kb (MMA_DROP_BITS_OF). */
#if FCL_DROPOUT
#define BM_DROP_INDEX(h_, i, j) attn_drop_index(b, h_, i, j, heads_q, seqlen_q, seqlen_k)
#define BM_DROP(x, kb, n) mma_drop_apply(x, MMA_DROP_BITS_OF(kb, n), drop_args_.drop_scale)
#else
#define BM_DROP(x, kb, n) (x)
#endif

#define BM_TENSOR(n) long n##_off, long n##_sb, long n##_ss, long n##_sh
#define BM_COMMON_ARGS                                                          \
  const __global ushort *q, const __global ushort *k, const __global ushort *v, \
      const __global ushort *dout, const __global float *lse,                   \
      const __global float *delta, const __global float *alibi,                 \
      const __global int *cu_q, const __global int *cu_k, BM_TENSOR(q),         \
      BM_TENSOR(k), BM_TENSOR(v), BM_TENSOR(do), long stat_sb, long stat_sh,    \
      int seqlen_q, int seqlen_k, int heads_q, int group, int wl, int wr,       \
      int diag_shift, float qk_scale, float softcap_l2, float scale, int flags, \
      const fcl_attn_dropout_scalars drop_args_,                                \
      const __global int *nf_flags

/* Packs two C fragments (n tiles 2c, 2c + 1) as the A fragment of chunk c. */
#define MMA_PACK_A(dst_, n_, v_)                                               \
  do {                                                                         \
    const uint lo_ = mma_pack((v_).x, (v_).y), hi_ = mma_pack((v_).z, (v_).w); \
    if ((n_) & 1) { dst_[(n_) / 2].z = lo_; dst_[(n_) / 2].w = hi_; }          \
    else          { dst_[(n_) / 2].x = lo_; dst_[(n_) / 2].y = hi_; }          \
  } while (0)

/* acc[mt][0 .. 2 * nb) += A[mt] (16 x bn_, fragments a[mt]) times the
 * local tile (bn_ rows of pitch ld), read transposed: 16 output columns a
 * step, each B fragment feeding the warp's MT tiles. */
#define MMA_ACC_T(acc, a, tile, ld, nb, bn_)                                         \
  MMA_UNROLL for (int kk_ = 0; kk_ < bn_ / 16; ++kk_) {                              \
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

/* s[mt][0 .. nt_) += A[mt] (16 x 16 * nk, fragments a[mt]) times the
 * tile's rows, as B (8 * nt_ rows of pitch ld: row n is column n of B). */
#define MMA_SCORES(s, a, tile, ld, nk, nt_)                                         \
  MMA_UNROLL for (int kk_ = 0; kk_ < (nk); ++kk_) {                                 \
    MMA_UNROLL for (int np_ = 0; np_ < nt_ / 2; ++np_) {                            \
      const uint4 b_ = mma_ldsm_x4(                                                 \
          tile, (np_ * 16 + (lane >> 4) * 8 + (lane & 7)) * (ld) + kk_ * 16 +       \
                    ((lane >> 3) & 1) * 8);                                         \
      MMA_UNROLL for (int mt_ = 0; mt_ < MT; ++mt_) {                               \
        s[mt_][2 * np_] = mma_16816(a[mt_][kk_], b_.xy, s[mt_][2 * np_]);           \
        s[mt_][2 * np_ + 1] = mma_16816(a[mt_][kk_], b_.zw, s[mt_][2 * np_ + 1]);   \
      }                                                                             \
    }                                                                               \
  }

/* A dK/dV work-group's batch b and kv head hk (BM_KV_HEAD); then, for
 * blocks of bm_ keys, its sequence s, first key j0 (the work-group returns
 * where the sequence ends before it), K's and V's bases, the diagonal, its
 * last key j_last and the queries i_lo .. i_hi that see any of its keys
 * (BM_KV_BLOCK). */
#define BM_KV_HEAD                                                                          \
  const int heads_kv = heads_q / group;                                                     \
  const int b = get_group_id(2) / heads_kv, hk = get_group_id(2) % heads_kv
#define BM_KV_BLOCK(bm_)                                                                       \
  const bm_seq s = bm_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, flags & 4, stat_sb);         \
  const int j0 = get_group_id(0) * bm_; /* first blocks have the most queries */               \
  if (j0 >= s.sk) return;                                                                      \
  const long kb = bm_base(k_off, k_sb, k_ss, k_sh, b, s.k_tok, hk);                            \
  const long vb = bm_base(v_off, v_sb, v_ss, v_sh, b, s.k_tok, hk);                            \
  const int diag = s.sk - s.sq + diag_shift, sk = s.sk, sq = s.sq; /* row i at key i + diag */ \
  const int j_last = min(j0 + bm_, sk) - 1;                                                    \
  const int i_lo = max(0, j0 - diag - wr);                                                     \
  const int i_hi = min(s.sq - 1, j_last - diag + wl)

/* dK/dV's walk over query tiles of bn queries, for a key block that
 * queries i_lo .. i_hi of each head see: per_head tiles from tile it0 for
 * each query head of the group, ntiles in all. A tile is named by (th,
 * tr): query head hk * group + th, first query (it0 + tr) * bn;
 * BM_TILE_NEXT names the one after it (a step's walk without a division). */
#define BM_KV_WALK(bn)                                                                      \
  const int it0 = i_lo / (bn);                                                              \
  const int per_head = i_hi >= it0 * (bn) ? (i_hi - it0 * (bn)) / (bn) + 1 : 0;             \
  const int ntiles = per_head * group
#define BM_TILE_HEAD(th_) (hk * group + (th_))
#define BM_TILE_ROW0(tr_, bn) ((it0 + (tr_)) * (bn))
#define BM_TILE_NEXT(th_, tr_, nh_, nr_)                                                    \
  const int nr_ = (tr_) + 1 == per_head ? 0 : (tr_) + 1;                                    \
  const int nh_ = (th_) + ((tr_) + 1 == per_head)

/* The m16 tile mt of this warp: its first row within the block. */
#define MT_ROW(mt) ((warp * MT + (mt)) * 16)

/* Rows r0, r1 (this lane's of one m16 tile, those below lim) of the C
 * fragments acc[0 .. nt) to dst: columns d < width, in pairs as the
 * forward's output (MMA_STORE_PAIR, attention_common.cl). */
#define BM_STORE_ROWS(dst, base, stride, width, nt, acc, r0, r1, lim)               \
  MMA_UNROLL for (int n_ = 0; n_ < (nt); ++n_) {                                    \
    const int d_ = n_ * 8 + 2 * t4;                                                 \
    if ((r0) < (lim) && d_ < (width)) {                                             \
      const long at_ = (base) + (long)(r0) * (stride) + d_;                         \
      MMA_STORE_PAIR(dst, at_, acc[n_].x, acc[n_].y, d_ + 1 < (width));             \
    }                                                                               \
    if ((r1) < (lim) && d_ < (width)) {                                             \
      const long at_ = (base) + (long)(r1) * (stride) + d_;                         \
      MMA_STORE_PAIR(dst, at_, acc[n_].z, acc[n_].w, d_ + 1 < (width));             \
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
      const uint4 a =
          mma_ldsm_x4(do_s, (MT_ROW(mt) + (lane & 15)) * LDV + kk * 16 + (lane >> 4) * 8);
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
