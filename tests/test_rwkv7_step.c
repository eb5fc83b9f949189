/* The RWKV7 step kernel (rwkv7_step, the forward of short sequences: the
 * decode step, T = 1 with h0 and ht in one launch) against the double
 * reference with test_rwkv7's tolerances (op_rwkv7.c), forward only. First,
 * unforced, the plan must name rwkv7_step exactly for forwards of at most
 * RW_STEP_MAX_T = 4 positions; then T = 1 to 4 on the device's own
 * parameters; then, forced through the tuning override, the paths a GPU's
 * parameters take (a CPU's are one column a work-item): float4 and float2
 * state rows, rows of a column summed across work-items (rw7_colsum: KS a
 * multiple of its 8-row stage or not), value blocks that do not divide V,
 * columns masked inside a vector, and past 4 positions launches that carry
 * the state (T up to 9, varlen). Each forced set also runs a forward twice,
 * which must give the same bytes.
 *
 * Environment: FCL_DEVICE, FCL_TEST_FILTER (cases whose name contains it),
 * FCL_TEST_VERBOSE. */
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
#define STRONG REF_RWKV7_W_STRONG

/* NULL: the device's own parameters. GPU: the built-in parameters of a GPU
 * at K = 64 (16 row groups: two stage-1 sums) and at K = 256 (64 row
 * groups). Odd: 3 row groups, blocks of 10 columns in float2. Scalar: one
 * column a work-item. Masked: float4 blocks with V not a multiple of 4. */
#define P_OWN NULL
#define P_GPU "KS=16,VS=4,VC=4"
#define P_WIDE "KS=64,VS=4,VC=4"
#define P_ODD "KS=3,VS=5,VC=2"
#define P_SCALAR "KS=6,VS=8,VC=1"
#define P_MASKED "KS=5,VS=2,VC=4"

typedef struct {
  const char   *params;
  oh_rwkv7_case c;
} step_case;
#define C(p, ...) {p, {.fwd_only = 1, __VA_ARGS__}}
static const step_case cases[] = {
  C(P_OWN, .name = "T=1", .dtypes = ALL, .b = 2, .t = 1, .h = 3),
  C(P_OWN, .name = "T=2 reverse", .dtypes = F32, .b = 2, .t = 2, .h = 2, .reverse = 1),
  C(P_OWN, .name = "T=3 h0 NULL ht NULL", .dtypes = F32, .b = 1, .t = 3, .h = 2, .no_h0 = 1, .no_ht = 1),
  C(P_OWN, .name = "T=4 varlen 4,0,1,3 w U(-8,-6)", .dtypes = F32 | BF16, .nseq = 4, .lens = {4, 0, 1, 3}, .h = 2, .decay = STRONG),
  C(P_GPU, .name = "gpu T=1", .dtypes = F32, .b = 2, .t = 1, .h = 3),
  C(P_GPU, .name = "gpu T=4 general a b ht NULL padded", .dtypes = F16, .b = 1, .t = 4, .h = 2, .general = 1, .no_ht = 1, .lin = TU_PADDED, .lout = TU_PADDED, .off = 2),
  C(P_GPU, .name = "gpu T=9 (three launches) varlen 9,0,4,1 reverse", .dtypes = F32 | BF16, .nseq = 4, .lens = {9, 0, 4, 1}, .h = 2, .reverse = 1),
  C(P_GPU, .name = "gpu T=6 h0 NULL ht NULL w U(-8,-6)", .dtypes = F32, .b = 2, .t = 6, .h = 1, .no_h0 = 1, .no_ht = 1, .decay = STRONG),
  C(P_WIDE, .name = "wide K256 V256 T=1", .dtypes = BF16, .dk = 256, .dv = 256, .b = 1, .t = 1, .h = 2),
  C(P_ODD, .name = "odd K7 V6 T=3 reverse", .dtypes = F16, .dk = 7, .dv = 6, .b = 2, .t = 3, .h = 3, .reverse = 1),
  C(P_ODD, .name = "odd K33 V20 T=1 scale 1", .dtypes = F32, .dk = 33, .dv = 20, .b = 3, .t = 1, .h = 2, .scale = 1.0f),
  C(P_SCALAR, .name = "scalar T=2 zero decay", .dtypes = F32, .b = 2, .t = 2, .h = 2, .decay = REF_RWKV7_W_ZERO),
  C(P_MASKED, .name = "masked K17 V6 T=1 h0 NULL", .dtypes = F16, .dk = 17, .dv = 6, .b = 2, .t = 1, .h = 2, .no_h0 = 1),
  C(P_MASKED, .name = "masked K17 V6 T=7 reverse", .dtypes = F32, .dk = 17, .dv = 6, .b = 1, .t = 7, .h = 2, .reverse = 1),
};

/* The plan names the step kernel exactly for the forward of at most 4
 * positions. */
static int plan_ok(fcl_context *ctx) {
  const struct { int64_t t; int bwd; const char *kernel; } want[] = {
      {1, 0, "rwkv7_step"}, {4, 0, "rwkv7_step"}, {5, 0, "rwkv7_recurrent"}, {1, 1, "rwkv7_bwd"}};
  int ok = 1;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; ++i) {
    fcl_rwkv7_desc d = FCL_RWKV7_DESC_INIT;
    d.batch = 1, d.seqlen = want[i].t, d.heads = 32, d.head_dim_k = d.head_dim_v = 64;
    fcl_config_info info;
    const int good = fcl_rwkv7_config(ctx, &d, FCL_BF16, want[i].bwd, &info) == FCL_OK &&
                     strcmp(info.kernel, want[i].kernel) == 0;
    printf("%s plan: T=%lld %s runs %s %s (want %s)\n", good ? "PASS" : "FAIL",
           (long long)want[i].t, want[i].bwd ? "backward" : "forward", info.kernel, info.params,
           want[i].kernel);
    ok &= good;
  }
  return ok;
}

/* The forward of c twice: the same bytes (o and ht). */
static int rerun_ok(fcl_context *ctx, const void *row, fcl_dtype dt) {
  const step_case *sc = row;
  const oh_rwkv7_case *c = &sc->c;
  const ref_rwkv7_problem p = {c->b, c->t, c->h, c->dk ? c->dk : 64, c->dv ? c->dv : 64, 0.0,
                               c->reverse, NULL};
  const int64_t tokens = ref_rwkv7_tokens(&p);
  const size_t nk = (size_t)(tokens * p.heads * p.head_dim_k),
               nv = (size_t)(tokens * p.heads * p.head_dim_v),
               ns = (size_t)(p.batch * p.heads * p.head_dim_k * p.head_dim_v);
  double *buf = calloc(5 * nk + 3 * nv + 3 * ns, sizeof *buf);
  if (!buf) abort();
  double *r = buf, *w = r + nk, *k = w + nk, *a = k + nk, *b = a + nk, *v = b + nk;
  double *o1 = v + nv, *o2 = o1 + nv, *h0 = o2 + nv, *ht1 = h0 + ns, *ht2 = ht1 + ns;
  tu_rng g;
  tu_rng_seed(&g, oh_case_seed(c->name, dt) + 1);
  ref_rwkv7_fill(&g, &p, REF_RWKV7_W_MODEL, r, w, k, v, a, b);
  tu_fill_uniform(&g, h0, ns, -1, 1);
  tu_round_array(r, 5 * nk, dt); /* r, w, k, a, b */
  tu_round_array(v, nv, dt);
  tu_round_array(h0, ns, FCL_F32);
  const oh_rwkv7_opts opts = {TU_BSHD, TU_BSHD, 0, 0, 0, 0, 1, 0, 0.0f};
  const oh_rwkv7_in in = {r, w, k, v, a, b, h0, NULL, NULL};
  oh_rwkv7_out out1 = {.o = o1, .ht = ht1}, out2 = {.o = o2, .ht = ht2};
  char why[1024] = "";
  const int same = oh_rwkv7_run(ctx, &p, dt, &opts, &in, &out1, why, sizeof why) == 0 &&
                   oh_rwkv7_run(ctx, &p, dt, &opts, &in, &out2, why, sizeof why) == 0 &&
                   memcmp(o1, o2, nv * sizeof *o1) == 0 && memcmp(ht1, ht2, ns * sizeof *ht1) == 0;
  printf("%s [%s] %-4s %s: a second forward gives the same bytes%s\n", same ? "PASS" : "FAIL",
         sc->params, tu_dtype_name(dt), c->name, why);
  free(buf);
  return same;
}

static const fcl_variant *g_step;

static void describe(const void *row, oh_forced_row *out) {
  const step_case *sc = row;
  out->name = sc->c.name, out->dtypes = sc->c.dtypes;
  snprintf(out->label, sizeof out->label, "%s", sc->params ? sc->params : "own");
  out->twice = sc->params && !sc->c.nseq;
}

static fcl_status force(fcl_context *ctx, const void *row) {
  return fcl_tuning_override(ctx, g_step, row ? ((const step_case *)row)->params : NULL);
}

static void run(oh_forced *f, const void *row, fcl_dtype dt) {
  const step_case *sc = row;
  ++f->runs;
  f->failed += !oh_rwkv7_case_run(f->ctx, &sc->c, dt, f->verbose);
}

static const oh_forced_ops ops = {describe, force, run, rerun_ok};

int main(void) {
  oh_forced f;
  if (!oh_forced_open(&f)) return 1;
  g_step = fcl_variant_find("rwkv7_step");
  f.runs = 1, f.failed = !g_step || !plan_ok(f.ctx);
  if (g_step) oh_forced_run(&f, cases, sizeof cases / sizeof *cases, sizeof *cases, &ops);
  return oh_forced_close(&f, "test_rwkv7_step");
}
