/* requires: attention/attention_abi.h common/dtype.cl */
/* fcl_attention_merge, one part a launch (prepend attention_abi.h and
 * dtype.cl): work-item (t * heads_q + h, b) folds part i's row into the
 * running result acc_o (normalised, f32) and acc_lse, and the last launch
 * writes o and lse. Parts and o each have their own dtype (a run-time
 * argument: 0 f32, 1 f16, 2 bf16). A work-item reads a whole row before it
 * writes it, so o and lse may be the first part's buffers. Varlen indices
 * are checked against tokens and lse_len (the views' and lse buffers'
 * extents): nothing outside them is touched. */
inline float merge_load(const __global void *p, long i, int dtype) {
  if (dtype == 1) return vload_half((size_t)i, (const __global half *)p);
  if (dtype == 2) return fcl_bf16_to_f32(((const __global ushort *)p)[i]);
  return ((const __global float *)p)[i];
}
inline void merge_store(__global void *p, long i, int dtype, float x) {
  if (dtype == 1) vstore_half_rte(x, (size_t)i, (__global half *)p);
  else if (dtype == 2) ((__global ushort *)p)[i] = fcl_f32_to_bf16(x);
  else ((__global float *)p)[i] = x;
}

__kernel void fcl_attention_merge_step(
    const __global void *part, const __global float *part_lse, __global float *acc_o,
    __global float *acc_lse, __global void *o, __global float *lse,
    const __global int *cu_q, long p_off, long p_sb, long p_ss, long p_sh, int p_dtype,
    long o_off, long o_sb, long o_ss, long o_sh, int o_dtype, int batch, int seqlen_q,
    int heads_q, int head_dim_v, long tokens, long lse_len, int flags, int step) {
  const int th = get_global_id(0), b = get_global_id(1);
  if (th >= seqlen_q * heads_q) return; /* dimension 0 is rounded up to its work-group */
  const int t = th / heads_q, h = th % heads_q;
  int n = seqlen_q;
  long tok = -1, li = ((long)b * heads_q + h) * seqlen_q + t; /* lse: [b, h, t] */
  if (flags & FCL_ATTN_VARLEN) { /* checked on the device: never past tokens */
    const int t0 = cu_q[b], t1 = cu_q[b + 1], total = cu_q[batch];
    const bool ok = t0 >= 0 && t1 >= t0 && t1 <= total && (long)total <= tokens;
    n = ok ? t1 - t0 : 0;
    tok = t0 + t;
    li = (long)h * total + tok; /* [h, total] */
  }
  if (t >= n || li < 0 || li >= lse_len) return;
  const long pr = p_off + (tok >= 0 ? tok * p_ss : (long)b * p_sb + (long)t * p_ss) + h * p_sh;
  const long ar = ((long)b * seqlen_q + t) * heads_q + h; /* the running row */
  const float li_part = part_lse[li];
  float m_old = (step & FCL_MERGE_FIRST) ? -INFINITY : acc_lse[ar];
  const float m = fmax(m_old, li_part);
  float w_old = 0.0f, w_new = 0.0f, lse_new = -INFINITY;
  if (m > -INFINITY) {
    w_old = exp(m_old - m);
    w_new = exp(li_part - m);
    const float sum = w_old + w_new;
    lse_new = m + log(sum);
    w_old /= sum;
    w_new /= sum;
  }
  for (int d = 0; d < head_dim_v; ++d) {
    const float x = merge_load(part, pr + d, p_dtype);
    const float a = (step & FCL_MERGE_FIRST) ? 0.0f : acc_o[ar * head_dim_v + d];
    /* A weight of 0 never multiplies a part's inf or NaN into the result. */
    float y = (w_new > 0.0f ? w_new * x : 0.0f) + (w_old > 0.0f ? w_old * a : 0.0f);
    if (step & FCL_MERGE_LAST) {
      const long orow = o_off + (tok >= 0 ? tok * o_ss : (long)b * o_sb + (long)t * o_ss) +
                        h * o_sh;
      merge_store(o, orow + d, o_dtype, y);
    } else {
      acc_o[ar * head_dim_v + d] = y;
    }
  }
  if (step & FCL_MERGE_LAST) {
    if (flags & FCL_ATTN_LSE) lse[li] = lse_new;
  } else {
    acc_lse[ar] = lse_new;
  }
}
