/* requires: rwkv6/rwkv6_chunk_rows.cl */
/* The chunk-boundary states of the chunked RWKV6 on NVIDIA tensor cores
 * (prepend dtype.cl, rwkv6_common.cl, rwkv6_chunk_common.cl, mma_warp.cl,
 * mma_common.cl, rwkv6_chunk_rows.cl; FCL_DTYPE 0, 1 or 2): the numbers of
 * fcl_rwkv6_chunk_state (rwkv6_chunk_state.cl), with the same arguments,
 * checkpoints and segments.
 *
 * A work-group owns a tile of HK state rows by HV columns, one warp per 16
 * rows, whose f32 sums stay in the warp's mma accumulators for the whole
 * walk. The walk goes in steps of SB positions (a chunk is TC / SB
 * steps): the chunk's update splits into its steps exactly, each step
 * decaying what came before it by its own total (forward: the steps in
 * order, each operand a_t decayed to the step's end; gradient: the steps
 * in reverse, a_t decayed from the step's start). Per step:
 *   - its a, w and b rows come as stored by cp.async, SST steps in flight
 *     (RW_ALIGNED: rows at 16-byte multiples; else plain loads); f32 data
 *     (MMA_SPLIT) in tiles of more than 32 rows (RW_AW_REGS) brings a and
 *     w straight to the registers of the work-items that use them instead,
 *     one step ahead (consecutive work-items read consecutive columns):
 *     staged, tiles of 64 would not fit 48 KiB, and fewer, larger tiles
 *     read each operand fewer times (but where few sequence-heads leave
 *     the walk's latency exposed, as at T = 16384, the staged tiles of 32
 *     are faster);
 *   - two work-items per state row take the running sum of w over the
 *     step in f32 (every exponent <= 0, as in the portable pass) and
 *     splits x = a_t e^{..} (times scale for the gradient) into two 16-bit
 *     parts, hi = x rounded and lo = x - hi rounded: b is exact in 16
 *     bits, so the products keep twice the operand's bits, as the f32
 *     states (ht, dh0 and the checkpoints) need; f32 data (MMA_SPLIT)
 *     splits b likewise, in the same phase;
 *   - S <- eg S, then S += hi^T b + lo^T b (+ hi^T b_lo split) as
 *     m16n8k16 products.
 * The checkpoints are stored from the accumulators at each chunk's start
 * (16-bit data: rounded to its dtype, RW_CK16 in rwkv6_chunk_rows.cl).
 *
 * Segments side by side (nseg > 1, where few sequence-heads would leave
 * the walk's latency exposed): the chunks [c_begin, c_end) split into nseg
 * runs, work-group row bh * nseg + g walking run g. A first launch
 * (RW_SEG_ENDS) walks each run from 0 and keeps its update E_g and its
 * rows' total log-decay W_g in segs ([bh][g][K][V], then [bh][g][K]), no
 * checkpoints; the second starts run g from the state before it,
 *   S = h0, then S <- e^{W_j} S + E_j for the runs j before g
 * (the gradient: after g, from dht), and walks it storing checkpoints. */
#define SWARPS (HK / 16)
#define RW_AW_REGS (MMA_SPLIT && HK > 32) /* a and w to registers, not staged */
#define SWG (SWARPS * 32)
#define SB (TC < 32 ? TC : 32) /* positions a step */
#define SPC (TC / SB)          /* steps a chunk */
#ifndef SST
#define SST 2 /* steps whose loads are in flight */
#endif
#define LDSA (HK + 8) /* 16-bit pitches for ldmatrix: 16-byte rows */
#define LDSB (HV + 8)
#define NTS (HV / 8) /* n8 tiles of a warp's rows */

#if HK % 16 || HV % 16 || K_DIM % HK || V_DIM % HV || TC % 16 || SST < 2 || SST > 3
#error "rwkv6_chunk_state_mma: HK, HV multiples of 16 dividing K and V, TC of 16, SST 2 or 3"
#endif

#if RW_CK16 && NTS % 4 == 0
/* A warp's checkpoint rows (16-bit) by 16-byte stores: lane (g, tq) holds
 * the rounded column pairs 2 tq of rows g and g + 8 of every n8 tile;
 * each quad transposes them four tiles at a time (round r: lane tq sends
 * its pair of tile q0 + (tq ^ r) to lane tq ^ r), so that lane tq holds
 * all 8 columns of tile q0 + tq. p is row g's column 0. */
static inline void rw_store_ck16(__global ushort *p, const float4 *acc, int tq,
                                 int lane MMA_EMU_PARAM) {
  MMA_UNROLL for (int q0 = 0; q0 < NTS; q0 += 4) {
    uint2 in[4], got[4] = {(uint2)(0u), (uint2)(0u), (uint2)(0u), (uint2)(0u)};
    MMA_UNROLL for (int j = 0; j < 4; ++j)
      in[j] = (uint2)(mma_pack(acc[q0 + j].x, acc[q0 + j].y),
                      mma_pack(acc[q0 + j].z, acc[q0 + j].w));
    MMA_UNROLL for (int r = 0; r < 4; ++r) {
      const int j = tq ^ r;
      const uint2 x = j == 0 ? in[0] : j == 1 ? in[1] : j == 2 ? in[2] : in[3];
      const uint2 y = r == 0 ? x : mma_shfl_idx2(x, (lane & ~3) | j);
      MMA_UNROLL for (int k = 0; k < 4; ++k) got[k] = k == j ? y : got[k];
    }
    const long o = (q0 + tq) * 8;
    *(__global uint4 *)(p + o) = (uint4)(got[0].x, got[1].x, got[2].x, got[3].x);
    *(__global uint4 *)(p + o + 8L * V_DIM) = (uint4)(got[0].y, got[1].y, got[2].y, got[3].y);
  }
}
#endif

__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void fcl_rwkv6_chunk_state_mma(
    const __global fcl_elem *a, const __global fcl_elem *w, const __global fcl_elem *b,
    const __global float *in, __global float *out, __global rw_ck_t *ck,
    __global float *segs, const __global int *cu, RW_TENSOR(a), RW_TENSOR(w), RW_TENSOR(b),
    int seqlen, int heads, int nchunk, float scale, int flags, int c_begin, int c_end,
    int nseg) {
#if !RW_AW_REGS
  __local fcl_raw a_s[SST][SB * HK] __attribute__((aligned(16)));
  __local fcl_raw w_s[SST][SB * HK] __attribute__((aligned(16)));
#endif
  __local fcl_raw b_s[SST][SB * LDSB] __attribute__((aligned(16)));
  __local ushort ad_s[2][SB * LDSA] __attribute__((aligned(16))); /* hi, lo */
#if MMA_SPLIT
  __local ushort b16[2][SB * LDSB] __attribute__((aligned(16))); /* hi, lo */
#endif
  __local float eg_s[HK];
  MMA_EMU_DECL(SWARPS)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5, g = lane >> 2, tq = lane & 3;
  const int nkb = K_DIM / HK;
  const int i0 = (get_group_id(0) % nkb) * HK, j0 = (get_group_id(0) / nkb) * HV;
  const int bh = get_group_id(1) / nseg, sg = get_group_id(1) % nseg;
  const rw_seq s = rw_sequence(bh, heads, seqlen, cu, flags);
  const bool grad = (flags & RW_STATE_GRAD) != 0, ends = (flags & RW_SEG_ENDS) != 0;
  const float ascale = grad ? scale : 1.0f;
  /* This work-group's run of chunks [cb, ce). */
  const int span = FCL_CEIL_DIV(c_end - c_begin, nseg);
  const int cb = min(c_end, c_begin + sg * span), ce = min(c_end, cb + span);
  /* The lane's state rows ra and ra + 8, columns n * 8 + 2 tq (+1):
   * 8-byte pairs. */
  const int ra = i0 + warp * 16 + g;
  const long rowa = (long)ra * V_DIM + j0 + 2 * tq, rowb = rowa + 8L * V_DIM;
  __global float *seg_e = segs + (long)bh * nseg * K_DIM * V_DIM; /* E_j: + j K V */
  __global float *seg_w = segs + (long)get_num_groups(1) * K_DIM * V_DIM +
                          (long)bh * nseg * K_DIM; /* W_j: + j K */
  float4 acc[NTS];
  MMA_UNROLL for (int n = 0; n < NTS; ++n) {
    const long at = (long)bh * K_DIM * V_DIM;
    acc[n] = (flags & RW_H0) && !ends
                 ? (float4)(*(const __global float2 *)(in + at + rowa + n * 8),
                            *(const __global float2 *)(in + at + rowb + n * 8))
                 : (float4)(0.0f);
  }
  if (!ends) /* the runs before this one (the gradient: after it) */
    for (int j = grad ? nseg - 1 : 0; grad ? j > sg : j < sg; j += grad ? -1 : 1) {
      const float ea = exp(seg_w[(long)j * K_DIM + ra]), eb = exp(seg_w[(long)j * K_DIM + ra + 8]);
      const __global float *e = seg_e + (long)j * K_DIM * V_DIM;
      MMA_UNROLL for (int n = 0; n < NTS; ++n) {
        const float2 x = *(const __global float2 *)(e + rowa + n * 8);
        const float2 y = *(const __global float2 *)(e + rowb + n * 8);
        acc[n] = (float4)(ea, ea, eb, eb) * acc[n] + (float4)(x, y);
      }
    }
  const int last = min(ce, FCL_CEIL_DIV(s.n, TC));
  const int nsteps = max(0, last - cb) * SPC;
  float wsum = 0.0f; /* RW_SEG_ENDS: the run's log-decay of this work-item's row */
  /* Two work-items a state row (SWG = 2 HK), half of each step each. */
  const int row = lid % HK, part = lid / HK;
#define RW_STEP_P0(n)                                                                   \
  ((grad ? last - 1 - (n) / SPC : cb + (n) / SPC) * TC +                                \
   (grad ? SPC - 1 - (n) % SPC : (n) % SPC) * SB)
#if RW_AW_REGS
#define RW_ISSUE(n)                                                                     \
  rw_rows(b_s[(n) % SST], LDSB, SB, HV, HV, b, RW_T(b), j0, s, RW_STEP_P0(n), flags, lid, SWG)
  /* The next step's a and w of this work-item's half (na, nw), and the w
   * of the first half (nw0) for the second's pre-sum; 0 past the end. */
  float na[SB / 2], nw[SB / 2], nw0[SB / 2];
#define RW_AT(x, t) (rw_at(RW_T(x), s, rw_time(p0_ + (t), s.n, flags), flags) + i0 + row)
#define RW_FETCH(n_)                                                                    \
  do {                                                                                  \
    const int p0_ = RW_STEP_P0(n_);                                                     \
    MMA_UNROLL for (int j = 0; j < SB / 2; ++j) {                                       \
      const int t = grad ? part * (SB / 2) + j : SB - 1 - part * (SB / 2) - j;          \
      const int t0 = grad ? j : SB - 1 - j;                                             \
      const bool ok = p0_ + t < s.n, ok0 = part && p0_ + t0 < s.n;                      \
      na[j] = ok ? a[RW_AT(a, t)] : 0.0f, nw[j] = ok ? w[RW_AT(w, t)] : 0.0f;           \
      nw0[j] = ok0 ? w[RW_AT(w, t0)] : 0.0f;                                            \
    }                                                                                   \
  } while (0)
  if (nsteps > 0) RW_FETCH(0);
#else
#define RW_ISSUE(n)                                                                     \
  do {                                                                                  \
    const int p0_ = RW_STEP_P0(n), buf_ = (n) % SST;                                    \
    rw_rows(a_s[buf_], HK, SB, HK, HK, a, RW_T(a), i0, s, p0_, flags, lid, SWG);        \
    rw_rows(w_s[buf_], HK, SB, HK, HK, w, RW_T(w), i0, s, p0_, flags, lid, SWG);        \
    rw_rows(b_s[buf_], LDSB, SB, HV, HV, b, RW_T(b), j0, s, p0_, flags, lid, SWG);      \
  } while (0)
#endif
  for (int n = 0; n < SST - 1; ++n) {
    if (n < nsteps) RW_ISSUE(n);
    mma_cp_commit();
  }
  for (int n = 0; n < nsteps; ++n) {
#if SST == 2
    MMA_CP_WAIT(0);
#else
    MMA_CP_WAIT(1);
#endif
    /* Step n's rows are in; every work-item is done with step n-1's
     * buffers and ad_s. */
    barrier(CLK_LOCAL_MEM_FENCE);
    if (n + SST - 1 < nsteps) RW_ISSUE(n + SST - 1);
    mma_cp_commit();
    const int buf = n % SST;
    if (n % SPC == 0 && !ends) { /* a chunk's start: its checkpoint */
      const int c = grad ? last - 1 - n / SPC : cb + n / SPC;
      __global rw_ck_t *cp = ck + rw_ck(bh, nchunk, c);
#if RW_CK16 && NTS % 4 == 0
      rw_store_ck16(cp + (long)(i0 + warp * 16 + g) * V_DIM + j0, acc, tq, lane MMA_EMU);
#else
      MMA_UNROLL for (int q = 0; q < NTS; ++q) {
#if RW_CK16 /* rounded pairs */
        *(__global uint *)(cp + rowa + q * 8) = mma_pack(acc[q].x, acc[q].y);
        *(__global uint *)(cp + rowb + q * 8) = mma_pack(acc[q].z, acc[q].w);
#else
        *(__global float2 *)(cp + rowa + q * 8) = acc[q].xy;
        *(__global float2 *)(cp + rowb + q * 8) = acc[q].zw;
#endif
      }
#endif
    }
    { /* Each work-item its half of the step: the second half (in walking
       * order) first sums the first's w, in the same order as one walk
       * would. The split is in registers. */
      float run = 0.0f;
      float av[SB / 2], wv[SB / 2]; /* loads first: nothing waits on a store */
#if RW_AW_REGS
      if (part) MMA_UNROLL for (int q = 0; q < SB / 2; ++q) run += nw0[q];
      MMA_UNROLL for (int j = 0; j < SB / 2; ++j) av[j] = na[j], wv[j] = nw[j];
      if (n + 1 < nsteps) RW_FETCH(n + 1);
#else
      if (part)
        MMA_UNROLL for (int q = 0; q < SB / 2; ++q)
          run += FCL_RAW_F32(w_s[buf][(grad ? q : SB - 1 - q) * HK + row]);
      MMA_UNROLL for (int j = 0; j < SB / 2; ++j) {
        const int q = part * (SB / 2) + j, x = (grad ? q : SB - 1 - q) * HK + row;
        av[j] = FCL_RAW_F32(a_s[buf][x]), wv[j] = FCL_RAW_F32(w_s[buf][x]);
      }
#endif
      MMA_UNROLL for (int j = 0; j < SB / 2; ++j) {
        const int q = part * (SB / 2) + j, t = grad ? q : SB - 1 - q;
        const float xa = ascale * av[j] * mma_exp2(run * M_LOG2E_F); /* run <= 0 */
        const ushort hi = mma_round(xa);
        ad_s[0][t * LDSA + row] = hi;
        ad_s[1][t * LDSA + row] = mma_round_lo(xa, hi);
        run += wv[j];
      }
      if (part) eg_s[row] = exp(run), wsum += run;
    }
#if MMA_SPLIT
    for (int e = lid; e < SB * HV; e += SWG) {
      const int t = e / HV, x = t * LDSB + e - t * HV;
      rw_st16(b16[0], x, SB * LDSB, b_s[buf][x]);
    }
    __local const ushort *bop = b16[0];
#else
    __local const ushort *bop = b_s[buf];
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    const float ea = eg_s[warp * 16 + g], eb = eg_s[warp * 16 + g + 8];
    MMA_UNROLL for (int q = 0; q < NTS; ++q) acc[q] *= (float4)(ea, ea, eb, eb);
    MMA_UNROLL for (int kk = 0; kk < SB / 16; ++kk) {
      /* A = the step's decayed a, transposed: rows are state rows. */
      const int ao = (kk * 16 + (lane >> 4) * 8 + (lane & 7)) * LDSA + warp * 16 +
                     ((lane >> 3) & 1) * 8;
      const uint4 ah = mma_ldsm_x4_t(ad_s[0], ao), al = mma_ldsm_x4_t(ad_s[1], ao);
      MMA_UNROLL for (int np = 0; np < HV / 16; ++np) {
        const int bo = (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LDSB + np * 16 +
                       (lane >> 4) * 8;
        const uint4 bf = mma_ldsm_x4_t(bop, bo);
#if MMA_SPLIT_PRODUCTS
        const uint4 bl = mma_ldsm_x4_t(bop + SB * LDSB, bo);
        acc[2 * np] = mma_16816(ah, bl.xy, acc[2 * np]);
        acc[2 * np + 1] = mma_16816(ah, bl.zw, acc[2 * np + 1]);
#endif
        acc[2 * np] = mma_16816(ah, bf.xy, mma_16816(al, bf.xy, acc[2 * np]));
        acc[2 * np + 1] = mma_16816(ah, bf.zw, mma_16816(al, bf.zw, acc[2 * np + 1]));
      }
    }
  }
#undef RW_ISSUE
#undef RW_STEP_P0
#undef RW_FETCH
#undef RW_AT
  if (ends) {
    __global float *e = seg_e + (long)sg * K_DIM * V_DIM;
    MMA_UNROLL for (int q = 0; q < NTS; ++q) {
      *(__global float2 *)(e + rowa + q * 8) = acc[q].xy;
      *(__global float2 *)(e + rowb + q * 8) = acc[q].zw;
    }
    if (part && j0 == 0) seg_w[(long)sg * K_DIM + i0 + row] = wsum;
  } else if ((flags & RW_HT) && sg == (grad ? 0 : nseg - 1)) {
    const long at = (long)bh * K_DIM * V_DIM;
    MMA_UNROLL for (int q = 0; q < NTS; ++q) {
      *(__global float2 *)(out + at + rowa + q * 8) = acc[q].xy;
      *(__global float2 *)(out + at + rowb + q * 8) = acc[q].zw;
    }
  }
}
