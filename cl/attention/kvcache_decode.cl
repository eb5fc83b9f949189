/* requires: attention/kvcache_append.cl attention/kvcache_tile.cl */
/* requires: attention/kvcache_split_merge.cl */
/* Attention of a few new query rows against a KV cache, one pass over the
 * keys, on any device (prepend kvcache_tile.cl and kvcache_split_merge.cl):
 * a work-group takes a tile of ROWS query rows of one kv head and one split
 * of its keys; the last of a tile's splits to finish merges them.
 *
 * Per block of BN = WG / TPK * KPW keys: TPK work-items a key, each with a
 * slice of its vectors for KPW keys (the slice of q, in registers, serves
 * all of them), form partial dot products with all rows from 16-byte loads
 * straight from the cache into registers (no staging: each key is read
 * once, a block ahead), the scores
 * and the online softmax go through local memory, then each work-item adds
 * its keys' V vectors into a register tile of ROWS x NDV x VEC outputs; the
 * key groups' tiles are summed at the end in a fixed order (run-to-run
 * identical results).
 *
 * Build: HEAD_DIM, HEAD_DIM_V (multiples of VEC), WG (a power of two),
 * TPK (a power of two dividing WG), KPW, ROWS, VEC (elements a load). */
#define KW (WG / TPK) /* keys a pass of the work-group */
#define BN (KW * KPW)
#define PLD (TPK + 1) /* partial sums a key in local memory, padded */
#define NVK (HEAD_DIM / VEC)
#define KPT ((NVK + TPK - 1) / TPK)
#define NVV (HEAD_DIM_V / VEC)
/* Work-items across V's vectors (a power of two, at most WG), the key
 * groups, the vectors a work-item and the keys a group. */
#define DVT_(n, w) ((n) >= (w) ? (w) : (n) >= (w) / 2 ? (w) / 2 : (n) >= (w) / 4 ? (w) / 4 \
                    : (n) >= (w) / 8 ? (w) / 8 : (n) >= (w) / 16 ? (w) / 16                 \
                    : (n) >= (w) / 32 ? (w) / 32 : (n) >= (w) / 64 ? (w) / 64 : 1)
#define DVT DVT_(NVV, WG)
#define KG (WG / DVT)
#define NDV ((NVV + DVT - 1) / DVT)
#define KPG ((BN + KG - 1) / KG)
/* The key groups' tiles each in a slice of their own (16 KiB at most),
 * summed after one barrier, rather than one group after another. */
#define KV_GROUP_SLICES (KG * ROWS * HEAD_DIM_V <= 4096)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void fcl_kv_decode(KV_DECODE_PARAMS) {
  KV_DECODE_UNPACK
  __local float q_s[ROWS * HEAD_DIM];
  __local float part_s[ROWS * BN * PLD];
  __local float p_s[ROWS * BN];
  __local float alpha_s[ROWS], m_s[ROWS], l_s[ROWS];
  __local int pg_s[3 * BN], sl_s[3 * BN]; /* paged: keys' page ids, slots */
  __local float out_s[(KV_GROUP_SLICES ? KG : 1) * ROWS * HEAD_DIM_V];
  __local float lse_s[KV_MERGE_LOCAL];
  __local int last_s;

  const int lid = get_local_id(0);
  KV_TILE_IDS;
  const kv_seq s = KV_SEQ(b);
  KV_TILE_KEYS(BN);
  if (split >= splits) return; /* no keys: the tile's merge does not wait for it */
  KV_FUSED_APPEND(lo + blk0 * BN, min(hi, lo + blk1 * BN));
  KV_TILE_Q(q_s);

  const float qk_s = qk_scale * KV_K_SCALE(hk); /* an fp8 K's scale folded in */
  const int key = lid / TPK, chunk = lid % TPK; /* K: keys key + i KW, a slice */
  const int vcol = lid % DVT, kgrp = lid / DVT; /* V: a vector column, a key group */
  float m_r = -INFINITY, l_r = 0.0f;            /* row lid's state (lid < ROWS)   */
  float acc[ROWS][NDV][VEC];
  FCL_UNROLL for (int r = 0; r < ROWS; ++r)
    FCL_UNROLL for (int n = 0; n < NDV; ++n)
      FCL_UNROLL for (int e = 0; e < VEC; ++e) acc[r][n][e] = 0.0f;

/* This work-item's K vectors of the key block at j0 (zeros past the keys
 * or where a page id is out of range). */
#define LOAD_K(blkx)                                                               \
  do {                                                                             \
    FCL_UNROLL for (int w_ = 0; w_ < KPW; ++w_) {                                  \
      const int j_ = lo + (blkx) * BN + key + w_ * KW;                             \
      const long kb_ = j_ < hi ? kv_slot_index_at(&s, j_, PAGE(blkx, key + w_ * KW), \
                                                  SLOT(blkx, key + w_ * KW), kv_flags, \
                                                  KC_IDX_OFF(k_off), k_sb, k_ss)   \
                               : -1;                                               \
      FCL_UNROLL for (int i_ = 0; i_ < KPT; ++i_) {                                \
        const int vi_ = chunk + i_ * TPK;                                          \
        kr[w_][i_] = KC_ZERO;                                                      \
        if (kb_ >= 0 && vi_ < NVK)                                                 \
          kr[w_][i_] = KC_LOAD(k_cache, k_off, kb_ + (long)hk * k_sh + vi_ * VEC);  \
      }                                                                            \
    }                                                                              \
  } while (0)

/* Paged caches: the page ids of block x's keys and their slots in their
 * pages, read two blocks ahead into one of three places (so no load waits
 * on a page id). */
#define PAGE(x, kk) ((kv_flags & FCL_KV_PAGED) ? pg_s[((x) % 3) * BN + (kk)] : 0)
#define SLOT(x, kk) ((kv_flags & FCL_KV_PAGED) ? sl_s[((x) % 3) * BN + (kk)] : 0)
#define FETCH_PAGES(x)                                                             \
  do {                                                                             \
    if (kv_flags & FCL_KV_PAGED)                                                   \
      for (int i_ = lid; i_ < BN; i_ += WG) {                                      \
        const int j_ = lo + (x) * BN + i_;                                         \
        int pg_ = -1;                                                              \
        if ((x) < blk1 && j_ < hi) {                                               \
          pg_ = block_table[(long)b * pages_per_seq + KV_DIV(j_, page_size)];      \
          if (pg_ >= num_pages) pg_ = -1;                                          \
        }                                                                          \
        pg_s[((x) % 3) * BN + i_] = pg_ < 0 ? -1 : pg_;                            \
        sl_s[((x) % 3) * BN + i_] = KV_MOD(j_, page_size);                         \
      }                                                                            \
  } while (0)

  /* Loads run a block ahead: V of block i and K of block i + 1 are in
   * flight while block i's scores and softmax are formed. */
  kc_raw kr[KPW][KPT];
  FETCH_PAGES(blk0);
  FETCH_PAGES(blk0 + 1);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (blk0 < blk1) LOAD_K(blk0);

  for (int blk = blk0; blk < blk1; ++blk) {
    const int j0 = lo + blk * BN;
    FETCH_PAGES(blk + 2); /* its slot's last reader, block blk - 1, is past a barrier */
    vc_raw vr[KPG][NDV];
    FCL_UNROLL for (int i = 0; i < KPG; ++i) {
      const int kk = kgrp + i * KG, j = j0 + kk;
      const long vb = kk < BN && j < hi ? kv_slot_index_at(&s, j, PAGE(blk, kk), SLOT(blk, kk),
                                                           kv_flags, VC_IDX_OFF(v_off), v_sb,
                                                           v_ss)
                                        : -1;
      FCL_UNROLL for (int n = 0; n < NDV; ++n) {
        const int vi = vcol + n * DVT;
        vr[i][n] = VC_ZERO;
        if (vb >= 0 && vi < NVV)
          vr[i][n] = VC_LOAD(v_cache, v_off, vb + (long)hk * v_sh + vi * VEC);
      }
    }
    { /* partial dot products of KPW keys with every row */
      float dots[KPW][ROWS];
      FCL_UNROLL for (int w = 0; w < KPW; ++w)
        FCL_UNROLL for (int r = 0; r < ROWS; ++r) dots[w][r] = 0.0f;
      FCL_UNROLL for (int i = 0; i < KPT; ++i) {
        const int vi = chunk + i * TPK;
        if (vi < NVK) {
          FCL_UNROLL for (int w = 0; w < KPW; ++w) {
            float x[VEC];
            KC_CONVERT(x, kr[w][i]);
            FCL_UNROLL for (int r = 0; r < ROWS; ++r)
              FCL_UNROLL for (int e = 0; e < VEC; ++e)
                dots[w][r] = fma(x[e], q_s[r * HEAD_DIM + vi * VEC + e], dots[w][r]);
          }
        }
      }
      FCL_UNROLL for (int w = 0; w < KPW; ++w)
        FCL_UNROLL for (int r = 0; r < ROWS; ++r)
          part_s[(r * BN + key + w * KW) * PLD + chunk] = dots[w][r];
    }
    if (blk + 1 < blk1) LOAD_K(blk + 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = lid; i < ROWS * BN; i += WG) { /* scores, log2 domain */
      const int r = i / BN, kk = i % BN, j = j0 + kk, g = row0 + r;
      KV_ROW_TOKEN_HEAD(g, t, h);
      float x = -INFINITY;
      if (t < s.n && j < hi && attn_visible(t, j, s.diag, s.sk, window_left, window_right)) {
        float sum = 0.0f, tt;
        for (int c = 0; c < TPK; ++c) sum += part_s[(r * BN + kk) * PLD + c];
        const float slope = (flags & FCL_ATTN_ALIBI) ? alibi[h] * FCL_LOG2E : 0.0f;
        x = attn_score(sum, t, j, s.diag, qk_s, softcap_l2, slope, &tt);
      }
      p_s[i] = x;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < ROWS) { /* online softmax of row lid */
      float mx = -INFINITY;
      for (int kk = 0; kk < BN; ++kk) mx = fmax(mx, p_s[lid * BN + kk]);
      const float mn = fmax(m_r, mx), mu = mn == -INFINITY ? 0.0f : mn;
      const float al = exp2(m_r - mu);
      float sum = 0.0f;
      for (int kk = 0; kk < BN; ++kk) {
        const float p = exp2(p_s[lid * BN + kk] - mu);
        p_s[lid * BN + kk] = p;
        sum += p;
      }
      l_r = l_r * al + sum;
      m_r = mn;
      alpha_s[lid] = al;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* O = O * alpha + P V over this key group's keys */
    FCL_UNROLL for (int r = 0; r < ROWS; ++r) {
      const float al = alpha_s[r];
      FCL_UNROLL for (int n = 0; n < NDV; ++n)
        FCL_UNROLL for (int e = 0; e < VEC; ++e) acc[r][n][e] *= al;
    }
    FCL_UNROLL for (int i = 0; i < KPG; ++i) {
      const int kk = kgrp + i * KG;
      if (kk < BN)
        FCL_UNROLL for (int n = 0; n < NDV; ++n) {
          float x[VEC];
          VC_CONVERT(x, vr[i][n]);
          FCL_UNROLL for (int r = 0; r < ROWS; ++r) {
            const float p = p_s[r * BN + kk];
            FCL_UNROLL for (int e = 0; e < VEC; ++e) acc[r][n][e] = fma(p, x[e], acc[r][n][e]);
          }
        }
    }
  }
#undef LOAD_K
#undef FETCH_PAGES
#undef PAGE
#undef SLOT

  /* The key groups' tiles summed in a fixed order, then normalised. */
  if (lid < ROWS) m_s[lid] = m_r, l_s[lid] = l_r;
#if KV_GROUP_SLICES
  FCL_UNROLL for (int r = 0; r < ROWS; ++r)
    FCL_UNROLL for (int n = 0; n < NDV; ++n) {
      const int vi = vcol + n * DVT;
      if (vi < NVV)
        FCL_UNROLL for (int e = 0; e < VEC; ++e)
          out_s[(kgrp * ROWS + r) * HEAD_DIM_V + vi * VEC + e] = acc[r][n][e];
    }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* Element i is this work-item's to sum and then to store. */
  for (int i = lid; i < ROWS * HEAD_DIM_V; i += WG) {
    float x = out_s[i];
    for (int grp = 1; grp < KG; ++grp) x += out_s[grp * ROWS * HEAD_DIM_V + i];
    out_s[i] = x;
  }
#else
  for (int grp = 0; grp < KG; ++grp) {
    if (kgrp == grp) {
      FCL_UNROLL for (int r = 0; r < ROWS; ++r)
        FCL_UNROLL for (int n = 0; n < NDV; ++n) {
          const int vi = vcol + n * DVT;
          if (vi < NVV)
            FCL_UNROLL for (int e = 0; e < VEC; ++e) {
              const int i = r * HEAD_DIM_V + vi * VEC + e;
              out_s[i] = (grp == 0 ? 0.0f : out_s[i]) + acc[r][n][e];
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif
  KV_TILE_STORE(out_s, m_s, l_s);
  KV_SPLIT_MERGE(&last_s, lse_s);
}
