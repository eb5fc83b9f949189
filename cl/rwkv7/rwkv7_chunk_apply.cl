/* requires: rwkv7/rwkv7_chunk_prep.cl */
/* The chunked RWKV7 forward, part 2: from every chunk's factors (x, by
 * rwkv7_chunk_prep.cl) the states at the chunk boundaries, then the
 * outputs; both are products of a chunk's factors by the state before it
 * and the chunk's values, column by column:
 *   state pass:  S <- E S + F V             (chunks in order; checkpoint c
 *                                            receives the state before chunk c)
 *   output:      o = scale (Q S_c + P V)    (every chunk in parallel)
 * States are f32. */
#ifndef HV
#define HV 64 /* value columns a work-group of the state pass */
#endif
#ifndef BV
#define BV 64 /* value columns a work-group of the output */
#endif
#define NS FCL_CEIL_DIV(K_DIM * HV, WG) /* state entries a work-item */
#define NO FCL_CEIL_DIV(TC * BV, WG)    /* output entries a work-item */

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
