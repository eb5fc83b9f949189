/* fcl_rwkv6_forward: the checked call, run by the forward's table
 * (rwkv6_plan.c); the fused recurrent kernel's launches. The chunked
 * kernels are in rwkv6_chunked.c and rwkv6_chunk_mma.c, the step kernel in
 * rwkv6_step.c. */
#include "rwkv6/rwkv6.h"



fcl_status fcl_rwkv6_forward_run(fcl_context *ctx, const fcl_rwkv6_desc *d,
                             const fcl_tensor *r, const fcl_tensor *k,
                             const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                             cl_mem h0, const fcl_tensor *o, cl_mem ht) {
  fcl_rwkv6_problem p;
  fcl_status s = fcl_check_rwkv6(ctx, d, r, k, v, w, u, h0, &p);
  if (s != FCL_OK) return s;
  if ((s = fcl_check_rwkv6_view(ctx, d, &p, o, "o", true, r))) return s;
  if (ht && (s = fcl_check_buffer(ctx, ht, "ht", p.state_bytes))) return s;
  p.a = (fcl_rwkv6_args){.r = r, .k = k, .v = v, .w = w, .o = o, .u = u, .h0 = h0, .ht = ht};
  return fcl_rwkv6_run(ctx, &p, false);
}

fcl_status fcl_rwkv6_recurrent_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                       const void *problem, bool *fallback) {
  const fcl_rwkv6_problem *p = problem;
  const fcl_rwkv6_desc *d = p->d;
  const fcl_tensor *r = p->a.r, *k = p->a.k, *v = p->a.v, *w = p->a.w, *o = p->a.o;
  const cl_mem u = p->a.u, h0 = p->a.h0, ht = p->a.ht;
  const fcl_variant *kd = pl->cls.variant;
  const char *opts = pl->options;
  const fcl_rwkv_fwd_params *c = FCL_CPARAMS(fcl_rwkv_fwd_params, &pl->cfg);
  const int K = (int)d->head_dim_k;
  cl_kernel krec;
  fcl_status s;
  (void)fallback;
  if ((s = fcl_get_kernel(ctx, kd->tops, opts, "fcl_rwkv6_fwd_recurrent", &krec)))
    return s;

  /* Segments of positions, each one launch (one unless the device bounds
   * loop iterations), the state carried between them. */
  const int64_t per_launch = fcl_rwkv6_fwd_positions_per_launch(&ctx->info, K, c);
  fcl_rwkv_segments sg;
  if ((s = fcl_rwkv_segments_of(ctx, d->seqlen, per_launch, p->state_bytes, h0, ht, r->buffer,
                                false, &sg)))
    return s;

  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads;
  cl_float scale = fcl_rwkv_scale(d->scale, d->head_dim_k);
  const cl_int base_flags = fcl_rwkv_flags(p->varlen, d->reverse);
  cl_mem cu_b = p->varlen ? d->cu_seqlens : r->buffer;
  const size_t bh = (size_t)(d->batch * d->heads);
  const size_t wg = (size_t)(c->VS * c->KS), bv = (size_t)(c->VS * c->VC);
  size_t g1[3] = {((size_t)d->head_dim_v + bv - 1) / bv * wg, bh, 1};
  size_t l1[3] = {wg, 1, 1};

  for (int64_t si = 0; si < sg.count; ++si) {
    fcl_rwkv_segment sgi = fcl_rwkv_segment_at(&sg, si);
    cl_int flags = base_flags | (sgi.reads ? RW_H0 : 0) | (sgi.writes ? RW_HT : 0);
    fcl_args a = FCL_ARGS(krec);
    FCL_ARG(&a, r->buffer); FCL_ARG(&a, k->buffer); FCL_ARG(&a, v->buffer);
    FCL_ARG(&a, w->buffer); FCL_ARG(&a, u); FCL_ARG(&a, sgi.in); FCL_ARG(&a, o->buffer);
    FCL_ARG(&a, sgi.out); FCL_ARG(&a, cu_b);
    fcl_arg_tensor(&a, r); fcl_arg_tensor(&a, k); fcl_arg_tensor(&a, v);
    fcl_arg_tensor(&a, w); fcl_arg_tensor(&a, o);
    FCL_ARG(&a, seqlen); FCL_ARG(&a, heads); FCL_ARG(&a, scale);
    FCL_ARG(&a, flags); FCL_ARG(&a, sgi.begin); FCL_ARG(&a, sgi.end);
    if ((s = fcl_launch(ctx, krec, &a, g1, l1, "enqueueing rwkv6 forward"))) return s;
  }
  return FCL_OK;
}
