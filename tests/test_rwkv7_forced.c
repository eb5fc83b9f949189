/* The RWKV7 recurrent kernels with their parameters forced through the
 * tuning override, against the double reference with test_rwkv7's
 * tolerances and checks (op_rwkv7.c). A CPU's built-in parameters keep
 * whole columns in one work-item, so the paths a GPU's take are met here:
 * rows of a column spread over work-items and summed in local memory
 * (rw7_colsum: KS a multiple of its 8-row stage or not, KS = K), several
 * column groups a work-group, value blocks that do not divide V, chunks of
 * 1 to 5 positions, and (FCL_LOOP_BUDGET, set by the test's second CTest
 * entry) launches that carry the state and its gradient. First, unforced,
 * the plan must name rwkv7_recurrent and rwkv7_bwd (at T = 64: shorter
 * forwards take rwkv7_step, test_rwkv7_step.c).
 *
 * Environment: FCL_DEVICE, FCL_TEST_FILTER, FCL_TEST_VERBOSE. */
#include "op_forced.h"
#include "op_rwkv7.h"
#define FCL_STATIC_LINKING_ONLY
#include "flashcl_tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALL OH_ALL_DT
#define F32 OH_DT(FCL_F32)
#define F16 OH_DT(FCL_F16)
#define BF16 OH_DT(FCL_BF16)

/* GPU: the built-in forward of a GPU at K = 64 and a row a work-item in
 * the backward. Odd: 3 row blocks, 5 column groups of 2, chunks of 3.
 * Wide: 20 row blocks (three stage-1 sums, the last partial). */
typedef struct {
  const char   *fwd, *bwd;
  oh_rwkv7_case c;
} forced_case;
#define P_GPU "TC=16,KS=8,VS=8,VC=4", "TC=8,KS=64,VC=8"
/* K = 65: two rows a work-item in the backward (33 row blocks). */
#define P_GPU65 "TC=16,KS=8,VS=8,VC=4", "TC=4,KS=33,VC=8"
#define P_ODD "TC=3,KS=3,VS=5,VC=2", "TC=5,KS=3,VC=3"
#define P_WIDE "TC=1,KS=20,VS=1,VC=1", "TC=2,KS=20,VC=2"
#define C(p, ...) {p, {__VA_ARGS__}}
/* "carry" marks the cases the FCL_LOOP_BUDGET entry runs. */
static const forced_case cases[] = {
  C(P_GPU, .name = "gpu T=1", .dtypes = F32, .b = 2, .t = 1, .h = 3),
  C(P_GPU, .name = "gpu T=70 reverse w U(-8,-6) carry", .dtypes = BF16, .b = 1, .t = 70, .h = 2, .reverse = 1, .decay = REF_RWKV7_W_STRONG),
  C(P_GPU, .name = "gpu varlen 9,0,40,1 h0 NULL carry", .dtypes = F32, .nseq = 4, .lens = {9, 0, 40, 1}, .h = 2, .no_h0 = 1),
  C(P_GPU65, .name = "gpu K65 V37 padded", .dtypes = F16, .dk = 65, .dv = 37, .b = 2, .t = 21, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 3),
  C(P_ODD, .name = "odd K7 V11 T=23 reverse general a b carry", .dtypes = F32, .dk = 7, .dv = 11, .b = 2, .t = 23, .h = 2, .reverse = 1, .general = 1),
  C(P_WIDE, .name = "wide K100 V9 varlen 17,3 all optional NULL", .dtypes = F32, .dk = 100, .dv = 9, .nseq = 2, .lens = {17, 3}, .h = 1, .no_h0 = 1, .no_ht = 1, .no_dht = 1, .no_dh0 = 1),
};

static int plan_ok(fcl_context *ctx) {
  int ok = 1;
  for (int bwd = 0; bwd < 2; ++bwd) {
    fcl_rwkv7_desc d = FCL_RWKV7_DESC_INIT;
    d.batch = 1, d.seqlen = 64, d.heads = 32, d.head_dim_k = d.head_dim_v = 64;
    fcl_config_info info;
    const char *want = bwd ? "rwkv7_bwd" : "rwkv7_recurrent";
    const int good = fcl_rwkv7_config(ctx, &d, FCL_BF16, bwd, &info) == FCL_OK &&
                     strcmp(info.kernel, want) == 0;
    printf("%s plan: %s runs %s %s (%s)\n", good ? "PASS" : "FAIL", bwd ? "backward" : "forward",
           info.kernel, info.params, info.source);
    ok &= good;
  }
  return ok;
}

static void describe(const void *row, oh_forced_row *out) {
  const forced_case *fc = row;
  out->name = fc->c.name, out->dtypes = fc->c.dtypes;
  snprintf(out->label, sizeof out->label, "%s | %s", fc->fwd, fc->bwd);
}

/* Both variants' parameters; row NULL clears them. */
static fcl_status force(fcl_context *ctx, const void *row) {
  const forced_case *fc = row;
  fcl_status s = fcl_tuning_override(ctx, fcl_variant_find("rwkv7_recurrent"), fc ? fc->fwd : NULL);
  if (s == FCL_OK) s = fcl_tuning_override(ctx, fcl_variant_find("rwkv7_bwd"), fc ? fc->bwd : NULL);
  return s;
}

static void run(oh_forced *f, const void *row, fcl_dtype dt) {
  ++f->runs;
  f->failed += !oh_rwkv7_case_run(f->ctx, &((const forced_case *)row)->c, dt, f->verbose);
}

static const oh_forced_ops ops = {describe, force, run, NULL};

int main(void) {
  oh_forced f;
  if (!oh_forced_open(&f)) return 1;
  f.runs = 1, f.failed = !plan_ok(f.ctx);
  oh_forced_run(&f, cases, sizeof cases / sizeof *cases, sizeof *cases, &ops);
  return oh_forced_close(&f, "test_rwkv7_forced");
}
