/* RWKV6 fused recurrent forward and the state pass of the chunked forward
 * (prepend dtype.cl, rwkv6_common.cl).
 *
 * A work-group owns one (sequence, head) and BV value columns; its
 * KS x BV work-items each keep KR rows of one state column in registers
 * (KS = 1: a whole column, no reduction at all). r, k, exp(w) and v pass
 * through local memory TC steps at a time; with KS > 1 the per-row partial
 * outputs are summed over the KS work-items of a column once per chunk.
 * RW_CHECKPOINT stores the state before every chunk (for the chunked output
 * pass and the backward), RW_NO_OUTPUT skips o. */
#ifndef BV
#define BV 32
#endif
#ifndef KS
#define KS 1
#endif
#define KR ((K_DIM + KS - 1) / KS)
#define K_PAD (KS * KR)
#define RW_WG (BV * KS)

__kernel __attribute__((reqd_work_group_size(RW_WG, 1, 1)))
void fcl_rwkv6_fwd_recurrent(
    const __global fcl_elem *r, const __global fcl_elem *k,
    const __global fcl_elem *v, const __global fcl_elem *w,
    const __global fcl_elem *u, const __global float *h0, __global fcl_elem *o,
    __global float *ht, __global float *ck, const __global int *cu,
    RW_TENSOR(r), RW_TENSOR(k), RW_TENSOR(v), RW_TENSOR(w), RW_TENSOR(o),
    int seqlen, int heads, int nchunk, float scale, int flags, int p_begin,
    int p_end) {
  __local float r_s[TC * K_PAD], k_s[TC * K_PAD], e_s[TC * K_PAD], v_s[TC * BV];
#if KS > 1
  __local float o_s[TC * BV * KS];
#endif
  const int lid = get_local_id(0), ks = lid % KS, jj = lid / KS;
  const int vb = get_group_id(0), bh = get_group_id(1);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int j = vb * BV + jj;
  const bool col_ok = j < V_DIM;

  float S[KR], uu[KR];
  for (int m = 0; m < KR; ++m) {
    const int i = ks + KS * m;
    const bool ok = i < K_DIM && col_ok;
    uu[m] = i < K_DIM ? FCL_LOAD(u, (long)s.h * K_DIM + i) : 0.0f;
    S[m] = (ok && (flags & RW_H0)) ? h0[((long)bh * K_DIM + i) * V_DIM + j] : 0.0f;
  }
  const int p_stop = min(p_end, s.n);
  for (int c = p_begin / TC; c * TC < p_stop; ++c) {
    const int p0 = c * TC, nt = min(TC, p_stop - p0);
    if (flags & RW_CHECKPOINT)
      for (int m = 0; m < KR; ++m) {
        const int i = ks + KS * m;
        if (i < K_DIM && col_ok)
          ck[(((long)bh * nchunk + c) * K_DIM + i) * V_DIM + j] = S[m];
      }
    rw_load_chunk(r_s, K_PAD, K_DIM, r, RW_T(r), 0, s, p0, flags, false, lid, RW_WG);
    rw_load_chunk(k_s, K_PAD, K_DIM, k, RW_T(k), 0, s, p0, flags, false, lid, RW_WG);
    rw_load_chunk(e_s, K_PAD, K_DIM, w, RW_T(w), 0, s, p0, flags, true, lid, RW_WG);
    rw_load_chunk(v_s, BV, V_DIM, v, RW_T(v), vb * BV, s, p0, flags, false, lid, RW_WG);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int tt = 0; tt < nt; ++tt) {
      const float vj = v_s[tt * BV + jj];
      float acc = 0.0f;
      for (int m = 0; m < KR; ++m) {
        const int i = (tt * K_PAD) + ks + KS * m;
        const float kv = k_s[i] * vj;
        acc = fma(r_s[i], fma(uu[m], kv, S[m]), acc);
        S[m] = fma(S[m], e_s[i], kv);
      }
#if KS == 1
      if (col_ok && !(flags & RW_NO_OUTPUT))
        FCL_STORE(o, rw_at(RW_T(o), s, rw_time(p0 + tt, s.n, flags), flags) + j,
                  scale * acc);
#else
      o_s[(tt * BV + jj) * KS + ks] = acc;
#endif
    }
#if KS > 1
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!(flags & RW_NO_OUTPUT))
      for (int e = lid; e < nt * BV; e += RW_WG) {
        const int tt = e / BV, c2 = e - tt * BV;
        if (vb * BV + c2 >= V_DIM) continue;
        float acc = 0.0f;
        for (int q = 0; q < KS; ++q) acc += o_s[e * KS + q];
        FCL_STORE(o, rw_at(RW_T(o), s, rw_time(p0 + tt, s.n, flags), flags) + vb * BV + c2,
                  scale * acc);
      }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (flags & RW_HT)
    for (int m = 0; m < KR; ++m) {
      const int i = ks + KS * m;
      if (i < K_DIM && col_ok) ht[((long)bh * K_DIM + i) * V_DIM + j] = S[m];
    }
}
