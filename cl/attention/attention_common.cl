/* The score pipeline and mask shared by the attention kernels (prepend
 * dtype.cl; the kernel file follows). */

/* s = q_i . k_j scaled, soft-capped and ALiBi-biased, in the log2 domain:
 * qk_scale is scale*log2(e), or scale/softcap with a softcap, whose
 * softcap_l2 = softcap*log2(e) (0: none); *t receives tanh of the capped
 * argument (0 without softcap), which the backward pass differentiates. */
inline float attn_score(float s_raw, int i, int j, int diag, float qk_scale,
                        float softcap_l2, float slope_l2, float *t) {
  float x = s_raw * qk_scale;
  *t = 0.0f;
  if (softcap_l2 > 0.0f) {
    *t = tanh(x);
    x = softcap_l2 * *t;
  }
  return x - slope_l2 * (float)abs(i + diag - j);
}

/* Key j visible to query i: inside the sequence and the window (causal is
 * window_right = 0), aligned bottom-right by diag = seqlen_k - seqlen_q. */
inline bool attn_visible(int i, int j, int diag, int sk, int window_left,
                         int window_right) {
  return j < sk && j >= i + diag - window_left && j <= i + diag + window_right;
}

/* The arguments every attention forward kernel starts with, in the order
 * the host sets them (src/attention/attention_args.c); T is the element
 * type the kernel reads q, k and v as. Windows are >= 0 with causal folded
 * in; qk_scale is scale*log2(e), or scale/softcap with a softcap, whose
 * softcap_l2 = softcap*log2(e) (0: none); flags are FCL_ATTN_* bits. */
#define ATTN_FWD_PARAMS(T)                                                       \
  const __global T *q, const __global T *k, const __global T *v,               \
      __global fcl_elem *o, __global float *lse, const __global float *alibi,  \
      const __global int *cu_q, const __global int *cu_k, long q_off, long q_sb, \
      long q_ss, long q_sh, long k_off, long k_sb, long k_ss, long k_sh,       \
      long v_off, long v_sb, long v_ss, long v_sh, long o_off, long o_sb,      \
      long o_ss, long o_sh, long lse_sb, long lse_sh, int seqlen_q,            \
      int seqlen_k, int heads_q, int group, int window_left, int window_right, \
      float qk_scale, float softcap_l2, int flags

/* Where one (batch, query head) of a forward problem lives: its sequence's
 * lengths (varlen: from cu_q, cu_k), the bottom-right offset diag, the
 * element offsets of row 0 of q and o at head h and of k and v at kv head
 * hk, the lse index of its row 0, and its ALiBi slope (log2 domain). */
typedef struct {
  int   sq, sk, diag;
  long  q, k, v, o, lse;
  float slope_l2;
} attn_block;

inline attn_block attn_block_info(int b, int h, int hk, int flags,
                                  const __global int *cu_q, const __global int *cu_k,
                                  const __global float *alibi, int seqlen_q, int seqlen_k,
                                  long q_off, long q_sb, long q_ss, long q_sh,
                                  long k_off, long k_sb, long k_ss, long k_sh,
                                  long v_off, long v_sb, long v_ss, long v_sh,
                                  long o_off, long o_sb, long o_ss, long o_sh,
                                  long lse_sb, long lse_sh) {
  attn_block bi;
  bi.sq = seqlen_q, bi.sk = seqlen_k;
  long q_row0 = (long)b * q_sb, k_row0 = (long)b * k_sb;
  long v_row0 = (long)b * v_sb, o_row0 = (long)b * o_sb;
  long lse_row0 = (long)b * lse_sb;
  if (flags & FCL_ATTN_VARLEN) { /* tokens of all sequences, one after another */
    const int tq = cu_q[b], tk = cu_k[b];
    bi.sq = cu_q[b + 1] - tq;
    bi.sk = cu_k[b + 1] - tk;
    q_row0 = (long)tq * q_ss, o_row0 = (long)tq * o_ss;
    k_row0 = (long)tk * k_ss, v_row0 = (long)tk * v_ss;
    lse_row0 = tq;
  }
  if (flags & FCL_ATTN_SEQUSED_K) { /* a cache row per sequence, its used length */
    bi.sk = clamp(cu_k[b], 0, seqlen_k);
    k_row0 = (long)b * k_sb, v_row0 = (long)b * v_sb;
  }
  bi.diag = bi.sk - bi.sq;
  bi.q = q_off + q_row0 + (long)h * q_sh;
  bi.k = k_off + k_row0 + (long)hk * k_sh;
  bi.v = v_off + v_row0 + (long)hk * v_sh;
  bi.o = o_off + o_row0 + (long)h * o_sh;
  bi.lse = lse_row0 + (long)h * lse_sh;
  bi.slope_l2 = (flags & FCL_ATTN_ALIBI) ? alibi[h] * FCL_LOG2E : 0.0f;
  return bi;
}
#define ATTN_BLOCK_INFO(b, h, hk)                                                \
  attn_block_info(b, h, hk, flags, cu_q, cu_k, alibi, seqlen_q, seqlen_k, q_off, q_sb, \
                  q_ss, q_sh, k_off, k_sb, k_ss, k_sh, v_off, v_sb, v_ss, v_sh, o_off,  \
                  o_sb, o_ss, o_sh, lse_sb, lse_sh)

/* The tensor-core forwards' score of one element in the log2 domain, -inf
 * where not visible (x: the raw product, i and j: row and key). With
 * MMA_GENERAL (softcap, ALiBi or a non-positive scale) scores are
 * transformed one by one; without, the scale is folded into the exponent.
 * Reads full (the tile needs no mask), diag, sk, the window and the score
 * parameters of the kernel. */
#define MMA_SCORE(x, i, j)                                                       \
  do {                                                                           \
    if (MMA_GENERAL) {                                                           \
      float t_;                                                                  \
      x = attn_score(x, i, j, diag, qk_scale, softcap_l2, slope_l2, &t_);        \
    }                                                                            \
    if (!full && !attn_visible(i, j, diag, sk, window_left, window_right))       \
      x = -INFINITY;                                                             \
  } while (0)
#define FWD_VISIBLE(i, j) attn_visible(i, j, diag, sk, window_left, window_right)
