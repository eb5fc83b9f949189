/* fcl_attention_backward against the double reference (ref_attention_grad.c)
 * on $FCL_DEVICE. Each case rounds q, k, v and dout to the dtype, runs
 * fcl_attention_forward (with lse) and then fcl_attention_backward on the
 * kernel's own o and lse, and checks:
 *  - dq, dk, dv against the reference computed in double from the rounded
 *    inputs, o being the forward's stored output that the backward is given,
 *    with a tolerance relative to max|ref| of each tensor (NaN never
 *    passes); o and lse of the forward against the
 *    reference too (so the stored o is itself within the forward's bounds);
 *  - dq of a row that sees no key and dk/dv of a key no query sees are
 *    exactly 0;
 *  - bytes outside the gradient views (gaps, offsets, guard tails) stay
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
#include "flashcl.h"
#include "ref_attention.h"
#include "test_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQS 8

typedef struct {
  const char *name;
  fcl_dtype   dtype;
  int64_t     b, sq, sk, hq, hkv, d, dv;
  float       scale; /* 0: default */
  int         causal;
  int         win; /* 0: no window (-1, -1); 1: use wl, wr */
  int64_t     wl, wr;
  float       softcap;
  int         alibi;
  int         nseq; /* > 0: varlen with these lengths */
  int32_t     lens_q[MAX_SEQS], lens_k[MAX_SEQS];
  /* q, k, v, o, dout, dq, dk, dv */
  tu_layout   lq, lk, lv, lo, ldo, ldq, ldk, ldv;
  size_t      off; /* > 0: the eight tensors start off, off+1, ... elements in */
  double      amp; /* q, k uniform in [-amp, amp]; 0 -> 2.5 */
} bwd_case;

static int g_run = 0, g_failed = 0;

static double grad_tol(fcl_dtype t) { return tu_tol_grad(t).atol; }

/* max |ref_o - ref| / (tol * max|ref|): how much of the allowance the
 * forward's o accounts for (printed when it matters). */
static double o_term(const double *ref, const double *ref_o, size_t n, double tol) {
  double m = 0.0, d = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (isfinite(ref[i]) && fabs(ref[i]) > m) m = fabs(ref[i]);
    if (fabs(ref_o[i] - ref[i]) > d) d = fabs(ref_o[i] - ref[i]);
  }
  return m > 0 ? d / (tol * m) : (d > 0 ? INFINITY : 0.0);
}

/* Worst err/tol seen per dtype and gradient, for the summary. */
static double g_worst[3][3], g_oterm[3];

static int64_t i64max(int64_t a, int64_t b) { return a > b ? a : b; }

static void describe(const bwd_case *c, char *buf, size_t n) {
  int p = snprintf(buf, n, "%-4s %s | ", tu_dtype_name(c->dtype), c->name);
#define ADD(...)                                                                  \
  do {                                                                            \
    if (p < (int)n) p += snprintf(buf + p, n - (size_t)p, __VA_ARGS__);           \
  } while (0)
  if (c->nseq) {
    ADD("varlen");
    for (int i = 0; i < c->nseq; ++i)
      ADD("%s%d/%d", i ? "," : " q/k ", c->lens_q[i], c->lens_k[i]);
  } else {
    ADD("b%lld sq%lld sk%lld", (long long)c->b, (long long)c->sq, (long long)c->sk);
  }
  ADD(" h%lld/%lld d%lld/%lld", (long long)c->hq, (long long)c->hkv, (long long)c->d,
      (long long)c->dv);
  if (c->causal) ADD(" causal");
  if (c->win) ADD(" win(%lld,%lld)", (long long)c->wl, (long long)c->wr);
  if (c->softcap > 0) ADD(" cap%g", c->softcap);
  if (c->alibi) ADD(" alibi");
  if (c->scale != 0) ADD(" scale%g", c->scale);
  const tu_layout ls[8] = {c->lq, c->lk, c->lv, c->lo, c->ldo, c->ldq, c->ldk, c->ldv};
  int any = 0;
  for (int i = 0; i < 8; ++i) any |= ls[i] != TU_BSHD;
  if (any)
    for (int i = 0; i < 8; ++i) ADD("%s%s", i ? "/" : " ", tu_layout_name(ls[i]));
  if (c->off) ADD(" off%zu", c->off);
#undef ADD
}

static size_t tail_for(tu_layout l, size_t off) {
  return (l == TU_BSHD || l == TU_BHSD) && off == 0 ? 0 : 7; /* exact fit, or slack */
}

static unsigned char *read_bytes(cl_command_queue queue, cl_mem buf, size_t bytes) {
  unsigned char *h = malloc(bytes ? bytes : 1);
  if (!h) abort();
  if (tu_buffer_read(queue, buf, h, bytes)) {
    free(h);
    return NULL;
  }
  return h;
}

typedef struct {
  int  ok;
  char why[1536];
  int  wp;
} verdict;

static void fail(verdict *v, const char *fmt, ...) {
  v->ok = 0;
  if (v->wp >= (int)sizeof v->why - 1) return;
  va_list ap;
  va_start(ap, fmt);
  v->wp += vsnprintf(v->why + v->wp, sizeof v->why - (size_t)v->wp, fmt, ap);
  va_end(ap);
}

static void note(verdict *v, const char *fmt, ...) {
  if (v->wp >= (int)sizeof v->why - 1) return;
  va_list ap;
  va_start(ap, fmt);
  v->wp += vsnprintf(v->why + v->wp, sizeof v->why - (size_t)v->wp, fmt, ap);
  va_end(ap);
}

/* Runs one case; returns 1 on pass. Never skips. */
static int run_case(fcl_context *ctx, const bwd_case *c, uint64_t seed) {
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue queue = fcl_context_queue(ctx);
  char desc_text[512];
  describe(c, desc_text, sizeof desc_text);
  const double t0 = tu_now();
  ++g_run;

  const int varlen = c->nseq > 0;
  int32_t cu_q[MAX_SEQS + 1] = {0}, cu_k[MAX_SEQS + 1] = {0};
  int64_t B = c->b, SQ = c->sq, SK = c->sk;
  int64_t rows_q, rows_k;
  if (varlen) {
    B = c->nseq;
    SQ = SK = 0;
    for (int i = 0; i < c->nseq; ++i) {
      cu_q[i + 1] = cu_q[i] + c->lens_q[i];
      cu_k[i + 1] = cu_k[i] + c->lens_k[i];
      SQ = i64max(SQ, c->lens_q[i]);
      SK = i64max(SK, c->lens_k[i]);
    }
    rows_q = cu_q[c->nseq];
    rows_k = cu_k[c->nseq];
  } else {
    rows_q = B * SQ;
    rows_k = B * SK;
  }
  const int64_t HQ = c->hq, HK = c->hkv, D = c->d, DV = c->dv;
  const size_t nq = (size_t)(rows_q * HQ * D), nk = (size_t)(rows_k * HK * D),
               nv = (size_t)(rows_k * HK * DV), no = (size_t)(rows_q * HQ * DV),
               nl = (size_t)(varlen ? HQ * rows_q : B * HQ * SQ);

  double *q = malloc(8 * nq), *k = malloc(8 * nk), *v = malloc(8 * nv), *dout = malloc(8 * no);
  double *o_ref = malloc(8 * no), *o_got = malloc(8 * no);
  double *l_ref = malloc(8 * nl), *l_got = malloc(8 * nl);
  double *dq_ref = malloc(8 * nq), *dk_ref = malloc(8 * nk), *dv_ref = malloc(8 * nv);
  double *dq_got = malloc(8 * nq), *dk_got = malloc(8 * nk), *dv_got = malloc(8 * nv);
  double *dq_ro = malloc(8 * nq), *dk_ro = malloc(8 * nk), *dv_ro = malloc(8 * nv);
  double *mq = malloc(8 * nq), *mk = malloc(8 * nk); /* magnitudes of dq's, dk's terms */
  double slopes[64];
  float slopes_f[64];
  if (!q || !k || !v || !dout || !o_ref || !o_got || !l_ref || !l_got || !dq_ref ||
      !dk_ref || !dv_ref || !dq_got || !dk_got || !dv_got || !dq_ro || !dk_ro || !dv_ro ||
      !mq || !mk)
    abort();

  tu_rng rng;
  tu_rng_seed(&rng, seed);
  const double amp = c->amp > 0 ? c->amp : 2.5;
  tu_fill_uniform(&rng, q, nq, -amp, amp);
  tu_fill_uniform(&rng, k, nk, -amp, amp);
  tu_fill_uniform(&rng, v, nv, -1.0, 1.0);
  tu_fill_uniform(&rng, dout, no, -1.0, 1.0);
  tu_round_array(q, nq, c->dtype);
  tu_round_array(k, nk, c->dtype);
  tu_round_array(v, nv, c->dtype);
  tu_round_array(dout, no, c->dtype);
  for (int64_t h = 0; h < HQ && h < 64; ++h) {
    slopes_f[h] = (float)pow(2.0, -8.0 * (double)(h + 1) / (double)HQ);
    slopes[h] = slopes_f[h];
  }

  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B; p.seqlen_q = SQ; p.seqlen_k = SK; p.heads_q = HQ; p.heads_kv = HK;
  p.head_dim = D; p.head_dim_v = DV;
  p.softmax_scale = (double)c->scale;
  p.causal = c->causal;
  p.window_left = c->win ? c->wl : -1;
  p.window_right = c->win ? c->wr : -1;
  p.softcap = (double)c->softcap;
  p.alibi_slopes = c->alibi ? slopes : NULL;
  p.cu_seqlens_q = varlen ? cu_q : NULL;
  p.cu_seqlens_k = varlen ? cu_k : NULL;
  ref_attention_forward(&p, q, k, v, o_ref, l_ref);
  ref_attention_backward(&p, q, k, v, dout, dq_ref, dk_ref, dv_ref);
  const double logit_bound = ref_attention_logit_bound(&p, q, k);
  double vmax = 0.0;
  for (size_t e = 0; e < nv; ++e) vmax = fabs(v[e]) > vmax ? fabs(v[e]) : vmax;
  const tu_tol tol_o = tu_tol_with_logits(tu_tol_output(c->dtype), logit_bound, D, vmax);
  const tu_tol tol_l = tu_tol_with_logits(tu_tol_lse(), logit_bound, D, 0.0);
  const double tol_g = grad_tol(c->dtype);

  verdict vd;
  memset(&vd, 0, sizeof vd);
  vd.ok = 1;
  const int64_t bq = varlen ? 1 : B, sq_rows = varlen ? rows_q : SQ;
  const int64_t sk_rows = varlen ? rows_k : SK;
  size_t offs[8];
  for (int i = 0; i < 8; ++i) offs[i] = c->off ? c->off + (size_t)i : 0;
  tu_tensor tq, tk, tv, to, tdo, tdq, tdk, tdv;
  memset(&tq, 0, sizeof tq);
  if (tu_tensor_create(cl, queue, q, bq, sq_rows, HQ, D, c->dtype, c->lq, offs[0],
                       tail_for(c->lq, offs[0]), &tq) ||
      tu_tensor_create(cl, queue, k, bq, sk_rows, HK, D, c->dtype, c->lk, offs[1],
                       tail_for(c->lk, offs[1]), &tk) ||
      tu_tensor_create(cl, queue, v, bq, sk_rows, HK, DV, c->dtype, c->lv, offs[2],
                       tail_for(c->lv, offs[2]), &tv) ||
      tu_tensor_create(cl, queue, NULL, bq, sq_rows, HQ, DV, c->dtype, c->lo, offs[3],
                       tail_for(c->lo, offs[3]), &to) ||
      tu_tensor_create(cl, queue, dout, bq, sq_rows, HQ, DV, c->dtype, c->ldo, offs[4],
                       tail_for(c->ldo, offs[4]), &tdo) ||
      /* The gradients get a guard of one token row plus some: a write past
       * the view lands in poison and is reported. */
      tu_tensor_create(cl, queue, NULL, bq, sq_rows, HQ, D, c->dtype, c->ldq, offs[5],
                       (size_t)(HQ * D) + 7, &tdq) ||
      tu_tensor_create(cl, queue, NULL, bq, sk_rows, HK, D, c->dtype, c->ldk, offs[6],
                       (size_t)(HK * D) + 7, &tdk) ||
      tu_tensor_create(cl, queue, NULL, bq, sk_rows, HK, DV, c->dtype, c->ldv, offs[7],
                       (size_t)(HK * DV) + 7, &tdv)) {
    printf("FAIL %s | could not create buffers\n", desc_text);
    ++g_failed;
    exit(1);
  }
  const size_t lse_bytes = nl * 4 + 16;
  cl_mem lse = tu_buffer_poison(cl, queue, lse_bytes);
  cl_mem alibi = c->alibi ? tu_buffer_from(cl, queue, slopes_f, (size_t)HQ * 4) : NULL;
  cl_mem cuq = varlen ? tu_buffer_from(cl, queue, cu_q, (size_t)(B + 1) * 4) : NULL;
  cl_mem cuk = varlen ? tu_buffer_from(cl, queue, cu_k, (size_t)(B + 1) * 4) : NULL;

  fcl_attention_desc desc = FCL_ATTENTION_DESC_INIT;
  desc.batch = B; desc.seqlen_q = SQ; desc.seqlen_k = SK;
  desc.heads_q = HQ; desc.heads_kv = HK; desc.head_dim = D; desc.head_dim_v = DV;
  desc.softmax_scale = c->scale;
  desc.causal = c->causal;
  desc.window_left = p.window_left;
  desc.window_right = p.window_right;
  desc.softcap = c->softcap;
  desc.alibi_slopes = alibi;
  desc.cu_seqlens_q = cuq;
  desc.cu_seqlens_k = cuk;

  tu_tensor *grads[3] = {&tdq, &tdk, &tdv};
  double *gots[3] = {dq_got, dk_got, dv_got};
  const double *refs[3] = {dq_ref, dk_ref, dv_ref};
  const size_t ns[3] = {nq, nk, nv};
  const char *gnames[3] = {"dq", "dk", "dv"};
  unsigned char *first_run[3] = {NULL, NULL, NULL};
  tu_tensor *ins[5] = {&tq, &tk, &tv, &to, &tdo};
  const char *in_names[6] = {"q", "k", "v", "o", "dout", "lse"};
  unsigned char *in_before[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
  tu_cmp cg[3];
  memset(cg, 0, sizeof cg);
  size_t empty_rows = 0, unseen_keys = 0;

  double t_fwd = tu_now(), t_bwd = 0.0;
  fcl_status st = fcl_attention_forward(ctx, &desc, &tq.t, &tk.t, &tv.t, &to.t, lse);
  if (st != FCL_OK) {
    fail(&vd, " forward status %s: %s;", fcl_status_string(st), fcl_context_last_error(ctx));
    goto report;
  }
  if (tu_cl_check(clFinish(queue), "clFinish")) {
    fail(&vd, " forward clFinish failed;");
    goto report;
  }
  t_fwd = tu_now() - t_fwd;
  /* The forward, so that a backward failure is not blamed on it. */
  {
    if (tu_tensor_read(queue, &to, o_got, NULL) < 0) {
      fail(&vd, " reading o failed;");
      goto report;
    }
    const tu_cmp co = tu_compare(o_got, o_ref, no, tol_o, 0);
    if (!co.ok) {
      const int64_t dims[4] = {bq, sq_rows, HQ, DV};
      fail(&vd, " forward o mismatch;");
      tu_print_cmp("o (forward)", &co, dims, 4);
    }
    long bad_tail = 0;
    if (tu_buffer_read_f32(queue, lse, l_got, nl, 16, &bad_tail)) {
      fail(&vd, " reading lse failed;");
      goto report;
    }
    const tu_cmp cl_ = tu_compare(l_got, l_ref, nl, tol_l, 1);
    if (!cl_.ok) {
      fail(&vd, " forward lse mismatch;");
      tu_print_cmp("lse (forward)", &cl_, NULL, 0);
    }
  }
  for (int i = 0; i < 5; ++i) in_before[i] = read_bytes(queue, ins[i]->buffer, ins[i]->bytes);
  in_before[5] = read_bytes(queue, lse, lse_bytes);

  for (int run = 0; run < 2; ++run) {
    if (run == 1)
      for (int g = 0; g < 3; ++g) tu_buffer_repoison(queue, grads[g]->buffer, grads[g]->bytes);
    const double t_run = tu_now();
    st = fcl_attention_backward(ctx, &desc, &tq.t, &tk.t, &tv.t, &to.t, lse, &tdo.t,
                                &tdq.t, &tdk.t, &tdv.t);
    if (st != FCL_OK) {
      fail(&vd, " backward%s status %s: %s;", run ? " (second run)" : "",
           fcl_status_string(st), fcl_context_last_error(ctx));
      goto report;
    }
    if (tu_cl_check(clFinish(queue), "clFinish")) {
      fail(&vd, " backward clFinish failed;");
      goto report;
    }
    if (run == 0) t_bwd = tu_now() - t_run;
    if (run == 0) {
      for (int g = 0; g < 3; ++g)
        first_run[g] = read_bytes(queue, grads[g]->buffer, grads[g]->bytes);
      continue;
    }
    for (int g = 0; g < 3; ++g) {
      unsigned char *again = read_bytes(queue, grads[g]->buffer, grads[g]->bytes);
      if (!again || !first_run[g] || memcmp(again, first_run[g], grads[g]->bytes) != 0)
        fail(&vd, " %s differs between two backward runs (not deterministic);", gnames[g]);
      free(again);
    }
  }

  /* Gradients: values, poison outside the views. */
  ref_attention_backward_terms(&p, q, k, v, dout, o_got, dq_ro, dk_ro, dv_ro, mq, mk);
  const double *refs_o[3] = {dq_ro, dk_ro, dv_ro};
  /* dq and dk also allow 8 f32 roundings of their largest terms (as the
   * logits do in tu_tol_with_logits): where P is one-hot, dP - D cancels
   * and the gradient is rounding-sized, so a bound relative to max|ref|
   * alone held only while o equalled v bit for bit. */
  double mmax[3] = {0.0, 0.0, 0.0};
  for (size_t i = 0; i < nq; ++i) mmax[0] = fmax(mmax[0], mq[i]);
  for (size_t i = 0; i < nk; ++i) mmax[1] = fmax(mmax[1], mk[i]);
  double oterm_max = 0.0;
  for (int g = 0; g < 3; ++g) {
    size_t first_bad = 0;
    const long bad = tu_tensor_read(queue, grads[g], gots[g], &first_bad);
    if (bad < 0) {
      fail(&vd, " reading %s failed;", gnames[g]);
      continue;
    }
    if (bad > 0)
      fail(&vd, " %s: %ld bytes outside the view changed (first at byte %zu);", gnames[g],
           bad, first_bad);
    /* The backward's inputs include o: compare with the reference fed the
     * o it was given (the forward's, rounded to the dtype), no extra margin. */
    cg[g] = tu_compare(gots[g], refs_o[g], ns[g], (tu_tol){tol_g, 0.0, 8 * 0x1p-24 * mmax[g]}, 0);
    const double ot = o_term(refs[g], refs_o[g], ns[g], tol_g);
    if (ot > oterm_max) oterm_max = ot;
    const double ratio = cg[g].worst_ratio;
    double *w = &g_worst[c->dtype][g];
    if (!(ratio <= *w)) *w = ratio;
    if (!cg[g].ok) {
      const int64_t dims[4] = {bq, g ? sk_rows : sq_rows, g ? HK : HQ, g == 2 ? DV : D};
      fail(&vd, " %s mismatch;", gnames[g]);
      tu_print_cmp(gnames[g], &cg[g], dims, 4);
    }
  }
  /* Rows that see no key: dq exactly 0. Keys no query sees: dk, dv 0. */
  {
    size_t bad_rows = 0, bad_keys = 0;
    for (int64_t r = 0; r < rows_q; ++r)
      for (int64_t h = 0; h < HQ; ++h) {
        double lr;
        if (varlen) lr = l_ref[h * rows_q + r];
        else lr = l_ref[((r / SQ) * HQ + h) * SQ + r % SQ];
        if (!isinf(lr)) continue;
        ++empty_rows;
        for (int64_t e = 0; e < D; ++e)
          if (dq_got[(r * HQ + h) * D + e] != 0.0) {
            ++bad_rows;
            break;
          }
      }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t k0 = varlen ? cu_k[b] : b * SK;
      const int64_t sk = varlen ? cu_k[b + 1] - cu_k[b] : SK;
      for (int64_t j = 0; j < sk; ++j) {
        if (ref_attention_key_seen(&p, b, j)) continue;
        ++unseen_keys;
        int nz = 0;
        for (int64_t h = 0; h < HK; ++h) {
          for (int64_t e = 0; e < D; ++e) nz |= dk_got[((k0 + j) * HK + h) * D + e] != 0.0;
          for (int64_t e = 0; e < DV; ++e) nz |= dv_got[((k0 + j) * HK + h) * DV + e] != 0.0;
        }
        bad_keys += nz ? 1u : 0u;
      }
    }
    if (bad_rows)
      fail(&vd, " dq of %zu of %zu rows that see no key is not 0;", bad_rows, empty_rows);
    if (bad_keys)
      fail(&vd, " dk/dv of %zu of %zu keys no query sees are not 0;", bad_keys, unseen_keys);
  }
  /* Inputs untouched, including their padding. */
  for (int i = 0; i < 6; ++i) {
    const cl_mem buf = i < 5 ? ins[i]->buffer : lse;
    const size_t bytes = i < 5 ? ins[i]->bytes : lse_bytes;
    unsigned char *now = read_bytes(queue, buf, bytes);
    if (!now || !in_before[i] || memcmp(now, in_before[i], bytes) != 0)
      fail(&vd, " input %s was modified by the backward;", in_names[i]);
    free(now);
  }
  note(&vd, " err/tol dq %.0f%% dk %.0f%% dv %.0f%% (max|ref| %.3g %.3g %.3g)",
       100.0 * cg[0].worst_ratio, 100.0 * cg[1].worst_ratio, 100.0 * cg[2].worst_ratio,
       cg[0].ref_max, cg[1].ref_max, cg[2].ref_max);
  if (!(oterm_max <= g_oterm[c->dtype])) g_oterm[c->dtype] = oterm_max;
  if (oterm_max >= 0.1) note(&vd, " o-term %.0f%%", 100.0 * oterm_max);
  if (empty_rows) note(&vd, " empty rows %zu", empty_rows);
  if (unseen_keys) note(&vd, " unseen keys %zu", unseen_keys);
  note(&vd, " | fwd %.2f s, bwd %.2f s", t_fwd, t_bwd);

report:
  printf("%s %s |%s | %.2f s\n", vd.ok ? "PASS" : "FAIL", desc_text, vd.why, tu_now() - t0);
  fflush(stdout);
  if (!vd.ok) ++g_failed;

  for (int g = 0; g < 3; ++g) free(first_run[g]);
  for (int i = 0; i < 6; ++i) free(in_before[i]);
  tu_tensor_release(&tq); tu_tensor_release(&tk); tu_tensor_release(&tv);
  tu_tensor_release(&to); tu_tensor_release(&tdo);
  tu_tensor_release(&tdq); tu_tensor_release(&tdk); tu_tensor_release(&tdv);
  clReleaseMemObject(lse);
  if (alibi) clReleaseMemObject(alibi);
  if (cuq) clReleaseMemObject(cuq);
  if (cuk) clReleaseMemObject(cuk);
  free(q); free(k); free(v); free(dout); free(o_ref); free(o_got); free(l_ref); free(l_got);
  free(dq_ref); free(dk_ref); free(dv_ref); free(dq_got); free(dk_got); free(dv_got);
  free(dq_ro); free(dk_ro); free(dv_ro); free(mq); free(mk);
  return vd.ok;
}

/* ---- the cases --------------------------------------------------------------- */
#define F(...) {__VA_ARGS__}
#define ALL(l) .lq = l, .lk = l, .lv = l, .lo = l, .ldo = l, .ldq = l, .ldk = l, .ldv = l

/* Feature cases, run once per dtype with d = dv = 64. */
static const bwd_case feature_cases[] = {
  F(.name = "seqlen 1", .b = 1, .sq = 1, .sk = 1, .hq = 1, .hkv = 1),
  F(.name = "decode sq1 causal", .b = 2, .sq = 1, .sk = 17, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "odd 3x5", .b = 2, .sq = 3, .sk = 5, .hq = 3, .hkv = 3),
  F(.name = "odd 17 causal", .b = 1, .sq = 17, .sk = 17, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "sq<sk 63x65", .b = 1, .sq = 63, .sk = 65, .hq = 2, .hkv = 2),
  F(.name = "sq>sk causal 65x63", .b = 1, .sq = 65, .sk = 63, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "sq>sk causal 150x70 empty rows", .b = 2, .sq = 150, .sk = 70, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "sq<sk causal 100x230", .b = 1, .sq = 100, .sk = 230, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "127 batch 2", .b = 2, .sq = 127, .sk = 127, .hq = 2, .hkv = 2),
  F(.name = "window left causal", .b = 1, .sq = 200, .sk = 200, .hq = 1, .hkv = 1, .causal = 1, .win = 1, .wl = 17, .wr = -1),
  F(.name = "window right", .b = 1, .sq = 127, .sk = 127, .hq = 2, .hkv = 2, .win = 1, .wl = -1, .wr = 5),
  F(.name = "window both sq<sk", .b = 1, .sq = 150, .sk = 170, .hq = 1, .hkv = 1, .win = 1, .wl = 32, .wr = 7),
  F(.name = "window sq>sk empty rows", .b = 1, .sq = 90, .sk = 40, .hq = 2, .hkv = 2, .win = 1, .wl = 5, .wr = 5),
  F(.name = "window causal unseen keys", .b = 1, .sq = 40, .sk = 150, .hq = 2, .hkv = 1, .causal = 1, .win = 1, .wl = 20, .wr = -1),
  F(.name = "window diagonal only", .b = 1, .sq = 65, .sk = 65, .hq = 2, .hkv = 2, .win = 1, .wl = 0, .wr = 0),
  F(.name = "negative scale softcap", .b = 1, .sq = 40, .sk = 50, .hq = 2, .hkv = 1, .scale = -0.3f, .softcap = 2.0f),
  F(.name = "softcap", .b = 1, .sq = 70, .sk = 90, .hq = 2, .hkv = 2, .softcap = 2.0f),
  F(.name = "softcap scale causal", .b = 1, .sq = 100, .sk = 100, .hq = 1, .hkv = 1, .softcap = 5.0f, .scale = 0.5f, .causal = 1),
  F(.name = "alibi", .b = 1, .sq = 97, .sk = 97, .hq = 4, .hkv = 4, .alibi = 1),
  F(.name = "alibi causal sq<sk GQA", .b = 1, .sq = 70, .sk = 150, .hq = 4, .hkv = 2, .alibi = 1, .causal = 1),
  F(.name = "alibi softcap window", .b = 1, .sq = 80, .sk = 120, .hq = 2, .hkv = 2, .alibi = 1, .softcap = 3.0f, .win = 1, .wl = 20, .wr = 10),
  F(.name = "GQA 6/2", .b = 1, .sq = 50, .sk = 77, .hq = 6, .hkv = 2),
  F(.name = "GQA 8/4 causal", .b = 1, .sq = 65, .sk = 65, .hq = 8, .hkv = 4, .causal = 1),
  F(.name = "MQA 5/1", .b = 2, .sq = 33, .sk = 129, .hq = 5, .hkv = 1),
  F(.name = "varlen empty seqs", .nseq = 4, .lens_q = {17, 0, 65, 3}, .lens_k = {17, 5, 100, 0}, .hq = 2, .hkv = 2),
  F(.name = "varlen causal GQA", .nseq = 4, .lens_q = {1, 40, 0, 70}, .lens_k = {30, 40, 12, 64}, .hq = 4, .hkv = 2, .causal = 1),
  F(.name = "varlen window alibi", .nseq = 3, .lens_q = {33, 64, 1}, .lens_k = {40, 64, 129}, .hq = 4, .hkv = 2, .win = 1, .wl = 16, .wr = 4, .alibi = 1),
  F(.name = "bhsd", .b = 2, .sq = 70, .sk = 90, .hq = 3, .hkv = 3, ALL(TU_BHSD)),
  F(.name = "padded offset", .b = 2, .sq = 45, .sk = 60, .hq = 2, .hkv = 2, ALL(TU_PADDED), .off = 7),
  F(.name = "mixed layouts offset", .b = 2, .sq = 33, .sk = 66, .hq = 4, .hkv = 2, .causal = 1, .lq = TU_BSHD, .lk = TU_BHSD, .lv = TU_PADDED, .lo = TU_PADDED_BHSD, .ldo = TU_BHSD, .ldq = TU_PADDED, .ldk = TU_PADDED_BHSD, .ldv = TU_SBHD, .off = 3),
  F(.name = "varlen layouts offset", .nseq = 3, .lens_q = {20, 67, 5}, .lens_k = {0, 70, 9}, .hq = 2, .hkv = 1, .causal = 1, .lq = TU_BHSD, .lk = TU_PADDED, .lv = TU_PADDED_BHSD, .lo = TU_PADDED, .ldo = TU_PADDED_BHSD, .ldq = TU_PADDED_BHSD, .ldk = TU_BHSD, .ldv = TU_PADDED, .off = 5),
  F(.name = "large logits", .b = 1, .sq = 65, .sk = 65, .hq = 1, .hkv = 1, .amp = 4.0, .scale = 0.5f),
  /* Long ranges: on llvmpipe these take the split paths without any
   * FCL_LOOP_BUDGET (dQ over 3001 keys; dK/dV over 2 x 1600 queries). */
  F(.name = "long keys decode causal", .b = 1, .sq = 3, .sk = 3001, .hq = 2, .hkv = 1, .causal = 1),
  F(.name = "long queries GQA", .b = 1, .sq = 1600, .sk = 20, .hq = 2, .hkv = 1),
};

/* Head dims, each with one dtype and some feature: every (dtype, d, dv)
 * compiles a forward and a backward program, so the list is short. */
static const bwd_case headdim_cases[] = {
  F(.name = "head dim 1", .dtype = FCL_F32, .d = 1, .dv = 1, .b = 1, .sq = 37, .sk = 45, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "head dims 7/40 window GQA", .dtype = FCL_F16, .d = 7, .dv = 40, .b = 1, .sq = 50, .sk = 50, .hq = 2, .hkv = 1, .win = 1, .wl = 8, .wr = 2),
  F(.name = "head dim 40 softcap", .dtype = FCL_BF16, .d = 40, .dv = 40, .b = 1, .sq = 63, .sk = 80, .hq = 2, .hkv = 2, .softcap = 4.0f),
  F(.name = "head dim 80 alibi causal", .dtype = FCL_F32, .d = 80, .dv = 80, .b = 1, .sq = 66, .sk = 66, .hq = 3, .hkv = 3, .alibi = 1, .causal = 1),
  F(.name = "head dim 128 sq>sk causal", .dtype = FCL_F16, .d = 128, .dv = 128, .b = 1, .sq = 70, .sk = 50, .hq = 2, .hkv = 1, .causal = 1),
  F(.name = "head dim 256 bhsd", .dtype = FCL_BF16, .d = 256, .dv = 256, .b = 1, .sq = 40, .sk = 65, .hq = 2, .hkv = 2, ALL(TU_BHSD)),
  F(.name = "head dims 128/64 padded GQA", .dtype = FCL_BF16, .d = 128, .dv = 64, .b = 1, .sq = 45, .sk = 65, .hq = 4, .hkv = 2, ALL(TU_PADDED), .off = 2),
  F(.name = "head dims 80/256 softcap varlen", .dtype = FCL_F32, .d = 80, .dv = 256, .nseq = 3, .lens_q = {30, 1, 0}, .lens_k = {70, 0, 20}, .hq = 2, .hkv = 2, .causal = 1, .softcap = 3.0f),
  F(.name = "head dim 512", .dtype = FCL_F32, .d = 512, .dv = 512, .b = 1, .sq = 33, .sk = 70, .hq = 1, .hkv = 1, .causal = 1),
  /* More of the same (dtype, d, dv): nothing new to compile. */
  F(.name = "head dims 7/40 varlen MQA", .dtype = FCL_F16, .d = 7, .dv = 40, .nseq = 2, .lens_q = {5, 60}, .lens_k = {9, 61}, .hq = 3, .hkv = 1),
  F(.name = "head dim 256 alibi sq>sk", .dtype = FCL_BF16, .d = 256, .dv = 256, .b = 2, .sq = 50, .sk = 40, .hq = 2, .hkv = 1, .alibi = 1, .causal = 1),
  F(.name = "head dim 1 window varlen", .dtype = FCL_F32, .d = 1, .dv = 1, .nseq = 3, .lens_q = {40, 0, 7}, .lens_k = {33, 9, 70}, .hq = 2, .hkv = 1, .win = 1, .wl = 3, .wr = 9),
  F(.name = "head dim 512 window sq<sk", .dtype = FCL_F32, .d = 512, .dv = 512, .b = 1, .sq = 20, .sk = 200, .hq = 2, .hkv = 1, .win = 1, .wl = 100, .wr = 0),
};

/* The (dtype, d, dv) triples the random batch draws from: those above up
 * to 256 (so it compiles nothing new; 512 is slow on llvmpipe), plus d64
 * in each dtype. */
static void pick_triple(tu_rng *r, bwd_case *c) {
  const int n_fixed = (int)(sizeof headdim_cases / sizeof headdim_cases[0]);
  do {
    const int pick = (int)tu_rng_int(r, 0, n_fixed + 2);
    if (pick < n_fixed) {
      c->dtype = headdim_cases[pick].dtype;
      c->d = headdim_cases[pick].d;
      c->dv = headdim_cases[pick].dv;
    } else {
      c->dtype = (fcl_dtype)(pick - n_fixed);
      c->d = c->dv = 64;
    }
  } while (c->d > 256 || c->dv > 256);
}

static void random_case(tu_rng *r, bwd_case *c, char *name, size_t name_len, int idx) {
  memset(c, 0, sizeof *c);
  pick_triple(r, c);
  /* llvmpipe is slow at wide heads: keep those problems small. */
  const int wide = c->d >= 256 || c->dv >= 256;
  const int64_t big = wide ? 40 : (c->d > 64 || c->dv > 64) ? 70 : 150;
  static const int64_t edge[] = {1, 2, 3, 17, 31, 63, 64, 65, 127, 128, 129};
  for (int t = 0; t < 2; ++t) {
    int64_t len = tu_rng_int(r, 0, 2) == 0 ? edge[tu_rng_int(r, 0, 10)] : tu_rng_int(r, 1, big);
    if (len > big) len = big;
    if (t == 0) c->sq = len; else c->sk = len;
  }
  c->hkv = tu_rng_int(r, 1, 3);
  c->hq = c->hkv * tu_rng_int(r, 1, 3);
  c->b = tu_rng_int(r, 1, wide ? 2 : 3);
  c->causal = (int)tu_rng_int(r, 0, 1);
  if (tu_rng_int(r, 0, 2) == 0) {
    c->win = 1;
    c->wl = tu_rng_int(r, 0, 2) ? tu_rng_int(r, 0, 40) : -1;
    c->wr = tu_rng_int(r, 0, 2) ? tu_rng_int(r, 0, 40) : -1;
  }
  if (tu_rng_int(r, 0, 3) == 0) c->softcap = (float)tu_rng_range(r, 1.0, 20.0);
  c->alibi = tu_rng_int(r, 0, 3) == 0;
  if (tu_rng_int(r, 0, 2) == 0)
    c->scale = (float)(tu_rng_range(r, 0.3, 3.0) / sqrt((double)c->d));
  if (tu_rng_int(r, 0, 2) == 0) { /* varlen */
    c->nseq = (int)tu_rng_int(r, 1, 4);
    int any_q = 0, any_k = 0;
    for (int i = 0; i < c->nseq; ++i) {
      c->lens_q[i] = tu_rng_int(r, 0, 5) == 0 ? 0 : (int32_t)tu_rng_int(r, 1, big);
      c->lens_k[i] = tu_rng_int(r, 0, 5) == 0 ? 0 : (int32_t)tu_rng_int(r, 1, big);
      any_q |= c->lens_q[i] > 0;
      any_k |= c->lens_k[i] > 0;
    }
    if (!any_q) c->lens_q[0] = 1;
    if (!any_k) c->lens_k[c->nseq - 1] = 1;
  }
  tu_layout *ls[8] = {&c->lq, &c->lk, &c->lv, &c->lo, &c->ldo, &c->ldq, &c->ldk, &c->ldv};
  for (int i = 0; i < 8; ++i) *ls[i] = (tu_layout)tu_rng_int(r, 0, TU_LAYOUT_COUNT - 1);
  c->off = tu_rng_int(r, 0, 1) ? (size_t)tu_rng_int(r, 1, 13) : 0;
  snprintf(name, name_len, "random #%d", idx);
  c->name = name;
}

/* Run with FCL_LOOP_BUDGET=6000: with it every dQ work-group walks one or a
 * few key tiles and every dK/dV work-group a few query tiles, so the
 * partial sums and their final pass are used (the forward splits too). The
 * triples are among those above. */
static const bwd_case split_cases[] = {
  F(.name = "split causal sq<sk GQA", .dtype = FCL_F32, .d = 64, .dv = 64, .b = 2, .sq = 100, .sk = 170, .hq = 4, .hkv = 2, .causal = 1),
  F(.name = "split varlen empty window", .dtype = FCL_F16, .d = 64, .dv = 64, .nseq = 4, .lens_q = {70, 0, 130, 5}, .lens_k = {90, 40, 129, 0}, .hq = 2, .hkv = 1, .win = 1, .wl = 50, .wr = 20),
  F(.name = "split sq>sk alibi softcap", .dtype = FCL_BF16, .d = 64, .dv = 64, .b = 1, .sq = 200, .sk = 97, .hq = 3, .hkv = 1, .causal = 1, .alibi = 1, .softcap = 4.0f),
  F(.name = "split d7/40 varlen", .dtype = FCL_F16, .d = 7, .dv = 40, .nseq = 3, .lens_q = {150, 1, 260}, .lens_k = {300, 65, 255}, .hq = 3, .hkv = 1, .causal = 1),
  F(.name = "split d128/64 padded", .dtype = FCL_BF16, .d = 128, .dv = 64, .b = 1, .sq = 130, .sk = 99, .hq = 4, .hkv = 2, ALL(TU_PADDED), .off = 3),
  F(.name = "split d1 MQA mixed layouts", .dtype = FCL_F32, .d = 1, .dv = 1, .b = 2, .sq = 190, .sk = 250, .hq = 4, .hkv = 1, .lq = TU_BHSD, .lk = TU_SBHD, .lv = TU_PADDED, .lo = TU_PADDED_BHSD, .ldo = TU_PADDED, .ldq = TU_SBHD, .ldk = TU_PADDED, .ldv = TU_BHSD, .off = 4),
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

static int selected(const char *name, const char *filter) {
  return !filter || !*filter || strstr(name, filter) != NULL;
}

static fcl_context *make_context(void) {
  fcl_context *ctx = NULL;
  const fcl_status st = fcl_context_create(NULL, &ctx);
  if (st != FCL_OK) {
    printf("FAIL: fcl_context_create(NULL) with FCL_DEVICE=%s: %s: %s\n",
           getenv("FCL_DEVICE") ? getenv("FCL_DEVICE") : "(unset)", fcl_status_string(st),
           fcl_context_last_error(NULL));
    exit(1);
  }
  return ctx;
}

static void print_stats(fcl_context *ctx) {
  fcl_context_stats stats = {0, 0, 0};
  fcl_context_get_stats(ctx, &stats);
  printf("programs built %d, from cache %d, cache writes %d\n", stats.programs_built,
         stats.programs_from_cache, stats.cache_writes);
}

int main(void) {
  const double t_start = tu_now();
  fcl_context *ctx = make_context();
  printf("device: %s\n", fcl_context_device_name(ctx));
  const char *filter = getenv("FCL_TEST_FILTER");
  const char *seed_env = getenv("FCL_TEST_SEED");
  const uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 20240602u;
  uint64_t case_seed = 1;
  double t_phase = tu_now();

  const fcl_dtype dtypes[3] = {FCL_F32, FCL_F16, FCL_BF16};
  for (size_t i = 0; i < sizeof feature_cases / sizeof feature_cases[0]; ++i)
    for (int t = 0; t < 3; ++t) {
      bwd_case c = feature_cases[i];
      c.dtype = dtypes[t];
      if (!c.d) c.d = c.dv = 64;
      ++case_seed;
      if (selected(c.name, filter)) run_case(ctx, &c, case_seed * 7919u);
    }
  printf("-- feature cases: %.1f s\n", tu_now() - t_phase);
  t_phase = tu_now();
  for (size_t i = 0; i < sizeof headdim_cases / sizeof headdim_cases[0]; ++i) {
    ++case_seed;
    if (selected(headdim_cases[i].name, filter))
      run_case(ctx, &headdim_cases[i], case_seed * 7919u);
  }
  printf("-- head dim cases: %.1f s\n", tu_now() - t_phase);
  t_phase = tu_now();
  printf("random batch: seed %llu (set FCL_TEST_SEED to change)\n", (unsigned long long)seed);
  tu_rng rng;
  tu_rng_seed(&rng, seed);
  for (int i = 0; i < 25; ++i) {
    bwd_case c;
    char name[32];
    random_case(&rng, &c, name, sizeof name, i);
    const uint64_t s = tu_rng_next(&rng);
    if (selected(c.name, filter)) run_case(ctx, &c, s);
  }
  printf("-- random cases: %.1f s\n", tu_now() - t_phase);
  t_phase = tu_now();
  if (selected("bad input", filter)) bad_input_tests(ctx);
  printf("-- bad input: %.1f s\n", tu_now() - t_phase);
  print_stats(ctx);
  fcl_context_destroy(ctx);

  /* The split paths: a second context that reads FCL_LOOP_BUDGET. */
  t_phase = tu_now();
  int any_split = 0;
  for (size_t i = 0; i < sizeof split_cases / sizeof split_cases[0]; ++i)
    any_split |= selected(split_cases[i].name, filter);
  if (any_split) {
    setenv("FCL_LOOP_BUDGET", "6000", 1);
    ctx = make_context();
    printf("split pass: FCL_LOOP_BUDGET=6000\n");
    for (size_t i = 0; i < sizeof split_cases / sizeof split_cases[0]; ++i) {
      ++case_seed;
      if (selected(split_cases[i].name, filter))
        run_case(ctx, &split_cases[i], case_seed * 7919u);
    }
    print_stats(ctx);
    fcl_context_destroy(ctx);
    printf("-- split pass: %.1f s\n", tu_now() - t_phase);
  }

  printf("worst err/tol (dq dk dv): f32 %.0f%% %.0f%% %.0f%% (tol %g), f16 %.0f%% %.0f%% %.0f%% "
         "(tol %g), bf16 %.0f%% %.0f%% %.0f%% (tol %g)\n",
         100 * g_worst[0][0], 100 * g_worst[0][1], 100 * g_worst[0][2], grad_tol(FCL_F32),
         100 * g_worst[1][0], 100 * g_worst[1][1], 100 * g_worst[1][2], grad_tol(FCL_F16),
         100 * g_worst[2][0], 100 * g_worst[2][1], 100 * g_worst[2][2], grad_tol(FCL_BF16));
  printf("largest share of the tolerance from the forward's stored o (o-term): f32 %.0f%%, "
         "f16 %.0f%%, bf16 %.0f%%\n", 100 * g_oterm[0], 100 * g_oterm[1], 100 * g_oterm[2]);
  printf("test_attention_backward: %d cases, %d failed; bad input %d checks, %d failed; %.1f s\n",
         g_run, g_failed, g_bad_run, g_bad_failed, tu_now() - t_start);
  return g_failed || g_bad_failed || (g_run == 0 && g_bad_run == 0) ? 1 : 0;
}
