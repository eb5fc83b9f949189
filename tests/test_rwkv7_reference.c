/* Device-free check of the RWKV7 double reference (ref_rwkv7.c):
 *  - every gradient of the backward (dr, dw, dk, dv, da, db, dh0) against
 *    central finite differences of L = sum(dout * o) + sum(dht * ht), for
 *    every element of every input (r, w, k, v, a, b, h0): reverse on and
 *    off, varlen with zero-length and length-1 sequences, h0 and dht NULL
 *    or not, the three decay kinds, inputs as the models make them
 *    (a = -kk, b = kk * U(0, 0.1)) and general a, b, K != V, lengths that
 *    cross the backward's checkpoint segments;
 *  - the forward against a hand-written two-step example;
 *  - varlen equals one dense call per sequence. */
#include "ref_rwkv7.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0;

#define CHECK(cond, ...) TU_CHECK(g_failures, cond, __VA_ARGS__)

typedef struct {
  ref_rwkv7_problem p;
  size_t nk, nv, ns; /* element counts: r/w/k/a/b, v/o, state */
  double *x[7];      /* r, w, k, v, a, b, h0 */
  double *dout, *dht;
  int has_h0, has_dht;
} prob;

enum { R, W, KK, VV, A, B, H0 };
static const char *const names[7] = {"r", "w", "k", "v", "a", "b", "h0"};

static double *alloc_d(size_t n) {
  double *x = calloc(n ? n : 1, sizeof(double));
  if (!x) abort();
  return x;
}

static void prob_init(prob *P, int64_t batch, int64_t seqlen, int64_t heads, int64_t K,
                      int64_t V, double scale, int reverse, const int32_t *cu, int has_h0,
                      int has_dht, ref_rwkv7_decay kind, int general, uint64_t seed) {
  memset(P, 0, sizeof *P);
  P->p = (ref_rwkv7_problem){batch, seqlen, heads, K, V, scale, reverse, cu};
  const int64_t t = ref_rwkv7_tokens(&P->p);
  P->nk = (size_t)(t * heads * K);
  P->nv = (size_t)(t * heads * V);
  P->ns = (size_t)(batch * heads * K * V);
  P->has_h0 = has_h0, P->has_dht = has_dht;
  for (int i = 0; i < 7; ++i) P->x[i] = alloc_d(i == VV ? P->nv : i == H0 ? P->ns : P->nk);
  P->dout = alloc_d(P->nv);
  P->dht = alloc_d(P->ns);
  tu_rng g;
  tu_rng_seed(&g, seed);
  ref_rwkv7_fill(&g, &P->p, kind, P->x[R], P->x[W], P->x[KK], P->x[VV], P->x[A], P->x[B]);
  if (general) { /* a, b unrelated to each other */
    tu_fill_uniform(&g, P->x[A], P->nk, -0.6, 0.6);
    tu_fill_uniform(&g, P->x[B], P->nk, -0.6, 0.6);
  }
  if (has_h0) tu_fill_uniform(&g, P->x[H0], P->ns, -1, 1);
  tu_fill_uniform(&g, P->dout, P->nv, -1, 1);
  if (has_dht) tu_fill_uniform(&g, P->dht, P->ns, -1, 1);
}

static void prob_free(prob *P) {
  for (int i = 0; i < 7; ++i) free(P->x[i]);
  free(P->dout);
  free(P->dht);
}

static ref_rwkv7_in inputs(const prob *P, int with_h0) {
  return (ref_rwkv7_in){P->x[R], P->x[W], P->x[KK], P->x[VV], P->x[A], P->x[B],
                        with_h0 ? P->x[H0] : NULL};
}

/* L = sum(dout * o) + sum(dht * ht), h0 always passed (zero when "NULL"). */
static double loss(const prob *P, double *o, double *ht) {
  const ref_rwkv7_in in = inputs(P, 1);
  ref_rwkv7_forward(&P->p, &in, o, ht);
  double L = 0.0;
  for (size_t i = 0; i < P->nv; ++i) L += P->dout[i] * o[i];
  for (size_t i = 0; i < P->ns; ++i) L += P->dht[i] * ht[i];
  return L;
}

/* The analytical gradient g of input x (n values) against central
 * differences: allowed 1e-7 * max|g| + 1e-6 |g_i| (double with eps = 1e-5
 * errs by ~1e-10 here; a wrong formula errs by O(|g|)). */
static void fd_one(prob *P, const char *what, int which, const double *g, double *o, double *ht) {
  double *x = P->x[which];
  const size_t n = which == VV ? P->nv : which == H0 ? P->ns : P->nk;
  double gmax = 0.0, worst = 0.0, worst_fd = 0.0;
  size_t nbad = 0, worst_i = 0;
  for (size_t i = 0; i < n; ++i) gmax = fmax(gmax, fabs(g[i]));
  const double floor_abs = 1e-7 * (gmax > 1e-3 ? gmax : 1e-3);
  for (size_t i = 0; i < n; ++i) {
    const double x0 = x[i], eps = 1e-5;
    x[i] = x0 + eps;
    const double lp = loss(P, o, ht);
    x[i] = x0 - eps;
    const double lm = loss(P, o, ht);
    x[i] = x0;
    const double fd = (lp - lm) / (2 * eps);
    const double err = fabs(fd - g[i]), allowed = floor_abs + 1e-6 * fabs(g[i]);
    if (!(err <= allowed)) ++nbad;
    if (!(err / allowed <= worst)) worst = err / allowed, worst_i = i, worst_fd = fd;
  }
  CHECK(nbad == 0, "%s: d%s: %zu of %zu elements off; worst [%zu] fd %.12g analytic %.12g",
        what, names[which], nbad, n, worst_i, worst_fd, g[worst_i]);
  CHECK(n == 0 || gmax > 0 || which == H0, "%s: d%s is all zero", what, names[which]);
}

static void fd_case(const char *what, int64_t batch, int64_t seqlen, int64_t heads, int64_t K,
                    int64_t V, double scale, int reverse, const int32_t *cu, int has_h0,
                    int has_dht, int want_dh0, ref_rwkv7_decay kind, int general,
                    uint64_t seed) {
  prob P;
  prob_init(&P, batch, seqlen, heads, K, V, scale, reverse, cu, has_h0, has_dht, kind, general,
            seed);
  double *o = alloc_d(P.nv), *ht = alloc_d(P.ns), *d[7];
  for (int i = 0; i < 7; ++i) d[i] = alloc_d(i == VV ? P.nv : i == H0 ? P.ns : P.nk);
  const ref_rwkv7_grads gr = {d[R], d[W], d[KK], d[VV], d[A], d[B], want_dh0 ? d[H0] : NULL};
  const ref_rwkv7_in in = inputs(&P, has_h0);
  const int rc = ref_rwkv7_backward(&P.p, &in, P.dout, has_dht ? P.dht : NULL, &gr);
  CHECK(rc == 0, "%s: backward returned %d", what, rc);
  const int before = g_failures;
  for (int i = 0; i < 7; ++i)
    if (i != H0 || want_dh0) fd_one(&P, what, i, d[i], o, ht);
  printf("%s %s (%lld tokens)\n", g_failures == before ? "ok  " : "FAIL", what,
         (long long)ref_rwkv7_tokens(&P.p));
  free(o); free(ht);
  for (int i = 0; i < 7; ++i) free(d[i]);
  prob_free(&P);
}

static void fd_cases(void) {
  static const int32_t cu1[5] = {0, 3, 3, 4, 9}; /* lengths 3, 0, 1, 5 */
  static const int32_t cu2[4] = {0, 1, 1, 8};    /* lengths 1, 0, 7 */
  const ref_rwkv7_decay S = REF_RWKV7_W_STRONG, M = REF_RWKV7_W_MODEL, Z = REF_RWKV7_W_ZERO;
  fd_case("fd: T=1", 1, 1, 1, 3, 2, 0.0, 0, NULL, 1, 1, 1, M, 0, 11);
  fd_case("fd: b2 T5 h2 K3 V4", 2, 5, 2, 3, 4, 0.0, 0, NULL, 1, 1, 1, M, 0, 12);
  fd_case("fd: b2 T5 h2 K3 V4 reverse general a b", 2, 5, 2, 3, 4, 0.0, 1, NULL, 1, 1, 1, M, 1,
          13);
  fd_case("fd: K4 V2 scale 0.7 w U(-8,-6)", 1, 6, 2, 4, 2, 0.7, 0, NULL, 1, 1, 1, S, 0, 14);
  fd_case("fd: K4 V3 w U(-8,-6) general a b reverse", 1, 6, 1, 4, 3, 1.0, 1, NULL, 1, 1, 1, S,
          1, 15);
  fd_case("fd: zero decay (w = 0)", 1, 4, 1, 2, 3, 0.0, 0, NULL, 1, 1, 1, Z, 1, 16);
  fd_case("fd: h0 NULL, dh0 wanted", 2, 4, 1, 2, 3, 0.0, 0, NULL, 0, 1, 1, M, 0, 17);
  fd_case("fd: h0 NULL, dht NULL, dh0 wanted", 1, 4, 2, 3, 2, 0.0, 1, NULL, 0, 0, 1, M, 1, 18);
  fd_case("fd: dht NULL, dh0 not wanted", 1, 5, 1, 3, 2, 0.0, 0, NULL, 1, 0, 0, M, 0, 19);
  fd_case("fd: varlen 3,0,1,5", 4, 5, 2, 3, 2, 0.0, 0, cu1, 1, 1, 1, M, 1, 20);
  fd_case("fd: varlen 3,0,1,5 reverse", 4, 5, 2, 3, 2, 0.0, 1, cu1, 1, 1, 1, S, 0, 21);
  fd_case("fd: varlen 1,0,7 h0 NULL", 3, 7, 1, 2, 3, 0.5, 1, cu2, 0, 1, 1, M, 1, 22);
  /* Several checkpoint segments with a partial last one. */
  fd_case("fd: T=37 (checkpoint segments)", 1, 37, 1, 2, 3, 0.0, 0, NULL, 1, 1, 1, M, 1, 23);
  fd_case("fd: T=37 reverse", 1, 37, 1, 3, 2, 0.0, 1, NULL, 1, 1, 1, M, 0, 24);
}

/* K = V = 1, T = 2, by hand: S1 = e0 h0 + b0 a0 h0 + k0 v0, o0 = s r0 S1, ... */
static void hand_case(void) {
  const double r[2] = {0.5, -1.5}, w[2] = {-0.5, -2.0}, k[2] = {2.0, 0.25}, v[2] = {-1.0, 3.0},
               a[2] = {-0.3, 0.6}, b[2] = {0.2, -0.1}, h0[1] = {1.25};
  const double s = 0.3;
  double o[2], ht[1];
  ref_rwkv7_problem p = {1, 2, 1, 1, 1, s, 0, NULL};
  const ref_rwkv7_in in = {r, w, k, v, a, b, h0};
  ref_rwkv7_forward(&p, &in, o, ht);
  const double S1 = exp(w[0]) * h0[0] + b[0] * a[0] * h0[0] + k[0] * v[0];
  const double S2 = exp(w[1]) * S1 + b[1] * a[1] * S1 + k[1] * v[1];
  CHECK(fabs(o[0] - s * r[0] * S1) < 1e-15 && fabs(o[1] - s * r[1] * S2) < 1e-15 &&
            fabs(ht[0] - S2) < 1e-15,
        "hand example: o %g %g ht %g, want %g %g %g", o[0], o[1], ht[0], s * r[0] * S1,
        s * r[1] * S2, S2);
  p.reverse = 1;
  ref_rwkv7_forward(&p, &in, o, ht);
  const double R1 = exp(w[1]) * h0[0] + b[1] * a[1] * h0[0] + k[1] * v[1];
  const double R2 = exp(w[0]) * R1 + b[0] * a[0] * R1 + k[0] * v[0];
  CHECK(fabs(o[1] - s * r[1] * R1) < 1e-15 && fabs(o[0] - s * r[0] * R2) < 1e-15 &&
            fabs(ht[0] - R2) < 1e-15,
        "hand example reverse: o %g %g ht %g", o[0], o[1], ht[0]);
  printf("hand-written example: done\n");
}

/* Varlen with lengths {4, 0, 1, 6} equals one dense call per sequence. */
static void varlen_consistency(void) {
  static const int32_t cu[5] = {0, 4, 4, 5, 11};
  const int64_t H = 2, K = 3, V = 4, NS = 4;
  for (int rev = 0; rev < 2; ++rev) {
    prob P;
    prob_init(&P, NS, 6, H, K, V, 0.0, rev, cu, 1, 1, REF_RWKV7_W_MODEL, 1, 31 + (uint64_t)rev);
    double *o = alloc_d(P.nv), *ht = alloc_d(P.ns), *d[7];
    for (int i = 0; i < 7; ++i) d[i] = alloc_d(i == VV ? P.nv : i == H0 ? P.ns : P.nk);
    const ref_rwkv7_in in = inputs(&P, 1);
    const ref_rwkv7_grads gr = {d[R], d[W], d[KK], d[VV], d[A], d[B], d[H0]};
    ref_rwkv7_forward(&P.p, &in, o, ht);
    if (ref_rwkv7_backward(&P.p, &in, P.dout, P.dht, &gr)) abort();
    double worst = 0.0;
    for (int64_t n = 0; n < NS; ++n) {
      const int64_t len = cu[n + 1] - cu[n];
      const size_t ok = (size_t)(cu[n] * H * K), ov = (size_t)(cu[n] * H * V),
                   os = (size_t)(n * H * K * V), nk = (size_t)(len * H * K),
                   nv = (size_t)(len * H * V), ns = (size_t)(H * K * V);
      const ref_rwkv7_problem q = {1, len, H, K, V, 0.0, rev, NULL};
      const ref_rwkv7_in qi = {P.x[R] + ok, P.x[W] + ok, P.x[KK] + ok, P.x[VV] + ov,
                               P.x[A] + ok, P.x[B] + ok, P.x[H0] + os};
      double *qo = alloc_d(nv), *qh = alloc_d(ns), *e[7];
      for (int i = 0; i < 7; ++i) e[i] = alloc_d(i == VV ? nv : i == H0 ? ns : nk);
      const ref_rwkv7_grads qg = {e[R], e[W], e[KK], e[VV], e[A], e[B], e[H0]};
      ref_rwkv7_forward(&q, &qi, qo, qh);
      if (ref_rwkv7_backward(&q, &qi, P.dout + ov, P.dht + os, &qg)) abort();
      for (size_t i = 0; i < nv; ++i) worst = fmax(worst, fabs(qo[i] - o[ov + i]));
      for (size_t i = 0; i < ns; ++i)
        worst = fmax(worst, fmax(fabs(qh[i] - ht[os + i]), fabs(e[H0][i] - d[H0][os + i])));
      for (int x = 0; x < 6; ++x)
        for (size_t i = 0; i < (x == VV ? nv : nk); ++i)
          worst = fmax(worst, fabs(e[x][i] - d[x][(x == VV ? ov : ok) + i]));
      free(qo); free(qh);
      for (int i = 0; i < 7; ++i) free(e[i]);
    }
    CHECK(worst < 1e-13, "varlen%s differs from per-sequence dense calls by %g",
          rev ? " reverse" : "", worst);
    free(o); free(ht);
    for (int i = 0; i < 7; ++i) free(d[i]);
    prob_free(&P);
  }
  printf("varlen = per-sequence dense calls (reverse off and on): done\n");
}

int main(void) {
  const double t0 = tu_now();
  fd_cases();
  hand_case();
  varlen_consistency();
  printf("test_rwkv7_reference: %s (%d failures, %.2f s)\n", g_failures ? "FAILED" : "passed",
         g_failures, tu_now() - t0);
  return g_failures ? 1 : 0;
}
