/* requires: rwkv7/rwkv7_common.cl rwkv6/rwkv6_step_state.cl */
/* RWKV7 forward of short sequences (decoding: T = 1 with h0 and ht in one
 * launch; rwkv6_step_state.cl: the launch's positions, the state's blocks,
 * read once and written once). Every operand of the launch's steps is
 * loaded before the first (all loads in flight at once); then each step
 * sums, over the rows of a column, the last step's output (r^T S) and this
 * step's low-rank term (a^T S) in one rw7_colsum (rwkv7_common.cl: fixed
 * order, bit-identical runs), and updates its block of the state
 *   S'[i][j] = exp(w[i]) S[i][j] + b[i] sa[j] + k[i] v[j]. */
#define RW7_BW BV
#define RW7_WG (KS * VS)

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
  rw_step_state_in(S, h0, srow, ks, j0, flags);
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

  rw_step_state_out(S, ht, srow, ks, j0, flags);
}
