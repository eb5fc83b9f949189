/* FCL_OPTION_F32_PRECISION: each level against the double reference with
 * the tolerance flashcl.h documents for it, on the kernels that have a
 * faster form (the attention forward on tensor cores: one TF32 product
 * from HIGH on; RWKV6's chunked kernels on tensor cores: one bf16 product
 * at MEDIUM), and the levels they do not have leave the results bit-
 * identical to HIGHEST. The option's range, its default and the
 * environment's value are checked too. Runs where those kernels do: NVIDIA,
 * or PoCL with FCL_MMA_EMULATE=1 (CTest); elsewhere it checks that every
 * level gives HIGHEST's bytes (the portable kernels have one precision).
 * FCL_MMA_EMULATE=1 guarantees the tensor-core kernels on any device (the
 * attention's unless FCL_F32_TENSOR_CORES=0): there the portable kernels
 * are a failure (a broken probe must not pass as that second case).
 *
 * Environment: FCL_DEVICE. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failed = 0;
#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      ++g_failed;                                                               \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                               \
      printf(__VA_ARGS__);                                                      \
      printf("\n");                                                             \
    }                                                                           \
  } while (0)

static double max_diff(const double *a, const double *b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; ++i) m = fabs(a[i] - b[i]) > m ? fabs(a[i] - b[i]) : m;
  return m;
}
static int set_level(fcl_context *ctx, int level) {
  const fcl_status s = fcl_context_set_option(ctx, FCL_OPTION_F32_PRECISION, level);
  CHECK(s == FCL_OK, "set precision %d: %s", level, fcl_context_last_error(ctx));
  return s == FCL_OK;
}
static const char *level_name[] = {"HIGHEST", "HIGH", "MEDIUM"};

/* ---- the option itself ---------------------------------------------------- */
static void option_checks(fcl_context *ctx) {
  int64_t v = -1;
  CHECK(fcl_context_get_option(ctx, FCL_OPTION_F32_PRECISION, &v) == FCL_OK &&
            v == FCL_F32_PRECISION_HIGHEST,
        "default precision: %lld", (long long)v);
  const int64_t bad[] = {-1, 3, 1000};
  for (int i = 0; i < 3; ++i) {
    const fcl_status s = fcl_context_set_option(ctx, FCL_OPTION_F32_PRECISION, bad[i]);
    CHECK(s == FCL_ERROR_INVALID_ARGUMENT &&
              strstr(fcl_context_last_error(ctx), "FCL_OPTION_F32_PRECISION"),
          "precision %lld: status %d, \"%s\"", (long long)bad[i], (int)s,
          fcl_context_last_error(ctx));
  }
  CHECK(fcl_context_get_option(ctx, FCL_OPTION_F32_PRECISION, &v) == FCL_OK &&
            v == FCL_F32_PRECISION_HIGHEST,
        "a refused value changed the option: %lld", (long long)v);
  /* The environment gives the default of the next context. */
  setenv("FCL_F32_PRECISION", "medium", 1);
  fcl_context *c2 = NULL;
  if (fcl_context_create(NULL, &c2) == FCL_OK) {
    CHECK(fcl_context_get_option(c2, FCL_OPTION_F32_PRECISION, &v) == FCL_OK &&
              v == FCL_F32_PRECISION_MEDIUM,
          "FCL_F32_PRECISION=medium: %lld", (long long)v);
    fcl_context_destroy(c2);
  }
  unsetenv("FCL_F32_PRECISION");
  printf("PASS option range, default and environment\n");
}

/* ---- attention forward ------------------------------------------------------
 * HIGH and MEDIUM: one TF32 product (10 mantissa bits, as f16): o within
 * f16's tolerance, and o and lse widened by the logits' own TF32 error, 8
 * units of 2^-11 of the logit bound (where f32's is 8 units of 2^-24:
 * tu_tol_with_logits with the bound scaled by 2^13). */
static void attention_case(fcl_context *ctx, int causal, int tensor_cores) {
  ref_attention_problem p = {.batch = 2, .seqlen_q = 70, .seqlen_k = 130, .heads_q = 4,
                             .heads_kv = 2, .head_dim = 64, .head_dim_v = 64,
                             .causal = causal, .window_left = -1, .window_right = -1};
  const oh_attention_sizes n = oh_attention_count(&p);
  double *q = oh_dalloc(n.q), *k = oh_dalloc(n.k), *v = oh_dalloc(n.v);
  double *o_ref = oh_dalloc(n.o), *l_ref = oh_dalloc(n.lse);
  double *o[3], *l[3];
  tu_rng g;
  tu_rng_seed(&g, 1234 + (uint64_t)causal);
  tu_fill_uniform(&g, q, n.q, -1, 1);
  tu_fill_uniform(&g, k, n.k, -1, 1);
  tu_fill_uniform(&g, v, n.v, -1, 1);
  ref_attention_forward(&p, q, k, v, o_ref, l_ref);
  const double bound = ref_attention_logit_bound(&p, q, k), vmax = oh_max_abs(v, n.v);
  char why[1024];
  for (int lv = 0; lv < 3; ++lv) {
    o[lv] = oh_dalloc(n.o), l[lv] = oh_dalloc(n.lse);
    if (!set_level(ctx, lv)) continue;
    why[0] = '\0';
    const int run = oh_attention(ctx, &p, FCL_F32, q, k, v, NULL, o[lv], l[lv], NULL, NULL,
                                 NULL, why, sizeof why);
    CHECK(run == 0, "attention causal=%d %s: %s", causal, level_name[lv], why);
    const int fast = lv > 0 && tensor_cores;
    const tu_tol to = fast ? tu_tol_output(FCL_F16) : tu_tol_output(FCL_F32);
    const double lb = fast ? bound * 0x1p13 : bound;
    why[0] = '\0';
    int ok = oh_check("o", o[lv], o_ref, n.o, tu_tol_with_logits(to, lb, p.head_dim, vmax), 0,
                      why, sizeof why);
    ok &= oh_check("lse", l[lv], l_ref, n.lse, tu_tol_with_logits(tu_tol_lse(), lb, p.head_dim, 0),
                   1, why, sizeof why);
    CHECK(ok, "attention causal=%d %s:%s", causal, level_name[lv], why);
    printf("%s attention forward f32 causal=%d %s: max|o - ref| %.3g, max|lse - ref| %.3g\n",
           ok ? "PASS" : "FAIL", causal, level_name[lv], max_diff(o[lv], o_ref, n.o),
           max_diff(l[lv], l_ref, n.lse));
  }
  /* HIGH and MEDIUM are the same TF32 kernel; where it runs it differs
   * from HIGHEST (the option reached the kernel), elsewhere nothing does. */
  CHECK(!memcmp(o[1], o[2], 8 * n.o), "attention: HIGH and MEDIUM differ");
  if (tensor_cores)
    CHECK(memcmp(o[0], o[1], 8 * n.o), "attention: HIGH gave HIGHEST's bytes");
  else
    CHECK(!memcmp(o[0], o[1], 8 * n.o), "attention: HIGH changed a portable kernel's result");
  /* Back to HIGHEST: its bytes again (no plan of another level served). */
  double *again = oh_dalloc(n.o);
  if (set_level(ctx, 0) && oh_attention(ctx, &p, FCL_F32, q, k, v, NULL, again, NULL, NULL,
                                        NULL, NULL, why, sizeof why) == 0)
    CHECK(!memcmp(o[0], again, 8 * n.o), "attention: HIGHEST after MEDIUM differs");
  for (int lv = 0; lv < 3; ++lv) free(o[lv]), free(l[lv]);
  free(again); free(q); free(k); free(v); free(o_ref); free(l_ref);
}

/* ---- RWKV6 chunked, forward and backward ------------------------------------
 * HIGH keeps 3xBF16 (no TF32 form): HIGHEST's bytes. MEDIUM: one bf16
 * product, every output (states too) within bf16's tolerance. */
enum { R_O, R_HT, R_DR, R_DK, R_DV, R_DW, R_DU, R_DH0, R_N };
static void rwkv6_case(fcl_context *ctx, int tensor_cores) {
  ref_rwkv6_problem p = {.batch = 2, .seqlen = 100, .heads = 2, .head_dim_k = 32,
                         .head_dim_v = 32};
  const oh_rwkv6_sizes n = oh_rwkv6_count(&p);
  const size_t sz[R_N] = {n.v, n.state, n.rk, n.rk, n.v, n.rk, n.u, n.state};
  static const char *name[R_N] = {"o", "ht", "dr", "dk", "dv", "dw", "du", "dh0"};
  double *r = oh_dalloc(n.rk), *k = oh_dalloc(n.rk), *v = oh_dalloc(n.v), *w = oh_dalloc(n.rk);
  double *u = oh_dalloc(n.u), *h0 = oh_dalloc(n.state), *dout = oh_dalloc(n.v), *dht = oh_dalloc(n.state);
  tu_rng g;
  tu_rng_seed(&g, 99);
  tu_fill_uniform(&g, r, n.rk, -1, 1);
  tu_fill_uniform(&g, k, n.rk, -1, 1);
  tu_fill_uniform(&g, v, n.v, -1, 1);
  tu_fill_uniform(&g, w, n.rk, -1.0, -0.01); /* log-decays */
  tu_fill_uniform(&g, u, n.u, -1, 1);
  tu_fill_uniform(&g, h0, n.state, -1, 1);
  tu_fill_uniform(&g, dout, n.v, -1, 1);
  tu_fill_uniform(&g, dht, n.state, -1, 1);
  double *ref[R_N], *got[3][R_N];
  for (int i = 0; i < R_N; ++i) ref[i] = oh_dalloc(sz[i]);
  ref_rwkv6_forward(&p, r, k, v, w, u, h0, ref[R_O], ref[R_HT]);
  if (ref_rwkv6_backward(&p, r, k, v, w, u, h0, dout, dht, ref[R_DR], ref[R_DK], ref[R_DV],
                         ref[R_DW], ref[R_DU], ref[R_DH0]))
    abort();
  char why[1024];
  for (int lv = 0; lv < 3; ++lv) {
    for (int i = 0; i < R_N; ++i) got[lv][i] = oh_dalloc(sz[i]);
    if (!set_level(ctx, lv)) continue;
    double **x = got[lv];
    why[0] = '\0';
    const int run = oh_rwkv6(ctx, &p, FCL_F32, FCL_RWKV6_CHUNKED, r, k, v, w, u, h0, dout, dht,
                             x[R_O], x[R_HT], x[R_DR], x[R_DK], x[R_DV], x[R_DW], x[R_DU],
                             x[R_DH0], why, sizeof why);
    CHECK(run == 0, "rwkv6 %s: %s", level_name[lv], why);
    const int fast = lv == 2 && tensor_cores;
    int ok = 1;
    double worst = 0.0;
    why[0] = '\0';
    for (int i = 0; i < R_N; ++i) {
      const int state = i == R_HT || i == R_DH0;
      const tu_tol tol = fast ? oh_rwkv6_tol(FCL_BF16)
                              : state ? oh_rwkv6_state_tol() : oh_rwkv6_tol(FCL_F32);
      ok &= oh_check(name[i], x[i], ref[i], sz[i], tol, 0, why, sizeof why);
      const double e = max_diff(x[i], ref[i], sz[i]) / (oh_max_abs(ref[i], sz[i]) + 1e-300);
      worst = e > worst ? e : worst;
    }
    CHECK(ok, "rwkv6 chunked f32 %s:%s", level_name[lv], why);
    printf("%s rwkv6 chunked f32 forward and backward %s: worst max|err| / max|ref| %.3g\n",
           ok ? "PASS" : "FAIL", level_name[lv], worst);
  }
  for (int i = 0; i < R_N; ++i) {
    CHECK(!memcmp(got[0][i], got[1][i], 8 * sz[i]), "rwkv6 %s: HIGH differs from HIGHEST",
          name[i]);
    if (!tensor_cores)
      CHECK(!memcmp(got[0][i], got[2][i], 8 * sz[i]),
            "rwkv6 %s: MEDIUM changed a portable kernel's result", name[i]);
  }
  if (tensor_cores)
    CHECK(memcmp(got[0][R_O], got[2][R_O], 8 * sz[R_O]), "rwkv6: MEDIUM gave HIGHEST's bytes");
  for (int lv = 0; lv < 3; ++lv)
    for (int i = 0; i < R_N; ++i) free(got[lv][i]);
  for (int i = 0; i < R_N; ++i) free(ref[i]);
  free(r); free(k); free(v); free(w); free(u); free(h0); free(dout); free(dht);
}

/* Whether the tensor-core kernels take f32 here (fcl_*_config names them). */
static int names_mma(fcl_context *ctx, int rwkv6) {
  fcl_config_info f;
  if (rwkv6) {
    fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
    d.batch = 2, d.seqlen = 100, d.heads = 2, d.head_dim_k = d.head_dim_v = 32;
    d.algorithm = FCL_RWKV6_CHUNKED;
    return fcl_rwkv6_config(ctx, &d, FCL_F32, 0, &f) == FCL_OK && strstr(f.kernel, "mma");
  }
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 2, d.seqlen_q = 70, d.seqlen_k = 130, d.heads_q = 4, d.heads_kv = 2;
  d.head_dim = d.head_dim_v = 64;
  return fcl_attention_config(ctx, &d, FCL_F32, 0, &f) == FCL_OK && strstr(f.kernel, "mma");
}

int main(void) {
  unsetenv("FCL_F32_PRECISION");
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  option_checks(ctx);
  const int att_tc = names_mma(ctx, 0), rw_tc = names_mma(ctx, 1);
  printf("tensor-core f32 kernels here: attention %s, rwkv6 %s\n", att_tc ? "yes" : "no",
         rw_tc ? "yes" : "no");
  if (oh_mma_guaranteed()) {
    CHECK(att_tc || !oh_env_flag("FCL_F32_TENSOR_CORES", 1),
          "FCL_MMA_EMULATE=1 guarantees the attention's tensor-core f32 kernel: is its probe "
          "broken? (FCL_LOG=1 says)");
    CHECK(rw_tc, "FCL_MMA_EMULATE=1 guarantees RWKV6's tensor-core f32 kernels: is their probe "
                 "broken? (FCL_LOG=1 says)");
  }
  attention_case(ctx, 0, att_tc);
  attention_case(ctx, 1, att_tc);
  rwkv6_case(ctx, rw_tc);
  fcl_context_destroy(ctx);
  printf("%s: %d failed\n", g_failed ? "FAIL" : "PASS", g_failed);
  return g_failed ? 1 : 0;
}
