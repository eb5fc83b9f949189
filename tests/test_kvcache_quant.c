/* fcl_attention_kvcache with quantized caches (DESIGN.md, "Quantized KV
 * caches") on $FCL_DEVICE:
 *  - the harness's own check of appended head vectors (kvq_check_vec, no
 *    device): values quantized from within the rotation's bounds pass,
 *    and a q, nibble, d or fp8 byte moved by two steps never does;
 *  - the case table below through kv_case_run (kvcache_harness.c): q8_0,
 *    q4_0 and fp8 E4M3 / E5M2 caches, K and V in the same or different
 *    formats, fp8 without scales, with one a tensor (scale_count 1 and 0)
 *    and one a kv head (some appended values saturate); f32, f16 and bf16
 *    queries; decode and a few new tokens, ragged ones, chunked prefill of
 *    more than 64 rows a kv head; contiguous (cache_batch_idx, head-major,
 *    padded) and paged caches, views a few bytes past their guards; GQA,
 *    with and without an append, rotary (also on part of a block), a
 *    window, softcap, ALiBi, num_splits; head dims 64 and 128, dv != d.
 *    The appended tokens are checked in the cache byte for byte against
 *    ref_quant (rotated keys within their bounds), every other byte of the
 *    caches unchanged, o and lse against the double reference over the
 *    dequantized cache at the tolerance of q's dtype, twice bit-identical;
 *  - bad inputs (kvcache_quant_bad_input.c).
 * CTest runs it again under FCL_MMA_EMULATE=1 (the tensor-core decode).
 *
 * Environment: FCL_DEVICE (device selector), FCL_TEST_FILTER (run only the
 * cases whose name contains it). */
#include "kvcache_harness.h"
#include "kvcache_quant_cache.h"
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
#define Q8 KV_Q8_0
#define Q4 KV_Q4_0
#define E4 KV_E4M3
#define E5 KV_E5M2
#define K(...) {__VA_ARGS__}

/* d = dv = 64 and hq = hkv = 2 unless given. */
static const kv_case kvq_cases[] = {
  /* Each format, K and V alike, decode. */
  K(.name = "q8_0 decode contiguous", .dtypes = ALL, .b = 3, .sq = 1, .cached = {17, 1, 40}, .hq = 4, .hkv = 4, .kfmt = Q8, .vfmt = Q8),
  K(.name = "q4_0 decode paged 16 GQA 4/1", .dtypes = ALL, .b = 3, .sq = 1, .cached = {40, 16, 0}, .hq = 4, .hkv = 1, .page = 16, .spare_pages = 3, .kfmt = Q4, .vfmt = Q4),
  K(.name = "fp8 e4m3 decode, no scale", .dtypes = ALL, .b = 2, .sq = 1, .cached = {25, 3}, .kfmt = E4, .vfmt = E4),
  K(.name = "fp8 e5m2 decode paged, no scale", .dtypes = F16, .b = 2, .sq = 1, .cached = {33, 9}, .page = 16, .spare_pages = 1, .kfmt = E5, .vfmt = E5),
  /* K and V in different formats. */
  K(.name = "q8_0 K q4_0 V chunk 4 causal", .dtypes = F16 | BF16, .b = 2, .sq = 4, .cached = {30, 2}, .causal = 1, .kfmt = Q8, .vfmt = Q4),
  K(.name = "q4_0 K q8_0 V decode GQA 8/2", .dtypes = F32, .b = 2, .sq = 1, .cached = {50, 7}, .hq = 8, .kfmt = Q4, .vfmt = Q8),
  K(.name = "e4m3 K e5m2 V per-head scales", .dtypes = BF16, .b = 2, .sq = 2, .cached = {21, 4}, .hq = 4, .causal = 1, .kfmt = E4, .vfmt = E5, .scales = KV_SCALE_HEAD),
  K(.name = "e5m2 K (scale a tensor) q8_0 V", .dtypes = F16, .b = 2, .sq = 1, .cached = {12, 30}, .kfmt = E5, .vfmt = Q8, .scales = KV_SCALE_TENSOR),
  K(.name = "q4_0 K e4m3 V (scale a kv head)", .dtypes = F32, .b = 2, .sq = 3, .cached = {9, 26}, .hq = 4, .causal = 1, .kfmt = Q4, .vfmt = E4, .scales = KV_SCALE_HEAD),
  K(.name = "f16 K (as q) q8_0 V", .dtypes = F16, .b = 2, .sq = 1, .cached = {19, 5}, .vfmt = Q8),
  /* fp8 scales. */
  K(.name = "fp8 e4m3 scale a tensor", .dtypes = ALL, .b = 2, .sq = 1, .cached = {40, 11}, .hq = 4, .hkv = 1, .kfmt = E4, .vfmt = E4, .scales = KV_SCALE_TENSOR),
  K(.name = "fp8 e5m2 scale a tensor, scale_count 0", .dtypes = F32, .b = 2, .sq = 2, .cached = {14, 6}, .causal = 1, .kfmt = E5, .vfmt = E5, .scales = KV_SCALE_TENSOR0),
  K(.name = "fp8 e4m3 scales a kv head GQA 8/4 paged", .dtypes = F16 | BF16, .b = 2, .sq = 1, .cached = {37, 16}, .hq = 8, .hkv = 4, .page = 16, .spare_pages = 2, .kfmt = E4, .vfmt = E4, .scales = KV_SCALE_HEAD),
  /* No append (read only), empty caches. */
  K(.name = "q8_0 no append GQA 4/1", .dtypes = ALL, .b = 2, .sq = 1, .cached = {25, 3}, .hq = 4, .hkv = 1, .no_append = 1, .kfmt = Q8, .vfmt = Q8),
  K(.name = "fp8 e5m2 no append chunk 4, rows without keys", .dtypes = BF16, .b = 2, .sq = 4, .cached = {30, 2}, .no_append = 1, .causal = 1, .kfmt = E5, .vfmt = E5, .scales = KV_SCALE_HEAD),
  K(.name = "q4_0 empty cache with append", .dtypes = F16, .b = 2, .sq = 3, .cached = {0, 0}, .causal = 1, .kfmt = Q4, .vfmt = Q4),
  /* Rotary on append: k_new rotated in f32, then quantized. */
  K(.name = "q8_0 rotary neox", .dtypes = ALL, .b = 2, .sq = 3, .cached = {12, 0}, .rot = NEOX, .causal = 1, .kfmt = Q8, .vfmt = Q8),
  K(.name = "q4_0 rotary interleaved rot_dim 16 (part of a block)", .dtypes = F16, .b = 2, .sq = 1, .cached = {40, 7}, .rot = INTER, .rot_dim = 16, .kfmt = Q4, .vfmt = Q4),
  K(.name = "fp8 e4m3 rotary neox, scales a kv head", .dtypes = BF16 | F32, .b = 2, .sq = 2, .cached = {16, 9}, .hq = 4, .rot = NEOX, .causal = 1, .kfmt = E4, .vfmt = E4, .scales = KV_SCALE_HEAD),
  /* Masks and scores. */
  K(.name = "q8_0 sliding window causal", .dtypes = F16, .b = 2, .sq = 4, .cached = {100, 10}, .causal = 1, .win = 1, .wl = 20, .wr = 0, .kfmt = Q8, .vfmt = Q8),
  K(.name = "q4_0 softcap", .dtypes = F32, .b = 2, .sq = 3, .cached = {25, 2}, .softcap = 5.0f, .causal = 1, .kfmt = Q4, .vfmt = Q4),
  K(.name = "q8_0 K e4m3 V alibi GQA 4/2", .dtypes = BF16, .b = 2, .sq = 2, .cached = {20, 4}, .hq = 4, .alibi = 1, .causal = 1, .kfmt = Q8, .vfmt = E4, .scales = KV_SCALE_TENSOR),
  /* Splits. */
  K(.name = "q8_0 splits 7 long decode paged", .dtypes = F16, .b = 2, .sq = 1, .cached = {700, 50}, .hq = 4, .hkv = 1, .page = 16, .spare_pages = 1, .splits = 7, .kfmt = Q8, .vfmt = Q8),
  K(.name = "q4_0 splits 3 chunk causal window", .dtypes = BF16, .b = 1, .sq = 4, .cached = {300}, .causal = 1, .win = 1, .wl = 200, .wr = 0, .splits = 3, .kfmt = Q4, .vfmt = Q4),
  K(.name = "fp8 e5m2 splits 2, scale a tensor", .dtypes = F32, .b = 2, .sq = 1, .cached = {260, 90}, .splits = 2, .kfmt = E5, .vfmt = E5, .scales = KV_SCALE_TENSOR),
  /* Ragged new tokens. */
  K(.name = "ragged q8_0 K q4_0 V paged rotary", .dtypes = F16 | BF16, .b = 4, .ragged = 1, .lens = {5, 1, 0, 3}, .cached = {20, 64, 9, 0}, .hq = 4, .page = 16, .spare_pages = 2, .rot = NEOX, .causal = 1, .kfmt = Q8, .vfmt = Q4),
  K(.name = "ragged fp8 e4m3 contiguous idx, lse NULL", .dtypes = F32, .b = 3, .ragged = 1, .lens = {3, 0, 1}, .cached = {0, 10, 31}, .cbi = 1, .cache_batch = 4, .no_lse = 1, .causal = 1, .kfmt = E4, .vfmt = E4, .scales = KV_SCALE_HEAD),
  /* Cache layouts: head-major, gaps (whole blocks), views past the guard. */
  K(.name = "q8_0 head-major padded cache_batch_idx", .dtypes = F16, .b = 2, .sq = 2, .cached = {21, 5}, .hq = 4, .cache_batch = 3, .cbi = 1, .head_major = 1, .pad = 1, .causal = 1, .kfmt = Q8, .vfmt = Q8),
  K(.name = "q4_0 token-major padded paged 8, skew 2 bytes", .dtypes = BF16, .b = 2, .sq = 1, .cached = {19, 8}, .page = 8, .spare_pages = 1, .pad = 1, .cache_skew = 2, .kfmt = Q4, .vfmt = Q4),
  K(.name = "fp8 e5m2 head-major padded paged 16, skew 3 bytes", .dtypes = F16, .b = 2, .sq = 2, .cached = {50, 17}, .page = 16, .spare_pages = 2, .head_major = 1, .pad = 1, .cache_skew = 3, .causal = 1, .kfmt = E5, .vfmt = E5, .scales = KV_SCALE_HEAD),
  K(.name = "q8_0 skew 34 bytes (one block), q/o padded offset", .dtypes = F32, .b = 2, .sq = 2, .cached = {9, 30}, .hq = 4, .lq = TU_PADDED, .off = 5, .cache_skew = 34, .kfmt = Q8, .vfmt = Q8),
  /* Chunked prefill, more than 64 query rows a kv head (the forward's
   * kernels). */
  K(.name = "prefill q8_0 GQA 8/1 chunk 16 causal", .dtypes = ALL, .b = 2, .sq = 16, .cached = {50, 0}, .hq = 8, .hkv = 1, .causal = 1, .kfmt = Q8, .vfmt = Q8),
  K(.name = "prefill q4_0 K e4m3 V rotary GQA 8/1", .dtypes = F16 | BF16, .b = 2, .sq = 9, .cached = {30, 0}, .hq = 8, .hkv = 1, .rot = NEOX, .causal = 1, .kfmt = Q4, .vfmt = E4, .scales = KV_SCALE_TENSOR),
  K(.name = "prefill fp8 e5m2 paged 16, scales a kv head, no append", .dtypes = F32, .b = 2, .sq = 70, .cached = {90, 12}, .page = 16, .spare_pages = 1, .no_append = 1, .causal = 1, .kfmt = E5, .vfmt = E5, .scales = KV_SCALE_HEAD),
  K(.name = "prefill q8_0 window softcap alibi", .dtypes = BF16, .b = 2, .sq = 66, .cached = {80, 7}, .hq = 4, .causal = 1, .win = 1, .wl = 30, .wr = 0, .softcap = 8.0f, .alibi = 1, .kfmt = Q8, .vfmt = Q8),
  /* Head dims. */
  K(.name = "q8_0 head dim 128", .dtypes = F16 | BF16, .b = 2, .sq = 1, .cached = {45, 8}, .hq = 4, .hkv = 1, .d = 128, .dv = 128, .kfmt = Q8, .vfmt = Q8),
  K(.name = "q4_0 K q8_0 V head dims 128/64 paged", .dtypes = BF16, .b = 2, .sq = 8, .cached = {70, 12}, .hq = 4, .d = 128, .dv = 64, .page = 16, .causal = 1, .kfmt = Q4, .vfmt = Q8),
  K(.name = "fp8 e4m3 head dims 40/72 rotary", .dtypes = F16, .b = 2, .sq = 2, .cached = {11, 20}, .d = 40, .dv = 72, .rot = INTER, .causal = 1, .kfmt = E4, .vfmt = E4, .scales = KV_SCALE_TENSOR),
  /* Lane-owned blocks on tensor cores (rows 8-byte aligned, head dims of
   * 128 and 256), and rows that are not (padded: 2-byte aligned). */
  K(.name = "q4_0 head dim 128 paged 16 GQA 8/2", .dtypes = F16, .b = 2, .sq = 1, .cached = {70, 33}, .hq = 8, .hkv = 2, .d = 128, .dv = 128, .page = 16, .spare_pages = 2, .kfmt = Q4, .vfmt = Q4),
  K(.name = "q8_0 K q4_0 V head dim 256 splits 3 causal", .dtypes = BF16, .b = 1, .sq = 2, .cached = {150}, .hq = 4, .hkv = 1, .d = 256, .dv = 256, .splits = 3, .causal = 1, .kfmt = Q8, .vfmt = Q4),
  K(.name = "q4_0 K q8_0 V head dim 256 GQA 4/2", .dtypes = F16, .b = 2, .sq = 1, .cached = {40, 17}, .hq = 4, .hkv = 2, .d = 256, .dv = 256, .kfmt = Q4, .vfmt = Q8),
  K(.name = "q8_0 K q4_0 V head dim 128 rotary neox (q staged)", .dtypes = F16, .b = 2, .sq = 2, .cached = {29, 6}, .hq = 4, .hkv = 1, .d = 128, .dv = 128, .rot = NEOX, .causal = 1, .kfmt = Q8, .vfmt = Q4),
  K(.name = "q8_0 head dim 128 padded", .dtypes = F16, .b = 2, .sq = 1, .cached = {33, 12}, .hq = 4, .hkv = 1, .d = 128, .dv = 128, .pad = 1, .kfmt = Q8, .vfmt = Q8),
  K(.name = "q8_0 head dims 64/128 prefill", .dtypes = F32, .b = 1, .sq = 33, .cached = {50}, .hq = 4, .hkv = 2, .dv = 128, .causal = 1, .kfmt = Q8, .vfmt = Q8),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the harness's check of appended head vectors (no device) ------------------ */
/* The f32 value within [lo, hi] nearest one end (which: 0 low, 1 high). */
static float f32_end(double lo, double hi, int which) {
  float f = (float)(which ? hi : lo);
  if (which && (double)f > hi) f = nextafterf(f, -INFINITY);
  if (!which && (double)f < lo) f = nextafterf(f, INFINITY);
  return f;
}

/* A head vector of 64: its first 32 values "rotated" (within err of r, r
 * often on a rounding boundary of the format: q8_0 (k + 1/2) d, q4_0
 * (n - 8.5) d, fp8 midpoints; the largest value rotated too), quantized
 * from f32 values at either end of their bounds; the others exact. Those
 * bytes must pass; a q, nibble, d or fp8 value moved by two steps in a
 * rotated unit, or any change to an exact unit, must not. */
static int check_vec_selftest(void) {
  static const fcl_dtype fmts[] = {FCL_Q8_0, FCL_Q4_0, FCL_FP8_E4M3, FCL_FP8_E5M2};
  int bad = 0;
  tu_rng g;
  tu_rng_seed(&g, 99);
  for (size_t f = 0; f < COUNT(fmts); ++f) {
    const fcl_dtype fmt = fmts[f];
    const int fp8 = ref_quant_unit_values(fmt) == 1;
    const size_t ub = ref_quant_unit_bytes(fmt), nbytes = fp8 ? 64 : 2 * ub;
    size_t passed = 0, caught = 0, exact_caught = 0;
    const int trials = 3000;
    kvq_stats st = {0, 0, 0};
    for (int trial = 0; trial < trials; ++trial) {
      const float scale = kvq_pick_scale(fmt, 2.5, &g);
      const double amax = tu_rng_range(&g, 0.5, 2.5);
      const double d = fmt == FCL_Q8_0 ? amax / 127 : amax / 8;
      double r[64], err[64];
      float x[64];
      for (int e = 0; e < 64; ++e) {
        double v = tu_rng_range(&g, -amax, amax);
        if (e == 0) v = tu_rng_int(&g, 0, 1) ? amax : -amax;
        else if (e < 32 && tu_rng_int(&g, 0, 1) && !fp8)
          v = d * (fmt == FCL_Q8_0 ? (double)tu_rng_int(&g, -126, 125) + 0.5
                                   : (double)tu_rng_int(&g, 1, 15) - 8.5);
        else if (e < 32 && fp8) { /* the midpoint above v's encoding, times the scale */
          const uint8_t b = ref_fp8_encode((float)v, scale, fmt);
          const double lo = ref_fp8_decode(b & 0x7f, fmt), hi = ref_fp8_decode((b & 0x7f) + 1, fmt);
          if (isfinite(hi)) v = copysign((lo + hi) / 2, v) * scale;
        }
        r[e] = e < 32 ? v : (double)(float)v;
        err[e] = e < 32 ? 0x1p-22 * fabs(v) * tu_rng_range(&g, 1.0, 2.0) + 0x1p-149 : 0.0;
        x[e] = e < 32 ? f32_end(r[e] - err[e], r[e] + err[e], (int)tu_rng_int(&g, 0, 1))
                      : (float)r[e];
      }
      uint8_t b[128], m[128];
      ref_quantize_vec(fmt, x, 64, scale, b);
      passed += kvq_check_vec(fmt, b, r, err, 64, scale, &st) == 0;
      /* Two steps off in a rotated unit: a q, nibble, d's low bits, an fp8 value. */
      memcpy(m, b, nbytes);
      m[fp8 ? (size_t)tu_rng_int(&g, 0, 31) : (size_t)tu_rng_int(&g, 0, (int64_t)ub - 1)] ^= 0x02;
      caught += kvq_check_vec(fmt, m, r, err, 64, scale, NULL) != 0;
      /* Any change in an exact unit (values 32..63). */
      memcpy(m, b, nbytes);
      m[nbytes / 2 + (size_t)tu_rng_int(&g, 0, (int64_t)(nbytes / 2) - 1)] ^=
          (uint8_t)(1u << tu_rng_int(&g, 0, 7));
      exact_caught += kvq_check_vec(fmt, m, r, err, 64, scale, NULL) != 0;
    }
    /* Values on boundaries must make some rotated units differ from those
     * of the exact values, else the test shows nothing. */
    const int ok = passed == (size_t)trials && caught == (size_t)trials &&
                   exact_caught == (size_t)trials && st.inexact > 0;
    printf("%s harness check of appended %s vectors: %zu/%d within bounds pass (%zu of %zu "
           "rotated units not those of the exact values), %zu/%d two steps off and %zu/%d "
           "changed exact units caught\n",
           ok ? "PASS" : "FAIL", tu_dtype_name(fmt), passed, trials, st.inexact, st.units / 2,
           caught, trials, exact_caught, trials);
    bad += !ok;
  }
  return bad;
}

int main(void) {
  const double t_start = tu_now();
  kv_stats st;
  memset(&st, 0, sizeof st);
  st.run += 4;
  st.failed += check_vec_selftest();
  fcl_context *ctx = oh_open_context(); /* and its device line */
  if (!ctx) return 1;
  for (size_t i = 0; i < COUNT(kvq_cases); ++i)
    for (int t = FCL_F32; t <= FCL_BF16; ++t)
      if ((kvq_cases[i].dtypes & OH_DT(t)) && oh_selected(kvq_cases[i].name))
        kv_case_run(ctx, &kvq_cases[i], (fcl_dtype)t, oh_case_seed(kvq_cases[i].name, (fcl_dtype)t),
                    NULL, NULL, NULL, &st);
  int bad_run = 0, bad_failed = 0;
  kvq_bad_input_tests(ctx, &bad_run, &bad_failed);
  fcl_context_destroy(ctx);
  const int run = st.run + bad_run, failed = st.failed + bad_failed;
  printf("test_kvcache_quant: %d cases (kvcache %d, bad input %d), %d failed, %.1f s\n", run,
         st.run, bad_run, failed, tu_now() - t_start);
  return failed || run == 0 ? 1 : 0;
}
