/* requires: attention/attention_common.cl attention/attention_dropout.cl */
/* FlashAttention-2 backward without float atomics (prepend dtype.cl and
 * attention_common.cl).
 *
 * Three kernels, as in the Metal port's split: fcl_attention_bwd_delta
 * (delta_i = rowsum(dO_i * O_i)), fcl_attention_bwd_dq (a work-group owns
 * BLOCK_R query rows and walks key tiles) and fcl_attention_bwd_dkdv (a
 * work-group owns BLOCK_R keys of one kv head and walks the query tiles of
 * every query head of its group). Each gradient element is written by one
 * work-item after a fixed-order loop, so runs are bit-identical.
 *
 * Both main kernels see the problem as rows x cols: dq has rows = queries,
 * cols = keys; dkdv has rows = keys, cols = queries. Per tile pair they
 * recompute S = A1 B1^T (over HEAD_DIM) and dP = A2 B2^T (over HEAD_DIM_V)
 * in registers, with operands streamed through local memory in chunks of
 * BLOCK_K, then P = exp2(S - lse) and dS = P (dP - delta). Gradients are
 * accumulated for one slice of BLOCK_K output columns per work-group (grid
 * dim 1), so head dims up to 512 need no more registers than 64.
 *
 * With FCL_DROPOUT the forward's mask Z is regenerated (attention_dropout.cl)
 * and, with s = 1/(1-p): dV sums Z P s dO, and dP becomes Z s dP, which
 * dS = P (dP - delta) then takes (delta = rowsum(dO O) of the dropped O).
 */
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef HEAD_DIM_V
#define HEAD_DIM_V 64
#endif
#ifndef BLOCK_R
#define BLOCK_R 64
#endif
#ifndef BLOCK_C
#define BLOCK_C 32
#endif
#ifndef BLOCK_K
#define BLOCK_K 64
#endif
#ifndef WG_ROWS
#define WG_ROWS 16
#endif
#ifndef WG_COLS
#define WG_COLS 8
#endif
#ifndef FCL_DROPOUT
#define FCL_DROPOUT 0 /* 1: dropout (attention_dropout.cl) */
#endif

/* dP of a kept (b, h, i, j) scaled by 1/(1-p), of a dropped one 0; p of a
 * kept one scaled, of a dropped one 0 (selected, not multiplied: a NaN of
 * a dropped pair stays out). */
#if FCL_DROPOUT
#define BWD_KEPT(b, h, i, j)                                                     \
  attn_drop_keep(attn_drop_index(b, h, i, j, heads_q, seqlen_q, seqlen_k), drop_args_)
#define BWD_DROP(x, kept) ((kept) ? (x) * drop_args_.drop_scale : 0.0f)
#endif

#define WG_SIZE (WG_ROWS * WG_COLS)
#define RR (BLOCK_R / WG_ROWS)
#define CC (BLOCK_C / WG_COLS)
#define CK (BLOCK_K / WG_COLS)
#define LDK (BLOCK_K + 1)
#define LDC (BLOCK_C + 1)

#if BLOCK_R % WG_ROWS || BLOCK_C % WG_COLS || BLOCK_K % WG_COLS
#error "BLOCK_R, BLOCK_C, BLOCK_K must be multiples of the thread grid"
#endif

/* Strided matrix tile -> local f32 tile (zero outside the valid region). */
inline void bwd_load(__local float *dst, int rows, int ld,
                     const __global fcl_elem *src, long base, long row_stride,
                     int row0, int nrow_valid, int col0, int ncol_valid, int lid) {
  for (int e = lid; e < rows * BLOCK_K; e += WG_SIZE) {
    const int r = e / BLOCK_K, c = e - r * BLOCK_K;
    const int gr = row0 + r, gc = col0 + c;
    float x = 0.0f;
    if (gr < nrow_valid && gc < ncol_valid)
      x = FCL_LOAD(src, base + (long)gr * row_stride + gc);
    dst[r * ld + c] = x;
  }
}

/* acc[r][c] += sum over dim of A[row r] . B[col c], in chunks of BLOCK_K. */
inline void bwd_contract(float acc[RR][CC], __local float *a_s,
                         __local float *b_s, int dim,
                         const __global fcl_elem *A, long a_base, long a_stride,
                         int r0, int nr,
                         const __global fcl_elem *B, long b_base, long b_stride,
                         int c0, int nc, int lid, int tx, int ty) {
  for (int k0 = 0; k0 < dim; k0 += BLOCK_K) {
    bwd_load(a_s, BLOCK_R, LDK, A, a_base, a_stride, r0, nr, k0, dim, lid);
    bwd_load(b_s, BLOCK_C, LDK, B, b_base, b_stride, c0, nc, k0, dim, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int kmax = min(BLOCK_K, dim - k0);
    for (int kk = 0; kk < kmax; ++kk) {
      float a[RR], b[CC];
      for (int r = 0; r < RR; ++r) a[r] = a_s[(ty * RR + r) * LDK + kk];
      for (int c = 0; c < CC; ++c) b[c] = b_s[(tx + c * WG_COLS) * LDK + kk];
      for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c) acc[r][c] = fma(a[r], b[c], acc[r][c]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* out[r][c] += sum over the tile's cols of t_s[row r][col] * B[col][slice c]:
 * B rows c0.., columns col0.. of a dim-wide operand. With masked, the tile
 * has masked entries (weight 0) whose B rows may hold NaN or inf, which
 * must not reach the sums: zero weights are skipped. */
inline void bwd_accumulate(float out[RR][CK], __local const float *t_s,
                           __local float *b_s, int dim,
                           const __global fcl_elem *B, long b_base,
                           long b_stride, int c0, int nc, int col0, int lid,
                           int tx, int ty, bool masked) {
  bwd_load(b_s, BLOCK_C, LDK, B, b_base, b_stride, c0, nc, col0, dim, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int j = 0; j < BLOCK_C; ++j) {
    float b[CK];
    for (int c = 0; c < CK; ++c) b[c] = b_s[j * LDK + tx + c * WG_COLS];
    for (int r = 0; r < RR; ++r) {
      const float t = t_s[(ty * RR + r) * LDC + j];
      if (masked && t == 0.0f) continue;
      for (int c = 0; c < CK; ++c) out[r][c] = fma(t, b[c], out[r][c]);
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* The score pipeline of the forward pass for one element, returning P and
 * overwriting *ds with dS w.r.t. the raw q.k product (scale included). */
inline float bwd_element(float s_raw, float dp, int i, int j, int diag,
                         int wl, int wr, int sk, float qk_scale,
                         float softcap_l2, float slope_l2, float lse2,
                         float delta, float scale, float *ds) {
  float t;
  const float x = attn_score(s_raw, i, j, diag, qk_scale, softcap_l2, slope_l2, &t);
  /* lse2 = +inf marks a row that saw no key: its P is 0. A masked element
   * is exactly 0 even where its score or dP is NaN (NaN in q, k, v or dO
   * of a pair that is not visible must not propagate). */
  const bool vis = attn_visible(i, j, diag, sk, wl, wr);
  const float p = vis ? exp2(x - lse2) : 0.0f;
  float g = p * (dp - delta);
  if (softcap_l2 > 0.0f) g *= 1.0f - t * t;
  *ds = vis ? g * scale : 0.0f;
  return p;
}

/* Per-sequence geometry shared by the kernels. */
typedef struct {
  int  sq, sk;
  long q_row0, k_row0, stat_row0; /* token offsets (varlen) or batch offsets */
} bwd_seq;

inline bwd_seq bwd_sequence(int b, int seqlen_q, int seqlen_k,
                            const __global int *cu_q, const __global int *cu_k,
                            int varlen, long stat_sb) {
  bwd_seq s;
  s.sq = seqlen_q;
  s.sk = seqlen_k;
  s.q_row0 = -1; /* batch-indexed */
  s.k_row0 = -1;
  s.stat_row0 = (long)b * stat_sb;
  if (varlen) {
    s.q_row0 = cu_q[b];
    s.k_row0 = cu_k[b];
    s.sq = cu_q[b + 1] - cu_q[b];
    s.sk = cu_k[b + 1] - cu_k[b];
    s.stat_row0 = s.q_row0;
  }
  return s;
}

/* Element offset of (sequence start, head) in a strided tensor. */
inline long bwd_base(long off, long sb, long ss, long sh, int b, long row0, int h) {
  return off + (row0 < 0 ? (long)b * sb : row0 * ss) + (long)h * sh;
}

/* delta_i = sum_d dO[i][d] * O[i][d], stored like lse. One work-item a row. */
__kernel void fcl_attention_bwd_delta(
    const __global fcl_elem *o, const __global fcl_elem *dout,
    __global float *delta, const __global int *cu_q, const __global int *cu_k,
    long o_off, long o_sb, long o_ss, long o_sh,
    long do_off, long do_sb, long do_ss, long do_sh, long stat_sb,
    long stat_sh, int seqlen_q, int seqlen_k, int heads_q, int varlen) {
  const int i = get_global_id(0);
  const int b = get_global_id(1) / heads_q, h = get_global_id(1) % heads_q;
  const bwd_seq s = bwd_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, varlen, stat_sb);
  if (i >= s.sq) return;
  const long ob = bwd_base(o_off, o_sb, o_ss, o_sh, b, s.q_row0, h) + (long)i * o_ss;
  const long db = bwd_base(do_off, do_sb, do_ss, do_sh, b, s.q_row0, h) + (long)i * do_ss;
  float acc = 0.0f;
  for (int d = 0; d < HEAD_DIM_V; ++d)
    acc = fma(FCL_LOAD(o, ob + d), FCL_LOAD(dout, db + d), acc);
  delta[s.stat_row0 + (long)h * stat_sh + i] = acc;
}

#define BWD_TENSOR_ARGS(n) long n##_off, long n##_sb, long n##_ss, long n##_sh
#define BWD_COMMON_ARGS                                                       \
  const __global fcl_elem *q, const __global fcl_elem *k,                     \
      const __global fcl_elem *v, const __global fcl_elem *dout,              \
      const __global float *lse, const __global float *delta,                 \
      const __global float *alibi, const __global int *cu_q,                  \
      const __global int *cu_k, BWD_TENSOR_ARGS(q), BWD_TENSOR_ARGS(k),       \
      BWD_TENSOR_ARGS(v), BWD_TENSOR_ARGS(do), long stat_sb, long stat_sh,    \
      int seqlen_q, int seqlen_k, int heads_q, int group, int wl, int wr,     \
      int diag_shift, float qk_scale, float softcap_l2, float scale,          \
      int flags, const fcl_attn_dropout_scalars drop_args_,                   \
      int per_split, int nslice, __global float *part, __global float *part2, \
      long nrows

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void fcl_attention_bwd_dq(BWD_COMMON_ARGS, __global fcl_elem *dq,
                          BWD_TENSOR_ARGS(dq)) {
  __local float a_s[BLOCK_R * LDK];
  __local float b_s[BLOCK_C * LDK];
  __local float t_s[BLOCK_R * LDC];
  const int lid = get_local_id(0), tx = lid % WG_COLS, ty = lid / WG_COLS;
  const int rblk = get_num_groups(0) - 1 - get_group_id(0);
  const int col0 = (get_group_id(1) % nslice) * BLOCK_K; /* dQ columns */
  const int split = get_group_id(1) / nslice;
  const int b = get_group_id(2) / heads_q, h = get_group_id(2) % heads_q;
  const int hk = h / group;
  const bwd_seq s = bwd_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, flags & 4, stat_sb);
  const int i0 = rblk * BLOCK_R;
  if (i0 >= s.sq) return;
  const long qb = bwd_base(q_off, q_sb, q_ss, q_sh, b, s.q_row0, h);
  const long dob = bwd_base(do_off, do_sb, do_ss, do_sh, b, s.q_row0, h);
  const long kb = bwd_base(k_off, k_sb, k_ss, k_sh, b, s.k_row0, hk);
  const long vb = bwd_base(v_off, v_sb, v_ss, v_sh, b, s.k_row0, hk);
  const long dqb = bwd_base(dq_off, dq_sb, dq_ss, dq_sh, b, s.q_row0, h);
  const int diag = s.sk - s.sq + diag_shift; /* query i at key position i + diag */
  const float slope_l2 = (flags & 2) ? alibi[h] * FCL_LOG2E : 0.0f;

  float lse2[RR], dlt[RR], acc[RR][CK];
  for (int r = 0; r < RR; ++r) {
    const int i = min(i0 + ty * RR + r, s.sq - 1);
    const long si = s.stat_row0 + (long)h * stat_sh + i;
    const float l = lse[si];
    lse2[r] = l == -INFINITY ? INFINITY : l * FCL_LOG2E;
    dlt[r] = delta[si];
    for (int c = 0; c < CK; ++c) acc[r][c] = 0.0f;
  }
  const int i_last = min(i0 + BLOCK_R, s.sq) - 1;
  int j_lo = max(0, i0 + diag - wl);
  int j_hi = min(s.sk - 1, i_last + diag + wr);
  if (flags & 8) { /* this work-group's share of the keys */
    j_lo = max(j_lo, split * per_split);
    j_hi = min(j_hi, (split + 1) * per_split - 1);
  }
  for (int j0 = (j_lo / BLOCK_C) * BLOCK_C; j0 <= j_hi; j0 += BLOCK_C) {
    float sc[RR][CC], dp[RR][CC];
    for (int r = 0; r < RR; ++r)
      for (int c = 0; c < CC; ++c) sc[r][c] = dp[r][c] = 0.0f;
    bwd_contract(sc, a_s, b_s, HEAD_DIM, q, qb, q_ss, i0, s.sq, k, kb, k_ss, j0,
                 s.sk, lid, tx, ty);
    bwd_contract(dp, a_s, b_s, HEAD_DIM_V, dout, dob, do_ss, i0, s.sq, v, vb,
                 v_ss, j0, s.sk, lid, tx, ty);
    for (int r = 0; r < RR; ++r)
      for (int c = 0; c < CC; ++c) {
        const int i = i0 + ty * RR + r, j = j0 + tx + c * WG_COLS;
        float ds, dpv = dp[r][c];
#if FCL_DROPOUT
        dpv = BWD_DROP(dpv, BWD_KEPT(b, h, i, j));
#endif
        bwd_element(sc[r][c], dpv, i, j, diag, wl, wr, s.sk, qk_scale, softcap_l2,
                    slope_l2, lse2[r], dlt[r], scale, &ds);
        t_s[(ty * RR + r) * LDC + tx + c * WG_COLS] = ds;
      }
    /* Every (row, key) pair of the tile visible: no masked entries. */
    const bool full = j0 >= i_last + diag - wl && j0 + BLOCK_C - 1 <= i0 + diag + wr;
    bwd_accumulate(acc, t_s, b_s, HEAD_DIM, k, kb, k_ss, j0, s.sk, col0, lid, tx, ty,
                   !full);
  }
  for (int r = 0; r < RR; ++r) {
    const int i = i0 + ty * RR + r;
    if (i >= s.sq) continue;
    const long row_id = s.stat_row0 + (long)h * stat_sh + i;
    for (int c = 0; c < CK; ++c) {
      const int d = col0 + tx + c * WG_COLS;
      if (d >= HEAD_DIM) continue;
      if (flags & 8) part[((long)split * nrows + row_id) * HEAD_DIM + d] = acc[r][c];
      else FCL_STORE(dq, dqb + (long)i * dq_ss + d, acc[r][c]);
    }
  }
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void fcl_attention_bwd_dkdv(BWD_COMMON_ARGS, __global fcl_elem *dk,
                            BWD_TENSOR_ARGS(dk), __global fcl_elem *dv,
                            BWD_TENSOR_ARGS(dv), long kstat_sb, long kstat_sh) {
  __local float a_s[BLOCK_R * LDK];
  __local float b_s[BLOCK_C * LDK];
  __local float t_s[BLOCK_R * LDC];
  const int lid = get_local_id(0), tx = lid % WG_COLS, ty = lid / WG_COLS;
  const int rblk = get_group_id(0);
  const int col0 = (get_group_id(1) % nslice) * BLOCK_K; /* dK/dV columns */
  const int split = get_group_id(1) / nslice;
  const int heads_kv = heads_q / group;
  const int b = get_group_id(2) / heads_kv, hk = get_group_id(2) % heads_kv;
  const bwd_seq s = bwd_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, flags & 4, stat_sb);
  const int j0 = rblk * BLOCK_R;
  if (j0 >= s.sk) return;
  const long kb = bwd_base(k_off, k_sb, k_ss, k_sh, b, s.k_row0, hk);
  const long vb = bwd_base(v_off, v_sb, v_ss, v_sh, b, s.k_row0, hk);
  const int diag = s.sk - s.sq + diag_shift; /* query i at key position i + diag */
  const int j_last = min(j0 + BLOCK_R, s.sk) - 1;
  /* Queries that see any key of this block. */
  int i_lo = max(0, j0 - diag - wr);
  int i_hi = min(s.sq - 1, j_last - diag + wl);
  if (flags & 8) { /* this work-group's share of the queries */
    i_lo = max(i_lo, split * per_split);
    i_hi = min(i_hi, (split + 1) * per_split - 1);
  }

  float gk[RR][CK], gv[RR][CK];
  for (int r = 0; r < RR; ++r)
    for (int c = 0; c < CK; ++c) gk[r][c] = gv[r][c] = 0.0f;

  for (int h = hk * group; h < (hk + 1) * group; ++h) {
    const long qb = bwd_base(q_off, q_sb, q_ss, q_sh, b, s.q_row0, h);
    const long dob = bwd_base(do_off, do_sb, do_ss, do_sh, b, s.q_row0, h);
    const float slope_l2 = (flags & 2) ? alibi[h] * FCL_LOG2E : 0.0f;
    for (int i0 = (i_lo / BLOCK_C) * BLOCK_C; i0 <= i_hi; i0 += BLOCK_C) {
      float sc[RR][CC], dp[RR][CC], lse2[CC], dlt[CC];
      for (int c = 0; c < CC; ++c) {
        const int i = min(i0 + tx + c * WG_COLS, s.sq - 1);
        const long si = s.stat_row0 + (long)h * stat_sh + i;
        const float l = lse[si];
        lse2[c] = l == -INFINITY ? INFINITY : l * FCL_LOG2E;
        dlt[c] = delta[si];
      }
      for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c) sc[r][c] = dp[r][c] = 0.0f;
      bwd_contract(sc, a_s, b_s, HEAD_DIM, k, kb, k_ss, j0, s.sk, q, qb, q_ss, i0,
                   s.sq, lid, tx, ty);
      bwd_contract(dp, a_s, b_s, HEAD_DIM_V, v, vb, v_ss, j0, s.sk, dout, dob,
                   do_ss, i0, s.sq, lid, tx, ty);
      float ds[RR][CC];
      for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c) {
          const int i = i0 + tx + c * WG_COLS, j = j0 + ty * RR + r;
          float dpv = dp[r][c];
#if FCL_DROPOUT
          const bool kept = BWD_KEPT(b, h, i, j);
          dpv = BWD_DROP(dpv, kept);
#endif
          /* Columns past the sequence's queries contribute nothing. */
          float p = bwd_element(sc[r][c], dpv, i, j, diag, wl, wr, s.sk, qk_scale,
                                softcap_l2, slope_l2, lse2[c], dlt[c], scale, &ds[r][c]);
#if FCL_DROPOUT
          p = BWD_DROP(p, kept); /* dV takes the dropped, rescaled P */
#endif
          if (i >= s.sq) p = ds[r][c] = 0.0f;
          t_s[(ty * RR + r) * LDC + tx + c * WG_COLS] = p;
        }
      /* Every (key, query) pair of the tile visible: no masked entries. */
      const bool full = j0 >= i0 + BLOCK_C - 1 + diag - wl && j_last <= i0 + diag + wr;
      if (col0 < HEAD_DIM_V) /* dropped pairs weigh 0 in dV: skipped as masked */
        bwd_accumulate(gv, t_s, b_s, HEAD_DIM_V, dout, dob, do_ss, i0, s.sq, col0,
                       lid, tx, ty, FCL_DROPOUT || !full);
      for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c)
          t_s[(ty * RR + r) * LDC + tx + c * WG_COLS] = ds[r][c];
      if (col0 < HEAD_DIM)
        bwd_accumulate(gk, t_s, b_s, HEAD_DIM, q, qb, q_ss, i0, s.sq, col0, lid,
                       tx, ty, !full);
    }
  }
  const long dkb = bwd_base(dk_off, dk_sb, dk_ss, dk_sh, b, s.k_row0, hk);
  const long dvb = bwd_base(dv_off, dv_sb, dv_ss, dv_sh, b, s.k_row0, hk);
  /* Key rows are numbered like lse rows, over kv heads and keys. */
  const long krow0 = (flags & 4) ? (long)hk * kstat_sh + s.k_row0
                                 : (long)b * kstat_sb + (long)hk * kstat_sh;
  for (int r = 0; r < RR; ++r) {
    const int j = j0 + ty * RR + r;
    if (j >= s.sk) continue;
    for (int c = 0; c < CK; ++c) {
      const int d = col0 + tx + c * WG_COLS;
      if (flags & 8) {
        if (d < HEAD_DIM) part[((long)split * nrows + krow0 + j) * HEAD_DIM + d] = gk[r][c];
        if (d < HEAD_DIM_V)
          part2[((long)split * nrows + krow0 + j) * HEAD_DIM_V + d] = gv[r][c];
        continue;
      }
      if (d < HEAD_DIM) FCL_STORE(dk, dkb + (long)j * dk_ss + d, gk[r][c]);
      if (d < HEAD_DIM_V) FCL_STORE(dv, dvb + (long)j * dv_ss + d, gv[r][c]);
    }
  }
}

/* Sums the per-split partial gradients of a split launch (flags & 8) in a
 * fixed order: part is [nsplit][nrows][dim], rows numbered like lse rows
 * (row_sh rows a head: seqlen, or total tokens with varlen). */
__kernel void fcl_attention_bwd_sum(const __global float *part,
                                    __global fcl_elem *out, long off, long sb,
                                    long ss, long sh, long row_sh,
                                    int heads, long nrows, int dim, int nsplit,
                                    int flags) {
  const int d = get_global_id(0);
  const long row = get_global_id(1);
  if (d >= dim || row >= nrows) return;
  float acc = 0.0f;
  for (int s = 0; s < nsplit; ++s) acc += part[((long)s * nrows + row) * dim + d];
  long at;
  if (flags & 4) {
    at = off + (row % row_sh) * ss + (row / row_sh) * sh;
  } else {
    const long bh = row / row_sh, i = row % row_sh;
    at = off + (bh / heads) * sb + i * ss + (bh % heads) * sh;
  }
  FCL_STORE(out, at + d, acc);
}
