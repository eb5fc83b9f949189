/* The chunked RWKV7 forward (rwkv7_chunked) against the double reference
 * with test_rwkv7's tolerances (op_rwkv7.c: tu_tol_rwkv6, as the RWKV6
 * chunked tests), on the models' inputs: w in [-0.6065, 0], a = -kk,
 * b = kk * U(0, 0.1), kk L2-normalised, decay_lower_bound = -exp(-0.5).
 *
 * First the plan: fcl_rwkv7_config must name rwkv7_chunked where the
 * bound allows it (AUTO at T = 4096; its chunk no longer than the bound
 * allows, a forced one cut down to it) and rwkv7_recurrent where it does
 * not (no bound, or one too strong for chunks of 16), even with the
 * chunked variant forced through the tuning override; the backward stays
 * the recurrent kernel (test_rwkv7 checks it; the bound does not reach
 * it). Then cases, tiles forced through the override: chunks of 12 and 16
 * (the built-in ones, 64 on CPUs, in the AUTO case), key tiles and value
 * blocks that divide nothing, T odd, T below one chunk and of several,
 * every dtype, varlen with an empty sequence, reverse, h0 / ht NULL or
 * not, strided layouts, a and b unrelated (the triangular solve's higher
 * terms: with the models' a and b they are below f32's tolerance).
 * "carry" marks the cases of the filtered CTest entries: rusticl's, and
 * PoCL's with FCL_LOOP_BUDGET, where the state pass runs a launch a chunk,
 * the state carried between launches.
 *
 *   test_rwkv7_chunked [portable|mma]   (default portable)
 *
 * mma: the output on tensor cores (rwkv7_chunked_mma: NVIDIA, or
 * FCL_MMA_EMULATE=1), f16 and bf16, tiles forced the same way (chunks of
 * 16, 32 and 64, key tiles of 16 and 32); first fcl_rwkv7_config must name
 * it in both dtypes. Where it names it in neither it exits 77 (CTest:
 * skipped); under FCL_MMA_EMULATE=1, which guarantees it, that fails.
 *
 * Environment: FCL_DEVICE, FCL_TEST_FILTER, FCL_TEST_VERBOSE. */
#include "op_forced.h"
#include "op_rwkv7.h"
#define FCL_STATIC_LINKING_ONLY
#include "flashcl_tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 OH_DT(FCL_F32)
#define F16 OH_DT(FCL_F16)
#define BF16 OH_DT(FCL_BF16)
#define MODEL REF_RWKV7_W_MODEL
#define BOUND -0.60653066f /* -exp(-0.5) */

typedef struct {
  const char   *params; /* NULL: not forced (AUTO) */
  oh_rwkv7_case c;
} chunk_case;
/* Each (dtype, head dims, tiles) builds its programs (seconds on a CPU),
 * so f32 runs at K = 40, V = 52 with odd tiles: chunks of 12, key tiles
 * of 24 (the last partial), value blocks of 20 and 24, 40 work-items
 * (entries a work-item: several); f16 and bf16 at K = V = 64 with chunks
 * of 16 and two value blocks; AUTO with the built-in tiles. */
#define P_ODD "TC=12,BK=24,BV=20,HV=24,WG=40"
#define P_16 "TC=16,BK=32,BV=32,HV=32,WG=64"
#define ODD .dtypes = F32, .dk = 40, .dv = 52
#define C(p, ...) {p, {.decay = MODEL, .decay_lower_bound = BOUND, .fwd_only = 1, __VA_ARGS__}}
#define CG(p, ...) {p, {.general = 1, .decay_lower_bound = BOUND, .fwd_only = 1, __VA_ARGS__}}
static const chunk_case cases[] = {
  C(P_ODD, .name = "T=1", ODD, .b = 2, .t = 1, .h = 2),
  C(P_ODD, .name = "T=9 (below a chunk) h0 NULL", ODD, .b = 2, .t = 9, .h = 2, .no_h0 = 1),
  C(P_ODD, .name = "T=77 (odd, seven chunks) carry", ODD, .b = 2, .t = 77, .h = 2),
  C(P_ODD, .name = "T=48 reverse ht NULL", ODD, .b = 1, .t = 48, .h = 3, .reverse = 1, .no_ht = 1),
  C(P_ODD, .name = "varlen 17,0,1,50,12 reverse carry", ODD, .nseq = 5, .lens = {17, 0, 1, 50, 12}, .h = 2, .reverse = 1),
  C(P_ODD, .name = "varlen 25,0,13 h0 NULL sbhd", ODD, .nseq = 3, .lens = {25, 0, 13}, .h = 2, .no_h0 = 1, .lin = TU_SBHD, .lout = TU_SBHD),
  /* a and b uniform, unrelated: the solve's higher terms count */
  CG(P_ODD, .name = "T=45 zero decay general a b scale 1", ODD, .b = 1, .t = 45, .h = 2, .decay = REF_RWKV7_W_ZERO, .scale = 1.0f),
  CG(P_ODD, .name = "T=50 general a b reverse", ODD, .b = 1, .t = 50, .h = 2, .decay = MODEL, .reverse = 1),
  C(P_16, .name = "T=9 (below a chunk) h0 NULL", .dtypes = F16 | BF16, .b = 2, .t = 9, .h = 2, .no_h0 = 1),
  C(P_16, .name = "T=77 (odd, five chunks)", .dtypes = F16 | BF16, .b = 2, .t = 77, .h = 2),
  C(P_16, .name = "T=64 reverse ht NULL", .dtypes = BF16, .b = 1, .t = 64, .h = 3, .reverse = 1, .no_ht = 1),
  C(P_16, .name = "varlen 40,0 padded layout offset", .dtypes = BF16, .nseq = 2, .lens = {40, 0}, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 3),
  C(NULL, .name = "AUTO T=300", .dtypes = F32, .b = 1, .t = 300, .h = 1),
};

/* Tensor cores: chunks of 32 in two warps' rows, key tiles of 16 (K = 64:
 * four); chunks of 64 (four warps), key tiles of 32; chunks of 16 at
 * K = 32, V = 48. */
#define M_32 "TC=32,BK=16,HV=32,WG=64"
#define M_64 "TC=64,BK=32,HV=64,WG=64"
#define M_16 "TC=16,BK=16,HV=16,WG=32"
#define H16 (F16 | BF16)
static const chunk_case mma_cases[] = {
  C(M_32, .name = "mma T=9 (below a chunk) h0 NULL", .dtypes = H16, .b = 2, .t = 9, .h = 2, .no_h0 = 1),
  C(M_32, .name = "mma T=77 (odd, three chunks)", .dtypes = H16, .b = 2, .t = 77, .h = 2),
  C(M_32, .name = "mma varlen 40,0,1,33 reverse", .dtypes = BF16, .nseq = 4, .lens = {40, 0, 1, 33}, .h = 2, .reverse = 1),
  C(M_64, .name = "mma chunks of 64 T=150 padded", .dtypes = F16, .b = 1, .t = 150, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 3),
  C(M_16, .name = "mma chunks of 16 K32 V48 reverse", .dtypes = BF16, .dk = 32, .dv = 48, .b = 2, .t = 37, .h = 1, .reverse = 1),
};

/* Whether fcl_rwkv7_config names the tensor-core variant for dtype t. */
static bool mma_runs(fcl_context *ctx, fcl_dtype t, char *what, size_t n) {
  fcl_rwkv7_desc d = FCL_RWKV7_DESC_INIT;
  d.batch = 1, d.seqlen = 4096, d.heads = 1, d.head_dim_k = d.head_dim_v = 64;
  d.decay_lower_bound = BOUND;
  fcl_config_info f;
  if (fcl_rwkv7_config(ctx, &d, t, 0, &f) != FCL_OK) {
    snprintf(what, n, "fcl_rwkv7_config: %s", fcl_context_last_error(ctx));
    return false;
  }
  snprintf(what, n, "%s %s", f.kernel, f.params);
  return strcmp(f.kernel, "rwkv7_chunked_mma") == 0;
}

/* fcl_rwkv7_config names `want` for dtype t (and, when tc > 0, TC=tc) for
 * the bound; want "rwkv7_chunked" also takes rwkv7_chunked_mma, the same
 * form with its output on tensor cores, where the device runs it (f16 and
 * bf16 on NVIDIA: a forced rwkv7_chunked tile is then not its tile). */
static int plan_is(fcl_context *ctx, fcl_dtype t, float bound, int backward, const char *want,
                   int tc, const char *how) {
  fcl_rwkv7_desc d = FCL_RWKV7_DESC_INIT;
  d.batch = 1, d.seqlen = 4096, d.heads = 32, d.head_dim_k = d.head_dim_v = 64;
  d.decay_lower_bound = bound;
  fcl_config_info info;
  char tcs[16];
  snprintf(tcs, sizeof tcs, "TC=%d,", tc);
  const fcl_status s = fcl_rwkv7_config(ctx, &d, t, backward, &info);
  const bool mma = s == FCL_OK && strcmp(want, "rwkv7_chunked") == 0 &&
                   strcmp(info.kernel, "rwkv7_chunked_mma") == 0;
  const int ok = s == FCL_OK && (strcmp(info.kernel, want) == 0 || mma) &&
                 (tc == 0 || mma || strncmp(info.params, tcs, strlen(tcs)) == 0);
  printf("%s plan: %s bound %g %s%s: %s %s (want %s%s%s%s)\n", ok ? "PASS" : "FAIL",
         tu_dtype_name(t), (double)bound, backward ? "backward" : "forward", how,
         s == FCL_OK ? info.kernel : "error", s == FCL_OK ? info.params : fcl_context_last_error(ctx),
         want, tc ? " " : "", tc ? tcs : "", mma ? "; on tensor cores" : "");
  return ok;
}

/* The plans in f32, which every device runs on rwkv7_chunked, and in bf16,
 * which NVIDIA runs on rwkv7_chunked_mma. */
static int plans_ok(fcl_context *ctx) {
  const fcl_variant *vc = fcl_variant_find("rwkv7_chunked");
  int ok = 1;
  for (int t = FCL_F32; t <= FCL_BF16; t += FCL_BF16 - FCL_F32) {
    const fcl_dtype dt = (fcl_dtype)t;
    ok &= plan_is(ctx, dt, BOUND, 0, "rwkv7_chunked", 0, "");
    ok &= plan_is(ctx, dt, -1.2f, 0, "rwkv7_chunked", 0, "");
    ok &= plan_is(ctx, dt, 0.0f, 0, "rwkv7_recurrent", 0, "");
    ok &= plan_is(ctx, dt, -3.0f, 0, "rwkv7_recurrent", 0, "");
    ok &= plan_is(ctx, dt, BOUND, 1, "rwkv7_bwd", 0, "");
    /* Chunks of 32 fit llvmpipe's 32 KiB of local memory. */
    if (fcl_tuning_override(ctx, vc, "TC=32,BK=8,BV=16,HV=16,WG=64") != FCL_OK) {
      printf("FAIL override: %s\n", fcl_context_last_error(ctx));
      return 0;
    }
    ok &= plan_is(ctx, dt, BOUND, 0, "rwkv7_chunked", 32, " forced");
    ok &= plan_is(ctx, dt, -1.2f, 0, "rwkv7_chunked", 32, " forced");
    ok &= plan_is(ctx, dt, -2.5f, 0, "rwkv7_chunked", 16, " forced");
    ok &= plan_is(ctx, dt, 0.0f, 0, "rwkv7_recurrent", 0, " forced");
    ok &= plan_is(ctx, dt, -3.0f, 0, "rwkv7_recurrent", 0, " forced");
    fcl_tuning_override(ctx, vc, NULL);
  }
  return ok;
}

static const fcl_variant *g_vc;

static void describe(const void *row, oh_forced_row *out) {
  const chunk_case *cc = row;
  out->name = cc->c.name, out->dtypes = cc->c.dtypes;
  snprintf(out->label, sizeof out->label, "%s", cc->params ? cc->params : "AUTO");
}

static fcl_status force(fcl_context *ctx, const void *row) {
  return fcl_tuning_override(ctx, g_vc, row ? ((const chunk_case *)row)->params : NULL);
}

static void run(oh_forced *f, const void *row, fcl_dtype dt) {
  ++f->runs;
  f->failed += !oh_rwkv7_case_run(f->ctx, &((const chunk_case *)row)->c, dt, f->verbose);
}

int main(int argc, char **argv) {
  const bool mma = argc > 1 && strcmp(argv[1], "mma") == 0;
  oh_forced f;
  if (!oh_forced_open(&f)) return 1;
  fcl_context *ctx = f.ctx;
  g_vc = fcl_variant_find(mma ? "rwkv7_chunked_mma" : "rwkv7_chunked");
  const chunk_case *table = mma ? mma_cases : cases;
  const size_t ncases = mma ? sizeof mma_cases / sizeof *mma_cases : sizeof cases / sizeof *cases;
  /* mma: f.dtypes narrows to those fcl_rwkv7_config names it in. */
  const bool guaranteed = mma && oh_mma_guaranteed();
  if (!mma && oh_selected("plan")) f.runs = 1, f.failed = !plans_ok(ctx);
  for (int t = FCL_F16; mma && t <= FCL_BF16; ++t) {
    char what[800] = "";
    const bool ok = mma_runs(ctx, (fcl_dtype)t, what, sizeof what);
    printf("%s %-4s fcl_rwkv7_config reports %s%s\n", ok ? "PASS" : guaranteed ? "FAIL" : "SKIP",
           tu_dtype_name((fcl_dtype)t), what,
           ok ? "" : guaranteed ? ", not rwkv7_chunked_mma, although FCL_MMA_EMULATE=1 "
                                  "guarantees it" : ": the tensor-core variant does not run here");
    f.failed += !ok && guaranteed;
    if (!ok) f.dtypes &= ~OH_DT(t);
  }
  if (mma && !(f.dtypes & (F16 | BF16)) && !guaranteed) {
    printf("test_rwkv7_chunked mma: skipped, the tensor-core variant does not run here\n");
    fcl_context_destroy(ctx);
    return OH_SKIP;
  }
  static const oh_forced_ops ops = {describe, force, run, NULL};
  oh_forced_run(&f, table, ncases, sizeof *table, &ops);
  return oh_forced_close(&f, mma ? "test_rwkv7_chunked mma" : "test_rwkv7_chunked");
}
