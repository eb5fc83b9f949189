/* FlashAttention-2 forward for CPUs (PoCL), prepend dtype.cl and
 * attention_common.cl.
 *
 * No local memory and no barriers: under PoCL a barrier splits the kernel
 * into regions whose live values go through per-work-item context arrays,
 * and the implicit work-item loop is vectorised only for simple code.
 * Instead each work-item owns ROWS query rows of one (batch, head) and
 * holds them in the lanes of explicit vectors (floatROWS): Q transposed
 * (qt[d] = column d of the rows, prescaled) and the output accumulator
 * ot[c] = column c, in private memory. Keys go by in blocks of BLOCK_N:
 *   s[j] = sum_d qt[d] * k[j][d]         k broadcast, BLOCK_N accumulators
 *   online softmax per lane (one rescale per block, all in vectors)
 *   ot[c] = ot[c] * alpha + sum_j p[j] * v[j][c]
 * K and V are read straight from global memory (each element once per
 * work-item and block, as a broadcast), so the work is register-blocked
 * like a GEMM micro-kernel: one vector load per BLOCK_N FMAs.
 * head_dim_v above BLOCK_DV is split across work-items (grid dim 1), each
 * recomputing the scores. Work-items are independent: any work-group size.
 */
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef HEAD_DIM_V
#define HEAD_DIM_V 64
#endif
#ifndef ROWS
#define ROWS 16
#endif
#ifndef BLOCK_N
#define BLOCK_N 8
#endif
#ifndef BLOCK_DV
#define BLOCK_DV HEAD_DIM_V
#endif
#ifndef WG_SIZE
#define WG_SIZE 1
#endif

#define CPU_CAT_(a, b) a##b
#define CPU_CAT(a, b) CPU_CAT_(a, b)
typedef CPU_CAT(float, ROWS) rvec;
typedef CPU_CAT(int, ROWS) ivec;
#define VLOAD(i, p) CPU_CAT(vload, ROWS)((i), (p))
#define VSTORE(x, i, p) CPU_CAT(vstore, ROWS)((x), (i), (p))
#define CONVERT_F(x) CPU_CAT(convert_float, ROWS)(x)

#if ROWS == 4
#define LANE_IDS ((ivec)(0, 1, 2, 3))
#elif ROWS == 8
#define LANE_IDS ((ivec)(0, 1, 2, 3, 4, 5, 6, 7))
#elif ROWS == 16
#define LANE_IDS ((ivec)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#else
#error "ROWS must be 4, 8 or 16"
#endif

/* K and V elements as f32: read in place (f32), or from a block staged in
 * private memory by vector conversions (f16, bf16), since one scalar
 * conversion per broadcast would cost as much as the FMAs it feeds. */
#ifndef STAGE
#define STAGE (FCL_DTYPE != 0)
#endif
#if !STAGE
#define KEY(jj, d) FCL_LOAD(k, kr[jj] + (d))
#define VAL(jj, c) FCL_LOAD(v, vr[jj] + (c))
#else
#define KEY(jj, d) kbuf[(jj) * HEAD_DIM + (d)]
#define VAL(jj, c) vbuf[(jj) * BLOCK_DV + (c)]
#if FCL_DTYPE == 0
#define LOAD8(p) vload8(0, (p))
#elif FCL_DTYPE == 1
#define LOAD8(p) vload_half8(0, (p))
#else
#define LOAD8(p) as_float8(convert_uint8(vload8(0, (p))) << 16)
#endif
inline void stage_row(__private float *dst, const __global fcl_elem *src, long at, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) vstore8(LOAD8(src + at + i), 0, dst + i);
  for (; i < n; ++i) dst[i] = FCL_LOAD(src, at + i);
}
#endif

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void fcl_attention_fwd_cpu(
    const __global fcl_elem *q, const __global fcl_elem *k,
    const __global fcl_elem *v, __global fcl_elem *o, __global float *lse,
    const __global float *alibi, const __global int *cu_q,
    const __global int *cu_k,
    long q_off, long q_sb, long q_ss, long q_sh,
    long k_off, long k_sb, long k_ss, long k_sh,
    long v_off, long v_sb, long v_ss, long v_sh,
    long o_off, long o_sb, long o_ss, long o_sh,
    long lse_sb, long lse_sh,
    int seqlen_q, int seqlen_k, int heads_q, int group,
    int window_left, int window_right, /* >= 0, causal folded in */
    float qk_scale,    /* scale*log2(e), or scale/softcap with softcap */
    float softcap_l2,  /* softcap*log2(e); 0 = no softcap */
    int flags,         /* 1: lse, 2: alibi, 4: varlen */
    int nblocks)       /* query blocks of ROWS rows per (batch, head) */
{
  const int gid = get_global_id(0);
  if (gid >= nblocks) return;
  const int qblk = nblocks - 1 - gid; /* long causal rows first */
  const int slice = get_global_id(1);
  const int b = get_global_id(2) / heads_q, h = get_global_id(2) % heads_q;
  const int hk = h / group;

  int sq = seqlen_q, sk = seqlen_k;
  long q_row0 = (long)b * q_sb, k_row0 = (long)b * k_sb;
  long v_row0 = (long)b * v_sb, o_row0 = (long)b * o_sb;
  long lse_row0 = (long)b * lse_sb;
  if (flags & 4) {
    const int tq = cu_q[b], tk = cu_k[b];
    sq = cu_q[b + 1] - tq;
    sk = cu_k[b + 1] - tk;
    q_row0 = (long)tq * q_ss; o_row0 = (long)tq * o_ss;
    k_row0 = (long)tk * k_ss; v_row0 = (long)tk * v_ss;
    lse_row0 = tq;
  }
  const int i0 = qblk * ROWS;
  if (i0 >= sq) return; /* this sequence is shorter */
  const int nrow = min(ROWS, sq - i0);
  const int i_last = i0 + nrow - 1;

  const long q_base = q_off + q_row0 + (long)h * q_sh;
  const long k_base = k_off + k_row0 + (long)hk * k_sh;
  const long v_base = v_off + v_row0 + (long)hk * v_sh;
  const long o_base = o_off + o_row0 + (long)h * o_sh;
  const int dv0 = slice * BLOCK_DV;
  const int ndv = min(BLOCK_DV, HEAD_DIM_V - dv0);
  const int diag = sk - sq; /* bottom-right alignment */
  const float slope_l2 = (flags & 2) ? alibi[h] * FCL_LOG2E : 0.0f;
  const ivec rows_i = (ivec)(i0) + LANE_IDS;

  /* Q transposed into lanes, the scale folded in; rows past the end are 0. */
  rvec qt[HEAD_DIM], ot[BLOCK_DV]; /* whole vectors: aligned loads, stores */
  __private float *qt_f = (__private float *)qt;
  for (int r = 0; r < ROWS; ++r) {
    const long at = q_base + (long)(i0 + r) * q_ss;
    for (int d = 0; d < HEAD_DIM; ++d)
      qt_f[d * ROWS + r] = r < nrow ? FCL_LOAD(q, at + d) * qk_scale : 0.0f;
  }
  for (int c = 0; c < BLOCK_DV; ++c) ot[c] = (rvec)(0.0f);

  rvec m = (rvec)(-INFINITY), l = (rvec)(0.0f);
#if STAGE
  float kbuf[BLOCK_N * HEAD_DIM], vbuf[BLOCK_N * BLOCK_DV];
#endif
  const int j_lo = max(0, i0 + diag - window_left);
  const int j_hi = min(sk - 1, i_last + diag + window_right);

  for (int j0 = j_lo; j0 <= j_hi; j0 += BLOCK_N) {
    /* Rows of this block's keys; past j_hi the last key again (masked). */
    long kr[BLOCK_N], vr[BLOCK_N];
#pragma unroll
    for (int jj = 0; jj < BLOCK_N; ++jj) {
      const int j = min(j0 + jj, j_hi);
      kr[jj] = k_base + (long)j * k_ss;
      vr[jj] = v_base + (long)j * v_ss + dv0;
    }
#if STAGE
    for (int jj = 0; jj < BLOCK_N; ++jj) {
      stage_row(kbuf + jj * HEAD_DIM, k, kr[jj], HEAD_DIM);
      stage_row(vbuf + jj * BLOCK_DV, v, vr[jj], ndv);
    }
#endif
    rvec s[BLOCK_N];
#pragma unroll
    for (int jj = 0; jj < BLOCK_N; ++jj) s[jj] = (rvec)(0.0f);
    for (int d = 0; d < HEAD_DIM; ++d) {
      const rvec qd = qt[d];
#pragma unroll
      for (int jj = 0; jj < BLOCK_N; ++jj)
        s[jj] = fma(qd, (rvec)(KEY(jj, d)), s[jj]);
    }

    /* Every row sees every key of the block: no per-element mask. */
    const bool full = j0 >= i_last + diag - window_left &&
                      j0 + BLOCK_N - 1 <= i0 + diag + window_right &&
                      j0 + BLOCK_N - 1 <= j_hi;
    rvec mx = m;
#pragma unroll
    for (int jj = 0; jj < BLOCK_N; ++jj) {
      rvec x = s[jj];
      if (softcap_l2 > 0.0f) x = softcap_l2 * tanh(x);
      if (flags & 2)
        x -= slope_l2 * CONVERT_F(abs(rows_i + diag - (j0 + jj)));
      if (!full) {
        const int j = j0 + jj;
        const ivec vis = (rows_i + diag - window_left <= j) &
                         (rows_i + diag + window_right >= j);
        x = j <= j_hi ? select((rvec)(-INFINITY), x, vis) : (rvec)(-INFINITY);
      }
      s[jj] = x;
      mx = fmax(mx, x);
    }
    /* A row with nothing visible yet keeps m = -inf; use 0 so that
     * exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN. */
    const rvec m_use = select(mx, (rvec)(0.0f), mx == (rvec)(-INFINITY));
    const rvec alpha = exp2(m - m_use);
    m = mx;
    l *= alpha;
#pragma unroll
    for (int jj = 0; jj < BLOCK_N; ++jj) {
      s[jj] = exp2(s[jj] - m_use);
      l += s[jj];
    }

    if (full) {
      /* Two partial sums halve the chain of dependent FMAs. */
      for (int c = 0; c < ndv; ++c) {
        rvec acc0 = ot[c] * alpha, acc1 = (rvec)(0.0f);
#pragma unroll
        for (int jj = 0; jj + 1 < BLOCK_N; jj += 2) {
          acc0 = fma(s[jj], (rvec)(VAL(jj, c)), acc0);
          acc1 = fma(s[jj + 1], (rvec)(VAL(jj + 1, c)), acc1);
        }
        if (BLOCK_N % 2)
          acc0 = fma(s[BLOCK_N - 1], (rvec)(VAL(BLOCK_N - 1, c)), acc0);
        ot[c] = acc0 + acc1;
      }
    } else {
      /* A masked key has p = 0 but may hold NaN or inf in V (outside the
       * window, a future key): 0 * NaN must not reach the row. */
      for (int c = 0; c < ndv; ++c) {
        rvec acc = ot[c] * alpha;
#pragma unroll
        for (int jj = 0; jj < BLOCK_N; ++jj) {
          const rvec t = s[jj] * (rvec)(VAL(jj, c));
          acc += select(t, (rvec)(0.0f), s[jj] == (rvec)(0.0f));
        }
        ot[c] = acc;
      }
    }
  }

  /* l == 0: the row saw no key -> 0. A NaN sum stays NaN. */
  float inv[ROWS], lsev[ROWS];
  VSTORE(select(1.0f / l, (rvec)(0.0f), l == (rvec)(0.0f)), 0, inv);
  VSTORE(select(m * FCL_LN2 + log(l), (rvec)(-INFINITY), l == (rvec)(0.0f)), 0, lsev);
  const __private float *ot_f = (const __private float *)ot;
  for (int r = 0; r < nrow; ++r) {
    const long at = o_base + (long)(i0 + r) * o_ss + dv0;
    for (int c = 0; c < ndv; ++c) FCL_STORE(o, at + c, ot_f[c * ROWS + r] * inv[r]);
    if (slice == 0 && (flags & 1)) lse[lse_row0 + (long)h * lse_sh + i0 + r] = lsev[r];
  }
}
