/* requires: rwkv7/rwkv7_chunk_state.cl common/mma_common.cl */
/* The chunked RWKV7 forward's output on NVIDIA tensor cores (FCL_DTYPE 1
 * or 2; emulated with FCL_MMA_EMULATE=1): the numbers of
 * fcl_rwkv7_chunk_out (rwkv7_chunk_out.cl),
 *   o = scale (Q S_c + P V),
 * with the products in m16n8k16 mma.sync: Q, S_c and P (f32, from the
 * prep kernel and the state pass) rounded to the data's 16-bit type, v as
 * stored, f32 sums. The prep kernel and the state pass stay the portable
 * ones (the state, an operand of its own update, stays f32).
 *
 * A work-group owns one chunk of TC positions of one sequence-head and
 * every value column; warp I its rows 16 I .. 16 I + 15. Q and S_c pass
 * through local memory BK keys at a time, then P and the chunk's v: P is 0
 * above its diagonal and v past the sequence, so whole blocks are
 * multiplied (every warp the same steps, as the emulation needs). K and V
 * are multiples of 16, V at most 128 (NTV accumulators a lane). */
#define WARPS (TC / 16)
#define MWG (WARPS * 32)
#define LDK (BK + 8) /* 16-bit tile pitches: 16-byte rows, ldmatrix */
#define LDV (V_DIM + 8)
#define LDP (TC + 8)
#define NTV (V_DIM / 8) /* n8 tiles of an output row block */
#define POOL16 FCL_MAX(TC * LDK + BK * LDV, TC * LDP + TC * LDV)

#if TC % 16 || BK % 16 || K_DIM % BK || V_DIM % 16 || V_DIM > 128
#error "rwkv7_chunk_out_mma: TC, BK, V multiples of 16, BK dividing K, V at most 128"
#endif

__kernel __attribute__((reqd_work_group_size(MWG, 1, 1)))
void fcl_rwkv7_chunk_out_mma(const __global fcl_elem *v, const __global float *x,
                             const __global float *ck, __global fcl_elem *o,
                             const __global int *cu, RW_TENSOR(v), RW_TENSOR(o), int seqlen,
                             int heads, int nchunk, float scale, int flags) {
  /* Q and S_c tiles, then P and v. */
  __local ushort pool[POOL16] __attribute__((aligned(16)));
  MMA_EMU_DECL(WARPS)
  __local ushort *q16 = pool, *s16 = pool + TC * LDK;
  __local ushort *p16 = pool, *v16 = pool + TC * LDP;
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, tq = lane & 3;
  const int c = get_group_id(0), bh = get_group_id(2);
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const int p0 = c * TC, nt = max(0, min(TC, s.n - p0)); /* none past the end */
  const __global float *xc = x + RW7_X(bh, c);
  /* ldmatrix rows: A (16 x 16 of a row-major tile), B transposed (16 x 16
   * of a [k][n] tile, two n8 halves). */
  const int ar = warp * 16 + (lane & 15), ac = (lane >> 4) * 8;
  const int br = ((lane >> 3) & 1) * 8 + (lane & 7), bc = (lane >> 4) * 8;

  float4 acc[NTV];
  MMA_UNROLL for (int n = 0; n < NTV; ++n) acc[n] = (float4)(0.0f);
  for (int k0 = 0; k0 < K_DIM; k0 += BK) {
    for (int e = lid; e < TC * BK; e += MWG) {
      const int t = e / BK, i = e - t * BK;
      q16[t * LDK + i] = mma_round(xc[RW7_XQ + t * K_DIM + k0 + i]);
    }
    for (int e = lid; e < BK * V_DIM; e += MWG) {
      const int i = e / V_DIM, j = e - i * V_DIM;
      s16[i * LDV + j] = mma_round(nt > 0 ? ck[RW7_CK(bh, c, k0 + i, j)] : 0.0f);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    MMA_UNROLL for (int kk = 0; kk < BK / 16; ++kk) {
      const uint4 a = mma_ldsm_x4(q16, ar * LDK + kk * 16 + ac);
      MMA_UNROLL for (int np = 0; np < V_DIM / 16; ++np) {
        const uint4 b = mma_ldsm_x4_t(s16, (kk * 16 + br) * LDV + np * 16 + bc);
        acc[2 * np] = mma_16816(a, b.xy, acc[2 * np]);
        acc[2 * np + 1] = mma_16816(a, b.zw, acc[2 * np + 1]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int e = lid; e < TC * TC; e += MWG) {
    const int t = e / TC, q = e - t * TC;
    p16[t * LDP + q] = mma_round(xc[RW7_XP + e]);
  }
  for (int e = lid; e < TC * V_DIM; e += MWG) {
    const int t = e / V_DIM, j = e - t * V_DIM;
    v16[t * LDV + j] =
        t < nt ? FCL_LOAD_RAW(v, rw_at(RW_T(v), s, rw_time(p0 + t, s.n, flags), flags) + j) : 0;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  MMA_UNROLL for (int J = 0; J < WARPS; ++J) {
    const uint4 a = mma_ldsm_x4(p16, ar * LDP + J * 16 + ac);
    MMA_UNROLL for (int np = 0; np < V_DIM / 16; ++np) {
      const uint4 b = mma_ldsm_x4_t(v16, (J * 16 + br) * LDV + np * 16 + bc);
      acc[2 * np] = mma_16816(a, b.xy, acc[2 * np]);
      acc[2 * np + 1] = mma_16816(a, b.zw, acc[2 * np + 1]);
    }
  }
  const int t0 = warp * 16 + g, t1 = t0 + 8;
  const long o0 = t0 < nt ? rw_at(RW_T(o), s, rw_time(p0 + t0, s.n, flags), flags) : 0;
  const long o1 = t1 < nt ? rw_at(RW_T(o), s, rw_time(p0 + t1, s.n, flags), flags) : 0;
  MMA_UNROLL for (int n = 0; n < NTV; ++n) {
    const int j = n * 8 + 2 * tq;
    if (t0 < nt) {
      FCL_STORE(o, o0 + j, scale * acc[n].x);
      FCL_STORE(o, o0 + j + 1, scale * acc[n].y);
    }
    if (t1 < nt) {
      FCL_STORE(o, o1 + j, scale * acc[n].z);
      FCL_STORE(o, o1 + j + 1, scale * acc[n].w);
    }
  }
}
