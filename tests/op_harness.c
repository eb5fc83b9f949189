/* One flashcl operation on dense host arrays; see op_harness.h. */
#include "op_harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tu_layout g_layout = TU_BSHD;
static size_t    g_offset = 0, g_tail = 0;

void oh_set_layout(tu_layout layout, size_t offset_elems, size_t tail_elems) {
  g_layout = layout;
  g_offset = offset_elems;
  g_tail = tail_elems;
}

void oh_append(char *why, size_t nwhy, const char *fmt, ...) {
  const size_t used = strlen(why);
  if (used + 1 >= nwhy) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why + used, nwhy - used, fmt, ap);
  va_end(ap);
}

double oh_grad_tol(fcl_dtype t) {
  switch (t) {
  case FCL_F32: return 2e-4;
  case FCL_F16: return 5e-3;
  case FCL_BF16: return 3e-2;
  }
  return 0.0;
}

tu_tol oh_rwkv6_tol(fcl_dtype t) {
  switch (t) {
  case FCL_F32: return (tu_tol){.atol = 1e-4};
  case FCL_F16: return (tu_tol){.atol = 3e-3};
  case FCL_BF16: return (tu_tol){.atol = 2e-2};
  }
  return (tu_tol){.atol = 0.0};
}

tu_tol oh_rwkv6_state_tol(void) { return (tu_tol){.atol = 1e-4}; }

int oh_check(const char *what, const double *got, const double *ref, size_t n,
             tu_tol tol, int lse_style, char *why, size_t nwhy) {
  double *g = malloc(8 * (n + 1)), *r = malloc(8 * (n + 1));
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
  int ok = 1;
  if (nan_missing || nan_extra) {
    ok = 0;
    oh_append(why, nwhy, " %s: %zu NaN missing, %zu NaN extra (first [%zu] got %g ref %g);",
              what, nan_missing, nan_extra, first, got[first], ref[first]);
  } else {
    const tu_cmp c = tu_compare(g, r, n, tol, lse_style);
    if (!c.ok) {
      ok = 0;
      oh_append(why, nwhy, " %s mismatch;", what);
      tu_print_cmp(what, &c, NULL, 0);
    }
  }
  free(g);
  free(r);
  return ok;
}

oh_attention_sizes oh_attention_count(const ref_attention_problem *p) {
  const int varlen = p->cu_seqlens_q != NULL;
  const int64_t rq = varlen ? p->cu_seqlens_q[p->batch] : p->batch * p->seqlen_q;
  const int64_t rk = varlen ? p->cu_seqlens_k[p->batch] : p->batch * p->seqlen_k;
  oh_attention_sizes s;
  s.q = (size_t)(rq * p->heads_q * p->head_dim);
  s.k = (size_t)(rk * p->heads_kv * p->head_dim);
  s.v = (size_t)(rk * p->heads_kv * p->head_dim_v);
  s.o = (size_t)(rq * p->heads_q * p->head_dim_v);
  s.lse = (size_t)(rq * p->heads_q);
  return s;
}

void oh_attention_varlen(ref_attention_problem *p, int n, const int32_t *lq, const int32_t *lk,
                         int32_t *cuq, int32_t *cuk) {
  p->batch = n;
  p->seqlen_q = p->seqlen_k = 0;
  cuq[0] = cuk[0] = 0;
  for (int i = 0; i < n; ++i) {
    cuq[i + 1] = cuq[i] + lq[i];
    cuk[i + 1] = cuk[i] + lk[i];
    if (lq[i] > p->seqlen_q) p->seqlen_q = lq[i];
    if (lk[i] > p->seqlen_k) p->seqlen_k = lk[i];
  }
  p->cu_seqlens_q = cuq;
  p->cu_seqlens_k = cuk;
}

oh_rwkv6_sizes oh_rwkv6_count(const ref_rwkv6_problem *p) {
  const int64_t t = ref_rwkv6_tokens(p);
  oh_rwkv6_sizes s;
  s.rk = (size_t)(t * p->heads * p->head_dim_k);
  s.v = (size_t)(t * p->heads * p->head_dim_v);
  s.u = (size_t)(p->heads * p->head_dim_k);
  s.state = (size_t)(p->batch * p->heads * p->head_dim_k * p->head_dim_v);
  return s;
}

/* Device tensors of one call, released together. */
typedef struct {
  tu_tensor t[12];
  cl_mem    m[12];
  int       nt, nm;
} pool;

static tu_tensor *new_tensor(pool *pl, fcl_context *ctx, const double *dense,
                             int64_t b, int64_t s, int64_t h, int64_t d, fcl_dtype dt) {
  tu_tensor *t = &pl->t[pl->nt];
  if (tu_tensor_create(fcl_context_cl(ctx), fcl_context_queue(ctx), dense, b, s, h, d,
                       dt, g_layout, g_offset, g_tail, t))
    return NULL;
  pl->nt++;
  return t;
}

static cl_mem new_buffer(pool *pl, fcl_context *ctx, const double *x, size_t n,
                         fcl_dtype dt) {
  const size_t es = tu_dtype_size(dt), bytes = n * es + 4 * g_tail;
  unsigned char *host = malloc(bytes + 1);
  if (!host) return NULL;
  memset(host, TU_POISON_BYTE, bytes + 1);
  for (size_t i = 0; x && i < n; ++i) tu_encode(host + i * es, x[i], dt);
  cl_mem m = tu_buffer_from(fcl_context_cl(ctx), fcl_context_queue(ctx), host,
                            bytes ? bytes : 1);
  free(host);
  if (m) pl->m[pl->nm++] = m;
  return m;
}

static void release(pool *pl) {
  for (int i = 0; i < pl->nt; ++i) tu_tensor_release(&pl->t[i]);
  for (int i = 0; i < pl->nm; ++i) clReleaseMemObject(pl->m[i]);
}

/* Reads a tensor, noting bytes outside its view that changed. */
static int read_tensor(fcl_context *ctx, const tu_tensor *t, double *dense,
                       const char *name, char *why, size_t nwhy) {
  const long bad = tu_tensor_read(fcl_context_queue(ctx), t, dense, NULL);
  if (bad < 0) oh_append(why, nwhy, " reading %s failed;", name);
  else if (bad > 0) oh_append(why, nwhy, " %s: %ld bytes outside the view written;", name, bad);
  return bad != 0;
}

/* Reads n values of dtype dt; the tail after them must still be poison. */
static int read_buffer(fcl_context *ctx, cl_mem m, double *x, size_t n, fcl_dtype dt,
                       const char *name, char *why, size_t nwhy) {
  const size_t es = tu_dtype_size(dt), bytes = n * es + 4 * g_tail;
  unsigned char *host = malloc(bytes + 1);
  if (!host || tu_buffer_read(fcl_context_queue(ctx), m, host, bytes)) {
    free(host);
    oh_append(why, nwhy, " reading %s failed;", name);
    return 1;
  }
  size_t bad = 0;
  for (size_t i = n * es; i < bytes; ++i) bad += host[i] != TU_POISON_BYTE;
  for (size_t i = 0; i < n; ++i) x[i] = tu_decode(host + i * es, dt);
  free(host);
  if (bad) oh_append(why, nwhy, " %s: %zu bytes past its end written;", name, bad);
  return bad != 0;
}

static int finish(fcl_context *ctx, fcl_status st, const char *op, char *why, size_t nwhy) {
  if (st != FCL_OK) {
    oh_append(why, nwhy, " %s: %s: %s;", op, fcl_status_string(st),
              fcl_context_last_error(ctx));
    return 1;
  }
  if (tu_cl_check(clFinish(fcl_context_queue(ctx)), op)) {
    oh_append(why, nwhy, " %s: clFinish failed;", op);
    return 1;
  }
  return 0;
}

int oh_attention(fcl_context *ctx, const ref_attention_problem *p, fcl_dtype dt,
                 const double *q, const double *k, const double *v,
                 const double *dout, double *o, double *lse, double *dq,
                 double *dk, double *dv, char *why, size_t nwhy) {
  pool pl;
  memset(&pl, 0, sizeof pl);
  const int varlen = p->cu_seqlens_q != NULL;
  const oh_attention_sizes n = oh_attention_count(p);
  const int64_t nb = varlen ? 1 : p->batch;
  const int64_t rq = varlen ? p->cu_seqlens_q[p->batch] : p->seqlen_q;
  const int64_t rk = varlen ? p->cu_seqlens_k[p->batch] : p->seqlen_k;
  const int64_t hq = p->heads_q, hk = p->heads_kv, d = p->head_dim, dvd = p->head_dim_v;
  int fail = 0;
  tu_tensor *tq = new_tensor(&pl, ctx, q, nb, rq, hq, d, dt);
  tu_tensor *tk = new_tensor(&pl, ctx, k, nb, rk, hk, d, dt);
  tu_tensor *tv = new_tensor(&pl, ctx, v, nb, rk, hk, dvd, dt);
  tu_tensor *to = new_tensor(&pl, ctx, NULL, nb, rq, hq, dvd, dt);
  cl_mem blse = lse ? new_buffer(&pl, ctx, NULL, n.lse, FCL_F32) : NULL;
  cl_mem alibi = NULL, cuq = NULL, cuk = NULL;
  if (p->alibi_slopes) alibi = new_buffer(&pl, ctx, p->alibi_slopes, (size_t)hq, FCL_F32);
  if (varlen) {
    cuq = tu_buffer_from(fcl_context_cl(ctx), NULL, p->cu_seqlens_q, (size_t)(p->batch + 1) * 4);
    cuk = tu_buffer_from(fcl_context_cl(ctx), NULL, p->cu_seqlens_k, (size_t)(p->batch + 1) * 4);
    if (cuq) pl.m[pl.nm++] = cuq;
    if (cuk) pl.m[pl.nm++] = cuk;
  }
  if (!tq || !tk || !tv || !to || (lse && !blse) || (p->alibi_slopes && !alibi) ||
      (varlen && (!cuq || !cuk))) {
    oh_append(why, nwhy, " could not create buffers;");
    release(&pl);
    return 1;
  }
  fcl_attention_desc desc = FCL_ATTENTION_DESC_INIT;
  desc.batch = p->batch; desc.seqlen_q = p->seqlen_q; desc.seqlen_k = p->seqlen_k;
  desc.heads_q = hq; desc.heads_kv = hk; desc.head_dim = d; desc.head_dim_v = dvd;
  desc.softmax_scale = (float)p->softmax_scale;
  desc.causal = p->causal;
  desc.window_left = p->window_left;
  desc.window_right = p->window_right;
  desc.softcap = (float)p->softcap;
  desc.alibi_slopes = alibi;
  desc.cu_seqlens_q = cuq;
  desc.cu_seqlens_k = cuk;
  fail = finish(ctx, fcl_attention_forward(ctx, &desc, &tq->t, &tk->t, &tv->t, &to->t, blse),
                "forward", why, nwhy);
  if (!fail) {
    fail |= read_tensor(ctx, to, o, "o", why, nwhy);
    if (lse) fail |= read_buffer(ctx, blse, lse, n.lse, FCL_F32, "lse", why, nwhy);
  }
  if (!fail && dout) {
    tu_tensor *tdo = new_tensor(&pl, ctx, dout, nb, rq, hq, dvd, dt);
    tu_tensor *tdq = new_tensor(&pl, ctx, NULL, nb, rq, hq, d, dt);
    tu_tensor *tdk = new_tensor(&pl, ctx, NULL, nb, rk, hk, d, dt);
    tu_tensor *tdv = new_tensor(&pl, ctx, NULL, nb, rk, hk, dvd, dt);
    if (!tdo || !tdq || !tdk || !tdv) {
      oh_append(why, nwhy, " could not create gradient buffers;");
      fail = 1;
    } else {
      fail = finish(ctx, fcl_attention_backward(ctx, &desc, &tq->t, &tk->t, &tv->t, &to->t,
                                                blse, &tdo->t, &tdq->t, &tdk->t, &tdv->t),
                    "backward", why, nwhy);
      if (!fail) {
        fail |= read_tensor(ctx, tdq, dq, "dq", why, nwhy);
        fail |= read_tensor(ctx, tdk, dk, "dk", why, nwhy);
        fail |= read_tensor(ctx, tdv, dv, "dv", why, nwhy);
      }
    }
  }
  release(&pl);
  return fail;
}

int oh_rwkv6(fcl_context *ctx, const ref_rwkv6_problem *p, fcl_dtype dt,
             fcl_rwkv6_algorithm algo, const double *r, const double *k,
             const double *v, const double *w, const double *u, const double *h0,
             const double *dout, const double *dht, double *o, double *ht,
             double *dr, double *dk, double *dv, double *dw, double *du,
             double *dh0, char *why, size_t nwhy) {
  pool pl;
  memset(&pl, 0, sizeof pl);
  const int varlen = p->cu_seqlens != NULL;
  const oh_rwkv6_sizes n = oh_rwkv6_count(p);
  const int64_t nb = varlen ? 1 : p->batch, nt = varlen ? p->cu_seqlens[p->batch] : p->seqlen;
  const int64_t H = p->heads, K = p->head_dim_k, V = p->head_dim_v;
  tu_tensor *tr = new_tensor(&pl, ctx, r, nb, nt, H, K, dt);
  tu_tensor *tk = new_tensor(&pl, ctx, k, nb, nt, H, K, dt);
  tu_tensor *tv = new_tensor(&pl, ctx, v, nb, nt, H, V, dt);
  tu_tensor *tw = new_tensor(&pl, ctx, w, nb, nt, H, K, dt);
  tu_tensor *to = new_tensor(&pl, ctx, NULL, nb, nt, H, V, dt);
  cl_mem bu = new_buffer(&pl, ctx, u, n.u, dt);
  cl_mem bh0 = h0 ? new_buffer(&pl, ctx, h0, n.state, FCL_F32) : NULL;
  cl_mem bht = ht ? new_buffer(&pl, ctx, NULL, n.state, FCL_F32) : NULL;
  cl_mem cu = NULL;
  if (varlen) {
    cu = tu_buffer_from(fcl_context_cl(ctx), NULL, p->cu_seqlens, (size_t)(p->batch + 1) * 4);
    if (cu) pl.m[pl.nm++] = cu;
  }
  if (!tr || !tk || !tv || !tw || !to || !bu || (h0 && !bh0) || (ht && !bht) ||
      (varlen && !cu)) {
    oh_append(why, nwhy, " could not create buffers;");
    release(&pl);
    return 1;
  }
  fcl_rwkv6_desc desc = FCL_RWKV6_DESC_INIT;
  desc.batch = p->batch; desc.seqlen = p->seqlen; desc.heads = H;
  desc.head_dim_k = K; desc.head_dim_v = V;
  desc.scale = (float)p->scale;
  desc.reverse = p->reverse;
  desc.cu_seqlens = cu;
  desc.algorithm = algo;
  int fail = finish(ctx, fcl_rwkv6_forward(ctx, &desc, &tr->t, &tk->t, &tv->t, &tw->t, bu,
                                           bh0, &to->t, bht),
                    "rwkv6 forward", why, nwhy);
  if (!fail) {
    fail |= read_tensor(ctx, to, o, "o", why, nwhy);
    if (ht) fail |= read_buffer(ctx, bht, ht, n.state, FCL_F32, "ht", why, nwhy);
  }
  if (!fail && dout) {
    tu_tensor *tdo = new_tensor(&pl, ctx, dout, nb, nt, H, V, dt);
    tu_tensor *tdr = new_tensor(&pl, ctx, NULL, nb, nt, H, K, dt);
    tu_tensor *tdk = new_tensor(&pl, ctx, NULL, nb, nt, H, K, dt);
    tu_tensor *tdv = new_tensor(&pl, ctx, NULL, nb, nt, H, V, dt);
    tu_tensor *tdw = new_tensor(&pl, ctx, NULL, nb, nt, H, K, dt);
    cl_mem bdht = dht ? new_buffer(&pl, ctx, dht, n.state, FCL_F32) : NULL;
    cl_mem bdu = new_buffer(&pl, ctx, NULL, n.u, dt);
    cl_mem bdh0 = dh0 ? new_buffer(&pl, ctx, NULL, n.state, FCL_F32) : NULL;
    if (!tdo || !tdr || !tdk || !tdv || !tdw || (dht && !bdht) || !bdu || (dh0 && !bdh0)) {
      oh_append(why, nwhy, " could not create gradient buffers;");
      fail = 1;
    } else {
      fail = finish(ctx, fcl_rwkv6_backward(ctx, &desc, &tr->t, &tk->t, &tv->t, &tw->t, bu,
                                            bh0, &tdo->t, bdht, &tdr->t, &tdk->t, &tdv->t,
                                            &tdw->t, bdu, bdh0),
                    "rwkv6 backward", why, nwhy);
      if (!fail) {
        fail |= read_tensor(ctx, tdr, dr, "dr", why, nwhy);
        fail |= read_tensor(ctx, tdk, dk, "dk", why, nwhy);
        fail |= read_tensor(ctx, tdv, dv, "dv", why, nwhy);
        fail |= read_tensor(ctx, tdw, dw, "dw", why, nwhy);
        fail |= read_buffer(ctx, bdu, du, n.u, dt, "du", why, nwhy);
        if (dh0) fail |= read_buffer(ctx, bdh0, dh0, n.state, FCL_F32, "dh0", why, nwhy);
      }
    }
  }
  release(&pl);
  return fail;
}
