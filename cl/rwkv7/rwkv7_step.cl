/* requires: rwkv7/rwkv7_common.cl */
/* RWKV7 forward of short sequences (decoding: T = 1 with h0 and ht in one
 * launch): positions [p_begin, p_begin + RW_STEPS) of every sequence, the
 * state from h0 (or zero) to ht, read once and written once. h0 and ht may
 * be one buffer: each state element is read, then written, by one
 * work-item.
 *
 * A work-group owns one (sequence, head) and BV = VS * VC value columns.
 * Its KS x VS work-items (vs fastest) each own VC adjacent columns of rows
 * ks, ks + KS, ... (KR rows): the state moves as VC-wide vectors (float4
 * at VC = 4 where V_DIM is a multiple of VC), consecutive work-items on
 * consecutive columns of a row. Every operand of the launch's steps is
 * loaded before the first (all loads in flight at once); then each step
 * sums, over the rows of a column, the last step's output (r^T S) and this
 * step's low-rank term (a^T S) in one rw7_colsum (rwkv7_common.cl: fixed
 * order, bit-identical runs), and updates its block of the state
 *   S'[i][j] = exp(w[i]) S[i][j] + b[i] sa[j] + k[i] v[j]. */
#ifndef VS
#define VS 4
#endif
#ifndef RW_STEP_MAX_T
#define RW_STEP_MAX_T 4
#endif
/* Positions a launch takes (the host builds a program for min(T,
 * RW_STEP_MAX_T)). */
#ifndef RW_STEPS
#define RW_STEPS RW_STEP_MAX_T
#endif
#define BV (VS * VC)
#define RW7_BW BV
#define RW7_WG (KS * VS)
/* Whole vectors: every block of VC columns lies inside the row or past it. */
#define R7S_VEC ((VC == 2 || VC == 4) && V_DIM % VC == 0)

/* The VC state columns at p (column j0 of a row), zero past V_DIM. */
inline void r7s_load(const __global float *p, int j0, float *x) {
#if R7S_VEC && VC == 4
  const float4 q = j0 < V_DIM ? *(const __global float4 *)p : (float4)(0.0f);
  x[0] = q.x, x[1] = q.y, x[2] = q.z, x[3] = q.w;
#elif R7S_VEC && VC == 2
  const float2 q = j0 < V_DIM ? *(const __global float2 *)p : (float2)(0.0f);
  x[0] = q.x, x[1] = q.y;
#else
  for (int n = 0; n < VC; ++n) x[n] = j0 + n < V_DIM ? p[n] : 0.0f;
#endif
}

inline void r7s_store(__global float *p, int j0, const float *x) {
#if R7S_VEC && VC == 4
  if (j0 < V_DIM) *(__global float4 *)p = (float4)(x[0], x[1], x[2], x[3]);
#elif R7S_VEC && VC == 2
  if (j0 < V_DIM) *(__global float2 *)p = (float2)(x[0], x[1]);
#else
  for (int n = 0; n < VC; ++n)
    if (j0 + n < V_DIM) p[n] = x[n];
#endif
}

__kernel __attribute__((reqd_work_group_size(RW7_WG, 1, 1)))
void fcl_rwkv7_fwd_step(RW7_INPUTS, const __global float *h0, __global fcl_elem *o,
                        RW_TENSOR(o), __global float *ht) {
  RW7_RED_LOCAL;
  const int lid = get_local_id(0), vs = lid % VS, ks = lid / VS;
  const int vb = get_group_id(0), bh = get_group_id(1);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int jl0 = vs * VC, j0 = vb * BV + jl0;
  const int nt = clamp(min(p_end, s.n) - p_begin, 0, RW_STEPS);
  const long srow = (long)bh * K_DIM * V_DIM + j0; /* row 0 of the state, column j0 */

  float S[KR][VC];
  FCL_UNROLL
  for (int m = 0; m < KR; ++m) {
    const int i = ks + m * KS;
    if (i < K_DIM && (flags & RW_H0)) {
      r7s_load(h0 + srow + (long)i * V_DIM, j0, S[m]);
    } else {
      FCL_UNROLL
      for (int n = 0; n < VC; ++n) S[m][n] = 0.0f;
    }
  }
  /* Every step's r, exp(w), k, a, b of the work-item's rows and v of its
   * columns (zero past the sequence or the dimensions). */
  float rr[RW_STEPS][KR], ee[RW_STEPS][KR], kk[RW_STEPS][KR], aa[RW_STEPS][KR],
      bb[RW_STEPS][KR], vv[RW_STEPS][VC];
  FCL_UNROLL
  for (int t = 0; t < RW_STEPS; ++t) {
    const int tm = rw_time(p_begin + t, s.n, flags);
    const long tr = rw_at(RW_T(r), s, tm, flags), tw = rw_at(RW_T(w), s, tm, flags),
               tk = rw_at(RW_T(k), s, tm, flags), ta = rw_at(RW_T(a), s, tm, flags),
               tb = rw_at(RW_T(b), s, tm, flags), tv = rw_at(RW_T(v), s, tm, flags);
    FCL_UNROLL
    for (int m = 0; m < KR; ++m) {
      const int i = ks + m * KS;
      const bool ok = t < nt && i < K_DIM;
      rr[t][m] = ok ? FCL_LOAD(r, tr + i) : 0.0f;
      ee[t][m] = ok ? exp(FCL_LOAD(w, tw + i)) : 0.0f;
      kk[t][m] = ok ? FCL_LOAD(k, tk + i) : 0.0f;
      aa[t][m] = ok ? FCL_LOAD(a, ta + i) : 0.0f;
      bb[t][m] = ok ? FCL_LOAD(b, tb + i) : 0.0f;
    }
    FCL_UNROLL
    for (int n = 0; n < VC; ++n) vv[t][n] = t < nt && j0 + n < V_DIM ? FCL_LOAD(v, tv + j0 + n) : 0.0f;
  }

  /* Step t: x[0..VC) = r_{t-1}^T S (the last step's output), x[VC..2VC) =
   * a_t^T S; a step past nt only completes the last output. */
  FCL_UNROLL
  for (int t = 0; t <= RW_STEPS; ++t) {
    float x[2 * VC];
    FCL_UNROLL
    for (int n = 0; n < 2 * VC; ++n) x[n] = 0.0f;
    FCL_UNROLL
    for (int m = 0; m < KR; ++m) {
      const float rm = t > 0 ? rr[t - 1][m] : 0.0f, am = t < RW_STEPS ? aa[t][m] : 0.0f;
      FCL_UNROLL
      for (int n = 0; n < VC; ++n) {
        x[n] = fma(rm, S[m][n], x[n]);
        x[VC + n] = fma(am, S[m][n], x[VC + n]);
      }
    }
    RW7_COLSUM(x, 2);
    if (t > 0 && ks == 0) {
      const long at = rw_at(RW_T(o), s, rw_time(p_begin + t - 1, s.n, flags), flags);
      FCL_UNROLL
      for (int n = 0; n < VC; ++n)
        if (j0 + n < V_DIM) FCL_STORE(o, at + j0 + n, scale * x[n]);
    }
    if (t == nt) break;
    FCL_UNROLL
    for (int m = 0; m < KR; ++m)
      FCL_UNROLL
      for (int n = 0; n < VC; ++n)
        S[m][n] = fma(ee[t][m], S[m][n], fma(bb[t][m], x[VC + n], kk[t][m] * vv[t][n]));
  }

  if (flags & RW_HT)
    FCL_UNROLL
    for (int m = 0; m < KR; ++m) {
      const int i = ks + m * KS;
      if (i < K_DIM) r7s_store(ht + srow + (long)i * V_DIM, j0, S[m]);
    }
}
