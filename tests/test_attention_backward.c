/* fcl_attention_backward against the double reference (ref_attention_grad.c)
 * on $FCL_DEVICE: the shapes of tests/attention_cases.h the backward suite
 * runs, a seeded random batch, and a pass with FCL_LOOP_BUDGET=6000, each
 * case run through the harness (op_attention_case.c). Each case rounds q,
 * k, v and dout to the dtype, runs fcl_attention_forward (with lse) and
 * then fcl_attention_backward on the kernel's own o and lse, and checks:
 *  - o and lse of the forward against the reference, as the forward suite
 *    does (so the stored o is itself within the forward's bounds);
 *  - dq, dk, dv against the reference computed in double from the rounded
 *    inputs, o being the forward's stored output that the backward is given,
 *    with a tolerance relative to max|ref| of each tensor (NaN never
 *    passes);
 *  - dq of a row that sees no key and dk/dv of a key no query sees are
 *    exactly 0;
 *  - bytes outside the output views (gaps, offsets, guard tails) stay
 *    poison, and q, k, v, o, lse and dout are not modified;
 *  - a second backward run (into re-poisoned buffers) is bit-identical.
 * Coverage: every dtype; head dims 1 .. 512 with head_dim != head_dim_v;
 * seqlen 1, odd lengths, seqlen_q != seqlen_k with bottom-right causal,
 * windows, softcap, ALiBi, GQA/MQA, varlen with empty sequences, strided
 * layouts with offsets, long key/query ranges; a seeded random batch; a
 * pass with FCL_LOOP_BUDGET=6000 in a second context (split-key dQ and
 * split-query dK/dV with ordered partial sums); and bad input, which must
 * return FCL_ERROR_INVALID_ARGUMENT, name the argument and write nothing.
 *
 * Environment: FCL_DEVICE (device selector), FCL_TEST_SEED (random batch),
 * FCL_TEST_FILTER (run only cases whose name contains it; for debugging). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "attention_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double grad_tol(fcl_dtype t) { return tu_tol_grad(t).atol; }

/* Run with FCL_LOOP_BUDGET=6000: with it every dQ work-group walks one or a
 * few key tiles and every dK/dV work-group a few query tiles, so the
 * partial sums and their final pass are used (the forward splits too). The
 * (dtype, d, dv) are among those of attention_headdim_cases. */
static const oh_attention_case split_cases[] = {
  F(.name = "split causal sq<sk GQA", .bwd = DT_F32, .d = 64, .dv = 64, .b = 2, .sq = 100, .sk = 170, .hq = 4, .hkv = 2, .causal = 1),
  F(.name = "split varlen empty window", .bwd = DT_F16, .d = 64, .dv = 64, .nseq = 4, .lens_q = {70, 0, 130, 5}, .lens_k = {90, 40, 129, 0}, .hq = 2, .hkv = 1, .win = 1, .wl = 50, .wr = 20),
  F(.name = "split sq>sk alibi softcap", .bwd = DT_BF16, .d = 64, .dv = 64, .b = 1, .sq = 200, .sk = 97, .hq = 3, .hkv = 1, .causal = 1, .alibi = 1, .softcap = 4.0f),
  F(.name = "split d7/40 varlen", .bwd = DT_F16, .d = 7, .dv = 40, .nseq = 3, .lens_q = {150, 1, 260}, .lens_k = {300, 65, 255}, .hq = 3, .hkv = 1, .causal = 1),
  F(.name = "split d128/64 padded", .bwd = DT_BF16, .d = 128, .dv = 64, .b = 1, .sq = 130, .sk = 99, .hq = 4, .hkv = 2, ALL_VIEWS(TU_PADDED), .off = 3),
  F(.name = "split d1 MQA mixed layouts", .bwd = DT_F32, .d = 1, .dv = 1, .b = 2, .sq = 190, .sk = 250, .hq = 4, .hkv = 1, .lq = TU_BHSD, .lk = TU_SBHD, .lv = TU_PADDED, .lo = TU_PADDED_BHSD, .ldo = TU_PADDED, .ldq = TU_SBHD, .ldk = TU_PADDED, .ldv = TU_BHSD, .off = 4),
};

/* ---- bad input ------------------------------------------------------------- */
static int g_bad_run = 0, g_bad_failed = 0;

/* name appears in msg as a whole word (not inside another identifier). */
static int names_arg(const char *msg, const char *name) {
  const size_t n = strlen(name);
  for (const char *s = strstr(msg, name); s; s = strstr(s + 1, name)) {
    const char before = s == msg ? ' ' : s[-1], after = s[n];
    const int word_b = (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
                       (before >= '0' && before <= '9') || before == '_';
    const int word_a = (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') ||
                       (after >= '0' && after <= '9') || after == '_';
    if (!word_b && !word_a) return 1;
  }
  return 0;
}

typedef struct {
  fcl_context *ctx;
  cl_command_queue queue;
  fcl_attention_desc desc;
  tu_tensor q, k, v, o, dout, dq, dk, dv;
  cl_mem lse, lse_small;
} bad_setup;

static void expect_invalid(bad_setup *s, const char *label, const char *arg, cl_mem lse,
                           const fcl_tensor *dout, const fcl_tensor *dq, const fcl_tensor *dk,
                           const fcl_tensor *dv) {
  ++g_bad_run;
  tu_tensor *outs[3] = {&s->dq, &s->dk, &s->dv};
  for (int i = 0; i < 3; ++i) tu_buffer_repoison(s->queue, outs[i]->buffer, outs[i]->bytes);
  const fcl_status st = fcl_attention_backward(s->ctx, &s->desc, &s->q.t, &s->k.t, &s->v.t,
                                               &s->o.t, lse, dout, dq, dk, dv);
  const char *msg = fcl_context_last_error(s->ctx);
  char why[512] = "";
  int ok = 1;
  if (st != FCL_ERROR_INVALID_ARGUMENT) {
    ok = 0;
    snprintf(why + strlen(why), sizeof why - strlen(why), " status %s, want %s;",
             fcl_status_string(st), fcl_status_string(FCL_ERROR_INVALID_ARGUMENT));
  }
  if (!msg || !names_arg(msg, arg)) {
    ok = 0;
    snprintf(why + strlen(why), sizeof why - strlen(why), " message does not name \"%s\";", arg);
  }
  clFinish(s->queue);
  for (int i = 0; i < 3; ++i) {
    size_t first = 0;
    const long bad = tu_buffer_poison_left(s->queue, outs[i]->buffer, 0, outs[i]->bytes, &first);
    if (bad != 0) {
      ok = 0;
      snprintf(why + strlen(why), sizeof why - strlen(why), " %s buffer written (%ld bytes);",
               i == 0 ? "dq" : i == 1 ? "dk" : "dv", bad);
    }
  }
  printf("%s bad input: %-28s | %s: \"%s\"%s\n", ok ? "PASS" : "FAIL", label,
         fcl_status_string(st), msg ? msg : "(null)", why);
  if (!ok) ++g_bad_failed;
}

static void bad_input_tests(fcl_context *ctx) {
  cl_context cl = fcl_context_cl(ctx);
  bad_setup s;
  memset(&s, 0, sizeof s);
  s.ctx = ctx;
  s.queue = fcl_context_queue(ctx);
  const int64_t B = 2, SQ = 20, SK = 30, HQ = 2, HK = 1, D = 64, DV = 64;
  const size_t nq = (size_t)(B * SQ * HQ * D), nk = (size_t)(B * SK * HK * D),
               nv = (size_t)(B * SK * HK * DV), no = (size_t)(B * SQ * HQ * DV);
  double *q = malloc(8 * nq), *k = malloc(8 * nk), *v = malloc(8 * nv), *dout = malloc(8 * no);
  double *gq = malloc(8 * nq), *gk = malloc(8 * nk), *gv = malloc(8 * nv);
  double *rq = malloc(8 * nq), *rk = malloc(8 * nk), *rv = malloc(8 * nv);
  if (!q || !k || !v || !dout || !gq || !gk || !gv || !rq || !rk || !rv) abort();
  tu_rng r;
  tu_rng_seed(&r, 4242);
  tu_fill_uniform(&r, q, nq, -2.0, 2.0);
  tu_fill_uniform(&r, k, nk, -2.0, 2.0);
  tu_fill_uniform(&r, v, nv, -1.0, 1.0);
  tu_fill_uniform(&r, dout, no, -1.0, 1.0);
  tu_round_array(q, nq, FCL_F32); tu_round_array(k, nk, FCL_F32);
  tu_round_array(v, nv, FCL_F32); tu_round_array(dout, no, FCL_F32);
  /* Exact-fit buffers everywhere: the gradients must be accepted as they are. */
  if (tu_tensor_create(cl, s.queue, q, B, SQ, HQ, D, FCL_F32, TU_BSHD, 0, 0, &s.q) ||
      tu_tensor_create(cl, s.queue, k, B, SK, HK, D, FCL_F32, TU_BSHD, 0, 0, &s.k) ||
      tu_tensor_create(cl, s.queue, v, B, SK, HK, DV, FCL_F32, TU_BSHD, 0, 0, &s.v) ||
      tu_tensor_create(cl, s.queue, NULL, B, SQ, HQ, DV, FCL_F32, TU_BSHD, 0, 0, &s.o) ||
      tu_tensor_create(cl, s.queue, dout, B, SQ, HQ, DV, FCL_F32, TU_BSHD, 0, 0, &s.dout) ||
      tu_tensor_create(cl, s.queue, NULL, B, SQ, HQ, D, FCL_F32, TU_BSHD, 0, 0, &s.dq) ||
      tu_tensor_create(cl, s.queue, NULL, B, SK, HK, D, FCL_F32, TU_BSHD, 0, 0, &s.dk) ||
      tu_tensor_create(cl, s.queue, NULL, B, SK, HK, DV, FCL_F32, TU_BSHD, 0, 0, &s.dv)) {
    printf("FAIL bad input: could not create buffers\n");
    ++g_bad_failed;
    return;
  }
  const size_t lse_bytes = (size_t)(B * HQ * SQ) * 4;
  s.lse = tu_buffer_poison(cl, s.queue, lse_bytes);
  s.lse_small = tu_buffer_poison(cl, s.queue, lse_bytes - 4);
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = B; d.seqlen_q = SQ; d.seqlen_k = SK; d.heads_q = HQ; d.heads_kv = HK;
  d.head_dim = D; d.head_dim_v = DV; d.causal = 1;
  s.desc = d;
  fcl_status st = fcl_attention_forward(ctx, &s.desc, &s.q.t, &s.k.t, &s.v.t, &s.o.t, s.lse);
  if (st != FCL_OK || clFinish(s.queue) != CL_SUCCESS) {
    printf("FAIL bad input: setup forward: %s: %s\n", fcl_status_string(st),
           fcl_context_last_error(ctx));
    ++g_bad_failed;
    return;
  }

  const fcl_tensor *DO = &s.dout.t, *DQ = &s.dq.t, *DK = &s.dk.t, *DV_ = &s.dv.t;
  expect_invalid(&s, "dout NULL", "dout", s.lse, NULL, DQ, DK, DV_);
  expect_invalid(&s, "dq NULL", "dq", s.lse, DO, NULL, DK, DV_);
  expect_invalid(&s, "dk NULL", "dk", s.lse, DO, DQ, NULL, DV_);
  expect_invalid(&s, "dv NULL", "dv", s.lse, DO, DQ, DK, NULL);
  expect_invalid(&s, "lse NULL", "lse", NULL, DO, DQ, DK, DV_);
  expect_invalid(&s, "lse too small", "lse", s.lse_small, DO, DQ, DK, DV_);
  const char *names[4] = {"dout", "dq", "dk", "dv"};
  for (int t = 0; t < 4; ++t) {
    char label[64];
    const fcl_tensor *base[4] = {DO, DQ, DK, DV_};
    fcl_tensor bad = *base[t];
    const fcl_tensor *a[4] = {DO, DQ, DK, DV_};
    a[t] = &bad;
    /* dtype mismatch (f16, then bf16, where q is f32) */
    for (int dt = 1; dt <= 2; ++dt) {
      bad = *base[t];
      bad.dtype = (fcl_dtype)dt;
      snprintf(label, sizeof label, "%s dtype %s", names[t], tu_dtype_name(bad.dtype));
      expect_invalid(&s, label, names[t], s.lse, a[0], a[1], a[2], a[3]);
    }
    /* one element past the buffer's end */
    bad = *base[t];
    bad.offset = 4;
    snprintf(label, sizeof label, "%s view overruns by 1", names[t]);
    expect_invalid(&s, label, names[t], s.lse, a[0], a[1], a[2], a[3]);
    /* a stride that reaches too far */
    bad = *base[t];
    bad.strides[1] += 1;
    snprintf(label, sizeof label, "%s strides[1] too large", names[t]);
    expect_invalid(&s, label, names[t], s.lse, a[0], a[1], a[2], a[3]);
    bad = *base[t];
    bad.strides[3] = 2;
    snprintf(label, sizeof label, "%s strides[3] = 2", names[t]);
    expect_invalid(&s, label, names[t], s.lse, a[0], a[1], a[2], a[3]);
    bad = *base[t];
    bad.buffer = NULL;
    snprintf(label, sizeof label, "%s.buffer NULL", names[t]);
    expect_invalid(&s, label, names[t], s.lse, a[0], a[1], a[2], a[3]);
  }

  /* And the valid call with these exact-fit buffers works. */
  ++g_bad_run;
  for (int i = 0; i < 3; ++i) {
    tu_tensor *t = i == 0 ? &s.dq : i == 1 ? &s.dk : &s.dv;
    tu_buffer_repoison(s.queue, t->buffer, t->bytes);
  }
  st = fcl_attention_backward(ctx, &s.desc, &s.q.t, &s.k.t, &s.v.t, &s.o.t, s.lse, DO, DQ,
                              DK, DV_);
  int ok = st == FCL_OK && clFinish(s.queue) == CL_SUCCESS;
  if (ok) {
    ref_attention_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B; p.seqlen_q = SQ; p.seqlen_k = SK; p.heads_q = HQ; p.heads_kv = HK;
    p.head_dim = D; p.head_dim_v = DV; p.causal = 1;
    p.window_left = p.window_right = -1;
    ref_attention_backward(&p, q, k, v, dout, rq, rk, rv);
    const tu_tol tol = {grad_tol(FCL_F32), 0, 0};
    ok = tu_tensor_read(s.queue, &s.dq, gq, NULL) == 0 &&
         tu_tensor_read(s.queue, &s.dk, gk, NULL) == 0 &&
         tu_tensor_read(s.queue, &s.dv, gv, NULL) == 0 && tu_compare(gq, rq, nq, tol, 0).ok &&
         tu_compare(gk, rk, nk, tol, 0).ok && tu_compare(gv, rv, nv, tol, 0).ok;
  }
  printf("%s bad input: %-28s | %s %s\n", ok ? "PASS" : "FAIL", "valid, exact-fit buffers",
         fcl_status_string(st), st == FCL_OK ? "" : fcl_context_last_error(ctx));
  if (!ok) ++g_bad_failed;

  tu_tensor_release(&s.q); tu_tensor_release(&s.k); tu_tensor_release(&s.v);
  tu_tensor_release(&s.o); tu_tensor_release(&s.dout); tu_tensor_release(&s.dq);
  tu_tensor_release(&s.dk); tu_tensor_release(&s.dv);
  clReleaseMemObject(s.lse);
  clReleaseMemObject(s.lse_small);
  free(q); free(k); free(v); free(dout); free(gq); free(gk); free(gv);
  free(rq); free(rk); free(rv);
}


static void print_stats(fcl_context *ctx) {
  fcl_context_stats stats = {0, 0, 0};
  fcl_context_get_stats(ctx, &stats);
  printf("programs built %d, from cache %d, cache writes %d\n", stats.programs_built,
         stats.programs_from_cache, stats.cache_writes);
}

int main(void) {
  const double t_start = tu_now();
  fcl_context *ctx = oh_open_context();
  if (!ctx) return 1;
  const char *seed_env = getenv("FCL_TEST_SEED");
  const uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 20240602u;
  oh_attention_stats st;
  memset(&st, 0, sizeof st);
  double t_phase = tu_now();

  attention_run_table(ctx, attention_feature_cases, ATTENTION_COUNT(attention_feature_cases), 1,
                      &st);
  printf("-- feature cases: %.1f s\n", tu_now() - t_phase);
  t_phase = tu_now();
  attention_run_table(ctx, attention_headdim_cases, ATTENTION_COUNT(attention_headdim_cases), 1,
                      &st);
  printf("-- head dim cases: %.1f s\n", tu_now() - t_phase);
  t_phase = tu_now();
  printf("random batch: seed %llu (set FCL_TEST_SEED to change)\n", (unsigned long long)seed);
  tu_rng rng;
  tu_rng_seed(&rng, seed);
  for (int i = 0; i < 25; ++i) {
    oh_attention_case c;
    char name[32];
    attention_random_case(&rng, 1, &c, name, sizeof name, i);
    const uint64_t s = tu_rng_next(&rng);
    if (oh_selected(c.name))
      oh_attention_case_run(ctx, &c, attention_mask_dtype(c.bwd), 1, s, &st);
  }
  printf("-- random cases: %.1f s\n", tu_now() - t_phase);
  t_phase = tu_now();
  if (oh_selected("bad input")) bad_input_tests(ctx);
  printf("-- bad input: %.1f s\n", tu_now() - t_phase);
  print_stats(ctx);
  fcl_context_destroy(ctx);

  /* The split paths: a second context that reads FCL_LOOP_BUDGET. */
  t_phase = tu_now();
  int any_split = 0;
  for (size_t i = 0; i < ATTENTION_COUNT(split_cases); ++i)
    any_split |= oh_selected(split_cases[i].name);
  if (any_split) {
    setenv("FCL_LOOP_BUDGET", "6000", 1);
    ctx = oh_open_context();
    if (!ctx) return 1;
    printf("split pass: FCL_LOOP_BUDGET=6000\n");
    attention_run_table(ctx, split_cases, ATTENTION_COUNT(split_cases), 1, &st);
    print_stats(ctx);
    fcl_context_destroy(ctx);
    printf("-- split pass: %.1f s\n", tu_now() - t_phase);
  }

  printf("worst err/tol (dq dk dv): f32 %.0f%% %.0f%% %.0f%% (tol %g), f16 %.0f%% %.0f%% %.0f%% "
         "(tol %g), bf16 %.0f%% %.0f%% %.0f%% (tol %g)\n",
         100 * st.worst[0][0], 100 * st.worst[0][1], 100 * st.worst[0][2], grad_tol(FCL_F32),
         100 * st.worst[1][0], 100 * st.worst[1][1], 100 * st.worst[1][2], grad_tol(FCL_F16),
         100 * st.worst[2][0], 100 * st.worst[2][1], 100 * st.worst[2][2], grad_tol(FCL_BF16));
  printf("largest share of the tolerance from the forward's stored o (o-term): f32 %.0f%%, "
         "f16 %.0f%%, bf16 %.0f%%\n", 100 * st.oterm[0], 100 * st.oterm[1], 100 * st.oterm[2]);
  printf("test_attention_backward: %d cases, %d failed; bad input %d checks, %d failed; %.1f s\n",
         st.run, st.failed, g_bad_run, g_bad_failed, tu_now() - t_start);
  return st.failed || g_bad_failed || (st.run == 0 && g_bad_run == 0) ? 1 : 0;
}
