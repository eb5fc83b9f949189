/* requires: attention/attention_common.cl attention/attention_dropout.cl */
/* FlashAttention-2 forward for CPUs (PoCL), prepend dtype.cl and
 * attention_common.cl.
 *
 * No local memory and no barriers: under PoCL a barrier splits the kernel
 * into regions whose live values go through per-work-item context arrays,
 * and the implicit work-item loop is vectorised only for simple code.
 * Instead each work-item owns QB blocks of ROWS query rows of one (batch,
 * head), the rows of a block in the lanes of explicit vectors (floatROWS):
 * Q transposed (qt[d] = column d of the rows, prescaled) and the output
 * accumulator ot[c] = column c, in private memory. Keys go by in chunks of
 * KEY_CHUNK, which every query block of the work-item walks while the
 * chunk is hot in the cache, in blocks of BLOCK_N keys:
 *   s[j] = sum_d qt[d] * k[j][d]         k broadcast, BLOCK_N accumulators
 *   online softmax per lane (one rescale per block, all in vectors)
 *   ot[c] = ot[c] * alpha + sum_j p[j] * v[j][c]
 * register-blocked like a GEMM micro-kernel: one vector load per BLOCK_N
 * FMAs. head_dim_v above BLOCK_DV is split across work-items (grid dim 1),
 * each recomputing the scores. Work-items are independent: any work-group
 * size. With FCL_DROPOUT a dropped key's p leaves the block's P V (after
 * it joined the row's sum), one Philox call a row and four keys.
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
#ifndef QB
#define QB 1
#endif
#ifndef BLOCK_N
#define BLOCK_N 6
#endif
#ifndef KEY_CHUNK
#define KEY_CHUNK (8 * BLOCK_N)
#endif
#ifndef BLOCK_DV
#define BLOCK_DV HEAD_DIM_V
#endif
#ifndef WG_SIZE
#define WG_SIZE 1
#endif
#ifndef FCL_DROPOUT
#define FCL_DROPOUT 0 /* 1: dropout (attention_dropout.cl) */
#endif
#if KEY_CHUNK % BLOCK_N
#error "KEY_CHUNK must be a multiple of BLOCK_N"
#endif

#define CPU_CAT_(a, b) a##b
#define CPU_CAT(a, b) CPU_CAT_(a, b)
typedef CPU_CAT(float, ROWS) rvec;
typedef CPU_CAT(int, ROWS) ivec;
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

/* K and V as f32: read in place, or (STAGE) from the chunk copied into
 * private memory by vector loads and conversions: one scalar f16 or bf16
 * conversion per broadcast would cost as much as the FMAs it feeds. */
#ifndef STAGE
#define STAGE (FCL_DTYPE != 0 || QB > 1)
#endif
#if STAGE
#define KEY(jj, d) kbuf[kr[jj] + (d)]
#define VAL(jj, c) vbuf[vr[jj] + (c)]
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
#else
#define KEY(jj, d) FCL_LOAD(k, kr[jj] + (d))
#define VAL(jj, c) FCL_LOAD(v, vr[jj] + (c))
#endif

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void fcl_attention_fwd_cpu(
    ATTN_FWD_PARAMS(fcl_elem), /* attention_common.cl */
    int qbs,           /* query blocks per work-item, at most QB */
    int nitems)        /* work-items per (batch, head): qbs * ROWS rows each */
{
  ATTN_FWD_UNPACK
  const int gid = get_global_id(0);
  if (gid >= nitems) return;
  const int item = nitems - 1 - gid; /* long causal rows first */
  const int slice = get_global_id(1);
  const int b = get_global_id(2) / heads_q, h = get_global_id(2) % heads_q;
  const int hk = h / group;

  const attn_block bi = ATTN_BLOCK_INFO(b, h, hk);
  const int sq = bi.sq, sk = bi.sk, diag = bi.diag;
  const long q_base = bi.q, k_base = bi.k, v_base = bi.v, o_base = bi.o;
  const float slope_l2 = bi.slope_l2;
  const int r0 = item * qbs * ROWS; /* first row of the work-item */
  if (r0 >= sq) return;              /* this sequence is shorter */
  const int nqb = min(min(qbs, QB), (sq - r0 + ROWS - 1) / ROWS);

  const int dv0 = slice * BLOCK_DV;
  const int ndv = min(BLOCK_DV, HEAD_DIM_V - dv0);

  /* Q transposed into lanes, the scale folded in; rows past the end are 0.
   * Whole vectors, so that loads and stores are aligned. */
  rvec qt[QB][HEAD_DIM], ot[QB][BLOCK_DV], m[QB], l[QB];
  for (int qb = 0; qb < nqb; ++qb) {
    __private float *qt_f = (__private float *)qt[qb];
    for (int r = 0; r < ROWS; ++r) {
      const int i = r0 + qb * ROWS + r;
      const long at = q_base + (long)i * q_ss;
      for (int d = 0; d < HEAD_DIM; ++d)
        qt_f[d * ROWS + r] = i < sq ? FCL_LOAD(q, at + d) * qk_scale : 0.0f;
    }
    for (int c = 0; c < BLOCK_DV; ++c) ot[qb][c] = (rvec)(0.0f);
    m[qb] = (rvec)(-INFINITY);
    l[qb] = (rvec)(0.0f);
  }
#if STAGE
  float kbuf[KEY_CHUNK * HEAD_DIM], vbuf[KEY_CHUNK * BLOCK_DV];
#endif

  /* Keys some row of the work-item sees (rows further down see later keys). */
  const int r_last = min(r0 + nqb * ROWS, sq) - 1;
  const int j_first = max(0, r0 + diag - window_left);
  const int j_end = min(sk - 1, r_last + diag + window_right);
  for (int jc = j_first; jc <= j_end; jc += KEY_CHUNK) {
    const int jc_last = min(jc + KEY_CHUNK - 1, j_end);
#if STAGE
    for (int t = 0; t <= jc_last - jc; ++t) {
      stage_row(kbuf + t * HEAD_DIM, k, k_base + (long)(jc + t) * k_ss, HEAD_DIM);
      stage_row(vbuf + t * BLOCK_DV, v, v_base + (long)(jc + t) * v_ss + dv0, ndv);
    }
#endif
    for (int qb = 0; qb < nqb; ++qb) {
      const int i0 = r0 + qb * ROWS, i_last = min(i0 + ROWS, sq) - 1;
      const ivec rows_i = (ivec)(i0) + LANE_IDS;
      /* This block's keys within the chunk, on the chunk's grid of blocks. */
      const int lo = max(jc, i0 + diag - window_left);
      const int hi = min(jc_last, i_last + diag + window_right);
      if (lo > hi) continue;
      rvec mq = m[qb], lq = l[qb];
      for (int j0 = jc + (lo - jc) / BLOCK_N * BLOCK_N; j0 <= hi; j0 += BLOCK_N) {
        /* Rows of this block's keys; past hi the last key again (masked). */
        long kr[BLOCK_N], vr[BLOCK_N];
#pragma unroll
        for (int jj = 0; jj < BLOCK_N; ++jj) {
          const int j = min(j0 + jj, hi);
#if STAGE
          kr[jj] = (long)(j - jc) * HEAD_DIM;
          vr[jj] = (long)(j - jc) * BLOCK_DV;
#else
          kr[jj] = k_base + (long)j * k_ss;
          vr[jj] = v_base + (long)j * v_ss + dv0;
#endif
        }
        rvec s[BLOCK_N];
#pragma unroll
        for (int jj = 0; jj < BLOCK_N; ++jj) s[jj] = (rvec)(0.0f);
        for (int d = 0; d < HEAD_DIM; ++d) {
          const rvec qd = qt[qb][d];
#pragma unroll
          for (int jj = 0; jj < BLOCK_N; ++jj)
            s[jj] = fma(qd, (rvec)(KEY(jj, d)), s[jj]);
        }

        /* Every row sees every key of the block: no per-element mask. */
        const bool full = j0 >= i_last + diag - window_left &&
                          j0 + BLOCK_N - 1 <= hi &&
                          j0 + BLOCK_N - 1 <= i0 + diag + window_right;
        rvec mx = mq;
#pragma unroll
        for (int jj = 0; jj < BLOCK_N; ++jj) {
          rvec x = s[jj];
          if (softcap_l2 > 0.0f) x = softcap_l2 * tanh(x);
          if (flags & FCL_ATTN_ALIBI)
            x -= slope_l2 * CONVERT_F(abs(rows_i + diag - (j0 + jj)));
          if (!full) {
            const int j = j0 + jj;
            const ivec vis = (rows_i + diag - window_left <= j) &
                             (rows_i + diag + window_right >= j);
            x = j <= hi ? select((rvec)(-INFINITY), x, vis) : (rvec)(-INFINITY);
          }
          s[jj] = x;
          mx = fmax(mx, x);
        }
        /* A row with nothing visible yet keeps m = -inf; use 0 so that
         * exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN. */
        const rvec m_use = select(mx, (rvec)(0.0f), mx == (rvec)(-INFINITY));
        const rvec alpha = exp2(mq - m_use);
        mq = mx;
        lq *= alpha;
#pragma unroll
        for (int jj = 0; jj < BLOCK_N; ++jj) {
          s[jj] = exp2(s[jj] - m_use);
          lq += s[jj];
        }
#if FCL_DROPOUT
        /* Each row's keep bits of the block's keys, a Philox block of four
         * keys at a time; dropped keys then weigh 0 like masked ones. */
        {
          int kept[BLOCK_N][ROWS];
          for (int r = 0; r < ROWS; ++r) {
            const ulong n0 = attn_drop_index(b, h, i0 + r, j0, heads_q, seqlen_q, seqlen_k);
            ulong g = n0 >> 2;
            uint bits = attn_drop_keep4(g, ATTN_FWD_DROPOUT);
            for (int jj = 0; jj < BLOCK_N; ++jj) {
              const ulong n = n0 + (ulong)jj;
              if (n >> 2 != g) g = n >> 2, bits = attn_drop_keep4(g, ATTN_FWD_DROPOUT);
              kept[jj][r] = (bits >> (uint)(n & 3)) & 1u ? -1 : 0;
            }
          }
#pragma unroll
          for (int jj = 0; jj < BLOCK_N; ++jj)
            s[jj] = select((rvec)(0.0f), s[jj], CPU_CAT(vload, ROWS)(0, kept[jj]));
        }
#endif

        if (full && !FCL_DROPOUT) {
          /* Two partial sums halve the chain of dependent FMAs. */
          for (int c = 0; c < ndv; ++c) {
            rvec acc0 = ot[qb][c] * alpha, acc1 = (rvec)(0.0f);
#pragma unroll
            for (int jj = 0; jj + 1 < BLOCK_N; jj += 2) {
              acc0 = fma(s[jj], (rvec)(VAL(jj, c)), acc0);
              acc1 = fma(s[jj + 1], (rvec)(VAL(jj + 1, c)), acc1);
            }
            if (BLOCK_N % 2)
              acc0 = fma(s[BLOCK_N - 1], (rvec)(VAL(BLOCK_N - 1, c)), acc0);
            ot[qb][c] = acc0 + acc1;
          }
        } else {
          /* A masked key has p = 0 but may hold NaN or inf in V (outside
           * the window, a future key): 0 * NaN must not reach the row. */
          for (int c = 0; c < ndv; ++c) {
            rvec acc = ot[qb][c] * alpha;
#pragma unroll
            for (int jj = 0; jj < BLOCK_N; ++jj) {
              const rvec t = s[jj] * (rvec)(VAL(jj, c));
              acc += select(t, (rvec)(0.0f), s[jj] == (rvec)(0.0f));
            }
            ot[qb][c] = acc;
          }
        }
      }
      m[qb] = mq;
      l[qb] = lq;
    }
  }

  for (int qb = 0; qb < nqb; ++qb) {
    const int i0 = r0 + qb * ROWS, nrow = min(ROWS, sq - i0);
    /* l == 0: the row saw no key -> 0. A NaN sum stays NaN. */
    float inv[ROWS], lsev[ROWS];
#if FCL_DROPOUT
    VSTORE(select(drop_scale / l[qb], (rvec)(0.0f), l[qb] == (rvec)(0.0f)), 0, inv);
#else
    VSTORE(select(1.0f / l[qb], (rvec)(0.0f), l[qb] == (rvec)(0.0f)), 0, inv);
#endif
    VSTORE(select(m[qb] * FCL_LN2 + log(l[qb]), (rvec)(-INFINITY), l[qb] == (rvec)(0.0f)),
           0, lsev);
    const __private float *ot_f = (const __private float *)ot[qb];
    for (int r = 0; r < nrow; ++r) {
      const long at = o_base + (long)(i0 + r) * o_ss + dv0;
      for (int c = 0; c < ndv; ++c) FCL_STORE(o, at + c, ot_f[c * ROWS + r] * inv[r]);
      if (slice == 0 && (flags & FCL_ATTN_LSE)) lse[bi.lse + i0 + r] = lsev[r];
    }
  }
}
