/* The fused recurrent backward's launches (a row of the backward's table,
 * rwkv7_plan.c): the forward with
 * checkpoints, then by segments of time, last first: the reverse-time
 * pass (dv, dh0 and the column blocks' partials of dr, dw, dk, da, db) and
 * their fixed-order sums, the partials' scratch bounded by a segment. */
#include "rwkv7/rwkv7.h"

/* Positions of a segment of the reverse pass: within the device's loop
 * budget (per, 0: unlimited) and with the column blocks' partials (RW7_NPART
 * of them, nvb blocks, a slot for each position of each sequence) within
 * FCL_RWKV7_PART_CAP bytes ($FCL_SCRATCH_CAP in tests), whole chunks of TC
 * (at least one), or the whole sequence where that fits. */
int64_t fcl_rwkv7_bwd_segment(const fcl_context *ctx, const fcl_rwkv7_desc *d, int TC, int nvb,
                              int64_t per) {
  size_t cap = ctx->opt.scratch_cap >= 0 ? (size_t)ctx->opt.scratch_cap : FCL_RWKV7_PART_CAP;
  if (ctx->info.max_alloc && cap > ctx->info.max_alloc) cap = (size_t)ctx->info.max_alloc;
  const size_t per_pos = fcl_bytes(RW7_NPART * nvb, d->batch, d->heads, d->head_dim_k, 4);
  int64_t seg = per_pos ? (int64_t)(cap / per_pos) / TC * TC : d->seqlen;
  if (per > 0 && per < seg) seg = per;
  if (seg < TC) seg = TC;
  return seg < d->seqlen ? seg : d->seqlen > 0 ? d->seqlen : 1;
}

fcl_status fcl_rwkv7_recurrent_backward(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback) {
  const fcl_rwkv7_problem *p = problem;
  const fcl_rwkv7_desc *d = p->d;
  const fcl_rwkv7_args *t = &p->a;
  const fcl_rwkv7_bwd_params *c = FCL_CPARAMS(fcl_rwkv7_bwd_params, &pl->cfg);
  const int K = (int)d->head_dim_k, V = (int)d->head_dim_v;
  const char *const *tops = pl->cls.variant->tops;
  fcl_status s;
  (void)fallback;
  cl_kernel kf, kr, kfin;
  if ((s = fcl_get_kernel(ctx, tops, pl->options, "fcl_rwkv7_fwd_recurrent", &kf)) ||
      (s = fcl_get_kernel(ctx, tops, pl->options, "fcl_rwkv7_bwd_reverse", &kr)) ||
      (s = fcl_get_kernel(ctx, tops, pl->options, "fcl_rwkv7_bwd_finish", &kfin)))
    return s;

  const cl_int nchunk = (cl_int)((d->seqlen + c->TC - 1) / c->TC);
  const cl_int nvb = (V + c->VC - 1) / c->VC;
  const int64_t per = fcl_rwkv7_bwd_positions_per_launch(&ctx->info, K, c);
  const int64_t seg = fcl_rwkv7_bwd_segment(ctx, d, c->TC, nvb, per);
  cl_int segc = (cl_int)seg;
  cl_long nslot = (cl_long)(d->batch * seg);
  cl_mem ck, part;
  if ((s = fcl_scratch(ctx, 0, fcl_bytes(d->batch * d->heads, nchunk, K, V, 4), &ck)) ||
      (s = fcl_scratch(ctx, 1, fcl_bytes(RW7_NPART * nvb, nslot, d->heads, K, 4), &part)))
    return s;
  if ((s = fcl_rwkv7_forward_launches(ctx, p, kf, 1, c->VC, c->KS, per, t->h0, NULL, ck,
                                      nchunk)))
    return s;

  /* The segments backward, the state's gradient carried between them;
   * after each, its partials summed (the scratch serves the next). */
  fcl_rwkv_segments sg;
  if ((s = fcl_rwkv_segments_of(ctx, d->seqlen, seg, p->state_bytes, t->dht, t->dh0,
                                t->r->buffer, true, &sg)))
    return s;
  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads, nck = nchunk, nvbc = nvb;
  const cl_int base = fcl_rwkv_flags(p->varlen, d->reverse);
  cl_mem cu = p->varlen ? d->cu_seqlens : t->r->buffer;
  const size_t bh = (size_t)(d->batch * d->heads), kr16 = (size_t)(K + 15) / 16 * 16;
  const size_t g[3] = {(size_t)nvb * c->KS, bh, 1}, l[3] = {(size_t)c->KS, 1, 1};
  const size_t gf[3] = {kr16, (size_t)nslot, (size_t)d->heads}, lf[3] = {16, 1, 1};
  for (int64_t n = 0; n < sg.count; ++n) {
    fcl_rwkv_segment sgi = fcl_rwkv_segment_at(&sg, n);
    cl_int flags = base | (sgi.reads ? RW_DHT : 0) | (sgi.writes ? RW_DH0 : 0);
    fcl_args a = FCL_ARGS(kr);
    fcl_rwkv7_input_args(&a, p, flags, &sgi);
    FCL_ARG(&a, t->dout->buffer); fcl_arg_tensor(&a, t->dout);
    FCL_ARG(&a, nck); FCL_ARG(&a, segc); FCL_ARG(&a, nslot); FCL_ARG(&a, sgi.in);
    FCL_ARG(&a, ck); FCL_ARG(&a, part); FCL_ARG(&a, t->dv->buffer); fcl_arg_tensor(&a, t->dv);
    FCL_ARG(&a, sgi.out);
    if ((s = fcl_launch(ctx, kr, &a, g, l, "enqueueing rwkv7 backward"))) return s;

    fcl_args af = FCL_ARGS(kfin);
    FCL_ARG(&af, part);
    FCL_ARG(&af, t->dr->buffer); FCL_ARG(&af, t->dw->buffer); FCL_ARG(&af, t->dk->buffer);
    FCL_ARG(&af, t->da->buffer); FCL_ARG(&af, t->db->buffer);
    fcl_arg_tensor(&af, t->dr); fcl_arg_tensor(&af, t->dw); fcl_arg_tensor(&af, t->dk);
    fcl_arg_tensor(&af, t->da); fcl_arg_tensor(&af, t->db);
    FCL_ARG(&af, cu); FCL_ARG(&af, seqlen); FCL_ARG(&af, heads); FCL_ARG(&af, nvbc);
    FCL_ARG(&af, segc); FCL_ARG(&af, nslot); FCL_ARG(&af, sgi.begin); FCL_ARG(&af, sgi.end);
    FCL_ARG(&af, base);
    if ((s = fcl_launch(ctx, kfin, &af, gf, lf, "enqueueing rwkv7 backward sums"))) return s;
  }
  return FCL_OK;
}
