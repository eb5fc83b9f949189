/* requires: rwkv7/rwkv7_recurrent.cl */
/* RWKV7 fused recurrent backward. With s_t the state after step t (a
 * column: every column j is its own recurrence), M_t = D_t + b_t a_t^T,
 * D_t = diag(exp(w_t)), and g_t the gradient of the loss in s_t (dht, plus
 * what later steps and o_t send back):
 *   g_t     = scale r_t do_t + M_{t+1}^T g_{t+1}
 *   dr_t    = scale sum_j do_t[j] s_t[:, j]
 *   dk_t    = sum_j g_t[:, j] v_t[j]           dv_t[j] = k_t . g_t[:, j]
 *   dw_t    = exp(w_t) * sum_j g_t[:, j] * s_{t-1}[:, j]
 *   db_t    = sum_j g_t[:, j] (a_t . s_{t-1}[:, j])
 *   da_t    = sum_j s_{t-1}[:, j] (b_t . g_t[:, j])
 *   dh0     = M_1^T g_1
 * exact for any decay: every term is formed from the states themselves.
 *
 * Three kernels, the work-group layout of the forward with VS = 1 (KS
 * work-items a column block of VC columns, each KR rows):
 *  1. fcl_rwkv7_fwd_recurrent with RW7_CKPT (rwkv7_recurrent.cl): the state
 *     before every chunk of TC positions, in ck;
 *  2. fcl_rwkv7_bwd_reverse walks chunks backward from dht: recomputes the
 *     chunk's states from its checkpoint into local memory (each work-item
 *     its own elements) with dr on the way, then steps back through them:
 *     dw, dk, da, db (partial over the column block), dv (summed over rows
 *     on chip) and finally dh0;
 *  3. fcl_rwkv7_bwd_finish sums the column blocks' partials in a fixed
 *     order and stores them. No float atomics: runs are bit-identical.
 * The host walks the sequences in segments of SEG positions, a launch of 2
 * then 3 each (the gradient of the state carried between them), so the
 * partials take room for one segment only: slot b * SEG + p - p_begin
 * holds position p of sequence b. */

/* Partial q (RW7_DR ...) of column block vb: [q][vb][slot][head][i]. */
inline long rw7_part(int q, int vb, int nvb, long nslot, long slot, int heads, int h, int i) {
  return ((((long)q * nvb + vb) * nslot + slot) * heads + h) * K_DIM + i;
}

__kernel __attribute__((reqd_work_group_size(RW7_WG, 1, 1)))
void fcl_rwkv7_bwd_reverse(RW7_INPUTS, const __global fcl_elem *dout, RW_TENSOR(do),
                           int nchunk, int seg, long nslot, const __global float *dht,
                           const __global float *ck, __global float *part,
                           __global fcl_elem *dv, RW_TENSOR(dv), __global float *dh0) {
  __local float r_s[TC * K_PAD], e_s[TC * K_PAD], k_s[TC * K_PAD], a_s[TC * K_PAD],
      b_s[TC * K_PAD], v_s[TC * BV], d_s[TC * BV], sa_s[TC * BV];
  __local float st_s[TC * K_PAD * BV]; /* s_{t-1}, each work-item's own elements */
  RW7_RED_LOCAL;
  const int lid = get_local_id(0), ks = lid % KS, vs = lid / KS;
  const int vb = get_group_id(0), bh = get_group_id(1), nvb = get_num_groups(0);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int i0 = ks * KR, jl0 = vs * VC, j0 = vb * BV + jl0;

  float g[KR][VC];
  FCL_UNROLL
  for (int m = 0; m < KR; ++m)
    FCL_UNROLL
    for (int n = 0; n < VC; ++n) {
      const bool ok = i0 + m < K_DIM && j0 + n < V_DIM && (flags & RW_DHT);
      g[m][n] = ok ? dht[RW7_ST(bh, i0 + m, j0 + n)] : 0.0f;
    }
  const int p_stop = min(p_end, s.n);
  for (int c = (p_stop - 1) / TC; c >= p_begin / TC && p_stop > 0; --c) {
    const int p0 = c * TC, nt = min(TC, p_stop - p0);
    RW7_LOAD_CHUNK(p0);
    rw_load_chunk(d_s, BV, V_DIM, dout, RW_T(do), vb * BV, s, p0, flags, false, lid, RW7_WG);
    float S[KR][VC];
    FCL_UNROLL
    for (int m = 0; m < KR; ++m)
      FCL_UNROLL
      for (int n = 0; n < VC; ++n)
        S[m][n] = i0 + m < K_DIM && j0 + n < V_DIM ? ck[RW7_CK(bh, c, i0 + m, j0 + n)] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    /* The chunk's states again, and dr. */
    for (int tt = 0; tt < nt; ++tt) {
      float x[2 * VC];
      FCL_UNROLL
      for (int n = 0; n < VC; ++n) {
        x[n] = 0.0f;
        FCL_UNROLL
        for (int m = 0; m < KR; ++m) x[n] = fma(a_s[tt * K_PAD + i0 + m], S[m][n], x[n]);
      }
      RW7_COLSUM(x, 1);
      if (ks == 0)
        FCL_UNROLL
        for (int n = 0; n < VC; ++n) sa_s[tt * BV + jl0 + n] = x[n];
      const long slot = (long)s.b * seg + p0 + tt - p_begin;
      FCL_UNROLL
      for (int m = 0; m < KR; ++m) {
        const int i = tt * K_PAD + i0 + m;
        const float em = e_s[i], km = k_s[i], bm = b_s[i];
        float dr = 0.0f;
        FCL_UNROLL
        for (int n = 0; n < VC; ++n) {
          st_s[i * BV + jl0 + n] = S[m][n];
          S[m][n] = fma(em, S[m][n], fma(bm, x[n], km * v_s[tt * BV + jl0 + n]));
          dr = fma(d_s[tt * BV + jl0 + n], S[m][n], dr);
        }
        if (i0 + m < K_DIM)
          part[rw7_part(RW7_DR, vb, nvb, nslot, slot, heads, s.h, i0 + m)] = scale * dr;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* sa_s */
    for (int tt = nt - 1; tt >= 0; --tt) {
      const int t = rw_time(p0 + tt, s.n, flags);
      /* g: the gradient in s_t, o_t's term added; then x[0..VC) = b^T g,
       * x[VC..2VC) = k^T g (dv). */
      float x[2 * VC];
      FCL_UNROLL
      for (int n = 0; n < 2 * VC; ++n) x[n] = 0.0f;
      FCL_UNROLL
      for (int m = 0; m < KR; ++m) {
        const int i = tt * K_PAD + i0 + m;
        const float srm = scale * r_s[i], bm = b_s[i], km = k_s[i];
        FCL_UNROLL
        for (int n = 0; n < VC; ++n) {
          g[m][n] = fma(srm, d_s[tt * BV + jl0 + n], g[m][n]);
          x[n] = fma(bm, g[m][n], x[n]);
          x[VC + n] = fma(km, g[m][n], x[VC + n]);
        }
      }
      RW7_COLSUM(x, 2);
      if (ks == 0) {
        const long at = rw_at(RW_T(dv), s, t, flags);
        FCL_UNROLL
        for (int n = 0; n < VC; ++n)
          if (j0 + n < V_DIM) FCL_STORE(dv, at + j0 + n, x[VC + n]);
      }
      const long slot = (long)s.b * seg + p0 + tt - p_begin;
      FCL_UNROLL
      for (int m = 0; m < KR; ++m) {
        const int i = tt * K_PAD + i0 + m;
        const float em = e_s[i], am = a_s[i];
        float dk = 0.0f, dw = 0.0f, da = 0.0f, db = 0.0f;
        FCL_UNROLL
        for (int n = 0; n < VC; ++n) {
          const float gm = g[m][n], sp = st_s[i * BV + jl0 + n];
          dk = fma(gm, v_s[tt * BV + jl0 + n], dk);
          dw = fma(gm, sp, dw);
          db = fma(gm, sa_s[tt * BV + jl0 + n], db);
          da = fma(sp, x[n], da);
          g[m][n] = fma(em, gm, am * x[n]);
        }
        if (i0 + m < K_DIM) {
          const int ii = i0 + m;
          part[rw7_part(RW7_DK, vb, nvb, nslot, slot, heads, s.h, ii)] = dk;
          part[rw7_part(RW7_DW, vb, nvb, nslot, slot, heads, s.h, ii)] = em * dw;
          part[rw7_part(RW7_DA, vb, nvb, nslot, slot, heads, s.h, ii)] = da;
          part[rw7_part(RW7_DB, vb, nvb, nslot, slot, heads, s.h, ii)] = db;
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (flags & RW_DH0)
    FCL_UNROLL
    for (int m = 0; m < KR; ++m)
      FCL_UNROLL
      for (int n = 0; n < VC; ++n)
        if (i0 + m < K_DIM && j0 + n < V_DIM) dh0[RW7_ST(bh, i0 + m, j0 + n)] = g[m][n];
}

/* One work-item per (i, slot, head) of a segment: dr, dw, dk, da, db of
 * its position from their column blocks' partials, summed in order. */
__kernel void fcl_rwkv7_bwd_finish(const __global float *part, __global fcl_elem *dr,
                                   __global fcl_elem *dw, __global fcl_elem *dk,
                                   __global fcl_elem *da, __global fcl_elem *db,
                                   RW_TENSOR(dr), RW_TENSOR(dw), RW_TENSOR(dk), RW_TENSOR(da),
                                   RW_TENSOR(db), const __global int *cu, int seqlen,
                                   int heads, int nvb, int seg, long nslot, int p_begin,
                                   int p_end, int flags) {
  const int i = get_global_id(0), h = get_global_id(2);
  const long slot = get_global_id(1);
  if (i >= K_DIM || slot >= nslot) return;
  const int b = (int)(slot / seg), p = p_begin + (int)(slot - (long)b * seg);
  const rw_seq s = rw_sequence(b * heads + h, heads, seqlen, cu, flags);
  if (p >= min(p_end, s.n)) return;
  float acc[RW7_NPART];
  for (int q = 0; q < RW7_NPART; ++q) {
    acc[q] = 0.0f;
    for (int vb = 0; vb < nvb; ++vb) acc[q] += part[rw7_part(q, vb, nvb, nslot, slot, heads, h, i)];
  }
  const int t = rw_time(p, s.n, flags);
  FCL_STORE(dr, rw_at(RW_T(dr), s, t, flags) + i, acc[RW7_DR]);
  FCL_STORE(dw, rw_at(RW_T(dw), s, t, flags) + i, acc[RW7_DW]);
  FCL_STORE(dk, rw_at(RW_T(dk), s, t, flags) + i, acc[RW7_DK]);
  FCL_STORE(da, rw_at(RW_T(da), s, t, flags) + i, acc[RW7_DA]);
  FCL_STORE(db, rw_at(RW_T(db), s, t, flags) + i, acc[RW7_DB]);
}
