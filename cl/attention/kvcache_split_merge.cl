/* The splits' merge, done by the decode kernels themselves (prepend
 * kvcache_tile.cl): after KV_TILE_STORE, each work-group of a tile that
 * has more than one split counts itself in the tile's counter; the last
 * of the tile's splits to arrive merges their partial rows into o and lse
 * and leaves the counter and the partial results at zero, as the next
 * launch needs them. Only the splits that have keys (KV_TILE_KEYS'
 * splits) arrive: the others leave the kernel before they load anything.
 *
 * Work-item (row, VEC columns) of the merging work-group walks the splits
 * in order, whichever work-group merges (run-to-run identical results),
 * with the running maximum m of their lse, the sum of exp(lse_sp - m) and
 * the sum of exp(lse_sp - m) o_sp, both rescaled when m grows: o is their
 * quotient, lse = m + log(sum); a row that no split saw a key of gets
 * o = 0 and lse = -inf. The lse of KV_MERGE_STAGE splits at a time go
 * through local memory (lse_s, KV_MERGE_LOCAL floats), each read once; a
 * work-item loads its values of KV_MERGE_CHUNK splits before it adds the
 * first, whatever their weights: the loads of a chunk are in flight
 * together.
 *
 * Visibility between work-groups: the partial results are written and
 * read as kvcache_tile.cl says (atomics, or KV_PART_PTX's plain stores and
 * L2 loads); every work-item fences its writes before the work-group's
 * barrier, one work-item counts, the count goes to the others through
 * local memory (last_s, a __local int), and the merging work-group fences
 * again before it reads the other splits' rows. */
#ifndef KV_MERGE_CHUNK
#define KV_MERGE_CHUNK 4
#endif
#define KV_MERGE_STAGE                                                             \
  (WG / ROWS > KV_MERGE_CHUNK ? WG / ROWS / KV_MERGE_CHUNK * KV_MERGE_CHUNK : KV_MERGE_CHUNK)
#define KV_MERGE_LOCAL (ROWS * KV_MERGE_STAGE)
#define KV_MERGE_NV (HEAD_DIM_V / VEC)                 /* a row's work-items */
#define KV_MERGE_ITEMS ((ROWS * KV_MERGE_NV + WG - 1) / WG) /* a work-item's (row, columns) */

/* Adds split values x with lse l to a row's running m, sum and acc[VEC]. */
#define KV_MERGE_ADD(l, x, m, sum, acc)                                            \
  do {                                                                             \
    const float mn_ = fmax(m, l);                                                  \
    if (mn_ > -INFINITY) {                                                         \
      const float a_ = exp((m) - mn_), w_ = exp((l) - mn_);                        \
      (sum) = (sum) * a_ + w_;                                                     \
      FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_) {                                \
        (acc)[e_] *= a_;                                                           \
        if (w_ > 0.0f) (acc)[e_] = fma(w_, (x)[e_], (acc)[e_]);                    \
      }                                                                            \
      (m) = mn_;                                                                   \
    }                                                                              \
  } while (0)

/* Work-item item k's row r_, first column c_, token t_ and head h_. */
#define KV_MERGE_ITEM(k)                                                           \
  const int i_ = lid + (k) * WG, r_ = i_ / KV_MERGE_NV, c_ = i_ % KV_MERGE_NV * VEC; \
  const int t_ = (row0 + r_) / group, h_ = hk * group + (row0 + r_) % group

#define KV_SPLIT_MERGE(last_s, lse_s)                                              \
  if (splits > 1) {                                                                \
    __global int *count_ =                                                         \
        counters + ((long)b * get_num_groups(1) + get_group_id(1)) * heads_kv + hk; \
    KV_PART_FENCE();                                                               \
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);                           \
    if (lid == 0) *(last_s) = atomic_inc(count_) == splits - 1;                    \
    barrier(CLK_LOCAL_MEM_FENCE);                                                  \
    if (*(last_s)) {                                                               \
      KV_PART_FENCE();                                                             \
      float m_[KV_MERGE_ITEMS], sum_[KV_MERGE_ITEMS], acc_[KV_MERGE_ITEMS][VEC];   \
      FCL_UNROLL for (int k_ = 0; k_ < KV_MERGE_ITEMS; ++k_) {                     \
        m_[k_] = -INFINITY, sum_[k_] = 0.0f;                                       \
        FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_) acc_[k_][e_] = 0.0f;           \
      }                                                                            \
      for (int st_ = 0; st_ < splits; st_ += KV_MERGE_STAGE) {                     \
        barrier(CLK_LOCAL_MEM_FENCE); /* the last stage's lse are read */          \
        for (int j_ = lid; j_ < KV_MERGE_LOCAL; j_ += WG) {                        \
          const int sp_ = st_ + j_ % KV_MERGE_STAGE, g_ = row0 + j_ / KV_MERGE_STAGE; \
          const int t_ = g_ / group, h_ = hk * group + g_ % group;                 \
          (lse_s)[j_] = sp_ < splits && t_ < s.n                                   \
                            ? kv_part_take(KV_PART_LSE + KV_PART_INDEX(sp_, t_, h_)) \
                            : -INFINITY;                                           \
        }                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                              \
        const int end_ = min(splits, st_ + KV_MERGE_STAGE);                        \
        FCL_UNROLL for (int k_ = 0; k_ < KV_MERGE_ITEMS; ++k_) {                   \
          KV_MERGE_ITEM(k_);                                                       \
          if (i_ < ROWS * KV_MERGE_NV && t_ < s.n)                                 \
            for (int sp0_ = st_; sp0_ < end_; sp0_ += KV_MERGE_CHUNK) {            \
              float x_[KV_MERGE_CHUNK][VEC];                                       \
              FCL_UNROLL for (int u_ = 0; u_ < KV_MERGE_CHUNK; ++u_) {             \
                const long pi_ = KV_PART_INDEX(sp0_ + u_, t_, h_) * HEAD_DIM_V + c_; \
                if (sp0_ + u_ < end_) KV_PART_TAKE_VEC(x_[u_], KV_PART_O + pi_);    \
              }                                                                    \
              FCL_UNROLL for (int u_ = 0; u_ < KV_MERGE_CHUNK; ++u_)               \
                if (sp0_ + u_ < end_)                                              \
                  KV_MERGE_ADD((lse_s)[r_ * KV_MERGE_STAGE + sp0_ + u_ - st_], x_[u_], \
                               m_[k_], sum_[k_], acc_[k_]);                        \
            }                                                                      \
        }                                                                          \
      }                                                                            \
      FCL_UNROLL for (int k_ = 0; k_ < KV_MERGE_ITEMS; ++k_) {                     \
        KV_MERGE_ITEM(k_);                                                         \
        if (i_ >= ROWS * KV_MERGE_NV || t_ >= s.n) continue;                       \
        const float l_ = sum_[k_];                                                 \
        const long oi_ = kv_token_index(&s, b, t_, h_, o_off, o_sb, o_ss, o_sh) + c_; \
        FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_)                                \
          FCL_STORE(o, oi_ + e_, l_ > 0.0f ? acc_[k_][e_] / l_ : 0.0f);            \
        if (c_ == 0 && (flags & FCL_ATTN_LSE)) {                                   \
          const long li_ = kv_lse_index(&s, b, t_, h_, heads_q, seqlen_q, batch, cu_q, \
                                        lse_len, flags);                           \
          if (li_ >= 0) lse[li_] = l_ > 0.0f ? m_[k_] + log(l_) : -INFINITY;       \
        }                                                                          \
      }                                                                            \
      if (lid == 0) atomic_xchg(count_, 0);                                        \
    }                                                                              \
  }
