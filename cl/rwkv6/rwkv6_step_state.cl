/* requires: rwkv6/rwkv6_common.cl */
/* The state of the step kernels (rwkv6_step.cl, and RWKV7's rwkv7_step.cl
 * after rwkv7_common.cl): positions [p_begin, p_begin + RW_STEPS) of every
 * sequence in one launch, the state from h0 (or zero) to ht, read once
 * and written once. h0 and ht may be one buffer: each state element is
 * read, then written, by one work-item.
 *
 * A work-group owns one (sequence, head) and BV = VS * VC value columns.
 * Its KS x VS work-items (vs fastest) each own VC adjacent columns of rows
 * ks, ks + KS, ... (KR rows): the state moves as VC-wide vectors (float4
 * at VC = 4 where V_DIM is a multiple of VC), consecutive work-items on
 * consecutive columns of a row. */
#ifndef KS
#define KS 16
#endif
#ifndef VS
#define VS 4
#endif
#ifndef VC
#define VC 4
#endif
#ifndef KR /* rwkv7_common.cl's where it comes first: the same rows */
#define KR ((K_DIM + KS - 1) / KS)
#endif
/* Positions a launch takes (the host builds a program for min(T,
 * RW_STEP_MAX_T)). */
#ifndef RW_STEPS
#define RW_STEPS RW_STEP_MAX_T
#endif
#define BV (VS * VC)
/* Whole vectors: every block of VC columns lies inside the row or past it. */
#define RW_STEP_VEC ((VC == 2 || VC == 4) && V_DIM % VC == 0)

/* The VC state columns at p (column j0 of a row), zero past V_DIM. */
inline void rw_step_load(const __global float *p, int j0, float *x) {
#if RW_STEP_VEC && VC == 4
  const float4 q = j0 < V_DIM ? *(const __global float4 *)p : (float4)(0.0f);
  x[0] = q.x, x[1] = q.y, x[2] = q.z, x[3] = q.w;
#elif RW_STEP_VEC && VC == 2
  const float2 q = j0 < V_DIM ? *(const __global float2 *)p : (float2)(0.0f);
  x[0] = q.x, x[1] = q.y;
#else
  for (int n = 0; n < VC; ++n) x[n] = j0 + n < V_DIM ? p[n] : 0.0f;
#endif
}

inline void rw_step_store(__global float *p, int j0, const float *x) {
#if RW_STEP_VEC && VC == 4
  if (j0 < V_DIM) *(__global float4 *)p = (float4)(x[0], x[1], x[2], x[3]);
#elif RW_STEP_VEC && VC == 2
  if (j0 < V_DIM) *(__global float2 *)p = (float2)(x[0], x[1]);
#else
  for (int n = 0; n < VC; ++n)
    if (j0 + n < V_DIM) p[n] = x[n];
#endif
}

/* The work-item's block of the state (srow: row 0, column j0): from h0
 * where flags has RW_H0, else zero; to ht where it has RW_HT. */
inline void rw_step_state_in(float S[KR][VC], const __global float *h0, long srow, int ks,
                             int j0, int flags) {
  FCL_UNROLL
  for (int m = 0; m < KR; ++m) {
    const int i = ks + m * KS;
    if (i < K_DIM && (flags & RW_H0)) {
      rw_step_load(h0 + srow + (long)i * V_DIM, j0, S[m]);
    } else {
      FCL_UNROLL
      for (int n = 0; n < VC; ++n) S[m][n] = 0.0f;
    }
  }
}

inline void rw_step_state_out(float S[KR][VC], __global float *ht, long srow, int ks, int j0,
                              int flags) {
  if (!(flags & RW_HT)) return;
  FCL_UNROLL
  for (int m = 0; m < KR; ++m) {
    const int i = ks + m * KS;
    if (i < K_DIM) rw_step_store(ht + srow + (long)i * V_DIM, j0, S[m]);
  }
}
