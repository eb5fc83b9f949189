/* requires: attention/attention_abi.h common/dtype.cl */
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
 * window_right = 0), aligned by diag = seqlen_k - seqlen_q + diag_shift
 * (bottom-right without a shift). */
inline bool attn_visible(int i, int j, int diag, int sk, int window_left,
                         int window_right) {
  return j < sk && j >= i + diag - window_left && j <= i + diag + window_right;
}

/* The arguments every attention forward kernel starts with, in the order
 * the host sets them (src/attention/attention_args.c): the buffers, then
 * the scalars in one struct (attention_abi.h), which ATTN_FWD_UNPACK, the
 * kernel's first statement, names. T is the element type the kernel reads
 * q, k and v as; an unused lse, alibi, cu_q or cu_k is NULL. */
#define ATTN_FWD_PARAMS(T)                                                       \
  const __global T *q, const __global T *k, const __global T *v,               \
      __global fcl_elem *o, __global float *lse, const __global float *alibi,  \
      const __global int *cu_q, const __global int *cu_k,                      \
      const fcl_attn_fwd_scalars attn_args_
#define ATTN_UNPACK_L_(n) const long n = attn_args_.n;
#define ATTN_UNPACK_I_(n) const int n = attn_args_.n;
#define ATTN_UNPACK_F_(n) const float n = attn_args_.n;
#define ATTN_FWD_UNPACK FCL_ATTN_FWD_SCALARS(ATTN_UNPACK_L_, ATTN_UNPACK_I_, ATTN_UNPACK_F_)

/* Where one (batch, query head) of a forward problem lives: its sequence's
 * lengths (varlen: from cu_q, cu_k), the offset diag (query i sits at key
 * position i + diag: sk - sq, bottom-right, plus the descriptor's shift), the
 * element offsets of row 0 of q and o at head h and of k and v at kv head
 * hk, the lse index of its row 0, and its ALiBi slope (log2 domain). */
typedef struct {
  int   sq, sk, diag;
  long  q, k, v, o, lse;
  float slope_l2;
} attn_block;

inline attn_block attn_block_info(int b, int h, int hk, int flags,
                                  const __global int *cu_q, const __global int *cu_k,
                                  const __global float *alibi, int seqlen_q, int seqlen_k,
                                  int diag_shift, long q_off, long q_sb, long q_ss, long q_sh,
                                  long k_off, long k_sb, long k_ss, long k_sh,
                                  long v_off, long v_sb, long v_ss, long v_sh,
                                  long o_off, long o_sb, long o_ss, long o_sh,
                                  long lse_sb, long lse_sh) {
  attn_block bi;
  bi.sq = seqlen_q, bi.sk = seqlen_k;
  long q_row0 = (long)b * q_sb, k_row0 = (long)b * k_sb;
  long v_row0 = (long)b * v_sb, o_row0 = (long)b * o_sb;
  long lse_row0 = (long)b * lse_sb;
  if (flags & FCL_ATTN_VARLEN) { /* tokens of all sequences, one after another */
    const int tq = cu_q[b], tk = cu_k[b];
    bi.sq = cu_q[b + 1] - tq;
    bi.sk = cu_k[b + 1] - tk;
    q_row0 = (long)tq * q_ss, o_row0 = (long)tq * o_ss;
    k_row0 = (long)tk * k_ss, v_row0 = (long)tk * v_ss;
    lse_row0 = tq;
  }
  if (flags & FCL_ATTN_SEQUSED_K) { /* a cache row per sequence, its used length */
    bi.sk = clamp(cu_k[b], 0, seqlen_k);
    k_row0 = (long)b * k_sb, v_row0 = (long)b * v_sb;
  }
  bi.diag = bi.sk - bi.sq + diag_shift;
  bi.q = q_off + q_row0 + (long)h * q_sh;
  bi.k = k_off + k_row0 + (long)hk * k_sh;
  bi.v = v_off + v_row0 + (long)hk * v_sh;
  bi.o = o_off + o_row0 + (long)h * o_sh;
  bi.lse = lse_row0 + (long)h * lse_sh;
  bi.slope_l2 = (flags & FCL_ATTN_ALIBI) ? alibi[h] * FCL_LOG2E : 0.0f;
  return bi;
}
#define ATTN_BLOCK_INFO(b, h, hk)                                                \
  attn_block_info(b, h, hk, flags, cu_q, cu_k, alibi, seqlen_q, seqlen_k, diag_shift, q_off, \
                  q_sb, q_ss, q_sh, k_off, k_sb, k_ss, k_sh, v_off, v_sb, v_ss, v_sh, o_off,  \
                  o_sb, o_ss, o_sh, lse_sb, lse_sh)

/* The tensor-core forwards' score of one element in the log2 domain, -inf
 * where not visible (x: the raw product, i and j: row and key). With
 * MMA_GENERAL (softcap, ALiBi or a non-positive scale) scores are
 * transformed one by one; without, the scale is folded into the exponent.
 * Reads full (the tile needs no mask), diag, sk, the window and the score
 * parameters of the kernel. */
#define MMA_SCORE(x, i, j)                                                       \
  do {                                                                           \
    if (MMA_GENERAL) {                                                           \
      float t_;                                                                  \
      x = attn_score(x, i, j, diag, qk_scale, softcap_l2, slope_l2, &t_);        \
    }                                                                            \
    if (!full && !attn_visible(i, j, diag, sk, window_left, window_right))       \
      x = -INFINITY;                                                             \
  } while (0)

/* The tensor-core forwards' two builds and their work list (nf_work,
 * src/attention/nonfinite_flags.c): nf_work[0 .. heads_kv) per-kv-head
 * flags of the host's scans (zero where none ran), nf_work[heads_kv] the
 * count of listed work-groups, then their (query tile, batch x head).
 * Built without FCL_NONFINITE, a kernel runs the whole grid, one query
 * tile a work-group; one whose kv head is flagged, or that found inf or
 * NaN where its masked products would spread them (MMA_FWD_REPORT), lists
 * itself. The build with FCL_NONFINITE then runs a few work-groups that
 * take the listed tiles in turn and redo them. So no scan reads V before
 * the kernel does, and the rare build costs a launch of a few work-groups
 * where nothing is listed. The kernel's body is the loop's. */
#define MMA_FWD_LIST(nf) ((nf) + heads_q / group)
/* (FCL_NONFINITE is the kernel file's: tested where the macro is used) */
#define MMA_FWD_WORK(nf)                                                         \
  for (int wi_ = FCL_NONFINITE ? (int)get_group_id(0) : 0, qblk = 0, bh = 0;     \
       FCL_NONFINITE                                                             \
           ? wi_ < MMA_FWD_LIST(nf)[0] && (qblk = MMA_FWD_LIST(nf)[1 + 2 * wi_], \
                                           bh = MMA_FWD_LIST(nf)[2 + 2 * wi_], 1) \
           : wi_ < 1 && (qblk = get_num_groups(0) - 1 - get_group_id(0), /* long rows first */ \
                         bh = get_group_id(2), 1);                               \
       wi_ += FCL_NONFINITE ? (int)get_num_groups(0) : 1)

/* Lists tile (qblk, bh) for the build with FCL_NONFINITE; by one work-item. */
inline void attn_nf_list(__global int *list, int qblk, int bh) {
  const int at = atomic_inc(list);
  list[1 + 2 * at] = qblk;
  list[2 + 2 * at] = bh;
}

/* The end of a forward's loop body without FCL_NONFINITE: the work-group
 * lists its tile where any work-item stored a NaN (seen, from
 * MMA_FWD_STORE_OF). A masked product of an inf or NaN in V is NaN, which
 * stays in the row's sum to the end, so every tile that the build with
 * FCL_NONFINITE must redo is found there, at no cost to the walk (where
 * NaN is the right answer, the redo gives the same). seen_s: a __local
 * uint of the kernel. */
#define MMA_FWD_REPORT(nf, seen, seen_s)                                         \
  if (!FCL_NONFINITE) {                                                          \
    if (lid == 0) *(seen_s) = 0u;                                                \
    barrier(CLK_LOCAL_MEM_FENCE);                                                \
    if (seen) *(seen_s) = 1u;                                                    \
    barrier(CLK_LOCAL_MEM_FENCE);                                                \
    /* qblk and bh read again: kept live over the walk they cost registers */   \
    if (lid == 0 && *(seen_s))                                                   \
      attn_nf_list(MMA_FWD_LIST(nf), get_num_groups(0) - 1 - get_group_id(0),    \
                   get_group_id(2));                                             \
  }

/* The start of MMA_FWD_WORK's body: this work-item's warp and lane, the
 * tile's (batch, head) and query tile, where they live (attn_block_info),
 * and the tiles of keys any of its rows sees; goes on to the next tile
 * where this one is empty, or (without FCL_NONFINITE) lists it where the
 * host's scan flagged its kv head. Declares what it names, for the kernel
 * (hence a statement list, not a block). */
#define MMA_FWD_TILE(nf)                                                         \
  if (FCL_NONFINITE) barrier(CLK_LOCAL_MEM_FENCE); /* the tile before is done */ \
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;             \
  const int g = lane >> 2, t4 = lane & 3;                                        \
  const int b = bh / heads_q, h = bh % heads_q;                                  \
  const int hk = h / group;                                                      \
                                                                                 \
  const attn_block bi = ATTN_BLOCK_INFO(b, h, hk);                               \
  const int sq = bi.sq, sk = bi.sk, diag = bi.diag;                              \
  const long q_base = bi.q, k_base = bi.k, v_base = bi.v, o_base = bi.o;         \
  const float slope_l2 = bi.slope_l2;                                            \
  const int i0 = qblk * BLOCK_M;                                                 \
  if (i0 >= sq) continue; /* whole work-group */                                 \
  if (!FCL_NONFINITE && (nf)[hk]) {                                              \
    if (lid == 0) attn_nf_list(MMA_FWD_LIST(nf), qblk, bh);                      \
    continue;                                                                    \
  }                                                                              \
                                                                                 \
  const int i_last = min(i0 + BLOCK_M, sq) - 1;                                  \
  const int j_lo = max(0, i0 + diag - window_left);                              \
  const int j_hi = min(sk - 1, i_last + diag + window_right);                    \
  const int jt0 = (j_lo / BLOCK_N) * BLOCK_N;                                    \
  const int ntiles = j_hi >= j_lo ? (j_hi - jt0) / BLOCK_N + 1 : 0

/* The end of the tensor-core forwards: each row's sum over its quad of
 * lanes, o = acc / l (0 where the row saw no key) and lse; for one m16
 * tile (acc[NT_O], its rows r0 and r1 with their m and l); seen |= whether
 * a NaN was stored (MMA_FWD_REPORT). */
#define MMA_FWD_STORE()                                                                 \
  do {                                                                                \
    bool unused_ = false;                                                             \
    MMA_FWD_STORE_OF(acc, m0, m1, l0, l1, r0, r1, unused_);                           \
  } while (0)
/* Two adjacent elements of an output (columns d, d + 1 of one row of the
 * forward's o, or of the backward's dq, dk, dv: BM_STORE_ROWS): in 16-bit
 * dtypes one 32-bit store of the pair, rounded to nearest even as
 * FCL_STORE rounds, where the pair is 4-byte aligned; else, and in f32,
 * one store each. Half the store instructions, and no vstore_half: the
 * wgmma forward at D = 128 went from 0.85 to 0.75 ms at B16 H32 N1024
 * (f16; bf16 0.82 -> 0.75) and 2.70 -> 2.65 at B4 N4096 on the H200
 * (call 90, docs/data/h100_attention_wgmma_log.txt). */
#if FCL_DTYPE == 0
#define MMA_STORE_PAIR(o, at, x, y, two)                                              \
  do {                                                                                \
    FCL_STORE(o, at, x);                                                              \
    if (two) FCL_STORE(o, (at) + 1, y);                                               \
  } while (0)
#else /* mma_pack: mma_common.cl's, emulated too */
#define MMA_STORE_PAIR(o, at, x, y, two)                                              \
  do {                                                                                \
    if ((two) && ((at) & 1) == 0) {                                                   \
      *(__global uint *)((__global ushort *)(o) + (at)) = mma_pack(x, y);             \
    } else {                                                                          \
      FCL_STORE(o, at, x);                                                            \
      if (two) FCL_STORE(o, (at) + 1, y);                                             \
    }                                                                                 \
  } while (0)
#endif

/* o = acc * MMA_O_SCALE / l: with dropout, l sums every P (the denominator
 * before dropout) and acc the kept ones, which count 1 / (1 - p) times
 * (drop_scale, of the kernel's scalars). */
#if FCL_DROPOUT
#define MMA_O_SCALE drop_scale
#else
#define MMA_O_SCALE 1.0f
#endif
#define MMA_FWD_STORE_OF(acc, m0, m1, l0, l1, r0, r1, seen)                           \
  do {                                                                                \
    /* Each lane summed its own columns: add the four lanes of a row. */              \
    l0 += mma_shfl_xor(l0, 1);                                                        \
    l1 += mma_shfl_xor(l1, 1);                                                        \
    l0 += mma_shfl_xor(l0, 2);                                                        \
    l1 += mma_shfl_xor(l1, 2);                                                        \
    /* l == 0: the row saw no key -> 0. A NaN sum stays NaN. */                       \
    const float inv0 = l0 == 0.0f ? 0.0f : MMA_O_SCALE / l0;                          \
    const float inv1 = l1 == 0.0f ? 0.0f : MMA_O_SCALE / l1;                          \
    MMA_UNROLL for (int n = 0; n < NT_O; ++n) {                                       \
      const int d = n * 8 + 2 * t4;                                                   \
      if (r0 < sq && d < HEAD_DIM_V) {                                                \
        const long at = o_base + (long)r0 * o_ss + d;                                 \
        const float2 x_ = (float2)(acc[n].x, acc[n].y) * inv0;                        \
        MMA_STORE_PAIR(o, at, x_.x, x_.y, d + 1 < HEAD_DIM_V);                        \
        seen |= x_.x != x_.x || x_.y != x_.y;                                         \
      }                                                                               \
      if (r1 < sq && d < HEAD_DIM_V) {                                                \
        const long at = o_base + (long)r1 * o_ss + d;                                 \
        const float2 x_ = (float2)(acc[n].z, acc[n].w) * inv1;                        \
        MMA_STORE_PAIR(o, at, x_.x, x_.y, d + 1 < HEAD_DIM_V);                        \
        seen |= x_.x != x_.x || x_.y != x_.y;                                         \
      }                                                                               \
    }                                                                                 \
    if ((flags & FCL_ATTN_LSE) && t4 == 0) {                                          \
      const long row_id = bi.lse;                                                     \
      if (r0 < sq) lse[row_id + r0] = l0 == 0.0f ? -INFINITY : m0 * FCL_LN2 + log(l0);\
      if (r1 < sq) lse[row_id + r1] = l1 == 0.0f ? -INFINITY : m1 * FCL_LN2 + log(l1);\
    }                                                                                 \
  } while (0)

/* One key tile's online-softmax step, shared by the 16-bit and 3xTF32
 * tensor-core forwards: the tile's scores s[NT_S] (a lane's rows r0, r1)
 * masked and transformed with MMA_SCORE, the rows' maxima over the quad,
 * and l0, l1 and acc[NT_O] rescaled to the new maxima m0, m1 (_OF: of one
 * m16 tile's arrays and rows). Declares mu0 and mu1, the rows' exponent
 * offsets, for the caller's P (hence a statement list, not a block). */
#define MMA_SOFTMAX_STEP() MMA_SOFTMAX_STEP_OF(s, acc, m0, m1, l0, l1, r0, r1)
#define MMA_SOFTMAX_STEP_OF(s, acc, m0, m1, l0, l1, r0, r1)                      \
  /* Tiles inside every row's window skip the per-element test. */             \
  const bool full = j0 >= i_last + diag - window_left &&                         \
                    j0 + BLOCK_N - 1 <= i0 + diag + window_right &&              \
                    j0 + BLOCK_N <= sk;                                          \
  float mx0 = -INFINITY, mx1 = -INFINITY;                                        \
  MMA_UNROLL for (int n = 0; n < NT_S; ++n) {                                    \
    const int j = j0 + n * 8 + 2 * t4;                                           \
    float4 x = s[n];                                                             \
    MMA_SCORE(x.x, r0, j);                                                       \
    MMA_SCORE(x.y, r0, j + 1);                                                   \
    MMA_SCORE(x.z, r1, j);                                                       \
    MMA_SCORE(x.w, r1, j + 1);                                                   \
    s[n] = x;                                                                    \
    mx0 = fmax(mx0, fmax(x.x, x.y));                                             \
    mx1 = fmax(mx1, fmax(x.z, x.w));                                             \
  }                                                                              \
  mx0 = fmax(mx0, mma_shfl_xor(mx0, 1));                                         \
  mx1 = fmax(mx1, mma_shfl_xor(mx1, 1));                                         \
  mx0 = fmax(mx0, mma_shfl_xor(mx0, 2));                                         \
  mx1 = fmax(mx1, mma_shfl_xor(mx1, 2));                                         \
  if (!MMA_GENERAL) { /* qk_scale > 0: the max commutes with the scale */        \
    mx0 *= qk_scale;                                                             \
    mx1 *= qk_scale;                                                             \
  }                                                                              \
  const float mn0 = fmax(m0, mx0), mn1 = fmax(m1, mx1);                          \
  /* Nothing visible yet: m stays -inf; exp2 against 0 then gives 0. */        \
  const float mu0 = mn0 == -INFINITY ? 0.0f : mn0;                               \
  const float mu1 = mn1 == -INFINITY ? 0.0f : mn1;                               \
  const float al0 = mma_exp2(m0 - mu0), al1 = mma_exp2(m1 - mu1);                \
  m0 = mn0;                                                                      \
  m1 = mn1;                                                                      \
  l0 *= al0;                                                                     \
  l1 *= al1;                                                                     \
  MMA_UNROLL for (int n = 0; n < NT_O; ++n) acc[n] *= (float4)(al0, al0, al1, al1)
/* The forwards' dropout (attention_dropout_mma.cl): the keep bits of the
 * lane's pairs in rows r0 and r1 of the tile of BLOCK_N keys from j0, four
 * an n8 tile (mma_drop_cols), into kb[MMA_DROP_WORDS(BLOCK_N)]; drawn
 * before S = Q K^T, whose results they would otherwise live beside (needs
 * b, h, t4 of MMA_FWD_TILE). MMA_FWD_DROP: P of n8 tile n with the dropped
 * pairs 0 (the row sums take them before). */
#if FCL_DROPOUT
#define MMA_FWD_DROP_BITS(kb, r0, r1)                                            \
  MMA_DROP_COLS_BITS(kb, BLOCK_N, attn_drop_index(b, h, r0, j0, heads_q, seqlen_q, seqlen_k), \
                     attn_drop_index(b, h, r1, j0, heads_q, seqlen_q, seqlen_k),     \
                     ATTN_FWD_DROPOUT)
#define MMA_FWD_DROP(p, kb, n) mma_drop_apply(p, MMA_DROP_BITS_OF(kb, n), 1.0f)
/* The fix-up's visible pairs (MMA_FIX_NONFINITE): the kept ones. */
#define FWD_VISIBLE_KEPT(i, j)                                                   \
  (FWD_VISIBLE(i, j) &&                                                          \
   attn_drop_keep(attn_drop_index(b, h, i, j, heads_q, seqlen_q, seqlen_k), ATTN_FWD_DROPOUT))
#else
#define MMA_FWD_DROP(p, kb, n) (p)
#define FWD_VISIBLE_KEPT(i, j) FWD_VISIBLE(i, j)
#endif
/* P of one m16 tile after MMA_SOFTMAX_STEP_OF (whose mu0 and mu1 it
 * reads): exp2 of the scores s[NT_S] against the row maxima, as m16n8k16 A
 * fragments pf[NT_S / 2] of the storage type (S tiles 2c and 2c + 1 form
 * key chunk c's), the unrounded row sums added to l0 and l1. Without
 * MMA_GENERAL the product with the scale is rounded as the row maximum's
 * was (mu = max(x) * scale), so the largest score gives exp2(0) exactly:
 * fma's unrounded product differs from mu by up to half an ulp of mu,
 * which for logits near the f16 limit (~1e10) is thousands, and exp2 of
 * that overflows (the kernel keeps FP_CONTRACT off). kb: MMA_FWD_DROP_BITS's
 * words (dropout only). */
#define MMA_P_FRAGMENTS_OF(s, pf, l0, l1, kb)                                    \
  MMA_UNROLL for (int n_ = 0; n_ < NT_S; ++n_) {                                 \
    const float4 x_ = MMA_GENERAL ? s[n_] : s[n_] * qk_scale;                    \
    const float4 p_ = (float4)(mma_exp2(x_.x - mu0), mma_exp2(x_.y - mu0),       \
                               mma_exp2(x_.z - mu1), mma_exp2(x_.w - mu1));      \
    l0 += p_.x + p_.y;                                                           \
    l1 += p_.z + p_.w;                                                           \
    const float4 q_ = MMA_FWD_DROP(p_, kb, n_);                                  \
    const uint lo_ = mma_pack(q_.x, q_.y), hi_ = mma_pack(q_.z, q_.w);           \
    if (n_ & 1) pf[n_ / 2].z = lo_, pf[n_ / 2].w = hi_;                          \
    else pf[n_ / 2].x = lo_, pf[n_ / 2].y = hi_;                                 \
  }
#define FWD_VISIBLE(i, j) attn_visible(i, j, diag, sk, window_left, window_right)
