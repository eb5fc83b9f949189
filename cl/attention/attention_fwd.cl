/* requires: attention/attention_common.cl attention/attention_dropout.cl */
/* FlashAttention-2 forward, portable OpenCL C (prepend dtype.cl and
 * attention_common.cl).
 *
 * A work-group owns BLOCK_M query rows of one (batch, head) and one slice of
 * BLOCK_DV output columns; it walks the visible key tiles of BLOCK_N keys with
 * the online softmax in the log2 domain (log2(e) folded into the scale).
 * Threads form a WG_ROWS x WG_COLS grid: each owns RM rows and, strided by
 * WG_COLS, CN score columns and CV output columns, so S and O live in
 * registers; Q, K, V and P pass through local memory as f32.
 * Head dims above BLOCK_D are contracted in chunks (Q then streams with K);
 * head_dim_v above BLOCK_DV is split across work-groups (grid dim 1).
 */
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef HEAD_DIM_V
#define HEAD_DIM_V 64
#endif
#ifndef BLOCK_M
#define BLOCK_M 64
#endif
#ifndef BLOCK_N
#define BLOCK_N 32
#endif
#ifndef BLOCK_D
#define BLOCK_D HEAD_DIM
#endif
#ifndef BLOCK_DV
#define BLOCK_DV HEAD_DIM_V
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

#define WG_SIZE (WG_ROWS * WG_COLS)
#define RM (BLOCK_M / WG_ROWS)
#define CN (BLOCK_N / WG_COLS)
#define CV (BLOCK_DV / WG_COLS)
#define N_DCHUNK ((HEAD_DIM + BLOCK_D - 1) / BLOCK_D)
#define Q_RESIDENT (N_DCHUNK == 1)
/* +1 padding keeps rows of the tiles in different local-memory banks. */
#define LD_D (BLOCK_D + 1)
#define LD_N (BLOCK_N + 1)
#define LD_V (BLOCK_DV + 1)
#define Q_SIZE (BLOCK_M * LD_D)
#define P_SIZE (BLOCK_M * LD_N)
#define KV_SIZE FCL_MAX(BLOCK_N * LD_D, BLOCK_N * LD_V)

#if BLOCK_M % WG_ROWS || BLOCK_N % WG_COLS || BLOCK_DV % WG_COLS
#error "BLOCK_M, BLOCK_N, BLOCK_DV must be multiples of the thread grid"
#endif

/* Copies rows [row0, row0 + rows) x cols [col0, col0 + cols) of a strided
 * global matrix into a local tile of pitch ld as f32, zero outside
 * (nrow_valid, ncol_valid). Consecutive work-items read consecutive columns. */
inline void load_tile(__local float *dst, int rows, int cols, int ld,
                      const __global fcl_elem *src, long base, long row_stride,
                      int row0, int nrow_valid, int col0, int ncol_valid,
                      int lid) {
  for (int e = lid; e < rows * cols; e += WG_SIZE) {
    const int r = e / cols, c = e - r * cols;
    const int gr = row0 + r, gc = col0 + c;
    float x = 0.0f;
    if (gr < nrow_valid && gc < ncol_valid)
      x = FCL_LOAD(src, base + (long)gr * row_stride + gc);
    dst[r * ld + c] = x;
  }
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void fcl_attention_fwd(
    ATTN_FWD_PARAMS(fcl_elem), /* attention_common.cl */
    int keys_per_split, int nslice, __global float *o_part,
    __global float *lse_part, long nrows)
{
  ATTN_FWD_UNPACK
  __local float q_s[FCL_MAX(Q_SIZE, Q_RESIDENT ? 1 : P_SIZE)];
#if Q_RESIDENT
  __local float p_s[P_SIZE];
#else
  __local float *p_s = q_s; /* Q chunks and P are never live together */
#endif
  __local float kv_s[KV_SIZE];
  __local float red_s[BLOCK_M * WG_COLS];

  const int lid = get_local_id(0);
  const int tx = lid % WG_COLS, ty = lid / WG_COLS;
  const int qblk = get_num_groups(0) - 1 - get_group_id(0); /* long rows first */
  const int slice = get_group_id(1) % nslice;
  const int split = get_group_id(1) / nslice;
  const int b = get_group_id(2) / heads_q, h = get_group_id(2) % heads_q;
  const int hk = h / group;

  const attn_block bi = ATTN_BLOCK_INFO(b, h, hk);
  const int sq = bi.sq, sk = bi.sk, diag = bi.diag;
  const long q_base = bi.q, k_base = bi.k, v_base = bi.v, o_base = bi.o;
  const float slope_l2 = bi.slope_l2;
  const int i0 = qblk * BLOCK_M;
  if (i0 >= sq) return; /* whole work-group: this sequence is shorter */

  const int dv0 = slice * BLOCK_DV;
  const int i_last = min(i0 + BLOCK_M, sq) - 1;

  /* Keys any row of this block can see; blocks outside are never touched. */
  int j_lo = max(0, i0 + diag - window_left);
  int j_hi = min(sk - 1, i_last + diag + window_right);
  if (flags & FCL_ATTN_SPLIT) { /* this work-group's share of the keys */
    j_lo = max(j_lo, split * keys_per_split);
    j_hi = min(j_hi, (split + 1) * keys_per_split - 1);
  }

  float m[RM], l[RM], acc[RM][CV];
  for (int r = 0; r < RM; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    for (int c = 0; c < CV; ++c) acc[r][c] = 0.0f;
  }

#if Q_RESIDENT
  load_tile(q_s, BLOCK_M, BLOCK_D, LD_D, q, q_base, q_ss, i0, sq, 0, HEAD_DIM, lid);
#endif

  for (int j0 = (j_lo / BLOCK_N) * BLOCK_N; j0 <= j_hi; j0 += BLOCK_N) {
    float s[RM][CN];
    for (int r = 0; r < RM; ++r)
      for (int c = 0; c < CN; ++c) s[r][c] = 0.0f;

    for (int dc = 0; dc < N_DCHUNK; ++dc) {
#if !Q_RESIDENT
      load_tile(q_s, BLOCK_M, BLOCK_D, LD_D, q, q_base, q_ss, i0, sq,
                dc * BLOCK_D, HEAD_DIM, lid);
#endif
      load_tile(kv_s, BLOCK_N, BLOCK_D, LD_D, k, k_base, k_ss, j0, sk,
                dc * BLOCK_D, HEAD_DIM, lid);
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int d = 0; d < BLOCK_D; ++d) {
        float a[RM], bk[CN];
        for (int r = 0; r < RM; ++r) a[r] = q_s[(ty * RM + r) * LD_D + d];
        for (int c = 0; c < CN; ++c) bk[c] = kv_s[(tx + c * WG_COLS) * LD_D + d];
        for (int r = 0; r < RM; ++r)
          for (int c = 0; c < CN; ++c) s[r][c] = fma(a[r], bk[c], s[r][c]);
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }

    /* Scores in the log2 domain, masked to -inf where a key is not visible.
     * Tiles wholly inside every row's window skip the per-element test. */
    const bool full = j0 >= i_last + diag - window_left &&
                      j0 + BLOCK_N - 1 <= i0 + diag + window_right &&
                      j0 + BLOCK_N <= sk;
    for (int r = 0; r < RM; ++r) {
      const int i = i0 + ty * RM + r;
      float mx = -INFINITY;
      for (int c = 0; c < CN; ++c) {
        const int j = j0 + tx + c * WG_COLS;
        float t, x = attn_score(s[r][c], i, j, diag, qk_scale, softcap_l2, slope_l2, &t);
        if (!full && !attn_visible(i, j, diag, sk, window_left, window_right))
          x = -INFINITY;
        s[r][c] = x;
        mx = fmax(mx, x);
      }
      red_s[(ty * RM + r) * WG_COLS + tx] = mx;
    }
    load_tile(kv_s, BLOCK_N, BLOCK_DV, LD_V, v, v_base, v_ss, j0, sk, dv0,
              HEAD_DIM_V, lid);
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int r = 0; r < RM; ++r) {
      const int row = ty * RM + r;
      float mx = m[r];
      for (int t = 0; t < WG_COLS; ++t) mx = fmax(mx, red_s[row * WG_COLS + t]);
      /* A row with nothing visible yet keeps m = -inf; use 0 so that
       * exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN. */
      const float m_use = mx == -INFINITY ? 0.0f : mx;
      const float alpha = exp2(m[r] - m_use);
      m[r] = mx;
      l[r] *= alpha;
      for (int c = 0; c < CV; ++c) acc[r][c] *= alpha;
#if FCL_DROPOUT
      const ulong n0 = attn_drop_index(b, h, i0 + row, j0 + tx, heads_q, seqlen_q, seqlen_k);
#endif
      for (int c = 0; c < CN; ++c) {
        float p = exp2(s[r][c] - m_use);
        l[r] += p; /* the denominator before dropout */
#if FCL_DROPOUT /* a dropped key adds nothing; 1/(1-p) is applied at the end */
        if (p != 0.0f && !attn_drop_keep(n0 + c * WG_COLS, ATTN_FWD_DROPOUT)) p = 0.0f;
#endif
        p_s[row * LD_N + tx + c * WG_COLS] = p;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* A masked key has p = 0 but may hold NaN or inf in V (a key outside
     * the window, or a future one): 0 * NaN must not reach the row, so
     * tiles with masked entries skip zero weights; so do dropped keys. */
    for (int j = 0; j < BLOCK_N; ++j) {
      float vv[CV];
      for (int c = 0; c < CV; ++c) vv[c] = kv_s[j * LD_V + tx + c * WG_COLS];
      for (int r = 0; r < RM; ++r) {
        const float p = p_s[(ty * RM + r) * LD_N + j];
        if ((FCL_DROPOUT || !full) && p == 0.0f) continue;
        for (int c = 0; c < CV; ++c) acc[r][c] = fma(p, vv[c], acc[r][c]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  /* Each thread summed only its own columns of P: add the partial sums. */
  for (int r = 0; r < RM; ++r) red_s[(ty * RM + r) * WG_COLS + tx] = l[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int r = 0; r < RM; ++r) {
    const int row = ty * RM + r, i = i0 + row;
    float sum = 0.0f;
    for (int t = 0; t < WG_COLS; ++t) sum += red_s[row * WG_COLS + t];
    if (i >= sq) continue;
    /* sum == 0: the row saw no key -> 0. A NaN sum stays NaN. */
#if FCL_DROPOUT
    const float inv = sum == 0.0f ? 0.0f : drop_scale / sum;
#else
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
#endif
    const long row_id = bi.lse + i;
    for (int c = 0; c < CV; ++c) {
      const int d = dv0 + tx + c * WG_COLS;
      if (d >= HEAD_DIM_V) continue;
      if (flags & FCL_ATTN_SPLIT)
        o_part[((long)split * nrows + row_id) * HEAD_DIM_V + d] = acc[r][c] * inv;
      else
        FCL_STORE(o, o_base + (long)i * o_ss + d, acc[r][c] * inv);
    }
    if (slice != 0 || tx != 0) continue;
    if (flags & FCL_ATTN_SPLIT) /* log2 domain */
      lse_part[(long)split * nrows + row_id] = sum == 0.0f ? -INFINITY : m[r] + log2(sum);
    else if (flags & FCL_ATTN_LSE)
      lse[row_id] = sum == 0.0f ? -INFINITY : m[r] * FCL_LN2 + log(sum);
  }
}

/* Merges the per-split results of a split-key launch (flags & 8): each split
 * s holds o_s normalised by its own denominator and lse_s (log2 domain), so
 * o = sum_s 2^(lse_s - m) o_s / sum_s 2^(lse_s - m) with m = max_s lse_s.
 * One work-item per (output column, row); rows are numbered like lse. */
__kernel void fcl_attention_fwd_combine(
    const __global float *o_part, const __global float *lse_part,
    __global fcl_elem *o, __global float *lse, long o_off, long o_sb, long o_ss,
    long o_sh, long lse_sh, int heads_q, long nrows, int nsplit,
    int flags) {
  const int d = get_global_id(0);
  const long row = get_global_id(1);
  if (d >= HEAD_DIM_V || row >= nrows) return;
  float mx = -INFINITY;
  for (int s = 0; s < nsplit; ++s) mx = fmax(mx, lse_part[(long)s * nrows + row]);
  const float m_use = mx == -INFINITY ? 0.0f : mx;
  float sum = 0.0f, acc = 0.0f;
  for (int s = 0; s < nsplit; ++s) {
    const float wgt = exp2(lse_part[(long)s * nrows + row] - m_use);
    sum += wgt;
    acc = fma(wgt, o_part[((long)s * nrows + row) * HEAD_DIM_V + d], acc);
  }
  long at;
  if (flags & FCL_ATTN_VARLEN) { /* varlen: row = h * total_q + token */
    at = o_off + (row % lse_sh) * o_ss + (row / lse_sh) * o_sh;
  } else {          /* row = (b * heads_q + h) * seqlen_q + i */
    const long bh = row / lse_sh, i = row % lse_sh;
    at = o_off + (bh / heads_q) * o_sb + i * o_ss + (bh % heads_q) * o_sh;
  }
  FCL_STORE(o, at + d, sum == 0.0f ? 0.0f : acc / sum);
  if ((flags & FCL_ATTN_LSE) && d == 0)
    lse[row] = sum == 0.0f ? -INFINITY : (m_use + log2(sum)) * FCL_LN2;
}
