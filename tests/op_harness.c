/* One flashcl operation on dense host arrays; see op_harness.h. */
#include "op_harness.h"
#include "op_pool.h"

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

/* The options oh_attention and oh_rwkv6 run with. */
static void layout_opts(oh_opts *o) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < OH_NVIEWS; ++i) o->view[i] = (oh_view){g_layout, g_offset, g_tail};
  o->in_tail = o->out_tail = 4 * g_tail;
  o->bwd_runs = 1;
}

void oh_append(char *why, size_t nwhy, const char *fmt, ...) {
  const size_t used = strlen(why);
  if (used + 1 >= nwhy) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why + used, nwhy - used, fmt, ap);
  va_end(ap);
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


/* ---- host copies of device buffers ------------------------------------------ */
unsigned char *oh_read_all(fcl_context *ctx, cl_mem m, size_t bytes) {
  unsigned char *h = malloc(bytes + 1);
  if (h && tu_buffer_read(fcl_context_queue(ctx), m, h, bytes)) {
    free(h);
    return NULL;
  }
  return h;
}

void oh_watch_add(fcl_context *ctx, oh_watch *w, int *nw, cl_mem m, const char *name) {
  if (!m) return;
  size_t bytes = 0;
  clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
  w[*nw] = (oh_watch){m, bytes, name, oh_read_all(ctx, m, bytes)};
  ++*nw;
}

int oh_watch_changed(fcl_context *ctx, oh_watch *w, int nw, char *why, size_t nwhy) {
  int bad = 0;
  for (int i = 0; i < nw; ++i) {
    unsigned char *now = oh_read_all(ctx, w[i].m, w[i].bytes);
    if (!now || !w[i].then || memcmp(now, w[i].then, w[i].bytes)) {
      oh_append(why, nwhy, " input %s was modified;", w[i].name);
      bad = 1;
    }
    free(now);
    free(w[i].then);
    w[i].then = NULL;
  }
  return bad;
}

/* ---- attention ---------------------------------------------------------------- */
typedef struct {
  const fcl_attention_desc *desc;
  tu_tensor *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  cl_mem lse;
  oh_attention_out *out;
} att_args;

static fcl_status att_bwd(oh_pool *pl, const void *args) {
  const att_args *a = args;
  return fcl_attention_backward(pl->ctx, a->desc, &a->q->t, &a->k->t, &a->v->t, &a->o->t,
                                a->lse, &a->dout->t, &a->dq->t, &a->dk->t, &a->dv->t);
}

static int att_read(oh_pool *pl, const void *args, char *why, size_t nwhy) {
  const att_args *a = args;
  a->out->bwd_read = 1;
  return oh_pool_read_tensor(pl, a->dq, a->out->dq, "dq", why, nwhy) |
         oh_pool_read_tensor(pl, a->dk, a->out->dk, "dk", why, nwhy) |
         oh_pool_read_tensor(pl, a->dv, a->out->dv, "dv", why, nwhy);
}

int oh_attention_run(fcl_context *ctx, const ref_attention_problem *p, fcl_dtype dt,
                     const oh_opts *opts, const oh_attention_in *in, oh_attention_out *out,
                     char *why, size_t nwhy) {
  oh_opts dflt;
  if (!opts) {
    layout_opts(&dflt);
    opts = &dflt;
  }
  const oh_view *vw = opts->view;
  oh_pool pl;
  memset(&pl, 0, sizeof pl);
  pl.ctx = ctx;
  const int varlen = p->cu_seqlens_q != NULL;
  const oh_attention_sizes n = oh_attention_count(p);
  const int64_t nb = varlen ? 1 : p->batch;
  const int64_t rq = varlen ? p->cu_seqlens_q[p->batch] : p->seqlen_q;
  const int64_t rk = varlen ? p->cu_seqlens_k[p->batch] : p->seqlen_k;
  const int64_t hq = p->heads_q, hk = p->heads_kv, d = p->head_dim, dvd = p->head_dim_v;
  att_args a;
  memset(&a, 0, sizeof a);
  a.out = out;
  a.q = oh_pool_tensor(&pl, in->q, nb, rq, hq, d, dt, &vw[OH_Q]);
  a.k = oh_pool_tensor(&pl, in->k, nb, rk, hk, d, dt, &vw[OH_K]);
  a.v = oh_pool_tensor(&pl, in->v, nb, rk, hk, dvd, dt, &vw[OH_V]);
  a.o = oh_pool_tensor(&pl, NULL, nb, rq, hq, dvd, dt, &vw[OH_O]);
  if (in->dout) {
    a.dout = oh_pool_tensor(&pl, in->dout, nb, rq, hq, dvd, dt, &vw[OH_DOUT]);
    a.dq = oh_pool_tensor(&pl, NULL, nb, rq, hq, d, dt, &vw[OH_DQ]);
    a.dk = oh_pool_tensor(&pl, NULL, nb, rk, hk, d, dt, &vw[OH_DK]);
    a.dv = oh_pool_tensor(&pl, NULL, nb, rk, hk, dvd, dt, &vw[OH_DV]);
  }
  a.lse = out->lse ? oh_pool_buffer(&pl, NULL, n.lse, FCL_F32, opts->out_tail) : NULL;
  cl_mem alibi = NULL, cuq = NULL, cuk = NULL;
  if (p->alibi_slopes) alibi = oh_pool_buffer(&pl, p->alibi_slopes, (size_t)hq, FCL_F32, opts->in_tail);
  if (varlen) {
    cuq = oh_pool_ints(&pl, p->cu_seqlens_q, p->batch + 1);
    cuk = oh_pool_ints(&pl, p->cu_seqlens_k, p->batch + 1);
  }
  if (!a.q || !a.k || !a.v || !a.o || (in->dout && (!a.dout || !a.dq || !a.dk || !a.dv)) ||
      (out->lse && !a.lse) || (p->alibi_slopes && !alibi) || (varlen && (!cuq || !cuk))) {
    oh_append(why, nwhy, " could not create buffers;");
    oh_pool_release(&pl);
    return 1;
  }
  if (opts->junk_stride0)
    for (int i = 0; i < pl.nt; ++i) pl.t[i].t.strides[0] = (int64_t)1 << 30;
  if (opts->check_inputs) {
    oh_pool_watch(&pl, a.q->buffer, "q"); oh_pool_watch(&pl, a.k->buffer, "k"); oh_pool_watch(&pl, a.v->buffer, "v");
    if (a.dout) oh_pool_watch(&pl, a.dout->buffer, "dout");
    oh_pool_watch(&pl, alibi, "alibi_slopes"); oh_pool_watch(&pl, cuq, "cu_seqlens_q");
    oh_pool_watch(&pl, cuk, "cu_seqlens_k");
  }
  fcl_attention_desc desc = FCL_ATTENTION_DESC_INIT;
  desc.batch = p->batch; desc.seqlen_q = p->seqlen_q; desc.seqlen_k = p->seqlen_k;
  desc.heads_q = hq; desc.heads_kv = hk; desc.head_dim = d; desc.head_dim_v = dvd;
  desc.softmax_scale = (float)p->softmax_scale;
  desc.causal = p->causal;
  desc.window_left = p->window_left;
  desc.window_right = p->window_right;
  desc.diag_shift = p->diag_shift;
  desc.softcap = (float)p->softcap;
  desc.alibi_slopes = alibi;
  desc.cu_seqlens_q = cuq;
  desc.cu_seqlens_k = cuk;
  desc.dropout_p = (float)p->dropout_p;
  desc.dropout_seed = p->dropout_seed;
  desc.dropout_offset = p->dropout_offset;
  a.desc = &desc;
  const double t0 = tu_now();
  int fail = oh_pool_finish(&pl, fcl_attention_forward(ctx, &desc, &a.q->t, &a.k->t, &a.v->t, &a.o->t,
                                               a.lse),
                    "forward", why, nwhy);
  out->fwd_s = tu_now() - t0;
  if (!fail) {
    out->fwd_read = 1;
    fail |= oh_pool_read_tensor(&pl, a.o, out->o, "o", why, nwhy);
    if (a.lse) fail |= oh_pool_read_buffer(&pl, a.lse, out->lse, n.lse, FCL_F32, opts->out_tail, "lse",
                                   why, nwhy);
  }
  if (!fail && in->dout) {
    if (opts->check_inputs) {
      oh_pool_watch(&pl, a.o->buffer, "o");
      oh_pool_watch(&pl, a.lse, "lse");
    }
    oh_grads g;
    memset(&g, 0, sizeof g);
    oh_grads_add(&g, a.dq->buffer, a.dq->bytes, "dq");
    oh_grads_add(&g, a.dk->buffer, a.dk->bytes, "dk");
    oh_grads_add(&g, a.dv->buffer, a.dv->bytes, "dv");
    fail = oh_run_backward(&pl, att_bwd, att_read, &a, &g, opts->bwd_runs, &out->bwd_s,
                        "backward", why, nwhy);
  }
  if (opts->check_inputs) fail |= oh_watch_changed(pl.ctx, pl.w, pl.nw, why, nwhy);
  oh_pool_release(&pl);
  return fail;
}

int oh_attention(fcl_context *ctx, const ref_attention_problem *p, fcl_dtype dt,
                 const double *q, const double *k, const double *v,
                 const double *dout, double *o, double *lse, double *dq,
                 double *dk, double *dv, char *why, size_t nwhy) {
  const oh_attention_in in = {q, k, v, dout};
  oh_attention_out out = {o, lse, dq, dk, dv, 0.0, 0.0, 0, 0};
  return oh_attention_run(ctx, p, dt, NULL, &in, &out, why, nwhy);
}

/* ---- rwkv6 -------------------------------------------------------------------- */
typedef struct {
  const fcl_rwkv6_desc *desc;
  tu_tensor *r, *k, *v, *w, *dout, *dr, *dk, *dv, *dw;
  cl_mem u, h0, dht, du, dh0;
  size_t nu, ns, out_tail;
  fcl_dtype dt;
  oh_rwkv6_out *out;
} r6_args;

static fcl_status r6_bwd(oh_pool *pl, const void *args) {
  const r6_args *a = args;
  return fcl_rwkv6_backward(pl->ctx, a->desc, &a->r->t, &a->k->t, &a->v->t, &a->w->t, a->u,
                            a->h0, &a->dout->t, a->dht, &a->dr->t, &a->dk->t, &a->dv->t,
                            &a->dw->t, a->du, a->dh0);
}

static int r6_read(oh_pool *pl, const void *args, char *why, size_t nwhy) {
  const r6_args *a = args;
  a->out->bwd_read = 1;
  int fail = oh_pool_read_tensor(pl, a->dr, a->out->dr, "dr", why, nwhy) |
             oh_pool_read_tensor(pl, a->dk, a->out->dk, "dk", why, nwhy) |
             oh_pool_read_tensor(pl, a->dv, a->out->dv, "dv", why, nwhy) |
             oh_pool_read_tensor(pl, a->dw, a->out->dw, "dw", why, nwhy) |
             oh_pool_read_buffer(pl, a->du, a->out->du, a->nu, a->dt, a->out_tail, "du", why, nwhy);
  if (a->dh0)
    fail |= oh_pool_read_buffer(pl, a->dh0, a->out->dh0, a->ns, FCL_F32, a->out_tail, "dh0", why, nwhy);
  return fail;
}

int oh_rwkv6_run(fcl_context *ctx, const ref_rwkv6_problem *p, fcl_dtype dt,
                 fcl_rwkv6_algorithm algo, const oh_opts *opts, const oh_rwkv6_in *in,
                 oh_rwkv6_out *out, char *why, size_t nwhy) {
  oh_opts dflt;
  if (!opts) {
    layout_opts(&dflt);
    opts = &dflt;
  }
  const oh_view *vw = opts->view;
  oh_pool pl;
  memset(&pl, 0, sizeof pl);
  pl.ctx = ctx;
  const int varlen = p->cu_seqlens != NULL;
  const oh_rwkv6_sizes n = oh_rwkv6_count(p);
  const int64_t nb = varlen ? 1 : p->batch, nt = varlen ? p->cu_seqlens[p->batch] : p->seqlen;
  const int64_t H = p->heads, K = p->head_dim_k, V = p->head_dim_v;
  const size_t st = opts->out_tail;
  r6_args a;
  memset(&a, 0, sizeof a);
  a.nu = n.u; a.ns = n.state; a.out_tail = st; a.dt = dt; a.out = out;
  a.r = oh_pool_tensor(&pl, in->r, nb, nt, H, K, dt, &vw[OH_R6_R]);
  a.k = oh_pool_tensor(&pl, in->k, nb, nt, H, K, dt, &vw[OH_R6_K]);
  a.v = oh_pool_tensor(&pl, in->v, nb, nt, H, V, dt, &vw[OH_R6_V]);
  a.w = oh_pool_tensor(&pl, in->w, nb, nt, H, K, dt, &vw[OH_R6_W]);
  tu_tensor *to = oh_pool_tensor(&pl, NULL, nb, nt, H, V, dt, &vw[OH_R6_O]);
  a.u = oh_pool_buffer(&pl, in->u, n.u, dt, opts->in_tail);
  a.h0 = in->h0 ? oh_pool_buffer(&pl, in->h0, n.state, FCL_F32, opts->in_tail) : NULL;
  cl_mem bht = out->ht ? oh_pool_buffer(&pl, NULL, n.state, FCL_F32, st) : NULL;
  if (in->dout) {
    a.dout = oh_pool_tensor(&pl, in->dout, nb, nt, H, V, dt, &vw[OH_R6_DOUT]);
    a.dr = oh_pool_tensor(&pl, NULL, nb, nt, H, K, dt, &vw[OH_R6_DR]);
    a.dk = oh_pool_tensor(&pl, NULL, nb, nt, H, K, dt, &vw[OH_R6_DK]);
    a.dv = oh_pool_tensor(&pl, NULL, nb, nt, H, V, dt, &vw[OH_R6_DV]);
    a.dw = oh_pool_tensor(&pl, NULL, nb, nt, H, K, dt, &vw[OH_R6_DW]);
    a.dht = in->dht ? oh_pool_buffer(&pl, in->dht, n.state, FCL_F32, opts->in_tail) : NULL;
    a.du = oh_pool_buffer(&pl, NULL, n.u, dt, st);
    a.dh0 = out->dh0 ? oh_pool_buffer(&pl, NULL, n.state, FCL_F32, st) : NULL;
  }
  cl_mem cu = varlen ? oh_pool_ints(&pl, p->cu_seqlens, p->batch + 1) : NULL;
  if (!a.r || !a.k || !a.v || !a.w || !to || !a.u || (in->h0 && !a.h0) || (out->ht && !bht) ||
      (varlen && !cu) ||
      (in->dout && (!a.dout || !a.dr || !a.dk || !a.dv || !a.dw || (in->dht && !a.dht) ||
                    !a.du || (out->dh0 && !a.dh0)))) {
    oh_append(why, nwhy, " could not create buffers;");
    oh_pool_release(&pl);
    return 1;
  }
  if (opts->junk_stride0)
    for (int i = 0; i < pl.nt; ++i) pl.t[i].t.strides[0] = ((int64_t)1 << 40) + 12345;
  if (opts->check_inputs) {
    oh_pool_watch(&pl, a.r->buffer, "r"); oh_pool_watch(&pl, a.k->buffer, "k"); oh_pool_watch(&pl, a.v->buffer, "v");
    oh_pool_watch(&pl, a.w->buffer, "w"); oh_pool_watch(&pl, a.u, "u"); oh_pool_watch(&pl, a.h0, "h0");
    if (a.dout) oh_pool_watch(&pl, a.dout->buffer, "dout");
    oh_pool_watch(&pl, a.dht, "dht"); oh_pool_watch(&pl, cu, "cu_seqlens");
  }
  fcl_rwkv6_desc desc = FCL_RWKV6_DESC_INIT;
  desc.batch = p->batch; desc.seqlen = p->seqlen; desc.heads = H;
  desc.head_dim_k = K; desc.head_dim_v = V;
  desc.scale = (float)p->scale;
  desc.reverse = p->reverse;
  desc.cu_seqlens = cu;
  desc.algorithm = algo;
  a.desc = &desc;
  const double t0 = tu_now();
  int fail = oh_pool_finish(&pl, fcl_rwkv6_forward(ctx, &desc, &a.r->t, &a.k->t, &a.v->t, &a.w->t, a.u,
                                           a.h0, &to->t, bht),
                    "rwkv6 forward", why, nwhy);
  out->fwd_s = tu_now() - t0;
  if (!fail) {
    out->fwd_read = 1;
    fail |= oh_pool_read_tensor(&pl, to, out->o, "o", why, nwhy);
    if (bht) fail |= oh_pool_read_buffer(&pl, bht, out->ht, n.state, FCL_F32, st, "ht", why, nwhy);
  }
  if (!fail && in->dout) {
    oh_grads g;
    memset(&g, 0, sizeof g);
    oh_grads_add(&g, a.dr->buffer, a.dr->bytes, "dr");
    oh_grads_add(&g, a.dk->buffer, a.dk->bytes, "dk");
    oh_grads_add(&g, a.dv->buffer, a.dv->bytes, "dv");
    oh_grads_add(&g, a.dw->buffer, a.dw->bytes, "dw");
    oh_grads_add(&g, a.du, n.u * tu_dtype_size(dt) + st, "du");
    oh_grads_add(&g, a.dh0, n.state * 4 + st, "dh0");
    fail = oh_run_backward(&pl, r6_bwd, r6_read, &a, &g, opts->bwd_runs, &out->bwd_s,
                        "rwkv6 backward", why, nwhy);
  }
  if (opts->check_inputs) fail |= oh_watch_changed(pl.ctx, pl.w, pl.nw, why, nwhy);
  oh_pool_release(&pl);
  return fail;
}

int oh_rwkv6(fcl_context *ctx, const ref_rwkv6_problem *p, fcl_dtype dt,
             fcl_rwkv6_algorithm algo, const double *r, const double *k,
             const double *v, const double *w, const double *u, const double *h0,
             const double *dout, const double *dht, double *o, double *ht,
             double *dr, double *dk, double *dv, double *dw, double *du,
             double *dh0, char *why, size_t nwhy) {
  const oh_rwkv6_in in = {r, k, v, w, u, h0, dout, dht};
  oh_rwkv6_out out = {o, ht, dr, dk, dv, dw, du, dh0, 0.0, 0.0, 0, 0};
  return oh_rwkv6_run(ctx, p, dt, algo, NULL, &in, &out, why, nwhy);
}
