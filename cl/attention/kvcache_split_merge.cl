/* The splits' partial results of a decode kernel combined into the output
 * (prepend kvcache_tile.cl): work-group (t * heads_q + h, b)
 * of WG work-items takes one output row. The splits' weights go through
 * local memory; work-item (c, g) then sums split group g's share of
 * column vector c (MG = WG / MC groups of independent loads), and the
 * groups are added in a fixed order. */
#define MC (HEAD_DIM_V / VEC >= WG ? WG : HEAD_DIM_V / VEC)
#define MG (WG / MC)
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void fcl_kv_merge_splits(
    KV_DECODE_PARAMS) {
  __local float w_s[FCL_KV_MAX_SPLITS];
  __local float red_s[WG];
  __local float out_s[MG * HEAD_DIM_V];
  const int lid = get_local_id(0), th = get_group_id(0), b = get_group_id(1);
  const int t = th / heads_q, h = th % heads_q;
  const kv_seq s = KV_SEQ(b);
  if (t >= s.n) return; /* uniform over the work-group */
  const long row = ((long)b * seqlen_q + t) * heads_q + h, stride = (long)batch * seqlen_q * heads_q;
  float m = -INFINITY;
  for (int sp = lid; sp < num_splits; sp += WG) m = fmax(m, part_lse[sp * stride + row]);
  red_s[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = WG / 2; w > 0; w /= 2) {
    if (lid < w) red_s[lid] = fmax(red_s[lid], red_s[lid + w]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  m = red_s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  float sum = 0.0f;
  for (int sp = lid; sp < num_splits; sp += WG) {
    const float w = m > -INFINITY ? exp(part_lse[sp * stride + row] - m) : 0.0f;
    w_s[sp] = w;
    sum += w;
  }
  red_s[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = WG / 2; w > 0; w /= 2) {
    if (lid < w) red_s[lid] += red_s[lid + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  sum = red_s[0];
  const int c = lid % MC, g = lid / MC;
  for (int vi = c; vi < HEAD_DIM_V / VEC; vi += MC) {
    float acc[VEC];
    FCL_UNROLL for (int e = 0; e < VEC; ++e) acc[e] = 0.0f;
    for (int sp = g; sp < num_splits; sp += MG) {
      const float w = w_s[sp];
      if (w > 0.0f) {
        const __global float *src = part_o + (sp * stride + row) * HEAD_DIM_V + vi * VEC;
        FCL_UNROLL for (int e = 0; e < VEC; ++e) acc[e] = fma(w, src[e], acc[e]);
      }
    }
    FCL_UNROLL for (int e = 0; e < VEC; ++e) out_s[g * HEAD_DIM_V + vi * VEC + e] = acc[e];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int d = lid; d < HEAD_DIM_V; d += WG) {
    float val = 0.0f;
    for (int gg = 0; gg < MG; ++gg) val += out_s[gg * HEAD_DIM_V + d];
    val = sum > 0.0f ? val / sum : 0.0f;
    FCL_STORE(o, kv_token_index(&s, b, t, h, o_off, o_sb, o_ss, o_sh) + d, val);
    if (d == 0 && (flags & FCL_ATTN_LSE)) {
      const long li = kv_lse_index(&s, b, t, h, heads_q, seqlen_q, batch, cu_q, lse_len, flags);
      if (li >= 0) lse[li] = sum > 0.0f ? m + log(sum) : -INFINITY;
    }
  }
}
