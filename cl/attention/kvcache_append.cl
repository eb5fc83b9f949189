/* requires: attention/kvcache_format.cl */
/* The cache's layout and what an append needs besides the buffers, for
 * kv_append_elem (the append kernel's and the decode kernels' fused
 * append, each from its own scalars). */
typedef struct {
  long4 kn, vn, kc, vc; /* views (offset, batch, token, head strides) of k_new, v_new, caches */
  int   head_dim, head_dim_v, capacity, page_size, num_pages, pages_per_seq;
  int   rotary_dim, rotary_positions, scale_heads, kv_flags;
} kv_append_args;

/* Element d of new token t's key (rotated) and value, kv head hk, of
 * sequence b (s) to cache position c + t; for a block format, d = 0, 32, ...
 * write the block of values d .. d + 31 (quantized from all 32) and the
 * others nothing. */
inline __attribute__((always_inline)) void kv_append_elem(int d, int t, int b, int hk, const kv_seq *s,
                           const __global fcl_elem *k_new, const __global fcl_elem *v_new,
                           __global kc_elem *k_cache, __global vc_elem *v_cache,
                           const __global int *block_table, const __global float *rcos,
                           const __global float *rsin, const __global float *k_scale,
                           const __global float *v_scale, const kv_append_args *a) {
  const int pos = s->c + t, kv_flags = a->kv_flags, scale_heads = a->scale_heads;
  if (t >= s->n || pos >= a->capacity || (!(kv_flags & FCL_KV_PAGED) && s->row < 0)) return;
  const bool k_block = KV_BLOCK_FMT(KV_K_FMT), v_block = KV_BLOCK_FMT(KV_V_FMT);
  if (d < a->head_dim && (!k_block || d % 32 == 0)) {
    const long src = kv_token_index(s, b, t, hk, a->kn.s0, a->kn.s1, a->kn.s2, a->kn.s3);
    const long dst = kv_cache_index(s, b, pos, kv_flags, block_table, a->pages_per_seq,
                                    a->num_pages, a->page_size, KC_IDX_OFF(a->kc.s0), a->kc.s1,
                                    a->kc.s2);
    float x[32];
    const int n = k_block ? 32 : 1;
    for (int e = 0; e < n; ++e) {
      const int de = d + e;
      x[e] = FCL_LOAD(k_new, src + de);
      if (kv_rotates(de, pos, kv_flags, a->rotary_dim, a->rotary_positions))
        x[e] = kv_rotate(x[e], FCL_LOAD(k_new, src + kv_partner(de, a->rotary_dim, kv_flags)),
                         de, pos, a->rotary_dim, kv_flags, rcos, rsin);
    }
    if (dst >= 0) {
      const long i = dst + (long)hk * a->kc.s3 + d;
#if KV_BLOCK_FMT(KV_K_FMT)
      __global uchar *blk = k_cache + a->kc.s0 + i / 32 * KV_BLOCK_BYTES(KV_K_FMT);
      if (KV_K_FMT == FCL_KV_Q8_0) kvq_store_q8_0(blk, x);
      else kvq_store_q4_0(blk, x);
#elif KV_K_FMT > 2
      k_cache[i] = fcl_f32_to_fp8(fcl_div_rn(x[0], KV_K_SCALE(hk)), KV_K_FMT);
#else
      FCL_STORE(k_cache, i, x[0]);
#endif
    }
  }
  if (d < a->head_dim_v && (!v_block || d % 32 == 0)) {
    const long src = kv_token_index(s, b, t, hk, a->vn.s0, a->vn.s1, a->vn.s2, a->vn.s3);
    const long dst = kv_cache_index(s, b, pos, kv_flags, block_table, a->pages_per_seq,
                                    a->num_pages, a->page_size, VC_IDX_OFF(a->vc.s0), a->vc.s1,
                                    a->vc.s2);
    float x[32];
    const int n = v_block ? 32 : 1;
    for (int e = 0; e < n; ++e) x[e] = FCL_LOAD(v_new, src + d + e);
    if (dst >= 0) {
      const long i = dst + (long)hk * a->vc.s3 + d;
#if KV_BLOCK_FMT(KV_V_FMT)
      __global uchar *blk = v_cache + a->vc.s0 + i / 32 * KV_BLOCK_BYTES(KV_V_FMT);
      if (KV_V_FMT == FCL_KV_Q8_0) kvq_store_q8_0(blk, x);
      else kvq_store_q4_0(blk, x);
#elif KV_V_FMT > 2
      v_cache[i] = fcl_f32_to_fp8(fcl_div_rn(x[0], KV_V_SCALE(hk)), KV_V_FMT);
#else
      FCL_STORE(v_cache, i, x[0]);
#endif
    }
  }
}

/* Appends the new tokens' keys (rotated) and values to a KV cache
 * (prepend kvcache_format.cl): work-item (d, t, b * heads_kv + hk) does
 * kv_append_elem. The attention kernel runs after it on the same in-order
 * queue. */
__kernel void fcl_kv_append(const __global fcl_elem *k_new, const __global fcl_elem *v_new,
                            __global kc_elem *k_cache, __global vc_elem *v_cache,
                            const __global int *cache_seqlens, const __global int *batch_idx,
                            const __global int *block_table, const __global int *cu_q,
                            const __global float *rcos, const __global float *rsin,
                            const __global float *k_scale, const __global float *v_scale,
                            const fcl_kv_append_scalars kv_args_) {
  FCL_KV_APPEND_SCALARS(KV_UNPACK_L_, KV_UNPACK_I_, KV_UNPACK_F_)
  const int d = get_global_id(0), t = get_global_id(1);
  const int b = get_global_id(2) / heads_kv, hk = get_global_id(2) % heads_kv;
  const kv_seq s = kv_seq_info(b, kv_flags, flags, cache_seqlens, batch_idx, cu_q, seqlen_q,
                               capacity, cache_batch, 0, q_tokens);
  const kv_append_args a = {(long4)(kn_off, kn_sb, kn_ss, kn_sh), (long4)(vn_off, vn_sb, vn_ss, vn_sh),
                            (long4)(kc_off, kc_sb, kc_ss, kc_sh), (long4)(vc_off, vc_sb, vc_ss, vc_sh),
                            head_dim, head_dim_v, capacity, page_size, num_pages, pages_per_seq,
                            rotary_dim, rotary_positions, scale_heads, kv_flags};
  kv_append_elem(d, t, b, hk, &s, k_new, v_new, k_cache, v_cache, block_table, rcos, rsin,
                 k_scale, v_scale, &a);
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

/* VEC values x to p + i (i a multiple of VEC) in q's dtype: one vector
 * store of 8 where VEC is 8 (vstore_half8 and vstore8 need only the
 * element's alignment). */
inline void kv_store_vec(__global fcl_elem *p, long i, const float *x) {
#if VEC == 8 && FCL_DTYPE == 1
  vstore_half8_rte(vload8(0, x), 0, p + i);
#elif VEC == 8 && FCL_DTYPE == 2
  vstore8((ushort8)(fcl_f32_to_bf16(x[0]), fcl_f32_to_bf16(x[1]), fcl_f32_to_bf16(x[2]),
                    fcl_f32_to_bf16(x[3]), fcl_f32_to_bf16(x[4]), fcl_f32_to_bf16(x[5]),
                    fcl_f32_to_bf16(x[6]), fcl_f32_to_bf16(x[7])),
          0, p + i);
#else
  FCL_UNROLL for (int e = 0; e < VEC; ++e) FCL_STORE(p, i + e, x[e]);
#endif
}

/* Chunked prefill on a paged cache, one mapped by cache_batch_idx, or a
 * quantized one: work-item (d, pos, b * heads_kv + hk) copies elements
 * VEC d .. VEC d + VEC - 1 of K and V at position pos < c + n of sequence
 * b into contiguous rows (b, pos, hk) of k_out and v_out in q's dtype
 * (dequantized, times the fp8 scales), which the forward's kernels then
 * read (a page id out of range copies zeros). VEC values a load, as the
 * decode kernel's (the host chose VEC so that the head dims and the
 * caches' views allow it): one element a work-item made the H100's q8_0
 * prefill of 512 tokens on 8192 cached ones 1.36x the f16 cache's time. */
__kernel void fcl_kv_gather(
    const __global kc_elem *k_cache, const __global vc_elem *v_cache,
    __global fcl_elem *k_out, __global fcl_elem *v_out, const __global int *cache_seqlens,
    const __global int *batch_idx, const __global int *block_table,
    const __global float *k_scale, const __global float *v_scale, long kc_off, long kc_sb,
    long kc_ss, long kc_sh, long vc_off, long vc_sb, long vc_ss, long vc_sh, long ko_sb,
    long ko_ss, long ko_sh, long vo_off, long vo_sb, long vo_ss, long vo_sh, int head_dim,
    int head_dim_v, int heads_kv, int seqlen_q, int capacity, int cache_batch,
    int page_size, int num_pages, int pages_per_seq, int kv_flags, int scale_heads) {
  const int d = VEC * (int)get_global_id(0), pos = get_global_id(1);
  const int b = get_global_id(2) / heads_kv, hk = get_global_id(2) % heads_kv;
  const kv_seq s = kv_seq_info(b, kv_flags, 0, cache_seqlens, batch_idx, cache_seqlens,
                               seqlen_q, capacity, cache_batch, 0, 0);
  if (pos >= s.sk) return;
  float x[VEC];
  if (d < head_dim) {
    const long src = kv_cache_index(&s, b, pos, kv_flags, block_table, pages_per_seq,
                                    num_pages, page_size, KC_IDX_OFF(kc_off), kc_sb, kc_ss);
    if (src >= 0) {
      const kc_raw r = KC_LOAD(k_cache, kc_off, src + (long)hk * kc_sh + d);
      KC_CONVERT(x, r);
      FCL_UNROLL for (int e = 0; e < VEC; ++e) x[e] *= KV_K_SCALE(hk);
    } else {
      FCL_UNROLL for (int e = 0; e < VEC; ++e) x[e] = 0.0f;
    }
    kv_store_vec(k_out, (long)b * ko_sb + (long)pos * ko_ss + (long)hk * ko_sh + d, x);
  }
  if (d < head_dim_v) {
    const long src = kv_cache_index(&s, b, pos, kv_flags, block_table, pages_per_seq,
                                    num_pages, page_size, VC_IDX_OFF(vc_off), vc_sb, vc_ss);
    if (src >= 0) {
      const vc_raw r = VC_LOAD(v_cache, vc_off, src + (long)hk * vc_sh + d);
      VC_CONVERT(x, r);
      FCL_UNROLL for (int e = 0; e < VEC; ++e) x[e] *= KV_V_SCALE(hk);
    } else {
      FCL_UNROLL for (int e = 0; e < VEC; ++e) x[e] = 0.0f;
    }
    kv_store_vec(v_out, vo_off + (long)b * vo_sb + (long)pos * vo_ss + (long)hk * vo_sh + d, x);
  }
}
