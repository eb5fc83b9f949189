/* fcl_rwkv6_backward: the checked call, run by the backward's table
 * (rwkv6_plan.c); the fused recurrent kernels' launches: forward-time pass
 * (dr, du partials, checkpoints), reverse-time pass (dk, dw partials, dv,
 * dh0), then fixed-order sums. The chunked backward is in rwkv6_chunked.c
 * and rwkv6_chunk_mma.c. */
#include "rwkv6/rwkv6.h"

#include <stdio.h>


fcl_status fcl_rwkv6_backward_run(fcl_context *ctx, const fcl_rwkv6_desc *d,
                              const fcl_tensor *r, const fcl_tensor *k,
                              const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                              cl_mem h0, const fcl_tensor *dout, cl_mem dht,
                              const fcl_tensor *dr, const fcl_tensor *dk,
                              const fcl_tensor *dv, const fcl_tensor *dw,
                              cl_mem du, cl_mem dh0) {
  fcl_rwkv6_problem p;
  fcl_status s = fcl_check_rwkv6(ctx, d, r, k, v, w, u, h0, &p);
  if (s != FCL_OK) return s;
  if ((s = fcl_check_rwkv6_view(ctx, d, &p, dout, "dout", true, r)) ||
      (s = fcl_check_rwkv6_view(ctx, d, &p, dr, "dr", false, r)) ||
      (s = fcl_check_rwkv6_view(ctx, d, &p, dk, "dk", false, r)) ||
      (s = fcl_check_rwkv6_view(ctx, d, &p, dv, "dv", true, r)) ||
      (s = fcl_check_rwkv6_view(ctx, d, &p, dw, "dw", false, r)) ||
      (s = fcl_check_buffer(ctx, du, "du", p.u_bytes)) ||
      (dht && (s = fcl_check_buffer(ctx, dht, "dht", p.state_bytes))) ||
      (dh0 && (s = fcl_check_buffer(ctx, dh0, "dh0", p.state_bytes))))
    return s;

  p.a = (fcl_rwkv6_args){.r = r, .k = k, .v = v, .w = w, .dout = dout, .dr = dr, .dk = dk,
                         .dv = dv, .dw = dw, .u = u, .h0 = h0, .dht = dht, .du = du,
                         .dh0 = dh0};
  return fcl_rwkv6_run(ctx, &p, true);
}

fcl_status fcl_rwkv6_recurrent_backward(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback) {
  const fcl_rwkv6_problem *p = problem;
  const fcl_rwkv6_desc *d = p->d;
  const fcl_rwkv6_args *t = &p->a;
  const fcl_tensor *r = t->r, *k = t->k, *v = t->v, *w = t->w, *dout = t->dout;
  const fcl_tensor *dr = t->dr, *dk = t->dk, *dv = t->dv, *dw = t->dw;
  const cl_mem u = t->u, h0 = t->h0, dht = t->dht, du = t->du, dh0 = t->dh0;
  const int K = (int)d->head_dim_k, V = (int)d->head_dim_v;
  const fcl_variant *kd = pl->cls.variant;
  const char *opts = pl->options;
  const fcl_rwkv6_bwd_params *c = FCL_CPARAMS(fcl_rwkv6_bwd_params, &pl->cfg);
  fcl_status s;
  (void)fallback;
  cl_kernel kf, kr, kfin, kdu;
  if ((s = fcl_get_kernel(ctx, kd->tops, opts, "fcl_rwkv6_bwd_forward", &kf)) ||
      (s = fcl_get_kernel(ctx, kd->tops, opts, "fcl_rwkv6_bwd_reverse", &kr)) ||
      (s = fcl_get_kernel(ctx, kd->tops, opts, "fcl_rwkv6_bwd_finish", &kfin)) ||
      (s = fcl_get_kernel(ctx, kd->tops, opts, "fcl_rwkv6_bwd_du", &kdu)))
    return s;

  const cl_int nchunk = (cl_int)((d->seqlen + c->TC - 1) / c->TC);
  const cl_int nvb = (V + c->BVB - 1) / c->BVB;
  const size_t part = fcl_bytes(nvb, p->ntok, d->heads, K, sizeof(float));
  cl_mem ck, drp, dkp, dwp, dup;
  if ((s = fcl_scratch(ctx, 0, fcl_bytes(d->batch * d->heads, nchunk, K, V, 4), &ck)) ||
      (s = fcl_scratch(ctx, 1, part, &drp)) || (s = fcl_scratch(ctx, 2, part, &dkp)) ||
      (s = fcl_scratch(ctx, 3, part, &dwp)) ||
      (s = fcl_scratch(ctx, 4, fcl_bytes(nvb, d->batch * d->heads, K, 4, 1), &dup)))
    return s;

  /* Segments of positions, one launch each (one unless the device bounds
   * loop iterations): the state is carried between them forward (from h0,
   * the last keeping none), then its gradient backward (dht to dh0). */
  const int64_t per_launch = fcl_rwkv6_bwd_positions_per_launch(&ctx->info, K, c);
  fcl_rwkv_segments sg[2];
  if ((s = fcl_rwkv_segments_of(ctx, d->seqlen, per_launch, p->state_bytes, h0, NULL,
                                r->buffer, false, &sg[0])) ||
      (s = fcl_rwkv_segments_of(ctx, d->seqlen, per_launch, p->state_bytes, dht, dh0,
                                r->buffer, true, &sg[1])))
    return s;

  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads;
  cl_long ntok = p->ntok;
  cl_float scale = fcl_rwkv_scale(d->scale, d->head_dim_k);
  const cl_int base_flags = fcl_rwkv_flags(p->varlen, d->reverse);
  cl_mem cu_b = p->varlen ? d->cu_seqlens : r->buffer;
  const size_t bh = (size_t)(d->batch * d->heads);
  size_t gp[3] = {(size_t)nvb * K, bh, 1}, lp[3] = {(size_t)K, 1, 1};

  /* Pass 1 walks the segments forward, pass 2 backward. */
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t n = 0; n < sg[pass].count; ++n) {
      fcl_rwkv_segment sgi = fcl_rwkv_segment_at(&sg[pass], n);
      cl_int flags = base_flags;
      if (pass == 0)
        flags |= (sgi.reads ? RW_H0 : 0) | (sgi.writes ? RW_HT : 0) | (n == 0 ? 0 : RW_ACCUMULATE);
      else flags |= (sgi.reads ? RW_DHT : 0) | (sgi.writes ? RW_DH0 : 0);
      fcl_args a = FCL_ARGS(pass == 0 ? kf : kr);
      FCL_ARG(&a, r->buffer); FCL_ARG(&a, k->buffer); FCL_ARG(&a, v->buffer);
      FCL_ARG(&a, w->buffer); FCL_ARG(&a, u); FCL_ARG(&a, dout->buffer); FCL_ARG(&a, cu_b);
      fcl_arg_tensor(&a, r); fcl_arg_tensor(&a, k); fcl_arg_tensor(&a, v);
      fcl_arg_tensor(&a, w); fcl_arg_tensor(&a, dout);
      FCL_ARG(&a, seqlen); FCL_ARG(&a, heads); FCL_ARG(&a, nchunk); FCL_ARG(&a, ntok);
      FCL_ARG(&a, scale); FCL_ARG(&a, flags); FCL_ARG(&a, sgi.begin); FCL_ARG(&a, sgi.end);
      if (pass == 0) {
        FCL_ARG(&a, sgi.in); FCL_ARG(&a, ck); FCL_ARG(&a, drp); FCL_ARG(&a, dup);
        FCL_ARG(&a, sgi.out);
      } else {
        FCL_ARG(&a, sgi.in); FCL_ARG(&a, ck); FCL_ARG(&a, dkp); FCL_ARG(&a, dwp);
        FCL_ARG(&a, dv->buffer); fcl_arg_tensor(&a, dv); FCL_ARG(&a, sgi.out);
      }
      if ((s = fcl_launch(ctx, a.k, &a, gp, lp, "enqueueing rwkv6 backward"))) return s;
    }

  fcl_args af = FCL_ARGS(kfin);
  FCL_ARG(&af, drp); FCL_ARG(&af, dkp); FCL_ARG(&af, dwp);
  FCL_ARG(&af, dr->buffer); FCL_ARG(&af, dk->buffer); FCL_ARG(&af, dw->buffer);
  fcl_arg_tensor(&af, dr); fcl_arg_tensor(&af, dk); fcl_arg_tensor(&af, dw);
  FCL_ARG(&af, seqlen); FCL_ARG(&af, heads); FCL_ARG(&af, nvb); FCL_ARG(&af, ntok);
  FCL_ARG(&af, base_flags);
  cl_int nseq = (cl_int)d->batch;
  fcl_args ad = FCL_ARGS(kdu);
  FCL_ARG(&ad, dup); FCL_ARG(&ad, du); FCL_ARG(&ad, heads); FCL_ARG(&ad, nvb);
  FCL_ARG(&ad, nseq);
  const size_t kr16 = (size_t)(K + 15) / 16 * 16;
  size_t gf[3] = {kr16, (size_t)p->ntok, (size_t)d->heads}, lf[3] = {16, 1, 1};
  size_t gd[3] = {kr16, (size_t)d->heads, 1}, ld[3] = {16, 1, 1};
  if ((s = fcl_launch(ctx, kfin, &af, gf, lf, "enqueueing rwkv6 backward sums")))
    return s;
  return fcl_launch(ctx, kdu, &ad, gd, ld, "enqueueing rwkv6 du");
}
