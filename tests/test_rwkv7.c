/* fcl_rwkv7_forward and fcl_rwkv7_backward against the double reference
 * (ref_rwkv7.c) on $FCL_DEVICE: a table of cases after fla's
 * tests/ops/test_rwkv7.py, sized for CI: T = 1, odd T and T = 300, H 1 to
 * 4, K = V = 64 and odd head dims (K != V up to 256), w from U(-8, -6)
 * (fla's fused-recurrent test) and from the models' range -0.6065..0 (and
 * 0), a = -kk and b = kk * U(0, 0.1) with kk L2-normalised (and general a,
 * b once), reverse, varlen with empty and length-1 sequences, h0 / ht /
 * dht / dh0 present or NULL, strided layouts with offsets, every dtype.
 * Inputs are rounded to the dtype before the reference sees them. Each run
 * also checks that bytes outside every output view stay poison, that two
 * backward runs are bit-identical and that the inputs are untouched. Then
 * bad inputs (rwkv7_bad_input.c).
 *
 * Tolerances, as test_rwkv6's: |got - ref| <= tol * max|ref| per tensor,
 * tol = 1e-4 for f32 (and for the f32 states ht, dh0 in every dtype), 3e-3
 * for f16, 2e-2 for bf16 (tu_tol_rwkv6); NaN never passes.
 *
 * Environment: FCL_DEVICE, FCL_TEST_FILTER (cases whose name contains
 * it), FCL_TEST_VERBOSE (print every comparison). */
#include "op_rwkv7.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rwkv7_bad_inputs(fcl_context *ctx, int *cases, int *failed);

#define ALL OH_ALL_DT
#define F32 OH_DT(FCL_F32)
#define F16 OH_DT(FCL_F16)
#define BF16 OH_DT(FCL_BF16)
#define MODEL REF_RWKV7_W_MODEL
#define STRONG REF_RWKV7_W_STRONG
#define C(...) {__VA_ARGS__}
static const oh_rwkv7_case cases[] = {
  C(.name = "T=1", .dtypes = ALL, .b = 2, .t = 1, .h = 2),
  C(.name = "T=7 h0 NULL dh0 NULL", .dtypes = F32, .b = 1, .t = 7, .h = 3, .no_h0 = 1, .no_dh0 = 1),
  C(.name = "T=33 reverse", .dtypes = ALL, .b = 2, .t = 33, .h = 2, .reverse = 1),
  C(.name = "T=65 dht NULL w U(-8,-6)", .dtypes = F32, .b = 1, .t = 65, .h = 4, .no_dht = 1, .decay = STRONG),
  C(.name = "T=300 w U(-8,-6)", .dtypes = F32 | BF16, .b = 1, .t = 300, .h = 2, .decay = STRONG),
  C(.name = "T=300 reverse scale 1", .dtypes = F16, .b = 1, .t = 300, .h = 1, .reverse = 1, .scale = 1.0f),
  C(.name = "T=129 general a b", .dtypes = F32, .b = 1, .t = 129, .h = 2, .general = 1),
  C(.name = "zero decay (w = 0)", .dtypes = F32, .b = 1, .t = 50, .h = 2, .decay = REF_RWKV7_W_ZERO),
  C(.name = "all optional NULL", .dtypes = F32, .b = 2, .t = 20, .h = 2, .no_h0 = 1, .no_ht = 1, .no_dht = 1, .no_dh0 = 1),
  C(.name = "varlen 17,0,1,130,64", .dtypes = F32 | BF16, .nseq = 5, .lens = {17, 0, 1, 130, 64}, .h = 2),
  C(.name = "varlen reverse 1,0,77,33 h0 NULL w U(-8,-6)", .dtypes = F32, .nseq = 4, .lens = {1, 0, 77, 33}, .h = 2, .reverse = 1, .no_h0 = 1, .decay = STRONG),
  C(.name = "varlen all empty 0,0", .dtypes = F32, .nseq = 2, .lens = {0, 0}, .h = 2, .seqlen_extra = 1),
  C(.name = "padded layout offset", .dtypes = ALL, .b = 2, .t = 40, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 5),
  C(.name = "sbhd in, bhsd out", .dtypes = F32, .b = 3, .t = 20, .h = 2, .lin = TU_SBHD, .lout = TU_BHSD),
  C(.name = "varlen padded junk strides[0]", .dtypes = F32, .nseq = 3, .lens = {9, 31, 1}, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 2, .junk_stride0 = 1, .seqlen_extra = 20),
  /* Head dims: each (dtype, K, V) builds its own programs, so few. */
  C(.name = "K63 V37 reverse", .dtypes = F32 | F16, .dk = 63, .dv = 37, .b = 2, .t = 45, .h = 3, .reverse = 1),
  C(.name = "K7 V5 varlen w U(-8,-6)", .dtypes = F32, .dk = 7, .dv = 5, .nseq = 3, .lens = {40, 1, 66}, .h = 1, .decay = STRONG),
  C(.name = "K128 V128", .dtypes = BF16, .dk = 128, .dv = 128, .b = 1, .t = 30, .h = 1),
  C(.name = "K256 V32 scale 1", .dtypes = F32, .dk = 256, .dv = 32, .b = 1, .t = 20, .h = 2, .scale = 1.0f),
};

int main(void) {
  const double t_start = tu_now();
  const int verbose = getenv("FCL_TEST_VERBOSE") != NULL;
  fcl_context *ctx = oh_open_context();
  if (!ctx) return 1;
  int runs = 0, failed = 0, bad_cases = 0, bad_failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    for (int t = FCL_F32; t <= FCL_BF16; ++t)
      if ((cases[i].dtypes & OH_DT(t)) && oh_selected(cases[i].name)) {
        ++runs;
        failed += !oh_rwkv7_case_run(ctx, &cases[i], (fcl_dtype)t, verbose);
      }
  if (oh_selected("bad inputs")) rwkv7_bad_inputs(ctx, &bad_cases, &bad_failed);
  fcl_context_destroy(ctx);
  printf("test_rwkv7: %d runs, %d failed; bad inputs %d cases, %d failed; %.1f s\n", runs,
         failed, bad_cases, bad_failed, tu_now() - t_start);
  return failed || bad_failed || (runs == 0 && bad_cases == 0) ? 1 : 0;
}
