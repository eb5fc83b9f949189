/* Large problems, for a GPU with tens of GiB (issue 7):
 *  1. attention forward in f16 on tensors of more than 2^31 elements:
 *     q, k, v, o [520, 1024, 32, 128] = 2,181,038,080 elements (4.4 GB each),
 *     GQA 32/8 for k and v, so element offsets pass 2^31 in q and o;
 *  2. seqlen 65536 with causal masking (f16, B 1, H 4/2, D 64).
 * Inputs are a hash of the element index rounded to f16, so the host never
 * holds a whole tensor; 64 sampled rows of o and lse (always the first and
 * the last row of the last batch and head) are compared with the double
 * reference (ref_attention_row on that row's (batch, head) slice) with the
 * tolerances of test_attention_forward.
 *
 *   FCL_DEVICE=nvidia ./build/tests/test_large          (the GPU sizes)
 *   FCL_DEVICE=pocl   ./build/tests/test_large --small  (the same checks on
 *                                                       small shapes)
 * CTest registers it (label "large") only with -DFCL_TEST_LARGE=ON. */
#include "flashcl.h"
#include "ref_attention.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double   g_table[4096];
static uint16_t g_bits[4096];

/* Value of element idx of tensor t: one of 4096 f16 values in [-amp, amp]. */
static inline unsigned pick(uint64_t t, uint64_t idx) {
  uint64_t x = (idx + 1) * 0x9E3779B97F4A7C15ULL ^ (t * 0xD1B54A32D192ED03ULL);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 32;
  return (unsigned)(x >> 52);
}

static void init_table(void) {
  for (int i = 0; i < 4096; ++i) {
    const double x = -1.0 + 2.0 * (i + 0.5) / 4096.0;
    g_bits[i] = tu_f16_bits(x);
    g_table[i] = tu_f16_value(g_bits[i]);
  }
}

/* A device buffer of n f16 elements of tensor t, written in chunks. */
static cl_mem upload(fcl_context *ctx, uint64_t t, size_t n) {
  cl_int err;
  cl_mem m = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, n * 2, NULL, &err);
  if (err != CL_SUCCESS) {
    printf("FAIL: clCreateBuffer(%zu bytes): %d\n", n * 2, (int)err);
    return NULL;
  }
  const size_t chunk = (size_t)1 << 26;
  uint16_t *host = malloc(chunk * 2);
  if (!host) abort();
  for (size_t at = 0; at < n; at += chunk) {
    const size_t len = n - at < chunk ? n - at : chunk;
    for (size_t i = 0; i < len; ++i) host[i] = g_bits[pick(t, at + i)];
    err = clEnqueueWriteBuffer(fcl_context_queue(ctx), m, CL_TRUE, at * 2, len * 2, host, 0,
                               NULL, NULL);
    if (err != CL_SUCCESS) {
      printf("FAIL: clEnqueueWriteBuffer: %d\n", (int)err);
      clReleaseMemObject(m);
      m = NULL;
      break;
    }
  }
  free(host);
  return m;
}

typedef struct {
  const char *name;
  int64_t     b, n, hq, hkv, d;
  int         causal;
} big_case;

/* Runs one case; returns 1 on pass. */
static int run(fcl_context *ctx, const big_case *c) {
  const double t0 = tu_now();
  const int64_t B = c->b, N = c->n, HQ = c->hq, HK = c->hkv, D = c->d;
  const size_t nq = (size_t)(B * N * HQ * D), nk = (size_t)(B * N * HK * D);
  printf("%s: q/o %zu elements (%s 2^31), k/v %zu\n", c->name, nq,
         nq > ((size_t)1 << 31) ? ">" : "<=", nk);
  fflush(stdout);
  cl_int err;
  cl_mem q = upload(ctx, 1, nq), k = upload(ctx, 2, nk), v = upload(ctx, 3, nk);
  cl_mem o = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, nq * 2, NULL, &err);
  cl_mem lse = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE,
                              (size_t)(B * HQ * N) * 4, NULL, &err);
  if (!q || !k || !v || !o || !lse) {
    printf("FAIL %s: could not allocate the tensors\n", c->name);
    return 0;
  }
  const double t_up = tu_now();
  fcl_tensor tq = {q, 0, FCL_F16, {N * HQ * D, HQ * D, D, 1}};
  fcl_tensor tk = {k, 0, FCL_F16, {N * HK * D, HK * D, D, 1}}, tv = tk, to = tq;
  tv.buffer = v;
  to.buffer = o;
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = B; d.seqlen_q = d.seqlen_k = N; d.heads_q = HQ; d.heads_kv = HK;
  d.head_dim = d.head_dim_v = D; d.causal = c->causal;
  fcl_status st = fcl_attention_forward(ctx, &d, &tq, &tk, &tv, &to, lse);
  if (st != FCL_OK || clFinish(fcl_context_queue(ctx)) != CL_SUCCESS) {
    printf("FAIL %s: %s: %s\n", c->name, fcl_status_string(st), fcl_context_last_error(ctx));
    return 0;
  }
  const double t_run = tu_now();

  /* The reference on one (batch, head) slice: batch 1, one head. */
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 1; p.seqlen_q = p.seqlen_k = N; p.heads_q = p.heads_kv = 1;
  p.head_dim = p.head_dim_v = D; p.causal = c->causal;
  p.window_left = p.window_right = -1;
  double *qs = calloc((size_t)(N * D), 8), *ks = malloc(8 * (size_t)(N * D)),
         *vs = malloc(8 * (size_t)(N * D));
  double *ref = malloc(8 * (size_t)D), *got = malloc(8 * (size_t)D);
  uint16_t *raw = malloc(2 * (size_t)D);
  if (!qs || !ks || !vs || !ref || !got || !raw) abort();
  tu_rng g;
  tu_rng_seed(&g, 65536);
  int ok = 1, bad_rows = 0;
  double worst = 0.0;
  int64_t cur_b = -1, cur_hk = -1;
  for (int s = 0; s < 64; ++s) {
    int64_t b = tu_rng_int(&g, 0, B - 1), h = tu_rng_int(&g, 0, HQ - 1),
            i = tu_rng_int(&g, 0, N - 1);
    if (s == 0) b = h = i = 0;
    if (s == 1) b = B - 1, h = HQ - 1, i = N - 1;
    if (s == 2) b = B - 1, h = HQ - 1, i = 0;
    const int64_t hk = h / (HQ / HK);
    if (b != cur_b || hk != cur_hk) {
      for (int64_t j = 0; j < N; ++j)
        for (int64_t e = 0; e < D; ++e) {
          const uint64_t at = (uint64_t)(((b * N + j) * HK + hk) * D + e);
          ks[j * D + e] = g_table[pick(2, at)];
          vs[j * D + e] = g_table[pick(3, at)];
        }
      cur_b = b;
      cur_hk = hk;
    }
    const uint64_t q0 = (uint64_t)(((b * N + i) * HQ + h) * D);
    for (int64_t e = 0; e < D; ++e) qs[i * D + e] = g_table[pick(1, q0 + e)];
    const double l_ref = ref_attention_row(&p, qs, ks, vs, 0, 0, i, ref);
    /* The logit bound of this row (see tu_logit_error). */
    double bound = 0.0;
    const int64_t jmax = c->causal ? i : N - 1;
    for (int64_t j = 0; j <= jmax; ++j) {
      double sum = 0.0;
      for (int64_t e = 0; e < D; ++e) sum += fabs(qs[i * D + e] * ks[j * D + e]);
      if (sum > bound) bound = sum;
    }
    bound /= sqrt((double)D);
    float l_got = 0.0f;
    err = clEnqueueReadBuffer(fcl_context_queue(ctx), o, CL_TRUE, q0 * 2, (size_t)D * 2, raw, 0,
                              NULL, NULL);
    err |= clEnqueueReadBuffer(fcl_context_queue(ctx), lse, CL_TRUE,
                               (size_t)((b * HQ + h) * N + i) * 4, 4, &l_got, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
      printf("FAIL %s: reading results\n", c->name);
      ok = 0;
      break;
    }
    for (int64_t e = 0; e < D; ++e) got[e] = tu_f16_value(raw[e]);
    const tu_tol to_ = tu_tol_with_logits(tu_tol_output(FCL_F16), bound, D, 1.0);
    const tu_tol tl = tu_tol_with_logits(tu_tol_lse(), bound, D, 0.0);
    const tu_cmp co = tu_compare(got, ref, (size_t)D, to_, 0);
    const double lg = l_got;
    const tu_cmp cl_ = tu_compare(&lg, &l_ref, 1, tl, 1);
    if (co.worst_ratio > worst) worst = co.worst_ratio;
    if (!co.ok || !cl_.ok) {
      ++bad_rows;
      ok = 0;
      printf("  row b%lld h%lld i%lld (q element %llu):\n", (long long)b, (long long)h,
             (long long)i, (unsigned long long)q0);
      if (!co.ok) tu_print_cmp("o", &co, NULL, 0);
      if (!cl_.ok) tu_print_cmp("lse", &cl_, NULL, 0);
    }
  }
  printf("%s %s | 64 rows, %d bad, worst o err %.0f%% of tol | upload %.1f s, forward %.2f s,"
         " check %.1f s\n",
         ok ? "PASS" : "FAIL", c->name, bad_rows, 100.0 * worst, t_up - t0, t_run - t_up,
         tu_now() - t_run);
  fflush(stdout);
  free(qs); free(ks); free(vs); free(ref); free(got); free(raw);
  clReleaseMemObject(q); clReleaseMemObject(k); clReleaseMemObject(v);
  clReleaseMemObject(o); clReleaseMemObject(lse);
  return ok;
}

int main(int argc, char **argv) {
  const int small = argc > 1 && strcmp(argv[1], "--small") == 0;
  init_table();
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s%s\n", fcl_context_device_name(ctx), small ? " (--small shapes)" : "");
  const big_case cases[2] = {
      small ? (big_case){"f16 attention, small stand-in for > 2^31 elements", 3, 128, 4, 2, 128, 0}
            : (big_case){"f16 attention, > 2^31 elements per tensor", 520, 1024, 32, 8, 128, 0},
      small ? (big_case){"f16 attention, causal seqlen 2048 (stand-in for 65536)", 1, 2048, 4, 2, 64, 1}
            : (big_case){"f16 attention, causal seqlen 65536", 1, 65536, 4, 2, 64, 1}};
  int failed = 0;
  for (int i = 0; i < 2; ++i) failed += !run(ctx, &cases[i]);
  fcl_context_destroy(ctx);
  printf("test_large: %d cases, %d failed\n", 2, failed);
  return failed ? 1 : 0;
}
