/* One row of the RWKV6 case table (test_rwkv6.c) run through oh_rwkv6_run
 * once per algorithm and checked against the double reference; see
 * op_harness.h. */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void oh_fill_decay(tu_rng *g, double *w, size_t n, oh_decay kind) {
  for (size_t i = 0; i < n; ++i) {
    switch (kind) {
    case OH_W_WEAK: w[i] = -exp(-3.0 + tu_rng_normal(g)); break; /* usual RWKV6 range */
    case OH_W_STRONG: w[i] = tu_rng_range(g, -25.0, -5.0); break;
    case OH_W_MIX: w[i] = tu_rng_int(g, 0, 1) ? -exp(-4.0 + tu_rng_normal(g))
                                              : tu_rng_range(g, -40.0, -15.0); break;
    case OH_W_ZERO: w[i] = 0.0; break;
    /* Decays of exactly 0 in f32 (w in [-1e4, -1e3]) between weak ones. */
    case OH_W_EXTREME: w[i] = tu_rng_int(g, 0, 1) ? -exp(-4.0 + tu_rng_normal(g))
                                                  : tu_rng_range(g, -1e4, -1e3); break;
    }
  }
}

static const char *algo_name(int a) {
  return a == OH_REC ? "recurrent" : a == OH_CHUNK ? "chunked" : "auto";
}

static void describe(const oh_rwkv6_case *c, fcl_dtype dt, char *buf, size_t n) {
  static const char *const decay[] = {"weak", "strong", "mixed", "zero", "extreme-mixed"};
  int p = 0;
#define ADD(...)                                                                  \
  do {                                                                            \
    if (p < (int)n) p += snprintf(buf + p, n - (size_t)p, __VA_ARGS__);           \
  } while (0)
  ADD("%-4s %s | ", tu_dtype_name(dt), c->name);
  if (c->nseq) {
    ADD("varlen");
    for (int i = 0; i < c->nseq; ++i) ADD("%s%d", i ? "," : " ", c->lens[i]);
  } else {
    ADD("b%lld T%lld", (long long)c->b, (long long)c->t);
  }
  ADD(" h%lld K%lld V%lld w:%s", (long long)c->h, (long long)(c->dk ? c->dk : 64),
      (long long)(c->dv ? c->dv : 64), decay[c->decay]);
  if (c->reverse) ADD(" reverse");
  if (c->scale != 0) ADD(" scale%g", c->scale);
  ADD(" h0%s ht%s dht%s dh0%s", c->no_h0 ? "-" : "+", c->no_ht ? "-" : "+",
      c->no_dht ? "-" : "+", c->no_dh0 ? "-" : "+");
  if (c->lin || c->lout) ADD(" %s/%s", tu_layout_name(c->lin), tu_layout_name(c->lout));
  if (c->off) ADD(" off%zu", c->off);
  if (c->seqlen_extra) ADD(" seqlen+%d", c->seqlen_extra);
  if (c->junk_stride0) ADD(" junk-strides[0]");
  if (c->tol != OH_TOL_DTYPE) ADD(" tol:%s", tu_dtype_name(oh_tol_dtype(c->tol, dt)));
#undef ADD
}

/* Compares, and notes "name err/max|ref|". */
static int check(const char *name, const double *got, const double *ref, size_t n, tu_tol tol,
                 const int64_t *dims, int ndims, int verbose, char *why, size_t nwhy,
                 char *errs, size_t nerrs) {
  tu_cmp c;
  const int ok = oh_check_dims(name, got, ref, n, tol, 0, dims, ndims, &c, why, nwhy);
  if (ok && verbose) tu_print_cmp(name, &c, dims, ndims);
  oh_append(errs, nerrs, " %s %.1e", name, c.ref_max > 0 ? c.max_err / c.ref_max : c.max_err);
  return ok;
}

int oh_rwkv6_case_run(fcl_context *ctx, const oh_rwkv6_case *c, fcl_dtype dt, uint64_t seed,
                      int verbose, int *runs, int *failed) {
  char text[512];
  describe(c, dt, text, sizeof text);
  const fcl_dtype tdt = oh_tol_dtype(c->tol, dt);
  ref_rwkv6_problem p;
  memset(&p, 0, sizeof p);
  int32_t cu[OH_MAX_SEQS + 1] = {0};
  p.batch = c->b;
  p.seqlen = c->t;
  if (c->nseq) {
    p.batch = c->nseq;
    p.seqlen = 0;
    for (int i = 0; i < c->nseq; ++i) {
      cu[i + 1] = cu[i] + c->lens[i];
      if (c->lens[i] > p.seqlen) p.seqlen = c->lens[i];
    }
    p.seqlen += c->seqlen_extra;
    p.cu_seqlens = cu;
  }
  const int64_t H = c->h, K = c->dk ? c->dk : 64, V = c->dv ? c->dv : 64;
  p.heads = H; p.head_dim_k = K; p.head_dim_v = V;
  p.scale = (double)c->scale; /* exactly what the float desc holds */
  p.reverse = c->reverse;
  const oh_rwkv6_sizes n = oh_rwkv6_count(&p);
  const int64_t tokens = ref_rwkv6_tokens(&p);

  /* Inputs, rounded to what the device sees, and the reference. */
  double *r = oh_dalloc(n.rk), *k = oh_dalloc(n.rk), *v = oh_dalloc(n.v), *w = oh_dalloc(n.rk),
         *u = oh_dalloc(n.u), *h0 = oh_dalloc(n.state), *dout = oh_dalloc(n.v), *dht = oh_dalloc(n.state);
  tu_rng g;
  tu_rng_seed(&g, seed);
  tu_fill_uniform(&g, r, n.rk, -1, 1);
  tu_fill_uniform(&g, k, n.rk, -1, 1);
  tu_fill_uniform(&g, v, n.v, -1, 1);
  oh_fill_decay(&g, w, n.rk, c->decay);
  tu_fill_uniform(&g, u, n.u, -1, 1);
  tu_fill_uniform(&g, h0, n.state, -1, 1);
  tu_fill_uniform(&g, dout, n.v, -1, 1);
  tu_fill_uniform(&g, dht, n.state, -1, 1);
  tu_round_array(r, n.rk, dt); tu_round_array(k, n.rk, dt); tu_round_array(w, n.rk, dt);
  tu_round_array(v, n.v, dt); tu_round_array(dout, n.v, dt); tu_round_array(u, n.u, dt);
  tu_round_array(h0, n.state, FCL_F32); tu_round_array(dht, n.state, FCL_F32);
  const double *h0_in = c->no_h0 ? NULL : h0, *dht_in = c->no_dht ? NULL : dht;
  /* o, ht, dr, dk, dv, dw, du, dh0: reference and device. */
  const size_t cnt[8] = {n.v, n.state, n.rk, n.rk, n.v, n.rk, n.u, n.state};
  double *ref[8], *got[8];
  for (int i = 0; i < 8; ++i) {
    ref[i] = oh_dalloc(cnt[i]);
    got[i] = oh_dalloc(cnt[i]);
  }
  ref_rwkv6_forward(&p, r, k, v, w, u, h0_in, ref[0], ref[1]);
  if (ref_rwkv6_backward(&p, r, k, v, w, u, h0_in, dout, dht_in, ref[2], ref[3], ref[4], ref[5],
                         ref[6], ref[7]))
    abort();

  /* Views: inputs (r k v w dout) in lin, outputs (o dr dk dv dw) in lout,
   * starting off + i elements in, each followed by spare elements. With no
   * token at all the library still wants room for one token row (its
   * extent treats a 0-length dimension as 1), which this is not about. */
  oh_opts opts;
  memset(&opts, 0, sizeof opts);
  const size_t tail = tokens ? 5 : (size_t)(H * (K > V ? K : V)) + 5;
  for (int i = 0; i < 10; ++i)
    opts.view[i] = (oh_view){i < OH_R6_O ? c->lin : c->lout, c->off ? c->off + (size_t)i : 0,
                             tail};
  opts.out_tail = 24;
  opts.junk_stride0 = c->junk_stride0;
  opts.check_inputs = 1;
  const oh_rwkv6_in in = {r, k, v, w, u, h0_in, dout, dht_in};
  const int64_t bq = c->nseq ? 1 : p.batch, sq = c->nseq ? tokens : p.seqlen;
  const int64_t kdims[4] = {bq, sq, H, K}, vdims[4] = {bq, sq, H, V},
                sdims[4] = {p.batch, H, K, V}, udims[2] = {H, K};
  const int64_t *dims[8] = {vdims, sdims, kdims, kdims, vdims, kdims, udims, sdims};
  static const char *const names[8] = {"o", "ht", "dr", "dk", "dv", "dw", "du", "dh0"};
  const int want[8] = {1, !c->no_ht, 1, 1, 1, 1, 1, !c->no_dh0};
  const tu_tol tol = tu_tol_rwkv6(tdt), tol_state = tu_tol_rwkv6_state();
  const int algos = c->algos ? c->algos : OH_ALL_ALGOS;
  int all_ok = 1;
  for (int a = OH_REC; a <= OH_AUTO; a <<= 1) {
    if (!(algos & a)) continue;
    const double t0 = tu_now();
    char why[2048] = "", errs[512] = "";
    opts.bwd_runs = a == OH_AUTO ? 1 : 2; /* bit-identical (AUTO is one of the two) */
    oh_rwkv6_out out = {got[0], want[1] ? got[1] : NULL, got[2], got[3], got[4], got[5],
                        got[6], want[7] ? got[7] : NULL, 0.0, 0.0, 0, 0};
    const fcl_rwkv6_algorithm algo = a == OH_REC     ? FCL_RWKV6_RECURRENT
                                     : a == OH_CHUNK ? FCL_RWKV6_CHUNKED
                                                     : FCL_RWKV6_AUTO;
    int ok = oh_rwkv6_run(ctx, &p, dt, algo, &opts, &in, &out, why, sizeof why) == 0;
    for (int i = 0; i < 8; ++i) {
      if (!want[i] || !(i < 2 ? out.fwd_read : out.bwd_read)) continue;
      ok &= check(names[i], got[i], ref[i], cnt[i], i == 1 || i == 7 ? tol_state : tol, dims[i],
                  i == 6 ? 2 : 4, verbose, why, sizeof why, errs, sizeof errs);
    }
    ok &= out.fwd_read && out.bwd_read;
    printf("%s %-9s %s |%s%s | %.2f s\n", ok ? "PASS" : "FAIL", algo_name(a), text, why, errs,
           tu_now() - t0);
    fflush(stdout);
    ++*runs;
    if (!ok) {
      ++*failed;
      all_ok = 0;
    }
  }
  for (int i = 0; i < 8; ++i) {
    free(ref[i]);
    free(got[i]);
  }
  free(r); free(k); free(v); free(w); free(u); free(h0); free(dout); free(dht);
  return all_ok;
}
