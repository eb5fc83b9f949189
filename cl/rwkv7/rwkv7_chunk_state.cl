/* requires: rwkv7/rwkv7_chunk_prep.cl */
/* The chunked RWKV7 forward, part 2: from every chunk's factors (x, by
 * rwkv7_chunk_prep.cl) the states at the chunk boundaries, a product of
 * the chunk's factors by the state before it and the chunk's values,
 * column by column, the chunks in order:
 *   S <- E S + F V    (checkpoint c receives the state before chunk c)
 * States are f32. Part 3, the outputs: rwkv7_chunk_out.cl (portable) or
 * rwkv7_chunk_out_mma.cl (tensor cores). */
#ifndef HV
#define HV 64 /* value columns a work-group of the state pass */
#endif
#define NS FCL_CEIL_DIV(K_DIM * HV, WG) /* state entries a work-item */

/* The state pass over chunks [c_begin, c_end) of each sequence-head
 * (launches one after another where the device bounds a work-item's loop
 * iterations), from `in` (RW_H0; else 0) to `out` (RW_HT). A work-group
 * owns HV columns of one sequence-head's state; work-item entry e of the
 * K x HV block is row e / HV, column e % HV. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_rwkv7_chunk_state(const __global fcl_elem *v, const __global float *x,
                           const __global float *in, __global float *out, __global float *ck,
                           const __global int *cu, RW_TENSOR(v), int seqlen, int heads,
                           int nchunk, int flags, int c_begin, int c_end) {
  __local float s_s[K_DIM * HV], v_s[TC * HV];
  const int lid = get_local_id(0), j0 = get_group_id(0) * HV, bh = get_group_id(1);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  float S[NS];
  for (int n = 0; n < NS; ++n) {
    const int e = lid + n * WG, i = e / HV, j = j0 + e - i * HV;
    S[n] = (flags & RW_H0) && e < K_DIM * HV && j < V_DIM ? in[RW7_ST(bh, i, j)] : 0.0f;
  }
  const int last = min(c_end, FCL_CEIL_DIV(s.n, TC));
  for (int c = c_begin; c < last; ++c) {
    for (int n = 0; n < NS; ++n) {
      const int e = lid + n * WG, i = e / HV, j = j0 + e - i * HV;
      if (e < K_DIM * HV) {
        s_s[e] = S[n];
        if (j < V_DIM) ck[RW7_CK(bh, c, i, j)] = S[n];
      }
    }
    rw_load_chunk(v_s, HV, V_DIM, v, RW_T(v), j0, s, c * TC, flags, false, lid, WG);
    barrier(CLK_LOCAL_MEM_FENCE);
    const __global float *E = x + RW7_X(bh, c) + RW7_XE, *F = x + RW7_X(bh, c) + RW7_XF;
    for (int n = 0; n < NS; ++n) {
      const int e = min(lid + n * WG, K_DIM * HV - 1), i = e / HV, j = e - i * HV;
      float acc = 0.0f;
      for (int m = 0; m < K_DIM; ++m) acc = fma(E[i * K_DIM + m], s_s[m * HV + j], acc);
      for (int t = 0; t < TC; ++t) acc = fma(F[i * TC + t], v_s[t * HV + j], acc);
      S[n] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (flags & RW_HT)
    for (int n = 0; n < NS; ++n) {
      const int e = lid + n * WG, i = e / HV, j = j0 + e - i * HV;
      if (e < K_DIM * HV && j < V_DIM) out[RW7_ST(bh, i, j)] = S[n];
    }
}
