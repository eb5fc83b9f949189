/* The RWKV6 step kernel (rwkv6_step, the forward of short sequences) with
 * its parameters forced through the tuning override, against the double
 * reference with the main suite's tolerances (op_rwkv6_case.c, as
 * test_rwkv6.c, whose AUTO runs take the device's own parameters). A CPU's
 * built-in parameters are one column a work-item and whole key columns,
 * so the paths a GPU's take are met here: float4 and float2 state rows,
 * row groups summed in the reduction tree (KS a power of two or not),
 * value blocks that do not divide V, columns masked inside a vector.
 * Forced, the kernel also runs past RW_STEP_MAX_T positions, in launches
 * that carry the state (T up to 9, varlen). Each forced set also runs a
 * forward twice, which must give the same bytes; and first, unforced, the
 * plan must name rwkv6_step exactly where it applies.
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
#define F16 OH_DT(FCL_F16)
#define BF16 OH_DT(FCL_BF16)
#define REC OH_REC /* RECURRENT: the step kernel while it is overridden */

/* GPU: the built-in parameters of a GPU at K = 64 and at K = 256. Odd: 3
 * row groups, blocks of 10 columns in float2. Scalar: one column a
 * work-item. Masked: float4 blocks with V not a multiple of 4. */
#define P_GPU "KS=16,VS=4,VC=4"
#define P_WIDE "KS=64,VS=4,VC=4"
#define P_ODD "KS=3,VS=5,VC=2"
#define P_SCALAR "KS=6,VS=8,VC=1"
#define P_MASKED "KS=5,VS=2,VC=4"

typedef struct {
  const char    *params;
  oh_rwkv6_case  c;
} forced_case;

#define C(p, ...) {p, {__VA_ARGS__}}
static const forced_case cases[] = {
  C(P_GPU, .name = "gpu T=1", .dtypes = ALL, .algos = REC, .b = 2, .t = 1, .h = 3),
  C(P_GPU, .name = "gpu T=1 K100 V100 reverse h0 NULL", .dtypes = F32, .algos = REC, .dk = 100, .dv = 100, .b = 2, .t = 1, .h = 2, .reverse = 1, .no_h0 = 1),
  C(P_GPU, .name = "gpu T=4 mixed ht NULL padded", .dtypes = F16, .algos = REC, .b = 1, .t = 4, .h = 2, .decay = OH_W_MIX, .no_ht = 1, .lin = TU_PADDED, .lout = TU_PADDED, .off = 2),
  C(P_GPU, .name = "gpu T=9 (three launches) varlen 9,0,4,1 reverse", .dtypes = F32 | BF16, .algos = REC, .nseq = 4, .lens = {9, 0, 4, 1}, .h = 2, .reverse = 1),
  C(P_GPU, .name = "gpu T=6 all optional NULL strong", .dtypes = F32, .algos = REC, .b = 2, .t = 6, .h = 1, .no_h0 = 1, .no_ht = 1, .no_dht = 1, .no_dh0 = 1, .decay = OH_W_STRONG),
  C(P_WIDE, .name = "wide K256 V256 T=1", .dtypes = BF16, .algos = REC, .dk = 256, .dv = 256, .b = 1, .t = 1, .h = 2),
  C(P_WIDE, .name = "wide K256 V36 T=5 extreme", .dtypes = F32, .algos = REC, .dk = 256, .dv = 36, .b = 2, .t = 5, .h = 1, .decay = OH_W_EXTREME),
  C(P_ODD, .name = "odd K7 V6 T=3 reverse", .dtypes = F16, .algos = REC, .dk = 7, .dv = 6, .b = 2, .t = 3, .h = 3, .reverse = 1),
  C(P_ODD, .name = "odd K33 V20 T=1 scale", .dtypes = F32, .algos = REC, .dk = 33, .dv = 20, .b = 3, .t = 1, .h = 2, .scale = 0.3f),
  C(P_ODD, .name = "odd K7 V7 T=2 varlen 2,0,1", .dtypes = F32, .algos = REC, .dk = 7, .dv = 7, .nseq = 3, .lens = {2, 0, 1}, .h = 2),
  C(P_SCALAR, .name = "scalar K64 V64 T=4 zero decay", .dtypes = F32, .algos = REC, .b = 2, .t = 4, .h = 2, .decay = OH_W_ZERO),
  C(P_SCALAR, .name = "scalar K6 V9 T=1", .dtypes = BF16, .algos = REC, .dk = 6, .dv = 9, .b = 2, .t = 1, .h = 2),
  C(P_MASKED, .name = "masked K17 V6 T=1 h0 NULL", .dtypes = F32 | F16, .algos = REC, .dk = 17, .dv = 6, .b = 2, .t = 1, .h = 2, .no_h0 = 1),
  C(P_MASKED, .name = "masked K17 V6 T=7 reverse", .dtypes = F32, .algos = REC, .dk = 17, .dv = 6, .b = 1, .t = 7, .h = 2, .reverse = 1),
};

/* Whether the plan names the step kernel exactly for the forward of at
 * most RW_STEP_MAX_T positions under AUTO. */
static int plan_ok(fcl_context *ctx) {
  const struct { int64_t t; fcl_rwkv6_algorithm a; int bwd; const char *kernel; } want[] = {
      {1, FCL_RWKV6_AUTO, 0, "rwkv6_step"},       {4, FCL_RWKV6_AUTO, 0, "rwkv6_step"},
      {5, FCL_RWKV6_AUTO, 0, "rwkv6_recurrent"},  {1, FCL_RWKV6_RECURRENT, 0, "rwkv6_recurrent"},
      {1, FCL_RWKV6_AUTO, 1, "rwkv6_bwd"}};
  int ok = 1;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; ++i) {
    fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
    d.batch = 1, d.seqlen = want[i].t, d.heads = 32, d.head_dim_k = d.head_dim_v = 64;
    d.algorithm = want[i].a;
    fcl_config_info info;
    const int good = fcl_rwkv6_config(ctx, &d, FCL_BF16, want[i].bwd, &info) == FCL_OK &&
                     strcmp(info.kernel, want[i].kernel) == 0;
    printf("%s plan: T=%lld %s %s runs %s %s (want %s)\n", good ? "PASS" : "FAIL",
           (long long)want[i].t, want[i].a == FCL_RWKV6_AUTO ? "auto" : "recurrent",
           want[i].bwd ? "backward" : "forward", info.kernel, info.params, want[i].kernel);
    ok &= good;
  }
  return ok;
}

/* The forward of c twice (the step kernel, forced): the same bytes. */
static int rerun_ok(fcl_context *ctx, const void *row, fcl_dtype dt) {
  const forced_case *fc = row;
  const oh_rwkv6_case *c = &fc->c;
  ref_rwkv6_problem p = {c->b, c->t, c->h, c->dk ? c->dk : 64, c->dv ? c->dv : 64, 0.0, c->reverse,
                         NULL};
  const oh_rwkv6_sizes n = oh_rwkv6_count(&p);
  double *buf = calloc(3 * n.rk + 3 * n.v + n.u + 3 * n.state + 1, sizeof *buf);
  if (!buf) abort();
  double *r = buf, *k = r + n.rk, *w = k + n.rk, *v = w + n.rk, *u = v + n.v, *h0 = u + n.u;
  double *o1 = h0 + n.state, *o2 = o1 + n.v, *ht1 = o2 + n.v, *ht2 = ht1 + n.state;
  tu_rng g;
  tu_rng_seed(&g, oh_case_seed(c->name, dt) + 1);
  tu_fill_uniform(&g, r, 2 * n.rk, -1, 1);
  oh_fill_decay(&g, w, n.rk, OH_W_WEAK);
  tu_fill_uniform(&g, v, n.v + n.u, -1, 1);
  tu_fill_uniform(&g, h0, n.state, -1, 1);
  tu_round_array(r, 3 * n.rk + n.v + n.u, dt);
  tu_round_array(h0, n.state, FCL_F32);
  char why[1024] = "";
  int ok = oh_rwkv6(ctx, &p, dt, FCL_RWKV6_AUTO, r, k, v, w, u, h0, NULL, NULL, o1, ht1, NULL,
                    NULL, NULL, NULL, NULL, NULL, why, sizeof why) == 0 &&
           oh_rwkv6(ctx, &p, dt, FCL_RWKV6_AUTO, r, k, v, w, u, h0, NULL, NULL, o2, ht2, NULL,
                    NULL, NULL, NULL, NULL, NULL, why, sizeof why) == 0;
  const int same = ok && memcmp(o1, o2, n.v * sizeof *o1) == 0 &&
                   memcmp(ht1, ht2, n.state * sizeof *ht1) == 0;
  printf("%s [%s] %-4s %s: a second forward gives the same bytes%s\n", same ? "PASS" : "FAIL",
         fc->params, tu_dtype_name(dt), c->name, why);
  free(buf);
  return same;
}

static const fcl_variant *g_step;

static void describe(const void *row, oh_forced_row *out) {
  const forced_case *fc = row;
  out->name = fc->c.name, out->dtypes = fc->c.dtypes;
  snprintf(out->label, sizeof out->label, "%s", fc->params);
  out->twice = !fc->c.nseq;
}

static fcl_status force(fcl_context *ctx, const void *row) {
  return fcl_tuning_override(ctx, g_step, row ? ((const forced_case *)row)->params : NULL);
}

static void run(oh_forced *f, const void *row, fcl_dtype dt) {
  const forced_case *fc = row;
  oh_rwkv6_case_run(f->ctx, &fc->c, dt, oh_case_seed(fc->c.name, dt), f->verbose, &f->runs,
                    &f->failed);
}

static const oh_forced_ops ops = {describe, force, run, rerun_ok};

int main(void) {
  oh_forced f;
  if (!oh_forced_open(&f)) return 1;
  g_step = fcl_variant_find("rwkv6_step");
  f.runs = 1, f.failed = !g_step || !plan_ok(f.ctx);
  if (g_step) oh_forced_run(&f, cases, sizeof cases / sizeof *cases, sizeof *cases, &ops);
  return oh_forced_close(&f, "test_rwkv6_step");
}
