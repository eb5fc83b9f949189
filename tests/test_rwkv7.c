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

typedef struct {
  const char     *name;
  unsigned        dtypes;
  int64_t         b, t, h, dk, dv; /* dk, dv 0: 64 */
  int             nseq;            /* > 0: varlen with these lengths */
  int32_t         lens[OH_MAX_SEQS];
  float           scale;           /* 0: default */
  int             reverse, no_h0, no_ht, no_dht, no_dh0;
  ref_rwkv7_decay decay;
  int             general;         /* a, b uniform, unrelated */
  tu_layout       lin, lout;
  size_t          off;
  int             junk_stride0, seqlen_extra;
} r7_case;

#define ALL OH_ALL_DT
#define F32 OH_DT(FCL_F32)
#define F16 OH_DT(FCL_F16)
#define BF16 OH_DT(FCL_BF16)
#define MODEL REF_RWKV7_W_MODEL
#define STRONG REF_RWKV7_W_STRONG
#define C(...) {__VA_ARGS__}
static const r7_case cases[] = {
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

static int check(const char *name, const double *got, const double *ref, size_t n, tu_tol tol,
                 int verbose, char *why, size_t nwhy, char *errs, size_t nerrs) {
  tu_cmp c;
  const int ok = oh_check_dims(name, got, ref, n, tol, 0, NULL, 0, &c, why, nwhy);
  if (verbose) tu_print_cmp(name, &c, NULL, 0);
  oh_append(errs, nerrs, " %s %.1e", name, c.ref_max > 0 ? c.max_err / c.ref_max : c.max_err);
  return ok;
}

static int run_case(fcl_context *ctx, const r7_case *c, fcl_dtype dt, int verbose) {
  const double t0 = tu_now();
  int32_t cu[OH_MAX_SEQS + 1] = {0};
  ref_rwkv7_problem p = {c->b, c->t, c->h, c->dk ? c->dk : 64, c->dv ? c->dv : 64,
                         (double)c->scale, c->reverse, NULL};
  if (c->nseq) {
    p.batch = c->nseq, p.seqlen = 0;
    for (int i = 0; i < c->nseq; ++i) {
      cu[i + 1] = cu[i] + c->lens[i];
      if (c->lens[i] > p.seqlen) p.seqlen = c->lens[i];
    }
    p.seqlen += c->seqlen_extra;
    p.cu_seqlens = cu;
  }
  const int64_t tokens = ref_rwkv7_tokens(&p), H = p.heads, K = p.head_dim_k, V = p.head_dim_v;
  const size_t nk = (size_t)(tokens * H * K), nv = (size_t)(tokens * H * V),
               ns = (size_t)(p.batch * H * K * V);
  double *x[7], *dout = oh_dalloc(nv), *dht = oh_dalloc(ns);
  for (int i = 0; i < 7; ++i) x[i] = oh_dalloc(i == 3 ? nv : i == 6 ? ns : nk);
  tu_rng g;
  tu_rng_seed(&g, oh_case_seed(c->name, dt));
  ref_rwkv7_fill(&g, &p, c->decay, x[0], x[1], x[2], x[3], x[4], x[5]);
  if (c->general) {
    tu_fill_uniform(&g, x[4], nk, -0.6, 0.6);
    tu_fill_uniform(&g, x[5], nk, -0.6, 0.6);
  }
  tu_fill_uniform(&g, x[6], ns, -1, 1);
  tu_fill_uniform(&g, dout, nv, -1, 1);
  tu_fill_uniform(&g, dht, ns, -1, 1);
  for (int i = 0; i < 6; ++i) tu_round_array(x[i], i == 3 ? nv : nk, dt);
  tu_round_array(dout, nv, dt);
  tu_round_array(x[6], ns, FCL_F32);
  tu_round_array(dht, ns, FCL_F32);
  const ref_rwkv7_in rin = {x[0], x[1], x[2], x[3], x[4], x[5], c->no_h0 ? NULL : x[6]};
  /* o, ht, dr, dw, dk, dv, da, db, dh0: reference and device. */
  static const char *const names[9] = {"o", "ht", "dr", "dw", "dk", "dv", "da", "db", "dh0"};
  const size_t cnt[9] = {nv, ns, nk, nk, nk, nv, nk, nk, ns};
  double *ref[9], *got[9];
  for (int i = 0; i < 9; ++i) ref[i] = oh_dalloc(cnt[i]), got[i] = oh_dalloc(cnt[i]);
  ref_rwkv7_forward(&p, &rin, ref[0], ref[1]);
  const ref_rwkv7_grads rg = {ref[2], ref[3], ref[4], ref[5], ref[6], ref[7], ref[8]};
  if (ref_rwkv7_backward(&p, &rin, dout, c->no_dht ? NULL : dht, &rg)) abort();

  oh_rwkv7_opts opts = {c->lin, c->lout, c->off, 0, 24, c->junk_stride0, 2, 1};
  /* With no token the library still wants room for one token row. */
  opts.tail = tokens ? 5 : (size_t)(H * (K > V ? K : V)) + 5;
  const oh_rwkv7_in in = {x[0], x[1], x[2], x[3], x[4], x[5], rin.h0, dout,
                          c->no_dht ? NULL : dht};
  oh_rwkv7_out out = {got[0], c->no_ht ? NULL : got[1], got[2], got[3], got[4], got[5],
                      got[6], got[7], c->no_dh0 ? NULL : got[8], 0, 0, 0, 0};
  char why[2048] = "", errs[512] = "";
  int ok = oh_rwkv7_run(ctx, &p, dt, &opts, &in, &out, why, sizeof why) == 0;
  const int want[9] = {1, !c->no_ht, 1, 1, 1, 1, 1, 1, !c->no_dh0};
  const tu_tol tol = tu_tol_rwkv6(dt), tol_state = tu_tol_rwkv6_state();
  for (int i = 0; i < 9; ++i)
    if (want[i] && (i < 2 ? out.fwd_read : out.bwd_read))
      ok &= check(names[i], got[i], ref[i], cnt[i], i == 1 || i == 8 ? tol_state : tol, verbose,
                  why, sizeof why, errs, sizeof errs);
  ok &= out.fwd_read && out.bwd_read;
  printf("%s %-4s %s |%s%s | fwd %.2f s bwd %.2f s, %.2f s\n", ok ? "PASS" : "FAIL",
         tu_dtype_name(dt), c->name, why, errs, out.fwd_s, out.bwd_s, tu_now() - t0);
  fflush(stdout);
  for (int i = 0; i < 9; ++i) free(ref[i]), free(got[i]);
  for (int i = 0; i < 7; ++i) free(x[i]);
  free(dout), free(dht);
  return ok;
}

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
  int runs = 0, failed = 0, bad_cases = 0, bad_failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    for (int t = FCL_F32; t <= FCL_BF16; ++t)
      if ((cases[i].dtypes & OH_DT(t)) && oh_selected(cases[i].name)) {
        ++runs;
        failed += !run_case(ctx, &cases[i], (fcl_dtype)t, verbose);
      }
  if (oh_selected("bad inputs")) rwkv7_bad_inputs(ctx, &bad_cases, &bad_failed);
  fcl_context_destroy(ctx);
  printf("test_rwkv7: %d runs, %d failed; bad inputs %d cases, %d failed; %.1f s\n", runs,
         failed, bad_cases, bad_failed, tu_now() - t_start);
  return failed || bad_failed || (runs == 0 && bad_cases == 0) ? 1 : 0;
}
