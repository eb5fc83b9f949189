/* requires: rwkv7/rwkv7_common.cl */
/* The chunked RWKV7 forward, part 1: every chunk's factors, all chunks in
 * parallel (rwkv7_chunk_state.cl then walks the states, rwkv7_chunk_out.cl
 * writes o).
 *
 * Derivation. Within a chunk of TC positions t = 1..TC (processing order)
 * from the state S_0 before it, with D_t = diag(e^{w_t}):
 *   S_t = D_t S_{t-1} + b_t x_t^T + k_t v_t^T,   x_t = S_{t-1}^T a_t.
 * Let G_t = w_1 + ... + w_t (per key row, G_0 = 0) and
 *   r~_t = r_t e^{G_t},  a~_t = a_t e^{G_{t-1}},  b^_s = b_s e^{-G_s},
 *   k^_s = k_s e^{-G_s}, b-_s = b_s e^{G_TC - G_s}, k-_s = k_s e^{G_TC - G_s}.
 * Unrolled, S_t = e^{G_t} S_0 + sum_{s<=t} e^{G_t - G_s} (b_s x_s^T + k_s v_s^T),
 * so with the chunk matrices
 *   A_ab[t][s] = a~_t . b^_s,  A_ak[t][s] = a~_t . k^_s   (s < t)
 *   A_qb[t][s] = r~_t . b^_s,  A_qk[t][s] = r~_t . k^_s   (s <= t)
 * the rows x_t^T of X satisfy (I - A_ab) X = A~ S_0 + A_ak V: with
 * T = (I - A_ab)^{-1} (unit lower triangular, by forward substitution) and
 * the WY factors w = T A~ ([TC][K]) and u = M V, M = T A_ak,
 *   X = w S_0 + u,
 *   o   = scale (R~ S_0 + A_qb X + A_qk V) = scale (Q S_0 + P V),
 *   S_TC = diag(e^{G_TC}) S_0 + B-^T X + K-^T V = E S_0 + F V,
 * with Q = R~ + A_qb w, P = A_qk + A_qb M, E = diag(e^{G_TC}) + B-^T w and
 * F = K-^T + B-^T M. Each chunk's Q, w, P, F, E (x, below) depend on its
 * inputs alone; the states are then a walk S <- E S + F V over the chunks
 * and the outputs a product per chunk, both over value columns
 * independently. Every product above is a sum of terms whose true decay
 * e^{G_t - G_s} (s <= t) is at most 1, but its factors reach
 * e^{+-TC |min w|}: the plan takes this form only where decay_lower_bound
 * keeps TC |bound| within f32's range (src/rwkv7/rwkv7_chunk_variants.c),
 * the recurrent kernel otherwise.
 *
 * A work-group owns one chunk of one sequence-head; keys pass through local
 * memory BK columns at a time (the chunk matrices sum over them). Chunks
 * past a sequence's end run through on zeros (w = 0: no decay), unused. */
#ifndef BK
#define BK 32 /* key columns a tile */
#endif
#ifndef WG
#define WG 64 /* work-items of the chunk kernels */
#endif
#define NE FCL_CEIL_DIV(TC * TC, WG) /* chunk-matrix entries a work-item */
#define NR FCL_CEIL_DIV(TC, WG)      /* entries of a row of T a work-item */
#define NQ FCL_CEIL_DIV(TC * BK, WG) /* tile entries a work-item */
#define NKT FCL_CEIL_DIV(K_DIM, BK)

/* One chunk's factors in the scratch buffer x (f32, per sequence-head and
 * chunk): Q [TC][K], w [TC][K], P [TC][TC], F [K][TC], E [K][K]. */
#define RW7_XQ 0
#define RW7_XW (TC * K_DIM)
#define RW7_XP (2 * TC * K_DIM)
#define RW7_XF (RW7_XP + TC * TC)
#define RW7_XE (RW7_XF + K_DIM * TC)
#define RW7_XN (RW7_XE + K_DIM * K_DIM)
#define RW7_X(bh, c) (((long)(bh) * nchunk + (c)) * RW7_XN)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_rwkv7_chunk_prep(const __global fcl_elem *r, const __global fcl_elem *w,
                          const __global fcl_elem *k, const __global fcl_elem *a,
                          const __global fcl_elem *b, __global float *x,
                          const __global int *cu, RW_TENSOR(r), RW_TENSOR(w), RW_TENSOR(k),
                          RW_TENSOR(a), RW_TENSOR(b), int seqlen, int heads, int nchunk,
                          int flags) {
  __local float r_s[TC * BK], w_s[TC * BK], k_s[TC * BK], a_s[TC * BK], b_s[TC * BK];
  __local float l_s[TC * TC], m_s[TC * TC], q_s[TC * TC], g_s[BK];
  const int lid = get_local_id(0), c = get_group_id(0), bh = get_group_id(1);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int p0 = c * TC;
  __global float *xc = x + RW7_X(bh, c);

  /* 1. The chunk matrices, summed over key tiles: A_ab, A_ak, A_qb, A_qk. */
  float mab[NE], mak[NE], mqb[NE], mqk[NE];
  for (int n = 0; n < NE; ++n) mab[n] = mak[n] = mqb[n] = mqk[n] = 0.0f;
  for (int k0 = 0; k0 < K_DIM; k0 += BK) {
    rw_load_chunk(r_s, BK, K_DIM, r, RW_T(r), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(w_s, BK, K_DIM, w, RW_T(w), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(k_s, BK, K_DIM, k, RW_T(k), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(a_s, BK, K_DIM, a, RW_T(a), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(b_s, BK, K_DIM, b, RW_T(b), k0, s, p0, flags, false, lid, WG);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = lid; i < BK; i += WG) { /* r~, a~, k^, b^: a running sum per column */
      float g = 0.0f;
      for (int t = 0; t < TC; ++t) {
        const int at = t * BK + i;
        a_s[at] *= exp(g);
        g += w_s[at];
        const float ep = exp(g), en = exp(-g);
        r_s[at] *= ep, k_s[at] *= en, b_s[at] *= en;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int n = 0; n < NE; ++n) {
      const int e = min(lid + n * WG, TC * TC - 1), t = e / TC, s2 = e - t * TC;
      if (s2 <= t) { /* above the diagonal the factors do not cancel */
        float ab = 0.0f, ak = 0.0f, qb = 0.0f, qk = 0.0f;
        for (int i = 0; i < BK; ++i) {
          const float at = a_s[t * BK + i], rt = r_s[t * BK + i];
          const float bs = b_s[s2 * BK + i], ks = k_s[s2 * BK + i];
          ab = fma(at, bs, ab), ak = fma(at, ks, ak);
          qb = fma(rt, bs, qb), qk = fma(rt, ks, qk);
        }
        mab[n] += ab, mak[n] += ak, mqb[n] += qb, mqk[n] += qk;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int n = 0; n < NE; ++n) {
    const int e = lid + n * WG, t = e / TC, s2 = e - t * TC;
    if (e < TC * TC) {
      l_s[e] = s2 < t ? mab[n] : 0.0f;
      m_s[e] = s2 < t ? mak[n] : 0.0f;
      q_s[e] = s2 <= t ? mqb[n] : 0.0f;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  /* 2. T = (I - A_ab)^{-1} in place of A_ab (its strictly lower part), a
   * row at a time: T[t][m] = A_ab[t][m] + sum_{m<q<t} A_ab[t][q] T[q][m]. */
  for (int t = 1; t < TC; ++t) {
    float y[NR];
    for (int n = 0; n < NR; ++n) {
      const int m = min(lid + n * WG, TC - 1);
      float acc = l_s[t * TC + m];
      for (int q = m + 1; q < t; ++q) acc = fma(l_s[t * TC + q], l_s[q * TC + m], acc);
      y[n] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int n = 0; n < NR; ++n)
      if (lid + n * WG < t) l_s[t * TC + lid + n * WG] = y[n];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  /* M = T A_ak in place of A_ak (strictly lower), then P = A_qk + A_qb M. */
  for (int n = 0; n < NE; ++n) {
    const int e = min(lid + n * WG, TC * TC - 1), t = e / TC, s2 = e - t * TC;
    float acc = m_s[e];
    for (int q = s2 + 1; q < t; ++q) acc = fma(l_s[t * TC + q], m_s[q * TC + s2], acc);
    mab[n] = acc;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int n = 0; n < NE; ++n)
    if (lid + n * WG < TC * TC) m_s[lid + n * WG] = mab[n];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int n = 0; n < NE; ++n) {
    const int e = lid + n * WG, t = e / TC, s2 = e - t * TC;
    if (e < TC * TC) {
      float acc = s2 <= t ? mqk[n] : 0.0f;
      for (int q = s2 + 1; q <= t; ++q) acc = fma(q_s[t * TC + q], m_s[q * TC + s2], acc);
      xc[RW7_XP + e] = acc;
    }
  }

  /* 3. By key tiles: w = T A~ and Q = R~ + A_qb w (w also to x, for E). */
  __local float *wt_s = k_s;
  for (int k0 = 0; k0 < K_DIM; k0 += BK) {
    rw_load_chunk(r_s, BK, K_DIM, r, RW_T(r), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(w_s, BK, K_DIM, w, RW_T(w), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(a_s, BK, K_DIM, a, RW_T(a), k0, s, p0, flags, false, lid, WG);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = lid; i < BK; i += WG) {
      float g = 0.0f;
      for (int t = 0; t < TC; ++t) {
        const int at = t * BK + i;
        a_s[at] *= exp(g);
        g += w_s[at];
        r_s[at] *= exp(g);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int n = 0; n < NQ; ++n) {
      const int e = min(lid + n * WG, TC * BK - 1), t = e / BK, i = e - t * BK;
      float acc = a_s[e];
      for (int m = 0; m < t; ++m) acc = fma(l_s[t * TC + m], a_s[m * BK + i], acc);
      if (lid + n * WG < TC * BK) {
        wt_s[e] = acc;
        if (k0 + i < K_DIM) xc[RW7_XW + t * K_DIM + k0 + i] = acc;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int n = 0; n < NQ; ++n) {
      const int e = lid + n * WG, t = e / BK, i = e - t * BK;
      if (e < TC * BK && k0 + i < K_DIM) {
        float acc = r_s[e];
        for (int m = 0; m <= t; ++m) acc = fma(q_s[t * TC + m], wt_s[m * BK + i], acc);
        xc[RW7_XQ + t * K_DIM + k0 + i] = acc;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  barrier(CLK_GLOBAL_MEM_FENCE); /* w, written above, is read back below */

  /* 4. By key tiles of rows i: F = K-^T + B-^T M and E = diag(e^{G_TC}) + B-^T w. */
  for (int k0 = 0; k0 < K_DIM; k0 += BK) {
    rw_load_chunk(w_s, BK, K_DIM, w, RW_T(w), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(k_s, BK, K_DIM, k, RW_T(k), k0, s, p0, flags, false, lid, WG);
    rw_load_chunk(b_s, BK, K_DIM, b, RW_T(b), k0, s, p0, flags, false, lid, WG);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = lid; i < BK; i += WG) { /* the decays after each position */
      float g = 0.0f;
      for (int t = TC - 1; t >= 0; --t) {
        const int at = t * BK + i;
        const float ep = exp(g);
        k_s[at] *= ep, b_s[at] *= ep;
        g += w_s[at];
      }
      g_s[i] = exp(g);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int n = 0; n < NQ; ++n) {
      const int e = lid + n * WG, i = e / TC, s2 = e - i * TC;
      if (e < TC * BK && k0 + i < K_DIM) {
        float acc = k_s[s2 * BK + i];
        for (int t = s2 + 1; t < TC; ++t) acc = fma(b_s[t * BK + i], m_s[t * TC + s2], acc);
        xc[RW7_XF + (k0 + i) * TC + s2] = acc;
      }
    }
    for (int e = lid; e < BK * K_DIM; e += WG) {
      const int i = e / K_DIM, j = e - i * K_DIM;
      if (k0 + i < K_DIM) {
        float acc = k0 + i == j ? g_s[i] : 0.0f;
        for (int t = 0; t < TC; ++t) acc = fma(b_s[t * BK + i], xc[RW7_XW + t * K_DIM + j], acc);
        xc[RW7_XE + (k0 + i) * K_DIM + j] = acc;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}
