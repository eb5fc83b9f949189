/* requires: rwkv6/rwkv6_common.cl */
/* RWKV6 backward (prepend dtype.cl, rwkv6_common.cl). Exact for any decay:
 * dw_t[i] = e^{w_t[i]} sum_j dS_t[i][j] S_{t-1}[i][j] is formed from the
 * states themselves, never from differences of long cumulative sums.
 *
 * A work-group owns one (sequence, head) and BVB value columns; work-item i
 * keeps row i of the state (and of its gradient) for those columns.
 *  1. fcl_rwkv6_bwd_forward walks time forward: dr (partial over the
 *     column block), du partials, and the state before every chunk.
 *  2. fcl_rwkv6_bwd_reverse walks chunks backward from dht: it recomputes
 *     the chunk's states from its checkpoint into local memory, then steps
 *     back through them: dk and dw (partial over the column block), dv
 *     (summed over rows on chip) and finally dh0.
 *  3. fcl_rwkv6_bwd_finish sums the column-block partials of dr, dk, dw in a
 *     fixed order and stores them; fcl_rwkv6_bwd_du sums du over blocks and
 *     sequences. No float atomics: runs are bit-identical. */
#ifndef BVB
#define BVB 8
#endif
#define KP K_DIM
#define BW_WG K_DIM

/* Scratch partial index: [vb][token][head][i]. */
inline long rw_part(int vb, long ntok, long tok, int heads, int h, int i) {
  return (((long)vb * ntok + tok) * heads + h) * K_DIM + i;
}

#define BW_ARGS                                                               \
  const __global fcl_elem *r, const __global fcl_elem *k,                     \
      const __global fcl_elem *v, const __global fcl_elem *w,                 \
      const __global fcl_elem *u, const __global fcl_elem *dout,              \
      const __global int *cu, RW_TENSOR(r), RW_TENSOR(k), RW_TENSOR(v),       \
      RW_TENSOR(w), RW_TENSOR(do), int seqlen, int heads, int nchunk,         \
      long ntok, float scale, int flags, int p_begin, int p_end

/* Loads chunk c's r, k, exp(w) rows and v, dO columns into local memory. */
#define BW_LOAD_CHUNK(p0)                                                     \
  do {                                                                        \
    rw_load_chunk(r_s, KP, K_DIM, r, RW_T(r), 0, s, p0, flags, false, i, BW_WG);   \
    rw_load_chunk(k_s, KP, K_DIM, k, RW_T(k), 0, s, p0, flags, false, i, BW_WG);   \
    rw_load_chunk(e_s, KP, K_DIM, w, RW_T(w), 0, s, p0, flags, true, i, BW_WG);    \
    rw_load_chunk(v_s, BVB, V_DIM, v, RW_T(v), vb * BVB, s, p0, flags, false, i,   \
                  BW_WG);                                                     \
    rw_load_chunk(d_s, BVB, V_DIM, dout, RW_T(do), vb * BVB, s, p0, flags, false, \
                  i, BW_WG);                                                  \
  } while (0)

__kernel __attribute__((reqd_work_group_size(BW_WG, 1, 1)))
void fcl_rwkv6_bwd_forward(BW_ARGS, const __global float *h0, __global float *ck,
                           __global float *drp, __global float *dup,
                           __global float *state_out) {
  __local float r_s[TC * KP], k_s[TC * KP], e_s[TC * KP];
  __local float v_s[TC * BVB], d_s[TC * BVB];
  const int i = get_local_id(0), vb = get_group_id(0), bh = get_group_id(1);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const float ui = FCL_LOAD(u, (long)s.h * K_DIM + i);
  float S[BVB], du = 0.0f;
  for (int jj = 0; jj < BVB; ++jj) {
    const int j = vb * BVB + jj;
    S[jj] = (j < V_DIM && (flags & RW_H0)) ? h0[((long)bh * K_DIM + i) * V_DIM + j]
                                           : 0.0f;
  }
  const int p_stop = min(p_end, s.n);
  for (int c = p_begin / TC; c * TC < p_stop; ++c) {
    const int p0 = c * TC, nt = min(TC, p_stop - p0);
    for (int jj = 0; jj < BVB; ++jj)
      if (vb * BVB + jj < V_DIM)
        ck[(((long)bh * nchunk + c) * K_DIM + i) * V_DIM + vb * BVB + jj] = S[jj];
    BW_LOAD_CHUNK(p0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int tt = 0; tt < nt; ++tt) {
      const float ri = r_s[tt * KP + i], ki = k_s[tt * KP + i], ei = e_s[tt * KP + i];
      float dov = 0.0f, doS = 0.0f; /* dO_t . v_t and dO_t . S_{t-1}[i] */
      for (int jj = 0; jj < BVB; ++jj) {
        const float dj = d_s[tt * BVB + jj], vj = v_s[tt * BVB + jj];
        dov = fma(dj, vj, dov);
        doS = fma(dj, S[jj], doS);
        S[jj] = fma(S[jj], ei, ki * vj);
      }
      const long tok = s.tok0 + rw_time(p0 + tt, s.n, flags);
      drp[rw_part(vb, ntok, tok, heads, s.h, i)] = scale * fma(ui * ki, dov, doS);
      du = fma(ri * ki, dov, du);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const long du_at = rw_part(vb, get_num_groups(1) / heads, s.b, heads, s.h, i);
  dup[du_at] = scale * du + ((flags & RW_ACCUMULATE) ? dup[du_at] : 0.0f);
  if (flags & RW_HT) /* the state after this segment, for the next one */
    for (int jj = 0; jj < BVB; ++jj) {
      const int j = vb * BVB + jj;
      if (j < V_DIM) state_out[((long)bh * K_DIM + i) * V_DIM + j] = S[jj];
    }
}

__kernel __attribute__((reqd_work_group_size(BW_WG, 1, 1)))
void fcl_rwkv6_bwd_reverse(BW_ARGS, const __global float *dht,
                           const __global float *ck, __global float *dkp,
                           __global float *dwp, __global fcl_elem *dv,
                           RW_TENSOR(dv), __global float *dh0) {
  __local float r_s[TC * KP], k_s[TC * KP], e_s[TC * KP];
  __local float v_s[TC * BVB], d_s[TC * BVB];
  __local float st_s[TC * BVB * KP]; /* S_{t-1}, row-fastest */
  __local float dv_s[TC * BVB * KP]; /* dv partial per row   */
  const int i = get_local_id(0), vb = get_group_id(0), bh = get_group_id(1);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const float ui = FCL_LOAD(u, (long)s.h * K_DIM + i);
  float dS[BVB];
  for (int jj = 0; jj < BVB; ++jj) {
    const int j = vb * BVB + jj;
    dS[jj] = (j < V_DIM && (flags & RW_DHT)) ? dht[((long)bh * K_DIM + i) * V_DIM + j]
                                             : 0.0f;
  }
  const int p_stop = min(p_end, s.n);
  for (int c = (p_stop - 1) / TC; c >= p_begin / TC && p_stop > 0; --c) {
    const int p0 = c * TC, nt = min(TC, p_stop - p0);
    BW_LOAD_CHUNK(p0);
    barrier(CLK_LOCAL_MEM_FENCE);
    float S[BVB];
    for (int jj = 0; jj < BVB; ++jj) {
      const int j = vb * BVB + jj;
      S[jj] = j < V_DIM ? ck[(((long)bh * nchunk + c) * K_DIM + i) * V_DIM + j] : 0.0f;
    }
    for (int tt = 0; tt < nt; ++tt)
      for (int jj = 0; jj < BVB; ++jj) {
        st_s[(tt * BVB + jj) * KP + i] = S[jj];
        S[jj] = fma(S[jj], e_s[tt * KP + i], k_s[tt * KP + i] * v_s[tt * BVB + jj]);
      }
    for (int tt = nt - 1; tt >= 0; --tt) {
      const float ri = r_s[tt * KP + i], ki = k_s[tt * KP + i], ei = e_s[tt * KP + i];
      const float rui = scale * ri * ui;
      float dov = 0.0f, dk = 0.0f, dw = 0.0f;
      for (int jj = 0; jj < BVB; ++jj) {
        const float dj = d_s[tt * BVB + jj], vj = v_s[tt * BVB + jj];
        dov = fma(dj, vj, dov);
        dk = fma(dS[jj], vj, dk);
        dw = fma(dS[jj], st_s[(tt * BVB + jj) * KP + i], dw);
        dv_s[(tt * BVB + jj) * KP + i] = fma(dS[jj], ki, rui * ki * dj);
        dS[jj] = fma(dS[jj], ei, scale * ri * dj);
      }
      const long tok = s.tok0 + rw_time(p0 + tt, s.n, flags);
      dkp[rw_part(vb, ntok, tok, heads, s.h, i)] = fma(rui, dov, dk);
      dwp[rw_part(vb, ntok, tok, heads, s.h, i)] = ei * dw;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = i; e < nt * BVB; e += BW_WG) {
      const int tt = e / BVB, jj = e - tt * BVB, j = vb * BVB + jj;
      if (j >= V_DIM) continue;
      float acc = 0.0f;
      for (int q = 0; q < K_DIM; ++q) acc += dv_s[e * KP + q];
      FCL_STORE(dv, rw_at(RW_T(dv), s, rw_time(p0 + tt, s.n, flags), flags) + j, acc);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (flags & RW_DH0)
    for (int jj = 0; jj < BVB; ++jj) {
      const int j = vb * BVB + jj;
      if (j < V_DIM) dh0[((long)bh * K_DIM + i) * V_DIM + j] = dS[jj];
    }
}

/* One work-item per (token, head, i): dr, dk, dw from their partials. */
__kernel void fcl_rwkv6_bwd_finish(
    const __global float *drp, const __global float *dkp,
    const __global float *dwp, __global fcl_elem *dr, __global fcl_elem *dk,
    __global fcl_elem *dw, RW_TENSOR(dr), RW_TENSOR(dk), RW_TENSOR(dw),
    int seqlen, int heads, int nvb, long ntok, int flags) {
  const int i = get_global_id(0);
  const long tok = get_global_id(1);
  const int h = get_global_id(2);
  if (i >= K_DIM || tok >= ntok) return;
  float a = 0.0f, b = 0.0f, c = 0.0f;
  for (int vb = 0; vb < nvb; ++vb) {
    const long x = rw_part(vb, ntok, tok, heads, h, i);
    a += drp[x];
    b += dkp[x];
    c += dwp[x];
  }
  rw_seq s;
  s.h = h;
  s.b = (flags & RW_VARLEN) ? 0 : (int)(tok / seqlen);
  s.tok0 = 0;
  const int t = (flags & RW_VARLEN) ? (int)tok : (int)(tok % seqlen);
  FCL_STORE(dr, rw_at(RW_T(dr), s, t, flags) + i, a);
  FCL_STORE(dk, rw_at(RW_T(dk), s, t, flags) + i, b);
  FCL_STORE(dw, rw_at(RW_T(dw), s, t, flags) + i, c);
}

/* One work-item per (head, i): du summed over column blocks and sequences. */
__kernel void fcl_rwkv6_bwd_du(const __global float *dup, __global fcl_elem *du,
                               int heads, int nvb, int nseq) {
  const int i = get_global_id(0), h = get_global_id(1);
  if (i >= K_DIM) return;
  float acc = 0.0f;
  for (int vb = 0; vb < nvb; ++vb)
    for (int b = 0; b < nseq; ++b) acc += dup[rw_part(vb, nseq, b, heads, h, i)];
  FCL_STORE(du, (long)h * K_DIM + i, acc);
}
