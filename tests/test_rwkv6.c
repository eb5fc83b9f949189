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
#include <string.h>

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
  /* The step kernel: AUTO's forward up to T = 4 (RW_STEP_MAX_T), against
   * the reference beside the recurrent kernel. */
  C(.name = "step T=1 K1 V1", .dtypes = ALL, .algos = OH_AUTO, .dk = 1, .dv = 1, .b = 3, .t = 1, .h = 2),
  C(.name = "step T=1 K7 V5 reverse h0 NULL", .dtypes = ALL, .algos = OH_AUTO | OH_REC, .dk = 7, .dv = 5, .b = 2, .t = 1, .h = 3, .reverse = 1, .no_h0 = 1),
  C(.name = "step T=1 K64 ht NULL", .dtypes = ALL, .algos = OH_AUTO | OH_REC, .b = 4, .t = 1, .h = 3, .no_ht = 1),
  C(.name = "step T=1 K100 V64 padded", .dtypes = BF16, .algos = OH_AUTO | OH_REC, .dk = 100, .dv = 64, .b = 2, .t = 1, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 3),
  C(.name = "step T=1 K64 V100 mixed", .dtypes = F16, .algos = OH_AUTO | OH_REC, .dk = 64, .dv = 100, .b = 2, .t = 1, .h = 2, .decay = OH_W_MIX),
  C(.name = "step T=1 K256 V256", .dtypes = F32 | BF16, .algos = OH_AUTO | OH_REC, .dk = 256, .dv = 256, .b = 2, .t = 1, .h = 1),
  C(.name = "step T=1 K256 V7 strong scale", .dtypes = F32, .algos = OH_AUTO | OH_REC, .dk = 256, .dv = 7, .b = 1, .t = 1, .h = 2, .decay = OH_W_STRONG, .scale = 0.3f),
  C(.name = "step T=2 all optional NULL", .dtypes = F32, .algos = OH_AUTO | OH_REC, .b = 2, .t = 2, .h = 2, .no_h0 = 1, .no_ht = 1, .no_dht = 1, .no_dh0 = 1),
  C(.name = "step T=3 reverse extreme", .dtypes = ALL, .algos = OH_AUTO | OH_REC, .b = 2, .t = 3, .h = 2, .reverse = 1, .decay = OH_W_EXTREME),
  C(.name = "step T=4 K7 V5 zero decay", .dtypes = F16, .algos = OH_AUTO | OH_REC, .dk = 7, .dv = 5, .b = 2, .t = 4, .h = 2, .decay = OH_W_ZERO),
  C(.name = "step varlen 1,0,4,3 reverse", .dtypes = F32 | BF16, .algos = OH_AUTO | OH_REC, .nseq = 4, .lens = {1, 0, 4, 3}, .h = 2, .reverse = 1),
  C(.name = "step varlen 0,2 seqlen 4 padded junk strides[0]", .dtypes = F32, .algos = OH_AUTO | OH_REC, .nseq = 2, .lens = {0, 2}, .h = 2, .seqlen_extra = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 1, .junk_stride0 = 1),
};

/* The step kernel (AUTO up to T = 4: fcl_rwkv6_config names it) against
 * the fused recurrent kernel (RECURRENT) on the same inputs: o within a
 * rounding of the dtype (the sums over K meet in another order) and ht
 * within a few f32 roundings (the same update per element), both relative
 * to max|recurrent|; and a second step run bit-identical to the first. */
typedef struct {
  const char *name;
  fcl_dtype   dt;
  int64_t     b, t, h, k, v;
  int         reverse, no_h0;
} step_pair;
static const step_pair step_pairs[] = {
  {"step vs recurrent B1 H32 K64 V64", FCL_BF16, 1, 1, 32, 64, 64, 0, 0},
  {"step vs recurrent T=3 K100 V36 reverse", FCL_F32, 2, 3, 2, 100, 36, 1, 0},
  {"step vs recurrent T=4 K7 V256 h0 NULL", FCL_F16, 2, 4, 2, 7, 256, 0, 1},
};

static int step_vs_recurrent(fcl_context *ctx, const step_pair *c, uint64_t seed) {
  const double t0 = tu_now();
  ref_rwkv6_problem p = {c->b, c->t, c->h, c->k, c->v, 0.0, c->reverse, NULL};
  const oh_rwkv6_sizes n = oh_rwkv6_count(&p);
  double *in[6], *o[3], *ht[3];
  const size_t nin[6] = {n.rk, n.rk, n.v, n.rk, n.u, n.state};
  tu_rng g;
  tu_rng_seed(&g, seed);
  for (int i = 0; i < 6; ++i) {
    in[i] = calloc(nin[i] + 1, sizeof(double));
    if (!in[i]) abort();
    if (i == 3) oh_fill_decay(&g, in[i], nin[i], OH_W_WEAK);
    else tu_fill_uniform(&g, in[i], nin[i], -1, 1);
    tu_round_array(in[i], nin[i], i == 5 ? FCL_F32 : c->dt);
  }
  for (int i = 0; i < 3; ++i) {
    o[i] = calloc(n.v + 1, sizeof(double));
    ht[i] = calloc(n.state + 1, sizeof(double));
    if (!o[i] || !ht[i]) abort();
  }
  char why[1024] = "";
  fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
  d.batch = c->b, d.seqlen = c->t, d.heads = c->h, d.head_dim_k = c->k, d.head_dim_v = c->v;
  d.reverse = c->reverse;
  fcl_config_info info;
  int ok = fcl_rwkv6_config(ctx, &d, c->dt, 0, &info) == FCL_OK &&
           strcmp(info.kernel, "rwkv6_step") == 0;
  if (!ok) snprintf(why, sizeof why, " AUTO runs %s, not rwkv6_step;", info.kernel);
  const fcl_rwkv6_algorithm algo[3] = {FCL_RWKV6_AUTO, FCL_RWKV6_AUTO, FCL_RWKV6_RECURRENT};
  for (int i = 0; i < 3; ++i)
    ok &= oh_rwkv6(ctx, &p, c->dt, algo[i], in[0], in[1], in[2], in[3], in[4],
                   c->no_h0 ? NULL : in[5], NULL, NULL, o[i], ht[i], NULL, NULL, NULL, NULL,
                   NULL, NULL, why, sizeof why) == 0;
  const int same = memcmp(o[0], o[1], n.v * sizeof(double)) == 0 &&
                   memcmp(ht[0], ht[1], n.state * sizeof(double)) == 0;
  if (!same) oh_append(why, sizeof why, " a second run differs;");
  const double f32 = 64 * 0x1p-24;
  const double ulp = c->dt == FCL_BF16 ? 0x1p-7 : c->dt == FCL_F16 ? 0x1p-10 : 0.0;
  const tu_cmp co = tu_compare(o[0], o[2], n.v, (tu_tol){ulp + f32, 0, 0}, 0);
  const tu_cmp ch = tu_compare(ht[0], ht[2], n.state, (tu_tol){f32, 0, 0}, 0);
  if (!co.ok) oh_append(why, sizeof why, " o differs from the recurrent kernel's;");
  if (!ch.ok) oh_append(why, sizeof why, " ht differs from the recurrent kernel's;");
  ok &= same && co.ok && ch.ok;
  printf("%s %-4s %s |%s o %.1e ht %.1e of max | %.2f s\n", ok ? "PASS" : "FAIL",
         tu_dtype_name(c->dt), c->name, why, co.ref_max > 0 ? co.max_err / co.ref_max : 0.0,
         ch.ref_max > 0 ? ch.max_err / ch.ref_max : 0.0, tu_now() - t0);
  for (int i = 0; i < 6; ++i) free(in[i]);
  for (int i = 0; i < 3; ++i) free(o[i]), free(ht[i]);
  return ok;
}

int main(void) {
  const double t_start = tu_now();
  const int verbose = getenv("FCL_TEST_VERBOSE") != NULL;
  fcl_context *ctx = oh_open_context();
  if (!ctx) return 1;
  if (getenv("FCL_RWKV6_ALGORITHM"))
    printf("note: FCL_RWKV6_ALGORITHM=%s steers the AUTO runs\n", getenv("FCL_RWKV6_ALGORITHM"));

  int runs = 0, failed = 0, bad_cases = 0, bad_failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    for (int t = FCL_F32; t <= FCL_BF16; ++t)
      if ((cases[i].dtypes & OH_DT(t)) && oh_selected(cases[i].name))
        oh_rwkv6_case_run(ctx, &cases[i], (fcl_dtype)t, oh_case_seed(cases[i].name, (fcl_dtype)t),
                          verbose, &runs, &failed);
  for (size_t i = 0; i < sizeof step_pairs / sizeof step_pairs[0]; ++i)
    if (oh_selected(step_pairs[i].name)) {
      ++runs;
      failed += !step_vs_recurrent(ctx, &step_pairs[i],
                                   oh_case_seed(step_pairs[i].name, step_pairs[i].dt));
    }
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
