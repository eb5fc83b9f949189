/* requires: rwkv6/rwkv6_chunk_state_mma.cl */
/* The chunked RWKV6 products that end in value columns on NVIDIA tensor
 * cores (prepend dtype.cl, rwkv6_common.cl, rwkv6_chunk_common.cl,
 * mma_warp.cl, mma_common.cl, rwkv6_chunk_rows.cl; FCL_DTYPE 0 (split, as
 * rwkv6_chunk_rows.cl says), 1 or 2; WG = the work-group, TC / 16 warps): the numbers of
 * fcl_rwkv6_chunk_out (rwkv6_chunk_out.cl), the forward's output
 *   o_t  = scale * ((r_t e^{w before t}) S_c + sum_{s<=t} A[t][s] v_s)
 * or, with RW_STATE_GRAD, the backward's
 *   dv_s = (k_s e^{w after s}) D_c + scale * sum_{t>=s} A[t][s] dO_t,
 * with the products in m16n8k16 mma.sync: 16-bit operands, f32 sums. The
 * text below speaks of the forward; the backward swaps the roles of r and
 * k (its rows are s, its partners the sub-chunks after it, its diagonal
 * blocks transposed).
 *
 * A work-group owns one chunk of TC positions of one sequence-head, one
 * warp per sub-chunk of 16 (warp I: rows t of sub-chunk I). K and V are
 * multiples of 16 up to 128. Per key tile of BK columns the decays come
 * from rw_chunk_decays in f32 (exact, rwkv6_chunk_common.cl); then the
 * operands are rounded to 16 bits into local tiles:
 *   qt = r fq pp     (rows t)      the state term  qt . S_c
 *   kq = k fk        (rows s)      B of the off-diagonal blocks of A
 *   qs[I][J] = r fq ex[I-1][J] (rows t of I, one tile per J < I)
 * and warp I accumulates its rows of A's blocks J < I (qs[I][J] . kq_J^T)
 * and of the state term in registers. The diagonal blocks are summed
 * exactly in f32 by the warp's lanes (spans as running sums, with u on the
 * diagonal). Then A's rows, rounded to 16 bits, multiply the chunk's v. */
#define WARPS (TC / 16)
#define MWG (WARPS * 32)
#define LDK (BK + 8)     /* 16-bit tile pitches: 16-byte rows, ldmatrix */
#define LDV (V_DIM + 8)
#define NBLK FCL_MAX(1, NSUB * (NSUB - 1) / 2) /* tiles qs[I][J], J < I */
#define NTV (V_DIM / 8)           /* n8 tiles of an output row block */

#if TC % 16 || BK % 16 || K_DIM % 16 || V_DIM % 16 || V_DIM > 128
#error "rwkv6_chunk_out_mma: TC, BK, K and V multiples of 16, V at most 128"
#endif

__kernel __attribute__((reqd_work_group_size(MWG, 1, 1)))
void fcl_rwkv6_chunk_out_mma(
    const __global fcl_elem *r, const __global fcl_elem *k, const __global fcl_elem *w,
    const __global fcl_elem *u, const __global fcl_elem *v, const __global rw_ck_t *ck,
    __global fcl_elem *o, const __global int *cu, RW_TENSOR(r), RW_TENSOR(k),
    RW_TENSOR(w), RW_TENSOR(v), RW_TENSOR(o), int seqlen, int heads, int nchunk,
    float scale, int flags) {
  /* f32 key tiles, then (after the key loop) the 16-bit values. */
  __local float pool[FCL_MAX(5 * TC * BK, FCL_CEIL_DIV(RW_PARTS * TC * LDV, 2))]
      __attribute__((aligned(16)));
  /* qt16, then kq16; after the key loop the diagonal blocks (dg_s) */
  __local ushort qk16[2 * RW_PARTS * TC * LDK] __attribute__((aligned(16)));
  __local ushort qs16[RW_PARTS * NBLK * 16 * LDK] __attribute__((aligned(16)));
  __local ushort st16[RW_PARTS * BK * LDV] __attribute__((aligned(16)));
  __local float tot[NSUB * BK], pp[NSUB * BK], ps[NSUB * BK], ex[NSUB * NSUB * BK];
  __local float eg[BK], u_s[BK];
  MMA_EMU_DECL(WARPS)
  __local float *r_s = pool, *k_s = pool + TC * BK, *w_s = pool + 2 * TC * BK,
                *rq = pool + 3 * TC * BK, *kq = pool + 4 * TC * BK;
  __local ushort *v16 = (__local ushort *)pool;
  __local ushort *qt16 = qk16, *kq16 = qk16 + RW_PARTS * TC * LDK;
  /* WARPS * 256 floats fit: 4 * RW_PARTS * TC * LDK bytes, LDK >= 24 */
  __local float *dg_s = (__local float *)qk16;
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, tq = lane & 3;
  const int c = get_group_id(0), bh = get_group_id(2);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int p0 = c * TC;
  const int nt = max(0, min(TC, s.n - p0)); /* no early return (rwkv6_chunk_out.cl) */
  const bool grad = (flags & RW_STATE_GRAD) != 0;

  float4 acc[NTV], a_acc[2 * NSUB];
  MMA_UNROLL for (int n = 0; n < NTV; ++n) acc[n] = (float4)(0.0f);
  MMA_UNROLL for (int n = 0; n < 2 * NSUB; ++n) a_acc[n] = (float4)(0.0f);
  /* The warp's diagonal block: lane (tl, ih) sums row tl over half of
   * each key tile's columns, entry sl in xd[sl] (0 above the diagonal). */
  const int tl = lane & 15, ih = lane >> 4, tw = warp * 16 + tl;
  float xd[16];
  MMA_UNROLL for (int n = 0; n < 16; ++n) xd[n] = 0.0f;

  for (int kt = 0; kt < K_DIM / BK; ++kt) {
    const int k0 = kt * BK;
    rw_rows16f(r_s, BK, TC, BK, r, RW_T(r), k0, s, p0, flags, lid, MWG);
    rw_rows16f(k_s, BK, TC, BK, k, RW_T(k), k0, s, p0, flags, lid, MWG);
    rw_rows16f(w_s, BK, TC, BK, w, RW_T(w), k0, s, p0, flags, lid, MWG);
    for (int i = lid; i < BK; i += MWG) u_s[i] = FCL_LOAD(u, (long)s.h * K_DIM + k0 + i);
    /* The state's rows k0 .. k0 + BK by 16-byte loads (V a multiple of 16):
     * as stored where 16-bit (RW_CK16), else rounded here. */
#if RW_CK16
    MMA_UNROLL for (int q = 0; q < FCL_CEIL_DIV(BK * V_DIM / 8, MWG); ++q) {
      const int e = lid + q * MWG, i = e / (V_DIM / 8), j = (e - i * (V_DIM / 8)) * 8;
      const uint4 x = nt > 0 && e < BK * V_DIM / 8
                          ? *(const __global uint4 *)(ck + rw_ck(bh, nchunk, c) +
                                                      (long)(k0 + i) * V_DIM + j)
                          : (uint4)(0u);
      if (e < BK * V_DIM / 8) *(__local uint4 *)(st16 + i * LDV + j) = x;
    }
#else
    MMA_UNROLL for (int q = 0; q < FCL_CEIL_DIV(BK * V_DIM / 4, MWG); ++q) {
      const int e = lid + q * MWG, i = e / (V_DIM / 4), j = (e - i * (V_DIM / 4)) * 4;
      const float4 x = nt > 0 && e < BK * V_DIM / 4
                           ? *(const __global float4 *)(ck + rw_ck(bh, nchunk, c) +
                                                        (long)(k0 + i) * V_DIM + j)
                           : (float4)(0.0f);
      if (e < BK * V_DIM / 4) {
        const int lo = RW_LO(BK * LDV);
        rw_st16(st16, i * LDV + j, lo, x.x), rw_st16(st16, i * LDV + j + 1, lo, x.y);
        rw_st16(st16, i * LDV + j + 2, lo, x.z), rw_st16(st16, i * LDV + j + 3, lo, x.w);
      }
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    rw_chunk_decays(w_s, r_s, k_s, rq, kq, tot, pp, ps, ex, eg, lid);
    /* Forward: rows r fq (the warp's) and partners k fk; backward: rows
     * k fk, partners r fq. Tile (hi, lo) of partners hi > lo holds the
     * rows of the warp's sub-chunk (hi forward, lo backward) times
     * ex[hi-1][lo]. */
    for (int e = lid; e < TC * BK; e += MWG) {
      const int t = e / BK, i = e - t * BK, I = t / 16;
      const float x = grad ? kq[e] : rq[e];
      w_s[e] = exp(w_s[e]); /* the step decays, for the diagonal blocks */
      rw_st16(qt16, t * LDK + i, RW_LO(TC * LDK), x * (grad ? ps : pp)[I * BK + i]);
      rw_st16(kq16, t * LDK + i, RW_LO(TC * LDK), grad ? rq[e] : kq[e]);
      for (int P = grad ? I + 1 : 0; P < (grad ? NSUB : I); ++P) {
        const int hi = max(I, P), lo = min(I, P);
        rw_st16(qs16, (hi * (hi - 1) / 2 + lo) * 16 * LDK + (t - I * 16) * LDK + i,
                RW_LO(NBLK * 16 * LDK), x * ex[((hi - 1) * NSUB + lo) * BK + i]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* The diagonal block, exactly: walking s down from t, the decay
     * between s and t is the product of the step decays strictly between
     * (a running product: each step rounds once, and a strong decay only
     * makes it 0); s = t takes u. */
    MMA_NO_UNROLL for (int i8 = 0; i8 < BK / 2; i8 += 8) { /* 8 columns: 16-byte reads */
      const int ib = ih * (BK / 2) + i8;
      float rt[8], ru[8], fac[8];
      MMA_UNROLL for (int q = 0; q < 8; ++q) {
        rt[q] = r_s[tw * BK + ib + q];
        ru[q] = rt[q] * u_s[ib + q];
        fac[q] = 1.0f;
      }
      MMA_UNROLL for (int sl = 15; sl >= 0; --sl) {
        __local const float4 *kr = (__local const float4 *)(k_s + (warp * 16 + sl) * BK + ib);
        __local const float4 *wr = (__local const float4 *)(w_s + (warp * 16 + sl) * BK + ib);
        const float4 k0 = kr[0], k1 = kr[1], w0 = wr[0], w1 = wr[1];
        const float kq[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
        const float wq[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        float x = 0.0f;
        if (sl == tl) MMA_UNROLL for (int q = 0; q < 8; ++q) x = fma(ru[q], kq[q], x);
        if (sl < tl)
          MMA_UNROLL for (int q = 0; q < 8; ++q) {
            x = fma(rt[q] * kq[q], fac[q], x);
            fac[q] *= wq[q];
          }
        xd[sl] += x;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    MMA_UNROLL for (int kk = 0; kk < BK / 16; ++kk) {
      const int ao = (warp * 16 + (lane & 15)) * LDK + kk * 16 + (lane >> 4) * 8;
      const uint4 aq = mma_ldsm_x4(qt16, ao), aql = RW_LDSM_LO(qt16, TC * LDK, ao);
      MMA_UNROLL for (int np = 0; np < V_DIM / 16; ++np) {
        const int bo = (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LDV + np * 16 +
                       (lane >> 4) * 8;
        const uint4 b = mma_ldsm_x4_t(st16, bo), bl = RW_LDSM_LO_T(st16, BK * LDV, bo);
        acc[2 * np] = RW_MMA(aq, aql, b.xy, bl.xy, acc[2 * np]);
        acc[2 * np + 1] = RW_MMA(aq, aql, b.zw, bl.zw, acc[2 * np + 1]);
      }
      /* Blocks J < warp of A (J > warp of A's transpose: uniform over a
       * warp; emulated, every warp runs every J and keeps its own). */
      MMA_UNROLL for (int J = 0; J < NSUB; ++J) {
        const bool mine = grad ? J > warp : J < warp;
        MMA_SPECIAL(mine) {
          const int hi = max(J, warp), lo = min(J, warp);
          const int blk = mine ? hi * (hi - 1) / 2 + lo : 0;
          const int ao = (blk * 16 + (lane & 15)) * LDK + kk * 16 + (lane >> 4) * 8;
          const int bo = (J * 16 + (lane >> 4) * 8 + (lane & 7)) * LDK + kk * 16 +
                         ((lane >> 3) & 1) * 8;
          const uint4 a = mma_ldsm_x4(qs16, ao), al = RW_LDSM_LO(qs16, NBLK * 16 * LDK, ao);
          const uint4 b = mma_ldsm_x4(kq16, bo), bl = RW_LDSM_LO(kq16, TC * LDK, bo);
          const float4 c0 = RW_MMA(a, al, b.xy, bl.xy, a_acc[2 * J]);
          const float4 c1 = RW_MMA(a, al, b.zw, bl.zw, a_acc[2 * J + 1]);
          if (mine) a_acc[2 * J] = c0, a_acc[2 * J + 1] = c1;
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  /* The diagonal blocks to local memory (0 above the diagonal), the chunk's
   * v (16-bit, as stored; 0 past the sequence) over the key tiles. */
  /* The two halves of each row summed (backward: the transpose). */
  if (ih == 0)
    MMA_UNROLL for (int sl = 0; sl < 16; ++sl)
      dg_s[warp * 256 + (grad ? sl * 16 + tl : tl * 16 + sl)] = xd[sl];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (ih == 1)
    MMA_UNROLL for (int sl = 0; sl < 16; ++sl)
      dg_s[warp * 256 + (grad ? sl * 16 + tl : tl * 16 + sl)] += xd[sl];
  rw_rows16(v16, RW_LO(TC * LDV), LDV, TC, V_DIM, V_DIM, v, RW_T(v), 0, s, p0, flags, lid, MWG);
  mma_cp_commit();
  mma_cp_wait_all();
  barrier(CLK_LOCAL_MEM_FENCE);
  const float ascale = grad ? scale : 1.0f; /* the backward scales A only */
  MMA_UNROLL for (int J = 0; J < NSUB; ++J) {
    const bool mine = grad ? J >= warp : J <= warp;
    MMA_SPECIAL(mine) {
      float4 c0 = a_acc[2 * J], c1 = a_acc[2 * J + 1];
      if (J == warp) { /* the lane's C positions of the diagonal block */
        __local const float *dg = dg_s + warp * 256;
        c0 = (float4)(dg[g * 16 + 2 * tq], dg[g * 16 + 2 * tq + 1], dg[(g + 8) * 16 + 2 * tq],
                      dg[(g + 8) * 16 + 2 * tq + 1]);
        c1 = (float4)(dg[g * 16 + 8 + 2 * tq], dg[g * 16 + 9 + 2 * tq],
                      dg[(g + 8) * 16 + 8 + 2 * tq], dg[(g + 8) * 16 + 9 + 2 * tq]);
      }
      c0 *= ascale, c1 *= ascale;
      const uint4 af = (uint4)(mma_pack(c0.x, c0.y), mma_pack(c0.z, c0.w), mma_pack(c1.x, c1.y),
                               mma_pack(c1.z, c1.w));
      const uint4 afl = (uint4)(RW_PACK_LO(c0.x, c0.y, af.x), RW_PACK_LO(c0.z, c0.w, af.y),
                                RW_PACK_LO(c1.x, c1.y, af.z), RW_PACK_LO(c1.z, c1.w, af.w));
      MMA_UNROLL for (int np = 0; np < V_DIM / 16; ++np) {
        const int bo = (J * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LDV + np * 16 +
                       (lane >> 4) * 8;
        const uint4 b = mma_ldsm_x4_t(v16, bo), bl = RW_LDSM_LO_T(v16, TC * LDV, bo);
        const float4 x0 = RW_MMA(af, afl, b.xy, bl.xy, acc[2 * np]);
        const float4 x1 = RW_MMA(af, afl, b.zw, bl.zw, acc[2 * np + 1]);
        if (mine) acc[2 * np] = x0, acc[2 * np + 1] = x1;
      }
    }
  }
  const float oscale = grad ? 1.0f : scale;
  const int t0 = warp * 16 + g, t1 = t0 + 8;
  const long o0 = t0 < nt ? rw_at(RW_T(o), s, rw_time(p0 + t0, s.n, flags), flags) : 0;
  const long o1 = t1 < nt ? rw_at(RW_T(o), s, rw_time(p0 + t1, s.n, flags), flags) : 0;
  MMA_UNROLL for (int n = 0; n < NTV; ++n) {
    const int j = n * 8 + 2 * tq;
    if (t0 < nt) {
      FCL_STORE(o, o0 + j, oscale * acc[n].x);
      FCL_STORE(o, o0 + j + 1, oscale * acc[n].y);
    }
    if (t1 < nt) {
      FCL_STORE(o, o1 + j, oscale * acc[n].z);
      FCL_STORE(o, o1 + j + 1, oscale * acc[n].w);
    }
  }
}
