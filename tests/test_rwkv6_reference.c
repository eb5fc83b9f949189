/* Device-free check of the RWKV6 double reference (ref_rwkv6.c):
 *  - every gradient of the backward (dr, dk, dv, dw, du, dh0) against
 *    central finite differences of L = sum(dout * o) + sum(dht * ht), for
 *    every element of every input (r, k, v, w, u, h0), with reverse on and
 *    off, varlen with zero-length and length-1 sequences, h0 and dht NULL
 *    or not, strong and weak decays, K != V, lengths that cross the
 *    backward's checkpoint segments;
 *  - the forward against a hand-written two-step example;
 *  - consistency: varlen equals one dense call per sequence, reverse equals
 *    the forward on time-reversed inputs, scale 0 equals 1/sqrt(K). */
#include "ref_rwkv6.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0;

#define CHECK(cond, ...) TU_CHECK(g_failures, cond, __VA_ARGS__)

typedef enum { DECAY_WEAK, DECAY_STRONG, DECAY_MIX, DECAY_ZERO } decay_kind;

/* All the inputs and the loss weights of one problem. */
typedef struct {
  ref_rwkv6_problem p;
  int64_t tokens;
  size_t nk, nv, nu, ns; /* element counts: r/k/w, v/o, u, state */
  double *r, *k, *v, *w, *u, *h0, *dout, *dht;
  int has_h0, has_dht;
} prob;

static double *alloc_d(size_t n) {
  double *x = calloc(n ? n : 1, sizeof(double));
  if (!x) abort();
  return x;
}

static void fill_w(tu_rng *g, double *w, size_t n, decay_kind kind) {
  for (size_t i = 0; i < n; ++i) {
    switch (kind) {
    case DECAY_WEAK: w[i] = -exp(-3.0 + tu_rng_normal(g)); break;
    /* Strong enough that exp(w) is small, weak enough that the finite
     * difference of dw is still far above its rounding noise. */
    case DECAY_STRONG: w[i] = tu_rng_range(g, -6.0, -2.0); break;
    case DECAY_MIX: w[i] = tu_rng_int(g, 0, 1) ? -exp(-4.0 + tu_rng_normal(g))
                                              : tu_rng_range(g, -8.0, -4.0); break;
    case DECAY_ZERO: w[i] = 0.0; break;
    }
  }
}

static void prob_init(prob *P, int64_t batch, int64_t seqlen, int64_t heads, int64_t K,
                      int64_t V, double scale, int reverse, const int32_t *cu,
                      int has_h0, int has_dht, decay_kind kind, uint64_t seed) {
  memset(P, 0, sizeof *P);
  P->p.batch = batch; P->p.seqlen = seqlen; P->p.heads = heads;
  P->p.head_dim_k = K; P->p.head_dim_v = V; P->p.scale = scale;
  P->p.reverse = reverse; P->p.cu_seqlens = cu;
  P->tokens = ref_rwkv6_tokens(&P->p);
  P->nk = (size_t)(P->tokens * heads * K);
  P->nv = (size_t)(P->tokens * heads * V);
  P->nu = (size_t)(heads * K);
  P->ns = (size_t)(batch * heads * K * V);
  P->has_h0 = has_h0; P->has_dht = has_dht;
  tu_rng g;
  tu_rng_seed(&g, seed);
  P->r = alloc_d(P->nk); P->k = alloc_d(P->nk); P->w = alloc_d(P->nk);
  P->v = alloc_d(P->nv); P->dout = alloc_d(P->nv);
  P->u = alloc_d(P->nu);
  P->h0 = alloc_d(P->ns); P->dht = alloc_d(P->ns); /* zero when "NULL" */
  tu_fill_uniform(&g, P->r, P->nk, -1, 1);
  tu_fill_uniform(&g, P->k, P->nk, -1, 1);
  tu_fill_uniform(&g, P->v, P->nv, -1, 1);
  fill_w(&g, P->w, P->nk, kind);
  tu_fill_uniform(&g, P->u, P->nu, -1, 1);
  if (has_h0) tu_fill_uniform(&g, P->h0, P->ns, -1, 1);
  tu_fill_uniform(&g, P->dout, P->nv, -1, 1);
  if (has_dht) tu_fill_uniform(&g, P->dht, P->ns, -1, 1);
}

static void prob_free(prob *P) {
  free(P->r); free(P->k); free(P->v); free(P->w); free(P->u); free(P->h0);
  free(P->dout); free(P->dht);
}

/* L = sum(dout * o) + sum(dht * ht), with the h0 array always passed (it
 * is zero for a "NULL" h0, which must be the same thing). */
static double loss(const prob *P, double *o, double *ht) {
  ref_rwkv6_forward(&P->p, P->r, P->k, P->v, P->w, P->u, P->h0, o, ht);
  double L = 0.0;
  for (size_t i = 0; i < P->nv; ++i) L += P->dout[i] * o[i];
  for (size_t i = 0; i < P->ns; ++i) L += P->dht[i] * ht[i];
  return L;
}

/* Compares the analytical gradient g of array x (n values) with central
 * differences. Allowed error: 1e-7 * max|g| + 1e-6 * |g_i| (double with
 * eps = 1e-5 errs by ~1e-10 here; a wrong formula errs by O(|g|)). */
static void fd_one(prob *P, const char *what, const char *name, double *x, size_t n,
                   const double *g, double *o, double *ht) {
  double gmax = 0.0, worst = 0.0;
  size_t nbad = 0, worst_i = 0;
  double worst_fd = 0.0;
  for (size_t i = 0; i < n; ++i)
    if (fabs(g[i]) > gmax) gmax = fabs(g[i]);
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
    if (!(err / allowed <= worst)) {
      worst = err / allowed; worst_i = i; worst_fd = fd;
    }
  }
  CHECK(nbad == 0, "%s: d%s: %zu of %zu elements off; worst [%zu] fd %.12g analytic %.12g",
        what, name, nbad, n, worst_i, worst_fd, g[worst_i]);
  if (getenv("FCL_TEST_VERBOSE"))
    printf("    d%-3s max|g| %.3g worst err/allowed %.3g\n", name, gmax, worst);
}

static void fd_case(const char *what, int64_t batch, int64_t seqlen, int64_t heads,
                    int64_t K, int64_t V, double scale, int reverse, const int32_t *cu,
                    int has_h0, int has_dht, int want_dh0, decay_kind kind, uint64_t seed) {
  prob P;
  prob_init(&P, batch, seqlen, heads, K, V, scale, reverse, cu, has_h0, has_dht, kind, seed);
  double *o = alloc_d(P.nv), *ht = alloc_d(P.ns);
  double *dr = alloc_d(P.nk), *dk = alloc_d(P.nk), *dw = alloc_d(P.nk),
         *dv = alloc_d(P.nv), *du = alloc_d(P.nu), *dh0 = alloc_d(P.ns);
  const int rc = ref_rwkv6_backward(&P.p, P.r, P.k, P.v, P.w, P.u, has_h0 ? P.h0 : NULL,
                                    P.dout, has_dht ? P.dht : NULL, dr, dk, dv, dw, du,
                                    want_dh0 ? dh0 : NULL);
  CHECK(rc == 0, "%s: backward returned %d", what, rc);
  const int before = g_failures;
  fd_one(&P, what, "r", P.r, P.nk, dr, o, ht);
  fd_one(&P, what, "k", P.k, P.nk, dk, o, ht);
  fd_one(&P, what, "v", P.v, P.nv, dv, o, ht);
  fd_one(&P, what, "w", P.w, P.nk, dw, o, ht);
  fd_one(&P, what, "u", P.u, P.nu, du, o, ht);
  if (want_dh0) fd_one(&P, what, "h0", P.h0, P.ns, dh0, o, ht);
  /* The gradients are not trivially zero. */
  double m[5] = {0, 0, 0, 0, 0};
  for (size_t i = 0; i < P.nk; ++i) {
    m[0] = fmax(m[0], fabs(dr[i])); m[1] = fmax(m[1], fabs(dk[i]));
    m[3] = fmax(m[3], fabs(dw[i]));
  }
  for (size_t i = 0; i < P.nv; ++i) m[2] = fmax(m[2], fabs(dv[i]));
  for (size_t i = 0; i < P.nu; ++i) m[4] = fmax(m[4], fabs(du[i]));
  if (P.tokens > 1 && kind != DECAY_ZERO)
    CHECK(m[0] > 0 && m[1] > 0 && m[2] > 0 && m[3] > 0 && m[4] > 0,
          "%s: a gradient is all zero", what);
  printf("%s %s (%lld tokens, %zu inputs)\n", g_failures == before ? "ok  " : "FAIL", what,
         (long long)P.tokens, 3 * P.nk + P.nv + P.nu + (want_dh0 ? P.ns : 0));
  free(o); free(ht); free(dr); free(dk); free(dw); free(dv); free(du); free(dh0);
  prob_free(&P);
}

static void fd_cases(void) {
  static const int32_t cu1[5] = {0, 3, 3, 4, 9};     /* lengths 3, 0, 1, 5 */
  static const int32_t cu2[4] = {0, 1, 1, 8};        /* lengths 1, 0, 7 */
  fd_case("fd: T=1", 1, 1, 1, 3, 2, 0.0, 0, NULL, 1, 1, 1, DECAY_WEAK, 11);
  fd_case("fd: b2 T5 h2 K3 V4", 2, 5, 2, 3, 4, 0.0, 0, NULL, 1, 1, 1, DECAY_WEAK, 12);
  fd_case("fd: b2 T5 h2 K3 V4 reverse", 2, 5, 2, 3, 4, 0.0, 1, NULL, 1, 1, 1, DECAY_WEAK, 13);
  fd_case("fd: K4 V2 scale 0.7 strong decays", 1, 6, 2, 4, 2, 0.7, 0, NULL, 1, 1, 1,
          DECAY_STRONG, 14);
  fd_case("fd: mixed decays reverse", 1, 6, 1, 3, 3, 0.0, 1, NULL, 1, 1, 1, DECAY_MIX, 15);
  fd_case("fd: zero decay (w = 0)", 1, 4, 1, 2, 3, 0.0, 0, NULL, 1, 1, 1, DECAY_ZERO, 16);
  fd_case("fd: h0 NULL, dh0 wanted", 2, 4, 1, 2, 3, 0.0, 0, NULL, 0, 1, 1, DECAY_WEAK, 17);
  fd_case("fd: h0 NULL, dht NULL, dh0 wanted", 1, 4, 2, 3, 2, 0.0, 1, NULL, 0, 0, 1,
          DECAY_WEAK, 18);
  fd_case("fd: dht NULL, dh0 not wanted", 1, 5, 1, 3, 2, 0.0, 0, NULL, 1, 0, 0,
          DECAY_WEAK, 19);
  fd_case("fd: varlen 3,0,1,5", 4, 5, 2, 3, 2, 0.0, 0, cu1, 1, 1, 1, DECAY_WEAK, 20);
  fd_case("fd: varlen 3,0,1,5 reverse", 4, 5, 2, 3, 2, 0.0, 1, cu1, 1, 1, 1, DECAY_MIX, 21);
  fd_case("fd: varlen 1,0,7 h0 NULL", 3, 7, 1, 2, 3, 0.5, 1, cu2, 0, 1, 1, DECAY_WEAK, 22);
  /* Long enough for several checkpoint segments with a partial last one. */
  fd_case("fd: T=37 (checkpoint segments)", 1, 37, 1, 2, 3, 0.0, 0, NULL, 1, 1, 1,
          DECAY_WEAK, 23);
  fd_case("fd: T=37 reverse", 1, 37, 1, 3, 2, 0.0, 1, NULL, 1, 1, 1, DECAY_MIX, 24);
}

/* ---- the forward against a hand-written example ------------------------- */
static void hand_case(void) {
  /* K = V = 1, T = 2: o0 = s r0 (h0 + u k0 v0); S1 = h0 e^w0 + k0 v0;
   * o1 = s r1 (S1 + u k1 v1); ht = S1 e^w1 + k1 v1. */
  const double r[2] = {0.5, -1.5}, k[2] = {2.0, 0.25}, v[2] = {-1.0, 3.0},
               w[2] = {-0.5, -2.0}, u[1] = {0.75}, h0[1] = {1.25};
  const double s = 0.3;
  double o[2], ht[1];
  ref_rwkv6_problem p = {1, 2, 1, 1, 1, s, 0, NULL};
  ref_rwkv6_forward(&p, r, k, v, w, u, h0, o, ht);
  const double o0 = s * r[0] * (h0[0] + u[0] * k[0] * v[0]);
  const double S1 = h0[0] * exp(w[0]) + k[0] * v[0];
  const double o1 = s * r[1] * (S1 + u[0] * k[1] * v[1]);
  const double S2 = S1 * exp(w[1]) + k[1] * v[1];
  CHECK(fabs(o[0] - o0) < 1e-15 && fabs(o[1] - o1) < 1e-15 && fabs(ht[0] - S2) < 1e-15,
        "hand example: o %g %g ht %g, want %g %g %g", o[0], o[1], ht[0], o0, o1, S2);
  /* Reverse: step 1 first. */
  p.reverse = 1;
  ref_rwkv6_forward(&p, r, k, v, w, u, h0, o, ht);
  const double q1 = s * r[1] * (h0[0] + u[0] * k[1] * v[1]);
  const double R1 = h0[0] * exp(w[1]) + k[1] * v[1];
  const double q0 = s * r[0] * (R1 + u[0] * k[0] * v[0]);
  const double R2 = R1 * exp(w[0]) + k[0] * v[0];
  CHECK(fabs(o[0] - q0) < 1e-15 && fabs(o[1] - q1) < 1e-15 && fabs(ht[0] - R2) < 1e-15,
        "hand example reverse: o %g %g ht %g, want %g %g %g", o[0], o[1], ht[0], q0, q1, R2);
  /* K = 2, V = 1, scale 0 -> 1/sqrt(2), no h0. */
  const double r2[2] = {1.0, 2.0}, k2[2] = {3.0, -1.0}, v2[1] = {0.5}, w2[2] = {0, 0},
               u2[2] = {0.1, 0.2};
  double o2[1], ht2[2];
  ref_rwkv6_problem p2 = {1, 1, 1, 2, 1, 0.0, 0, NULL};
  ref_rwkv6_forward(&p2, r2, k2, v2, w2, u2, NULL, o2, ht2);
  const double want = (1.0 * 0.1 * 3.0 * 0.5 + 2.0 * 0.2 * -1.0 * 0.5) / sqrt(2.0);
  CHECK(fabs(o2[0] - want) < 1e-15 && ht2[0] == 1.5 && ht2[1] == -0.5,
        "hand example K=2: o %g ht %g %g, want %g 1.5 -0.5", o2[0], ht2[0], ht2[1], want);
  printf("hand-written examples: done\n");
}

/* ---- consistency -------------------------------------------------------- */
static double max_abs_diff(const double *a, const double *b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = fabs(a[i] - b[i]);
    if (!(d <= m)) m = d; /* NaN propagates */
  }
  return m;
}

/* All outputs of forward + backward of one problem. */
typedef struct {
  double *o, *ht, *dr, *dk, *dv, *dw, *du, *dh0;
} outs;

static void run_all(const prob *P, outs *X) {
  X->o = alloc_d(P->nv); X->ht = alloc_d(P->ns);
  X->dr = alloc_d(P->nk); X->dk = alloc_d(P->nk); X->dw = alloc_d(P->nk);
  X->dv = alloc_d(P->nv); X->du = alloc_d(P->nu); X->dh0 = alloc_d(P->ns);
  ref_rwkv6_forward(&P->p, P->r, P->k, P->v, P->w, P->u, P->h0, X->o, X->ht);
  if (ref_rwkv6_backward(&P->p, P->r, P->k, P->v, P->w, P->u, P->h0, P->dout, P->dht,
                         X->dr, X->dk, X->dv, X->dw, X->du, X->dh0))
    abort();
}

static void outs_free(outs *X) {
  free(X->o); free(X->ht); free(X->dr); free(X->dk); free(X->dv); free(X->dw);
  free(X->du); free(X->dh0);
}

/* Varlen with lengths {4, 0, 1, 6} equals four dense calls (batch 1). */
static void varlen_consistency(void) {
  static const int32_t cu[5] = {0, 4, 4, 5, 11};
  const int64_t H = 2, K = 3, V = 4, NS = 4;
  for (int rev = 0; rev < 2; ++rev) {
    prob P;
    prob_init(&P, NS, 6, H, K, V, 0.0, rev, cu, 1, 1, DECAY_MIX, 31 + (uint64_t)rev);
    outs X;
    run_all(&P, &X);
    double du_sum[6] = {0};
    double worst = 0.0;
    for (int64_t b = 0; b < NS; ++b) {
      const int64_t len = cu[b + 1] - cu[b];
      prob Q;
      prob_init(&Q, 1, len, H, K, V, 0.0, rev, NULL, 1, 1, DECAY_WEAK, 1);
      const size_t ok = (size_t)(cu[b] * H * K), ov = (size_t)(cu[b] * H * V),
                   os = (size_t)(b * H * K * V);
      memcpy(Q.r, P.r + ok, Q.nk * 8); memcpy(Q.k, P.k + ok, Q.nk * 8);
      memcpy(Q.w, P.w + ok, Q.nk * 8); memcpy(Q.v, P.v + ov, Q.nv * 8);
      memcpy(Q.dout, P.dout + ov, Q.nv * 8); memcpy(Q.u, P.u, Q.nu * 8);
      memcpy(Q.h0, P.h0 + os, Q.ns * 8); memcpy(Q.dht, P.dht + os, Q.ns * 8);
      outs Y;
      run_all(&Q, &Y);
      worst = fmax(worst, max_abs_diff(Y.o, X.o + ov, Q.nv));
      worst = fmax(worst, max_abs_diff(Y.dr, X.dr + ok, Q.nk));
      worst = fmax(worst, max_abs_diff(Y.dk, X.dk + ok, Q.nk));
      worst = fmax(worst, max_abs_diff(Y.dw, X.dw + ok, Q.nk));
      worst = fmax(worst, max_abs_diff(Y.dv, X.dv + ov, Q.nv));
      worst = fmax(worst, max_abs_diff(Y.ht, X.ht + os, Q.ns));
      worst = fmax(worst, max_abs_diff(Y.dh0, X.dh0 + os, Q.ns));
      for (size_t i = 0; i < Q.nu; ++i) du_sum[i] += Y.du[i];
      if (len == 0) { /* an empty sequence passes its state and gradient through */
        worst = fmax(worst, max_abs_diff(X.ht + os, P.h0 + os, Q.ns));
        worst = fmax(worst, max_abs_diff(X.dh0 + os, P.dht + os, Q.ns));
      }
      outs_free(&Y);
      prob_free(&Q);
    }
    worst = fmax(worst, max_abs_diff(du_sum, X.du, P.nu));
    CHECK(worst < 1e-13, "varlen%s differs from per-sequence dense calls by %g",
          rev ? " reverse" : "", worst);
    outs_free(&X);
    prob_free(&P);
  }
  printf("varlen = per-sequence dense calls (reverse off and on): done\n");
}

/* reverse on x equals forward on x with time flipped (outputs flipped back). */
static void reverse_consistency(void) {
  const int64_t B = 2, T = 9, H = 2, K = 3, V = 2;
  prob P, Q;
  prob_init(&P, B, T, H, K, V, 0.4, 1, NULL, 1, 1, DECAY_WEAK, 41);
  prob_init(&Q, B, T, H, K, V, 0.4, 0, NULL, 1, 1, DECAY_WEAK, 41);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t src = b * T + t, dst = b * T + (T - 1 - t);
      for (int64_t x = 0; x < H * K; ++x) {
        Q.r[dst * H * K + x] = P.r[src * H * K + x];
        Q.k[dst * H * K + x] = P.k[src * H * K + x];
        Q.w[dst * H * K + x] = P.w[src * H * K + x];
      }
      for (int64_t x = 0; x < H * V; ++x) {
        Q.v[dst * H * V + x] = P.v[src * H * V + x];
        Q.dout[dst * H * V + x] = P.dout[src * H * V + x];
      }
    }
  outs X, Y;
  run_all(&P, &X);
  run_all(&Q, &Y);
  double worst = 0.0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t src = b * T + t, dst = b * T + (T - 1 - t);
      worst = fmax(worst, max_abs_diff(X.o + src * H * V, Y.o + dst * H * V, (size_t)(H * V)));
      worst = fmax(worst, max_abs_diff(X.dv + src * H * V, Y.dv + dst * H * V, (size_t)(H * V)));
      worst = fmax(worst, max_abs_diff(X.dr + src * H * K, Y.dr + dst * H * K, (size_t)(H * K)));
      worst = fmax(worst, max_abs_diff(X.dk + src * H * K, Y.dk + dst * H * K, (size_t)(H * K)));
      worst = fmax(worst, max_abs_diff(X.dw + src * H * K, Y.dw + dst * H * K, (size_t)(H * K)));
    }
  worst = fmax(worst, max_abs_diff(X.ht, Y.ht, P.ns));
  worst = fmax(worst, max_abs_diff(X.dh0, Y.dh0, P.ns));
  worst = fmax(worst, max_abs_diff(X.du, Y.du, P.nu));
  CHECK(worst < 1e-13, "reverse differs from the time-flipped forward by %g", worst);
  outs_free(&X); outs_free(&Y);
  prob_free(&P); prob_free(&Q);

  /* scale 0 is 1/sqrt(K). */
  prob A, C;
  prob_init(&A, 1, 5, 2, 7, 3, 0.0, 0, NULL, 1, 1, DECAY_WEAK, 51);
  prob_init(&C, 1, 5, 2, 7, 3, 1.0 / sqrt(7.0), 0, NULL, 1, 1, DECAY_WEAK, 51);
  outs XA, XC;
  run_all(&A, &XA);
  run_all(&C, &XC);
  const double d = fmax(max_abs_diff(XA.o, XC.o, A.nv), max_abs_diff(XA.dr, XC.dr, A.nk));
  CHECK(d == 0.0, "scale 0 differs from 1/sqrt(K) by %g", d);
  outs_free(&XA); outs_free(&XC);
  prob_free(&A); prob_free(&C);
  printf("reverse = time-flipped forward; scale 0 = 1/sqrt(K): done\n");
}

/* A long sequence: the checkpointed backward equals the same backward run
 * per segment-sized pieces (state carried by h0/ht, gradient by dht/dh0). */
static void long_consistency(void) {
  const int64_t T = 1000, H = 1, K = 4, V = 3, cut = 617;
  prob P;
  prob_init(&P, 1, T, H, K, V, 0.0, 0, NULL, 1, 1, DECAY_WEAK, 61);
  outs X;
  run_all(&P, &X);
  /* Two pieces [0, cut) and [cut, T), chained. */
  prob A, C;
  prob_init(&A, 1, cut, H, K, V, 0.0, 0, NULL, 1, 1, DECAY_WEAK, 1);
  prob_init(&C, 1, T - cut, H, K, V, 0.0, 0, NULL, 1, 1, DECAY_WEAK, 1);
  memcpy(A.r, P.r, A.nk * 8); memcpy(A.k, P.k, A.nk * 8); memcpy(A.w, P.w, A.nk * 8);
  memcpy(A.v, P.v, A.nv * 8); memcpy(A.dout, P.dout, A.nv * 8); memcpy(A.u, P.u, A.nu * 8);
  memcpy(A.h0, P.h0, A.ns * 8);
  memcpy(C.r, P.r + A.nk, C.nk * 8); memcpy(C.k, P.k + A.nk, C.nk * 8);
  memcpy(C.w, P.w + A.nk, C.nk * 8); memcpy(C.v, P.v + A.nv, C.nv * 8);
  memcpy(C.dout, P.dout + A.nv, C.nv * 8); memcpy(C.u, P.u, C.nu * 8);
  memcpy(C.dht, P.dht, C.ns * 8);
  outs XA;
  XA.o = alloc_d(A.nv); XA.ht = alloc_d(A.ns);
  ref_rwkv6_forward(&A.p, A.r, A.k, A.v, A.w, A.u, A.h0, XA.o, XA.ht);
  memcpy(C.h0, XA.ht, C.ns * 8);
  outs XC;
  run_all(&C, &XC);
  memcpy(A.dht, XC.dh0, A.ns * 8);
  free(XA.o); free(XA.ht);
  run_all(&A, &XA);
  double worst = 0.0;
  worst = fmax(worst, max_abs_diff(XA.o, X.o, A.nv));
  worst = fmax(worst, max_abs_diff(XC.o, X.o + A.nv, C.nv));
  worst = fmax(worst, max_abs_diff(XC.ht, X.ht, P.ns));
  worst = fmax(worst, max_abs_diff(XA.dh0, X.dh0, P.ns));
  worst = fmax(worst, max_abs_diff(XA.dw, X.dw, A.nk));
  worst = fmax(worst, max_abs_diff(XC.dw, X.dw + A.nk, C.nk));
  worst = fmax(worst, max_abs_diff(XA.dk, X.dk, A.nk));
  worst = fmax(worst, max_abs_diff(XC.dv, X.dv + A.nv, C.nv));
  double du[4];
  for (int i = 0; i < 4; ++i) du[i] = XA.du[i] + XC.du[i];
  worst = fmax(worst, max_abs_diff(du, X.du, P.nu));
  CHECK(worst < 1e-10, "T=1000 in one call differs from two chained calls by %g", worst);
  outs_free(&X); outs_free(&XA); outs_free(&XC);
  prob_free(&P); prob_free(&A); prob_free(&C);
  printf("T=1000 = two chained calls (h0/ht, dht/dh0): done\n");
}

int main(void) {
  const double t0 = tu_now();
  fd_cases();
  hand_case();
  varlen_consistency();
  reverse_consistency();
  long_consistency();
  printf("test_rwkv6_reference: %s (%d failures, %.2f s)\n", g_failures ? "FAILED" : "passed",
         g_failures, tu_now() - t0);
  return g_failures ? 1 : 0;
}
