/* requires: rwkv6/rwkv6_step_state.cl */
/* RWKV6 forward of short sequences (prepend rwkv6_abi.h, dtype.cl,
 * rwkv6_common.cl, rwkv6_step_state.cl: the launch's positions, the
 * state's blocks). Each work-item loads its whole block of the state
 * first (every load in flight at once), takes it through the launch's
 * steps in registers, stores it once, and sums r_i (S_ij + u_i k_i v_j)
 * over its rows for every step; the KS partial sums of a column meet in a
 * fixed tree through local memory, so results do not vary run to run. */
#define RS_WG (KS * VS)
#define RS_TM RW_STEPS
/* Width of the reduction tree: the smallest power of two >= KS. */
#define RS_P2                                                                 \
  (KS <= 1 ? 1 : KS <= 2 ? 2 : KS <= 4 ? 4 : KS <= 8 ? 8 : KS <= 16 ? 16       \
   : KS <= 32 ? 32 : KS <= 64 ? 64 : KS <= 128 ? 128 : KS <= 256 ? 256 : 512)
/* Partial sum of step t, row group q, column n of the work-item's block
 * (consecutive work-items on consecutive words). */
#define RS_OS(t, q, n, vs) ((((t) * KS + (q)) * VC + (n)) * VS + (vs))

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
  rw_step_state_in(S, h0, srow, ks, j0, flags);

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

  rw_step_state_out(S, ht, srow, ks, j0, flags);

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
