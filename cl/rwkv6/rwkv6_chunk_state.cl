/* requires: rwkv6/rwkv6_chunk_common.cl */
/* The chunk-boundary states of the chunked RWKV6 (prepend dtype.cl,
 * rwkv6_common.cl, rwkv6_chunk_common.cl).
 *
 * Forward (flags without RW_STATE_GRAD): walking the chunks in order from
 * h0 (or 0), checkpoint c receives the state S_c before chunk c, then
 *   S <- eg * S + sum_s (k_s e^{w after s in the chunk}) v_s^T
 * (a product of [K x TC] by [TC x V]); ht the state after the last chunk.
 * Backward (RW_STATE_GRAD): walking the chunks from the last, from dht (or
 * 0), checkpoint c receives D_c, the gradient of the state after chunk c,
 * then
 *   D <- eg * D + scale * sum_t (r_t e^{w before t in the chunk}) dO_t^T
 * and dh0 gets the gradient of the initial state.
 * The rows of the state are independent: a work-group owns HK rows and HV
 * columns (one tile of [K x V]); work-item (i, g) keeps row i, columns
 * g, g + HG, ..., g + (HC-1) HG in registers (strided, so that the
 * checkpoint stores of neighbouring work-items are neighbouring columns).
 * A launch walks chunks [c_begin, c_end) (segments on devices that bound
 * a work-item's loop iterations), the state passing between launches
 * through the in / out buffers. `segs` and `nseg` are the tensor-core
 * pass's (segments side by side, rwkv6_chunk_state_mma.cl): here nseg is
 * 1 and segs unused. */
#ifndef HK
#define HK 32
#endif
#ifndef HV
#define HV 64
#endif
#ifndef HC
#define HC 8
#endif
#define HG (HV / HC)
#define WGH (HK * HG)

__kernel __attribute__((reqd_work_group_size(WGH, 1, 1)))
void fcl_rwkv6_chunk_state(
    const __global fcl_elem *a, const __global fcl_elem *w, const __global fcl_elem *b,
    const __global float *in, __global float *out, __global float *ck,
    __global float *segs, const __global int *cu, RW_TENSOR(a), RW_TENSOR(w), RW_TENSOR(b),
    int seqlen, int heads, int nchunk, float scale, int flags, int c_begin, int c_end,
    int nseg) {
  (void)segs, (void)nseg;
  __local float a_s[TC * HK], w_s[TC * HK], b_s[TC * HV];
  const int lid = get_local_id(0), il = lid / HG, gl = lid - il * HG;
  const int nkb = FCL_CEIL_DIV(K_DIM, HK);
  const int i0 = (get_group_id(0) % nkb) * HK, jb0 = (get_group_id(0) / nkb) * HV;
  const int bh = get_group_id(1), i = i0 + il;
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const bool grad = (flags & RW_STATE_GRAD) != 0;
  const float bscale = grad ? scale : 1.0f;
  float S[HC];
  FCL_UNROLL
  for (int n = 0; n < HC; ++n) {
    const int j = jb0 + gl + n * HG;
    S[n] = ((flags & RW_H0) && i < K_DIM && j < V_DIM) ? in[((long)bh * K_DIM + i) * V_DIM + j]
                                                        : 0.0f;
  }
  const int last = min(c_end, FCL_CEIL_DIV(s.n, TC));
  for (int step = 0; step < last - c_begin; ++step) {
    const int c = grad ? last - 1 - step : c_begin + step, p0 = c * TC;
    FCL_UNROLL
    for (int n = 0; n < HC; ++n) {
      const int j = jb0 + gl + n * HG;
      if (i < K_DIM && j < V_DIM) ck[rw_ck(bh, nchunk, c) + (long)i * V_DIM + j] = S[n];
    }
    rw_load_chunk(a_s, HK, K_DIM, a, RW_T(a), i0, s, p0, flags, false, lid, WGH);
    rw_load_chunk(w_s, HK, K_DIM, w, RW_T(w), i0, s, p0, flags, false, lid, WGH);
    rw_load_chunk(b_s, HV, V_DIM, b, RW_T(b), jb0, s, p0, flags, false, lid, WGH);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* a_t *= e^{w after t} (forward) or e^{w before t} (gradient): a
     * running sum per row; the row's total decay lands in the last slot
     * of w_s's column, read below as eg. */
    if (lid < HK) {
      float run = 0.0f;
      for (int q = 0; q < TC; ++q) {
        const int t = grad ? q : TC - 1 - q;
        a_s[t * HK + lid] *= exp(run);
        run += w_s[t * HK + lid];
      }
      w_s[lid] = exp(run); /* w_s row 0 is no longer needed */
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const float eg = w_s[il];
    float acc[HC];
    FCL_UNROLL
    for (int n = 0; n < HC; ++n) acc[n] = 0.0f;
    for (int t = 0; t < TC; ++t) {
      const float at = a_s[t * HK + il];
      FCL_UNROLL
      for (int n = 0; n < HC; ++n) acc[n] = fma(at, b_s[t * HV + gl + n * HG], acc[n]);
    }
    FCL_UNROLL
    for (int n = 0; n < HC; ++n) S[n] = fma(eg, S[n], bscale * acc[n]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (flags & RW_HT)
    FCL_UNROLL
    for (int n = 0; n < HC; ++n) {
      const int j = jb0 + gl + n * HG;
      if (i < K_DIM && j < V_DIM) out[((long)bh * K_DIM + i) * V_DIM + j] = S[n];
    }
}
