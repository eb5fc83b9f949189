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
