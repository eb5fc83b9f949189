/* RWKV6 chunked forward, output pass (prepend dtype.cl, rwkv6_common.cl).
 *
 * Given the state S_c before each chunk of TC steps (written by the state
 * pass, fcl_rwkv6_fwd_recurrent with RW_CHECKPOINT | RW_NO_OUTPUT), every
 * chunk is independent. With G the inclusive cumulative sum of w inside
 * the chunk and Gp = G - w the exclusive one:
 *   o_t = scale * ( (r_t e^{Gp_t}) S_c + sum_{s<t} A[t][s] v_s + A[t][t] v_t )
 *   A[t][s] = sum_i r_t[i] k_s[i] e^{Gp_t[i] - G_s[i]}   (s < t)
 *   A[t][t] = sum_i r_t[i] u[i] k_t[i]
 * Every exponent is <= 0, so strong decays (w of -20 and below) underflow to
 * 0 instead of overflowing: the decays are taken relative to each other
 * inside the chunk, never as e^{-G} on its own.
 * A work-group owns one chunk of one (sequence, head) and BVC columns;
 * work-item (t, j) computes o_t[j]. */
#ifndef BVC
#define BVC 16
#endif
#define CK_PAD (K_DIM + 1) /* odd pitch: rows in distinct local-memory banks */
#define CW_WG (TC * BVC)

__kernel __attribute__((reqd_work_group_size(CW_WG, 1, 1)))
void fcl_rwkv6_fwd_chunk_output(
    const __global fcl_elem *r, const __global fcl_elem *k,
    const __global fcl_elem *v, const __global fcl_elem *w,
    const __global fcl_elem *u, __global fcl_elem *o, const __global float *ck,
    const __global int *cu, RW_TENSOR(r), RW_TENSOR(k), RW_TENSOR(v),
    RW_TENSOR(w), RW_TENSOR(o), int seqlen, int heads, int nchunk, float scale,
    int flags) {
  __local float r_s[TC * CK_PAD], k_s[TC * CK_PAD], w_s[TC * CK_PAD];
  __local float rq_s[TC * CK_PAD];
  __local float v_s[TC * BVC], st_s[K_DIM * BVC], a_s[TC * (TC + 1)];
  const int lid = get_local_id(0);
  const int c = get_group_id(0), vb = get_group_id(1), bh = get_group_id(2);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int p0 = c * TC;
  if (p0 >= s.n) return;
  const int nt = min(TC, s.n - p0);

  rw_load_chunk(r_s, CK_PAD, K_DIM, r, RW_T(r), 0, s, p0, flags, false, lid, CW_WG);
  rw_load_chunk(k_s, CK_PAD, K_DIM, k, RW_T(k), 0, s, p0, flags, false, lid, CW_WG);
  rw_load_chunk(w_s, CK_PAD, K_DIM, w, RW_T(w), 0, s, p0, flags, false, lid, CW_WG);
  rw_load_chunk(v_s, BVC, V_DIM, v, RW_T(v), vb * BVC, s, p0, flags, false, lid, CW_WG);
  for (int e = lid; e < K_DIM * BVC; e += CW_WG) {
    const int i = e / BVC, jj = e - i * BVC, j = vb * BVC + jj;
    st_s[e] = j < V_DIM ? ck[(((long)bh * nchunk + c) * K_DIM + i) * V_DIM + j] : 0.0f;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* r_t e^{Gp_t}: a running sum from the chunk start is exact enough, since
   * a term large enough to swamp the others makes the exponential 0. */
  for (int i = lid; i < K_DIM; i += CW_WG) {
    float g = 0.0f;
    for (int tt = 0; tt < TC; ++tt) {
      rq_s[tt * CK_PAD + i] = r_s[tt * CK_PAD + i] * exp(g);
      g += w_s[tt * CK_PAD + i];
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int e = lid; e < TC * TC; e += CW_WG) {
    const int t = e / TC, s2 = e - t * TC;
    float a = 0.0f;
    if (s2 < t) {
      for (int i = 0; i < K_DIM; ++i) {
        float span = 0.0f;
        for (int tau = s2 + 1; tau < t; ++tau) span += w_s[tau * CK_PAD + i];
        a = fma(r_s[t * CK_PAD + i] * k_s[s2 * CK_PAD + i], exp(span), a);
      }
    } else if (s2 == t) {
      for (int i = 0; i < K_DIM; ++i)
        a = fma(r_s[t * CK_PAD + i] * FCL_LOAD(u, (long)s.h * K_DIM + i),
                k_s[t * CK_PAD + i], a);
    }
    a_s[t * (TC + 1) + s2] = a;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int t = lid / BVC, jj = lid - t * BVC, j = vb * BVC + jj;
  if (t >= nt || j >= V_DIM) return;
  float acc = 0.0f;
  for (int i = 0; i < K_DIM; ++i) acc = fma(rq_s[t * CK_PAD + i], st_s[i * BVC + jj], acc);
  for (int s2 = 0; s2 <= t; ++s2) acc = fma(a_s[t * (TC + 1) + s2], v_s[s2 * BVC + jj], acc);
  FCL_STORE(o, rw_at(RW_T(o), s, rw_time(p0 + t, s.n, flags), flags) + j, scale * acc);
}
