/* The chunked RWKV7 forward (cl/rwkv7/rwkv7_chunk_prep.cl,
 * rwkv7_chunk_state.cl, rwkv7_chunk_out.cl): every chunk's factors in
 * parallel, then the state at every chunk boundary in one pass over the
 * chunks in order (launches one after another where the device bounds
 * loop iterations, the state carried between them), then every chunk's
 * outputs in parallel (the portable kernel, or rwkv7_chunk_mma.c's on
 * tensor cores).
 * Arguments are checked and the plan made by the callers (rwkv7_forward.c,
 * rwkv7_plan.c); every kernel and buffer is had before the first launch. */
#include "rwkv7/rwkv7.h"

typedef fcl_rwkv7_chunk_params params;
/* The parameters both chunked variants have, first in each (rwkv7.h). */
typedef struct { FCL_RWKV7_CHUNK_MMA_PARAMS(FCL_PARAM_FIELD_) } common;

/* The state pass: chunks [0, nchunk) in launches of per_launch chunks (0:
 * one), from h0 (NULL: 0) to ht (NULL: not kept), checkpoints into ck. */
static fcl_status state_pass(fcl_context *ctx, const fcl_rwkv7_problem *p, const common *c,
                             cl_kernel ks, cl_mem x, cl_mem ck, cl_int nchunk,
                             int64_t per_launch) {
  const fcl_rwkv7_desc *d = p->d;
  const fcl_rwkv7_args *t = &p->a;
  fcl_rwkv_segments sg;
  fcl_status s = fcl_rwkv_segments_of(ctx, nchunk, per_launch, p->state_bytes, t->h0, t->ht,
                                      t->r->buffer, false, &sg);
  if (s != FCL_OK) return s;
  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads;
  cl_mem cu = p->varlen ? d->cu_seqlens : t->r->buffer;
  size_t g[3] = {(size_t)((d->head_dim_v + c->HV - 1) / c->HV) * (size_t)c->WG,
                 (size_t)(d->batch * d->heads), 1};
  size_t l[3] = {(size_t)c->WG, 1, 1};
  for (int64_t si = 0; si < sg.count; ++si) {
    fcl_rwkv_segment sgi = fcl_rwkv_segment_at(&sg, si); /* of chunks */
    cl_int flags = fcl_rwkv_flags(p->varlen, d->reverse) | (sgi.reads ? RW_H0 : 0) |
                   (sgi.writes ? RW_HT : 0);
    fcl_args a = FCL_ARGS(ks);
    FCL_ARG(&a, t->v->buffer); FCL_ARG(&a, x); FCL_ARG(&a, sgi.in); FCL_ARG(&a, sgi.out);
    FCL_ARG(&a, ck); FCL_ARG(&a, cu); fcl_arg_tensor(&a, t->v);
    FCL_ARG(&a, seqlen); FCL_ARG(&a, heads); FCL_ARG(&a, nchunk); FCL_ARG(&a, flags);
    FCL_ARG(&a, sgi.begin); FCL_ARG(&a, sgi.end);
    if ((s = fcl_launch(ctx, ks, &a, g, l, "enqueueing rwkv7 chunk states"))) return s;
  }
  return FCL_OK;
}

fcl_status fcl_rwkv7_chunk_launches(fcl_context *ctx, const fcl_variant_plan *pl,
                                    const fcl_rwkv7_problem *p, const char *out_kernel,
                                    size_t out_wg, int out_bv, bool *fallback) {
  const fcl_rwkv7_desc *d = p->d;
  const fcl_rwkv7_args *t = &p->a;
  const common *c = FCL_CPARAMS(common, &pl->cfg);
  const char *const *tops = pl->cls.variant->tops;
  const int K = (int)d->head_dim_k;
  const cl_int nchunk = (cl_int)((d->seqlen + c->TC - 1) / c->TC);
  const int64_t bh = d->batch * d->heads;
  const size_t xbytes = fcl_bytes(bh, nchunk, (int64_t)fcl_rwkv7_chunk_floats(K, c->TC), 4, 1);
  const size_t ckbytes = fcl_bytes(bh, nchunk, K, d->head_dim_v, 4);
  if (ctx->info.max_alloc && (xbytes > ctx->info.max_alloc || ckbytes > ctx->info.max_alloc)) {
    fcl_log(ctx, "rwkv7 chunked forward: its scratch (%zu and %zu bytes) exceeds one buffer's "
            "limit; the next kernel", xbytes, ckbytes);
    *fallback = true;
    return FCL_OK;
  }
  cl_kernel kp, ks, ko;
  cl_mem x, ck;
  fcl_status s;
  if ((s = fcl_get_kernel(ctx, tops, pl->options, "fcl_rwkv7_chunk_prep", &kp)) ||
      (s = fcl_get_kernel(ctx, tops, pl->options, "fcl_rwkv7_chunk_state", &ks)) ||
      (s = fcl_get_kernel(ctx, tops, pl->options, out_kernel, &ko)) ||
      (s = fcl_scratch(ctx, 0, xbytes, &x)) || (s = fcl_scratch(ctx, 1, ckbytes, &ck)))
    return s;
  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads;
  cl_int flags = fcl_rwkv_flags(p->varlen, d->reverse);
  cl_float scale = fcl_rwkv_scale(d->scale, d->head_dim_k);
  cl_mem cu = p->varlen ? d->cu_seqlens : t->r->buffer;

  fcl_args a = FCL_ARGS(kp);
  FCL_ARG(&a, t->r->buffer); FCL_ARG(&a, t->w->buffer); FCL_ARG(&a, t->k->buffer);
  FCL_ARG(&a, t->a->buffer); FCL_ARG(&a, t->b->buffer); FCL_ARG(&a, x); FCL_ARG(&a, cu);
  fcl_arg_tensor(&a, t->r); fcl_arg_tensor(&a, t->w); fcl_arg_tensor(&a, t->k);
  fcl_arg_tensor(&a, t->a); fcl_arg_tensor(&a, t->b);
  FCL_ARG(&a, seqlen); FCL_ARG(&a, heads); FCL_ARG(&a, nchunk); FCL_ARG(&a, flags);
  size_t gp[3] = {(size_t)nchunk * (size_t)c->WG, (size_t)bh, 1}, l[3] = {(size_t)c->WG, 1, 1};
  if ((s = fcl_launch(ctx, kp, &a, gp, l, "enqueueing rwkv7 chunk factors")) ||
      (s = state_pass(ctx, p, c, ks, x, ck, nchunk,
                      fcl_rwkv7_chunk_state_per_launch(&ctx->info, K, c->TC, c->HV, c->WG))))
    return s;

  fcl_args b = FCL_ARGS(ko);
  FCL_ARG(&b, t->v->buffer); FCL_ARG(&b, x); FCL_ARG(&b, ck); FCL_ARG(&b, t->o->buffer);
  FCL_ARG(&b, cu); fcl_arg_tensor(&b, t->v); fcl_arg_tensor(&b, t->o);
  FCL_ARG(&b, seqlen); FCL_ARG(&b, heads); FCL_ARG(&b, nchunk); FCL_ARG(&b, scale);
  FCL_ARG(&b, flags);
  size_t go[3] = {(size_t)nchunk * out_wg, (size_t)((d->head_dim_v + out_bv - 1) / out_bv),
                  (size_t)bh};
  size_t lo[3] = {out_wg, 1, 1};
  return fcl_launch(ctx, ko, &b, go, lo, "enqueueing rwkv7 chunk output");
}

fcl_status fcl_rwkv7_chunked_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                     const void *problem, bool *fallback) {
  const params *c = FCL_CPARAMS(params, &pl->cfg);
  return fcl_rwkv7_chunk_launches(ctx, pl, problem, "fcl_rwkv7_chunk_out", (size_t)c->WG, c->BV,
                                  fallback);
}
