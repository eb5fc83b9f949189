/* requires: attention/kvcache_append.cl */
/* What the decode kernels (kvcache_decode.cl, kvcache_decode_mma.cl)
 * share (prepend kvcache_common.cl): the arguments, a tile's query rows,
 * the keys a split of a tile reads, and the store of a tile's rows (to the
 * output, or to the splits' partial results that kvcache_split_merge.cl
 * merges).
 *
 * A work-group takes ROWS query rows of one kv head (GQA packing: row g is
 * token g / group of query head hk * group + g % group, so the heads of a
 * group share every K/V load) and one of num_splits ranges of the keys
 * (flash-decoding). The macros below expect the kernel's arguments and
 * lid, b, hk, s, row0 and split in scope (KV_TILE_IDS, KV_SEQ).
 * counters: a buffer that is zero between launches (fcl_counters); split,
 * the kernel keeps there the tiles' counts (and the splits' partial rows
 * unless KV_PART_PTX, which keeps them in parts) and leaves it at zero
 * again. */
#define KV_DECODE_PARAMS                                                           \
  const __global fcl_elem *q, __global kc_elem *k_cache, __global vc_elem *v_cache, \
      __global fcl_elem *o, __global float *lse,                                    \
      __global int *counters, __global float *parts, const __global float *alibi,   \
      const __global int *cache_seqlens,                                            \
      const __global int *batch_idx, const __global int *block_table,               \
      const __global int *cu_q, const __global float *rcos, const __global float *rsin, \
      const __global float *k_scale, const __global float *v_scale,                 \
      const __global fcl_elem *k_new, const __global fcl_elem *v_new,               \
      const fcl_kv_decode_scalars kv_args_
/* The kernel's first statement: the scalar arguments by their names. */
#define KV_DECODE_UNPACK FCL_KV_DECODE_SCALARS(KV_UNPACK_L_, KV_UNPACK_I_, KV_UNPACK_F_)

/* The work-group's split, first row, sequence and kv head. The kv heads
 * vary fastest: work-groups launched together read the heads of the same
 * tokens, which lie side by side in a token-major cache, rather than
 * pieces of a head's row scattered over the cache. */
#define KV_TILE_IDS                                                                \
  const int split = KV_DIV((int)get_group_id(0), heads_kv);                        \
  const int hk = (int)get_group_id(0) - split * heads_kv;                          \
  const int row0 = get_group_id(1) * ROWS, b = get_group_id(2)

#define KV_SEQ(b)                                                                  \
  kv_seq_info(b, kv_flags, flags, cache_seqlens, batch_idx, cu_q, seqlen_q, capacity, \
              cache_batch, fixed_len, q_tokens)

/* The fused append (FCL_KV_APPEND_FUSED, which the host sets where the
 * launch has one tile a kv head): the work-group writes the new tokens of
 * its kv head at the positions of [key_lo, key_hi), the keys it reads, as
 * the append kernel would (so each is written by the one work-group that
 * reads it), before it reads any: its barrier orders them before its own
 * loads. */
#ifndef KV_APPEND_FUSED /* the host's build option: 0 compiles the fused append out */
#define KV_APPEND_FUSED 0
#endif
#define KV_FUSED_APPEND(key_lo, key_hi)                                            \
  if (KV_APPEND_FUSED && (kv_flags & FCL_KV_APPEND_FUSED)) {                       \
    const kv_append_args ka_ = {                                                   \
        (long4)(kn_off, kn_sb, kn_ss, kn_sh), (long4)(vn_off, vn_sb, vn_ss, vn_sh), \
        (long4)(k_off, k_sb, k_ss, k_sh), (long4)(v_off, v_sb, v_ss, v_sh),       \
        HEAD_DIM, HEAD_DIM_V, capacity, page_size, num_pages, pages_per_seq,       \
        rotary_dim, rotary_positions, scale_heads, kv_flags};                      \
    const int p0_ = max(s.c, key_lo), p1_ = min(s.sk, key_hi);                     \
    const int w_ = HEAD_DIM > HEAD_DIM_V ? HEAD_DIM : HEAD_DIM_V;                  \
    for (int i_ = lid; i_ < max(0, p1_ - p0_) * w_; i_ += WG)                      \
      kv_append_elem(i_ % w_, p0_ - s.c + i_ / w_, b, hk, &s, k_new, v_new, k_cache, \
                     v_cache, block_table, rcos, rsin, k_scale, v_scale, &ka_);    \
    barrier(CLK_GLOBAL_MEM_FENCE);                                                 \
  }

/* lse's index of token t, head h (as fcl_attention_forward lays it out), or
 * -1 past the buffer. */
inline long kv_lse_index(const kv_seq *s, int b, int t, int h, int heads_q, int seqlen_q,
                         int batch, const __global int *cu_q, long lse_len, int flags) {
  long i = s->tok0 >= 0 ? (long)h * cu_q[batch] + s->tok0 + t
                        : ((long)b * heads_q + h) * seqlen_q + t;
  return i >= 0 && i < lse_len ? i : -1;
}

/* The tile's query rows into q_s[ROWS * HEAD_DIM] (f32), rotated at their
 * positions c + t; zeros for rows past the tokens. */
#define KV_TILE_Q(q_s)                                                             \
  for (int i_ = lid; i_ < ROWS * HEAD_DIM; i_ += WG) {                             \
    const int r_ = i_ / HEAD_DIM, d_ = i_ % HEAD_DIM;                              \
    KV_ROW_TOKEN_HEAD(row0 + r_, t_, h_);                                          \
    float x_ = 0.0f;                                                               \
    if (t_ < s.n) {                                                                \
      const long qi_ = kv_token_index(&s, b, t_, h_, q_off, q_sb, q_ss, q_sh);      \
      x_ = FCL_LOAD(q, qi_ + d_);                                                  \
      if (kv_rotates(d_, s.c + t_, kv_flags, rotary_dim, rotary_positions))        \
        x_ = kv_rotate(x_, FCL_LOAD(q, qi_ + kv_partner(d_, rotary_dim, kv_flags)),  \
                       d_, s.c + t_, rotary_dim, kv_flags, rcos, rsin);            \
    }                                                                              \
    (q_s)[i_] = x_;                                                                \
  }

/* The keys [lo, hi) the tile's rows see, this split's blocks of bn of
 * them, [blk0, blk1), and the tile's splits that have blocks, splits (at
 * least 1; those past it have none): declares the five. Short sequences
 * take fewer splits than num_splits: min_split_keys (> 0) keys or more a
 * split. KV_TILE_KEYS_FROM starts lo at a multiple of al (the keys before
 * the window are masked). */
#define KV_TILE_KEYS(bn) KV_TILE_KEYS_FROM(bn, 1)
#define KV_TILE_KEYS_FROM(bn, al)                                                  \
  const int t_lo_ = KV_DIV(row0, group);                                           \
  const int t_hi_ = min(s.n - 1, KV_DIV(row0 + ROWS - 1, group));                  \
  int lo = 0, hi = 0;                                                              \
  if (t_lo_ < s.n) {                                                               \
    lo = max(0, t_lo_ + s.diag - window_left) / (al) * (al);                       \
    hi = min(s.sk, t_hi_ + s.diag + window_right + 1);                             \
  }                                                                                \
  const int nblk_ = hi > lo ? (hi - lo + (bn) - 1) / (bn) : 0;                     \
  int ns_ = num_splits;                                                            \
  if (min_split_keys > 0)                                                          \
    ns_ = clamp(KV_DIV(hi - lo + min_split_keys - 1, min_split_keys), 1, ns_);     \
  const int per_split_ = (nblk_ + ns_ - 1) / ns_;                                  \
  const int blk0 = split < ns_ ? split * per_split_ : nblk_;                       \
  const int blk1 = min(nblk_, blk0 + per_split_);                                  \
  const int splits = nblk_ > 0 ? (nblk_ + per_split_ - 1) / per_split_ : 1

/* The splits' partial results: the lse of split sp's row of token t,
 * head h at KV_PART_LSE[KV_PART_INDEX], its HEAD_DIM_V values from
 * KV_PART_O[KV_PART_INDEX * HEAD_DIM_V]. Another work-group reads them
 * (the tile's merge, kvcache_split_merge.cl), after the tile's count
 * (KV_PART_FENCE before and after it).
 *
 * Portable: they follow the tiles' counts in counters (one int a kv head,
 * query tile and sequence), f32 bits written and read only through
 * integer atomics: in OpenCL 1.2 atomics are what work-groups see of each
 * other's writes (their caches need not be coherent), and all that
 * Oclgrind's race check accepts between work-groups. Atomics on memory no
 * one wrote would be reads of uninitialised memory: the buffer starts at
 * zero and the merge takes each value back to zero.
 *
 * KV_PART_PTX (NVIDIA, where inline PTX works): in their own buffer,
 * parts, rows first, by plain stores, and read from L2 (ld.global.cg,
 * past the SM's L1, which is not coherent), with PTX's fence.acq_rel.gpu
 * around the count: mem_fence(CLK_GLOBAL_MEM_FENCE) compiles to
 * membar.cta there, which orders nothing between work-groups. Nothing is
 * zeroed: the merge reads only what this launch wrote. */
#ifndef KV_PART_PTX
#define KV_PART_PTX 0
#endif
#define KV_PART_INDEX(sp, t, h) ((((long)(sp) * batch + b) * seqlen_q + (t)) * heads_q + (h))
#define KV_PART_ROWS ((long)num_splits * batch * seqlen_q * heads_q)
#if KV_PART_PTX
#ifndef FCL_ASM
#define FCL_ASM asm
#endif
#define KV_PART_O parts
#define KV_PART_LSE (parts + KV_PART_ROWS * HEAD_DIM_V)
#define KV_PART_FENCE() FCL_ASM volatile("fence.acq_rel.gpu;" ::: "memory")
inline void kv_part_put(__global float *p, float x) { *p = x; }
inline float kv_part_take(__global float *p) {
  float x;
  FCL_ASM volatile("ld.global.cg.f32 %0, [%1];" : "=f"(x) : "l"((ulong)p) : "memory");
  return x;
}
inline float kv_part_peek(__global float *p) { return kv_part_take(p); }
/* n (a multiple of 4) values from p (16-byte aligned). */
#define KV_PART_TAKE_N(x, p, n)                                                      FCL_UNROLL for (int q_ = 0; q_ < (n); q_ += 4)                                       FCL_ASM volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"                                       : "=f"((x)[q_]), "=f"((x)[q_ + 1]), "=f"((x)[q_ + 2]), "=f"((x)[q_ + 3])                      : "l"((ulong)((p) + q_)) : "memory")
#else
#define KV_PART_LSE ((__global float *)counters + (long)batch * get_num_groups(1) * heads_kv)
#define KV_PART_O (KV_PART_LSE + KV_PART_ROWS)
#define KV_PART_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
inline void kv_part_put(__global float *p, float x) {
  atomic_xchg((volatile __global int *)p, as_int(x));
}
inline float kv_part_take(__global float *p) { /* and leaves 0 */
  return as_float(atomic_xchg((volatile __global int *)p, 0));
}
inline float kv_part_peek(__global float *p) { /* leaves it */
  return as_float(atomic_or((volatile __global int *)p, 0));
}
#endif
/* VEC values from p. */
#if KV_PART_PTX && VEC % 4 == 0 && HEAD_DIM_V % 4 == 0
#define KV_PART_TAKE_VEC(x, p) KV_PART_TAKE_N(x, p, VEC)
#else
#define KV_PART_TAKE_VEC(x, p) \
  FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_) (x)[e_] = kv_part_take((p) + e_)
#endif

/* The tile's rows out: out_s[ROWS * HEAD_DIM_V] holds each row's sum of
 * p V (V without its fp8 scale, applied here), m_of[r] its running maximum
 * (log2 domain) and l_of[r] its sum of p:
 * the normalised rows and lse to o and lse, or, when the tile has more
 * than one split, to the partial results. */
#define KV_TILE_STORE(out_s, m_of, l_of)                                           \
  for (int i_ = lid; i_ < ROWS * HEAD_DIM_V; i_ += WG) {                           \
    const int r_ = i_ / HEAD_DIM_V, d_ = i_ % HEAD_DIM_V;                          \
    KV_ROW_TOKEN_HEAD(row0 + r_, t_, h_);                                          \
    if (t_ >= s.n) continue;                                                       \
    const float l_ = (l_of)[r_];                                                   \
    const float val_ = l_ > 0.0f ? (out_s)[i_] * KV_V_SCALE(hk) / l_ : 0.0f;       \
    const float lse_ = l_ > 0.0f ? ((m_of)[r_] + log2(l_)) * FCL_LN2 : -INFINITY;  \
    if (splits > 1) {                                                              \
      const long pi_ = KV_PART_INDEX(split, t_, h_);                               \
      kv_part_put(KV_PART_O + pi_ * HEAD_DIM_V + d_, val_);                        \
      if (d_ == 0) kv_part_put(KV_PART_LSE + pi_, lse_);                           \
    } else {                                                                       \
      FCL_STORE(o, kv_token_index(&s, b, t_, h_, o_off, o_sb, o_ss, o_sh) + d_, val_); \
      if (d_ == 0 && (flags & FCL_ATTN_LSE)) {                                     \
        const long li_ = kv_lse_index(&s, b, t_, h_, heads_q, seqlen_q, batch, cu_q, \
                                      lse_len, flags);                             \
        if (li_ >= 0) lse[li_] = lse_;                                             \
      }                                                                            \
    }                                                                              \
  }
