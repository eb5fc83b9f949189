/* requires: rwkv7/rwkv7_chunk_state.cl */
/* The chunked RWKV7 forward, part 3 (portable): from every chunk's factors
 * (rwkv7_chunk_prep.cl) and the state before it (rwkv7_chunk_state.cl),
 * the outputs of every chunk in parallel:
 *   o = scale (Q S_c + P V) */
#ifndef BV
#define BV 64 /* value columns a work-group */
#endif
#define NO FCL_CEIL_DIV(TC * BV, WG) /* output entries a work-item */

/* The outputs of one chunk of one sequence-head, BV columns a work-group:
 * work-item entry e is position e / BV, column e % BV. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_rwkv7_chunk_out(const __global fcl_elem *v, const __global float *x,
                         const __global float *ck, __global fcl_elem *o,
                         const __global int *cu, RW_TENSOR(v), RW_TENSOR(o), int seqlen,
                         int heads, int nchunk, float scale, int flags) {
  __local float s_s[K_DIM * BV], v_s[TC * BV];
  const int lid = get_local_id(0), c = get_group_id(0), j0 = get_group_id(1) * BV;
  const int bh = get_group_id(2);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int p0 = c * TC, nt = max(0, min(TC, s.n - p0)); /* none past the end */
  for (int e = lid; e < K_DIM * BV; e += WG) {
    const int i = e / BV, j = j0 + e - i * BV;
    s_s[e] = nt > 0 && j < V_DIM ? ck[RW7_CK(bh, c, i, j)] : 0.0f;
  }
  rw_load_chunk(v_s, BV, V_DIM, v, RW_T(v), j0, s, p0, flags, false, lid, WG);
  barrier(CLK_LOCAL_MEM_FENCE);
  const __global float *Q = x + RW7_X(bh, c) + RW7_XQ, *P = x + RW7_X(bh, c) + RW7_XP;
  for (int n = 0; n < NO; ++n) {
    const int e = lid + n * WG, t = e / BV, j = e - t * BV;
    if (e < TC * BV && t < nt && j0 + j < V_DIM) {
      float acc = 0.0f;
      for (int i = 0; i < K_DIM; ++i) acc = fma(Q[t * K_DIM + i], s_s[i * BV + j], acc);
      for (int q = 0; q <= t; ++q) acc = fma(P[t * TC + q], v_s[q * BV + j], acc);
      FCL_STORE(o, rw_at(RW_T(o), s, rw_time(p0 + t, s.n, flags), flags) + j0 + j, scale * acc);
    }
  }
}
