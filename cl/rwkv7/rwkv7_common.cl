/* requires: rwkv6/rwkv6_common.cl rwkv7/rwkv7_abi.h */
/* Shared pieces of the RWKV7 kernels (after rwkv6_common.cl: its sequences,
 * strided addressing, positions, chunk loads and flags).
 *
 * A work-group owns one (sequence, head) and RW7_BW value columns; its
 * KS x (RW7_BW / VC) work-items each keep a KR x VC block of the state in
 * registers: rows ks*KR .. ks*KR+KR-1. The columns of the state are
 * independent, but the low-rank term (a^T S) and the output (r^T S) sum
 * over every row of a column: over the KS work-items that share it, in
 * local memory (rw7_colsum). */
#ifndef KS
#define KS 1
#endif
#ifndef VC
#define VC 1
#endif
#define KR ((K_DIM + KS - 1) / KS)
#define K_PAD (KS * KR)

/* Sums over the KS row blocks of a column, in local memory: NX quantities
 * a column (at most 2), each VC columns of the caller's block, x[q * VC + n]
 * for column jl0 + n of quantity q. Every work-item of the column gets the
 * same sums (a fixed order: runs are bit-identical). Two barriers; every
 * work-item of the work-group must call it. red holds KS * 2 * RW7_BW
 * floats, red2 RW7_NP * 2 * RW7_BW. Consecutive calls need no barrier
 * between them: a call's first barrier follows every read of red2 of the
 * call before, its second every read of red. */
#define RW7_RP 8                          /* row blocks a stage-1 sum takes */
#define RW7_NP FCL_CEIL_DIV(KS, RW7_RP)   /* stage-1 sums a column           */
#if KS > 1
inline void rw7_colsum(__local float *red, __local float *red2, float *x, int nx, int ks,
                       int jl0, int lid, int wg, int bw) {
  const int W = nx * bw;
  for (int q = 0; q < nx; ++q)
    FCL_UNROLL
    for (int n = 0; n < VC; ++n) red[ks * W + q * bw + jl0 + n] = x[q * VC + n];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int e = lid; e < RW7_NP * W; e += wg) {
    const int part = e / W, c = e - part * W, q1 = min(KS, part * RW7_RP + RW7_RP);
    float acc = 0.0f;
    for (int q = part * RW7_RP; q < q1; ++q) acc += red[q * W + c];
    red2[e] = acc;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int q = 0; q < nx; ++q)
    FCL_UNROLL
    for (int n = 0; n < VC; ++n) {
      float acc = 0.0f;
      for (int part = 0; part < RW7_NP; ++part) acc += red2[part * W + q * bw + jl0 + n];
      x[q * VC + n] = acc;
    }
}
#define RW7_COLSUM(x, nx) rw7_colsum(red_s, red2_s, x, nx, ks, jl0, lid, RW7_WG, RW7_BW)
#define RW7_RED_LOCAL \
  __local float red_s[KS * 2 * RW7_BW], red2_s[RW7_NP * 2 * RW7_BW]
#else
#define RW7_COLSUM(x, nx) ((void)0) /* one row block: the sums are the work-item's */
#define RW7_RED_LOCAL
#endif

/* The operands of a chunk of TC positions in local memory: r, k, a, b and
 * exp(w) by rows of K_PAD, v (and dout) by rows of RW7_BW columns from
 * vb * RW7_BW (zero past the sequence or the dimension). */
#define RW7_LOAD_CHUNK(p0)                                                               \
  do {                                                                                   \
    rw_load_chunk(r_s, K_PAD, K_DIM, r, RW_T(r), 0, s, p0, flags, false, lid, RW7_WG);   \
    rw_load_chunk(e_s, K_PAD, K_DIM, w, RW_T(w), 0, s, p0, flags, true, lid, RW7_WG);    \
    rw_load_chunk(k_s, K_PAD, K_DIM, k, RW_T(k), 0, s, p0, flags, false, lid, RW7_WG);   \
    rw_load_chunk(a_s, K_PAD, K_DIM, a, RW_T(a), 0, s, p0, flags, false, lid, RW7_WG);   \
    rw_load_chunk(b_s, K_PAD, K_DIM, b, RW_T(b), 0, s, p0, flags, false, lid, RW7_WG);   \
    rw_load_chunk(v_s, RW7_BW, V_DIM, v, RW_T(v), vb * RW7_BW, s, p0, flags, false, lid, \
                  RW7_WG);                                                               \
  } while (0)

/* The inputs every RWKV7 kernel takes, in order. */
#define RW7_INPUTS                                                                       \
  const __global fcl_elem *r, const __global fcl_elem *w, const __global fcl_elem *k,    \
      const __global fcl_elem *v, const __global fcl_elem *a, const __global fcl_elem *b, \
      const __global int *cu, RW_TENSOR(r), RW_TENSOR(w), RW_TENSOR(k), RW_TENSOR(v),    \
      RW_TENSOR(a), RW_TENSOR(b), int seqlen, int heads, float scale, int flags,         \
      int p_begin, int p_end

/* Element (i, j) of state bh in an f32 [bh][K][V] buffer, and of chunk c's
 * checkpoint in [bh][nchunk][K][V]. */
#define RW7_ST(bh, i, j) (((long)(bh) * K_DIM + (i)) * V_DIM + (j))
#define RW7_CK(bh, c, i, j) ((((long)(bh) * nchunk + (c)) * K_DIM + (i)) * V_DIM + (j))
