/* One fcl_attention_kvcache case run on the device and checked: the case
 * tables of test_kvcache.c and the kvcache runs of test_oclgrind.c use it.
 *
 * kv_case_run builds the caches (contiguous rows or pages, token-major or
 * head-major, optionally with gaps between rows) filled with random values
 * everywhere, the new tokens, the index buffers (cache_seqlens, a random
 * cache_batch_idx, a block_table that is a random permutation of the pages,
 * cu_seqlens_q) and the rotary tables; runs the call twice; and checks:
 *  - o and lse against the double reference (ref_kvcache.h) with the
 *    forward suite's tolerances (tu_tol_output / tu_tol_lse widened by the
 *    f32 logit error, tu_tol_with_logits); a row that sees no key gives
 *    exactly 0 and lse -inf;
 *  - the caches after the call: the appended tokens in place (v_new
 *    bit-exact; k_new bit-exact beyond rotary_dim, rotated within one ulp of
 *    the dtype plus 4 f32 roundings of its two terms), every other byte of
 *    both cache buffers unchanged (gaps, unused rows and pages, and guard
 *    regions before and after the views);
 *  - o, lse: nothing written outside their views (poison), and the second
 *    run bit-identical to the first (o, lse and both caches);
 *  - with kv_opts.calls > 1, each run enqueues the call that many times
 *    back to back, without waiting between them, the others into their
 *    own o and lse: all must give the same bytes (the split merge's
 *    counters are back at zero after every launch);
 *  - every input buffer unchanged.
 * The reference's keys are the cache after the call (the contract: new
 * tokens are written to the cache, then the keys are its positions 0 ..
 * c+n-1), so the appended keys it uses are those the cache holds, checked
 * separately as above. The rotated q is an intermediate the contract does
 * not round: the reference is computed both with q rotated exactly and
 * with the rotated q rounded to the dtype, and o and lse must match one of
 * the two in full.
 *
 * Quantized caches (kv_case.kfmt, vfmt: q8_0, q4_0, fp8; DESIGN.md,
 * "Quantized KV caches"; kvcache_quant_cache.h): strides stay in values
 * (the block formats' pads are whole blocks), the head vector at value r
 * starts at byte offset + r / 32 * block bytes (fp8: offset + r), views may
 * start cache_skew bytes past their guard, and fp8 scales come
 * as f32 buffers (one a tensor, scale_count 1 or 0, or one a kv head). The
 * caches hold random bytes of sane values (random f16 d and q; fp8: encoded
 * random values). After the call:
 *  - v_new's head vectors are in the cache exactly as ref_quant quantizes
 *    them; k_new's too where a block (fp8: a value) is not rotated; a
 *    rotated one holds what some f32 values within the rotation's error
 *    bounds (4 f32 roundings of its two terms) quantize to: fp8 between the
 *    bounds' encodings, q8_0 / q4_0 d between the f16 roundings of d's
 *    bounds and every q between those at the corners of x's and id's
 *    bounds (kvq_check_vec); every other byte of both buffers unchanged;
 *  - o and lse against the double reference over the dequantized cache (the
 *    appended tokens as the cache now holds them), at the tolerance of q's
 *    dtype;
 *  - the rest as above (second run bit-identical, poison, inputs).
 *
 * With kv_corrupt, an index buffer gets an out-of-range value on the device
 * only: the call must return FCL_OK and finish, and write nothing outside
 * the views (guards, poison, unchanged inputs); its results are not
 * checked (the contract leaves them unspecified). */
#ifndef FCL_KVCACHE_HARNESS_H
#define FCL_KVCACHE_HARNESS_H

#include "op_harness.h"
#include "ref_kvcache.h"

#define KV_MAX_SEQS 8
#define KV_MAX_CALLS 8 /* kv_opts.calls */

typedef enum { KV_ROT_NONE = 0, KV_ROT_NEOX, KV_ROT_INTERLEAVED } kv_rot;
/* A cache's format: q's dtype, or a KV-cache format. */
typedef enum { KV_AS_Q = 0, KV_Q8_0, KV_Q4_0, KV_E4M3, KV_E5M2 } kv_fmt;
/* The scales of fp8 caches: none (NULL: 1.0), one a tensor (scale_count 1,
 * or 0), one a kv head (scale_count heads_kv). */
typedef enum { KV_SCALE_NONE = 0, KV_SCALE_TENSOR, KV_SCALE_TENSOR0, KV_SCALE_HEAD } kv_scales;

typedef struct {
  const char *name;
  unsigned    dtypes;            /* OH_DT mask */
  int64_t     b, sq;             /* sequences, new tokens each (not ragged) */
  int         ragged;            /* new tokens of sequence i: lens[i], through cu_seqlens_q */
  int32_t     lens[KV_MAX_SEQS];
  int32_t     cached[KV_MAX_SEQS]; /* cache_seqlens */
  int64_t     hq, hkv, d, dv;    /* hq, hkv 0: 2; d, dv 0: 64 */
  int64_t     page;              /* 0: contiguous cache; > 0: page size */
  int64_t     capacity;          /* 0: the longest c + n (+ 3), rounded up to pages */
  int64_t     spare_pages;       /* paged: pages no sequence uses */
  int64_t     cache_batch;       /* contiguous: rows (0: batch) */
  int         cbi;               /* contiguous: cache_batch_idx, distinct random rows */
  int         head_major;        /* caches (slot, head, token, dim) */
  int         pad;               /* cache strides with gaps */
  int         no_append;         /* k_new, v_new NULL */
  kv_rot      rot;
  int64_t     rot_dim;           /* 0: head_dim */
  float       scale;             /* 0: default */
  int         causal;
  int         win;               /* 0: no window; 1: wl, wr */
  int64_t     wl, wr;
  float       softcap;
  int         alibi;
  int         no_lse;
  int         splits;            /* num_splits */
  tu_layout   lq;                /* q, k_new, v_new, o */
  size_t      off;               /* > 0: those views start off, off+1, ... elements in */
  int         junk_stride0;      /* ragged: strides[0] of q, k_new, v_new, o is garbage */
  kv_fmt      kfmt, vfmt;        /* k_cache, v_cache (block formats: d, dv multiples of 32) */
  kv_scales   scales;            /* k_scale, v_scale of the fp8 caches among them */
  int64_t     cache_skew;        /* quantized caches: views start this many bytes later (blocks: even) */
} kv_case;

/* The dtype of a cache of format f when q is dt. */
fcl_dtype kv_fmt_dtype(kv_fmt f, fcl_dtype dt);

/* An out-of-range device-side index (kv_case_run's corrupt argument). */
typedef enum {
  KV_OK = 0,
  KV_BAD_SEQLEN,  /* cache_seqlens[index] = value */
  KV_BAD_BLOCK,   /* block_table[index] (flat) = value */
  KV_BAD_CBI,     /* cache_batch_idx[index] = value */
  KV_BAD_CUQ      /* cu_seqlens_q[index] = value */
} kv_bad_kind;

typedef struct {
  kv_bad_kind kind;
  int64_t     index;
  int32_t     value;
} kv_corrupt;

typedef struct {
  int guard;  /* guard regions around the cache views, tails after o and lse
                 (0: every buffer fits its view exactly, for Oclgrind) */
  int runs;   /* runs of the call (1 or 2: the second must be bit-identical) */
  int quiet;  /* print only failures */
  int calls;  /* calls a run, back to back (0, 1: one; at most KV_MAX_CALLS) */
} kv_opts;

/* What a run gave, for comparisons between runs (may be NULL). o and lse
 * are allocated by kv_case_run (free them with kv_result_free). */
typedef struct {
  double *o, *lse;
  size_t  n_o, n_lse;
  tu_tol  tol_o, tol_l;
  int     read;
} kv_result;
void kv_result_free(kv_result *r);

typedef struct {
  int run, failed;
  int q_exact, q_rounded; /* passing rotary runs whose o matched each reading */
} kv_stats;

/* Runs c in dtype dt with inputs from seed (corrupt NULL: a valid call
 * checked in full). Prints one line; returns 1 on pass. */
int kv_case_run(fcl_context *ctx, const kv_case *c, fcl_dtype dt, uint64_t seed,
                const kv_opts *opts, const kv_corrupt *corrupt, kv_result *res,
                kv_stats *st);

/* The default options of the suites: guards, two runs. */
kv_opts kv_default_opts(void);
#endif
