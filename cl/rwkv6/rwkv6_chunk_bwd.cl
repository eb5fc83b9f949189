/* requires: rwkv6/rwkv6_chunk_common.cl */
/* The chunked RWKV6 backward's key-side gradients (prepend dtype.cl,
 * rwkv6_common.cl, rwkv6_chunk_common.cl): dr, dk, dw and per-chunk du
 * partials, then their fixed-order sum.
 *
 * Per chunk, with S = S_c and D = D_c from rwkv6_chunk_state.cl,
 * dA[t][s] = scale * dO_t . v_s (s <= t), B_t = dA[t][t] and
 * Z[t][s] = dA[t][s] r_t k_s e^{span(s,t)} (span: the w strictly between):
 *   dr_t = scale e^{w before t} (S dO_t) + sum_{s<t} dA[t][s] k_s e^{span(s,t)} + B_t u k_t
 *   dk_s = e^{w after s} (D v_s)      + sum_{t>s} dA[t][s] r_t e^{span(s,t)} + B_s u r_s
 *   du  += B_t r_t k_t
 * and dw_tau = e^{w_tau} sum_j dS_tau[i][j] S_{tau-1}[i][j] expanded over
 * the chunk into terms that each span tau (so none is larger than what it
 * adds to dw: a strong decay leaves no large terms to cancel):
 *   dw_tau = eg (D . S)_i + sum_{t>tau} r_t scale e^{w before t} (S dO_t)
 *          + sum_{s<tau} k_s e^{w after s} (D v_s) + F_tau,
 *   F_tau = sum_{s<tau<t} Z[t][s]:  F_0 = 0,
 *   F_{tau+1} = F_tau - sum_{s<tau} Z[tau+1][s] + sum_{t>tau+1} Z[t][tau].
 * A work-group owns one chunk of one sequence-head and BK key columns. It
 * walks the values BV at a time, accumulating dA (NA entries a work-item)
 * and S dO_t, D v_s (NQ entries each) in registers; then it takes the
 * chunk's r, k, w for its keys and forms the gradients, work-item (t, i)
 * summing over s with the sub-chunk factors of rwkv6_chunk_common.cl
 * (inside a sub-chunk, spans as running products of e^{w}); one work-item
 * a key walks the chunk for dw and du. The value tiles of the first phase and
 * the key tiles of the second share local memory. */
#define NQ FCL_CEIL_DIV(TC * BK, WG) /* (position, key) entries per work-item */
#ifndef RW_DK_MMA
#define RW_DK_MMA 0
#endif
#if !RW_DK_MMA
typedef float rw_ck_t; /* the portable checkpoints (rwkv6_chunk_rows.cl: mma's) */
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_rwkv6_chunk_dk(
    const __global fcl_elem *r, const __global fcl_elem *k, const __global fcl_elem *v,
    const __global fcl_elem *w, const __global fcl_elem *u, const __global fcl_elem *dout,
    const __global rw_ck_t *cks, const __global rw_ck_t *ckd, __global fcl_elem *dr,
    __global fcl_elem *dk, __global fcl_elem *dw, __global float *dup,
    const __global int *cu, RW_TENSOR(r), RW_TENSOR(k), RW_TENSOR(v), RW_TENSOR(w),
    RW_TENSOR(do), RW_TENSOR(dr), RW_TENSOR(dk), RW_TENSOR(dw), int seqlen, int heads,
    int nchunk, float scale, int flags) {
  /* Local memory: the first phase's value tiles (P1) overlap the second's
   * key tiles (P2); qs and ks, written after P1 and read in P2, and da
   * live through both. */
#if RW_DK_MMA /* the first phase's tiles: rwkv6_chunk_bwd_mma.cl */
  __local float pool[FCL_MAX(RW_DK_P1, 9 * TC * BK)] __attribute__((aligned(16)));
#else
  __local float pool[FCL_MAX(2 * TC * BV + 2 * BK * BV, 9 * TC * BK)]
      __attribute__((aligned(16)));
#endif
  __local float da[NTRI];
  __local float tot[NSUB * BK], pp[NSUB * BK], ps[NSUB * BK], ex[NSUB * NSUB * BK];
  __local float eg[BK], u_s[BK], dg_s[BK];
#if RW_DK_MMA
  MMA_EMU_DECL(WG / 32)
#endif
  __local float *do_s = pool, *v_s = pool + TC * BV, *S_s = pool + 2 * TC * BV,
                *D_s = pool + 2 * TC * BV + BK * BV;                         /* P1 */
  __local float *r_s = pool, *k_s = pool + TC * BK, *w_s = pool + 2 * TC * BK,
                *fq = pool + 3 * TC * BK, *fk = pool + 4 * TC * BK,
                *rf = pool + 5 * TC * BK, *kf = pool + 6 * TC * BK;           /* P2 */
  __local float *qs = pool + 7 * TC * BK, *ks = pool + 8 * TC * BK;
  const int lid = get_local_id(0);
  const int c = get_group_id(0), k0 = get_group_id(1) * BK, bh = get_group_id(2);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int p0 = c * TC;
  const long du_at = (((long)c * (get_num_groups(2) / heads) + s.b) * heads + s.h) * K_DIM + k0;
  /* A chunk past the sequence's end (varlen) loads zeros, stores nothing
   * but its du partial (0), and returns no earlier (rwkv6_chunk_out.cl). */
  const int nt = max(0, min(TC, s.n - p0));

  /* 1. dA, S dO_t, D v_s and sum_j D S over the value tiles. */
#if RW_DK_MMA /* on tensor cores (rwkv6_chunk_bwd_mma.cl) */
  rw_dk_products_mma(v, dout, RW_T(v), RW_T(do), cks, ckd, rw_ck(bh, nchunk, c), s, p0, nt, k0,
                     scale, flags, pool, da, qs, ks, dg_s, lid MMA_EMU);
#else
  float a[NA], q1[NQ], q2[NQ], dg = 0.0f;
  FCL_UNROLL
  for (int n = 0; n < NA; ++n) a[n] = 0.0f;
  FCL_UNROLL
  for (int n = 0; n < NQ; ++n) q1[n] = q2[n] = 0.0f;
  for (int vt = 0; vt < NVT; ++vt) {
    const int j0 = vt * BV;
    rw_load_chunk(do_s, BV, V_DIM, dout, RW_T(do), j0, s, p0, flags, false, lid, WG);
    rw_load_chunk(v_s, BV, V_DIM, v, RW_T(v), j0, s, p0, flags, false, lid, WG);
    rw_load_state(S_s, cks, rw_ck(bh, nchunk, c), k0, BK, j0, BV, nt > 0, lid, WG);
    rw_load_state(D_s, ckd, rw_ck(bh, nchunk, c), k0, BK, j0, BV, nt > 0, lid, WG);
    barrier(CLK_LOCAL_MEM_FENCE);
    FCL_UNROLL
    for (int n = 0; n < NA; ++n) { /* masks, not `continue` (rw_tri_row) */
      const int e = min(lid + n * WG, NTRI - 1), t = rw_tri_row(e), s2 = e - t * (t + 1) / 2;
      float x = 0.0f;
      for (int j = 0; j < BV; ++j) x = fma(do_s[t * BV + j], v_s[s2 * BV + j], x);
      a[n] += x;
    }
    FCL_UNROLL
    for (int n = 0; n < NQ; ++n) {
      const int e = min(lid + n * WG, TC * BK - 1), t = e / BK, i = e - t * BK;
      float x = 0.0f, y = 0.0f;
      for (int j = 0; j < BV; ++j) {
        x = fma(do_s[t * BV + j], S_s[i * BV + j], x);
        y = fma(v_s[t * BV + j], D_s[i * BV + j], y);
      }
      q1[n] += x;
      q2[n] += y;
    }
    if (lid < BK)
      for (int j = 0; j < BV; ++j) dg = fma(D_s[lid * BV + j], S_s[lid * BV + j], dg);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  FCL_UNROLL
  for (int n = 0; n < NA; ++n)
    if (lid + n * WG < NTRI) da[lid + n * WG] = scale * a[n];
  FCL_UNROLL
  for (int n = 0; n < NQ; ++n) {
    const int e = lid + n * WG;
    if (e < TC * BK) qs[e] = q1[n], ks[e] = q2[n];
  }
  if (lid < BK) dg_s[lid] = dg;

#endif

  /* 2. The chunk's keys, their decays, the gradients. */
#if RW_DK_MMA
  rw_rows16f(r_s, BK, TC, BK, r, RW_T(r), k0, s, p0, flags, lid, WG);
  rw_rows16f(k_s, BK, TC, BK, k, RW_T(k), k0, s, p0, flags, lid, WG);
  rw_rows16f(w_s, BK, TC, BK, w, RW_T(w), k0, s, p0, flags, lid, WG);
#else
  rw_load_chunk(r_s, BK, K_DIM, r, RW_T(r), k0, s, p0, flags, false, lid, WG);
  rw_load_chunk(k_s, BK, K_DIM, k, RW_T(k), k0, s, p0, flags, false, lid, WG);
  rw_load_chunk(w_s, BK, K_DIM, w, RW_T(w), k0, s, p0, flags, false, lid, WG);
#endif
  for (int i = lid; i < BK; i += WG)
    u_s[i] = k0 + i < K_DIM ? FCL_LOAD(u, (long)s.h * K_DIM + k0 + i) : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  rw_chunk_decays(w_s, NULL, NULL, fq, fk, tot, pp, ps, ex, eg, lid);
  /* From here on w_s holds the step decays e^{w}: the spans inside a
   * sub-chunk are running products of them (each step rounds once, a
   * strong decay only makes a product 0), as in rwkv6_chunk_out.cl. */
  for (int e = lid; e < TC * BK; e += WG) w_s[e] = exp(w_s[e]);
  barrier(CLK_LOCAL_MEM_FENCE);
#if RW_DK_MMA /* the sums over other sub-chunks, into rf and kf (read below, then rewritten) */
  rw_dk_intra_mma(da, r_s, k_s, fq, fk, ex, rf, kf, lid MMA_EMU);
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
  FCL_UNROLL
  for (int n = 0; n < NQ; ++n) {
    const int e = lid + n * WG, t = e / BK, i = e - t * BK;
    if (e >= TC * BK) break; /* e only grows; nothing here lives across a barrier */
    const int I = t / BC, m0 = I * BC;
    /* The intra-chunk part of dr_t: sub-chunks before t's, then t's own
     * (span as a running product), all but s = t - 1, which comes last. */
#if RW_DK_MMA
    float x = rf[e];
#else
    float x = 0.0f;
    for (int J = 0; J < I; ++J) {
      float y = 0.0f;
      for (int s2 = J * BC; s2 < J * BC + BC; ++s2)
        if (s2 != t - 1) y = fma(da[RW_TRI(t, s2)], k_s[s2 * BK + i] * fk[s2 * BK + i], y);
      x = fma(ex[((I - 1) * NSUB + J) * BK + i], y, x);
    }
#endif
    x *= fq[e];
    float fac = t > 0 ? w_s[(t - 1) * BK + i] : 1.0f;
    for (int s2 = t - 2; s2 >= m0; --s2) {
      x = fma(da[RW_TRI(t, s2)] * k_s[s2 * BK + i], fac, x);
      fac *= w_s[s2 * BK + i];
    }
    const float rfar = r_s[e] * x; /* sum_{s < t-1} Z[t][s] */
    if (t > 0) x = fma(da[RW_TRI(t, t - 1)], k_s[(t - 1) * BK + i], x);
    const float rinter = scale * fq[e] * pp[I * BK + i] * qs[e];
    const float drp = x + rinter;
    /* ... and of dk_t: sub-chunks after t's, then t's own, t2 = t + 1 last. */
#if RW_DK_MMA
    x = kf[e];
#else
    x = 0.0f;
    for (int J = I + 1; J < NSUB; ++J) {
      float y = 0.0f;
      for (int t2 = J * BC; t2 < J * BC + BC; ++t2)
        if (t2 != t + 1) y = fma(da[RW_TRI(t2, t)], r_s[t2 * BK + i] * fq[t2 * BK + i], y);
      x = fma(ex[((J - 1) * NSUB + I) * BK + i], y, x);
    }
#endif
    x *= fk[e];
    fac = t + 1 < TC ? w_s[(t + 1) * BK + i] : 1.0f;
    for (int t2 = t + 2; t2 < m0 + BC; ++t2) {
      x = fma(da[RW_TRI(t2, t)] * r_s[t2 * BK + i], fac, x);
      fac *= w_s[t2 * BK + i];
    }
    const float kfar = k_s[e] * x; /* sum_{t2 > t+1} Z[t2][t] */
    if (t + 1 < TC) x = fma(da[RW_TRI((t + 1), t)], r_s[(t + 1) * BK + i], x);
    const float kinter = fk[e] * ps[I * BK + i] * ks[e];
    const float dkp = x + kinter;
    const float B = da[RW_TRI(t, t)];
    if (t < nt && k0 + i < K_DIM) {
      const int time = rw_time(p0 + t, s.n, flags);
      FCL_STORE(dr, rw_at(RW_T(dr), s, time, flags) + k0 + i, fma(B * u_s[i], k_s[e], drp));
      FCL_STORE(dk, rw_at(RW_T(dk), s, time, flags) + k0 + i, fma(B * u_s[i], r_s[e], dkp));
    }
    qs[e] = r_s[e] * rinter; /* only this work-item reads qs[e], ks[e] */
    ks[e] = k_s[e] * kinter;
    rf[e] = rfar;
    kf[e] = kfar;
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  /* 3. dw (the sums above: each term spans tau) and du: scans over the
   * chunk's positions, nseg work-items a key column, each over a segment
   * of positions; the segments' totals meet in local memory (fq and fk's
   * space, free by now: 5 arrays of nseg * BK <= 2 TC BK). */
  int nseg = 1;
  while (nseg * 2 <= WG / BK && nseg * 8 <= TC && TC % (nseg * 2) == 0) nseg *= 2;
  const int seg = TC / nseg, i = lid % BK, g = lid / BK, t0 = g * seg;
  __local float *sq = fq, *sk = fq + nseg * BK, *sf = fq + 2 * nseg * BK,
                *sd = fq + 3 * nseg * BK, *sn = fq + 4 * nseg * BK;
  if (g < nseg) {
    float q = 0.0f, kk = 0.0f, fs = 0.0f, du = 0.0f;
    bool fin = true;
    for (int t = t0; t < t0 + seg; ++t) {
      q += qs[t * BK + i];
      kk += ks[t * BK + i];
      if (t + 1 < TC) fs += kf[t * BK + i] - rf[(t + 1) * BK + i];
      du = fma(da[RW_TRI(t, t)] * r_s[t * BK + i], k_s[t * BK + i], du);
      fin &= isfinite(rf[t * BK + i] + kf[t * BK + i]);
    }
    sq[g * BK + i] = q, sk[g * BK + i] = kk, sf[g * BK + i] = fs, sd[g * BK + i] = du;
    sn[g * BK + i] = fin ? 1.0f : 0.0f;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (g < nseg) {
    float after = 0.0f, before = 0.0f, f = 0.0f, du = 0.0f;
    bool finite = true;
    for (int h = 0; h < nseg; ++h) { /* the other segments, in a fixed order */
      if (h > g) after += sq[h * BK + i];
      if (h < g) before += sk[h * BK + i], f += sf[h * BK + i];
      finite &= sn[h * BK + i] != 0.0f;
      du += sd[h * BK + i];
    }
    for (int t = t0 + seg - 1; t >= t0; --t) { /* qs[t] becomes sum_{t2 > t} */
      const float x = qs[t * BK + i];
      qs[t * BK + i] = after;
      after += x;
    }
    const float base = eg[i] * dg_s[i];
    /* F's recurrence subtracts: an inf or NaN in it would stay in every
     * later F, where the true F has none (a NaN in r_t belongs to F_tau for
     * tau < t only). Then F_tau is summed pair by pair instead (slow, only
     * for such a column). */
    for (int t = t0; t < t0 + seg; ++t) {
      if (!finite) {
        f = 0.0f;
        for (int s2 = 0; s2 < t; ++s2) {
          float fac = 1.0f;
          for (int t2 = s2 + 1; t2 < TC; ++t2) {
            if (t2 > t) f = fma(da[RW_TRI(t2, s2)] * r_s[t2 * BK + i], k_s[s2 * BK + i] * fac, f);
            fac *= w_s[t2 * BK + i];
          }
        }
      }
      if (t < nt && k0 + i < K_DIM)
        FCL_STORE(dw, rw_at(RW_T(dw), s, rw_time(p0 + t, s.n, flags), flags) + k0 + i,
                  base + qs[t * BK + i] + before + f);
      before += ks[t * BK + i];
      if (t + 1 < TC) f += kf[t * BK + i] - rf[(t + 1) * BK + i];
    }
    if (g == 0 && k0 + i < K_DIM) dup[du_at + i] = du;
  }
}

/* du summed over chunks and sequences in a fixed order: a work-group per
 * RW_DU_KEYS keys of a head, in parts of RW_DU_KEYS work-items (at most
 * RW_DU_PARTS, rwkv6_abi.h; the host picks their number by the device's
 * work-group size). Part p sums the partials (chunk, sequence) = e, e = p,
 * p + parts, ... (one walk of them all waits a load latency each, which
 * docs/defaults.md measures); then each key sums the parts in order. */
__kernel void fcl_rwkv6_chunk_du(const __global float *dup, __global fcl_elem *du, int heads,
                                 int nchunk, int nseq) {
  __local float part_s[RW_DU_PARTS * RW_DU_KEYS];
  const int lid = get_local_id(0), parts = (int)get_local_size(0) / RW_DU_KEYS;
  const int key = lid % RW_DU_KEYS, p = lid / RW_DU_KEYS;
  const int i = get_group_id(0) * RW_DU_KEYS + key, h = get_group_id(1);
  const int n = nchunk * nseq; /* partial e is chunk e / nseq of sequence e % nseq */
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f; /* four loads in flight */
  if (i < K_DIM) {
#define RW_DUP(e) dup[((long)(e) * heads + h) * K_DIM + i]
    int e = p;
    for (; e + 3 * parts < n; e += 4 * parts)
      a0 += RW_DUP(e), a1 += RW_DUP(e + parts), a2 += RW_DUP(e + 2 * parts),
          a3 += RW_DUP(e + 3 * parts);
    for (; e < n; e += parts) a0 += RW_DUP(e);
#undef RW_DUP
  }
  part_s[lid] = (a0 + a1) + (a2 + a3);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (p == 0 && i < K_DIM) {
    float x = 0.0f;
    for (int q = 0; q < parts; ++q) x += part_s[q * RW_DU_KEYS + key];
    FCL_STORE(du, (long)h * K_DIM + i, x);
  }
}
