/* The chunked RWKV6 forward and backward with tiles forced through the
 * tuning override, against the double reference with the main suite's
 * tolerances (op_rwkv6_case.c, as test_rwkv6.c). The built-in tiles of a
 * CPU are one sub-chunk of 16 positions and whole key and value rows, so
 * the paths a GPU's defaults take are met here: chunks of several
 * sub-chunks (products across sub-chunks, their decays relative to the
 * sub-chunk boundaries), chunks shorter than 16, key and value tiles that
 * do not divide the head dims, state tiles of several rows and columns
 * per work-group, and work-groups wider than a tile. Varlen batches put
 * chunk boundaries in the middle of the packed tokens; decays run from 0
 * to -1e4 (every algorithm must stay exact where a decay is strong), with
 * reverse, h0 / ht / dht / dh0 NULL or not, K != V.
 *
 *   test_rwkv6_chunked [portable|mma]   (default portable)
 *
 * mma: the forward's output and the backward's dv on tensor cores
 * (rwkv6_chunked_mma, rwkv6_bwd_chunked_mma: NVIDIA, or FCL_MMA_EMULATE=1),
 * f16, bf16 and f32 (split into bf16 pairs), with their tiles forced the
 * same way (several sub-chunks, chunks of 32 and 16, key tiles of 16 and
 * 32; the backward's dr dk dw kernel with value tiles of 32); first it
 * checks that fcl_rwkv6_config names the variants in each dtype. Where it
 * names them in none it exits 77 (CTest: skipped), and skips the cases of
 * a dtype it does not name them in; under FCL_MMA_EMULATE=1, which
 * guarantees them on any device, either is a failure (a broken probe must
 * not pass).
 *
 * Environment: FCL_DEVICE, FCL_TEST_FILTER (cases whose name contains it),
 * FCL_TEST_VERBOSE. */
#include "op_forced.h"
#include "op_harness.h"
#define FCL_STATIC_LINKING_ONLY
#include "flashcl_tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALL OH_ALL_DT
#define F32 OH_DT(FCL_F32)
#define BF16 OH_DT(FCL_BF16)
#define CH OH_CHUNK

/* GPU-like: chunks of 4 sub-chunks, key and value tiles, 4 work-items a
 * state row (wide: more work-items, for K = 256 within llvmpipe's loop
 * budget). Odd: tiles that divide nothing, 3 sub-chunks. Short: chunks of
 * 8 (one sub-chunk shorter than 16). Small: tiles of a few columns. All fit
 * the 32 KiB of local memory llvmpipe has. */
#define P_GPU "TC=64,BK=8,BV=32,WG=128,HK=16,HV=32,HC=4"
#define P_WIDE "TC=64,BK=8,BV=32,WG=256,HK=16,HV=32,HC=4"
#define P_ODD "TC=48,BK=12,BV=20,WG=96,HK=24,HV=40,HC=5"
#define P_SHORT "TC=8,BK=64,BV=32,WG=64,HK=64,HV=64,HC=16"
#define P_SMALL "TC=32,BK=3,BV=4,WG=32,HK=5,HV=4,HC=2"

typedef struct {
  const char    *params;
  oh_rwkv6_case  c;
} forced_case;

#define C(p, ...) {p, {__VA_ARGS__}}
static const forced_case cases[] = {
  C(P_GPU, .name = "gpu tiles T=300", .dtypes = ALL, .algos = CH, .b = 2, .t = 300, .h = 2),
  C(P_GPU, .name = "gpu tiles varlen mid-chunk 100,1,0,257,64,65", .dtypes = ALL, .algos = CH, .nseq = 6, .lens = {100, 1, 0, 257, 64, 65}, .h = 2),
  C(P_GPU, .name = "gpu tiles varlen reverse h0 NULL", .dtypes = F32, .algos = CH, .nseq = 4, .lens = {130, 7, 64, 200}, .h = 2, .reverse = 1, .no_h0 = 1),
  C(P_GPU, .name = "gpu tiles strong decays", .dtypes = ALL, .algos = CH, .b = 1, .t = 200, .h = 2, .decay = OH_W_STRONG),
  C(P_GPU, .name = "gpu tiles strong decays varlen reverse", .dtypes = F32, .algos = CH, .nseq = 4, .lens = {50, 1, 0, 190}, .h = 2, .reverse = 1, .decay = OH_W_STRONG),
  C(P_GPU, .name = "gpu tiles mixed decays", .dtypes = ALL, .algos = CH, .b = 2, .t = 150, .h = 2, .decay = OH_W_MIX),
  C(P_GPU, .name = "gpu tiles extreme mixed decays", .dtypes = F32, .algos = CH, .b = 1, .t = 256, .h = 2, .decay = OH_W_EXTREME),
  C(P_GPU, .name = "gpu tiles zero decay", .dtypes = F32, .algos = CH, .b = 1, .t = 130, .h = 2, .decay = OH_W_ZERO),
  C(P_GPU, .name = "gpu tiles all optional NULL scale", .dtypes = F32, .algos = CH, .b = 2, .t = 90, .h = 1, .no_h0 = 1, .no_ht = 1, .no_dht = 1, .no_dh0 = 1, .scale = 0.3f),
  C(P_GPU, .name = "gpu tiles K32 V48", .dtypes = F32, .algos = CH, .dk = 32, .dv = 48, .b = 1, .t = 140, .h = 2, .decay = OH_W_MIX),
  C(P_GPU, .name = "gpu tiles K128 V128", .dtypes = BF16, .algos = CH, .dk = 128, .dv = 128, .b = 1, .t = 129, .h = 1),
  C(P_WIDE, .name = "wide tiles K256 V32 strong reverse", .dtypes = F32, .algos = CH, .dk = 256, .dv = 32, .b = 1, .t = 70, .h = 1, .reverse = 1, .decay = OH_W_STRONG),
  C(P_ODD, .name = "odd tiles T=200", .dtypes = ALL, .algos = CH, .b = 2, .t = 200, .h = 2),
  C(P_ODD, .name = "odd tiles varlen mid-chunk reverse", .dtypes = F32, .algos = CH, .nseq = 5, .lens = {47, 0, 49, 96, 3}, .h = 3, .reverse = 1, .decay = OH_W_MIX),
  C(P_ODD, .name = "odd tiles extreme mixed", .dtypes = F32, .algos = CH, .b = 1, .t = 150, .h = 2, .decay = OH_W_EXTREME, .no_dht = 1),
  C(P_ODD, .name = "odd tiles K40 V72 padded", .dtypes = F32, .algos = CH, .dk = 40, .dv = 72, .b = 2, .t = 60, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 3),
  C(P_SHORT, .name = "short chunks T=77 reverse", .dtypes = ALL, .algos = CH, .b = 2, .t = 77, .h = 2, .reverse = 1),
  C(P_SHORT, .name = "short chunks varlen strong", .dtypes = F32, .algos = CH, .nseq = 3, .lens = {9, 30, 17}, .h = 2, .decay = OH_W_STRONG),
  C(P_SMALL, .name = "small tiles K7 V5 mixed", .dtypes = OH_DT(FCL_F16), .algos = CH, .dk = 7, .dv = 5, .b = 2, .t = 100, .h = 2, .decay = OH_W_MIX),
  C(P_SMALL, .name = "small tiles K7 V5 varlen reverse", .dtypes = F32, .algos = CH, .dk = 7, .dv = 5, .nseq = 3, .lens = {33, 64, 31}, .h = 1, .reverse = 1),
};

/* Tensor-core variants (the backward's adds BV=32). SEG=1: the state pass
 * in one walk; M_RUNS: in 4 runs side by side where the state's tiles
 * (one a sequence-head here: b1 h1, or nseq of them) are fewer than the
 * device's compute units. */
#define M_64 "TC=64,BK=16,HK=32,HV=64,SST=3,SEG=1"
#define M_32 "TC=32,BK=32,HK=16,HV=16,SST=2,SEG=1"
#define M_16 "TC=16,BK=16,HK=64,HV=16,SST=2,SEG=1"
#define M_W "TC=32,BK=16,HK=64,HV=64,SST=2,SEG=1" /* the defaults at K = V = 128 */
#define M_RUNS "TC=16,BK=16,HK=64,HV=64,SST=2,SEG=4"
/* f32, split into bf16 pairs: tiles that fit 48 KiB twice over. */
#define M_F32 "TC=32,BK=16,HK=16,HV=32,SST=2,SEG=1"
#define M_F32W "TC=32,BK=16,HK=16,HV=16,SST=3,SEG=1"
#define M_F32S "TC=16,BK=16,HK=32,HV=16,SST=2,SEG=1"
#define M_F32R "TC=32,BK=16,HK=64,HV=32,SST=2,SEG=1" /* a and w to registers */
#define F16 OH_DT(FCL_F16)
#define H16 (OH_DT(FCL_F16) | OH_DT(FCL_BF16))
static const forced_case mma_cases[] = {
  C(M_64, .name = "mma T=300", .dtypes = H16, .algos = CH, .b = 2, .t = 300, .h = 2),
  C(M_64, .name = "mma varlen mid-chunk reverse", .dtypes = BF16, .algos = CH, .nseq = 5, .lens = {100, 1, 0, 257, 65}, .h = 2, .reverse = 1),
  C(M_64, .name = "mma strong decays h0 NULL", .dtypes = F16, .algos = CH, .b = 1, .t = 200, .h = 2, .decay = OH_W_STRONG, .no_h0 = 1),
  C(M_64, .name = "mma extreme mixed decays", .dtypes = BF16, .algos = CH, .b = 1, .t = 130, .h = 1, .decay = OH_W_EXTREME),
  C(M_64, .name = "mma K128 V128 mixed", .dtypes = BF16, .algos = CH, .dk = 128, .dv = 128, .b = 1, .t = 100, .h = 1, .decay = OH_W_MIX),
  C(M_W, .name = "mma chunks of 32 K128 V128 varlen", .dtypes = F16, .algos = CH, .dk = 128, .dv = 128, .nseq = 3, .lens = {70, 33, 129}, .h = 1, .decay = OH_W_STRONG),
  C(M_32, .name = "mma chunks of 32 K32 V48 padded", .dtypes = F16, .algos = CH, .dk = 32, .dv = 48, .b = 2, .t = 70, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 3),
  C(M_16, .name = "mma chunks of 16 varlen scale", .dtypes = BF16, .algos = CH, .nseq = 3, .lens = {17, 40, 2}, .h = 2, .scale = 0.3f),
  C(M_RUNS, .name = "mma state in runs reverse extreme", .dtypes = BF16, .algos = CH, .b = 1, .t = 300, .h = 1, .reverse = 1, .decay = OH_W_EXTREME),
  C(M_RUNS, .name = "mma state in runs strong h0 NULL", .dtypes = F16, .algos = CH, .b = 1, .t = 250, .h = 1, .decay = OH_W_STRONG, .no_h0 = 1),
  C(M_RUNS, .name = "mma state in runs varlen mid-chunk", .dtypes = BF16, .algos = CH, .nseq = 3, .lens = {100, 0, 257}, .h = 1, .decay = OH_W_MIX),
  C(M_RUNS, .name = "mma split f32 state in runs mixed", .dtypes = F32, .algos = CH, .b = 1, .t = 300, .h = 1, .decay = OH_W_MIX),
  C(M_F32, .name = "mma split f32 T=300 mixed", .dtypes = F32, .algos = CH, .b = 2, .t = 300, .h = 2, .decay = OH_W_MIX),
  C(M_F32R, .name = "mma split f32 varlen mid-chunk reverse strong", .dtypes = F32, .algos = CH, .nseq = 5, .lens = {100, 1, 0, 257, 65}, .h = 2, .reverse = 1, .decay = OH_W_STRONG),
  C(M_F32W, .name = "mma split f32 K128 V128 extreme h0 NULL", .dtypes = F32, .algos = CH, .dk = 128, .dv = 128, .b = 1, .t = 100, .h = 1, .decay = OH_W_EXTREME, .no_h0 = 1),
  C(M_F32S, .name = "mma split f32 chunks of 16 K32 V48 padded", .dtypes = F32, .algos = CH, .dk = 32, .dv = 48, .b = 2, .t = 70, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 3),
};

/* Whether fcl_rwkv6_config names the tensor-core variants for dtype t. */
static bool mma_runs(fcl_context *ctx, fcl_dtype t, char *what, size_t n) {
  fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
  d.batch = 1, d.seqlen = 256, d.heads = 1, d.head_dim_k = d.head_dim_v = 64;
  d.algorithm = FCL_RWKV6_CHUNKED;
  fcl_config_info f, b;
  if (fcl_rwkv6_config(ctx, &d, t, 0, &f) != FCL_OK ||
      fcl_rwkv6_config(ctx, &d, t, 1, &b) != FCL_OK) {
    snprintf(what, n, "fcl_rwkv6_config: %s", fcl_context_last_error(ctx));
    return false;
  }
  snprintf(what, n, "%s %s, %s %s", f.kernel, f.params, b.kernel, b.params);
  return strcmp(f.kernel, "rwkv6_chunked_mma") == 0 &&
         strcmp(b.kernel, "rwkv6_bwd_chunked_mma") == 0;
}

static bool g_mma;
static const fcl_variant *g_fwd, *g_bwd;

static void describe(const void *row, oh_forced_row *out) {
  const forced_case *fc = row;
  out->name = fc->c.name, out->dtypes = fc->c.dtypes;
  snprintf(out->label, sizeof out->label, "%s", fc->params);
}

/* The forward's parameters, and the backward's (mma: blocks of 32 values). */
static fcl_status force(fcl_context *ctx, const void *row) {
  const forced_case *fc = row;
  char bp[128];
  if (fc) snprintf(bp, sizeof bp, "%s%s", fc->params, g_mma ? ",BV=32" : "");
  const fcl_status s1 = fcl_tuning_override(ctx, g_fwd, fc ? fc->params : NULL);
  const fcl_status s2 = fcl_tuning_override(ctx, g_bwd, fc ? bp : NULL);
  return s1 != FCL_OK ? s1 : s2;
}

static void run(oh_forced *f, const void *row, fcl_dtype dt) {
  const oh_rwkv6_case *c = &((const forced_case *)row)->c;
  oh_rwkv6_case_run(f->ctx, c, dt, oh_case_seed(c->name, dt), f->verbose, &f->runs, &f->failed);
}

int main(int argc, char **argv) {
  const bool mma = g_mma = argc > 1 && strcmp(argv[1], "mma") == 0;
  oh_forced f;
  if (!oh_forced_open(&f)) return 1;
  fcl_context *ctx = f.ctx;
  g_fwd = fcl_variant_find(mma ? "rwkv6_chunked_mma" : "rwkv6_chunked");
  g_bwd = fcl_variant_find(mma ? "rwkv6_bwd_chunked_mma" : "rwkv6_bwd_chunked");
  const forced_case *table = mma ? mma_cases : cases;
  const size_t ncases = mma ? sizeof mma_cases / sizeof *mma_cases : sizeof cases / sizeof *cases;
  /* mma: f.dtypes narrows to those fcl_rwkv6_config names the tensor-core variants in. */
  const bool guaranteed = mma && oh_mma_guaranteed();
  for (int t = FCL_F32; mma && t <= FCL_BF16; ++t) {
    char what[800] = "";
    const bool ok = mma_runs(ctx, (fcl_dtype)t, what, sizeof what);
    printf("%s %-4s fcl_rwkv6_config reports %s%s\n", ok ? "PASS" : guaranteed ? "FAIL" : "SKIP",
           tu_dtype_name((fcl_dtype)t), what,
           ok ? "" : guaranteed ? ", not the tensor-core variants, although FCL_MMA_EMULATE=1 "
                                  "guarantees them: is their probe broken? (FCL_LOG=1 says)"
                                : ": the tensor-core variants do not run here");
    f.failed += !ok && guaranteed;
    if (!ok) f.dtypes &= ~OH_DT(t);
  }
  if (mma && !f.dtypes && !guaranteed) {
    printf("test_rwkv6_chunked mma: skipped, the tensor-core variants do not run here\n");
    fcl_context_destroy(ctx);
    return OH_SKIP;
  }
  static const oh_forced_ops ops = {describe, force, run, NULL};
  oh_forced_run(&f, table, ncases, sizeof *table, &ops);
  return oh_forced_close(&f, "test_rwkv6_chunked");
}
