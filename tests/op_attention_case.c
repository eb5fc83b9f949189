/* One row of an attention case table (tests/attention_cases.h) run through
 * oh_attention_run and checked against the double reference; see
 * op_harness.h. The forward suite and the backward suite both run their
 * rows here: the backward's runs are the forward's checks plus its own. */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inputs: exact fit, or 7 spare elements after an offset or padded view. */
static size_t tail_for(tu_layout l, size_t off) {
  return (l == TU_BSHD || l == TU_BHSD) && off == 0 ? 0 : 7;
}

static void describe(const oh_attention_case *c, fcl_dtype dt, int bwd, char *buf, size_t n) {
  int p = 0;
#define ADD(...)                                                                  \
  do {                                                                            \
    if (p < (int)n) p += snprintf(buf + p, n - (size_t)p, __VA_ARGS__);           \
  } while (0)
  ADD("%-4s %s | ", tu_dtype_name(dt), c->name);
  if (c->nseq) {
    ADD("varlen");
    for (int i = 0; i < c->nseq; ++i) ADD("%s%d/%d", i ? "," : " q/k ", c->lens_q[i], c->lens_k[i]);
  } else {
    ADD("b%lld sq%lld sk%lld", (long long)c->b, (long long)c->sq, (long long)c->sk);
  }
  ADD(" h%lld/%lld d%lld/%lld", (long long)c->hq, (long long)c->hkv,
      (long long)(c->d ? c->d : 64), (long long)(c->dv ? c->dv : 64));
  if (c->causal) ADD(" causal");
  if (c->win) ADD(" win(%lld,%lld)", (long long)c->wl, (long long)c->wr);
  if (c->shift) ADD(" shift %lld", (long long)c->shift);
  if (c->softcap > 0) ADD(" cap%g", c->softcap);
  if (c->alibi) ADD(" alibi");
  if (c->scale != 0) ADD(" scale%g", c->scale);
  if (c->dropout_p != 0) ADD(" dropout%g", c->dropout_p);
  const tu_layout ls[8] = {c->lq, c->lk, c->lv, c->lo, c->ldo, c->ldq, c->ldk, c->ldv};
  const int nl = bwd ? 8 : 4;
  int any = 0;
  for (int i = 0; i < nl; ++i) any |= ls[i] != TU_BSHD;
  if (any)
    for (int i = 0; i < nl; ++i) ADD("%s%s", i ? "/" : " ", tu_layout_name(ls[i]));
  if (c->off) ADD(" off%zu", c->off);
  if (c->no_lse && !bwd) ADD(" lse=NULL");
  if (c->junk_stride0) ADD(" junk-strides[0]");
  if (c->tol != OH_TOL_DTYPE) ADD(" tol:%s", tu_dtype_name(oh_tol_dtype(c->tol, dt)));
#undef ADD
}

/* max |ref_o - ref| / (tol * max|ref|): how much of the allowance the
 * forward's stored o accounts for. */
static double o_term(const double *ref, const double *ref_o, size_t n, double tol) {
  double m = 0.0, d = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (isfinite(ref[i]) && fabs(ref[i]) > m) m = fabs(ref[i]);
    if (fabs(ref_o[i] - ref[i]) > d) d = fabs(ref_o[i] - ref[i]);
  }
  return m > 0 ? d / (tol * m) : (d > 0 ? INFINITY : 0.0);
}

/* Keys no query of their sequence sees: dk and dv must be exactly 0.
 * Returns how many are not; *unseen counts them. */
static size_t unseen_keys_nonzero(const ref_attention_problem *p, const double *dk,
                                  const double *dv, size_t *unseen) {
  const int varlen = p->cu_seqlens_k != NULL;
  const int64_t HK = p->heads_kv, D = p->head_dim, DV = p->head_dim_v;
  size_t n = 0, bad = 0;
  for (int64_t b = 0; b < p->batch; ++b) {
    const int64_t k0 = varlen ? p->cu_seqlens_k[b] : b * p->seqlen_k;
    const int64_t sk = varlen ? p->cu_seqlens_k[b + 1] - k0 : p->seqlen_k;
    for (int64_t j = 0; j < sk; ++j) {
      if (ref_attention_key_seen(p, b, j)) continue;
      ++n;
      int nz = 0;
      for (int64_t h = 0; h < HK; ++h) {
        for (int64_t e = 0; e < D; ++e) nz |= dk[((k0 + j) * HK + h) * D + e] != 0.0;
        for (int64_t e = 0; e < DV; ++e) nz |= dv[((k0 + j) * HK + h) * DV + e] != 0.0;
      }
      bad += nz ? 1u : 0u;
    }
  }
  *unseen = n;
  return bad;
}

int oh_attention_case_run(fcl_context *ctx, const oh_attention_case *c, fcl_dtype dt,
                          int backward, uint64_t seed, oh_attention_stats *st) {
  const double t0 = tu_now();
  char text[512], why[2048] = "", notes[512] = "";
  describe(c, dt, backward, text, sizeof text);
  const fcl_dtype tdt = oh_tol_dtype(c->tol, dt);

  /* The problem. */
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  int32_t cuq[OH_MAX_SEQS + 1], cuk[OH_MAX_SEQS + 1];
  if (c->nseq) {
    oh_attention_varlen(&p, c->nseq, c->lens_q, c->lens_k, cuq, cuk);
  } else {
    p.batch = c->b; p.seqlen_q = c->sq; p.seqlen_k = c->sk;
  }
  const int64_t HQ = c->hq, HK = c->hkv, D = c->d ? c->d : 64, DV = c->dv ? c->dv : 64;
  p.heads_q = HQ; p.heads_kv = HK; p.head_dim = D; p.head_dim_v = DV;
  p.softmax_scale = (double)c->scale; /* exactly what the float desc holds */
  p.causal = c->causal;
  p.window_left = c->win ? c->wl : -1;
  p.window_right = c->win ? c->wr : -1;
  p.diag_shift = c->shift;
  p.softcap = (double)c->softcap;
  p.dropout_p = (double)c->dropout_p; /* exactly what the float desc holds */
  p.dropout_seed = c->dropout_seed;
  p.dropout_offset = c->dropout_offset;
  double slopes[64];
  for (int64_t h = 0; h < HQ && h < 64; ++h) /* the usual ALiBi slopes, as f32 */
    slopes[h] = (float)pow(2.0, -8.0 * (double)(h + 1) / (double)HQ);
  p.alibi_slopes = c->alibi ? slopes : NULL;
  const int varlen = c->nseq > 0;
  const oh_attention_sizes n = oh_attention_count(&p);
  const int64_t bq = varlen ? 1 : p.batch;
  const int64_t rows_q = varlen ? cuq[c->nseq] : p.seqlen_q;
  const int64_t rows_k = varlen ? cuk[c->nseq] : p.seqlen_k;

  /* Inputs rounded to the dtype, and the reference. */
  double *q = oh_dalloc(n.q), *k = oh_dalloc(n.k), *v = oh_dalloc(n.v), *dout = oh_dalloc(n.o);
  tu_rng rng;
  tu_rng_seed(&rng, seed);
  const double amp = c->amp > 0 ? c->amp : 2.5;
  tu_fill_uniform(&rng, q, n.q, -amp, amp);
  tu_fill_uniform(&rng, k, n.k, -amp, amp);
  tu_fill_uniform(&rng, v, n.v, -1.0, 1.0);
  tu_fill_uniform(&rng, dout, n.o, -1.0, 1.0);
  tu_round_array(q, n.q, dt);
  tu_round_array(k, n.k, dt);
  tu_round_array(v, n.v, dt);
  tu_round_array(dout, n.o, dt);
  double *o_ref = oh_dalloc(n.o), *l_ref = oh_dalloc(n.lse);
  ref_attention_forward(&p, q, k, v, o_ref, l_ref);
  const double bound = ref_attention_logit_bound(&p, q, k);
  double vmax = 0.0;
  for (size_t e = 0; e < n.v; ++e) vmax = fabs(v[e]) > vmax ? fabs(v[e]) : vmax;
  /* Dropout weighs the kept values by 1 / (1 - p): the logits' error
   * reaches o through s v as it would through v. */
  vmax /= 1.0 - p.dropout_p;
  const tu_tol tol_o = tu_tol_with_logits(tu_tol_output(tdt), bound, D, vmax);
  const tu_tol tol_l = tu_tol_with_logits(tu_tol_lse(), bound, D, 0.0);

  /* Views: inputs fit exactly or with a little slack; o (forward) and the
   * gradients get a guard of one token row plus some, so a write past the
   * view lands in poison and is reported. */
  oh_opts opts;
  memset(&opts, 0, sizeof opts);
  const tu_layout ls[8] = {c->lq, c->lk, c->lv, c->lo, c->ldo, c->ldq, c->ldk, c->ldv};
  for (int i = 0; i < 8; ++i) {
    const size_t off = c->off ? c->off + (size_t)i : 0;
    opts.view[i] = (oh_view){ls[i], off, tail_for(ls[i], off)};
  }
  if (!backward) opts.view[OH_O].tail = (size_t)(HQ * DV) + 7;
  opts.view[OH_DQ].tail = (size_t)(HQ * D) + 7;
  opts.view[OH_DK].tail = (size_t)(HK * D) + 7;
  opts.view[OH_DV].tail = (size_t)(HK * DV) + 7;
  opts.out_tail = 16;
  opts.junk_stride0 = c->junk_stride0;
  opts.bwd_runs = 2; /* the backward runs twice, bit-identical */
  opts.check_inputs = 1;
  double *o = oh_dalloc(n.o), *l = oh_dalloc(n.lse), *dq = oh_dalloc(n.q), *dk = oh_dalloc(n.k),
         *dv = oh_dalloc(n.v);
  const int with_lse = backward || !c->no_lse;
  const oh_attention_in in = {q, k, v, backward ? dout : NULL};
  oh_attention_out out = {o, with_lse ? l : NULL, dq, dk, dv, 0.0, 0.0, 0, 0};
  int ok = oh_attention_run(ctx, &p, dt, &opts, &in, &out, why, sizeof why) == 0;

  /* The forward. */
  if (out.fwd_read) {
    const int64_t odims[4] = {bq, rows_q, HQ, DV};
    const int64_t ldense[3] = {p.batch, HQ, p.seqlen_q}, lvar[2] = {HQ, rows_q};
    tu_cmp co, cl;
    memset(&cl, 0, sizeof cl);
    ok &= oh_check_dims("o", o, o_ref, n.o, tol_o, 0, odims, 4, &co, why, sizeof why);
    size_t empty = 0;
    const size_t bad = oh_empty_rows_nonzero(&p, l_ref, o, DV, &empty);
    if (bad) {
      ok = 0;
      oh_append(why, sizeof why, " %zu of %zu rows that see no key are not 0;", bad, empty);
    }
    if (with_lse)
      ok &= oh_check_dims("lse", l, l_ref, n.lse, tol_l, 1, varlen ? lvar : ldense,
                          varlen ? 2 : 3, &cl, why, sizeof why);
    oh_append(notes, sizeof notes, " o err %.2e (%.0f%% of tol; max|o| %.2f, |s|<=%.3g)",
              co.max_err, 100.0 * co.worst_ratio, co.ref_max, bound);
    if (with_lse) oh_append(notes, sizeof notes, " lse err %.2e (%.0f%%)", cl.max_err,
                            100.0 * cl.worst_ratio);
    else oh_append(notes, sizeof notes, " lse none");
    if (empty) oh_append(notes, sizeof notes, " empty rows %zu", empty);
  }

  /* The backward: against the reference fed the o it was given (the
   * forward's, in the dtype), no extra margin but 8 f32 roundings of the
   * largest terms of dq and dk (as the logits in tu_tol_with_logits):
   * where P is one-hot, dP - D cancels and the gradient is rounding-sized. */
  if (backward && out.bwd_read) {
    double *dq_ref = oh_dalloc(n.q), *dk_ref = oh_dalloc(n.k), *dv_ref = oh_dalloc(n.v);
    double *dq_ro = oh_dalloc(n.q), *dk_ro = oh_dalloc(n.k), *dv_ro = oh_dalloc(n.v);
    double *mq = oh_dalloc(n.q), *mk = oh_dalloc(n.k);
    ref_attention_backward(&p, q, k, v, dout, dq_ref, dk_ref, dv_ref);
    ref_attention_backward_terms(&p, q, k, v, dout, o, dq_ro, dk_ro, dv_ro, mq, mk);
    const double tol_g = tu_tol_grad(tdt).atol;
    double mmax[3] = {0.0, 0.0, 0.0};
    for (size_t i = 0; i < n.q; ++i) mmax[0] = fmax(mmax[0], mq[i]);
    for (size_t i = 0; i < n.k; ++i) mmax[1] = fmax(mmax[1], mk[i]);
    const double *gots[3] = {dq, dk, dv}, *refs[3] = {dq_ref, dk_ref, dv_ref},
                 *refs_o[3] = {dq_ro, dk_ro, dv_ro};
    const size_t ns[3] = {n.q, n.k, n.v};
    static const char *const names[3] = {"dq", "dk", "dv"};
    tu_cmp cg[3];
    double oterm = 0.0;
    for (int g = 0; g < 3; ++g) {
      const int64_t dims[4] = {bq, g ? rows_k : rows_q, g ? HK : HQ, g == 2 ? DV : D};
      const tu_tol tol = {tol_g, 0.0, 8 * 0x1p-24 * mmax[g]};
      ok &= oh_check_dims(names[g], gots[g], refs_o[g], ns[g], tol, 0, dims, 4, &cg[g], why,
                          sizeof why);
      oterm = fmax(oterm, o_term(refs[g], refs_o[g], ns[g], tol_g));
      if (st && !(cg[g].worst_ratio <= st->worst[dt][g])) st->worst[dt][g] = cg[g].worst_ratio;
    }
    if (st && !(oterm <= st->oterm[dt])) st->oterm[dt] = oterm;
    size_t empty = 0, unseen = 0;
    const size_t bad_rows = oh_empty_rows_nonzero(&p, l_ref, dq, D, &empty);
    const size_t bad_keys = unseen_keys_nonzero(&p, dk, dv, &unseen);
    if (bad_rows) {
      ok = 0;
      oh_append(why, sizeof why, " dq of %zu of %zu rows that see no key is not 0;", bad_rows,
                empty);
    }
    if (bad_keys) {
      ok = 0;
      oh_append(why, sizeof why, " dk/dv of %zu of %zu keys no query sees are not 0;", bad_keys,
                unseen);
    }
    oh_append(notes, sizeof notes,
              " | err/tol dq %.0f%% dk %.0f%% dv %.0f%% (max|ref| %.3g %.3g %.3g)",
              100.0 * cg[0].worst_ratio, 100.0 * cg[1].worst_ratio, 100.0 * cg[2].worst_ratio,
              cg[0].ref_max, cg[1].ref_max, cg[2].ref_max);
    if (oterm >= 0.1) oh_append(notes, sizeof notes, " o-term %.0f%%", 100.0 * oterm);
    if (unseen) oh_append(notes, sizeof notes, " unseen keys %zu", unseen);
    oh_append(notes, sizeof notes, " | fwd %.2f s, bwd %.2f s", out.fwd_s, out.bwd_s);
    free(dq_ref); free(dk_ref); free(dv_ref); free(dq_ro); free(dk_ro); free(dv_ro);
    free(mq); free(mk);
  } else if (backward) {
    ok = 0; /* the run said why */
  }
  printf("%s %s |%s%s | %.2f s\n", ok ? "PASS" : "FAIL", text, why, notes, tu_now() - t0);
  fflush(stdout);
  if (st) {
    ++st->run;
    st->failed += !ok;
  }
  free(q); free(k); free(v); free(dout); free(o_ref); free(l_ref);
  free(o); free(l); free(dq); free(dk); free(dv);
  return ok;
}
