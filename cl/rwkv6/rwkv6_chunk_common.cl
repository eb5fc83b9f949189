/* requires: rwkv6/rwkv6_common.cl */
/* Shared pieces of the chunked RWKV6 kernels (prepend dtype.cl,
 * rwkv6_common.cl): tile sizes and the decays of one chunk.
 *
 * A chunk is TC positions; it is cut into NSUB sub-chunks of BC (16, or TC
 * when shorter). Per key dimension i, with w the log decays of the chunk:
 *   fq_t = e^{sum of w before t inside t's sub-chunk}
 *   fk_s = e^{sum of w after s inside s's sub-chunk}
 *   pp_m = e^{sum of w of the sub-chunks before m}, ps_m = ... after m
 *   ex[m][J] = e^{sum of w of the sub-chunks J+1 .. m}   (m >= J)
 *   eg = e^{sum of w of the chunk}
 * so that for s in sub-chunk J before t in sub-chunk I
 *   e^{sum of w strictly between s and t} = fq_t * ex[I-1][J] * fk_s,
 * the decay from the chunk start to t is pp_I * fq_t, and from s to the
 * chunk end fk_s * ps_J. Every exponent is a running sum of at most one
 * chunk's terms and is <= 0: nothing overflows, a strong decay only makes
 * a factor 0, and no factor is the difference of two long sums (which
 * would lose the small spans next to large ones). Pairs inside one
 * sub-chunk take their span as a running sum of w (rw_span users). */
#ifndef BK
#define BK 32 /* key columns per tile */
#endif
#ifndef BV
#define BV 64 /* value columns per tile */
#endif
#ifndef WG
#define WG 256 /* work-items of the chunk kernels */
#endif
#define BC (TC < 16 ? TC : 16)
#define NSUB (TC / BC)
#define NTRI (TC * (TC + 1) / 2)       /* entries of a chunk matrix, s <= t */
#define RW_TRI(t, s) ((t) * ((t) + 1) / 2 + (s)) /* ... packed row by row */
#define NA FCL_CEIL_DIV(NTRI, WG)       /* chunk-matrix entries per work-item */
#define NKT FCL_CEIL_DIV(K_DIM, BK)     /* key tiles */
#define NVT FCL_CEIL_DIV(V_DIM, BV)     /* value tiles */

/* Entry e (< NTRI) of the lower triangle, row by row: (t, s), s <= t.
 * Loops over a work-item's entries of register arrays go through e
 * clamped to the last entry and a mask, never `continue`: PoCL 3.1
 * miscompiles a `continue` in such a loop when the arrays live across
 * barriers (wrong, run-to-run varying results with tiles narrower than
 * the work-group; Oclgrind and llvmpipe run the same code right). */
inline int rw_tri_row(int e) {
  int t = (int)((sqrt(8.0f * (float)e + 1.0f) - 1.0f) * 0.5f);
  if (t * (t + 1) / 2 > e) --t; /* float rounding, either way */
  if ((t + 1) * (t + 2) / 2 <= e) ++t;
  return t;
}

/* The checkpoint of chunk c of sequence-head bh: f32 [K][V]. */
inline long rw_ck(int bh, int nchunk, int c) {
  return ((long)bh * nchunk + c) * K_DIM * V_DIM;
}

/* The decay factors of a tile of BK key columns from its log decays w_s
 * ([TC][BK], 0 past the sequence). fq and fk ([TC][BK]) are multiplied by
 * rq_in / kq_in ([TC][BK]) when those are given (r e^{..}, k e^{..}). tot
 * is [NSUB][BK] scratch; pp, ps [NSUB][BK]; ex [NSUB][NSUB][BK]; eg [BK].
 * Ends with a barrier. */
static inline void rw_chunk_decays(__local const float *w_s, __local const float *rq_in,
                                   __local const float *kq_in, __local float *fq,
                                   __local float *fk, __local float *tot, __local float *pp,
                                   __local float *ps, __local float *ex, __local float *eg,
                                   int lid) {
  /* Work-item e walks one sub-chunk's column forward (fq, tot) or, from
   * NSUB BK on, backward (fk): the two walks run side by side where the
   * work-group has the work-items. The w go to registers first: the
   * running sum waits on no store (the tiles may share one local array). */
  for (int e = lid; e < 2 * NSUB * BK; e += WG) {
    const bool back = e >= NSUB * BK;
    const int e2 = back ? e - NSUB * BK : e, m = e2 / BK, i = e2 - m * BK;
    __local const float *in = back ? kq_in : rq_in;
    float wv[BC];
    FCL_UNROLL
    for (int q = 0; q < BC; ++q) wv[q] = w_s[(m * BC + (back ? BC - 1 - q : q)) * BK + i];
    float run = 0.0f;
    FCL_UNROLL
    for (int q = 0; q < BC; ++q) {
      const int x = (m * BC + (back ? BC - 1 - q : q)) * BK + i;
      (back ? fk : fq)[x] = (in ? in[x] : 1.0f) * exp(run);
      run += wv[q];
    }
    if (!back) tot[e2] = run;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = lid; i < BK; i += WG) {
    float run = 0.0f;
    for (int m = 0; m < NSUB; ++m) {
      pp[m * BK + i] = exp(run);
      run += tot[m * BK + i];
    }
    eg[i] = exp(run);
    run = 0.0f;
    for (int m = NSUB - 1; m >= 0; --m) {
      ps[m * BK + i] = exp(run);
      run += tot[m * BK + i];
    }
    for (int j = 0; j < NSUB; ++j) {
      run = 0.0f;
      for (int m = j; m < NSUB; ++m) {
        if (m > j) run += tot[m * BK + i];
        ex[(m * NSUB + j) * BK + i] = exp(run);
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* Loads rows [i0, i0 + nrow) x columns [j0, j0 + ncol) of a checkpoint (f32
 * [K][V] at ck + at) into dst[nrow][ncol], 0 outside K x V and everywhere
 * when the chunk is past its sequence's end (any), whose checkpoint the
 * state pass never wrote. */
inline void rw_load_state(__local float *dst, const __global float *ck, long at, int i0,
                          int nrow, int j0, int ncol, bool any, int lid, int nthreads) {
  const int total = nrow * ncol;
  for (int e0 = lid; e0 < total; e0 += RW_BATCH * nthreads) { /* RW_BATCH loads in flight */
    float x[RW_BATCH];
    FCL_UNROLL
    for (int q = 0; q < RW_BATCH; ++q) {
      const int e = e0 + q * nthreads, a = e / ncol, b = e - a * ncol;
      x[q] = (e < total && any && i0 + a < K_DIM && j0 + b < V_DIM)
                 ? ck[at + (long)(i0 + a) * V_DIM + j0 + b]
                 : 0.0f;
    }
    FCL_UNROLL
    for (int q = 0; q < RW_BATCH; ++q)
      if (e0 + q * nthreads < total) dst[e0 + q * nthreads] = x[q];
  }
}
