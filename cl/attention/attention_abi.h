/* The contract between the attention kernels and the host code that
 * launches them, included by both (OpenCL C: it is the first file of every
 * attention program; C: src/attention/). Change it here, never in one side. */
#ifndef FCL_ATTENTION_ABI_H
#define FCL_ATTENTION_ABI_H

/* Bits of the kernels' `flags` argument. */
#define FCL_ATTN_LSE 1    /* write the log-sum-exp (forward)               */
#define FCL_ATTN_ALIBI 2  /* alibi slopes given                            */
#define FCL_ATTN_VARLEN 4 /* cu_seqlens_q/k give the sequences             */
#define FCL_ATTN_SPLIT 8  /* keys (or queries) split across work-groups: f32 partials */
#define FCL_ATTN_SEQUSED_K 16 /* cu_k holds each sequence's key count (a KV cache's
                                 rows, b * k_sb; flash-attn's seqused_k)     */

/* Tensor-core tiles in local memory: rows padded against bank conflicts.
 * 16-bit (m16n8k16): head dims in steps of 16, rows 8 elements longer.
 * f32 (3xTF32, m16n8k8): steps of 8; K rows LDK = 8 or 24 mod 32 words,
 * V rows 4 mod 8 words (attention_fwd_tf32.cl says why). */
#define FCL_MMA16_PAD(d) (((d) + 15) / 16 * 16)
#define FCL_MMA16_LD(d) (FCL_MMA16_PAD(d) + 8)
#define FCL_TF32_PAD(d) (((d) + 7) / 8 * 8)
#define FCL_TF32_LDK(d) (FCL_TF32_PAD(d) + (FCL_TF32_PAD(d) % 16 ? 16 : 8))
#define FCL_TF32_LDV(d) (FCL_TF32_PAD(d) + 4)
/* Words of one bit a key of a tile of n keys (non-finite flags). */
#define FCL_MMA_NFW(n) (((n) + 31) / 32)

/* Local memory of the tensor-core forwards, in bytes (without the 1 KiB a
 * warp that the emulation adds). 16-bit: the K tile plus the larger of the
 * Q and V tiles, and one bit a key of the V tile. f32: K and V tiles, and
 * one bit a key of each. */
#define FCL_MMA16_FWD_LOCAL(d, dv, warps, block_n)                               \
  (2 * ((block_n) * FCL_MMA16_LD(d) +                                          \
        (16 * (warps) * FCL_MMA16_LD(d) > (block_n) * FCL_MMA16_LD(dv)          \
             ? 16 * (warps) * FCL_MMA16_LD(d)                                  \
             : (block_n) * FCL_MMA16_LD(dv))) +                                \
   4 * FCL_MMA_NFW(block_n))
#define FCL_TF32_FWD_LOCAL(d, dv, block_n)                                       \
  (4 * (block_n) * (FCL_TF32_LDK(d) + FCL_TF32_LDV(dv)) + 8 * FCL_MMA_NFW(block_n))

/* Bits of the KV-cache kernels' `kv_flags` argument (kvcache_*.cl). */
#define FCL_KV_PAGED 1        /* block_table maps positions to pages          */
#define FCL_KV_BATCH_IDX 2    /* cache_batch_idx maps sequences to cache rows */
#define FCL_KV_ROTARY 4       /* rotate q and k_new                           */
#define FCL_KV_INTERLEAVED 8  /* rotary pairs (2i, 2i+1), else (i, i + rd/2)  */
#define FCL_KV_APPEND 16      /* k_new, v_new were appended: keys c + n       */
#define FCL_KV_FIXED_LEN 32   /* every sequence caches fixed_len tokens (no cache_seqlens) */
#define FCL_KV_K_SCALE 64     /* k_scale given (fp8 K cache)                  */
#define FCL_KV_V_SCALE 128    /* v_scale given (fp8 V cache)                  */
#define FCL_KV_APPEND_FUSED 256 /* the decode kernel appends k_new, v_new itself */
#define FCL_KV_Q_VEC8 512     /* q's view: offset and strides multiples of 8 elements */
/* The caches' formats (KV_K_FMT, KV_V_FMT): q's dtype (FCL_DTYPE, 0..2) or
 * one of these, flashcl.h's fcl_dtype values. */
#define FCL_KV_Q8_0 3
#define FCL_KV_Q4_0 4
#define FCL_KV_FP8_E4M3 5
#define FCL_KV_FP8_E5M2 6
/* The most splits of the keys (num_splits). */
#define FCL_KV_MAX_SPLITS 1024

/* Kernels' scalar arguments passed as one struct argument: each scalar
 * argument costs a launch host time (docs/defaults.md, "Kernel
 * arguments"), and a forward or decode kernel has 28 to 41. Every field's offset
 * is a multiple of its size, longs first, so host C and OpenCL C lay a
 * struct out alike, and its size is a multiple of 8 without tail padding
 * (an even count of ints and floats: Mesa 22's rusticl takes a struct's
 * size without it and refuses the host's). A list names its long (L), int (I) and float (F) fields. */
#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__) /* OpenCL C */
#define FCL_ABI_LONG_(n) long n;
#define FCL_ABI_INT_(n) int n;
#else
#include <stdint.h>
#define FCL_ABI_LONG_(n) int64_t n;
#define FCL_ABI_INT_(n) int32_t n;
#endif
#define FCL_ABI_FLOAT_(n) float n;

/* The views (offset in elements, batch, sequence and head strides) of q,
 * k, v and o: the first 16 longs of both lists below (the host fills them
 * in one place, fcl_attention_views). */
#define FCL_ABI_VIEWS(L)                                                            \
  L(q_off) L(q_sb) L(q_ss) L(q_sh) L(k_off) L(k_sb) L(k_ss) L(k_sh) L(v_off) L(v_sb) \
  L(v_ss) L(v_sh) L(o_off) L(o_sb) L(o_ss) L(o_sh)

/* Dropout (attention_dropout.cl): the threshold a Philox word must reach to
 * keep its element ((uint)(p * 2^32), as an int's bits), the seed and offset
 * in 32-bit halves, and the scale 1 / (1 - p) of the kept elements. The
 * kernels read them in builds with FCL_DROPOUT only. */
#define FCL_ATTN_DROPOUT_SCALARS(I, F)                                              \
  I(drop_threshold) I(drop_seed_lo) I(drop_seed_hi) I(drop_offset_lo)              \
  I(drop_offset_hi) F(drop_scale)
typedef struct {
  FCL_ATTN_DROPOUT_SCALARS(FCL_ABI_INT_, FCL_ABI_FLOAT_)
} fcl_attn_dropout_scalars;

/* The forward kernels' (attention_common.cl's ATTN_FWD_PARAMS): the views,
 * the lse layout (batch, head strides), windows with causal
 * folded in, qk_scale (scale*log2(e), or scale/softcap with a softcap) and
 * softcap_l2 (softcap*log2(e), 0: none), FCL_ATTN_* flags, dropout. */
#define FCL_ATTN_FWD_SCALARS(L, I, F)                                               \
  FCL_ABI_VIEWS(L) L(lse_sb) L(lse_sh)                                              \
  I(seqlen_q) I(seqlen_k) I(heads_q) I(group) I(window_left) I(window_right)       \
  I(diag_shift) F(qk_scale) F(softcap_l2) I(flags) FCL_ATTN_DROPOUT_SCALARS(I, F)
typedef struct {
  FCL_ATTN_FWD_SCALARS(FCL_ABI_LONG_, FCL_ABI_INT_, FCL_ABI_FLOAT_)
} fcl_attn_fwd_scalars;

/* The decode kernels' (kvcache_tile.cl's KV_DECODE_PARAMS); kn_*, vn_*:
 * the views of k_new and v_new, for the fused append; *_mul and *_shift:
 * the fast divisions by group, heads_kv, page_size and min_split_keys
 * (kvcache_common.cl's KV_DIV). */
#define FCL_KV_DECODE_SCALARS(L, I, F)                                              \
  FCL_ABI_VIEWS(L) L(q_tokens) L(lse_len) L(kn_off) L(kn_sb) L(kn_ss) L(kn_sh)      \
  L(vn_off) L(vn_sb) L(vn_ss) L(vn_sh)                                              \
  I(batch) I(seqlen_q) I(heads_q) I(group) I(heads_kv) I(capacity) I(cache_batch)   \
  I(page_size) I(num_pages) I(pages_per_seq) I(rotary_dim) I(rotary_positions)      \
  I(window_left) I(window_right) F(qk_scale) F(softcap_l2) I(num_splits)             \
  I(min_split_keys) I(fixed_len) I(kv_flags) I(flags) I(scale_heads)                \
  I(group_mul) I(group_shift) I(heads_kv_mul) I(heads_kv_shift) I(page_size_mul)     \
  I(page_size_shift) I(min_split_keys_mul) I(min_split_keys_shift)
typedef struct {
  FCL_KV_DECODE_SCALARS(FCL_ABI_LONG_, FCL_ABI_INT_, FCL_ABI_FLOAT_)
} fcl_kv_decode_scalars;

/* The append kernel's (kvcache_append.cl): the views of k_new, v_new and
 * the caches (block formats: their offsets in bytes), the cache's layout,
 * rotary, scale_heads (1: k_scale, v_scale hold one scale a kv head). */
#define FCL_KV_APPEND_SCALARS(L, I, F)                                              \
  L(kn_off) L(kn_sb) L(kn_ss) L(kn_sh) L(vn_off) L(vn_sb) L(vn_ss) L(vn_sh) L(kc_off) \
  L(kc_sb) L(kc_ss) L(kc_sh) L(vc_off) L(vc_sb) L(vc_ss) L(vc_sh) L(q_tokens)         \
  I(head_dim) I(head_dim_v) I(heads_kv) I(seqlen_q) I(capacity) I(cache_batch)        \
  I(page_size) I(num_pages) I(pages_per_seq) I(rotary_dim) I(rotary_positions)        \
  I(scale_heads) I(kv_flags) I(flags)
typedef struct {
  FCL_KV_APPEND_SCALARS(FCL_ABI_LONG_, FCL_ABI_INT_, FCL_ABI_FLOAT_)
} fcl_kv_append_scalars;

/* Bits of the merge kernel's `step` argument (attention_merge.cl). */
#define FCL_MERGE_FIRST 1 /* no running result yet */
#define FCL_MERGE_LAST 2  /* write o and lse       */

#endif
