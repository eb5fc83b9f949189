/* requires: rwkv6/rwkv6_common.cl */
/* RWKV6 forward of short sequences (prepend rwkv6_abi.h, dtype.cl,
 * rwkv6_common.cl): positions [p_begin, p_begin + RW_STEPS) of every
 * sequence in one launch, the state from h0 (or zero) to ht. h0 and ht may
 * be one buffer: each state element is read, then written, by one
 * work-item.
 *
 * A work-group owns one (sequence, head) and BV = VS * VC value columns.
 * Its KS x VS work-items (vs fastest) each own VC adjacent columns of rows
 * ks, ks + KS, ... (KR rows): the state moves as VC-wide vectors (float4
 * at VC = 4 where V_DIM is a multiple of VC), consecutive work-items on
 * consecutive columns of a row. Each work-item loads its whole block
 * first (every load in flight at once), takes it through the launch's
 * steps in registers, stores it once, and sums r_i (S_ij + u_i k_i v_j)
 * over its rows for every step; the KS partial sums of a column meet in a
 * fixed tree through local memory, so results do not vary run to run. */
#ifndef KS
#define KS 16
#endif
#ifndef VS
#define VS 4
#endif
#ifndef VC
#define VC 4
#endif
#ifndef RW_STEP_MAX_T
#define RW_STEP_MAX_T 4
#endif
/* Positions a launch takes (the host builds a program for min(T,
 * RW_STEP_MAX_T)): the partial sums kept, summed and stored. */
#ifndef RW_STEPS
#define RW_STEPS RW_STEP_MAX_T
#endif
#define KR ((K_DIM + KS - 1) / KS)
#define BV (VS * VC)
#define RS_WG (KS * VS)
#define RS_TM RW_STEPS
/* Whole vectors: every block of VC columns lies inside the row or past it. */
#define RS_VEC ((VC == 2 || VC == 4) && V_DIM % VC == 0)
/* Width of the reduction tree: the smallest power of two >= KS. */
#define RS_P2                                                                 \
  (KS <= 1 ? 1 : KS <= 2 ? 2 : KS <= 4 ? 4 : KS <= 8 ? 8 : KS <= 16 ? 16       \
   : KS <= 32 ? 32 : KS <= 64 ? 64 : KS <= 128 ? 128 : KS <= 256 ? 256 : 512)
/* Partial sum of step t, row group q, column n of the work-item's block
 * (consecutive work-items on consecutive words). */
#define RS_OS(t, q, n, vs) ((((t) * KS + (q)) * VC + (n)) * VS + (vs))

/* The VC state columns at p (column j0 of a row), zero past V_DIM. */
inline void rs_load(const __global float *p, int j0, float *x) {
#if RS_VEC && VC == 4
  const float4 q = j0 < V_DIM ? *(const __global float4 *)p : (float4)(0.0f);
  x[0] = q.x, x[1] = q.y, x[2] = q.z, x[3] = q.w;
#elif RS_VEC && VC == 2
  const float2 q = j0 < V_DIM ? *(const __global float2 *)p : (float2)(0.0f);
  x[0] = q.x, x[1] = q.y;
#else
  for (int n = 0; n < VC; ++n) x[n] = j0 + n < V_DIM ? p[n] : 0.0f;
#endif
}

inline void rs_store(__global float *p, int j0, const float *x) {
#if RS_VEC && VC == 4
  if (j0 < V_DIM) *(__global float4 *)p = (float4)(x[0], x[1], x[2], x[3]);
#elif RS_VEC && VC == 2
  if (j0 < V_DIM) *(__global float2 *)p = (float2)(x[0], x[1]);
#else
  for (int n = 0; n < VC; ++n)
    if (j0 + n < V_DIM) p[n] = x[n];
#endif
}

__kernel __attribute__((reqd_work_group_size(RS_WG, 1, 1)))
void fcl_rwkv6_fwd_step(
    const __global fcl_elem *r, const __global fcl_elem *k,
    const __global fcl_elem *v, const __global fcl_elem *w,
    const __global fcl_elem *u, const __global float *h0, __global fcl_elem *o,
    __global float *ht, const __global int *cu,
    RW_TENSOR(r), RW_TENSOR(k), RW_TENSOR(v), RW_TENSOR(w), RW_TENSOR(o),
    int seqlen, int heads, float scale, int flags, int p_begin) {
#if KS > 1
  __local float o_s[RS_TM * KS * BV];
#endif
  const int lid = get_local_id(0), vs = lid % VS, ks = lid / VS;
  const int vb = get_group_id(0), bh = get_group_id(1);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int j0 = vb * BV + vs * VC;
  const int nt = clamp(s.n - p_begin, 0, RS_TM);
  const long srow = (long)bh * K_DIM * V_DIM + j0; /* row 0 of the state, column j0 */

  float S[KR][VC];
  FCL_UNROLL
  for (int m = 0; m < KR; ++m) {
    const int i = ks + m * KS;
    if (i < K_DIM && (flags & RW_H0)) {
      rs_load(h0 + srow + (long)i * V_DIM, j0, S[m]);
    } else {
      FCL_UNROLL
      for (int n = 0; n < VC; ++n) S[m][n] = 0.0f;
    }
  }

  /* Each step's rows of r, k, w (offsets) and the block's columns of v. */
  long tr[RS_TM], tk[RS_TM], tw[RS_TM];
  float vv[RS_TM][VC], acc[RS_TM][VC];
  FCL_UNROLL
  for (int t = 0; t < RS_TM; ++t) {
    const int tm = rw_time(p_begin + t, s.n, flags);
    tr[t] = rw_at(RW_T(r), s, tm, flags);
    tk[t] = rw_at(RW_T(k), s, tm, flags);
    tw[t] = rw_at(RW_T(w), s, tm, flags);
    const long tv = rw_at(RW_T(v), s, tm, flags);
    FCL_UNROLL
    for (int n = 0; n < VC; ++n) {
      vv[t][n] = t < nt && j0 + n < V_DIM ? FCL_LOAD(v, tv + j0 + n) : 0.0f;
      acc[t][n] = 0.0f;
    }
  }

  FCL_UNROLL
  for (int m = 0; m < KR; ++m) {
    const int i = ks + m * KS;
    if (i >= K_DIM) continue;
    const float ui = FCL_LOAD(u, (long)s.h * K_DIM + i);
    FCL_UNROLL
    for (int t = 0; t < RS_TM; ++t) {
      if (t >= nt) continue;
      const float ri = FCL_LOAD(r, tr[t] + i), ki = FCL_LOAD(k, tk[t] + i);
      const float ei = exp(FCL_LOAD(w, tw[t] + i)), rui = ri * ui;
      FCL_UNROLL
      for (int n = 0; n < VC; ++n) {
        const float kv = ki * vv[t][n];
        acc[t][n] = fma(ri, S[m][n], fma(rui, kv, acc[t][n]));
        S[m][n] = fma(S[m][n], ei, kv);
      }
    }
  }

  if (flags & RW_HT) {
    FCL_UNROLL
    for (int m = 0; m < KR; ++m) {
      const int i = ks + m * KS;
      if (i < K_DIM) rs_store(ht + srow + (long)i * V_DIM, j0, S[m]);
    }
  }

#if KS > 1
  /* Row group ks adds group ks + h, for h = RS_P2 / 2, ..., 1: group 0
   * ends with the column sums, always added in the same order. */
  FCL_UNROLL
  for (int t = 0; t < RS_TM; ++t)
    FCL_UNROLL
    for (int n = 0; n < VC; ++n) o_s[RS_OS(t, ks, n, vs)] = acc[t][n];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = RS_P2 / 2; h > 0; h /= 2) {
    if (ks < h && ks + h < KS) {
      FCL_UNROLL
      for (int t = 0; t < RS_TM; ++t)
        FCL_UNROLL
        for (int n = 0; n < VC; ++n) {
          acc[t][n] += o_s[RS_OS(t, ks + h, n, vs)];
          if (h > 1) o_s[RS_OS(t, ks, n, vs)] = acc[t][n];
        }
    }
    if (h > 1) barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (ks != 0) return;
#endif
  FCL_UNROLL
  for (int t = 0; t < RS_TM; ++t) {
    if (t >= nt) continue;
    const long at = rw_at(RW_T(o), s, rw_time(p_begin + t, s.n, flags), flags);
    FCL_UNROLL
    for (int n = 0; n < VC; ++n)
      if (j0 + n < V_DIM) FCL_STORE(o, at + j0 + n, scale * acc[t][n]);
  }
}
