/* requires: rwkv6/rwkv6_chunk_state.cl */
/* The chunked RWKV6 products that end in value columns (prepend dtype.cl,
 * rwkv6_common.cl, rwkv6_chunk_common.cl): the forward's output and the
 * backward's dv, one kernel source for both.
 *
 * Per chunk (positions t, s in processing order, states from
 * rwkv6_chunk_state.cl), with the chunk matrix
 *   A[t][s] = sum_i r_t[i] k_s[i] e^{sum of w_i strictly between s and t} (s < t)
 *   A[t][t] = sum_i r_t[i] u[i] k_t[i]
 * the forward writes  o_t  = scale * ((r_t e^{w before t}) S_c + sum_{s<=t} A[t][s] v_s)
 * and the backward    dv_s = (k_s e^{w after s}) D_c + scale * sum_{t>=s} A[t][s] dO_t.
 * A work-group owns one chunk of one sequence-head and BV value columns
 * (RW_STATE_GRAD picks the backward). It walks the keys BK at a time:
 * A accumulates in registers (NA entries a work-item), the state term of
 * the output in registers (NO entries); then the values of the chunk
 * pass once through local memory. A off the diagonal sub-chunks is a
 * product of (r fq) and (k fk) scaled by ex; inside a sub-chunk its spans
 * are running sums of w (rwkv6_chunk_common.cl). */
#define NO FCL_CEIL_DIV(TC * BV, WG) /* output entries per work-item */
/* The loops over a work-item's entries stay loops here (a and o then live
 * in the stack frame): unrolled, sm_90 takes 238 registers a work-item at
 * TC=64 BV=64 (ptxas), one work-group of 256 an SM. */

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_rwkv6_chunk_out(
    const __global fcl_elem *r, const __global fcl_elem *k, const __global fcl_elem *w,
    const __global fcl_elem *u, const __global fcl_elem *x, const __global float *ck,
    __global fcl_elem *y, const __global int *cu, RW_TENSOR(r), RW_TENSOR(k),
    RW_TENSOR(w), RW_TENSOR(x), RW_TENSOR(y), int seqlen, int heads, int nchunk,
    float scale, int flags) {
  /* Local memory: the key tiles and the values after them share pool. */
  __local float pool[FCL_MAX(5 * TC * BK + BK * BV, TC * BV)];
  __local float tot[NSUB * BK], pp[NSUB * BK], ps[NSUB * BK], ex[NSUB * NSUB * BK];
  __local float eg[BK], u_s[BK], a_s[NTRI];
  __local float *r_s = pool, *k_s = pool + TC * BK, *w_s = pool + 2 * TC * BK,
                *rq = pool + 3 * TC * BK, *kq = pool + 4 * TC * BK, *st_s = pool + 5 * TC * BK;
  __local float *x_s = pool;
  const int lid = get_local_id(0);
  const int c = get_group_id(0), j0 = get_group_id(1) * BV, bh = get_group_id(2);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int p0 = c * TC;
  /* Chunks past the sequence's end (varlen) run through with nothing to
   * store: PoCL 3.1 miscompiles the barriers below after an early return
   * here (wrong o with tiles narrower than the work-group). */
  const int nt = max(0, min(TC, s.n - p0));
  const bool grad = (flags & RW_STATE_GRAD) != 0;

  float a[NA], o[NO];
  for (int n = 0; n < NA; ++n) a[n] = 0.0f;
  for (int n = 0; n < NO; ++n) o[n] = 0.0f;
  for (int kt = 0; kt < NKT; ++kt) {
    const int k0 = kt * BK;
    rw_load_chunk(r_s, BK, K_DIM, r, RW_T(r), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(k_s, BK, K_DIM, k, RW_T(k), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(w_s, BK, K_DIM, w, RW_T(w), k0, s, p0, flags, false, lid, WG);
    for (int i = lid; i < BK; i += WG)
      u_s[i] = k0 + i < K_DIM ? FCL_LOAD(u, (long)s.h * K_DIM + k0 + i) : 0.0f;
    rw_load_state(st_s, ck, rw_ck(bh, nchunk, c), k0, BK, j0, BV, nt > 0, lid, WG);
    barrier(CLK_LOCAL_MEM_FENCE);
    rw_chunk_decays(w_s, r_s, k_s, rq, kq, tot, pp, ps, ex, eg, lid);
    /* The step decays e^{w}, for the entries inside a sub-chunk: their
     * decay is the product of the steps strictly between (each product
     * rounds once; a strong decay only makes it 0). */
    for (int e = lid; e < TC * BK; e += WG) w_s[e] = exp(w_s[e]);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* This tile's part of the entries of A the work-item owns (lower
     * triangle entries lid, lid + WG, ...). */
      for (int n = 0; n < NA; ++n) {
      const int e = min(lid + n * WG, NTRI - 1), t = rw_tri_row(e), s2 = e - t * (t + 1) / 2;
      const int I = t / BC, J = s2 / BC;
      float x = 0.0f;
      if (s2 == t) {
        for (int i = 0; i < BK; ++i) x = fma(r_s[t * BK + i] * u_s[i], k_s[s2 * BK + i], x);
      } else if (I == J) {
        for (int i = 0; i < BK; ++i) {
          float f = 1.0f;
          for (int q = s2 + 1; q < t; ++q) f *= w_s[q * BK + i];
          x = fma(r_s[t * BK + i] * k_s[s2 * BK + i], f, x);
        }
      } else {
        __local const float *exij = ex + ((I - 1) * NSUB + J) * BK;
        for (int i = 0; i < BK; ++i) x = fma(rq[t * BK + i] * exij[i], kq[s2 * BK + i], x);
      }
      a[n] += x;
    }
    /* The state term: rows of (r e^{w before t}) or (k e^{w after s}). */
      for (int n = 0; n < NO; ++n) {
      const int e = min(lid + n * WG, TC * BV - 1), t = e / BV, j = e - t * BV;
      __local const float *q = grad ? kq + t * BK : rq + t * BK;
      __local const float *f = (grad ? ps : pp) + (t / BC) * BK;
      float acc = 0.0f;
      for (int i = 0; i < BK; ++i) acc = fma(q[i] * f[i], st_s[i * BV + j], acc);
      o[n] += acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int n = 0; n < NA; ++n)
    if (lid + n * WG < NTRI) a_s[lid + n * WG] = a[n];
  rw_load_chunk(x_s, BV, V_DIM, x, RW_T(x), j0, s, p0, flags, false, lid, WG);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int n = 0; n < NO; ++n) {
    const int e = lid + n * WG, t = e / BV, j = e - t * BV;
    if (e < TC * BV && t < nt && j0 + j < V_DIM) {
      float acc = 0.0f, out;
      if (grad) {
        for (int t2 = t; t2 < nt; ++t2) acc = fma(a_s[RW_TRI(t2, t)], x_s[t2 * BV + j], acc);
        out = fma(scale, acc, o[n]);
      } else {
        for (int s2 = 0; s2 <= t; ++s2) acc = fma(a_s[RW_TRI(t, s2)], x_s[s2 * BV + j], acc);
        out = scale * (o[n] + acc);
      }
      FCL_STORE(y, rw_at(RW_T(y), s, rw_time(p0 + t, s.n, flags), flags) + j0 + j, out);
    }
  }
}
