/* fcl_rwkv6_forward and fcl_rwkv6_backward against the double reference
 * (ref_rwkv6.c) on $FCL_DEVICE, for the fused-recurrent and the chunked
 * algorithm and AUTO: a table of cases (below) run through the harness
 * (op_rwkv6_case.c), covering T = 1, odd and long T (many chunks), reverse,
 * varlen (with zero-length and length-1 sequences, all sequences empty,
 * seqlen above the longest), every combination of h0 / ht / dht / dh0
 * being NULL, K != V up to 256, weak (w = -exp(N(-3, 1))), strong
 * (U[-25, -5]), mixed (near 0 and U[-40, -15]), extreme mixed (near 0 and
 * U[-1e4, -1e3]) and zero decays, every dtype, several layouts with
 * offsets, a custom scale. Inputs are rounded to the dtype before the
 * reference sees them. Each run also checks that bytes outside every
 * output view (and past every output buffer's end) stay poison, that two
 * backward runs are bit-identical (for the recurrent and chunked settings;
 * AUTO runs once) and that the inputs are untouched. Then bad inputs
 * (rwkv6_bad_input.c): each must return FCL_ERROR_INVALID_ARGUMENT (or
 * UNSUPPORTED where documented), name the argument in
 * fcl_context_last_error() and leave every output buffer untouched.
 *
 * Tolerances: |got - ref| <= tol * max|ref| per tensor, tol = 1e-4 for f32
 * (and for the f32 states ht, dh0 in every dtype), 3e-3 for f16, 2e-2 for
 * bf16; NaN never passes.
 *
 * Environment: FCL_DEVICE (device selector), FCL_TEST_FILTER (run only
 * cases whose name contains it), FCL_TEST_VERBOSE (print every comparison). */
#include "op_harness.h"

#include <stdio.h>
#include <stdlib.h>

int rwkv6_bad_inputs(fcl_context *ctx, int *cases, int *failed);

#define ALL OH_ALL_DT
#define F32 OH_DT(FCL_F32)
#define F16 OH_DT(FCL_F16)
#define BF16 OH_DT(FCL_BF16)
#define C(...) {__VA_ARGS__}

/* K = V = 64 unless given; every algorithm unless .algos says otherwise. */
static const oh_rwkv6_case cases[] = {
  C(.name = "T=1", .dtypes = ALL, .b = 2, .t = 1, .h = 2),
  C(.name = "T=7 h0 NULL dh0 NULL", .dtypes = F32, .b = 1, .t = 7, .h = 3, .no_h0 = 1, .no_dh0 = 1),
  C(.name = "T=33 reverse", .dtypes = ALL, .b = 2, .t = 33, .h = 2, .reverse = 1),
  C(.name = "T=64", .dtypes = F32, .b = 1, .t = 64, .h = 2, .no_ht = 1),
  C(.name = "T=65 dht NULL", .dtypes = F32, .b = 1, .t = 65, .h = 2, .no_dht = 1),
  C(.name = "T=300", .dtypes = ALL, .b = 2, .t = 300, .h = 2),
  C(.name = "T=300 reverse h0 NULL dh0 wanted", .dtypes = F32, .b = 1, .t = 300, .h = 2, .reverse = 1, .no_h0 = 1),
  C(.name = "T=1000", .dtypes = F32, .b = 1, .t = 1000, .h = 2),
  C(.name = "T=4096 (a usual RWKV context)", .dtypes = F32, .algos = OH_REC | OH_CHUNK, .b = 1, .t = 4096, .h = 1),
  C(.name = "varlen 17,0,1,130,64", .dtypes = ALL, .nseq = 5, .lens = {17, 0, 1, 130, 64}, .h = 2),
  C(.name = "varlen reverse 1,0,77,33 h0 NULL", .dtypes = F32, .nseq = 4, .lens = {1, 0, 77, 33}, .h = 2, .reverse = 1, .no_h0 = 1),
  C(.name = "varlen all empty 0,0", .dtypes = F32, .algos = OH_REC | OH_CHUNK, .nseq = 2, .lens = {0, 0}, .h = 2, .seqlen_extra = 1),
  C(.name = "varlen 0,5,0 ht NULL dht NULL", .dtypes = F32, .nseq = 3, .lens = {0, 5, 0}, .h = 1, .no_ht = 1, .no_dht = 1),
  C(.name = "all optional NULL", .dtypes = F32, .b = 2, .t = 50, .h = 2, .no_h0 = 1, .no_ht = 1, .no_dht = 1, .no_dh0 = 1),
  C(.name = "ht NULL dh0 NULL", .dtypes = F32, .b = 1, .t = 40, .h = 2, .no_ht = 1, .no_dh0 = 1),
  C(.name = "strong decays", .dtypes = ALL, .b = 1, .t = 200, .h = 2, .decay = OH_W_STRONG),
  C(.name = "strong decays varlen reverse", .dtypes = F32, .nseq = 4, .lens = {50, 1, 0, 90}, .h = 2, .reverse = 1, .decay = OH_W_STRONG),
  C(.name = "mixed decays", .dtypes = ALL, .b = 2, .t = 150, .h = 2, .decay = OH_W_MIX),
  C(.name = "mixed decays reverse", .dtypes = F32, .b = 1, .t = 129, .h = 1, .reverse = 1, .decay = OH_W_MIX, .no_dht = 1),
  C(.name = "extreme mixed decays", .dtypes = F32, .b = 1, .t = 100, .h = 2, .decay = OH_W_EXTREME),
  C(.name = "zero decay (w = 0)", .dtypes = F32, .b = 1, .t = 70, .h = 2, .decay = OH_W_ZERO),
  C(.name = "custom scale", .dtypes = F32, .b = 1, .t = 45, .h = 2, .scale = 0.3f),
  C(.name = "padded layout offset", .dtypes = ALL, .b = 2, .t = 40, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 5),
  C(.name = "bhsd in, padded-bhsd out", .dtypes = F32, .b = 2, .t = 37, .h = 3, .lin = TU_BHSD, .lout = TU_PADDED_BHSD, .off = 3),
  C(.name = "sbhd in, bshd out", .dtypes = F32, .b = 3, .t = 20, .h = 2, .lin = TU_SBHD, .lout = TU_BSHD),
  C(.name = "varlen padded junk strides[0]", .dtypes = F32, .nseq = 3, .lens = {9, 31, 1}, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 2, .junk_stride0 = 1, .seqlen_extra = 20),
  /* Head dims: each (dtype, K, V) compiles its own programs, so few. */
  C(.name = "K32 V48 varlen reverse", .dtypes = F32, .dk = 32, .dv = 48, .nseq = 3, .lens = {40, 1, 66}, .h = 2, .reverse = 1),
  C(.name = "K32 V48 strong decays", .dtypes = F32, .dk = 32, .dv = 48, .b = 2, .t = 100, .h = 2, .decay = OH_W_STRONG),
  C(.name = "K7 V5", .dtypes = F16, .dk = 7, .dv = 5, .b = 2, .t = 33, .h = 3),
  C(.name = "K7 V5 mixed reverse padded", .dtypes = F16, .dk = 7, .dv = 5, .b = 1, .t = 90, .h = 2, .reverse = 1, .decay = OH_W_MIX, .lin = TU_PADDED, .lout = TU_PADDED, .off = 1),
  C(.name = "K128 V128", .dtypes = BF16, .dk = 128, .dv = 128, .b = 1, .t = 100, .h = 2),
  C(.name = "K128 V128 mixed varlen", .dtypes = BF16, .dk = 128, .dv = 128, .nseq = 2, .lens = {70, 3}, .h = 1, .decay = OH_W_MIX),
  C(.name = "K256 V32", .dtypes = F32, .dk = 256, .dv = 32, .b = 1, .t = 65, .h = 2),
  C(.name = "K256 V32 strong reverse", .dtypes = F32, .dk = 256, .dv = 32, .b = 1, .t = 40, .h = 1, .reverse = 1, .decay = OH_W_STRONG, .no_h0 = 1),
};

int main(void) {
  const double t_start = tu_now();
  const int verbose = getenv("FCL_TEST_VERBOSE") != NULL;
  fcl_context *ctx = NULL;
  const fcl_status st = fcl_context_create(NULL, &ctx);
  if (st != FCL_OK) {
    printf("FAIL: fcl_context_create(NULL) with FCL_DEVICE=%s: %s: %s\n",
           getenv("FCL_DEVICE") ? getenv("FCL_DEVICE") : "(unset)", fcl_status_string(st),
           fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  if (getenv("FCL_RWKV6_ALGORITHM"))
    printf("note: FCL_RWKV6_ALGORITHM=%s steers the AUTO runs\n", getenv("FCL_RWKV6_ALGORITHM"));

  int runs = 0, failed = 0, bad_cases = 0, bad_failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    for (int t = FCL_F32; t <= FCL_BF16; ++t)
      if ((cases[i].dtypes & OH_DT(t)) && oh_selected(cases[i].name))
        oh_rwkv6_case_run(ctx, &cases[i], (fcl_dtype)t, oh_case_seed(cases[i].name, (fcl_dtype)t),
                          verbose, &runs, &failed);
  if (oh_selected("bad inputs")) rwkv6_bad_inputs(ctx, &bad_cases, &bad_failed);

  fcl_context_stats stats = {0, 0, 0};
  fcl_context_get_stats(ctx, &stats);
  printf("programs built %d, from cache %d, cache writes %d\n", stats.programs_built,
         stats.programs_from_cache, stats.cache_writes);
  fcl_context_destroy(ctx);
  printf("test_rwkv6: %d runs, %d failed; bad inputs %d cases, %d failed; %.1f s\n", runs, failed,
         bad_cases, bad_failed, tu_now() - t_start);
  return failed || bad_failed || (runs == 0 && bad_cases == 0) ? 1 : 0;
}
