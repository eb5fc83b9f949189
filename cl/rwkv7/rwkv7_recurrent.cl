/* requires: rwkv7/rwkv7_common.cl */
/* RWKV7 fused recurrent forward: per step
 *   S'[i][j] = exp(w[i]) S[i][j] + b[i] sa[j] + k[i] v[j],  sa[j] = sum_m a[m] S[m][j]
 *   o[j]     = scale sum_i r[i] S'[i][j]
 * exact for any w <= 0 (the state is f32, nothing is divided by a decay).
 *
 * A work-group owns one (sequence, head) and BV = VS * VC value columns
 * (rwkv7_common.cl). The sums over rows of step t's output and of step
 * t+1's sa are both sums over the state after step t, so one call of
 * rw7_colsum a step gives the two. r, k, a, b, exp(w) and v pass through
 * local memory TC steps at a time.
 *
 * With RW7_CKPT (the backward's first pass) the kernel writes no output:
 * it stores the state before every chunk of TC positions in ck (chunk c at
 * [bh][c][K][V]) for the backward's reverse pass (rwkv7_backward.cl). */
#ifndef VS
#define VS 1
#endif
#define BV (VS * VC)
#define RW7_BW BV
#define RW7_WG (KS * VS)

__kernel __attribute__((reqd_work_group_size(RW7_WG, 1, 1)))
void fcl_rwkv7_fwd_recurrent(RW7_INPUTS, const __global float *h0, __global fcl_elem *o,
                             RW_TENSOR(o), __global float *ht, __global float *ck,
                             int nchunk) {
  __local float r_s[TC * K_PAD], e_s[TC * K_PAD], k_s[TC * K_PAD], a_s[TC * K_PAD],
      b_s[TC * K_PAD], v_s[TC * BV];
  RW7_RED_LOCAL;
  const int lid = get_local_id(0), ks = lid % KS, vs = lid / KS;
  const int vb = get_group_id(0), bh = get_group_id(1);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int i0 = ks * KR, jl0 = vs * VC, j0 = vb * BV + jl0;
  const bool ckpt = (flags & RW7_CKPT) != 0;

  float S[KR][VC], rp[KR];
  FCL_UNROLL
  for (int m = 0; m < KR; ++m) {
    rp[m] = 0.0f;
    FCL_UNROLL
    for (int n = 0; n < VC; ++n) {
      const bool ok = i0 + m < K_DIM && j0 + n < V_DIM && (flags & RW_H0);
      S[m][n] = ok ? h0[RW7_ST(bh, i0 + m, j0 + n)] : 0.0f;
    }
  }
  const int p_stop = min(p_end, s.n);
  int t_prev = -1; /* the time step whose output the next sums complete */
  for (int c = p_begin / TC; c * TC < p_stop; ++c) {
    const int p0 = c * TC, nt = min(TC, p_stop - p0);
    if (ckpt)
      FCL_UNROLL
      for (int m = 0; m < KR; ++m)
        FCL_UNROLL
        for (int n = 0; n < VC; ++n)
          if (i0 + m < K_DIM && j0 + n < V_DIM) ck[RW7_CK(bh, c, i0 + m, j0 + n)] = S[m][n];
    RW7_LOAD_CHUNK(p0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int tt = 0; tt < nt; ++tt) {
      /* x[0..VC): r_{t-1}^T S (the last output), x[VC..2VC): a_t^T S. */
      float x[2 * VC];
      FCL_UNROLL
      for (int n = 0; n < 2 * VC; ++n) x[n] = 0.0f;
      FCL_UNROLL
      for (int m = 0; m < KR; ++m) {
        const float am = a_s[tt * K_PAD + i0 + m];
        FCL_UNROLL
        for (int n = 0; n < VC; ++n) {
          x[n] = fma(rp[m], S[m][n], x[n]);
          x[VC + n] = fma(am, S[m][n], x[VC + n]);
        }
      }
      RW7_COLSUM(x, 2);
      if (t_prev >= 0 && !ckpt && ks == 0) {
        const long at = rw_at(RW_T(o), s, t_prev, flags);
        FCL_UNROLL
        for (int n = 0; n < VC; ++n)
          if (j0 + n < V_DIM) FCL_STORE(o, at + j0 + n, scale * x[n]);
      }
      float vv[VC];
      FCL_UNROLL
      for (int n = 0; n < VC; ++n) vv[n] = v_s[tt * BV + jl0 + n];
      FCL_UNROLL
      for (int m = 0; m < KR; ++m) {
        const int i = tt * K_PAD + i0 + m;
        const float em = e_s[i], km = k_s[i], bm = b_s[i];
        FCL_UNROLL
        for (int n = 0; n < VC; ++n) S[m][n] = fma(em, S[m][n], fma(bm, x[VC + n], km * vv[n]));
        rp[m] = r_s[i];
      }
      t_prev = rw_time(p0 + tt, s.n, flags);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t_prev >= 0 && !ckpt) { /* the last step's output */
    float x[2 * VC];
    FCL_UNROLL
    for (int n = 0; n < VC; ++n) {
      x[n] = 0.0f;
      FCL_UNROLL
      for (int m = 0; m < KR; ++m) x[n] = fma(rp[m], S[m][n], x[n]);
    }
    RW7_COLSUM(x, 1);
    if (ks == 0) {
      const long at = rw_at(RW_T(o), s, t_prev, flags);
      FCL_UNROLL
      for (int n = 0; n < VC; ++n)
        if (j0 + n < V_DIM) FCL_STORE(o, at + j0 + n, scale * x[n]);
    }
  }
  if (flags & RW_HT)
    FCL_UNROLL
    for (int m = 0; m < KR; ++m)
      FCL_UNROLL
      for (int n = 0; n < VC; ++n)
        if (i0 + m < K_DIM && j0 + n < V_DIM) ht[RW7_ST(bh, i0 + m, j0 + n)] = S[m][n];
}
