/* requires: rwkv6/rwkv6_abi.h common/dtype.cl */
/* Shared pieces of the RWKV6 kernels (prepend dtype.cl, then this file).
 *
 * Time is walked in "positions" p = 0 .. n-1 in processing order; with
 * reverse the position p is time step n-1-p. Chunks of TC positions pass
 * through local memory; chunk c starts at position c*TC, and checkpoint c is
 * the state before it. */
#ifndef K_DIM
#define K_DIM 64
#endif
#ifndef V_DIM
#define V_DIM 64
#endif
#ifndef TC
#define TC 16
#endif

/* The flags' bits (RW_H0, RW_VARLEN, ...): rwkv6_abi.h. */

/* A launch may cover only positions [p_begin, p_end) (a multiple of TC
 * apart): long sequences are walked in segments on devices that bound the
 * loop iterations of a work-item, with the state carried through the
 * h0 / ht (or dht / dh0) buffers from one launch to the next. */

/* One sequence of one head: token range and strides. */
typedef struct {
  int  n;     /* steps in this sequence        */
  long tok0;  /* first token (for varlen / scratch indexing) */
  int  b, h;
} rw_seq;

inline rw_seq rw_sequence(int bh, int heads, int seqlen,
                          const __global int *cu, int flags) {
  rw_seq s;
  s.b = bh / heads;
  s.h = bh % heads;
  s.n = seqlen;
  s.tok0 = (long)s.b * seqlen;
  if (flags & RW_VARLEN) {
    s.tok0 = cu[s.b];
    s.n = cu[s.b + 1] - cu[s.b];
  }
  return s;
}

/* Element offset of token t (time index) of head h in a strided tensor. */
inline long rw_at(long off, long sb, long ss, long sh, rw_seq s, int t, int flags) {
  if (flags & RW_VARLEN) return off + (s.tok0 + t) * ss + (long)s.h * sh;
  return off + (long)s.b * sb + (long)t * ss + (long)s.h * sh;
}

inline int rw_time(int p, int n, int flags) {
  return (flags & RW_REVERSE) ? n - 1 - p : p;
}

/* Loads in flight per work-item: each batch issues RW_BATCH independent
 * global loads before its first store to local memory. One load at a time
 * (a load, then its store, then the next) waited out the full memory
 * latency for every element: NVIDIA's compiler does not pipeline such a
 * loop, whose trip count depends on the work-item. */
#define RW_BATCH 8

/* Loads positions [p0, p0 + TC) of a [*, dim] operand into dst[TC][ld]
 * (zero past the sequence or the dimension); exp_of stores exp(x). */
inline void rw_load_chunk(__local float *dst, int ld, int dim,
                          const __global fcl_elem *src, long off, long sb,
                          long ss, long sh, int col0, rw_seq s, int p0,
                          int flags, bool exp_of, int lid, int nthreads) {
  const int total = TC * ld;
  for (int e0 = lid; e0 < total; e0 += RW_BATCH * nthreads) {
    float x[RW_BATCH];
    FCL_UNROLL
    for (int b = 0; b < RW_BATCH; ++b) {
      const int e = e0 + b * nthreads, tt = e / ld, c = e - tt * ld, p = p0 + tt;
      x[b] = 0.0f;
      if (e < total && p < s.n && col0 + c < dim)
        x[b] = FCL_LOAD(src, rw_at(off, sb, ss, sh, s, rw_time(p, s.n, flags), flags) + col0 + c);
    }
    FCL_UNROLL
    for (int b = 0; b < RW_BATCH; ++b) {
      const int e = e0 + b * nthreads;
      if (e < total) dst[e] = exp_of ? exp(x[b]) : x[b]; /* exp(0) = 1 past the end */
    }
  }
}

#define RW_TENSOR(n) long n##_off, long n##_sb, long n##_ss, long n##_sh
#define RW_T(n) n##_off, n##_sb, n##_ss, n##_sh
