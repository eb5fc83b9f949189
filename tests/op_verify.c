/* Comparisons with the double references, and oh_attention_verify /
 * oh_rwkv6_verify, which run an operation through op_harness.c and check
 * every output; see op_harness.h. */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double oh_grad_tol(fcl_dtype t) { return tu_tol_grad(t).atol; }
tu_tol oh_rwkv6_tol(fcl_dtype t) { return tu_tol_rwkv6(t); }
tu_tol oh_rwkv6_state_tol(void) { return tu_tol_rwkv6_state(); }

fcl_dtype oh_tol_dtype(oh_tol_class c, fcl_dtype run) {
  switch (c) {
  case OH_TOL_F32: return FCL_F32;
  case OH_TOL_F16: return FCL_F16;
  case OH_TOL_BF16: return FCL_BF16;
  case OH_TOL_DTYPE: break;
  }
  return run;
}

uint64_t oh_case_seed(const char *name, fcl_dtype dt) {
  uint64_t h = 1469598103934665603u; /* FNV-1a */
  for (const char *s = name; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211u;
  h = (h ^ (uint64_t)(dt + 1)) * 1099511628211u;
  return h;
}

fcl_context *oh_open_context(void) {
  fcl_context *ctx = NULL;
  const fcl_status st = fcl_context_create(NULL, &ctx);
  if (st != FCL_OK) {
    printf("FAIL: fcl_context_create(NULL) with FCL_DEVICE=%s: %s: %s\n",
           getenv("FCL_DEVICE") ? getenv("FCL_DEVICE") : "(unset)", fcl_status_string(st),
           fcl_context_last_error(NULL));
    return NULL;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  return ctx;
}

int oh_selected(const char *name) {
  const char *f = getenv("FCL_TEST_FILTER");
  return !f || !*f || strstr(name, f) != NULL;
}

int oh_env_flag(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? strcmp(v, "0") != 0 : dflt;
}

int oh_mma_guaranteed(void) {
  return oh_env_flag("FCL_MMA_EMULATE", 0) && !oh_env_flag("FCL_DISABLE_FASTPATH", 0);
}

int oh_check_dims(const char *what, const double *got, const double *ref, size_t n,
                  tu_tol tol, int lse_style, const int64_t *dims, int ndims, tu_cmp *cmp,
                  char *why, size_t nwhy) {
  double *g = calloc(n + 1, 8), *r = calloc(n + 1, 8);
  if (!g || !r) abort();
  size_t nan_missing = 0, nan_extra = 0, first = 0;
  for (size_t i = 0; i < n; ++i) {
    g[i] = got[i];
    r[i] = ref[i];
    if (isnan(ref[i]) != isnan(got[i])) {
      if (!nan_missing && !nan_extra) first = i;
      if (isnan(ref[i])) ++nan_missing;
      else ++nan_extra;
    }
    if (isnan(ref[i]) && isnan(got[i])) g[i] = r[i] = 0.0;
  }
  const tu_cmp c = tu_compare(g, r, n, tol, lse_style);
  if (cmp) *cmp = c;
  int ok = 1;
  if (nan_missing || nan_extra) {
    ok = 0;
    if (cmp) cmp->ok = 0;
    oh_append(why, nwhy, " %s: %zu NaN missing, %zu NaN extra (first [%zu] got %g ref %g);",
              what, nan_missing, nan_extra, first, got[first], ref[first]);
  } else if (!c.ok) {
    ok = 0;
    oh_append(why, nwhy, " %s mismatch;", what);
    tu_print_cmp(what, &c, dims, ndims);
  }
  free(g);
  free(r);
  return ok;
}

int oh_check(const char *what, const double *got, const double *ref, size_t n,
             tu_tol tol, int lse_style, char *why, size_t nwhy) {
  return oh_check_dims(what, got, ref, n, tol, lse_style, NULL, 0, NULL, why, nwhy);
}

size_t oh_empty_rows_nonzero(const ref_attention_problem *p, const double *lse_ref,
                             const double *x, int64_t width, size_t *rows) {
  const int varlen = p->cu_seqlens_q != NULL;
  const int64_t nr = varlen ? p->cu_seqlens_q[p->batch] : p->batch * p->seqlen_q;
  size_t empty = 0, bad = 0;
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t h = 0; h < p->heads_q; ++h) {
      const double lr = varlen ? lse_ref[h * nr + r]
                               : lse_ref[((r / p->seqlen_q) * p->heads_q + h) * p->seqlen_q +
                                         r % p->seqlen_q];
      if (lr != -INFINITY) continue;
      ++empty;
      for (int64_t e = 0; e < width; ++e)
        if (x[(r * p->heads_q + h) * width + e] != 0.0) {
          ++bad;
          break;
        }
    }
  if (rows) *rows = empty;
  return bad;
}

double *oh_dalloc(size_t n) {
  double *x = calloc(n + 1, sizeof *x);
  if (!x) abort();
  return x;
}

double oh_max_abs(const double *x, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; ++i)
    if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
  return m;
}

int oh_attention_verify(fcl_context *ctx, const ref_attention_problem *p,
                        fcl_dtype dt, const double *q, const double *k,
                        const double *v, const double *dout, int with_lse,
                        char *why, size_t nwhy) {
  const oh_attention_sizes n = oh_attention_count(p);
  double *o_ref = oh_dalloc(n.o), *l_ref = oh_dalloc(n.lse), *o = oh_dalloc(n.o), *l = oh_dalloc(n.lse);
  double *dq = oh_dalloc(n.q), *dk = oh_dalloc(n.k), *dv = oh_dalloc(n.v);
  double *dq_ref = oh_dalloc(n.q), *dk_ref = oh_dalloc(n.k), *dv_ref = oh_dalloc(n.v);
  ref_attention_forward(p, q, k, v, o_ref, l_ref);
  int ok = oh_attention(ctx, p, dt, q, k, v, dout, o, with_lse || dout ? l : NULL, dq, dk,
                        dv, why, nwhy) == 0;
  if (ok) {
    const double bound = ref_attention_logit_bound(p, q, k);
    /* kept values weigh 1/(1-p) with dropout */
    const double vmax = oh_max_abs(v, n.v) / (1.0 - p->dropout_p);
    const tu_tol tol_o = tu_tol_with_logits(tu_tol_output(dt), bound, p->head_dim, vmax);
    const tu_tol tol_l = tu_tol_with_logits(tu_tol_lse(), bound, p->head_dim, 0.0);
    ok &= oh_check("o", o, o_ref, n.o, tol_o, 0, why, nwhy);
    if (with_lse || dout) ok &= oh_check("lse", l, l_ref, n.lse, tol_l, 1, why, nwhy);
    /* A row that sees no key: exactly 0 (lse -inf is compared above). */
    const size_t bad = oh_empty_rows_nonzero(p, l_ref, o, p->head_dim_v, NULL);
    if (bad) {
      ok = 0;
      oh_append(why, nwhy, " %zu rows that see no key are not 0;", bad);
    }
  }
  if (ok && dout) {
    ref_attention_backward_given_o(p, q, k, v, dout, o, dq_ref, dk_ref, dv_ref);
    /* What the dtype can hold: gradients of a saturated softmax (~1e-31)
     * are 0 in f16, which a tolerance relative to max|ref| cannot see. */
    tu_round_array(dq_ref, n.q, dt);
    tu_round_array(dk_ref, n.k, dt);
    tu_round_array(dv_ref, n.v, dt);
    const tu_tol tol_g = {oh_grad_tol(dt), 0.0, 0.0};
    ok &= oh_check("dq", dq, dq_ref, n.q, tol_g, 0, why, nwhy);
    ok &= oh_check("dk", dk, dk_ref, n.k, tol_g, 0, why, nwhy);
    ok &= oh_check("dv", dv, dv_ref, n.v, tol_g, 0, why, nwhy);
  }
  free(o_ref); free(l_ref); free(o); free(l); free(dq); free(dk); free(dv);
  free(dq_ref); free(dk_ref); free(dv_ref);
  return ok;
}

int oh_rwkv6_verify(fcl_context *ctx, const ref_rwkv6_problem *p, fcl_dtype dt,
                    fcl_rwkv6_algorithm algo, const double *r, const double *k,
                    const double *v, const double *w, const double *u,
                    const double *h0, const double *dout, const double *dht,
                    char *why, size_t nwhy) {
  const oh_rwkv6_sizes n = oh_rwkv6_count(p);
  double *o_ref = oh_dalloc(n.v), *ht_ref = oh_dalloc(n.state), *o = oh_dalloc(n.v), *ht = oh_dalloc(n.state);
  double *g[6], *g_ref[6];
  const size_t gn[6] = {n.rk, n.rk, n.v, n.rk, n.u, n.state};
  const char *gname[6] = {"dr", "dk", "dv", "dw", "du", "dh0"};
  for (int i = 0; i < 6; ++i) {
    g[i] = oh_dalloc(gn[i]);
    g_ref[i] = oh_dalloc(gn[i]);
  }
  ref_rwkv6_forward(p, r, k, v, w, u, h0, o_ref, ht_ref);
  int ok = oh_rwkv6(ctx, p, dt, algo, r, k, v, w, u, h0, dout, dht, o, ht, g[0], g[1], g[2],
                    g[3], g[4], g[5], why, nwhy) == 0;
  if (ok) {
    ok &= oh_check("o", o, o_ref, n.v, oh_rwkv6_tol(dt), 0, why, nwhy);
    ok &= oh_check("ht", ht, ht_ref, n.state, oh_rwkv6_state_tol(), 0, why, nwhy);
  }
  if (ok && dout) {
    if (ref_rwkv6_backward(p, r, k, v, w, u, h0, dout, dht, g_ref[0], g_ref[1], g_ref[2],
                           g_ref[3], g_ref[4], g_ref[5]))
      abort();
    for (int i = 0; i < 6; ++i)
      ok &= oh_check(gname[i], g[i], g_ref[i], gn[i],
                     i == 5 ? oh_rwkv6_state_tol() : oh_rwkv6_tol(dt), 0, why, nwhy);
  }
  free(o_ref); free(ht_ref); free(o); free(ht);
  for (int i = 0; i < 6; ++i) {
    free(g[i]);
    free(g_ref[i]);
  }
  return ok;
}

int oh_attention_verify_random(fcl_context *ctx, const ref_attention_problem *p, fcl_dtype dt,
                               uint64_t seed, char *why, size_t nwhy) {
  const oh_attention_sizes s = oh_attention_count(p);
  double *q = malloc(8 * s.q), *k = malloc(8 * s.k), *v = malloc(8 * s.v);
  int ok = q && k && v;
  if (!ok) snprintf(why, nwhy, "out of host memory");
  if (ok) {
    tu_rng g;
    tu_rng_seed(&g, seed);
    tu_fill_uniform(&g, q, s.q, -1, 1);
    tu_fill_uniform(&g, k, s.k, -1, 1);
    tu_fill_uniform(&g, v, s.v, -1, 1);
    ok = oh_attention_verify(ctx, p, dt, q, k, v, NULL, 1, why, nwhy);
  }
  free(q);
  free(k);
  free(v);
  return ok;
}
