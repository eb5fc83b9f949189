/* The chunked RWKV6 forward and backward (cl/rwkv6/rwkv6_chunk_*.cl):
 * the state at every chunk boundary in one pass over the chunks in order,
 * then every chunk's outputs in parallel; the backward adds the state's
 * gradient at every boundary (a pass over the chunks in reverse), then
 * dv, then dr, dk, dw and per-chunk du partials, then du.
 * Arguments are checked and the plan made by the callers
 * (rwkv6_forward.c, rwkv6_backward.c); every kernel and buffer is had
 * before the first launch. */
#include "rwkv6/rwkv6.h"


typedef fcl_rwkv6_chunk_common common;

/* Whether every row of an operand starts at a multiple of 16 bytes (an
 * absent one counts as aligned). */
static bool rows16(const fcl_tensor *x, bool varlen) {
  const size_t esize = x ? fcl_dtype_size(x->dtype) : 1;
  return !x || fcl_tensor_aligned(x, esize, varlen, (int64_t)(16 / esize));
}

fcl_rwkv6_chunk_common fcl_rwkv6_chunk_common_of(const fcl_rwkv6_desc *d,
                                                 const fcl_rwkv6_problem *p, int tc,
                                                 const fcl_rwkv6_args *t) {
  const fcl_tensor *r = t->r;
  common m;
  m.seqlen = (cl_int)d->seqlen;
  m.heads = (cl_int)d->heads;
  m.nchunk = (cl_int)((d->seqlen + tc - 1) / tc);
  m.flags = fcl_rwkv_flags(p->varlen, d->reverse);
  if (rows16(t->r, p->varlen) && rows16(t->k, p->varlen) && rows16(t->w, p->varlen) &&
      rows16(t->v, p->varlen) && rows16(t->dout, p->varlen))
    m.flags |= RW_ALIGNED;
  m.scale = fcl_rwkv_scale(d->scale, d->head_dim_k);
  m.cu = p->varlen ? d->cu_seqlens : r->buffer;
  m.bh = (size_t)(d->batch * d->heads);
  return m;
}

/* The state pass (RW_STATE_GRAD: its gradient) over every chunk, in
 * launches one after another where the device bounds loop iterations
 * (carrying the state), or in c->nseg runs side by side (two launches:
 * the runs' own updates into `segs`, then the walks from them), from `in`
 * (NULL: 0) to `out` (NULL: not kept): a_t, w_t, b_t are (k, w, v) or
 * (r, w, dO). */
static fcl_status state_pass(fcl_context *ctx, const fcl_rwkv6_desc *d,
                             const fcl_rwkv6_chunk_launch *c, const common *m, cl_kernel ks,
                             bool grad, const fcl_tensor *ta, const fcl_tensor *tw,
                             const fcl_tensor *tb, cl_mem in, cl_mem out, cl_mem ck,
                             cl_mem carry, cl_mem segs) {
  const int64_t seg = c->per_launch > 0 ? c->per_launch : m->nchunk;
  const int64_t nlaunch = (m->nchunk + seg - 1) / seg;
  const cl_int nseg = c->nseg > 1 ? (cl_int)c->nseg : 1;
  const size_t nkb = (size_t)((d->head_dim_k + c->HK - 1) / c->HK);
  const size_t nvb = (size_t)((d->head_dim_v + c->HV - 1) / c->HV);
  const size_t wg = c->wg;
  size_t g[3] = {nkb * nvb * wg, m->bh * (size_t)nseg, 1}, l[3] = {wg, 1, 1};
  /* Runs side by side take every chunk in one launch (per_launch 0). */
  const int64_t launches = nseg > 1 ? 2 : nlaunch;
  for (int64_t n = 0; n < launches; ++n) {
    const bool ends = nseg > 1 && n == 0; /* runs side by side: their updates first */
    const int64_t si = nseg > 1 ? 0 : grad ? nlaunch - 1 - n : n; /* the gradient walks back */
    const bool first = nseg > 1 || n == 0, last = nseg > 1 || n == nlaunch - 1;
    cl_mem from = first ? in : carry, to = last ? out : carry;
    cl_int flags = m->flags | (grad ? RW_STATE_GRAD : 0) | (from ? RW_H0 : 0) |
                   (to ? RW_HT : 0) | (ends ? RW_SEG_ENDS : 0);
    cl_int cb = (cl_int)(si * seg),
           ce = (cl_int)(si == nlaunch - 1 ? m->nchunk : (si + 1) * seg);
    if (!from) from = ta->buffer;
    if (!to) to = ta->buffer;
    fcl_args a = FCL_ARGS(ks);
    FCL_ARG(&a, ta->buffer); FCL_ARG(&a, tw->buffer); FCL_ARG(&a, tb->buffer);
    FCL_ARG(&a, from); FCL_ARG(&a, to); FCL_ARG(&a, ck); FCL_ARG(&a, segs);
    FCL_ARG(&a, m->cu);
    fcl_arg_tensor(&a, ta); fcl_arg_tensor(&a, tw); fcl_arg_tensor(&a, tb);
    FCL_ARG(&a, m->seqlen); FCL_ARG(&a, m->heads); FCL_ARG(&a, m->nchunk);
    FCL_ARG(&a, m->scale); FCL_ARG(&a, flags); FCL_ARG(&a, cb); FCL_ARG(&a, ce);
    FCL_ARG(&a, nseg);
    fcl_status s = fcl_launch(ctx, ks, &a, g, l, "enqueueing rwkv6 chunk states");
    if (s) return s;
  }
  return FCL_OK;
}

/* The state pass's scratch: the carried state (slot 5) and, for runs side
 * by side, their updates and log-decays (slot 3; else ck stands in). */
static fcl_status state_scratch(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                const fcl_rwkv6_problem *p, const fcl_rwkv6_chunk_launch *lc,
                                const common *m, cl_mem ck, cl_mem *carry, cl_mem *segs) {
  fcl_status s = fcl_scratch(ctx, 5, p->state_bytes, carry);
  *segs = ck;
  if (s == FCL_OK && lc->nseg > 1)
    s = fcl_scratch(ctx, 3,
                    fcl_bytes((int64_t)m->bh, lc->nseg, d->head_dim_k, d->head_dim_v + 1, 4),
                    segs);
  return s;
}

/* Output columns from the chunk matrix: o (forward) or dv (RW_STATE_GRAD),
 * by kernel ko in work-groups of wg work-items, bv columns each. */
static fcl_status chunk_out(fcl_context *ctx, const fcl_rwkv6_desc *d, size_t wg, int bv,
                            const common *m, cl_kernel ko, bool grad, const fcl_rwkv6_args *t,
                            const fcl_tensor *x, cl_mem ck, const fcl_tensor *y) {
  cl_int flags = m->flags | (grad ? RW_STATE_GRAD : 0);
  fcl_args a = FCL_ARGS(ko);
  FCL_ARG(&a, t->r->buffer); FCL_ARG(&a, t->k->buffer); FCL_ARG(&a, t->w->buffer);
  FCL_ARG(&a, t->u); FCL_ARG(&a, x->buffer); FCL_ARG(&a, ck); FCL_ARG(&a, y->buffer);
  FCL_ARG(&a, m->cu);
  fcl_arg_tensor(&a, t->r); fcl_arg_tensor(&a, t->k); fcl_arg_tensor(&a, t->w);
  fcl_arg_tensor(&a, x); fcl_arg_tensor(&a, y);
  FCL_ARG(&a, m->seqlen); FCL_ARG(&a, m->heads); FCL_ARG(&a, m->nchunk); FCL_ARG(&a, m->scale);
  FCL_ARG(&a, flags);
  size_t g[3] = {(size_t)m->nchunk * wg, (size_t)((d->head_dim_v + bv - 1) / bv), m->bh};
  size_t l[3] = {wg, 1, 1};
  return fcl_launch(ctx, ko, &a, g, l, grad ? "enqueueing rwkv6 chunk dv"
                                            : "enqueueing rwkv6 chunk output");
}

fcl_status fcl_rwkv6_chunk_begin(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                 const fcl_rwkv6_problem *p, const fcl_rwkv6_chunk_launch *lc,
                                 const fcl_rwkv6_args *t, cl_kernel ks, cl_mem *ck) {
  const common m = fcl_rwkv6_chunk_common_of(d, p, lc->TC, t);
  cl_mem carry, segs;
  fcl_status s;
  if ((s = fcl_scratch(ctx, 0,
                       fcl_bytes((int64_t)m.bh, m.nchunk, d->head_dim_k, d->head_dim_v,
                                 (int64_t)lc->ck_esize),
                       ck)) ||
      (s = state_scratch(ctx, d, p, lc, &m, *ck, &carry, &segs)))
    return s;
  return state_pass(ctx, d, lc, &m, ks, false, t->k, t->w, t->v, t->h0, t->ht, *ck, carry,
                    segs);
}

fcl_status fcl_rwkv6_chunked_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                     const void *problem, bool *fallback) {
  const fcl_rwkv6_problem *p = problem;
  const fcl_rwkv6_desc *d = p->d;
  const fcl_rwkv6_args *t = &p->a;
  (void)fallback;
  const fcl_variant *kd = pl->cls.variant;
  const fcl_rwkv6_chunk_params *c = FCL_CPARAMS(fcl_rwkv6_chunk_params, &pl->cfg);
  const fcl_rwkv6_chunk_launch lc = fcl_rwkv6_chunk_state_launch(&ctx->info, c);
  const common m = fcl_rwkv6_chunk_common_of(d, p, c->TC, t);
  cl_kernel ks, ko;
  cl_mem ck;
  fcl_status s;
  if ((s = fcl_get_kernel(ctx, kd->tops, pl->options, "fcl_rwkv6_chunk_state",
                          &ks)) ||
      (s = fcl_get_kernel(ctx, kd->tops, pl->options, "fcl_rwkv6_chunk_out", &ko)) ||
      (s = fcl_rwkv6_chunk_begin(ctx, d, p, &lc, t, ks, &ck)))
    return s;
  return chunk_out(ctx, d, (size_t)c->WG, c->BV, &m, ko, false, t, t->v, ck, t->o);
}

fcl_status fcl_rwkv6_chunked_backward(fcl_context *ctx, const fcl_variant_plan *pl,
                                      const void *problem, bool *fallback) {
  const fcl_rwkv6_problem *p = problem;
  const fcl_rwkv6_desc *d = p->d;
  const fcl_rwkv6_args *t = &p->a;
  (void)fallback;
  const fcl_variant *kd = pl->cls.variant;
  const fcl_rwkv6_chunk_params *c = FCL_CPARAMS(fcl_rwkv6_chunk_params, &pl->cfg);
  fcl_rwkv6_chunk_bwd_launch lb = {fcl_rwkv6_chunk_state_launch(&ctx->info, c), c->BK, c->WG,
                                   (size_t)c->WG, c->BV, NULL, NULL, NULL, NULL};
  fcl_status s;
  if ((s = fcl_get_kernel(ctx, kd->tops, pl->options, "fcl_rwkv6_chunk_state",
                          &lb.ks)) ||
      (s = fcl_get_kernel(ctx, kd->tops, pl->options, "fcl_rwkv6_chunk_out",
                          &lb.kout)) ||
      (s = fcl_get_kernel(ctx, kd->tops, pl->options, "fcl_rwkv6_chunk_dk",
                          &lb.kdk)) ||
      (s = fcl_get_kernel(ctx, kd->tops, pl->options, "fcl_rwkv6_chunk_du",
                          &lb.kdu)))
    return s;
  return fcl_rwkv6_chunk_backward_run(ctx, d, p, t, &lb);
}

fcl_status fcl_rwkv6_chunk_backward_run(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                        const fcl_rwkv6_problem *p, const fcl_rwkv6_args *t,
                                        const fcl_rwkv6_chunk_bwd_launch *lb) {
  const common m = fcl_rwkv6_chunk_common_of(d, p, lb->state.TC, t);
  const int64_t K = d->head_dim_k, V = d->head_dim_v;
  const size_t ckb = fcl_bytes((int64_t)m.bh, m.nchunk, K, V, (int64_t)lb->state.ck_esize);
  const fcl_rwkv6_chunk_launch *lc = &lb->state;
  cl_mem cks, ckd, dup, carry, segs;
  fcl_status s;
  if ((s = fcl_scratch(ctx, 0, ckb, &cks)) || (s = fcl_scratch(ctx, 1, ckb, &ckd)) ||
      (s = fcl_scratch(ctx, 2, fcl_bytes(m.nchunk, d->batch, d->heads, K, 4), &dup)) ||
      (s = state_scratch(ctx, d, p, lc, &m, cks, &carry, &segs)))
    return s;
  if ((s = state_pass(ctx, d, lc, &m, lb->ks, false, t->k, t->w, t->v, t->h0, NULL, cks,
                      carry, segs)) ||
      (s = state_pass(ctx, d, lc, &m, lb->ks, true, t->r, t->w, t->dout, t->dht, t->dh0, ckd,
                      carry, segs)) ||
      (s = chunk_out(ctx, d, lb->out_wg, lb->out_bv, &m, lb->kout, true, t, t->dout, ckd,
                     t->dv)))
    return s;

  cl_kernel kk = lb->kdk, kdu = lb->kdu;
  fcl_args a = FCL_ARGS(kk);
  FCL_ARG(&a, t->r->buffer); FCL_ARG(&a, t->k->buffer); FCL_ARG(&a, t->v->buffer);
  FCL_ARG(&a, t->w->buffer); FCL_ARG(&a, t->u); FCL_ARG(&a, t->dout->buffer);
  FCL_ARG(&a, cks); FCL_ARG(&a, ckd); FCL_ARG(&a, t->dr->buffer); FCL_ARG(&a, t->dk->buffer);
  FCL_ARG(&a, t->dw->buffer); FCL_ARG(&a, dup); FCL_ARG(&a, m.cu);
  fcl_arg_tensor(&a, t->r); fcl_arg_tensor(&a, t->k); fcl_arg_tensor(&a, t->v);
  fcl_arg_tensor(&a, t->w); fcl_arg_tensor(&a, t->dout); fcl_arg_tensor(&a, t->dr);
  fcl_arg_tensor(&a, t->dk); fcl_arg_tensor(&a, t->dw);
  FCL_ARG(&a, m.seqlen); FCL_ARG(&a, m.heads); FCL_ARG(&a, m.nchunk); FCL_ARG(&a, m.scale);
  FCL_ARG(&a, m.flags);
  size_t g[3] = {(size_t)m.nchunk * (size_t)lb->WG, (size_t)((K + lb->BK - 1) / lb->BK), m.bh};
  size_t l[3] = {(size_t)lb->WG, 1, 1};
  if ((s = fcl_launch(ctx, kk, &a, g, l, "enqueueing rwkv6 chunk dr dk dw"))) return s;

  cl_int nseq = (cl_int)d->batch;
  fcl_args b = FCL_ARGS(kdu);
  FCL_ARG(&b, dup); FCL_ARG(&b, t->du); FCL_ARG(&b, m.heads); FCL_ARG(&b, m.nchunk);
  FCL_ARG(&b, nseq);
  /* RW_DU_KEYS keys a work-group, in up to RW_DU_PARTS parts (rwkv6_abi.h) */
  size_t parts = ctx->info.max_wg / RW_DU_KEYS;
  parts = parts < 1 ? 1 : parts > RW_DU_PARTS ? RW_DU_PARTS : parts;
  size_t gd[3] = {(size_t)(K + RW_DU_KEYS - 1) / RW_DU_KEYS * RW_DU_KEYS * parts,
                  (size_t)d->heads, 1};
  size_t ld[3] = {RW_DU_KEYS * parts, 1, 1};
  return fcl_launch(ctx, kdu, &b, gd, ld, "enqueueing rwkv6 chunk du");
}
