/* fa-tune workloads: the problem of a class on the device, run through the
 * public API, and for the small check problem the double-precision
 * reference of tests/ (the same tolerances as the test suites). */
#include "tune.h"

#include "ref_attention.h"
#include "ref_rwkv6.h"
#include "ref_rwkv7.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUFS 16
#define MAX_OUTS 8

typedef struct {
  const char *name;
  cl_mem      buf;
  fcl_dtype   dtype;
  size_t      n;
  double     *ref;
  tu_tol      tol;
  int         lse_style;
} output;

struct tune_workload {
  fcl_context       *ctx;
  fcl_tuning_class   cls;
  bool               check;
  fcl_attention_desc ad;
  fcl_kvcache_desc   kd;
  fcl_rwkv6_desc     rd;
  fcl_rwkv7_desc     sd;
  cl_mem             bufs[MAX_BUFS];
  int                nbufs;
  fcl_tensor         q, k, v, o, dout, dq, dk, dv, w, dw; /* RWKV6: q = r, dq = dr */
  fcl_tensor         a, b, da, db;                       /* RWKV7 */
  cl_mem             lse, u, h0, ht, dht, du, dh0;
  cl_mem             kv_lse; /* decode: lse of the check problem only (else NULL) */
  output             outs[MAX_OUTS];
  int                nouts;
  double            *host[10];
  double             work;
};

bool tune_is_attention(const fcl_variant *v) {
  return fcl_variant_op(v) == FCL_TUNING_ATTENTION_FWD ||
         fcl_variant_op(v) == FCL_TUNING_ATTENTION_BWD;
}
static bool is_attention(const fcl_variant *v) { return tune_is_attention(v); }

bool tune_is_kvcache(const fcl_variant *v) {
  return fcl_variant_op(v) == FCL_TUNING_ATTENTION_DECODE;
}

int64_t tune_check_length(const fcl_variant *v) {
  return tune_is_kvcache(v) ? 1031 : is_attention(v) ? 203 : 151;
}

const char *tune_unit(const fcl_variant *k) { return is_attention(k) ? "TFLOP/s" : "GB/s"; }

double tune_throughput(const fcl_variant *k, double work, double ms) {
  return ms > 0 ? work / (ms * 1e-3) / (is_attention(k) ? 1e12 : 1e9) : 0.0;
}

double tune_workload_work(const tune_workload *w) { return w->work; }

/* A device buffer of n elements of dtype t. With host, its values (rounded
 * to t); else a random pattern repeated over the buffer (timing only). */
static cl_mem make_buffer(tune_workload *w, size_t n, fcl_dtype t, const double *host,
                          uint64_t seed, char *why, size_t why_size) {
  const size_t es = fcl_dtype_size(t), bytes = (n ? n : 1) * es;
  cl_int err;
  cl_mem m = clCreateBuffer(fcl_context_cl(w->ctx), CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) {
    snprintf(why, why_size, "allocating %zu bytes: OpenCL error %d", bytes, err);
    return NULL;
  }
  w->bufs[w->nbufs++] = m;
  const size_t chunk = n < (1u << 20) ? (n ? n : 1) : (1u << 20);
  unsigned char *pat = malloc(chunk * es);
  if (!pat) {
    snprintf(why, why_size, "out of host memory");
    return NULL;
  }
  tu_rng g;
  tu_rng_seed(&g, seed);
  for (size_t i = 0; i < chunk; ++i)
    tu_encode(pat + i * es, host ? (i < n ? host[i] : 0.0) : tu_rng_range(&g, -1, 1), t);
  for (size_t at = 0; at < n && err == CL_SUCCESS; at += chunk) {
    size_t len = n - at < chunk ? n - at : chunk;
    if (host && at)
      for (size_t i = 0; i < len; ++i) tu_encode(pat + i * es, host[at + i], t);
    err = clEnqueueWriteBuffer(fcl_context_queue(w->ctx), m, CL_TRUE, at * es, len * es,
                               pat, 0, NULL, NULL);
  }
  free(pat);
  if (err != CL_SUCCESS) {
    snprintf(why, why_size, "uploading: OpenCL error %d", err);
    return NULL;
  }
  return m;
}

/* Dense random doubles rounded to t (check problems only). */
static double *randoms(tune_workload *w, int slot, size_t n, fcl_dtype t, uint64_t seed,
                       int kind) {
  double *x = malloc((n ? n : 1) * sizeof *x);
  if (!x) return NULL;
  w->host[slot] = x;
  tu_rng g;
  tu_rng_seed(&g, seed);
  for (size_t i = 0; i < n; ++i)
    x[i] = kind == 0 ? tu_rng_range(&g, -sqrt(3.0), sqrt(3.0))
           : kind == 1 ? tu_rng_range(&g, -1, 1)
                       : -exp(-3.0 + tu_rng_normal(&g)); /* RWKV6 log decay */
  tu_round_array(x, n, t);
  return x;
}

static void add_output(tune_workload *w, const char *name, cl_mem buf, fcl_dtype t,
                       size_t n, double *ref, tu_tol tol, int lse_style) {
  w->outs[w->nouts++] = (output){name, buf, t, n, ref, tol, lse_style};
}

/* The outputs a forward check expects: o and lse of the reference on the
 * rounded inputs (v of nv values, o of no, lse of nl), with tolerances for
 * the logits' size. */
static bool expect_forward(tune_workload *w, const ref_attention_problem *p, const double *q,
                           const double *k, const double *v, size_t nv, size_t no, size_t nl,
                           cl_mem o, cl_mem lse) {
  const fcl_dtype t = w->cls.dtype;
  const int64_t D = w->cls.head_dim;
  double *o_ref = malloc(no * sizeof *o_ref), *l_ref = malloc(nl * sizeof *l_ref);
  w->host[4] = o_ref, w->host[5] = l_ref;
  if (!o_ref || !l_ref) return false;
  ref_attention_forward(p, q, k, v, o_ref, l_ref);
  double vmax = 0;
  for (size_t i = 0; i < nv; ++i) vmax = fmax(vmax, fabs(v[i]));
  const double bound = ref_attention_logit_bound(p, q, k);
  add_output(w, "o", o, t, no, o_ref, tu_tol_with_logits(tu_tol_output(t), bound, D, vmax), 0);
  add_output(w, "lse", lse, FCL_F32, nl, l_ref,
             tu_tol_with_logits(tu_tol_lse(), bound, D, 0.0), 1);
  return true;
}

#define NEED(x)                                                                    \
  do {                                                                             \
    if (!(x)) goto fail;                                                           \
  } while (0)

static bool attention_create(tune_workload *w, int64_t T, int64_t H, char *why, size_t n) {
  const fcl_tuning_class *c = &w->cls;
  const fcl_dtype t = c->dtype;
  const int64_t D = c->head_dim, Dv = c->head_dim_v;
  const size_t nq = (size_t)(T * H * D), nv = (size_t)(T * H * Dv), nl = (size_t)(H * T);
  fcl_attention_desc *d = &w->ad;
  *d = (fcl_attention_desc)FCL_ATTENTION_DESC_INIT;
  d->batch = 1, d->seqlen_q = d->seqlen_k = T, d->heads_q = d->heads_kv = H;
  d->head_dim = D, d->head_dim_v = Dv, d->causal = c->causal;
  const bool bwd = fcl_variant_op(c->variant) == FCL_TUNING_ATTENTION_BWD;
  double *q = NULL, *k = NULL, *v = NULL, *g = NULL;
  if (w->check) {
    NEED(q = randoms(w, 0, nq, t, 1, 0));
    NEED(k = randoms(w, 1, nq, t, 2, 0));
    NEED(v = randoms(w, 2, nv, t, 3, 0));
    if (bwd) NEED(g = randoms(w, 3, nv, t, 4, 0));
  }
  cl_mem m;
  NEED(m = make_buffer(w, nq, t, q, 1, why, n)); w->q = tu_dense_view(m, t, T, H, D);
  NEED(m = make_buffer(w, nq, t, k, 2, why, n)); w->k = tu_dense_view(m, t, T, H, D);
  NEED(m = make_buffer(w, nv, t, v, 3, why, n)); w->v = tu_dense_view(m, t, T, H, Dv);
  NEED(m = make_buffer(w, nv, t, NULL, 5, why, n)); w->o = tu_dense_view(m, t, T, H, Dv);
  NEED(w->lse = make_buffer(w, nl, FCL_F32, NULL, 6, why, n));
  const double flops = 2.0 * H * (double)T * (double)T * (double)(D + Dv) * (c->causal ? 0.5 : 1.0);
  w->work = bwd ? 2.5 * flops : flops;
  ref_attention_problem p = {1, T, T, H, H, D, Dv, 0.0, c->causal, -1, -1, 0.0, NULL, NULL, NULL, 0,
                             0.0, 0, 0};
  if (!bwd) {
    if (w->check) NEED(expect_forward(w, &p, q, k, v, nv, nv, nl, w->o.buffer, w->lse));
    return true;
  }
  NEED(m = make_buffer(w, nv, t, g, 4, why, n)); w->dout = tu_dense_view(m, t, T, H, Dv);
  NEED(m = make_buffer(w, nq, t, NULL, 7, why, n)); w->dq = tu_dense_view(m, t, T, H, D);
  NEED(m = make_buffer(w, nq, t, NULL, 8, why, n)); w->dk = tu_dense_view(m, t, T, H, D);
  NEED(m = make_buffer(w, nv, t, NULL, 9, why, n)); w->dv = tu_dense_view(m, t, T, H, Dv);
  /* The backward's o and lse come from the library's forward. */
  fcl_status s = fcl_attention_forward(w->ctx, d, &w->q, &w->k, &w->v, &w->o, w->lse);
  if (s != FCL_OK) {
    snprintf(why, n, "forward for the backward: %s", fcl_context_last_error(w->ctx));
    return false;
  }
  if (w->check) {
    double *o_got = malloc(nv * sizeof *o_got);
    w->host[4] = o_got;
    NEED(o_got);
    unsigned char *raw = malloc(nv * fcl_dtype_size(t));
    NEED(raw);
    cl_int err = clEnqueueReadBuffer(fcl_context_queue(w->ctx), w->o.buffer, CL_TRUE, 0,
                                     nv * fcl_dtype_size(t), raw, 0, NULL, NULL);
    for (size_t i = 0; i < nv; ++i) o_got[i] = tu_decode(raw + i * fcl_dtype_size(t), t);
    free(raw);
    if (err != CL_SUCCESS) {
      snprintf(why, n, "reading o: OpenCL error %d", err);
      return false;
    }
    double *rq = malloc(nq * sizeof *rq), *rk = malloc(nq * sizeof *rk),
           *rv = malloc(nv * sizeof *rv);
    w->host[5] = rq, w->host[6] = rk, w->host[7] = rv;
    NEED(rq && rk && rv);
    ref_attention_backward_given_o(&p, q, k, v, g, o_got, rq, rk, rv);
    add_output(w, "dq", w->dq.buffer, t, nq, rq, tu_tol_grad(t), 0);
    add_output(w, "dk", w->dk.buffer, t, nq, rk, tu_tol_grad(t), 0);
    add_output(w, "dv", w->dv.buffer, t, nv, rv, tu_tol_grad(t), 0);
  }
  return true;
fail:
  if (!*why) snprintf(why, n, "out of memory");
  return false;
}

/* Decode against a KV cache (fcl_attention_kvcache): one new query token
 * per sequence, GQA with 4 query heads a KV head, a contiguous cache of
 * capacity T holding T tokens (cache_seqlens = T), no append, the splits
 * chosen by the library. BH is batch * heads_kv: up to 8 KV heads (32
 * query heads, one layer of a GQA model), then more sequences. The check
 * problem has 2 sequences of BH KV heads and also checks lse. */
static bool decode_create(tune_workload *w, int64_t T, int64_t BH, char *why, size_t n) {
  const fcl_tuning_class *c = &w->cls;
  const fcl_dtype t = c->dtype;
  const int64_t D = c->head_dim, Dv = c->head_dim_v;
  int64_t hkv = BH < 8 ? (BH > 0 ? BH : 1) : 8, B = (BH + hkv - 1) / hkv;
  if (w->check) B = 2;
  const int64_t hq = 4 * hkv;
  const size_t nq = (size_t)(B * hq * D), no = (size_t)(B * hq * Dv),
               nk = (size_t)(B * T * hkv * D), nv = (size_t)(B * T * hkv * Dv),
               nl = (size_t)(B * hq);
  fcl_kvcache_desc *d = &w->kd;
  *d = (fcl_kvcache_desc)FCL_KVCACHE_DESC_INIT;
  d->batch = B, d->seqlen_q = 1, d->heads_q = hq, d->heads_kv = hkv;
  d->head_dim = D, d->head_dim_v = Dv, d->cache_capacity = T, d->num_splits = 0;
  double *q = NULL, *k = NULL, *v = NULL;
  if (w->check) {
    NEED(q = randoms(w, 0, nq, t, 1, 0));
    NEED(k = randoms(w, 1, nk, t, 2, 0));
    NEED(v = randoms(w, 2, nv, t, 3, 0));
  }
  cl_mem m;
  NEED(m = make_buffer(w, nq, t, q, 1, why, n)); w->q = tu_dense_view(m, t, 1, hq, D);
  NEED(m = make_buffer(w, nk, t, k, 2, why, n)); w->k = tu_dense_view(m, t, T, hkv, D);
  NEED(m = make_buffer(w, nv, t, v, 3, why, n)); w->v = tu_dense_view(m, t, T, hkv, Dv);
  NEED(m = make_buffer(w, no, t, NULL, 5, why, n)); w->o = tu_dense_view(m, t, 1, hq, Dv);
  /* cache_seqlens: every cache full. */
  {
    cl_int err;
    const size_t bytes = (size_t)B * sizeof(cl_int);
    cl_int *lens = malloc(bytes);
    NEED(lens);
    for (int64_t b = 0; b < B; ++b) lens[b] = (cl_int)T;
    cl_mem sl = clCreateBuffer(fcl_context_cl(w->ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                               bytes, lens, &err);
    free(lens);
    if (err != CL_SUCCESS) {
      snprintf(why, n, "allocating cache_seqlens: OpenCL error %d", err);
      return false;
    }
    w->bufs[w->nbufs++] = sl;
    d->cache_seqlens = sl;
  }
  /* Bytes moved at the least: the cache read once, q read, o written. */
  const double es = (double)fcl_dtype_size(t);
  w->work = es * ((double)B * (double)hkv * (double)T * (double)(D + Dv) +
                  (double)B * (double)hq * (double)(D + Dv));
  if (w->check) {
    NEED(w->kv_lse = make_buffer(w, nl, FCL_F32, NULL, 6, why, n));
    ref_attention_problem p = {B, 1, T, hq, hkv, D, Dv, 0.0, 0, -1, -1, 0.0, NULL, NULL, NULL, 0,
                               0.0, 0, 0};
    NEED(expect_forward(w, &p, q, k, v, nv, no, nl, w->o.buffer, w->kv_lse));
  }
  return true;
fail:
  if (!*why) snprintf(why, n, "out of memory");
  return false;
}

static bool rwkv6_create(tune_workload *w, int64_t T, int64_t H, char *why, size_t n) {
  const fcl_tuning_class *c = &w->cls;
  const fcl_dtype t = c->dtype;
  const int64_t K = c->head_dim, V = c->head_dim_v;
  const size_t nk = (size_t)(T * H * K), nv = (size_t)(T * H * V), nu = (size_t)(H * K),
               ns = (size_t)(H * K * V);
  fcl_rwkv6_desc *d = &w->rd;
  *d = (fcl_rwkv6_desc)FCL_RWKV6_DESC_INIT;
  d->batch = 1, d->seqlen = T, d->heads = H, d->head_dim_k = K, d->head_dim_v = V;
  const fcl_tuning_op op = fcl_variant_op(c->variant);
  const bool bwd = op == FCL_TUNING_RWKV6_BWD || op == FCL_TUNING_RWKV6_BWD_CHUNKED;
  d->algorithm = op == FCL_TUNING_RWKV6_CHUNKED || op == FCL_TUNING_RWKV6_BWD_CHUNKED
                     ? FCL_RWKV6_CHUNKED
                     : FCL_RWKV6_RECURRENT;
  double *r = NULL, *k = NULL, *v = NULL, *wd = NULL, *u = NULL, *h0 = NULL, *g = NULL,
         *gh = NULL;
  if (w->check) {
    NEED(r = randoms(w, 0, nk, t, 1, 1));
    NEED(k = randoms(w, 1, nk, t, 2, 1));
    NEED(v = randoms(w, 2, nv, t, 3, 1));
    NEED(wd = randoms(w, 3, nk, t, 4, 2));
    NEED(u = randoms(w, 4, nu, t, 5, 1));
    NEED(h0 = randoms(w, 5, ns, FCL_F32, 6, 1));
    if (bwd) {
      NEED(g = randoms(w, 6, nv, t, 7, 1));
      NEED(gh = randoms(w, 7, ns, FCL_F32, 8, 1));
    }
  }
  cl_mem m;
  NEED(m = make_buffer(w, nk, t, r, 1, why, n)); w->q = tu_dense_view(m, t, T, H, K);
  NEED(m = make_buffer(w, nk, t, k, 2, why, n)); w->k = tu_dense_view(m, t, T, H, K);
  NEED(m = make_buffer(w, nv, t, v, 3, why, n)); w->v = tu_dense_view(m, t, T, H, V);
  /* Timing problems get decays in the usual range, not random signs. */
  double wfill = -exp(-3.0);
  NEED(m = make_buffer(w, nk, t, wd ? wd : NULL, 4, why, n)); w->w = tu_dense_view(m, t, T, H, K);
  if (!wd) {
    unsigned char bits[4];
    tu_encode(bits, wfill, t);
    clEnqueueFillBuffer(fcl_context_queue(w->ctx), m, bits, fcl_dtype_size(t), 0,
                        nk * fcl_dtype_size(t), 0, NULL, NULL);
  }
  NEED(w->u = make_buffer(w, nu, t, u, 5, why, n));
  NEED(w->h0 = make_buffer(w, ns, FCL_F32, h0, 6, why, n));
  const double es = (double)fcl_dtype_size(t);
  if (!bwd) {
    NEED(m = make_buffer(w, nv, t, NULL, 7, why, n)); w->o = tu_dense_view(m, t, T, H, V);
    NEED(w->ht = make_buffer(w, ns, FCL_F32, NULL, 8, why, n));
    w->work = es * (3.0 * nk + 2.0 * nv + nu) + 8.0 * ns;
    if (w->check) {
      double *o_ref = malloc(nv * sizeof *o_ref), *ht_ref = malloc(ns * sizeof *ht_ref);
      w->host[8] = o_ref, w->host[9] = ht_ref;
      NEED(o_ref && ht_ref);
      ref_rwkv6_problem p = {1, T, H, K, V, 0.0, 0, NULL};
      ref_rwkv6_forward(&p, r, k, v, wd, u, h0, o_ref, ht_ref);
      add_output(w, "o", w->o.buffer, t, nv, o_ref, tu_tol_rwkv6(t), 0);
      add_output(w, "ht", w->ht, FCL_F32, ns, ht_ref, tu_tol_rwkv6_state(), 0);
    }
    return true;
  }
  NEED(m = make_buffer(w, nv, t, g, 7, why, n)); w->dout = tu_dense_view(m, t, T, H, V);
  NEED(w->dht = make_buffer(w, ns, FCL_F32, gh, 8, why, n));
  NEED(m = make_buffer(w, nk, t, NULL, 9, why, n)); w->dq = tu_dense_view(m, t, T, H, K);
  NEED(m = make_buffer(w, nk, t, NULL, 10, why, n)); w->dk = tu_dense_view(m, t, T, H, K);
  NEED(m = make_buffer(w, nv, t, NULL, 11, why, n)); w->dv = tu_dense_view(m, t, T, H, V);
  NEED(m = make_buffer(w, nk, t, NULL, 12, why, n)); w->dw = tu_dense_view(m, t, T, H, K);
  NEED(w->du = make_buffer(w, nu, t, NULL, 13, why, n));
  NEED(w->dh0 = make_buffer(w, ns, FCL_F32, NULL, 14, why, n));
  w->work = es * (7.0 * nk + 3.0 * nv + 2.0 * nu) + 12.0 * ns;
  if (w->check) {
    ref_rwkv6_problem p = {1, T, H, K, V, 0.0, 0, NULL};
    double *ref = malloc((3 * nk + nv + nu + ns) * sizeof *ref);
    w->host[8] = ref;
    NEED(ref);
    double *rr = ref, *rk = rr + nk, *rw = rk + nk, *rv = rw + nk, *ru = rv + nv, *rh = ru + nu;
    if (ref_rwkv6_backward(&p, r, k, v, wd, u, h0, g, gh, rr, rk, rv, rw, ru, rh) != 0) goto fail;
    const tu_tol tol = tu_tol_rwkv6(t);
    add_output(w, "dr", w->dq.buffer, t, nk, rr, tol, 0);
    add_output(w, "dk", w->dk.buffer, t, nk, rk, tol, 0);
    add_output(w, "dv", w->dv.buffer, t, nv, rv, tol, 0);
    add_output(w, "dw", w->dw.buffer, t, nk, rw, tol, 0);
    add_output(w, "du", w->du, t, nu, ru, tol, 0);
    add_output(w, "dh0", w->dh0, FCL_F32, ns, rh, tu_tol_rwkv6_state(), 0);
  }
  return true;
fail:
  if (!*why) snprintf(why, n, "out of memory");
  return false;
}

/* RWKV7: inputs as fla's tests make them (ref_rwkv7_fill, w in the
 * models' range); timing problems get random patterns, with w fixed at the
 * middle of that range and a, b small. */
static bool rwkv7_create(tune_workload *w, int64_t T, int64_t H, char *why, size_t n) {
  const fcl_tuning_class *c = &w->cls;
  const fcl_dtype t = c->dtype;
  const int64_t K = c->head_dim, V = c->head_dim_v;
  const size_t nk = (size_t)(T * H * K), nv = (size_t)(T * H * V), ns = (size_t)(H * K * V);
  fcl_rwkv7_desc *d = &w->sd;
  *d = (fcl_rwkv7_desc)FCL_RWKV7_DESC_INIT;
  d->batch = 1, d->seqlen = T, d->heads = H, d->head_dim_k = K, d->head_dim_v = V;
  /* The models' bound, which both kinds of inputs keep: the chunked
   * forward (rwkv7_chunked) runs only under it. */
  d->decay_lower_bound = -0.60653066f;
  const bool bwd = fcl_variant_op(c->variant) == FCL_TUNING_RWKV7_BWD;
  const ref_rwkv7_problem p = {1, T, H, K, V, 0.0, 0, NULL};
  double *x = NULL, *r = NULL, *wd = NULL, *k = NULL, *v = NULL, *a = NULL, *b = NULL,
         *h0 = NULL, *g = NULL, *gh = NULL;
  if (w->check) {
    NEED(x = malloc((5 * nk + 2 * nv + 2 * ns) * sizeof *x));
    w->host[0] = x;
    r = x, wd = r + nk, k = wd + nk, a = k + nk, b = a + nk, v = b + nk, g = v + nv, h0 = g + nv,
    gh = h0 + ns;
    tu_rng rng;
    tu_rng_seed(&rng, 77);
    ref_rwkv7_fill(&rng, &p, REF_RWKV7_W_MODEL, r, wd, k, v, a, b);
    tu_fill_uniform(&rng, g, nv, -1, 1);
    tu_fill_uniform(&rng, h0, 2 * ns, -1, 1);
    for (int i = 0; i < 5; ++i) tu_round_array(x + i * nk, nk, t);
    tu_round_array(v, 2 * nv, t);
    tu_round_array(h0, 2 * ns, FCL_F32);
  }
  const double *src[6] = {r, wd, k, v, a, b};
  fcl_tensor *dst[6] = {&w->q, &w->w, &w->k, &w->v, &w->a, &w->b};
  cl_mem m;
  for (int i = 0; i < 6; ++i) {
    const int64_t dim = i == 3 ? V : K;
    NEED(m = make_buffer(w, i == 3 ? nv : nk, t, src[i], 20 + (uint64_t)i, why, n));
    *dst[i] = tu_dense_view(m, t, T, H, dim);
    if (!w->check && i != 0 && i != 2 && i != 3) { /* w, a, b: in range */
      unsigned char bits[4];
      tu_encode(bits, i == 1 ? -0.3 : 0.05, t);
      clEnqueueFillBuffer(fcl_context_queue(w->ctx), m, bits, fcl_dtype_size(t), 0,
                          nk * fcl_dtype_size(t), 0, NULL, NULL);
    }
  }
  NEED(w->h0 = make_buffer(w, ns, FCL_F32, h0, 26, why, n));
  const double es = (double)fcl_dtype_size(t);
  if (!bwd) {
    NEED(m = make_buffer(w, nv, t, NULL, 27, why, n)); w->o = tu_dense_view(m, t, T, H, V);
    NEED(w->ht = make_buffer(w, ns, FCL_F32, NULL, 28, why, n));
    w->work = es * (5.0 * nk + 2.0 * nv) + 8.0 * ns;
    if (w->check) {
      double *ref = malloc((nv + ns) * sizeof *ref);
      NEED(ref);
      w->host[1] = ref;
      const ref_rwkv7_in in = {r, wd, k, v, a, b, h0};
      ref_rwkv7_forward(&p, &in, ref, ref + nv);
      add_output(w, "o", w->o.buffer, t, nv, ref, tu_tol_rwkv6(t), 0);
      add_output(w, "ht", w->ht, FCL_F32, ns, ref + nv, tu_tol_rwkv6_state(), 0);
    }
    return true;
  }
  NEED(m = make_buffer(w, nv, t, g, 29, why, n)); w->dout = tu_dense_view(m, t, T, H, V);
  NEED(w->dht = make_buffer(w, ns, FCL_F32, gh, 30, why, n));
  fcl_tensor *gt[6] = {&w->dq, &w->dw, &w->dk, &w->dv, &w->da, &w->db};
  for (int i = 0; i < 6; ++i) {
    NEED(m = make_buffer(w, i == 3 ? nv : nk, t, NULL, 31 + (uint64_t)i, why, n));
    *gt[i] = tu_dense_view(m, t, T, H, i == 3 ? V : K);
  }
  NEED(w->dh0 = make_buffer(w, ns, FCL_F32, NULL, 37, why, n));
  w->work = es * (10.0 * nk + 3.0 * nv) + 12.0 * ns;
  if (w->check) {
    double *ref = malloc((5 * nk + nv + ns) * sizeof *ref);
    NEED(ref);
    w->host[1] = ref;
    const ref_rwkv7_in in = {r, wd, k, v, a, b, h0};
    const ref_rwkv7_grads rg = {ref, ref + nk, ref + 2 * nk, ref + 5 * nk, ref + 3 * nk,
                                ref + 4 * nk, ref + 5 * nk + nv};
    if (ref_rwkv7_backward(&p, &in, g, gh, &rg) != 0) goto fail;
    static const char *const names[6] = {"dr", "dw", "dk", "dv", "da", "db"};
    const double *refs[6] = {rg.dr, rg.dw, rg.dk, rg.dv, rg.da, rg.db};
    for (int i = 0; i < 6; ++i)
      add_output(w, names[i], gt[i]->buffer, t, i == 3 ? nv : nk, (double *)refs[i],
                 tu_tol_rwkv6(t), 0);
    add_output(w, "dh0", w->dh0, FCL_F32, ns, rg.dh0, tu_tol_rwkv6_state(), 0);
  }
  return true;
fail:
  if (!*why) snprintf(why, n, "out of memory");
  return false;
}

static bool is_rwkv7(const fcl_variant *v) {
  return fcl_variant_op(v) == FCL_TUNING_RWKV7_RECURRENT || fcl_variant_op(v) == FCL_TUNING_RWKV7_BWD;
}

tune_workload *tune_workload_create(fcl_context *ctx, const fcl_tuning_class *cls,
                                    int64_t seqlen, int64_t bh, bool with_reference,
                                    char *why, size_t why_size) {
  tune_workload *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(why, why_size, "out of memory");
    return NULL;
  }
  w->ctx = ctx;
  w->cls = *cls;
  w->check = with_reference;
  why[0] = '\0';
  bool ok = tune_is_kvcache(cls->variant) ? decode_create(w, seqlen, bh, why, why_size)
            : is_attention(cls->variant)  ? attention_create(w, seqlen, bh, why, why_size)
            : is_rwkv7(cls->variant)      ? rwkv7_create(w, seqlen, bh, why, why_size)
                                          : rwkv6_create(w, seqlen, bh, why, why_size);
  if (ok && clFinish(fcl_context_queue(ctx)) != CL_SUCCESS) {
    snprintf(why, why_size, "clFinish failed after setting up the inputs");
    ok = false;
  }
  if (!ok) {
    tune_workload_free(w);
    return NULL;
  }
  return w;
}

fcl_status tune_workload_run(tune_workload *w) {
  switch (fcl_variant_op(w->cls.variant)) {
  case FCL_TUNING_ATTENTION_FWD:
    return fcl_attention_forward(w->ctx, &w->ad, &w->q, &w->k, &w->v, &w->o, w->lse);
  case FCL_TUNING_ATTENTION_BWD:
    return fcl_attention_backward(w->ctx, &w->ad, &w->q, &w->k, &w->v, &w->o, w->lse,
                                  &w->dout, &w->dq, &w->dk, &w->dv);
  case FCL_TUNING_ATTENTION_DECODE:
    return fcl_attention_kvcache(w->ctx, &w->kd, &w->q, &w->k, &w->v, NULL, NULL, &w->o,
                                 w->kv_lse);
  case FCL_TUNING_RWKV6_RECURRENT:
  case FCL_TUNING_RWKV6_CHUNKED:
    return fcl_rwkv6_forward(w->ctx, &w->rd, &w->q, &w->k, &w->v, &w->w, w->u, w->h0,
                             &w->o, w->ht);
  case FCL_TUNING_RWKV6_BWD:
  case FCL_TUNING_RWKV6_BWD_CHUNKED:
    return fcl_rwkv6_backward(w->ctx, &w->rd, &w->q, &w->k, &w->v, &w->w, w->u, w->h0,
                              &w->dout, w->dht, &w->dq, &w->dk, &w->dv, &w->dw, w->du,
                              w->dh0);
  case FCL_TUNING_RWKV7_RECURRENT:
    return fcl_rwkv7_forward(w->ctx, &w->sd, &w->q, &w->w, &w->k, &w->v, &w->a, &w->b, w->h0,
                             &w->o, w->ht);
  case FCL_TUNING_RWKV7_BWD:
    return fcl_rwkv7_backward(w->ctx, &w->sd, &w->q, &w->w, &w->k, &w->v, &w->a, &w->b, w->h0,
                              &w->dout, w->dht, &w->dq, &w->dw, &w->dk, &w->dv, &w->da, &w->db,
                              w->dh0);
  default:
    return FCL_ERROR_INVALID_ARGUMENT;
  }
}

fcl_status tune_workload_poison(tune_workload *w) {
  const unsigned char nan_bytes[4] = {0xFF, 0xFF, 0xFF, 0xFF}; /* NaN in every dtype */
  for (int i = 0; i < w->nouts; ++i) {
    const size_t es = fcl_dtype_size(w->outs[i].dtype);
    if (clEnqueueFillBuffer(fcl_context_queue(w->ctx), w->outs[i].buf, nan_bytes, es, 0,
                            w->outs[i].n * es, 0, NULL, NULL) != CL_SUCCESS)
      return FCL_ERROR_OPENCL;
  }
  return FCL_OK;
}

bool tune_workload_check(tune_workload *w, char *why, size_t why_size) {
  for (int i = 0; i < w->nouts; ++i) {
    const output *o = &w->outs[i];
    const size_t es = fcl_dtype_size(o->dtype);
    unsigned char *raw = malloc(o->n * es);
    double *got = malloc(o->n * sizeof *got);
    cl_int err = raw && got ? clEnqueueReadBuffer(fcl_context_queue(w->ctx), o->buf, CL_TRUE,
                                                  0, o->n * es, raw, 0, NULL, NULL)
                            : CL_OUT_OF_HOST_MEMORY;
    bool ok = err == CL_SUCCESS;
    if (ok) {
      for (size_t j = 0; j < o->n; ++j) got[j] = tu_decode(raw + j * es, o->dtype);
      tu_cmp c = tu_compare(got, o->ref, o->n, o->tol, o->lse_style);
      ok = c.ok;
      if (!ok)
        snprintf(why, why_size, "%s differs from the reference: %zu bad, worst got %g ref %g",
                 o->name, c.n_bad, c.worst_got, c.worst_ref);
    } else {
      snprintf(why, why_size, "reading %s: OpenCL error %d", o->name, err);
    }
    free(raw);
    free(got);
    if (!ok) return false;
  }
  return true;
}

void tune_workload_free(tune_workload *w) {
  if (!w) return;
  for (int i = 0; i < w->nbufs; ++i) clReleaseMemObject(w->bufs[i]);
  for (size_t i = 0; i < sizeof w->host / sizeof w->host[0]; ++i) free(w->host[i]);
  free(w);
}
