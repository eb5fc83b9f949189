/* Numerical edge cases on $FCL_DEVICE, against the double references with
 * the main suites' tolerances (op_verify.c):
 *  - large magnitude: q, k ~ 200 in f16 with D = 64 (logits ~ 1e5: the
 *    softmax is one-hot up to rounding), and q, k near the f16 limit (60000);
 *  - -inf from masks: rows that see no key (output exactly 0, lse -inf, dq 0);
 *  - NaN inputs: a NaN in q, k or v makes NaN exactly the outputs whose
 *    reference is NaN (the rows that see it) and nothing else, in the
 *    forward and the backward; a NaN in v at a key that causal masking hides
 *    from the earlier rows must not reach them. RWKV6: a NaN in r poisons
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

typedef enum { N_NONE, N_Q, N_K, N_V, N_V_MASKED } nan_at;

static void attention(fcl_context *ctx, const char *name, fcl_dtype dt, double amp, int causal,
                      int64_t sq, int64_t sk, int64_t wl, int64_t wr, nan_at nan, int bwd) {
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 2; p.seqlen_q = sq; p.seqlen_k = sk; p.heads_q = 2; p.heads_kv = 1;
  p.head_dim = p.head_dim_v = 64; p.causal = causal;
  p.window_left = wl; p.window_right = wr;
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
  /* Batch 1 (of 2), head 0, row or key 5 (the middle key for N_V_MASKED). */
  const int64_t row = 5, key = sk / 2;
  if (nan == N_Q) q[((sq + row) * 2 + 0) * 64 + 3] = NAN;
  if (nan == N_K) k[((sk + row) * 1 + 0) * 64 + 7] = NAN;
  if (nan == N_V) v[((sk + row) * 1 + 0) * 64 + 9] = NAN;
  if (nan == N_V_MASKED) v[((sk + key) * 1 + 0) * 64 + 9] = NAN;
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

int main(void) {
  const double t0 = tu_now();
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  const fcl_dtype all[3] = {FCL_F32, FCL_F16, FCL_BF16};
  attention(ctx, "large q,k ~200, D 64, causal", FCL_F16, 200.0, 1, 40, 40, -1, -1, N_NONE, 1);
  attention(ctx, "large q,k ~200, D 64", FCL_BF16, 200.0, 0, 33, 47, -1, -1, N_NONE, 1);
  attention(ctx, "q,k near the f16 limit (60000)", FCL_F16, 60000.0, 0, 20, 30, -1, -1, N_NONE, 0);
  for (int t = 0; t < 3; ++t)
    attention(ctx, "rows that see no key (window, sq > sk)", all[t], 2.0, 0, 40, 12, 2, 2,
              N_NONE, 1);
  attention(ctx, "NaN in one q row", FCL_F32, 2.0, 1, 20, 20, -1, -1, N_Q, 1);
  attention(ctx, "NaN in one k row", FCL_F16, 2.0, 0, 20, 25, -1, -1, N_K, 1);
  attention(ctx, "NaN in one v row", FCL_BF16, 2.0, 0, 20, 25, -1, -1, N_V, 1);
  for (int t = 0; t < 3; ++t)
    attention(ctx, "NaN in v of a key causal masking hides from earlier rows", all[t], 2.0, 1,
              20, 20, -1, -1, N_V_MASKED, 1);
  attention(ctx, "NaN in v outside a sliding window", FCL_F32, 2.0, 0, 20, 20, 3, 3, N_V_MASKED,
            1);
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
