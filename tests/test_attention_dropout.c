/* Attention dropout (fcl_attention_desc.dropout_p) on $FCL_DEVICE:
 *  - forward o and lse and backward dq, dk, dv against the double reference
 *    with the host mask (ref_philox.c), through the main suites' harness
 *    (op_attention_case.c: their tolerances, poison outside the views,
 *    untouched inputs, empty rows and unseen keys exactly 0, two
 *    bit-identical backward runs), at p = 0.1 and 0.5 in f32, f16, bf16:
 *    causal, windows, GQA, varlen (the mask's i, j within the sequence),
 *    softcap, ALiBi, seqlen_q != seqlen_k, head dim 40, the decode shape;
 *    and once with the portable kernels' tiles forced (the tuning override)
 *    to sizes that differ between forward and backward;
 *  - what runs: kernels that take dropout (drops(); the others stand aside);
 *  - fcl_attention_probs and the mask's statistics (dropout_probs.c);
 *  - reruns and p = 0 (dropout_runs.c); bad input (dropout_bad_input.c).
 *
 * Environment: FCL_DEVICE (device selector), FCL_TEST_FILTER (only the
 * reference cases whose name contains it, and no other part). */
#define FCL_STATIC_LINKING_ONLY
#include "dropout_tests.h"
#include "flashcl_tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DT_ALL OH_ALL_DT
#define SEED(i) .dropout_seed = 0x9e3779b97f4a7c15u * (i), .dropout_offset = ((uint64_t)(i) << 33) + 5

/* d = dv = 40 throughout, so each dtype builds one forward and one
 * backward program with dropout. .bwd: the dtypes each runs in. */
static const oh_attention_case cases[] = {
  {.name = "plain 70x90", .bwd = DT_ALL, .b = 2, .sq = 70, .sk = 90, .hq = 2, .hkv = 2, .d = 40, .dv = 40, .dropout_p = 0.1f, SEED(1)},
  {.name = "causal sq<sk GQA 4/2", .bwd = DT_ALL, .b = 1, .sq = 50, .sk = 83, .hq = 4, .hkv = 2, .d = 40, .dv = 40, .causal = 1, .dropout_p = 0.5f, SEED(2)},
  {.name = "window both causal", .bwd = DT_ALL, .b = 1, .sq = 77, .sk = 77, .hq = 2, .hkv = 1, .d = 40, .dv = 40, .causal = 1, .win = 1, .wl = 9, .wr = 3, .dropout_p = 0.5f, SEED(3)},
  {.name = "varlen causal GQA empty", .bwd = DT_ALL, .nseq = 4, .lens_q = {30, 0, 65, 7}, .lens_k = {41, 12, 65, 0}, .hq = 4, .hkv = 2, .d = 40, .dv = 40, .causal = 1, .dropout_p = 0.1f, SEED(4)},
  {.name = "varlen window sq!=sk", .bwd = DT_ALL, .nseq = 3, .lens_q = {45, 64, 3}, .lens_k = {70, 33, 90}, .hq = 2, .hkv = 2, .d = 40, .dv = 40, .win = 1, .wl = 20, .wr = 10, .dropout_p = 0.5f, SEED(5)},
  {.name = "softcap alibi sq>sk", .bwd = DT_ALL, .b = 1, .sq = 90, .sk = 40, .hq = 2, .hkv = 2, .d = 40, .dv = 40, .softcap = 3.0f, .alibi = 1, .dropout_p = 0.5f, SEED(6)},
  {.name = "decode shape 1x300", .bwd = DT_ALL, .b = 2, .sq = 1, .sk = 300, .hq = 2, .hkv = 1, .d = 40, .dv = 40, .dropout_p = 0.1f, SEED(7)},
};

/* Forced tiles (flashcl_tuning.h): the forward's 16 queries x 8 keys with
 * the head in chunks of 20, the backward's 24 x 16. */
static const oh_attention_case tiled = {
  .name = "tiles forced varlen causal", .bwd = OH_DT(FCL_F32) | OH_DT(FCL_F16), .nseq = 3,
  .lens_q = {61, 100, 17}, .lens_k = {75, 90, 40}, .hq = 4, .hkv = 2, .d = 40, .dv = 40,
  .causal = 1, .softcap = 4.0f, .dropout_p = 0.5f, SEED(8)};
static const char *const fwd_params =
    "BLOCK_M=16,BLOCK_N=8,BLOCK_D=20,BLOCK_DV=40,WG_ROWS=4,WG_COLS=4";
static const char *const bwd_params = "BLOCK_R=24,BLOCK_C=16,BLOCK_K=40,WG_ROWS=8,WG_COLS=8";

static fcl_dtype dtype_at(unsigned mask, int i) {
  int k = 0;
  for (int t = 0; t < 3; ++t)
    if (mask & OH_DT(t) && k++ == i) return (fcl_dtype)t;
  return (fcl_dtype)-1;
}

/* Whether a kernel of the registry implements dropout (the others stand
 * aside for it): the portable forward and backward, the CPU forward, the
 * tensor cores' mma.sync (and 3xTF32) rows and Hopper's wgmma rows. */
static int drops(const char *kernel) {
  static const char *const with[] = {"attention_fwd",       "attention_fwd_cpu",
                                      "attention_bwd",       "attention_fwd_mma",
                                      "attention_bwd_mma",   "attention_fwd_wgmma",
                                      "attention_bwd_wgmma"};
  for (size_t i = 0; i < sizeof with / sizeof with[0]; ++i)
    if (!strcmp(kernel, with[i])) return 1;
  return 0;
}

/* The kernels fcl_attention_config reports for c's shape with dropout:
 * kernels with dropout and, with params, those parameters. */
static void check_config(fcl_context *ctx, dp_tally *t, const oh_attention_case *c, fcl_dtype dt,
                         const char *fwd_want, const char *bwd_want) {
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = c->nseq ? c->nseq : c->b, d.seqlen_q = c->nseq ? 100 : c->sq;
  d.seqlen_k = c->nseq ? 100 : c->sk, d.heads_q = c->hq, d.heads_kv = c->hkv;
  d.head_dim = c->d, d.head_dim_v = c->dv, d.causal = c->causal, d.dropout_p = c->dropout_p;
  fcl_config_info f, b;
  const int ok = fcl_attention_config(ctx, &d, dt, 0, &f) == FCL_OK &&
                 fcl_attention_config(ctx, &d, dt, 1, &b) == FCL_OK;
  dp_expect(t,
            ok && drops(f.kernel) && drops(b.kernel) &&
                (!fwd_want || !strcmp(f.params, fwd_want)) &&
                (!bwd_want || !strcmp(b.params, bwd_want)),
            "%-4s %s: with dropout the forward runs %s (%s), the backward %s (%s)",
            tu_dtype_name(dt), c->name, ok ? f.kernel : "?", ok ? f.params : "",
            ok ? b.kernel : "?", ok ? b.params : fcl_context_last_error(ctx));
}

int main(void) {
  const double t0 = tu_now();
  fcl_context *ctx = oh_open_context();
  if (!ctx) return 1;
  oh_attention_stats stats = {0};
  dp_tally t = {0, 0};

  double tp = tu_now();
  for (int dti = 0; dti < 3; ++dti)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
      const fcl_dtype dt = (fcl_dtype)dti;
      if (!(cases[i].bwd & OH_DT(dt)) || !oh_selected(cases[i].name)) continue;
      oh_attention_case_run(ctx, &cases[i], dt, 1, oh_case_seed(cases[i].name, dt), &stats);
    }
  printf("-- reference cases: %.1f s\n", tu_now() - tp);

  tp = tu_now();
  if (oh_selected(tiled.name)) {
    const fcl_variant *fv = fcl_variant_find("attention_fwd"),
                      *bv = fcl_variant_find("attention_bwd");
    const int set = fv && bv && fcl_tuning_override(ctx, fv, fwd_params) == FCL_OK &&
                    fcl_tuning_override(ctx, bv, bwd_params) == FCL_OK;
    dp_expect(&t, set, "tuning override of attention_fwd and attention_bwd set");
    for (int i = 0; set && dtype_at(tiled.bwd, i) != (fcl_dtype)-1; ++i) {
      const fcl_dtype dt = dtype_at(tiled.bwd, i);
      check_config(ctx, &t, &tiled, dt, fwd_params, bwd_params);
      oh_attention_case_run(ctx, &tiled, dt, 1, oh_case_seed(tiled.name, dt), &stats);
    }
    if (fv) fcl_tuning_override(ctx, fv, NULL);
    if (bv) fcl_tuning_override(ctx, bv, NULL);
    printf("-- forced tiles: %.1f s\n", tu_now() - tp);
  }

  const char *filter = getenv("FCL_TEST_FILTER");
  if (!filter || !*filter) {
    tp = tu_now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
      check_config(ctx, &t, &cases[i], FCL_F16, NULL, NULL);
    dp_probs_tests(ctx, &t);
    printf("-- kernels and probabilities: %.1f s\n", tu_now() - tp);
    tp = tu_now();
    dp_stats_tests(ctx, &t);
    printf("-- mask statistics: %.1f s\n", tu_now() - tp);
    tp = tu_now();
    dp_rerun_tests(ctx, &t);
    printf("-- reruns and p = 0: %.1f s\n", tu_now() - tp);
    tp = tu_now();
    dp_bad_input_tests(ctx, &t);
    printf("-- bad input: %.1f s\n", tu_now() - tp);
  }

  fcl_context_stats cs = {0, 0, 0};
  fcl_context_get_stats(ctx, &cs);
  printf("programs built %d, from cache %d\n", cs.programs_built, cs.programs_from_cache);
  fcl_context_destroy(ctx);
  const int run = stats.run + t.run, failed = stats.failed + t.failed;
  printf("test_attention_dropout: %d cases, %d failed, %.1f s\n", run, failed, tu_now() - t0);
  return failed || run == 0 ? 1 : 0;
}
