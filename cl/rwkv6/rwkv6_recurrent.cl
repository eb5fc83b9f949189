/* requires: rwkv6/rwkv6_common.cl */
/* RWKV6 fused recurrent forward (prepend dtype.cl, rwkv6_common.cl).
 *
 * A work-group owns one (sequence, head) and BV = VS * VC value columns. Its
 * KS x VS work-items each keep a KR x VC block of the state in registers:
 * rows ks*KR .. ks*KR+KR-1, columns vs*VC .. vs*VC+VC-1. r, k, exp(w) and v
 * pass through local memory TC steps at a time, the next chunk's loads
 * issued into registers before the current chunk is computed so that their
 * latency overlaps the arithmetic; each step costs a work-item
 * (3 KR + VC) local reads for 3 KR VC multiply-adds, so wider blocks mean
 * fewer local-memory instructions per flop. With KS > 1 the partial outputs
 * of the KS row blocks of a column are summed once per chunk, in order. */
#ifndef KS
#define KS 1
#endif
#ifndef VS
#define VS 32
#endif
#ifndef VC
#define VC 1
#endif
#define KR ((K_DIM + KS - 1) / KS)
#define K_PAD (KS * KR)
#define BV (VS * VC)
#define RW_WG (KS * VS)
#define NS_K FCL_CEIL_DIV(TC * K_PAD, RW_WG) /* prefetch slots per K operand */
#define NS_V FCL_CEIL_DIV(TC * BV, RW_WG)

/* Element e of a chunk's [TC][ld] tile, for the chunk starting at p0, as
 * raw bits (0 where the position or column does not exist). base is the
 * offset of time step 0 of the sequence's head (rw_at(..., 0, ...)), so
 * step t is at base + t * ss; ld is a compile-time constant. */
inline fcl_raw rw_fetch(const __global fcl_elem *src, long base, long ss, int n,
                        bool rev, int e, int ld, int dim, int col0, int p0,
                        int p_stop) {
  const int tt = e / ld, c = e - tt * ld, p = p0 + tt;
  if (e >= TC * ld || p >= p_stop || col0 + c >= dim) return 0;
  return FCL_LOAD_RAW(src, base + (long)(rev ? n - 1 - p : p) * ss + col0 + c);
}

__kernel __attribute__((reqd_work_group_size(RW_WG, 1, 1)))
void fcl_rwkv6_fwd_recurrent(
    const __global fcl_elem *r, const __global fcl_elem *k,
    const __global fcl_elem *v, const __global fcl_elem *w,
    const __global fcl_elem *u, const __global float *h0, __global fcl_elem *o,
    __global float *ht, const __global int *cu,
    RW_TENSOR(r), RW_TENSOR(k), RW_TENSOR(v), RW_TENSOR(w), RW_TENSOR(o),
    int seqlen, int heads, float scale, int flags, int p_begin,
    int p_end) {
  __local float r_s[TC * K_PAD], k_s[TC * K_PAD], e_s[TC * K_PAD], v_s[TC * BV];
#if KS > 1
  __local float o_s[TC * KS * BV];
#endif
  const int lid = get_local_id(0), ks = lid % KS, vs = lid / KS;
  const int vb = get_group_id(0), bh = get_group_id(1);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int i0 = ks * KR, jl0 = vs * VC, j0 = vb * BV + jl0;

  float S[KR][VC], uu[KR];
  FCL_UNROLL
  for (int m = 0; m < KR; ++m) {
    const int i = i0 + m;
    uu[m] = i < K_DIM ? FCL_LOAD(u, (long)s.h * K_DIM + i) : 0.0f;
    FCL_UNROLL
    for (int n = 0; n < VC; ++n) {
      const bool ok = i < K_DIM && j0 + n < V_DIM && (flags & RW_H0);
      S[m][n] = ok ? h0[((long)bh * K_DIM + i) * V_DIM + j0 + n] : 0.0f;
    }
  }
  const int p_stop = min(p_end, s.n);
  fcl_raw pr[NS_K], pk[NS_K], pw[NS_K], pv[NS_V];
  const bool rev = (flags & RW_REVERSE) != 0;
  const long rb = rw_at(RW_T(r), s, 0, flags), kb = rw_at(RW_T(k), s, 0, flags);
  const long wb = rw_at(RW_T(w), s, 0, flags), vbase = rw_at(RW_T(v), s, 0, flags);
#define RW_PREFETCH(p0)                                                         \
  do {                                                                          \
    FCL_UNROLL for (int n = 0; n < NS_K; ++n) {                                 \
      const int e = lid + n * RW_WG;                                            \
      pr[n] = rw_fetch(r, rb, r_ss, s.n, rev, e, K_PAD, K_DIM, 0, p0, p_stop);   \
      pk[n] = rw_fetch(k, kb, k_ss, s.n, rev, e, K_PAD, K_DIM, 0, p0, p_stop);   \
      pw[n] = rw_fetch(w, wb, w_ss, s.n, rev, e, K_PAD, K_DIM, 0, p0, p_stop);   \
    }                                                                           \
    FCL_UNROLL for (int n = 0; n < NS_V; ++n)                                   \
      pv[n] = rw_fetch(v, vbase, v_ss, s.n, rev, lid + n * RW_WG, BV, V_DIM,     \
                       vb * BV, p0, p_stop);                                    \
  } while (0)
  int c = p_begin / TC;
  if (c * TC < p_stop) RW_PREFETCH(c * TC);
  for (; c * TC < p_stop; ++c) {
    const int p0 = c * TC, nt = min(TC, p_stop - p0);
    FCL_UNROLL
    for (int n = 0; n < NS_K; ++n) {
      const int e = lid + n * RW_WG;
      if (e < TC * K_PAD) {
        r_s[e] = FCL_RAW_F32(pr[n]);
        k_s[e] = FCL_RAW_F32(pk[n]);
        e_s[e] = exp(FCL_RAW_F32(pw[n]));
      }
    }
    FCL_UNROLL
    for (int n = 0; n < NS_V; ++n)
      if (lid + n * RW_WG < TC * BV) v_s[lid + n * RW_WG] = FCL_RAW_F32(pv[n]);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (p0 + TC < p_stop) RW_PREFETCH(p0 + TC); /* in flight during the steps */
    for (int tt = 0; tt < nt; ++tt) {
      float vv[VC], acc[VC];
      FCL_UNROLL
      for (int n = 0; n < VC; ++n) {
        vv[n] = v_s[tt * BV + jl0 + n];
        acc[n] = 0.0f;
      }
      FCL_UNROLL
      for (int m = 0; m < KR; ++m) {
        const int i = tt * K_PAD + i0 + m;
        const float ri = r_s[i], ki = k_s[i], ei = e_s[i], rui = ri * uu[m];
        FCL_UNROLL
        for (int n = 0; n < VC; ++n) {
          const float kv = ki * vv[n];
          acc[n] = fma(ri, S[m][n], fma(rui, kv, acc[n]));
          S[m][n] = fma(S[m][n], ei, kv);
        }
      }
#if KS == 1
      const long at = rw_at(RW_T(o), s, rw_time(p0 + tt, s.n, flags), flags);
      FCL_UNROLL
      for (int n = 0; n < VC; ++n)
        if (j0 + n < V_DIM) FCL_STORE(o, at + j0 + n, scale * acc[n]);
#else
      FCL_UNROLL
      for (int n = 0; n < VC; ++n) o_s[(tt * KS + ks) * BV + jl0 + n] = acc[n];
#endif
    }
#if KS > 1
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = lid; e < nt * BV; e += RW_WG) {
      const int tt = e / BV, jj = e - tt * BV;
      if (vb * BV + jj >= V_DIM) continue;
      float acc = 0.0f;
      FCL_UNROLL
      for (int q = 0; q < KS; ++q) acc += o_s[(tt * KS + q) * BV + jj];
      FCL_STORE(o, rw_at(RW_T(o), s, rw_time(p0 + tt, s.n, flags), flags) + vb * BV + jj,
                scale * acc);
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (flags & RW_HT) {
    FCL_UNROLL
    for (int m = 0; m < KR; ++m)
      FCL_UNROLL
      for (int n = 0; n < VC; ++n)
        if (i0 + m < K_DIM && j0 + n < V_DIM)
          ht[((long)bh * K_DIM + i0 + m) * V_DIM + j0 + n] = S[m][n];
  }
}
