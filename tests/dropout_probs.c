/* fcl_attention_probs against the reference, and the dropout mask it
 * returns (as the signs) against the host Philox (ref_philox.c): bit-exact
 * over every element, kept fraction, and independence across seeds,
 * offsets, heads, batches and neighbouring elements. */
#include "dropout_tests.h"
#include "ref_philox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAIL 64 /* poison bytes after p, which must stay */

/* Runs fcl_attention_probs of s with descriptor d into a fresh poisoned
 * buffer and reads it (count floats) into out; -1 on a failed call. */
static int probs(dp_setup *s, const fcl_attention_desc *d, double *out, size_t count,
                 long *bad_tail) {
  cl_mem m = dp_poison(s, count * 4 + TAIL);
  if (!m) return -1;
  fcl_status st = fcl_attention_probs(s->ctx, d, &s->tq.t, &s->tk.t, s->lse, m);
  if (st != FCL_OK) printf("  fcl_attention_probs: %s: %s\n", fcl_status_string(st),
                           fcl_context_last_error(s->ctx));
  int r = st != FCL_OK ? -1
          : tu_buffer_read_f32(fcl_context_queue(s->ctx), m, out, count, TAIL, bad_tail) ? -1
                                                                                         : 0;
  clReleaseMemObject(m);
  return r;
}

static size_t count_of(const ref_attention_problem *p) {
  return (size_t)(p->batch * p->heads_q * p->seqlen_q * p->seqlen_k);
}

/* One problem: the forward's lse, then the probabilities with dropout and
 * without, each against the reference fed that lse. */
static void probs_case(fcl_context *ctx, dp_tally *t, const oh_attention_case *c, fcl_dtype dt) {
  dp_setup s;
  if (dp_setup_create(&s, ctx, c, dt, oh_case_seed(c->name, dt))) {
    dp_expect(t, 0, "probs %s: setup", c->name);
    return;
  }
  const ref_attention_problem *p = &s.p;
  const size_t count = count_of(p);
  double *got = oh_dalloc(count), *ref = oh_dalloc(count), *ga = oh_dalloc(count),
         *ra = oh_dalloc(count), *lse = oh_dalloc(s.n.lse);
  const double bound = ref_attention_logit_bound(p, s.q, s.k);
  const double e = tu_logit_error(bound, p->head_dim);
  /* P is a softmax weight: the f32 output tolerance with the logits' error
   * as for o with values of magnitude 1. */
  const tu_tol tol = tu_tol_with_logits(tu_tol_output(FCL_F32), bound, p->head_dim, 1.0);
  for (int drop = 1; drop >= 0; --drop) {
    fcl_attention_desc d = s.desc;
    ref_attention_problem rp = *p;
    if (!drop) d.dropout_p = 0.0f, rp.dropout_p = 0.0;
    long bad_tail = 0;
    fcl_status st = dp_forward(&s, &d);
    if (st != FCL_OK ||
        tu_buffer_read_f32(fcl_context_queue(ctx), s.lse, lse, s.n.lse, 0, NULL) ||
        probs(&s, &d, got, count, &bad_tail)) {
      dp_expect(t, 0, "%-4s probs %s p=%g: the calls failed (%s)", tu_dtype_name(dt), c->name,
                (double)d.dropout_p, fcl_context_last_error(ctx));
      continue;
    }
    ref_attention_probs(&rp, s.q, s.k, lse, ref);
    /* Every element: its sign is the host mask's (visible), or it is +0. */
    size_t visible = 0, dropped = 0, sign_bad = 0, outside_bad = 0, first = count;
    const int64_t HQ = p->heads_q, SQ = p->seqlen_q, SK = p->seqlen_k;
    const int64_t total_q = p->cu_seqlens_q ? p->cu_seqlens_q[p->batch] : 0;
    double worst_sum = 0.0; /* |row sum - 1| / allowed */
    for (int64_t b = 0; b < p->batch; ++b) {
      int64_t sq, sk, q0, k0;
      ref_attention_seq(p, b, &sq, &sk, &q0, &k0);
      for (int64_t h = 0; h < HQ; ++h)
        for (int64_t i = 0; i < SQ; ++i) {
          int64_t lo = 1, hi = 0;
          if (i < sq) ref_attention_visible_keys(p, sq, sk, i, &lo, &hi);
          double sum = 0.0;
          for (int64_t j = 0; j < SK; ++j) {
            const size_t x = (size_t)(((b * HQ + h) * SQ + i) * SK + j);
            if (j >= lo && j <= hi && j < sk) {
              const int kept = ref_attention_kept(&rp, b, h, i, j);
              ++visible;
              dropped += !kept;
              sum += fabs(got[x]);
              if ((signbit(got[x]) == 0) != kept) {
                if (!sign_bad++ && first == count) first = x;
              }
            } else if (got[x] != 0.0 || signbit(got[x])) {
              if (!outside_bad++ && first == count) first = x;
            }
          }
          if (lo > hi || i >= sq) continue;
          const double l = p->cu_seqlens_q ? lse[h * total_q + q0 + i] : lse[(b * HQ + h) * SQ + i];
          /* exp(s - lse) sums to exp(lse_true - lse): lse's f32 error and
           * the logits' */
          const double allow = tu_tol_lse().atol + tu_tol_lse().rtol * fabs(l) + 2.0 * e;
          if (!(fabs(sum - 1.0) / allow <= worst_sum)) worst_sum = fabs(sum - 1.0) / allow;
        }
    }
    for (size_t x = 0; x < count; ++x) ga[x] = fabs(got[x]), ra[x] = fabs(ref[x]);
    const tu_cmp cmp = tu_compare(ga, ra, count, tol, 0);
    if (!cmp.ok) tu_print_cmp("|P|", &cmp, NULL, 0);
    dp_expect(t, !sign_bad && !outside_bad && (drop ? dropped > 0 : dropped == 0) && cmp.ok &&
                     worst_sum <= 1.0 && !bad_tail,
              "%-4s probs %s p=%g | %zu visible of %zu, %zu dropped; sign != host mask %zu, "
              "outside not +0 %zu (first [%zu]); |P| err %.2e (%.0f%% of tol); rows sum to 1 "
              "within %.0f%% of tol; tail bytes written %ld",
              tu_dtype_name(dt), c->name, (double)d.dropout_p, visible, count, dropped, sign_bad,
              outside_bad, first == count ? (size_t)0 : first, cmp.max_err,
              100.0 * cmp.worst_ratio, 100.0 * worst_sum, bad_tail);
  }
  free(got), free(ref), free(ga), free(ra), free(lse);
  dp_setup_release(&s);
}

void dp_probs_tests(fcl_context *ctx, dp_tally *t) {
  static const oh_attention_case cases[] = {
      {.name = "varlen causal GQA", .nseq = 4, .lens_q = {30, 0, 65, 7},
       .lens_k = {41, 12, 65, 0}, .hq = 4, .hkv = 2, .d = 40, .dv = 40, .causal = 1,
       .dropout_p = 0.5f, .dropout_seed = 0x0123456789abcdefu,
       .dropout_offset = 0xfedcba9876543210u},
      {.name = "window sq<sk softcap alibi", .b = 2, .sq = 37, .sk = 70, .hq = 2, .hkv = 1,
       .d = 40, .dv = 40, .win = 1, .wl = 25, .wr = 6, .softcap = 3.0f, .alibi = 1,
       .dropout_p = 0.1f, .dropout_seed = 0x8000000000000001u, .dropout_offset = 5},
  };
  probs_case(ctx, t, &cases[0], FCL_F32);
  probs_case(ctx, t, &cases[1], FCL_F32);
  probs_case(ctx, t, &cases[1], FCL_BF16);
}

/* ---- the mask's statistics ------------------------------------------------- */

static double correlation(const unsigned char *a, const unsigned char *b, size_t n) {
  double sa = 0, sb = 0, sab = 0;
  for (size_t i = 0; i < n; ++i) sa += a[i], sb += b[i], sab += a[i] * b[i];
  const double ma = sa / (double)n, mb = sb / (double)n;
  const double cov = sab / (double)n - ma * mb;
  const double va = ma * (1 - ma), vb = mb * (1 - mb);
  return va > 0 && vb > 0 ? cov / sqrt(va * vb) : 1.0;
}

/* The kept bits (signs) of the probabilities of s with d, and how many
 * differ from the host mask; -1 on failure. */
static long device_mask(dp_setup *s, const fcl_attention_desc *d, unsigned char *keep,
                        double *buf, size_t count) {
  long bad_tail = 0;
  if (probs(s, d, buf, count, &bad_tail) || bad_tail) return -1;
  long differ = 0; /* dense, every position visible: element x has index n = x */
  for (size_t x = 0; x < count; ++x) {
    keep[x] = !signbit(buf[x]);
    differ += keep[x] != ref_dropout_keep(d->dropout_seed, d->dropout_offset,
                                          (double)d->dropout_p, (uint64_t)x);
  }
  return differ;
}

void dp_stats_tests(fcl_context *ctx, dp_tally *t) {
  const oh_attention_case c = {.name = "stats 2x2x256x256", .b = 2, .sq = 256, .sk = 256,
                               .hq = 2, .hkv = 2, .d = 40, .dv = 40, .dropout_p = 0.5f,
                               .dropout_seed = 0x9e3779b97f4a7c15u,
                               .dropout_offset = 0x0000000100000003u};
  dp_setup s;
  if (dp_setup_create(&s, ctx, &c, FCL_F32, 77)) {
    dp_expect(t, 0, "stats: setup");
    return;
  }
  const size_t count = count_of(&s.p), plane = count / 4; /* one (batch, head) */
  double *buf = oh_dalloc(count);
  unsigned char *m[5];
  for (int i = 0; i < 5; ++i)
    if (!(m[i] = calloc(count, 1))) abort();
  if (dp_forward(&s, &s.desc) != FCL_OK) {
    dp_expect(t, 0, "stats: forward failed: %s", fcl_context_last_error(ctx));
    goto done;
  }
  /* m0: p 0.5; m1: p 0.1; m2: another seed; m3: the next offset; m4: seed
   * and offset swapped (a mix-up of the key and counter words). */
  fcl_attention_desc d[5];
  for (int i = 0; i < 5; ++i) d[i] = s.desc;
  d[1].dropout_p = 0.1f;
  d[2].dropout_seed += 1;
  d[3].dropout_offset += 1;
  d[4].dropout_seed = s.desc.dropout_offset, d[4].dropout_offset = s.desc.dropout_seed;
  for (int i = 0; i < 5; ++i) {
    const long differ = device_mask(&s, &d[i], m[i], buf, count);
    size_t kept = 0;
    for (size_t x = 0; x < count; ++x) kept += m[i][x];
    const double q = 1.0 - (double)ref_dropout_threshold((double)d[i].dropout_p) / 4294967296.0;
    const double sigma = sqrt((double)count * q * (1.0 - q));
    const double dev = ((double)kept - (double)count * q) / sigma;
    dp_expect(t, differ == 0 && fabs(dev) <= 5.0,
              "mask p=%g seed %#llx offset %#llx: %ld of %zu elements differ from the host "
              "Philox; kept %zu, expected %.0f (%+.2f sigma, bound 5)",
              (double)d[i].dropout_p, (unsigned long long)d[i].dropout_seed,
              (unsigned long long)d[i].dropout_offset, differ, count, kept,
              (double)count * q, dev);
  }
  /* Independence at p = 0.5: |correlation| < 5 / sqrt(N) for N pairs. */
  const struct {
    const char *what;
    const unsigned char *a, *b;
    size_t n;
  } pairs[] = {
      {"seeds s and s+1", m[0], m[2], count},
      {"offsets o and o+1", m[0], m[3], count},
      {"seed and offset swapped", m[0], m[4], count},
      {"heads 0 and 1 (batch 0)", m[0], m[0] + plane, plane},
      {"batches 0 and 1 (head 0)", m[0], m[0] + 2 * plane, plane},
      {"neighbours n and n+1", m[0], m[0] + 1, count - 1},
      {"n and n+4 (the next Philox block)", m[0], m[0] + 4, count - 4},
      {"n and n+seqlen_k (the next query)", m[0], m[0] + 256, count - 256},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; ++i) {
    const double r = correlation(pairs[i].a, pairs[i].b, pairs[i].n);
    const double bound = 5.0 / sqrt((double)pairs[i].n);
    dp_expect(t, fabs(r) < bound, "mask independence, %s: correlation %+.5f (bound %.5f, N %zu)",
              pairs[i].what, r, bound, pairs[i].n);
  }
done:
  for (int i = 0; i < 5; ++i) free(m[i]);
  free(buf);
  dp_setup_release(&s);
}
