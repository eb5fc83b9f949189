/* Numerical edge cases on $FCL_DEVICE, against the double references with
 * the main suites' tolerances (op_verify.c):
 *  - large magnitude: q, k ~ 200 in f16 with D = 64 (logits ~ 1e5: the
 *    softmax is one-hot up to rounding), and q, k near the f16 limit (60000);
 *  - -inf from masks: rows that see no key (output exactly 0, lse -inf, dq 0);
 *  - NaN inputs: a NaN in q, k or v makes NaN exactly the outputs whose
 *    reference is NaN (the rows that see it) and nothing else, in the
 *    forward and the backward; a NaN or inf in q, k, v or dout of a (query,
 *    key) pair that causal masking or a window hides, or that lies in
 *    another sequence (varlen), must not reach that query's or key's
 *    outputs and gradients (on tensor cores the masked zeros are multiplied
 *    too, and 0 * NaN is NaN). RWKV6: a NaN in r poisons
 *    one step's output, a NaN in k every later step (and the state).
 * Every call must return, with no hang and no crash. */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_run = 0, g_failed = 0;

static void report(const char *name, fcl_dtype dt, int ok, const char *why) {
  ++g_run;
  g_failed += !ok;
  printf("%s %-4s %s |%s\n", ok ? "PASS" : "FAIL", tu_dtype_name(dt), name, why);
  fflush(stdout);
}

/* Where a non-finite value goes: nothing, or one element of q, k, v or
 * dout at row (q, dout) or key (k, v) pos of sequence 1 (of 2). */
typedef enum { AT_NONE, AT_Q, AT_K, AT_V, AT_DOUT } poison_at;
typedef struct {
  poison_at at;
  int64_t pos;
  double value; /* NAN, INFINITY or -INFINITY */
} poison;
static const poison CLEAN = {AT_NONE, 0, 0.0};

/* varlen: sequence 0 gets 17 more queries and 19 more keys than sequence 1
 * (sq, sk), packed by token: the poisoned tokens of sequence 1 follow
 * sequence 0's keys and queries inside one tile. */
static void attention(fcl_context *ctx, const char *name, fcl_dtype dt, double amp, int causal,
                      int64_t sq, int64_t sk, int64_t wl, int64_t wr, poison x, int bwd,
                      int varlen) {
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 2; p.seqlen_q = sq; p.seqlen_k = sk; p.heads_q = 2; p.heads_kv = 1;
  p.head_dim = p.head_dim_v = 64; p.causal = causal;
  p.window_left = wl; p.window_right = wr;
  const int32_t cu_q[3] = {0, (int32_t)sq + 17, 2 * (int32_t)sq + 17};
  const int32_t cu_k[3] = {0, (int32_t)sk + 19, 2 * (int32_t)sk + 19};
  if (varlen) {
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    p.seqlen_q = sq + 17;
    p.seqlen_k = sk + 19;
  }
  const oh_attention_sizes n = oh_attention_count(&p);
  double *q = malloc(8 * n.q), *k = malloc(8 * n.k), *v = malloc(8 * n.v), *dout = malloc(8 * n.o);
  tu_rng g;
  tu_rng_seed(&g, 4242);
  tu_fill_uniform(&g, q, n.q, -amp, amp);
  tu_fill_uniform(&g, k, n.k, -amp, amp);
  tu_fill_uniform(&g, v, n.v, -1, 1);
  tu_fill_uniform(&g, dout, n.o, -1, 1);
  tu_round_array(q, n.q, dt);
  tu_round_array(k, n.k, dt);
  tu_round_array(v, n.v, dt);
  tu_round_array(dout, n.o, dt);
  /* Sequence 1, head 0 (q, dout) or kv head 0 (k, v), one column. */
  const int64_t qtok = (varlen ? cu_q[1] : sq) + x.pos, ktok = (varlen ? cu_k[1] : sk) + x.pos;
  if (x.at == AT_Q) q[(qtok * 2 + 0) * 64 + 3] = x.value;
  if (x.at == AT_K) k[(ktok * 1 + 0) * 64 + 7] = x.value;
  if (x.at == AT_V) v[(ktok * 1 + 0) * 64 + 9] = x.value;
  if (x.at == AT_DOUT) dout[(qtok * 2 + 0) * 64 + 11] = x.value;
  char why[2048] = "";
  report(name, dt, oh_attention_verify(ctx, &p, dt, q, k, v, bwd ? dout : NULL, 1, why, sizeof why),
         why);
  free(q); free(k); free(v); free(dout);
}

static void rwkv6(fcl_context *ctx, const char *name, fcl_dtype dt, fcl_rwkv6_algorithm algo,
                  int nan_in /* 0: r, 1: k */, int reverse) {
  ref_rwkv6_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 2; p.seqlen = 21; p.heads = 1; p.head_dim_k = 8; p.head_dim_v = 8;
  p.reverse = reverse;
  const oh_rwkv6_sizes n = oh_rwkv6_count(&p);
  double *x[8];
  const size_t nx[8] = {n.rk, n.rk, n.v, n.rk, n.u, n.state, n.v, n.state};
  tu_rng g;
  tu_rng_seed(&g, 99);
  for (int i = 0; i < 8; ++i) {
    x[i] = malloc(8 * nx[i]);
    tu_fill_uniform(&g, x[i], nx[i], i == 3 ? -2.0 : -1.0, i == 3 ? -0.05 : 1.0);
    tu_round_array(x[i], nx[i], i == 5 || i == 7 ? FCL_F32 : dt);
  }
  /* Sequence 1, step 9, row 2. */
  x[nan_in][((21 + 9) * 1 + 0) * 8 + 2] = NAN;
  char why[2048] = "";
  report(name, dt,
         oh_rwkv6_verify(ctx, &p, dt, algo, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], why,
                         sizeof why),
         why);
  for (int i = 0; i < 8; ++i) free(x[i]);
}

/* With FCL_MMA_EMULATE=1 (CTest's test_numerics_pocl_mma_emulated) the f16
 * and bf16 attention cases are there for the tensor-core kernels: check
 * that the library picks them (their probe, which compiles their helpers,
 * passed), so that those cases cannot pass on the portable kernels; and
 * the f32 forward's 3xTF32 kernel unless FCL_F32_TENSOR_CORES=0. */
static int env_on(const char *name, int unset) {
  const char *e = getenv(name);
  return e && *e ? atoi(e) != 0 : unset;
}

static void expect_mma(fcl_context *ctx) {
  if (!env_on("FCL_MMA_EMULATE", 0)) return;
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 2; d.seqlen_q = d.seqlen_k = 20; d.heads_q = 2; d.heads_kv = 1;
  d.head_dim = d.head_dim_v = 64; d.causal = 1;
  const fcl_dtype dts[3] = {FCL_F16, FCL_BF16, FCL_F32};
  for (int t = 0; t < (env_on("FCL_F32_TENSOR_CORES", 1) ? 3 : 2); ++t)
    for (int bwd = 0; bwd < (dts[t] == FCL_F32 ? 1 : 2); ++bwd) {
      fcl_config_info info;
      memset(&info, 0, sizeof info);
      const fcl_status st = fcl_attention_config(ctx, &d, dts[t], bwd, &info);
      const char *want = bwd ? "attention_bwd_mma" : "attention_fwd_mma";
      char why[128];
      snprintf(why, sizeof why, " %s picked (%s)", st == FCL_OK ? info.kernel : "nothing",
               fcl_status_string(st));
      report(bwd ? "FCL_MMA_EMULATE: the tensor-core backward is used"
                 : "FCL_MMA_EMULATE: the tensor-core forward is used",
             dts[t], st == FCL_OK && strcmp(info.kernel, want) == 0, why);
    }
}

int main(void) {
  const double t0 = tu_now();
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  const fcl_dtype all[3] = {FCL_F32, FCL_F16, FCL_BF16};
  expect_mma(ctx);
  attention(ctx, "large q,k ~200, D 64, causal", FCL_F16, 200.0, 1, 40, 40, -1, -1, CLEAN, 1, 0);
  attention(ctx, "large q,k ~200, D 64", FCL_BF16, 200.0, 0, 33, 47, -1, -1, CLEAN, 1, 0);
  attention(ctx, "q,k near the f16 limit (60000)", FCL_F16, 60000.0, 0, 20, 30, -1, -1, CLEAN, 0,
            0);
  for (int t = 0; t < 3; ++t)
    attention(ctx, "rows that see no key (window, sq > sk)", all[t], 2.0, 0, 40, 12, 2, 2, CLEAN,
              1, 0);
  const poison k5 = {AT_K, 5, NAN}, v5 = {AT_V, 5, NAN};
  attention(ctx, "NaN in one k row", FCL_F16, 2.0, 0, 20, 25, -1, -1, k5, 1, 0);
  attention(ctx, "NaN in one v row", FCL_BF16, 2.0, 0, 20, 25, -1, -1, v5, 1, 0);
  /* Keys that some rows must not see (causal, sliding window) holding a
   * non-finite k or v, rows whose q or dout is NaN and keys they must not
   * reach: a masked (query, key) pair contributes nothing, in the forward
   * and in every gradient, whatever the values (tensor cores multiply the
   * masked zeros too; attention_fwd_mma.cl). */
  const struct {
    const char *name;
    poison x;
    int causal;
    int64_t window;
    int bwd;
  } masked[] = {
      {"NaN in one q row, causal", {AT_Q, 5, NAN}, 1, -1, 1},
      {"NaN in v of a key causal masking hides from earlier rows", {AT_V, 10, NAN}, 1, -1, 1},
      {"NaN in v outside a sliding window", {AT_V, 10, NAN}, 0, 3, 1},
      {"NaN in k of a key causal masking hides from earlier rows", {AT_K, 10, NAN}, 1, -1, 1},
      {"+inf in v of a key causal masking hides", {AT_V, 10, INFINITY}, 1, -1, 1},
      /* Forward only: the rows that see this key have a logit of -inf or
       * +inf; where -inf, P is 0 and the reference's dq is 0 * -inf = NaN,
       * which the tensor-core backward gives but the portable one (skipping
       * zero weights of masked tiles) does not. */
      {"-inf in k of a key causal masking hides", {AT_K, 10, -INFINITY}, 1, -1, 0},
      {"NaN in one dout row, causal", {AT_DOUT, 5, NAN}, 1, -1, 1},
      {"NaN in one dout row, sliding window", {AT_DOUT, 5, NAN}, 0, 3, 1},
  };
  for (size_t c = 0; c < sizeof masked / sizeof masked[0]; ++c)
    for (int t = 0; t < 3; ++t)
      attention(ctx, masked[c].name, all[t], 2.0, masked[c].causal, 20, 20, masked[c].window,
                masked[c].window, masked[c].x, masked[c].bwd, 0);
  /* Longer: fully visible tiles, the diagonal tile and the sequence end. */
  const poison v75 = {AT_V, 75, NAN}, k75 = {AT_K, 75, NAN}, q70 = {AT_Q, 70, NAN};
  attention(ctx, "NaN in v of a masked key, 150 x 150", FCL_F16, 2.0, 1, 150, 150, -1, -1, v75, 1,
            0);
  attention(ctx, "NaN in k of a masked key, 150 x 150", FCL_BF16, 2.0, 1, 150, 150, -1, -1, k75,
            1, 0);
  attention(ctx, "NaN in one q row, 150 x 150", FCL_F16, 2.0, 1, 150, 150, -1, -1, q70, 1, 0);
  /* Varlen: the first tokens of sequence 1 share tiles with sequence 0's
   * last keys and queries. */
  const poison first[4] = {{AT_Q, 0, NAN}, {AT_K, 0, NAN}, {AT_V, 0, INFINITY}, {AT_DOUT, 0, NAN}};
  const char *first_name[4] = {"varlen: NaN in q of sequence 1's first token",
                               "varlen: NaN in k of sequence 1's first token",
                               "varlen: +inf in v of sequence 1's first token",
                               "varlen: NaN in dout of sequence 1's first token"};
  for (int c = 0; c < 4; ++c)
    attention(ctx, first_name[c], all[1 + c % 2], 2.0, 0, 20, 23, -1, -1, first[c], 1, 1);
  const fcl_rwkv6_algorithm algos[2] = {FCL_RWKV6_RECURRENT, FCL_RWKV6_CHUNKED};
  for (int a = 0; a < 2; ++a)
    for (int rev = 0; rev < 2; ++rev) {
      char name[96];
      snprintf(name, sizeof name, "rwkv6 %s%s: NaN in r", a ? "chunked" : "recurrent",
               rev ? " reverse" : "");
      rwkv6(ctx, name, all[a + rev], algos[a], 0, rev);
      snprintf(name, sizeof name, "rwkv6 %s%s: NaN in k", a ? "chunked" : "recurrent",
               rev ? " reverse" : "");
      rwkv6(ctx, name, all[2 - a], algos[a], 1, rev);
    }
  fcl_context_destroy(ctx);
  printf("test_numerics: %d cases, %d failed, %.1f s\n", g_run, g_failed, tu_now() - t0);
  return g_failed || g_run == 0 ? 1 : 0;
}
