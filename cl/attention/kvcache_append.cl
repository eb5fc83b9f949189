/* requires: attention/kvcache_common.cl */
/* Appends the new tokens' keys (rotated) and values to a KV cache
 * (prepend kvcache_common.cl): work-item (d, t, b * heads_kv + hk) writes
 * element d of token t, kv head hk, of sequence b at position c + t. The
 * attention kernel runs after it on the same in-order queue. */
__kernel void fcl_kv_append(
    const __global fcl_elem *k_new, const __global fcl_elem *v_new, __global fcl_elem *k_cache,
    __global fcl_elem *v_cache, const __global int *cache_seqlens,
    const __global int *batch_idx, const __global int *block_table, const __global int *cu_q,
    const __global float *rcos, const __global float *rsin, long kn_off, long kn_sb,
    long kn_ss, long kn_sh, long vn_off, long vn_sb, long vn_ss, long vn_sh, long kc_off,
    long kc_sb, long kc_ss, long kc_sh, long vc_off, long vc_sb, long vc_ss, long vc_sh,
    int head_dim, int head_dim_v, int heads_kv, int seqlen_q, int capacity, int cache_batch,
    int page_size, int num_pages, int pages_per_seq, long q_tokens, int rotary_dim,
    int rotary_positions, int kv_flags, int flags) {
  const int d = get_global_id(0), t = get_global_id(1);
  const int b = get_global_id(2) / heads_kv, hk = get_global_id(2) % heads_kv;
  const kv_seq s = kv_seq_info(b, kv_flags, flags, cache_seqlens, batch_idx, cu_q, seqlen_q,
                               capacity, cache_batch, 0, q_tokens);
  const int pos = s.c + t;
  if (t >= s.n || pos >= capacity || (!(kv_flags & FCL_KV_PAGED) && s.row < 0)) return;
  if (d < head_dim) {
    const long src = kv_token_index(&s, b, t, hk, kn_off, kn_sb, kn_ss, kn_sh);
    const long dst = kv_cache_index(&s, b, pos, kv_flags, block_table, pages_per_seq,
                                    num_pages, page_size, kc_off, kc_sb, kc_ss);
    float x = FCL_LOAD(k_new, src + d);
    if (kv_rotates(d, pos, kv_flags, rotary_dim, rotary_positions))
      x = kv_rotate(x, FCL_LOAD(k_new, src + kv_partner(d, rotary_dim, kv_flags)), d, pos,
                    rotary_dim, kv_flags, rcos, rsin);
    if (dst >= 0) FCL_STORE(k_cache, dst + (long)hk * kc_sh + d, x);
  }
  if (d < head_dim_v) {
    const long src = kv_token_index(&s, b, t, hk, vn_off, vn_sb, vn_ss, vn_sh);
    const long dst = kv_cache_index(&s, b, pos, kv_flags, block_table, pages_per_seq,
                                    num_pages, page_size, vc_off, vc_sb, vc_ss);
    if (dst >= 0) FCL_STORE(v_cache, dst + (long)hk * vc_sh + d, FCL_LOAD(v_new, src + d));
  }
}

/* Before many new rows run on the forward's kernels: work-item (d, t,
 * b * heads_q + h) writes q rotated at position c + t into q_rot (with
 * FCL_KV_ROTARY), and one work-item a sequence its key count. */
__kernel void fcl_kv_prefill_prep(
    const __global fcl_elem *q, __global fcl_elem *q_rot, __global int *seqused,
    const __global int *cache_seqlens, const __global int *batch_idx,
    const __global float *rcos, const __global float *rsin, long q_off, long q_sb,
    long q_ss, long q_sh, long r_off, long r_sb, long r_ss, long r_sh, int head_dim,
    int heads_q, int seqlen_q, int capacity, int cache_batch, int rotary_dim,
    int rotary_positions, int kv_flags) {
  const int d = get_global_id(0), t = get_global_id(1);
  const int b = get_global_id(2) / heads_q, h = get_global_id(2) % heads_q;
  const kv_seq s = kv_seq_info(b, kv_flags, 0, cache_seqlens, batch_idx, cache_seqlens,
                               seqlen_q, capacity, cache_batch, 0, 0);
  if (d == 0 && t == 0 && h == 0) seqused[b] = s.sk;
  if (!(kv_flags & FCL_KV_ROTARY) || d >= head_dim || t >= seqlen_q) return;
  const long qi = q_off + (long)b * q_sb + (long)t * q_ss + (long)h * q_sh;
  float x = FCL_LOAD(q, qi + d);
  if (kv_rotates(d, s.c + t, kv_flags, rotary_dim, rotary_positions))
    x = kv_rotate(x, FCL_LOAD(q, qi + kv_partner(d, rotary_dim, kv_flags)), d, s.c + t,
                  rotary_dim, kv_flags, rcos, rsin);
  FCL_STORE(q_rot, r_off + (long)b * r_sb + (long)t * r_ss + (long)h * r_sh + d, x);
}

/* Chunked prefill on a paged cache, or one mapped by cache_batch_idx:
 * work-item (d, pos, b * heads_kv + hk) copies element d of K and V at
 * position pos < c + n of sequence b into contiguous rows (b, pos, hk) of
 * k_out and v_out, which the forward's kernels then read (a page id out of
 * range copies zeros). */
__kernel void fcl_kv_gather(
    const __global fcl_elem *k_cache, const __global fcl_elem *v_cache,
    __global fcl_elem *k_out, __global fcl_elem *v_out, const __global int *cache_seqlens,
    const __global int *batch_idx, const __global int *block_table, long kc_off, long kc_sb,
    long kc_ss, long kc_sh, long vc_off, long vc_sb, long vc_ss, long vc_sh, long ko_sb,
    long ko_ss, long ko_sh, long vo_off, long vo_sb, long vo_ss, long vo_sh, int head_dim,
    int head_dim_v, int heads_kv, int seqlen_q, int capacity, int cache_batch,
    int page_size, int num_pages, int pages_per_seq, int kv_flags) {
  const int d = get_global_id(0), pos = get_global_id(1);
  const int b = get_global_id(2) / heads_kv, hk = get_global_id(2) % heads_kv;
  const kv_seq s = kv_seq_info(b, kv_flags, 0, cache_seqlens, batch_idx, cache_seqlens,
                               seqlen_q, capacity, cache_batch, 0, 0);
  if (pos >= s.sk) return;
  if (d < head_dim) {
    const long src = kv_cache_index(&s, b, pos, kv_flags, block_table, pages_per_seq,
                                    num_pages, page_size, kc_off, kc_sb, kc_ss);
    const float x = src >= 0 ? FCL_LOAD(k_cache, src + (long)hk * kc_sh + d) : 0.0f;
    FCL_STORE(k_out, (long)b * ko_sb + (long)pos * ko_ss + (long)hk * ko_sh + d, x);
  }
  if (d < head_dim_v) {
    const long src = kv_cache_index(&s, b, pos, kv_flags, block_table, pages_per_seq,
                                    num_pages, page_size, vc_off, vc_sb, vc_ss);
    const float x = src >= 0 ? FCL_LOAD(v_cache, src + (long)hk * vc_sh + d) : 0.0f;
    FCL_STORE(v_out, vo_off + (long)b * vo_sb + (long)pos * vo_ss + (long)hk * vo_sh + d, x);
  }
}
