/* requires: attention/kvcache_common.cl */
/* The splits' merge, done by the decode kernels themselves (prepend
 * kvcache_tile.cl): after KV_TILE_STORE, each work-group of a tile that
 * has more than one split counts itself in the tile's counter; the last
 * of the tile's splits to arrive merges their partial rows into o and lse
 * and leaves the counter (and, through atomics, the partial results) at
 * zero, as the next launch needs them. Only the splits that have keys (KV_TILE_KEYS'
 * splits) arrive: the others leave the kernel before they load anything.
 *
 * Each (row, VEC columns) item of the tile is merged by KV_MERGE_PARTS
 * work-items when the work-group has that many for each (else a
 * work-item takes KV_MERGE_ITEMS items): part p walks splits p, p + P,
 * ... in order, with the running maximum m of their lse, the sum of
 * exp(lse_sp - m) and the sum of exp(lse_sp - m) o_sp, both rescaled when
 * m grows; then part 0 joins the others' (m, sum, acc) in part order
 * through local memory (lse_s, KV_MERGE_LOCAL floats): whichever
 * work-group merges, the order is the same (run-to-run identical
 * results). o is acc / sum, lse = m + log(sum); a row that no split saw a
 * key of gets o = 0 and lse = -inf. A work-item loads the lse and values
 * of KV_MERGE_CHUNK splits before it adds the first, whatever their
 * weights: the loads of a chunk are in flight together.
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
#define KV_MERGE_NV (HEAD_DIM_V / VEC)     /* a row's items */
#define KV_MERGE_ALL (ROWS * KV_MERGE_NV)  /* the tile's items */
#define KV_MERGE_PARTS (WG >= 2 * KV_MERGE_ALL ? WG / KV_MERGE_ALL : 1)
#define KV_MERGE_ITEMS ((KV_MERGE_ALL + WG - 1) / WG) /* a work-item's items */
/* The parts' (m, sum, acc[VEC]) to join: at most WG * (VEC + 2) floats. */
#define KV_MERGE_LOCAL (KV_MERGE_PARTS > 1 ? KV_MERGE_PARTS * KV_MERGE_ALL * (VEC + 2) : 1)

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

/* Joins a part's running (m2, sum2, acc2) into (m, sum, acc). */
#define KV_MERGE_JOIN(m2, sum2, acc2, m, sum, acc)                                 \
  do {                                                                             \
    const float mn_ = fmax(m, m2);                                                 \
    if (mn_ > -INFINITY) {                                                         \
      const float a_ = exp((m) - mn_), w_ = exp((m2) - mn_);                       \
      (sum) = (sum) * a_ + (sum2) * w_;                                            \
      FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_)                                  \
        (acc)[e_] = (acc)[e_] * a_ + (w_ > 0.0f ? w_ * (acc2)[e_] : 0.0f);         \
      (m) = mn_;                                                                   \
    }                                                                              \
  } while (0)

/* Work-item item k's part p_, row r_, first column c_, token t_ and head
 * h_. */
#define KV_MERGE_ITEM(k)                                                           \
  const int i_ = (KV_MERGE_PARTS > 1 ? lid % KV_MERGE_ALL : lid + (k) * WG);       \
  const int p_ = KV_MERGE_PARTS > 1 ? lid / KV_MERGE_ALL : 0;                      \
  const int r_ = i_ / KV_MERGE_NV, c_ = i_ % KV_MERGE_NV * VEC;                    \
  KV_ROW_TOKEN_HEAD(row0 + r_, t_, h_)

/* Through atomics, the lse that every item of a row read are taken back
 * to zero once all have read them. */
#if KV_PART_PTX
#define KV_PART_ZERO_LSE()
#else
#define KV_PART_ZERO_LSE()                                                         \
  barrier(CLK_GLOBAL_MEM_FENCE);                                                   \
  for (int j_ = lid; j_ < ROWS * splits; j_ += WG) {                               \
    KV_ROW_TOKEN_HEAD(row0 + j_ / splits, t_, h_);                                 \
    if (t_ < s.n) kv_part_take(KV_PART_LSE + KV_PART_INDEX(j_ % splits, t_, h_));  \
  }
#endif

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
        KV_MERGE_ITEM(k_);                                                         \
        if (i_ < KV_MERGE_ALL && p_ < KV_MERGE_PARTS && t_ < s.n)                  \
          for (int sp0_ = p_; sp0_ < splits; sp0_ += KV_MERGE_CHUNK * KV_MERGE_PARTS) { \
            float l_[KV_MERGE_CHUNK], x_[KV_MERGE_CHUNK][VEC];                     \
            FCL_UNROLL for (int u_ = 0; u_ < KV_MERGE_CHUNK; ++u_) {               \
              const int sp_ = sp0_ + u_ * KV_MERGE_PARTS;                          \
              const long pi_ = KV_PART_INDEX(sp_, t_, h_);                         \
              l_[u_] = -INFINITY;                                                  \
              if (sp_ < splits) {                                                  \
                l_[u_] = kv_part_peek(KV_PART_LSE + pi_); /* a row's items share it */ \
                KV_PART_TAKE_VEC(x_[u_], KV_PART_O + pi_ * HEAD_DIM_V + c_);       \
              }                                                                    \
            }                                                                      \
            FCL_UNROLL for (int u_ = 0; u_ < KV_MERGE_CHUNK; ++u_)                 \
              if (sp0_ + u_ * KV_MERGE_PARTS < splits)                             \
                KV_MERGE_ADD(l_[u_], x_[u_], m_[k_], sum_[k_], acc_[k_]);          \
          }                                                                        \
      }                                                                            \
      if (KV_MERGE_PARTS > 1) { /* part 0 joins the others, in order */           \
        KV_MERGE_ITEM(0);                                                          \
        if (p_ < KV_MERGE_PARTS) {                                                 \
          __local float *st_ = (lse_s) + (p_ * KV_MERGE_ALL + i_) * (VEC + 2);     \
          st_[0] = m_[0], st_[1] = sum_[0];                                        \
          FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_) st_[2 + e_] = acc_[0][e_];   \
        }                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                              \
        if (p_ == 0)                                                               \
          for (int q_ = 1; q_ < KV_MERGE_PARTS; ++q_) {                            \
            const __local float *o_ = (lse_s) + (q_ * KV_MERGE_ALL + i_) * (VEC + 2); \
            KV_MERGE_JOIN(o_[0], o_[1], o_ + 2, m_[0], sum_[0], acc_[0]);          \
          }                                                                        \
      }                                                                            \
      FCL_UNROLL for (int k_ = 0; k_ < KV_MERGE_ITEMS; ++k_) {                     \
        KV_MERGE_ITEM(k_);                                                         \
        if (i_ >= KV_MERGE_ALL || p_ > 0 || t_ >= s.n) continue;                   \
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
      KV_PART_ZERO_LSE();                                                          \
      if (lid == 0) atomic_xchg(count_, 0);                                        \
    }                                                                              \
  }
