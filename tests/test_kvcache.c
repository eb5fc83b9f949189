/* fcl_attention_kvcache and fcl_attention_merge on $FCL_DEVICE against the
 * double references (tests/ref/ref_kvcache.h), and their bad inputs:
 *  - the case table below, each case run through kv_case_run
 *    (kvcache_harness.c): decode against contiguous caches (cache_batch_idx,
 *    cache_batch > batch) and paged ones (page sizes 1, 3, 8, 16, 256;
 *    block_table a random permutation of the pages), token-major and
 *    head-major caches with gaps, chunked prefill through the decode
 *    kernels and (more than 64 query rows a kv head) through the forward's,
 *    with and without an append (then the appended tokens are checked in
 *    the cache and every other byte of both caches must be unchanged),
 *    ragged new tokens (cu_seqlens_q) with a sequence of none, rotary NeoX
 *    and interleaved (rotary_dim < head_dim too), causal, windows, softcap,
 *    ALiBi, GQA/MQA, head dims 1 to 512 with head_dim_v != head_dim, lse,
 *    empty caches. Every case runs twice and must be bit-identical;
 *  - num_splits 1, 0, 2, 3, 7 and 16 on a few shapes, the splits merged by
 *    the decode kernel itself: each against the reference (twice,
 *    bit-identical), and the others against 1 within the same tolerance;
 *    short sequences and one without keys in a large cache_capacity, so
 *    that many splits are empty; and calls back to back (no wait between
 *    them) on one context, each with its own o and lse, all bit-identical:
 *    the split merge's counters are back at zero after every launch;
 *  - device-side indices out of range (cache_seqlens beyond the capacity or
 *    negative, block_table and cache_batch_idx entries out of range,
 *    cu_seqlens_q past the tokens or decreasing) on the decode, paged,
 *    prefill and read-only paths: FCL_OK, no crash, and nothing written
 *    outside the views (guard regions around the caches, poison around o
 *    and after lse, inputs unchanged); test_oclgrind_kvcache runs the same
 *    kinds of index under Oclgrind, which also sees reads;
 *  - fcl_attention_merge (kvcache_merge.c) and the bad inputs of both calls
 *    (kvcache_bad_input.c);
 *  - under FCL_MMA_EMULATE=1 (test_kvcache_pocl_mma_emulated), which
 *    guarantees the tensor-core decode kernel, that the library picks it:
 *    else the cases would pass on the portable kernel with its probe broken.
 * Inputs are rounded to the dtype before the reference sees them; the
 * tolerances are the forward suite's (tu_tol_output, tu_tol_lse widened by
 * the f32 logit error).
 *
 * Environment: FCL_DEVICE (device selector), FCL_TEST_FILTER (run only the
 * cases whose name contains it). */
#include "kvcache_harness.h"
#include "kvcache_tests.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALL OH_ALL_DT
#define F32 OH_DT(FCL_F32)
#define F16 OH_DT(FCL_F16)
#define BF16 OH_DT(FCL_BF16)
#define NEOX KV_ROT_NEOX
#define INTER KV_ROT_INTERLEAVED
#define K(...) {__VA_ARGS__}

/* d = dv = 64 and hq = hkv = 2 unless given. The library builds one
 * decode program per (dtype, head dims, ROWS, VEC): ROWS is the query rows
 * a kv head (group * seqlen_q) rounded up to a power of two, at most 16;
 * VEC the elements a cache load, 16 bytes where the cache views are
 * aligned, 1 with the padded layouts. The d64 cases keep to ROWS 1, 4 and
 * 16 (and ROWS 4 padded), every program costing seconds to build on a CPU. */
static const kv_case kv_cases[] = {
  /* Decode against a contiguous cache. */
  K(.name = "decode contiguous", .dtypes = ALL, .b = 3, .sq = 1, .cached = {17, 1, 40}, .hq = 4, .hkv = 4),
  K(.name = "decode cache_batch_idx, cache_batch 5", .dtypes = ALL, .b = 3, .sq = 1, .cached = {30, 0, 7}, .cache_batch = 5, .cbi = 1),
  K(.name = "decode cache_batch 4 > batch, no idx", .dtypes = F16, .b = 2, .sq = 1, .cached = {9, 33}, .cache_batch = 4),
  K(.name = "decode no append, GQA 4/1", .dtypes = ALL, .b = 2, .sq = 1, .cached = {25, 3}, .hq = 4, .hkv = 1, .no_append = 1),
  K(.name = "decode long cache", .dtypes = F32 | BF16, .b = 1, .sq = 1, .cached = {1500}, .hq = 4, .hkv = 1, .causal = 1),
  /* Paged caches. */
  K(.name = "paged page 16", .dtypes = ALL, .b = 3, .sq = 1, .cached = {40, 16, 0}, .hq = 4, .hkv = 1, .page = 16, .spare_pages = 3),
  K(.name = "paged page 1", .dtypes = F32 | F16, .b = 2, .sq = 1, .cached = {9, 4}, .page = 1, .spare_pages = 2),
  K(.name = "paged page 256", .dtypes = F32 | BF16, .b = 2, .sq = 2, .cached = {300, 20}, .hkv = 1, .page = 256, .spare_pages = 1, .causal = 1),
  K(.name = "paged page 3, chunk 4 causal", .dtypes = ALL, .b = 3, .sq = 4, .cached = {10, 2, 5}, .page = 3, .spare_pages = 4, .causal = 1),
  K(.name = "paged no append", .dtypes = F32, .b = 2, .sq = 3, .cached = {33, 7}, .page = 16, .spare_pages = 1, .no_append = 1, .causal = 1),
  K(.name = "paged capacity beyond the need", .dtypes = F16, .b = 2, .sq = 1, .cached = {5, 20}, .page = 8, .capacity = 64, .spare_pages = 2),
  /* Cache layouts (padded: rows with gaps, cache loads of one element),
   * and layouts of q, k_new, v_new and o. */
  K(.name = "head-major contiguous padded idx", .dtypes = ALL, .b = 2, .sq = 2, .cached = {21, 5}, .hq = 4, .cache_batch = 3, .cbi = 1, .head_major = 1, .pad = 1, .causal = 1),
  K(.name = "head-major paged 16", .dtypes = F16, .b = 2, .sq = 1, .cached = {50, 17}, .page = 16, .spare_pages = 2, .head_major = 1),
  K(.name = "token-major padded paged 8", .dtypes = BF16, .b = 2, .sq = 2, .cached = {19, 8}, .hq = 4, .page = 8, .spare_pages = 1, .pad = 1, .causal = 1),
  K(.name = "head-major padded paged 5 rotary", .dtypes = F32, .b = 2, .sq = 4, .cached = {12, 3}, .page = 5, .spare_pages = 1, .head_major = 1, .pad = 1, .rot = INTER),
  K(.name = "q/o bhsd", .dtypes = F16, .b = 2, .sq = 3, .cached = {14, 6}, .lq = TU_BHSD, .causal = 1),
  K(.name = "q/o padded offset", .dtypes = BF16, .b = 2, .sq = 2, .cached = {9, 30}, .hq = 4, .lq = TU_PADDED, .off = 5),
  K(.name = "q/o sbhd", .dtypes = F32, .b = 2, .sq = 3, .cached = {7, 11}, .lq = TU_SBHD, .page = 4, .spare_pages = 1),
  /* Chunked prefill through the decode kernels. */
  K(.name = "chunk 4 no append causal, rows without keys", .dtypes = ALL, .b = 2, .sq = 4, .cached = {30, 2}, .no_append = 1, .causal = 1),
  K(.name = "chunk 16 non-causal", .dtypes = F32, .b = 2, .sq = 16, .cached = {12, 40}),
  /* Chunked prefill of more than 64 query rows a kv head against a
   * contiguous cache without cache_batch_idx: the library runs these on
   * the forward's kernels (after a prep kernel that rotates q). */
  K(.name = "prefill chunk 37 causal GQA 2/1", .dtypes = ALL, .b = 2, .sq = 37, .cached = {50, 0}, .hkv = 1, .causal = 1),
  K(.name = "prefill rotary neox GQA 8/1", .dtypes = ALL, .b = 2, .sq = 9, .cached = {30, 0}, .hq = 8, .hkv = 1, .rot = NEOX, .causal = 1),
  K(.name = "prefill rotary interleaved rot_dim 32, head-major", .dtypes = F16 | BF16, .b = 2, .sq = 12, .cached = {17, 40}, .hq = 8, .hkv = 1, .cache_batch = 3, .head_major = 1, .rot = INTER, .rot_dim = 32, .causal = 1),
  K(.name = "prefill no append, rows without keys", .dtypes = ALL, .b = 2, .sq = 70, .cached = {100, 20}, .no_append = 1, .causal = 1),
  K(.name = "prefill window softcap alibi", .dtypes = F32, .b = 2, .sq = 66, .cached = {80, 7}, .hq = 4, .causal = 1, .win = 1, .wl = 30, .wr = 0, .softcap = 8.0f, .alibi = 1),
  K(.name = "prefill empty cache with append", .dtypes = BF16, .b = 2, .sq = 65, .cached = {0, 3}, .causal = 1),
  K(.name = "prefill no append rotary lse NULL", .dtypes = F16, .b = 2, .sq = 17, .cached = {25, 8}, .hq = 8, .hkv = 2, .no_append = 1, .rot = NEOX, .rot_dim = 16, .causal = 1, .no_lse = 1),
  /* The same on a paged cache or one mapped by cache_batch_idx: the cache
   * is first gathered into contiguous rows. */
  K(.name = "prefill paged 16 rotary causal GQA 4/1", .dtypes = ALL, .b = 2, .sq = 20, .cached = {37, 0}, .hq = 4, .hkv = 1, .page = 16, .spare_pages = 3, .rot = NEOX, .causal = 1),
  K(.name = "prefill paged 3 head-major padded, no append", .dtypes = F32 | BF16, .b = 2, .sq = 70, .cached = {90, 12}, .page = 3, .spare_pages = 4, .head_major = 1, .pad = 1, .no_append = 1, .causal = 1),
  K(.name = "prefill cache_batch_idx window", .dtypes = F16, .b = 3, .sq = 33, .cached = {10, 0, 45}, .hq = 4, .hkv = 2, .cache_batch = 5, .cbi = 1, .win = 1, .wl = 12, .wr = 0, .causal = 1),
  K(.name = "prefill window both, head dims 128/64, q/o padded", .dtypes = BF16, .b = 1, .sq = 33, .cached = {50}, .hq = 4, .d = 128, .dv = 64, .win = 1, .wl = 20, .wr = 5, .lq = TU_PADDED, .off = 3),
  /* Ragged new tokens (cu_seqlens_q). */
  K(.name = "ragged prefill, decode and none, paged rotary", .dtypes = ALL, .b = 4, .ragged = 1, .lens = {37, 1, 0, 5}, .cached = {20, 64, 9, 0}, .hq = 4, .page = 16, .spare_pages = 2, .rot = NEOX, .causal = 1),
  K(.name = "ragged contiguous idx lse NULL", .dtypes = F16, .b = 3, .ragged = 1, .lens = {3, 0, 1}, .cached = {0, 10, 31}, .cbi = 1, .cache_batch = 4, .no_lse = 1, .causal = 1, .junk_stride0 = 1),
  K(.name = "ragged no append window", .dtypes = BF16, .b = 3, .ragged = 1, .lens = {4, 1, 2}, .cached = {40, 0, 2}, .no_append = 1, .causal = 1, .win = 1, .wl = 8, .wr = -1),
  /* Rotary. */
  K(.name = "rotary neox", .dtypes = ALL, .b = 2, .sq = 3, .cached = {12, 0}, .rot = NEOX, .causal = 1),
  K(.name = "rotary interleaved rot_dim 32", .dtypes = ALL, .b = 2, .sq = 1, .cached = {40, 7}, .rot = INTER, .rot_dim = 32),
  K(.name = "rotary neox rot_dim 16, d 40", .dtypes = BF16, .b = 2, .sq = 4, .cached = {6, 25}, .d = 40, .dv = 40, .rot = NEOX, .rot_dim = 16, .causal = 1),
  K(.name = "rotary interleaved no append", .dtypes = F32, .b = 2, .sq = 4, .cached = {16, 9}, .no_append = 1, .rot = INTER, .causal = 1),
  K(.name = "rotary neox paged GQA 4/1", .dtypes = F16, .b = 2, .sq = 1, .cached = {33, 15}, .hq = 4, .hkv = 1, .page = 16, .spare_pages = 1, .rot = NEOX, .rot_dim = 48),
  /* Masks and scores. */
  K(.name = "sliding window causal", .dtypes = ALL, .b = 2, .sq = 4, .cached = {100, 10}, .causal = 1, .win = 1, .wl = 20, .wr = 0),
  K(.name = "window both, chunk 16", .dtypes = F16, .b = 1, .sq = 16, .cached = {30}, .win = 1, .wl = 8, .wr = 3),
  K(.name = "window left, decode", .dtypes = BF16, .b = 2, .sq = 1, .cached = {60, 3}, .win = 1, .wl = 5, .wr = -1),
  K(.name = "softcap", .dtypes = ALL, .b = 2, .sq = 3, .cached = {25, 2}, .softcap = 5.0f, .causal = 1),
  K(.name = "softcap negative scale", .dtypes = F32, .b = 1, .sq = 1, .cached = {40}, .softcap = 2.0f, .scale = -0.3f),
  K(.name = "alibi causal GQA 4/2", .dtypes = ALL, .b = 2, .sq = 2, .cached = {20, 4}, .hq = 4, .alibi = 1, .causal = 1),
  K(.name = "alibi window paged", .dtypes = F16, .b = 2, .sq = 2, .cached = {45, 9}, .hq = 4, .alibi = 1, .win = 1, .wl = 16, .wr = 0, .page = 16),
  K(.name = "GQA 8/2 chunk 4", .dtypes = ALL, .b = 2, .sq = 4, .cached = {31, 9}, .hq = 8, .hkv = 2, .causal = 1),
  K(.name = "MQA 12/1 paged", .dtypes = F16 | BF16, .b = 2, .sq = 1, .cached = {20, 41}, .hq = 12, .hkv = 1, .page = 16, .spare_pages = 1),
  /* Head dims. */
  K(.name = "head dim 1", .dtypes = F32, .b = 2, .sq = 2, .cached = {15, 3}, .d = 1, .dv = 1, .causal = 1),
  K(.name = "head dim 40 rotary interleaved", .dtypes = BF16, .b = 2, .sq = 4, .cached = {11, 0}, .d = 40, .dv = 40, .rot = INTER),
  K(.name = "head dims 128/64 paged", .dtypes = BF16, .b = 2, .sq = 8, .cached = {70, 12}, .hq = 4, .d = 128, .dv = 64, .page = 16, .causal = 1),
  K(.name = "head dims 200/72", .dtypes = F16, .b = 1, .sq = 3, .cached = {26}, .d = 200, .dv = 72, .causal = 1),
  K(.name = "head dim 256 GQA", .dtypes = BF16, .b = 1, .sq = 2, .cached = {30}, .d = 256, .dv = 256, .hkv = 1, .causal = 1),
  K(.name = "head dim 512 decode", .dtypes = F32, .b = 1, .sq = 1, .cached = {20}, .d = 512, .dv = 512, .hq = 1, .hkv = 1),
  K(.name = "head dims 32/128 rotary", .dtypes = F32, .b = 2, .sq = 1, .cached = {8, 22}, .d = 32, .dv = 128, .rot = NEOX),
  /* Empty caches. */
  K(.name = "empty cache with append", .dtypes = ALL, .b = 2, .sq = 3, .cached = {0, 0}, .causal = 1),
  K(.name = "empty cache no append", .dtypes = ALL, .b = 2, .sq = 1, .cached = {0, 5}, .no_append = 1),
  K(.name = "empty paged caches no append, every row empty", .dtypes = F32, .b = 2, .sq = 1, .cached = {0, 0}, .page = 16, .spare_pages = 2, .no_append = 1),
};

/* Each runs with num_splits 1, 0, 2, 3, 7 and 16. A split has at least
 * one block of keys (16 a block on CPUs; 64 on tensor cores, f16 and bf16
 * with more than one row a kv head): the tiles of fewer blocks than
 * num_splits take fewer splits, and the others leave at once. */
static const kv_case kv_split_cases[] = {
  K(.name = "splits decode paged", .dtypes = F32 | F16, .b = 2, .sq = 1, .cached = {700, 50}, .hq = 4, .hkv = 1, .page = 16, .spare_pages = 1),
  K(.name = "splits chunk causal window", .dtypes = BF16, .b = 1, .sq = 4, .cached = {300}, .causal = 1, .win = 1, .wl = 200, .wr = 0),
  K(.name = "splits more than keys", .dtypes = F32, .b = 2, .sq = 1, .cached = {2, 0}),
  K(.name = "splits ragged rotary", .dtypes = F16, .b = 3, .ragged = 1, .lens = {3, 1, 0}, .cached = {200, 90, 5}, .page = 16, .rot = NEOX, .causal = 1),
  K(.name = "splits short sequences in a large cache, one without keys", .dtypes = ALL, .b = 5, .sq = 1, .cached = {0, 5, 40, 300, 1100}, .hq = 4, .hkv = 1, .capacity = 4096, .no_append = 1),
  K(.name = "splits short sequences in a large paged cache, lse", .dtypes = F32 | BF16, .b = 4, .sq = 2, .cached = {0, 17, 130, 650}, .hq = 8, .hkv = 2, .page = 16, .capacity = 2048, .spare_pages = 2, .causal = 1),
  K(.name = "splits 16 rows a kv head, head dims 64/128", .dtypes = ALL, .b = 2, .sq = 2, .cached = {900, 70}, .hq = 8, .hkv = 1, .dv = 128, .causal = 1),
};

/* Calls back to back, each with its own o and lse (kv_opts.calls), at
 * num_splits 7 and 16. */
static const kv_case kv_back_to_back_cases[] = {
  K(.name = "back to back decode paged GQA", .dtypes = F32 | F16, .b = 3, .sq = 1, .cached = {500, 0, 90}, .hq = 4, .hkv = 1, .page = 16, .spare_pages = 1),
  K(.name = "back to back chunk contiguous", .dtypes = BF16, .b = 2, .sq = 3, .cached = {400, 33}, .hq = 4, .hkv = 2, .capacity = 1024, .causal = 1),
};

/* Out-of-range device indices, on four shapes. Contiguous: cap 17, cache
 * rows 4; paged: page 4, 11 pages, 6 block_table entries a sequence;
 * prefill (72 rows a kv head: the forward's kernels); no append (reads
 * only: what Oclgrind checks). */
static const kv_case kv_oor_contig = K(.name = "out of range, contiguous", .dtypes = F32, .b = 3, .sq = 4, .cached = {10, 5, 0}, .cache_batch = 4, .cbi = 1, .rot = NEOX, .causal = 1, .splits = 3);
static const kv_case kv_oor_paged = K(.name = "out of range, paged", .dtypes = F16, .b = 3, .ragged = 1, .lens = {2, 1, 3}, .cached = {10, 17, 0}, .page = 4, .spare_pages = 2, .head_major = 1);
static const kv_case kv_oor_prefill = K(.name = "out of range, prefill", .dtypes = F16, .b = 2, .sq = 9, .cached = {10, 3}, .hq = 8, .hkv = 1, .rot = NEOX, .causal = 1);
static const kv_case kv_oor_read = K(.name = "out of range, no append", .dtypes = F32, .b = 2, .sq = 1, .cached = {10, 5}, .cache_batch = 3, .cbi = 1, .no_append = 1);
static const kv_corrupt kv_oor_contig_bad[] = { /* cap 17, 4 rows */
  {KV_BAD_SEQLEN, 1, 20},       /* beyond the capacity */
  {KV_BAD_SEQLEN, 1, 15},       /* the append runs two past the capacity */
  {KV_BAD_SEQLEN, 0, 1 << 30},
  {KV_BAD_SEQLEN, 2, -3},
  {KV_BAD_SEQLEN, 0, INT32_MIN},
  {KV_BAD_CBI, 0, 4},           /* = cache_batch */
  {KV_BAD_CBI, 1, -1},
  {KV_BAD_CBI, 2, INT32_MAX},
};
static const kv_corrupt kv_oor_prefill_bad[] = { /* cap 22 */
  {KV_BAD_SEQLEN, 1, 30},
  {KV_BAD_SEQLEN, 1, 20},       /* the append runs 7 past the capacity */
  {KV_BAD_SEQLEN, 0, 1 << 30},
  {KV_BAD_SEQLEN, 0, -5},
  {KV_BAD_SEQLEN, 1, INT32_MIN},
};
static const kv_corrupt kv_oor_read_bad[] = { /* cap 14, 3 rows: reads only */
  {KV_BAD_SEQLEN, 0, 40},
  {KV_BAD_SEQLEN, 1, 1 << 30},
  {KV_BAD_SEQLEN, 0, -1},
  {KV_BAD_CBI, 1, 3},
  {KV_BAD_CBI, 0, -7},
};
static const kv_corrupt kv_oor_paged_bad[] = {
  {KV_BAD_BLOCK, 0, 11},        /* = num_pages: sequence 0, page 0 (read) */
  {KV_BAD_BLOCK, 2, 11},        /* sequence 0, page 2: its appended tokens */
  {KV_BAD_BLOCK, 7, -1},        /* sequence 1, page 1 */
  {KV_BAD_BLOCK, 12, INT32_MAX}, /* sequence 2, page 0: its appended tokens */
  {KV_BAD_SEQLEN, 2, 33},       /* beyond the capacity (24), the block_table row and buffer */
  {KV_BAD_SEQLEN, 0, -7},
  {KV_BAD_CUQ, 3, 1000},        /* past the 6 tokens */
  {KV_BAD_CUQ, 1, 5},           /* decreasing: 0, 5, 3, 6 */
  {KV_BAD_CUQ, 0, -4},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void run_table(fcl_context *ctx, const kv_case *cases, size_t n, kv_stats *st) {
  for (size_t i = 0; i < n; ++i)
    for (int t = FCL_F32; t <= FCL_BF16; ++t)
      if ((cases[i].dtypes & OH_DT(t)) && oh_selected(cases[i].name))
        kv_case_run(ctx, &cases[i], (fcl_dtype)t, oh_case_seed(cases[i].name, (fcl_dtype)t),
                    NULL, NULL, NULL, st);
}

/* Runs with num_splits 1 first, then the others: each against the
 * reference (in kv_case_run), and against the first run within the same
 * tolerance. */
static void run_splits(fcl_context *ctx, kv_stats *st) {
  static const int splits[] = {1, 0, 2, 3, 7, 16};
  for (size_t i = 0; i < COUNT(kv_split_cases); ++i)
    for (int t = FCL_F32; t <= FCL_BF16; ++t) {
      if (!(kv_split_cases[i].dtypes & OH_DT(t)) || !oh_selected(kv_split_cases[i].name)) continue;
      const fcl_dtype dt = (fcl_dtype)t;
      const uint64_t seed = oh_case_seed(kv_split_cases[i].name, dt);
      kv_result one;
      memset(&one, 0, sizeof one);
      for (int k = 0; k < (int)COUNT(splits); ++k) {
        kv_case c = kv_split_cases[i];
        c.splits = splits[k];
        kv_result r;
        memset(&r, 0, sizeof r);
        kv_case_run(ctx, &c, dt, seed, NULL, NULL, k ? &r : &one, st);
        if (k == 0 || !one.read || !r.read) {
          kv_result_free(&r);
          continue;
        }
        const tu_cmp co = tu_compare(r.o, one.o, r.n_o, one.tol_o, 0);
        const tu_cmp cl = tu_compare(r.lse, one.lse, r.n_lse, one.tol_l, 1);
        const int ok = co.ok && cl.ok;
        printf("%s %-4s %s | num_splits %d against 1: o diff %.2e (%.0f%% of tol), lse diff %.2e\n",
               ok ? "PASS" : "FAIL", tu_dtype_name(dt), c.name, c.splits, co.max_err,
               100.0 * co.worst_ratio, cl.max_err);
        if (!co.ok) tu_print_cmp("o", &co, NULL, 0);
        if (!cl.ok) tu_print_cmp("lse", &cl, NULL, 0);
        ++st->run;
        st->failed += !ok;
        kv_result_free(&r);
      }
      kv_result_free(&one);
    }
}

static void run_back_to_back(fcl_context *ctx, kv_stats *st) {
  static const int splits[] = {7, 16};
  kv_opts opts = kv_default_opts();
  opts.calls = 5;
  for (size_t i = 0; i < COUNT(kv_back_to_back_cases); ++i)
    for (int t = FCL_F32; t <= FCL_BF16; ++t) {
      if (!(kv_back_to_back_cases[i].dtypes & OH_DT(t)) ||
          !oh_selected(kv_back_to_back_cases[i].name))
        continue;
      for (size_t k = 0; k < COUNT(splits); ++k) {
        kv_case c = kv_back_to_back_cases[i];
        c.splits = splits[k];
        kv_case_run(ctx, &c, (fcl_dtype)t, oh_case_seed(c.name, (fcl_dtype)t), &opts, NULL,
                    NULL, st);
      }
    }
}

static void run_out_of_range(fcl_context *ctx, kv_stats *st) {
  const struct {
    const kv_case *c;
    const kv_corrupt *bad;
    size_t n;
  } sets[4] = {{&kv_oor_contig, kv_oor_contig_bad, COUNT(kv_oor_contig_bad)},
               {&kv_oor_paged, kv_oor_paged_bad, COUNT(kv_oor_paged_bad)},
               {&kv_oor_prefill, kv_oor_prefill_bad, COUNT(kv_oor_prefill_bad)},
               {&kv_oor_read, kv_oor_read_bad, COUNT(kv_oor_read_bad)}};
  for (int s = 0; s < 4; ++s) {
    if (!oh_selected(sets[s].c->name)) continue;
    const fcl_dtype dt = sets[s].c->dtypes & F16 ? FCL_F16 : FCL_F32;
    const uint64_t seed = oh_case_seed(sets[s].c->name, dt);
    kv_case_run(ctx, sets[s].c, dt, seed, NULL, NULL, NULL, st); /* the valid call first */
    for (size_t i = 0; i < sets[s].n; ++i)
      kv_case_run(ctx, sets[s].c, dt, seed, NULL, &sets[s].bad[i], NULL, st);
    kv_case_run(ctx, sets[s].c, dt, seed, NULL, NULL, NULL, st); /* and still fine after */
  }
}

/* The references' own checks: the rotation against its closed form, and
 * the merge of two key halves against the whole (no device). */
static int reference_checks(void) {
  int bad = 0;
  ref_kvcache_problem p;
  memset(&p, 0, sizeof p);
  const double cs[2] = {0.6, -0.28}, sn[2] = {0.8, 0.96}; /* one position, two angles */
  double x[6] = {1, 2, 3, 4, 5, 6};
  p.head_dim = 6; p.rotary_dim = 4; p.rotary_cos = cs; p.rotary_sin = sn;
  p.rotary_positions = 1;
  p.rotary_interleaved = 1; /* pairs (0,1), (2,3) */
  ref_kvcache_rotate(&p, x, 1, 0);
  const double want_i[6] = {1 * 0.6 - 2 * 0.8, 2 * 0.6 + 1 * 0.8, 3 * -0.28 - 4 * 0.96,
                            4 * -0.28 + 3 * 0.96, 5, 6};
  for (int e = 0; e < 6; ++e) bad |= fabs(x[e] - want_i[e]) > 1e-15;
  double y[6] = {1, 2, 3, 4, 5, 6};
  p.rotary_interleaved = 0; /* pairs (0,2), (1,3) */
  ref_kvcache_rotate(&p, y, 1, 0);
  const double want_n[6] = {1 * 0.6 - 3 * 0.8, 2 * -0.28 - 4 * 0.96, 3 * 0.6 + 1 * 0.8,
                            4 * -0.28 + 2 * 0.96, 5, 6};
  for (int e = 0; e < 6; ++e) bad |= fabs(y[e] - want_n[e]) > 1e-15;

  /* Merge: keys 0..9 and 10..24 of a non-causal problem, against all 25. */
  enum { SQ = 3, SK = 25, H = 2, DD = 5 };
  double q[SQ * H * DD], k[SK * H * DD], v[SK * H * DD];
  tu_rng g;
  tu_rng_seed(&g, 7);
  tu_fill_uniform(&g, q, COUNT(q), -2, 2);
  tu_fill_uniform(&g, k, COUNT(k), -2, 2);
  tu_fill_uniform(&g, v, COUNT(v), -1, 1);
  ref_attention_problem a;
  memset(&a, 0, sizeof a);
  a.batch = 1; a.seqlen_q = SQ; a.heads_q = a.heads_kv = H; a.head_dim = a.head_dim_v = DD;
  a.window_left = a.window_right = -1;
  double o_all[SQ * H * DD], l_all[H * SQ], o1[SQ * H * DD], l1[H * SQ], o2[SQ * H * DD],
      l2[H * SQ], om[SQ * H * DD], lm[H * SQ];
  a.seqlen_k = SK;
  ref_attention_forward(&a, q, k, v, o_all, l_all);
  a.seqlen_k = 10;
  ref_attention_forward(&a, q, k, v, o1, l1);
  a.seqlen_k = SK - 10;
  ref_attention_forward(&a, q, k + 10 * H * DD, v + 10 * H * DD, o2, l2);
  const double *parts[2] = {o1, o2}, *lses[2] = {l1, l2};
  ref_attention_merge(2, 1, SQ, H, DD, NULL, parts, lses, om, lm);
  for (size_t i = 0; i < COUNT(om); ++i) bad |= fabs(om[i] - o_all[i]) > 1e-12;
  for (size_t i = 0; i < COUNT(lm); ++i) bad |= fabs(lm[i] - l_all[i]) > 1e-12;
  printf("%s reference self-checks (rotation closed form, merge of two halves)\n",
         bad ? "FAIL" : "PASS");
  return bad;
}

/* Under FCL_MMA_EMULATE=1: fcl_attention_config names the tensor-core decode
 * kernel (fcl_attention_kvcache's test of it, fcl_kvcache_mma_suits, is
 * the forward's decode row's) for f16 and bf16 decode with GQA. Not on
 * llvmpipe, whose loop budget keeps it off. */
static void expect_decode_mma(fcl_context *ctx, kv_stats *st) {
  if (!oh_mma_guaranteed() || strstr(fcl_context_device_name(ctx), "llvmpipe")) return;
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 2, d.seqlen_q = 1, d.seqlen_k = 1024, d.heads_q = 8, d.heads_kv = 2;
  d.head_dim = d.head_dim_v = 64;
  for (int t = FCL_F16; t <= FCL_BF16; ++t) {
    fcl_config_info info;
    memset(&info, 0, sizeof info);
    const fcl_status s = fcl_attention_config(ctx, &d, (fcl_dtype)t, 0, &info);
    const int ok = s == FCL_OK && strcmp(info.kernel, "attention_decode_mma") == 0;
    printf("%s %-4s FCL_MMA_EMULATE=1: decode runs %s%s\n", ok ? "PASS" : "FAIL",
           tu_dtype_name((fcl_dtype)t), s == FCL_OK ? info.kernel : fcl_status_string(s),
           ok ? "" : ", not attention_decode_mma, which it guarantees: is the mma probe "
                     "broken? (FCL_LOG=1 says)");
    ++st->run, st->failed += !ok;
  }
}

int main(void) {
  const double t_start = tu_now();
  kv_stats st;
  memset(&st, 0, sizeof st);
  ++st.run;
  st.failed += reference_checks();
  fcl_context *ctx = oh_open_context(); /* and its device line */
  if (!ctx) return 1;
  expect_decode_mma(ctx, &st);
  run_table(ctx, kv_cases, COUNT(kv_cases), &st);
  run_splits(ctx, &st);
  run_back_to_back(ctx, &st);
  run_out_of_range(ctx, &st);
  int merge_run = 0, merge_failed = 0, bad_run = 0, bad_failed = 0;
  kv_merge_tests(ctx, &merge_run, &merge_failed);
  kv_bad_input_tests(ctx, &bad_run, &bad_failed);
  fcl_context_stats cs = {0, 0, 0};
  fcl_context_get_stats(ctx, &cs);
  printf("programs built %d, from cache %d, cache writes %d\n", cs.programs_built,
         cs.programs_from_cache, cs.cache_writes);
  fcl_context_destroy(ctx);
  printf("rotary runs whose o matched the reference with q rotated exactly: %d, with the "
         "rotated q rounded to the dtype: %d\n", st.q_exact, st.q_rounded);
  const int run = st.run + merge_run + bad_run, failed = st.failed + merge_failed + bad_failed;
  printf("test_kvcache: %d cases (kvcache %d, merge %d, bad input %d), %d failed, %.1f s\n", run,
         st.run, merge_run, bad_run, failed, tu_now() - t_start);
  return failed || run == 0 ? 1 : 0;
}
