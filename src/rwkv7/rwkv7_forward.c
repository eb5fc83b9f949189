/* The fused recurrent forward's launches (a row of the forward's table,
 * rwkv7_plan.c), which the backward's first pass shares. */
#include "rwkv7/rwkv7.h"

void fcl_rwkv7_input_args(fcl_args *a, const fcl_rwkv7_problem *p, cl_int flags,
                          const fcl_rwkv_segment *sg) {
  const fcl_rwkv7_desc *d = p->d;
  const fcl_rwkv7_args *t = &p->a;
  cl_mem cu = p->varlen ? d->cu_seqlens : t->r->buffer;
  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads;
  cl_float scale = fcl_rwkv_scale(d->scale, d->head_dim_k);
  cl_int begin = sg->begin, end = sg->end;
  FCL_ARG(a, t->r->buffer); FCL_ARG(a, t->w->buffer); FCL_ARG(a, t->k->buffer);
  FCL_ARG(a, t->v->buffer); FCL_ARG(a, t->a->buffer); FCL_ARG(a, t->b->buffer);
  FCL_ARG(a, cu);
  fcl_arg_tensor(a, t->r); fcl_arg_tensor(a, t->w); fcl_arg_tensor(a, t->k);
  fcl_arg_tensor(a, t->v); fcl_arg_tensor(a, t->a); fcl_arg_tensor(a, t->b);
  FCL_ARG(a, seqlen); FCL_ARG(a, heads); FCL_ARG(a, scale); FCL_ARG(a, flags);
  FCL_ARG(a, begin); FCL_ARG(a, end);
}

fcl_status fcl_rwkv7_forward_launches(fcl_context *ctx, const fcl_rwkv7_problem *p,
                                      cl_kernel kf, int VS, int VC, int KS,
                                      int64_t per_launch, cl_mem h0, cl_mem ht, cl_mem ck,
                                      int nchunk) {
  const fcl_rwkv7_desc *d = p->d;
  const fcl_rwkv7_args *t = &p->a;
  /* Segments of positions, each one launch (one unless the device bounds
   * loop iterations), the state carried between them. */
  fcl_rwkv_segments sg;
  fcl_status s = fcl_rwkv_segments_of(ctx, d->seqlen, per_launch, p->state_bytes, h0, ht,
                                      t->r->buffer, false, &sg);
  if (s != FCL_OK) return s;
  cl_int nck = nchunk;
  const cl_int base = fcl_rwkv_flags(p->varlen, d->reverse) | (ck ? RW7_CKPT : 0);
  cl_mem obuf = ck ? t->r->buffer : t->o->buffer, ckb = ck ? ck : t->r->buffer;
  const fcl_tensor *o = ck ? t->r : t->o; /* not written with RW7_CKPT */
  const size_t bv = (size_t)(VS * VC), wg = (size_t)(VS * KS);
  size_t g[3] = {((size_t)d->head_dim_v + bv - 1) / bv * wg, (size_t)(d->batch * d->heads), 1};
  size_t l[3] = {wg, 1, 1};
  for (int64_t si = 0; si < sg.count; ++si) {
    fcl_rwkv_segment sgi = fcl_rwkv_segment_at(&sg, si);
    cl_int flags = base | (sgi.reads ? RW_H0 : 0) | (sgi.writes ? RW_HT : 0);
    fcl_args a = FCL_ARGS(kf);
    fcl_rwkv7_input_args(&a, p, flags, &sgi);
    FCL_ARG(&a, sgi.in); FCL_ARG(&a, obuf); fcl_arg_tensor(&a, o); FCL_ARG(&a, sgi.out);
    FCL_ARG(&a, ckb); FCL_ARG(&a, nck);
    if ((s = fcl_launch(ctx, kf, &a, g, l, "enqueueing rwkv7 forward"))) return s;
  }
  return FCL_OK;
}

fcl_status fcl_rwkv7_recurrent_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                       const void *problem, bool *fallback) {
  const fcl_rwkv7_problem *p = problem;
  const fcl_rwkv_fwd_params *c = FCL_CPARAMS(fcl_rwkv_fwd_params, &pl->cfg);
  cl_kernel kf;
  fcl_status s;
  (void)fallback;
  if ((s = fcl_get_kernel(ctx, pl->cls.variant->tops, pl->options, "fcl_rwkv7_fwd_recurrent",
                          &kf)))
    return s;
  const int64_t per = fcl_rwkv7_fwd_positions_per_launch(&ctx->info, (int)p->d->head_dim_k, c);
  return fcl_rwkv7_forward_launches(ctx, p, kf, c->VS, c->VC, c->KS, per, p->a.h0, p->a.ht,
                                    NULL, 0);
}
