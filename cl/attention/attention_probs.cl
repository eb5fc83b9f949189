/* requires: attention/attention_common.cl attention/attention_dropout.cl */
/* fcl_attention_probs: the softmax probabilities P = exp(s - lse) of a
 * forward, one work-item an element of [batch, heads_q, seqlen_q, seqlen_k]
 * (for tests and inspection: it holds N^2 values). 0 where a key is not
 * visible or past a sequence's lengths; with FCL_DROPOUT a dropped element
 * holds -P (flash-attn's sign encoding of the mask). The forward's scalars
 * (ATTN_FWD_PARAMS; v and o unused) and head_dim. */
#ifndef FCL_DROPOUT
#define FCL_DROPOUT 0
#endif

__kernel void fcl_attention_probs(ATTN_FWD_PARAMS(fcl_elem), __global float *probs,
                                  int head_dim) {
  ATTN_FWD_UNPACK
  const int j = get_global_id(0), i = get_global_id(1), bh = get_global_id(2);
  if (j >= seqlen_k) return;
  const int b = bh / heads_q, h = bh % heads_q, hk = h / group;
  const attn_block bi = ATTN_BLOCK_INFO(b, h, hk);
  float p = 0.0f;
  if (i < bi.sq && attn_visible(i, j, bi.diag, bi.sk, window_left, window_right)) {
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d)
      dot = fma(FCL_LOAD(q, bi.q + (long)i * q_ss + d), FCL_LOAD(k, bi.k + (long)j * k_ss + d),
                dot);
    float t;
    const float x = attn_score(dot, i, j, bi.diag, qk_scale, softcap_l2, bi.slope_l2, &t);
    const float l = lse[bi.lse + i];
    p = l == -INFINITY ? 0.0f : exp2(x - l * FCL_LOG2E);
#if FCL_DROPOUT
    if (!attn_drop_keep(attn_drop_index(b, h, i, j, heads_q, seqlen_q, seqlen_k),
                        ATTN_FWD_DROPOUT))
      p = -p;
#endif
  }
  probs[(((long)bh * seqlen_q + i) * seqlen_k) + j] = p;
}
