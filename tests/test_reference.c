/* Unit tests of the test machinery itself (no OpenCL device needed):
 * the double reference against a brute-force dense softmax written
 * independently, identity and symmetry properties, and exact f16/bf16
 * rounding over every bit pattern. */
#include "ref_attention.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0;

#define CHECK(cond, ...) TU_CHECK(g_failures, cond, __VA_ARGS__)

/* ---- brute force: full score matrix, explicit mask predicate -------------- */
static int visible(const ref_attention_problem *p, int64_t sq, int64_t sk, int64_t i,
                   int64_t j) {
  const int64_t a = i + sk - sq;
  if (p->causal && j > a) return 0;
  if (p->window_left >= 0 && j < a - p->window_left) return 0;
  if (p->window_right >= 0 && j > a + p->window_right) return 0;
  return 1;
}

static double g_max_abs_logit; /* max |s| before softcap over visible pairs */

/* Not varlen only; naive exp without max subtraction (tiny inputs). */
static void brute_force(const ref_attention_problem *p, const double *q, const double *k,
                        const double *v, double *o, double *lse) {
  const int64_t B = p->batch, SQ = p->seqlen_q, SK = p->seqlen_k, HQ = p->heads_q,
                HK = p->heads_kv, D = p->head_dim, DV = p->head_dim_v;
  const double scale = p->softmax_scale ? p->softmax_scale : 1.0 / sqrt((double)D);
  double *w = malloc(sizeof(double) * (size_t)SK);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < HQ; ++h) {
      const int64_t g = HQ / HK, hk = h / g;
      for (int64_t i = 0; i < SQ; ++i) {
        double den = 0.0;
        for (int64_t j = 0; j < SK; ++j) {
          double s = 0.0;
          for (int64_t c = 0; c < D; ++c)
            s += q[((b * SQ + i) * HQ + h) * D + c] * k[((b * SK + j) * HK + hk) * D + c];
          s *= scale;
          if (visible(p, SQ, SK, i, j)) {
            double raw = fabs(s);
            if (p->alibi_slopes) raw += p->alibi_slopes[h] * fabs((double)(i - j + SK - SQ));
            if (raw > g_max_abs_logit) g_max_abs_logit = raw;
          }
          if (p->softcap > 0) s = p->softcap * tanh(s / p->softcap);
          if (p->alibi_slopes) s += -p->alibi_slopes[h] * fabs((double)(i - j + SK - SQ));
          w[j] = visible(p, SQ, SK, i, j) ? exp(s) : 0.0;
          den += w[j];
        }
        for (int64_t c = 0; c < DV; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j < SK; ++j) acc += w[j] * v[((b * SK + j) * HK + hk) * DV + c];
          o[((b * SQ + i) * HQ + h) * DV + c] = den > 0 ? acc / den : 0.0;
        }
        lse[(b * HQ + h) * SQ + i] = den > 0 ? log(den) : -INFINITY;
      }
    }
  free(w);
}

static double max_diff(const double *a, const double *b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (isinf(a[i]) || isinf(b[i])) {
      if (a[i] != b[i]) return INFINITY;
      continue;
    }
    const double d = fabs(a[i] - b[i]);
    if (!(d <= m)) m = d; /* NaN propagates */
  }
  return m;
}

static ref_attention_problem base_problem(void) {
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.window_left = p.window_right = -1;
  return p;
}

static void brute_force_cases(void) {
  tu_rng rng;
  tu_rng_seed(&rng, 7);
  const double slopes[6] = {0.5, 0.25, 0.125, 0.0625, 0.3, 0.01};
  int n_cases = 0;
  for (int t = 0; t < 400; ++t) {
    ref_attention_problem p = base_problem();
    p.batch = tu_rng_int(&rng, 1, 2);
    p.seqlen_q = tu_rng_int(&rng, 1, 9);
    p.seqlen_k = tu_rng_int(&rng, 1, 9);
    p.heads_kv = tu_rng_int(&rng, 1, 2);
    p.heads_q = p.heads_kv * tu_rng_int(&rng, 1, 3);
    p.head_dim = tu_rng_int(&rng, 1, 5);
    p.head_dim_v = tu_rng_int(&rng, 1, 5);
    p.causal = (int)tu_rng_int(&rng, 0, 1);
    p.window_left = tu_rng_int(&rng, 0, 2) ? -1 : tu_rng_int(&rng, 0, 4);
    p.window_right = tu_rng_int(&rng, 0, 2) ? -1 : tu_rng_int(&rng, 0, 4);
    p.softmax_scale = tu_rng_int(&rng, 0, 1) ? 0.0 : tu_rng_range(&rng, 0.1, 1.0);
    p.softcap = tu_rng_int(&rng, 0, 2) ? 0.0 : tu_rng_range(&rng, 0.5, 3.0);
    p.alibi_slopes = tu_rng_int(&rng, 0, 2) ? NULL : slopes;
    const size_t nq = (size_t)(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
    const size_t nk = (size_t)(p.batch * p.seqlen_k * p.heads_kv * p.head_dim);
    const size_t nv = (size_t)(p.batch * p.seqlen_k * p.heads_kv * p.head_dim_v);
    const size_t no = (size_t)(p.batch * p.seqlen_q * p.heads_q * p.head_dim_v);
    const size_t nl = (size_t)(p.batch * p.heads_q * p.seqlen_q);
    double *q = malloc(8 * nq), *k = malloc(8 * nk), *v = malloc(8 * nv);
    double *o1 = malloc(8 * no), *o2 = malloc(8 * no), *l1 = malloc(8 * nl),
           *l2 = malloc(8 * nl);
    tu_fill_uniform(&rng, q, nq, -1.5, 1.5);
    tu_fill_uniform(&rng, k, nk, -1.5, 1.5);
    tu_fill_uniform(&rng, v, nv, -1, 1);
    ref_attention_forward(&p, q, k, v, o1, l1);
    g_max_abs_logit = 0.0;
    brute_force(&p, q, k, v, o2, l2);
    const double bound = ref_attention_logit_bound(&p, q, k);
    CHECK(bound >= g_max_abs_logit && bound <= 1e3,
          "logit bound %g below the largest visible |s| %g (#%d)", bound, g_max_abs_logit, t);
    const double eo = max_diff(o1, o2, no), el = max_diff(l1, l2, nl);
    CHECK(eo < 1e-12 && el < 1e-12,
          "brute force #%d (b%lld sq%lld sk%lld hq%lld hkv%lld d%lld dv%lld c%d w%lld,%lld "
          "cap%g alibi%d): o diff %g lse diff %g",
          t, (long long)p.batch, (long long)p.seqlen_q, (long long)p.seqlen_k,
          (long long)p.heads_q, (long long)p.heads_kv, (long long)p.head_dim,
          (long long)p.head_dim_v, p.causal, (long long)p.window_left,
          (long long)p.window_right, p.softcap, p.alibi_slopes != NULL, eo, el);
    /* ref_attention_row agrees with the whole pass. */
    double row[8];
    const int64_t b = p.batch - 1, h = p.heads_q - 1, i = p.seqlen_q - 1;
    const double lr = ref_attention_row(&p, q, k, v, b, h, i, row);
    const double *orow = o1 + ((b * p.seqlen_q + i) * p.heads_q + h) * p.head_dim_v;
    CHECK(max_diff(row, orow, (size_t)p.head_dim_v) == 0.0 &&
              max_diff(&lr, &l1[(b * p.heads_q + h) * p.seqlen_q + i], 1) == 0.0,
          "ref_attention_row disagrees with ref_attention_forward (#%d)", t);
    free(q); free(k); free(v); free(o1); free(o2); free(l1); free(l2);
    ++n_cases;
  }
  printf("reference vs brute force: %d random problems\n", n_cases);
}

/* One key: o == v and lse == the single score, whatever q is. */
static void identity_cases(void) {
  ref_attention_problem p = base_problem();
  p.batch = 2; p.seqlen_q = 3; p.seqlen_k = 1; p.heads_q = 4; p.heads_kv = 2;
  p.head_dim = 3; p.head_dim_v = 5; p.softmax_scale = 0.7;
  double q[2 * 3 * 4 * 3], k[2 * 1 * 2 * 3], v[2 * 1 * 2 * 5], o[2 * 3 * 4 * 5],
      lse[2 * 4 * 3];
  tu_rng rng;
  tu_rng_seed(&rng, 11);
  tu_fill_uniform(&rng, q, sizeof q / 8, -3, 3);
  tu_fill_uniform(&rng, k, sizeof k / 8, -3, 3);
  tu_fill_uniform(&rng, v, sizeof v / 8, -3, 3);
  ref_attention_forward(&p, q, k, v, o, lse);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int h = 0; h < 4; ++h) {
        const int hk = h / 2;
        double s = 0;
        for (int c = 0; c < 3; ++c) s += q[((b * 3 + i) * 4 + h) * 3 + c] * k[(b * 2 + hk) * 3 + c];
        s *= 0.7;
        CHECK(fabs(lse[(b * 4 + h) * 3 + i] - s) < 1e-13, "identity lse b%d i%d h%d", b, i, h);
        for (int c = 0; c < 5; ++c)
          CHECK(o[((b * 3 + i) * 4 + h) * 5 + c] == v[(b * 2 + hk) * 5 + c],
                "identity o b%d i%d h%d c%d", b, i, h, c);
      }
  /* Equal keys: o is the mean of v, lse = s + log(sk). */
  ref_attention_problem u = base_problem();
  u.batch = 1; u.seqlen_q = 2; u.seqlen_k = 4; u.heads_q = u.heads_kv = 1;
  u.head_dim = 2; u.head_dim_v = 1;
  const double uq[4] = {1, 2, -1, 0.5}, uk[8] = {1, 1, 1, 1, 1, 1, 1, 1},
               uv[4] = {1, 2, 3, 10};
  double uo[2], ul[2];
  ref_attention_forward(&u, uq, uk, uv, uo, ul);
  CHECK(fabs(uo[0] - 4.0) < 1e-14 && fabs(uo[1] - 4.0) < 1e-14, "equal keys: mean");
  CHECK(fabs(ul[0] - (3.0 / sqrt(2.0) + log(4.0))) < 1e-14, "equal keys: lse");
  /* Huge scores do not overflow: max subtraction. */
  const double bq[2] = {1e3, 0}, bk[2] = {1e3, 0}, bv[1] = {0.25};
  ref_attention_problem big = base_problem();
  big.batch = big.seqlen_q = big.seqlen_k = big.heads_q = big.heads_kv = 1;
  big.head_dim = 2; big.head_dim_v = 1; big.softmax_scale = 1.0;
  double bo, bl;
  ref_attention_forward(&big, bq, bk, bv, &bo, &bl);
  CHECK(bo == 0.25 && bl == 1e6, "huge score: o %g lse %g", bo, bl);
  printf("identity, equal keys, huge scores: done\n");
}

/* Masking facts: bottom-right causal with sq > sk leaves the first sq-sk
 * rows empty (o = 0, lse = -inf); windows select exactly their range. */
static void mask_cases(void) {
  ref_attention_problem p = base_problem();
  p.batch = 1; p.seqlen_q = 5; p.seqlen_k = 2; p.heads_q = p.heads_kv = 1;
  p.head_dim = p.head_dim_v = 1; p.causal = 1;
  const double q[5] = {1, 1, 1, 1, 1}, k[2] = {0, 0}, v[2] = {2, 4};
  double o[5], lse[5];
  ref_attention_forward(&p, q, k, v, o, lse);
  for (int i = 0; i < 3; ++i)
    CHECK(o[i] == 0.0 && isinf(lse[i]) && lse[i] < 0, "causal sq>sk row %d empty", i);
  CHECK(o[3] == 2.0 && lse[3] == 0.0, "row 3 sees key 0 only (o %g)", o[3]);
  CHECK(o[4] == 3.0 && fabs(lse[4] - log(2.0)) < 1e-15, "row 4 sees both keys");
  /* sq < sk: row 0 sees keys 0..sk-sq. */
  p.seqlen_q = 2; p.seqlen_k = 5;
  const double v5[5] = {1, 2, 3, 4, 5}, k5[5] = {0, 0, 0, 0, 0};
  ref_attention_forward(&p, q, k5, v5, o, lse);
  CHECK(o[0] == 2.5 && o[1] == 3.0, "causal sq<sk: o %g %g", o[0], o[1]);
  /* Window (1, 0) without causal on sq == sk: keys i-1, i. */
  p.causal = 0; p.seqlen_q = 5; p.window_left = 1; p.window_right = 0;
  ref_attention_forward(&p, q, k5, v5, o, lse);
  CHECK(o[0] == 1.0 && o[1] == 1.5 && o[4] == 4.5, "window (1,0)");
  /* Window right only: keys >= ... up to i+2. */
  p.window_left = -1; p.window_right = 2;
  ref_attention_forward(&p, q, k5, v5, o, lse);
  CHECK(o[0] == 2.0 && o[3] == 3.0 && o[4] == 3.0, "window (-1,2): %g %g %g", o[0], o[3], o[4]);
  /* Causal overrides the right window. */
  p.causal = 1;
  ref_attention_forward(&p, q, k5, v5, o, lse);
  CHECK(o[0] == 1.0 && o[4] == 3.0, "causal + window right");
  printf("masking facts: done\n");
}

/* Varlen equals separate dense calls per sequence; an empty key sequence
 * gives o = 0 and lse = -inf; lse is laid out [heads][total_q]. */
static void varlen_cases(void) {
  const int32_t cu_q[5] = {0, 3, 3, 8, 10}, cu_k[5] = {0, 4, 6, 6, 13};
  ref_attention_problem p = base_problem();
  p.batch = 4; p.seqlen_q = 5; p.seqlen_k = 7; p.heads_q = 4; p.heads_kv = 2;
  p.head_dim = 3; p.head_dim_v = 2; p.causal = 1; p.window_left = 3;
  p.cu_seqlens_q = cu_q; p.cu_seqlens_k = cu_k;
  const double slopes[4] = {0.1, 0.2, 0.3, 0.4};
  p.alibi_slopes = slopes;
  enum { TQ = 10, TK = 13 };
  double q[TQ * 4 * 3], k[TK * 2 * 3], v[TK * 2 * 2], o[TQ * 4 * 2], lse[4 * TQ];
  tu_rng rng;
  tu_rng_seed(&rng, 5);
  tu_fill_uniform(&rng, q, sizeof q / 8, -2, 2);
  tu_fill_uniform(&rng, k, sizeof k / 8, -2, 2);
  tu_fill_uniform(&rng, v, sizeof v / 8, -2, 2);
  ref_attention_forward(&p, q, k, v, o, lse);
  for (int b = 0; b < 4; ++b) {
    ref_attention_problem s = p;
    s.batch = 1; s.cu_seqlens_q = s.cu_seqlens_k = NULL;
    s.seqlen_q = cu_q[b + 1] - cu_q[b];
    s.seqlen_k = cu_k[b + 1] - cu_k[b];
    if (s.seqlen_q == 0) continue;
    double so[5 * 4 * 2], sl[4 * 5];
    if (s.seqlen_k == 0) {
      for (int t = cu_q[b]; t < cu_q[b + 1]; ++t)
        for (int h = 0; h < 4; ++h) {
          CHECK(isinf(lse[h * TQ + t]) && lse[h * TQ + t] < 0, "empty keys lse");
          CHECK(o[(t * 4 + h) * 2] == 0 && o[(t * 4 + h) * 2 + 1] == 0, "empty keys o");
        }
      continue;
    }
    ref_attention_forward(&s, q + cu_q[b] * 12, k + cu_k[b] * 6, v + cu_k[b] * 4, so, sl);
    CHECK(max_diff(so, o + cu_q[b] * 8, (size_t)(s.seqlen_q * 8)) == 0.0, "varlen o seq %d", b);
    for (int h = 0; h < 4; ++h)
      CHECK(max_diff(sl + h * s.seqlen_q, lse + h * TQ + cu_q[b], (size_t)s.seqlen_q) == 0.0,
            "varlen lse seq %d head %d", b, h);
  }
  printf("varlen vs per-sequence: done\n");
}

/* Every f16 / bf16 bit pattern decodes and re-encodes to itself; midpoints
 * round to even, just above them rounds away; overflow and subnormals. */
static void rounding_cases(void) {
  long bad16 = 0, badbf = 0;
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const double x = tu_f16_value((uint16_t)b);
    if (isnan(x)) continue;
    bad16 += tu_f16_bits(x) != b || tu_round(x, FCL_F16) != x;
    const double y = tu_bf16_value((uint16_t)b);
    if (isnan(y)) continue;
    badbf += tu_bf16_bits(y) != b || tu_round(y, FCL_BF16) != y;
  }
  CHECK(bad16 == 0, "f16 round trip: %ld patterns wrong", bad16);
  CHECK(badbf == 0, "bf16 round trip: %ld patterns wrong", badbf);
  long badmid = 0;
  for (uint32_t b = 0; b < 0x7bffu; ++b) { /* positive finite f16, not the max */
    const double lo = tu_f16_value((uint16_t)b), hi = tu_f16_value((uint16_t)(b + 1));
    const double mid = 0.5 * (lo + hi);
    const uint16_t even = (b & 1) ? (uint16_t)(b + 1) : (uint16_t)b;
    badmid += tu_f16_bits(mid) != even || tu_f16_bits(-mid) != (even | 0x8000u);
    badmid += tu_f16_bits(nextafter(mid, INFINITY)) != b + 1;
    badmid += tu_f16_bits(nextafter(mid, 0)) != b;
  }
  for (uint32_t b = 0; b < 0x7f7fu; ++b) {
    const double lo = tu_bf16_value((uint16_t)b), hi = tu_bf16_value((uint16_t)(b + 1));
    const double mid = 0.5 * (lo + hi);
    const uint16_t even = (b & 1) ? (uint16_t)(b + 1) : (uint16_t)b;
    badmid += tu_bf16_bits(mid) != even;
    badmid += tu_bf16_bits(nextafter(mid, INFINITY)) != b + 1;
    badmid += tu_bf16_bits(nextafter(mid, 0)) != b;
  }
  CHECK(badmid == 0, "midpoint rounding: %ld wrong", badmid);
  CHECK(tu_f16_bits(65504.0) == 0x7bff && tu_f16_bits(65519.99) == 0x7bff &&
            tu_f16_bits(65520.0) == 0x7c00 && tu_f16_bits(-1e6) == 0xfc00,
        "f16 overflow");
  CHECK(tu_f16_bits(0x1p-24) == 1 && tu_f16_bits(0x1p-25) == 0 &&
            tu_f16_bits(0x1.0000001p-25) == 1 && tu_f16_bits(-0.0) == 0x8000,
        "f16 subnormal / zero");
  CHECK(tu_bf16_bits(1.0) == 0x3f80 && tu_bf16_bits(0x1.FFp127) == 0x7f80 &&
            tu_bf16_bits(0x1.FEp127) == 0x7f7f,
        "bf16 values / overflow");
  CHECK(tu_round(0.1, FCL_F32) == (double)0.1f, "f32 rounding");
  CHECK(isnan(tu_round(NAN, FCL_F16)) && isnan(tu_round(NAN, FCL_BF16)), "NaN stays NaN");
  unsigned char buf[4];
  tu_encode(buf, 1.5, FCL_F16);
  CHECK(tu_decode(buf, FCL_F16) == 1.5, "encode/decode f16");
  tu_encode(buf, -3.25, FCL_BF16);
  CHECK(tu_decode(buf, FCL_BF16) == -3.25, "encode/decode bf16");
  printf("f16/bf16 rounding (all bit patterns, midpoints, overflow): done\n");
}

/* The comparison rejects NaN, mismatched infinities and errors just past
 * the tolerance, and accepts errors inside it. */
static void compare_cases(void) {
  const tu_tol t = tu_tol_output(FCL_F32);
  const double ref[3] = {1.0, -0.5, 0.0};
  double got[3] = {1.0, -0.5, 0.0};
  CHECK(tu_compare(got, ref, 3, t, 0).ok, "identical arrays pass");
  got[2] = NAN;
  CHECK(!tu_compare(got, ref, 3, t, 0).ok, "NaN fails");
  got[2] = 0.0;
  got[0] = 1.0 + 1.2e-4;
  CHECK(!tu_compare(got, ref, 3, t, 0).ok, "error past tolerance fails");
  got[0] = 1.0 + 0.9e-4;
  CHECK(tu_compare(got, ref, 3, t, 0).ok, "error within tolerance passes");
  const double lref[2] = {-INFINITY, 2.0};
  double lgot[2] = {-INFINITY, 2.0};
  CHECK(tu_compare(lgot, lref, 2, tu_tol_lse(), 1).ok, "-inf matches -inf");
  lgot[0] = -1e30;
  CHECK(!tu_compare(lgot, lref, 2, tu_tol_lse(), 1).ok, "finite vs -inf fails");
  lgot[0] = -INFINITY; lgot[1] = INFINITY;
  CHECK(!tu_compare(lgot, lref, 2, tu_tol_lse(), 1).ok, "inf vs finite fails");
  printf("comparison rules: done\n");
}

int main(void) {
  const double t0 = tu_now();
  brute_force_cases();
  identity_cases();
  mask_cases();
  varlen_cases();
  rounding_cases();
  compare_cases();
  printf("test_reference: %s (%d failures, %.2f s)\n", g_failures ? "FAILED" : "passed",
         g_failures, tu_now() - t0);
  return g_failures ? 1 : 0;
}
