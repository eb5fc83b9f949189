/* fcl_attention_forward against the double reference on $FCL_DEVICE:
 * edge shapes, masks, softcap, ALiBi, GQA/MQA, varlen, layouts, head dims,
 * every dtype, and a seeded batch of random combinations. Inputs are
 * rounded to the dtype before the reference sees them. Each case also
 * checks that bytes outside the output view stay poison, that the inputs
 * are untouched and that a row seeing no key gives exactly 0 and -inf.
 *
 * Environment: FCL_DEVICE (device selector), FCL_TEST_SEED (random batch),
 * FCL_TEST_FILTER (run only cases whose name contains it; for debugging). */
#include "flashcl.h"
#include "ref_attention.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQS 8

typedef struct {
  const char *name;
  fcl_dtype   dtype;
  int64_t     b, sq, sk, hq, hkv, d, dv;
  float       scale;  /* 0: default */
  int         causal;
  int         win;    /* 0: no window (-1, -1); 1: use wl, wr */
  int64_t     wl, wr;
  float       softcap;
  int         alibi;
  int         nseq;   /* > 0: varlen with these lengths */
  int32_t     lens_q[MAX_SEQS], lens_k[MAX_SEQS];
  tu_layout   lq, lk, lv, lo;
  size_t      off;    /* > 0: q, k, v, o start off, off+1, off+2, off+3 elements in */
  int         no_lse;
  double      amp;    /* q, k uniform in [-amp, amp]; 0 -> 2.5 */
  int         junk_stride0; /* varlen: strides[0] of every tensor is garbage */
} fwd_case;

static int g_run = 0, g_failed = 0;

static int64_t i64max(int64_t a, int64_t b) { return a > b ? a : b; }

static void describe(const fwd_case *c, char *buf, size_t n) {
  int p = snprintf(buf, n, "%-4s %s | ", tu_dtype_name(c->dtype), c->name);
  if (c->nseq) {
    p += snprintf(buf + p, n - (size_t)p, "varlen");
    for (int i = 0; i < c->nseq; ++i)
      p += snprintf(buf + p, n - (size_t)p, "%s%d/%d", i ? "," : " q/k ", c->lens_q[i],
                    c->lens_k[i]);
  } else {
    p += snprintf(buf + p, n - (size_t)p, "b%lld sq%lld sk%lld", (long long)c->b,
                  (long long)c->sq, (long long)c->sk);
  }
  p += snprintf(buf + p, n - (size_t)p, " h%lld/%lld d%lld/%lld", (long long)c->hq,
                (long long)c->hkv, (long long)c->d, (long long)c->dv);
  if (c->causal) p += snprintf(buf + p, n - (size_t)p, " causal");
  if (c->win)
    p += snprintf(buf + p, n - (size_t)p, " win(%lld,%lld)", (long long)c->wl,
                  (long long)c->wr);
  if (c->softcap > 0) p += snprintf(buf + p, n - (size_t)p, " cap%g", c->softcap);
  if (c->alibi) p += snprintf(buf + p, n - (size_t)p, " alibi");
  if (c->scale != 0) p += snprintf(buf + p, n - (size_t)p, " scale%g", c->scale);
  if (c->lq || c->lk || c->lv || c->lo)
    p += snprintf(buf + p, n - (size_t)p, " %s/%s/%s/%s", tu_layout_name(c->lq),
                  tu_layout_name(c->lk), tu_layout_name(c->lv), tu_layout_name(c->lo));
  if (c->off) p += snprintf(buf + p, n - (size_t)p, " off%zu", c->off);
  if (c->no_lse) p += snprintf(buf + p, n - (size_t)p, " lse=NULL");
  if (c->junk_stride0) snprintf(buf + p, n - (size_t)p, " junk-strides[0]");
}

static size_t tail_for(tu_layout l, size_t off) {
  return (l == TU_BSHD || l == TU_BHSD) && off == 0 ? 0 : 7; /* exact fit, or slack */
}

/* Runs one case; returns 1 on pass. Never skips. */
static int run_case(fcl_context *ctx, const fwd_case *c, uint64_t seed) {
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue queue = fcl_context_queue(ctx);
  char desc_text[512];
  describe(c, desc_text, sizeof desc_text);
  const double t0 = tu_now();
  ++g_run;

  const int varlen = c->nseq > 0;
  int32_t cu_q[MAX_SEQS + 1] = {0}, cu_k[MAX_SEQS + 1] = {0};
  int64_t B = c->b, SQ = c->sq, SK = c->sk; /* desc values */
  int64_t rows_q, rows_k;                   /* dense leading extent: b*s or tokens */
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

  double *q = malloc(8 * nq), *k = malloc(8 * nk), *v = malloc(8 * nv);
  double *o_ref = malloc(8 * no), *o_got = malloc(8 * no);
  double *l_ref = malloc(8 * nl), *l_got = malloc(8 * nl);
  double *scratch = malloc(8 * (nq > nk ? (nq > nv ? nq : nv) : (nk > nv ? nk : nv)));
  double slopes[64];
  float slopes_f[64];
  if (!q || !k || !v || !o_ref || !o_got || !l_ref || !l_got || !scratch) abort();

  tu_rng rng;
  tu_rng_seed(&rng, seed);
  const double amp = c->amp > 0 ? c->amp : 2.5;
  tu_fill_uniform(&rng, q, nq, -amp, amp);
  tu_fill_uniform(&rng, k, nk, -amp, amp);
  tu_fill_uniform(&rng, v, nv, -1.0, 1.0);
  tu_round_array(q, nq, c->dtype);
  tu_round_array(k, nk, c->dtype);
  tu_round_array(v, nv, c->dtype);
  for (int64_t h = 0; h < HQ && h < 64; ++h) { /* the usual ALiBi slopes, as f32 */
    slopes_f[h] = (float)pow(2.0, -8.0 * (double)(h + 1) / (double)HQ);
    slopes[h] = slopes_f[h];
  }

  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B; p.seqlen_q = SQ; p.seqlen_k = SK; p.heads_q = HQ; p.heads_kv = HK;
  p.head_dim = D; p.head_dim_v = DV;
  p.softmax_scale = (double)c->scale; /* exactly what the float desc holds */
  p.causal = c->causal;
  p.window_left = c->win ? c->wl : -1;
  p.window_right = c->win ? c->wr : -1;
  p.softcap = (double)c->softcap;
  p.alibi_slopes = c->alibi ? slopes : NULL;
  p.cu_seqlens_q = varlen ? cu_q : NULL;
  p.cu_seqlens_k = varlen ? cu_k : NULL;
  ref_attention_forward(&p, q, k, v, o_ref, l_ref);
  const double logit_bound = ref_attention_logit_bound(&p, q, k);
  double vmax = 0.0;
  for (size_t e = 0; e < nv; ++e) vmax = fabs(v[e]) > vmax ? fabs(v[e]) : vmax;
  const tu_tol tol_o = tu_tol_with_logits(tu_tol_output(c->dtype), logit_bound, D, vmax);
  const tu_tol tol_l = tu_tol_with_logits(tu_tol_lse(), logit_bound, D, 0.0);

  /* Device side. */
  int ok = 1;
  char why[1024] = "";
  int wp = 0;
#define WHY(...)                                                                   \
  do {                                                                             \
    ok = 0;                                                                        \
    if (wp < (int)sizeof why - 1)                                                  \
      wp += snprintf(why + wp, sizeof why - (size_t)wp, __VA_ARGS__);             \
  } while (0)
  tu_tensor tq, tk, tv, to;
  const int64_t bq = varlen ? 1 : B, sq_rows = varlen ? rows_q : SQ;
  const int64_t sk_rows = varlen ? rows_k : SK;
  const size_t oq = c->off, ok_ = c->off ? c->off + 1 : 0, ov = c->off ? c->off + 2 : 0,
               oo = c->off ? c->off + 3 : 0;
  if (tu_tensor_create(cl, queue, q, bq, sq_rows, HQ, D, c->dtype, c->lq, oq,
                       tail_for(c->lq, oq), &tq) ||
      tu_tensor_create(cl, queue, k, bq, sk_rows, HK, D, c->dtype, c->lk, ok_,
                       tail_for(c->lk, ok_), &tk) ||
      tu_tensor_create(cl, queue, v, bq, sk_rows, HK, DV, c->dtype, c->lv, ov,
                       tail_for(c->lv, ov), &tv) ||
      /* o always has a guard of one token row plus some: a write past the
       * view lands in poison and is reported instead of corrupting memory.
       * (test_bad_input checks that exact-fit buffers are accepted.) */
      tu_tensor_create(cl, queue, NULL, bq, sq_rows, HQ, DV, c->dtype, c->lo, oo,
                       (size_t)(HQ * DV) + 7, &to)) {
    printf("FAIL %s | could not create buffers\n", desc_text);
    ++g_failed;
    exit(1);
  }
  if (c->junk_stride0) {
    tq.t.strides[0] = tk.t.strides[0] = tv.t.strides[0] = to.t.strides[0] = (int64_t)1 << 30;
  }
  const size_t lse_tail = 16;
  cl_mem lse = c->no_lse ? NULL : tu_buffer_poison(cl, queue, nl * 4 + lse_tail);
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

  const fcl_status st = fcl_attention_forward(ctx, &desc, &tq.t, &tk.t, &tv.t, &to.t, lse);
  if (st != FCL_OK) {
    WHY(" status %s: %s;", fcl_status_string(st), fcl_context_last_error(ctx));
  } else if (tu_cl_check(clFinish(queue), "clFinish")) {
    WHY(" clFinish failed;");
  } else {
    size_t first_bad = 0;
    const long bad_o = tu_tensor_read(queue, &to, o_got, &first_bad);
    if (bad_o != 0)
      WHY(" o: %ld bytes outside the view changed (first at byte %zu);", bad_o, first_bad);
    /* Output comparison. */
    const int64_t odims[4] = {bq, sq_rows, HQ, DV};
    tu_cmp co = tu_compare(o_got, o_ref, no, tol_o, 0);
    if (!co.ok) {
      WHY(" o mismatch;");
      tu_print_cmp("o", &co, odims, 4);
    }
    /* Rows that see no key: exactly 0 (any sign). */
    size_t empty_rows = 0, empty_bad = 0;
    for (int64_t r = 0; r < rows_q; ++r)
      for (int64_t h = 0; h < HQ; ++h) {
        double lr;
        if (varlen) {
          lr = l_ref[h * rows_q + r];
        } else {
          const int64_t b = r / SQ, i = r % SQ;
          lr = l_ref[(b * HQ + h) * SQ + i];
        }
        if (!isinf(lr)) continue;
        ++empty_rows;
        for (int64_t e = 0; e < DV; ++e)
          if (o_got[(r * HQ + h) * DV + e] != 0.0) {
            ++empty_bad;
            break;
          }
      }
    if (empty_bad) WHY(" %zu of %zu rows that see no key are not 0;", empty_bad, empty_rows);
    tu_cmp cl_ = {0};
    cl_.ok = 1;
    if (lse) {
      long bad_tail = 0;
      if (tu_buffer_read_f32(queue, lse, l_got, nl, lse_tail, &bad_tail)) {
        WHY(" lse read failed;");
      } else {
        if (bad_tail) WHY(" lse: %ld bytes past [%zu] written;", bad_tail, nl);
        const int64_t ldims_dense[3] = {B, HQ, SQ}, ldims_var[2] = {HQ, rows_q};
        cl_ = tu_compare(l_got, l_ref, nl, tol_l, 1);
        if (!cl_.ok) {
          WHY(" lse mismatch;");
          if (varlen) tu_print_cmp("lse", &cl_, ldims_var, 2);
          else tu_print_cmp("lse", &cl_, ldims_dense, 3);
        }
      }
    }
    /* Inputs untouched, including their padding. */
    const tu_tensor *ins[3] = {&tq, &tk, &tv};
    const double *vals[3] = {q, k, v};
    const size_t ns[3] = {nq, nk, nv};
    const char *names[3] = {"q", "k", "v"};
    for (int t = 0; t < 3; ++t) {
      const long bad = tu_tensor_read(queue, ins[t], scratch, &first_bad);
      int changed = bad != 0;
      for (size_t e = 0; e < ns[t] && !changed; ++e)
        changed = memcmp(&scratch[e], &vals[t][e], sizeof(double)) != 0;
      if (changed) WHY(" input %s was modified;", names[t]);
    }
    {
      char errs[160];
      snprintf(errs, sizeof errs, "o err %.2e (%.0f%% of tol; max|o| %.2f, |s|<=%.3g)%s",
               co.max_err, 100.0 * co.worst_ratio, co.ref_max, logit_bound,
               lse ? "" : " lse none");
      if (lse)
        snprintf(errs + strlen(errs), sizeof errs - strlen(errs), " lse err %.2e (%.0f%%)",
                 cl_.max_err, 100.0 * cl_.worst_ratio);
      if (empty_rows)
        snprintf(errs + strlen(errs), sizeof errs - strlen(errs), " empty rows %zu", empty_rows);
      if (wp < (int)sizeof why - 1) snprintf(why + wp, sizeof why - (size_t)wp, " %s", errs);
    }
  }
  printf("%s %s |%s | %.2f s\n", ok ? "PASS" : "FAIL", desc_text, why, tu_now() - t0);
  fflush(stdout);
  if (!ok) ++g_failed;
#undef WHY

  tu_tensor_release(&tq); tu_tensor_release(&tk); tu_tensor_release(&tv);
  tu_tensor_release(&to);
  if (lse) clReleaseMemObject(lse);
  if (alibi) clReleaseMemObject(alibi);
  if (cuq) clReleaseMemObject(cuq);
  if (cuk) clReleaseMemObject(cuk);
  free(q); free(k); free(v); free(o_ref); free(o_got); free(l_ref); free(l_got);
  free(scratch);
  return ok;
}

/* ---- the cases --------------------------------------------------------------- */
/* Feature cases, run once per dtype; d = dv = 64 unless given. */
#define F(...) {__VA_ARGS__}
static const fwd_case feature_cases[] = {
  F(.name = "seqlen 1", .b = 1, .sq = 1, .sk = 1, .hq = 1, .hkv = 1),
  F(.name = "decode sq1 causal", .b = 2, .sq = 1, .sk = 17, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "odd 3x3", .b = 2, .sq = 3, .sk = 3, .hq = 3, .hkv = 3),
  F(.name = "odd 17 causal", .b = 1, .sq = 17, .sk = 17, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "sq<sk 63x65", .b = 1, .sq = 63, .sk = 65, .hq = 2, .hkv = 2),
  F(.name = "sq>sk causal 65x63", .b = 1, .sq = 65, .sk = 63, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "127 batch 2", .b = 2, .sq = 127, .sk = 127, .hq = 2, .hkv = 2),
  F(.name = "sq<sk causal 200x333", .b = 1, .sq = 200, .sk = 333, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "sq>sk causal 333x200", .b = 1, .sq = 333, .sk = 200, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "333 non-causal", .b = 1, .sq = 333, .sk = 333, .hq = 1, .hkv = 1),
  F(.name = "window left", .b = 1, .sq = 200, .sk = 200, .hq = 1, .hkv = 1, .win = 1, .wl = 17, .wr = -1),
  F(.name = "window right", .b = 1, .sq = 127, .sk = 127, .hq = 2, .hkv = 2, .win = 1, .wl = -1, .wr = 5),
  F(.name = "window both sq<sk", .b = 1, .sq = 150, .sk = 170, .hq = 1, .hkv = 1, .win = 1, .wl = 32, .wr = 7),
  F(.name = "window left causal", .b = 1, .sq = 200, .sk = 200, .hq = 1, .hkv = 1, .causal = 1, .win = 1, .wl = 40, .wr = -1),
  F(.name = "window both causal", .b = 2, .sq = 100, .sk = 130, .hq = 1, .hkv = 1, .causal = 1, .win = 1, .wl = 9, .wr = 3),
  F(.name = "window right causal", .b = 1, .sq = 65, .sk = 65, .hq = 2, .hkv = 2, .causal = 1, .win = 1, .wl = -1, .wr = 10),
  F(.name = "window diagonal only", .b = 1, .sq = 65, .sk = 65, .hq = 2, .hkv = 2, .win = 1, .wl = 0, .wr = 0),
  F(.name = "window sq>sk empty rows", .b = 1, .sq = 90, .sk = 40, .hq = 2, .hkv = 2, .win = 1, .wl = 5, .wr = 5),
  F(.name = "softcap", .b = 1, .sq = 70, .sk = 90, .hq = 2, .hkv = 2, .softcap = 2.0f),
  F(.name = "softcap scale causal", .b = 1, .sq = 100, .sk = 100, .hq = 1, .hkv = 1, .softcap = 5.0f, .scale = 0.5f, .causal = 1),
  F(.name = "alibi", .b = 1, .sq = 97, .sk = 97, .hq = 4, .hkv = 4, .alibi = 1),
  F(.name = "alibi causal sq<sk", .b = 1, .sq = 70, .sk = 150, .hq = 4, .hkv = 2, .alibi = 1, .causal = 1),
  F(.name = "alibi sq>sk", .b = 1, .sq = 90, .sk = 31, .hq = 2, .hkv = 2, .alibi = 1),
  F(.name = "alibi softcap window", .b = 1, .sq = 80, .sk = 120, .hq = 2, .hkv = 2, .alibi = 1, .softcap = 3.0f, .win = 1, .wl = 20, .wr = 10),
  F(.name = "GQA 6/2", .b = 1, .sq = 50, .sk = 77, .hq = 6, .hkv = 2),
  F(.name = "GQA 8/4 causal", .b = 1, .sq = 65, .sk = 65, .hq = 8, .hkv = 4, .causal = 1),
  F(.name = "MQA 5/1", .b = 2, .sq = 33, .sk = 129, .hq = 5, .hkv = 1),
  F(.name = "varlen", .nseq = 4, .lens_q = {17, 0, 65, 3}, .lens_k = {17, 5, 100, 0}, .hq = 2, .hkv = 2),
  F(.name = "varlen causal", .nseq = 4, .lens_q = {1, 40, 0, 70}, .lens_k = {30, 40, 12, 64}, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "varlen GQA window alibi", .nseq = 3, .lens_q = {33, 64, 1}, .lens_k = {40, 64, 129}, .hq = 4, .hkv = 2, .win = 1, .wl = 16, .wr = 4, .alibi = 1),
  F(.name = "varlen layouts offset", .nseq = 3, .lens_q = {20, 67, 5}, .lens_k = {0, 70, 9}, .hq = 2, .hkv = 1, .causal = 1, .lq = TU_BHSD, .lk = TU_PADDED, .lv = TU_PADDED_BHSD, .lo = TU_PADDED, .off = 5),
  F(.name = "varlen strides[0] ignored", .nseq = 2, .lens_q = {10, 30}, .lens_k = {25, 30}, .hq = 2, .hkv = 2, .junk_stride0 = 1),
  F(.name = "bhsd", .b = 2, .sq = 70, .sk = 90, .hq = 3, .hkv = 3, .lq = TU_BHSD, .lk = TU_BHSD, .lv = TU_BHSD, .lo = TU_BHSD),
  F(.name = "sbhd", .b = 3, .sq = 20, .sk = 45, .hq = 2, .hkv = 1, .causal = 1, .lq = TU_SBHD, .lk = TU_SBHD, .lv = TU_SBHD, .lo = TU_SBHD),
  F(.name = "padded offset", .b = 2, .sq = 45, .sk = 60, .hq = 2, .hkv = 2, .lq = TU_PADDED, .lk = TU_PADDED, .lv = TU_PADDED, .lo = TU_PADDED, .off = 7),
  F(.name = "mixed layouts offset", .b = 2, .sq = 33, .sk = 66, .hq = 4, .hkv = 2, .causal = 1, .lq = TU_BSHD, .lk = TU_BHSD, .lv = TU_PADDED, .lo = TU_PADDED_BHSD, .off = 3),
  F(.name = "explicit scale", .b = 1, .sq = 40, .sk = 50, .hq = 2, .hkv = 2, .scale = 0.2f),
  F(.name = "large logits", .b = 1, .sq = 65, .sk = 65, .hq = 1, .hkv = 1, .amp = 4.0, .scale = 0.5f),
  F(.name = "lse NULL causal sq>sk", .b = 1, .sq = 70, .sk = 40, .hq = 2, .hkv = 2, .causal = 1, .no_lse = 1),
  /* Long key ranges: on llvmpipe a work-group may not walk ~2800 keys
   * (d 64), so these take the split-keys path with its combine kernel. */
  F(.name = "long keys decode causal", .b = 1, .sq = 3, .sk = 3001, .hq = 2, .hkv = 1, .causal = 1),
  F(.name = "long keys varlen window", .nseq = 3, .lens_q = {2, 5, 0}, .lens_k = {2900, 40, 7}, .hq = 2, .hkv = 2, .win = 1, .wl = 2000, .wr = 1),
  F(.name = "lse NULL varlen", .nseq = 2, .lens_q = {12, 0}, .lens_k = {7, 3}, .hq = 2, .hkv = 1, .no_lse = 1),
};

/* Head dims, each with one dtype and some feature; every (d, dv, dtype)
 * compiles a program, so the list is short. */
static const fwd_case headdim_cases[] = {
  F(.name = "head dim 1", .dtype = FCL_F32, .d = 1, .dv = 1, .b = 1, .sq = 37, .sk = 45, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "head dim 7 window", .dtype = FCL_F16, .d = 7, .dv = 7, .b = 1, .sq = 50, .sk = 50, .hq = 2, .hkv = 1, .win = 1, .wl = 8, .wr = 2),
  F(.name = "head dim 32 GQA", .dtype = FCL_BF16, .d = 32, .dv = 32, .b = 2, .sq = 65, .sk = 33, .hq = 4, .hkv = 2),
  F(.name = "head dim 40 softcap", .dtype = FCL_F32, .d = 40, .dv = 40, .b = 1, .sq = 63, .sk = 80, .hq = 2, .hkv = 2, .softcap = 4.0f),
  F(.name = "head dim 80 alibi", .dtype = FCL_F16, .d = 80, .dv = 80, .b = 1, .sq = 66, .sk = 66, .hq = 3, .hkv = 3, .alibi = 1, .causal = 1),
  F(.name = "head dim 96 varlen", .dtype = FCL_BF16, .d = 96, .dv = 96, .nseq = 3, .lens_q = {30, 1, 70}, .lens_k = {30, 0, 65}, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "head dim 128 sq>sk", .dtype = FCL_F32, .d = 128, .dv = 128, .b = 1, .sq = 70, .sk = 50, .hq = 2, .hkv = 1, .causal = 1),
  F(.name = "head dim 160", .dtype = FCL_F16, .d = 160, .dv = 160, .b = 1, .sq = 45, .sk = 77, .hq = 2, .hkv = 2),
  F(.name = "head dim 256 bhsd", .dtype = FCL_BF16, .d = 256, .dv = 256, .b = 1, .sq = 40, .sk = 65, .hq = 2, .hkv = 2, .lq = TU_BHSD, .lk = TU_BHSD, .lv = TU_BHSD, .lo = TU_BHSD),
  F(.name = "head dim 512 long keys", .dtype = FCL_F32, .d = 512, .dv = 512, .b = 1, .sq = 2, .sk = 700, .hq = 1, .hkv = 1, .alibi = 1),
  F(.name = "head dim 512", .dtype = FCL_F32, .d = 512, .dv = 512, .b = 1, .sq = 33, .sk = 70, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "head dims 32/80", .dtype = FCL_F16, .d = 32, .dv = 80, .b = 1, .sq = 64, .sk = 64, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "head dims 160/7 window", .dtype = FCL_BF16, .d = 160, .dv = 7, .b = 1, .sq = 40, .sk = 70, .hq = 2, .hkv = 2, .win = 1, .wl = 10, .wr = 10),
  F(.name = "head dims 7/40 varlen", .dtype = FCL_F32, .d = 7, .dv = 40, .nseq = 2, .lens_q = {5, 60}, .lens_k = {9, 61}, .hq = 3, .hkv = 1),
  F(.name = "head dims 512/64 padded", .dtype = FCL_F16, .d = 512, .dv = 64, .b = 1, .sq = 20, .sk = 65, .hq = 2, .hkv = 2, .lq = TU_PADDED, .lk = TU_PADDED, .lv = TU_PADDED, .lo = TU_PADDED, .off = 2),
  F(.name = "head dims 1/256 alibi", .dtype = FCL_BF16, .d = 1, .dv = 256, .b = 1, .sq = 30, .sk = 40, .hq = 2, .hkv = 2, .alibi = 1),
};

/* The (d, dv, dtype) triples the random batch draws from: those above, so
 * it compiles nothing new. */
static void random_case(tu_rng *r, fwd_case *c, char *name, size_t name_len, int idx) {
  const int n_fixed = (int)(sizeof headdim_cases / sizeof headdim_cases[0]);
  memset(c, 0, sizeof *c);
  const int pick = (int)tu_rng_int(r, 0, n_fixed + 2); /* 3 extra: d64 in each dtype */
  if (pick < n_fixed) {
    c->dtype = headdim_cases[pick].dtype;
    c->d = headdim_cases[pick].d;
    c->dv = headdim_cases[pick].dv;
  } else {
    c->dtype = (fcl_dtype)(pick - n_fixed);
    c->d = c->dv = 64;
  }
  const int64_t big = (c->d > 256 || c->dv > 256) ? 70 : 150;
  static const int64_t edge[] = {1, 2, 3, 17, 31, 63, 64, 65, 127, 128, 129};
  for (int t = 0; t < 2; ++t) {
    int64_t len = tu_rng_int(r, 0, 2) == 0 ? edge[tu_rng_int(r, 0, 10)] : tu_rng_int(r, 1, big);
    if (len > big) len = big;
    if (t == 0) c->sq = len; else c->sk = len;
  }
  c->hkv = tu_rng_int(r, 1, 3);
  c->hq = c->hkv * tu_rng_int(r, 1, 3);
  c->b = tu_rng_int(r, 1, 3);
  c->causal = (int)tu_rng_int(r, 0, 1);
  if (tu_rng_int(r, 0, 2) == 0) {
    c->win = 1;
    c->wl = tu_rng_int(r, 0, 2) ? tu_rng_int(r, 0, 40) : -1;
    c->wr = tu_rng_int(r, 0, 2) ? tu_rng_int(r, 0, 40) : -1;
  }
  if (tu_rng_int(r, 0, 3) == 0) c->softcap = (float)tu_rng_range(r, 1.0, 20.0);
  c->alibi = tu_rng_int(r, 0, 3) == 0;
  /* An explicit scale keeps logits in a realistic range for any head dim
   * (f32 logit error grows with their magnitude; "large logits" covers that). */
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
  c->lq = (tu_layout)tu_rng_int(r, 0, TU_LAYOUT_COUNT - 1);
  c->lk = (tu_layout)tu_rng_int(r, 0, TU_LAYOUT_COUNT - 1);
  c->lv = (tu_layout)tu_rng_int(r, 0, TU_LAYOUT_COUNT - 1);
  c->lo = (tu_layout)tu_rng_int(r, 0, TU_LAYOUT_COUNT - 1);
  c->off = tu_rng_int(r, 0, 1) ? (size_t)tu_rng_int(r, 1, 13) : 0;
  c->no_lse = tu_rng_int(r, 0, 4) == 0;
  snprintf(name, name_len, "random #%d", idx);
  c->name = name;
}

static int selected(const char *name, const char *filter) {
  return !filter || !*filter || strstr(name, filter) != NULL;
}

int main(void) {
  const double t_start = tu_now();
  fcl_context *ctx = NULL;
  const fcl_status st = fcl_context_create(NULL, &ctx);
  if (st != FCL_OK) {
    printf("FAIL: fcl_context_create(NULL) with FCL_DEVICE=%s: %s: %s\n",
           getenv("FCL_DEVICE") ? getenv("FCL_DEVICE") : "(unset)", fcl_status_string(st),
           fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  const char *filter = getenv("FCL_TEST_FILTER");
  const char *seed_env = getenv("FCL_TEST_SEED");
  const uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 20240601u;
  uint64_t case_seed = 1;

  const fcl_dtype dtypes[3] = {FCL_F32, FCL_F16, FCL_BF16};
  for (size_t i = 0; i < sizeof feature_cases / sizeof feature_cases[0]; ++i)
    for (int t = 0; t < 3; ++t) {
      fwd_case c = feature_cases[i];
      c.dtype = dtypes[t];
      if (!c.d) c.d = c.dv = 64;
      ++case_seed;
      if (selected(c.name, filter)) run_case(ctx, &c, case_seed * 7919u);
    }
  for (size_t i = 0; i < sizeof headdim_cases / sizeof headdim_cases[0]; ++i) {
    ++case_seed;
    if (selected(headdim_cases[i].name, filter))
      run_case(ctx, &headdim_cases[i], case_seed * 7919u);
  }
  printf("random batch: seed %llu (set FCL_TEST_SEED to change)\n", (unsigned long long)seed);
  tu_rng rng;
  tu_rng_seed(&rng, seed);
  for (int i = 0; i < 40; ++i) {
    fwd_case c;
    char name[32];
    random_case(&rng, &c, name, sizeof name, i);
    const uint64_t s = tu_rng_next(&rng);
    if (selected(c.name, filter)) run_case(ctx, &c, s);
  }

  fcl_context_stats stats = {0, 0, 0};
  fcl_context_get_stats(ctx, &stats);
  printf("programs built %d, from cache %d, cache writes %d\n", stats.programs_built,
         stats.programs_from_cache, stats.cache_writes);
  fcl_context_destroy(ctx);
  printf("test_attention_forward: %d cases, %d failed, %.1f s\n", g_run, g_failed,
         tu_now() - t_start);
  return g_failed || g_run == 0 ? 1 : 0;
}
