/* fcl_rwkv6_backward: forward-time pass (dr, du partials, checkpoints),
 * reverse-time pass (dk, dw partials, dv, dh0), then fixed-order sums. */
#include "rwkv6.h"

#include <math.h>
#include <stdio.h>

static const char *const bwd_files[] = {"dtype.cl", "rwkv6_common.cl",
                                        "rwkv6_backward.cl"};

fcl_status fcl_rwkv6_backward(fcl_context *ctx, const fcl_rwkv6_desc *d,
                              const fcl_tensor *r, const fcl_tensor *k,
                              const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                              cl_mem h0, const fcl_tensor *dout, cl_mem dht,
                              const fcl_tensor *dr, const fcl_tensor *dk,
                              const fcl_tensor *dv, const fcl_tensor *dw,
                              cl_mem du, cl_mem dh0) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
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

  const int K = (int)d->head_dim_k, V = (int)d->head_dim_v;
  fcl_rwkv6_bwd_config c;
  fcl_rwkv6_bwd_choose(&ctx->info, K, V, &c);
  char opts[256];
  snprintf(opts, sizeof opts, "-DFCL_DTYPE=%d -DK_DIM=%d -DV_DIM=%d -DTC=%d -DBVB=%d",
           (int)p.dtype, K, V, c.tc, c.bvb);
  fcl_log(ctx, "rwkv6 backward: %s", opts);
  cl_kernel kf, kr, kfin, kdu;
  if ((s = fcl_get_kernel(ctx, bwd_files, 3, opts, "fcl_rwkv6_bwd_forward", &kf)) ||
      (s = fcl_get_kernel(ctx, bwd_files, 3, opts, "fcl_rwkv6_bwd_reverse", &kr)) ||
      (s = fcl_get_kernel(ctx, bwd_files, 3, opts, "fcl_rwkv6_bwd_finish", &kfin)) ||
      (s = fcl_get_kernel(ctx, bwd_files, 3, opts, "fcl_rwkv6_bwd_du", &kdu)))
    return s;

  const cl_int nchunk = (cl_int)((d->seqlen + c.tc - 1) / c.tc);
  const cl_int nvb = (V + c.bvb - 1) / c.bvb;
  const size_t part = (size_t)nvb * p.ntok * d->heads * K * sizeof(float);
  cl_mem ck, drp, dkp, dwp, dup;
  if ((s = fcl_scratch(ctx, 0, (size_t)d->batch * d->heads * nchunk * K * V * 4, &ck)) ||
      (s = fcl_scratch(ctx, 1, part, &drp)) || (s = fcl_scratch(ctx, 2, part, &dkp)) ||
      (s = fcl_scratch(ctx, 3, part, &dwp)) ||
      (s = fcl_scratch(ctx, 4, (size_t)nvb * d->batch * d->heads * K * 4, &dup)))
    return s;

  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads;
  cl_long ntok = p.ntok;
  cl_float scale = d->scale != 0.0f ? d->scale : (cl_float)(1.0 / sqrt((double)K));
  cl_int flags = (h0 ? 1 : 0) | (p.varlen ? 4 : 0) | (d->reverse ? 8 : 0) |
                 (dht ? 64 : 0) | (dh0 ? 128 : 0);
  cl_mem h0_b = h0 ? h0 : r->buffer, dht_b = dht ? dht : r->buffer;
  cl_mem dh0_b = dh0 ? dh0 : r->buffer, cu_b = p.varlen ? d->cu_seqlens : r->buffer;

  cl_kernel passes[2] = {kf, kr};
  fcl_args a[2];
  for (int i = 0; i < 2; ++i) {
    a[i] = (fcl_args){passes[i], 0, CL_SUCCESS};
    FCL_ARG(&a[i], r->buffer); FCL_ARG(&a[i], k->buffer); FCL_ARG(&a[i], v->buffer);
    FCL_ARG(&a[i], w->buffer); FCL_ARG(&a[i], u); FCL_ARG(&a[i], dout->buffer);
    FCL_ARG(&a[i], cu_b);
    fcl_arg_tensor(&a[i], r); fcl_arg_tensor(&a[i], k); fcl_arg_tensor(&a[i], v);
    fcl_arg_tensor(&a[i], w); fcl_arg_tensor(&a[i], dout);
    FCL_ARG(&a[i], seqlen); FCL_ARG(&a[i], heads); FCL_ARG(&a[i], nchunk);
    FCL_ARG(&a[i], ntok); FCL_ARG(&a[i], scale); FCL_ARG(&a[i], flags);
  }
  FCL_ARG(&a[0], h0_b); FCL_ARG(&a[0], ck); FCL_ARG(&a[0], drp); FCL_ARG(&a[0], dup);
  FCL_ARG(&a[1], dht_b); FCL_ARG(&a[1], ck); FCL_ARG(&a[1], dkp); FCL_ARG(&a[1], dwp);
  FCL_ARG(&a[1], dv->buffer); fcl_arg_tensor(&a[1], dv); FCL_ARG(&a[1], dh0_b);

  fcl_args af = {kfin, 0, CL_SUCCESS};
  FCL_ARG(&af, drp); FCL_ARG(&af, dkp); FCL_ARG(&af, dwp);
  FCL_ARG(&af, dr->buffer); FCL_ARG(&af, dk->buffer); FCL_ARG(&af, dw->buffer);
  fcl_arg_tensor(&af, dr); fcl_arg_tensor(&af, dk); fcl_arg_tensor(&af, dw);
  FCL_ARG(&af, seqlen); FCL_ARG(&af, heads); FCL_ARG(&af, nvb); FCL_ARG(&af, ntok);
  FCL_ARG(&af, flags);
  cl_int nseq = (cl_int)d->batch;
  fcl_args ad = {kdu, 0, CL_SUCCESS};
  FCL_ARG(&ad, dup); FCL_ARG(&ad, du); FCL_ARG(&ad, heads); FCL_ARG(&ad, nvb);
  FCL_ARG(&ad, nseq);
  const fcl_args *all[] = {&a[0], &a[1], &af, &ad};
  for (int i = 0; i < 4; ++i)
    if (all[i]->err != CL_SUCCESS) return fcl_fail_cl(ctx, all[i]->err, "clSetKernelArg");

  const size_t bh = (size_t)(d->batch * d->heads);
  size_t gp[3] = {(size_t)nvb * K, bh, 1}, lp[3] = {(size_t)K, 1, 1};
  const size_t kr16 = (size_t)(K + 15) / 16 * 16;
  size_t gf[3] = {kr16, (size_t)p.ntok, (size_t)d->heads}, lf[3] = {16, 1, 1};
  size_t gd[3] = {kr16, (size_t)d->heads, 1}, ld[3] = {16, 1, 1};
  struct { cl_kernel k; size_t *g, *l; } steps[] = {
      {kf, gp, lp}, {kr, gp, lp}, {kfin, gf, lf}, {kdu, gd, ld}};
  for (int i = 0; i < 4; ++i) {
    cl_int err = clEnqueueNDRangeKernel(ctx->queue, steps[i].k, 3, NULL, steps[i].g,
                                        steps[i].l, 0, NULL, NULL);
    if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "enqueueing rwkv6 backward");
  }
  return FCL_OK;
}
