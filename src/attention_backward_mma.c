/* The tensor-core backward (cl/attention_bwd_mma.cl): the problems it takes
 * and its three launches (delta, dQ, dK/dV), in order on the queue.
 * On wherever the forward's probe passed (FCL_DISABLE_FASTPATH=1 turns both
 * off); it passed test_attention_backward (146 cases) on an H100.
 * FCL_MMA_BWD_WARPS and FCL_MMA_BWD_BLOCK_N override its block sizes. */
#include "attention.h"

#include <stdio.h>

/* The larger of the dQ and dK/dV kernels' tiles; each has one bit a row of
 * its scanned tiles (non-finite values) too. */
static size_t local_bytes(int warps, int block_n, int dp, int dvp) {
  const int bm = 16 * warps, big = bm > block_n ? bm : block_n;
  const size_t nfw = 4 * (size_t)((block_n + 31) / 32);
  const size_t dq = 2 * (size_t)big * (dp + 8 + dvp + 8) + nfw;
  const size_t dkdv = 2 * ((size_t)(bm + block_n) * (dp + 8) + (size_t)big * (dvp + 8)) +
                      8 * (size_t)block_n + 2 * nfw;
  return dq > dkdv ? dq : dkdv;
}

/* Block sizes for a problem; false when none fits the local memory. */
bool fcl_attention_bwd_mma_blocks(const fcl_context *ctx, int head_dim, int head_dim_v,
                                  int *warps_out, int *block_n_out) {
  const int dp = (head_dim + 15) / 16 * 16, dvp = (head_dim_v + 15) / 16 * 16;
  /* Wider tiles for small head dims; the gradient accumulators of larger
   * ones leave fewer registers for S and dP. */
  int warps = fcl_env_int("FCL_MMA_BWD_WARPS", 4);
  int block_n = fcl_env_int("FCL_MMA_BWD_BLOCK_N", dp <= 64 && dvp <= 64 ? 64 : 32);
  if (warps < 1 || warps > 8) warps = 4;
  if (block_n < 16 || block_n > 128 || block_n % 16) block_n = 64;
  const size_t emu = fcl_mma_emulate() ? 1024u * warps : 0;
  while (local_bytes(warps, block_n, dp, dvp) + emu + 256 > ctx->info.local_mem) {
    if (block_n > 16) block_n /= 2;
    else if (warps > 1) warps /= 2;
    else return false;
  }
  *warps_out = warps, *block_n_out = block_n;
  return true;
}

fcl_status fcl_attention_bwd_fast_applies(fcl_context *ctx, const fcl_attention_desc *d,
                                          fcl_dtype dtype, bool *applies) {
  *applies = false;
  if (dtype == FCL_F32 || d->head_dim > 128 || d->head_dim_v > 128 ||
      ctx->info.loop_budget > 0 || fcl_tuning_overridden(ctx, FCL_KERNEL_ATTN_BWD))
    return FCL_OK;
  return fcl_mma_ready(ctx, dtype, applies);
}

fcl_status fcl_attention_backward_fast(fcl_context *ctx, const fcl_attention_desc *d,
                                       const fcl_attention_problem *p,
                                       const fcl_tensor *q, const fcl_tensor *k,
                                       const fcl_tensor *v, const fcl_tensor *o,
                                       cl_mem lse, const fcl_tensor *dout,
                                       const fcl_tensor *dq, const fcl_tensor *dk,
                                       const fcl_tensor *dv, bool *done) {
  *done = false;
  bool applies;
  fcl_status s = fcl_attention_bwd_fast_applies(ctx, d, p->dtype, &applies);
  if (s != FCL_OK || !applies) return s;

  fcl_attention_scalars sc;
  fcl_attention_scalars_init(d, p, &sc);
  int warps, block_n;
  if (!fcl_attention_bwd_mma_blocks(ctx, (int)d->head_dim, (int)d->head_dim_v, &warps, &block_n))
    return FCL_OK;
  const size_t es = fcl_dtype_size(p->dtype);
  const int vec = d->head_dim % 8 == 0 && d->head_dim_v % 8 == 0 &&
                  fcl_mma_aligned8(q, es, p->varlen) && fcl_mma_aligned8(k, es, p->varlen) &&
                  fcl_mma_aligned8(v, es, p->varlen) && fcl_mma_aligned8(dout, es, p->varlen) &&
                  fcl_mma_aligned8(o, es, p->varlen);
  const int general = d->softcap > 0 || d->alibi_slopes || !(sc.qk_scale > 0);
  char opts[320];
  snprintf(opts, sizeof opts,
           "-DFCL_DTYPE=%d -DHEAD_DIM=%d -DHEAD_DIM_V=%d -DMMA_WARPS=%d -DBLOCK_N=%d "
           "-DMMA_VEC=%d -DMMA_GENERAL=%d -DFCL_MMA_EMULATE=%d%s",
           (int)p->dtype, (int)d->head_dim, (int)d->head_dim_v, warps, block_n, vec, general,
           fcl_mma_emulate(), fcl_mma_asm_option(ctx, p->dtype));
  static const char *const files[] = {"common/dtype.cl", "attention/attention_common.cl", "common/mma_warp.cl",
                                       "common/mma_common.cl", "attention/attention_bwd_mma.cl"};
  const int nf = (int)FCL_COUNT(files);
  const size_t nstat = (size_t)(d->heads_q * p->total_q);
  /* dQ and dK/dV built without and with the handling of inf and NaN in
   * masked products (nonfinite_flags.c), before anything is enqueued. */
  cl_kernel k_delta, k_dq[2], k_dkdv[2], scan[2];
  cl_mem delta, nf_flags;
  bool built = fcl_get_kernel(ctx, files, nf, opts, "fcl_attention_bwd_mma_delta", &k_delta) ==
                   FCL_OK &&
               fcl_nonfinite_kernel(ctx, p->dtype, scan) == FCL_OK;
  for (int i = 0; i < 2 && built; ++i) {
    char nf_opts[360];
    snprintf(nf_opts, sizeof nf_opts, "%s -DFCL_NONFINITE=%d", opts, i);
    built = fcl_get_kernel(ctx, files, nf, nf_opts, "fcl_attention_bwd_mma_dq", &k_dq[i]) ==
                FCL_OK &&
            fcl_get_kernel(ctx, files, nf, nf_opts, "fcl_attention_bwd_mma_dkdv",
                           &k_dkdv[i]) == FCL_OK;
  }
  if (!built) {
    fcl_log(ctx, "fast path: the backward does not build, using the portable kernels: %s",
            ctx->message);
    fcl_clear_error(ctx);
    return FCL_OK;
  }
  if ((s = fcl_scratch(ctx, 0, nstat * sizeof(float), &delta))) return s;

  cl_int flags = (d->alibi_slopes ? 2 : 0) | (p->varlen ? 4 : 0);
  cl_int varlen = p->varlen;
  cl_mem alibi_b = d->alibi_slopes ? d->alibi_slopes : q->buffer;
  cl_mem cuq_b = p->varlen ? d->cu_seqlens_q : q->buffer;
  cl_mem cuk_b = p->varlen ? d->cu_seqlens_k : q->buffer;

  fcl_args a = {k_delta, 0, CL_SUCCESS};
  FCL_ARG(&a, o->buffer); FCL_ARG(&a, dout->buffer); FCL_ARG(&a, delta);
  FCL_ARG(&a, cuq_b); FCL_ARG(&a, cuk_b);
  fcl_arg_tensor(&a, o); fcl_arg_tensor(&a, dout);
  FCL_ARG(&a, sc.stat_sb); FCL_ARG(&a, sc.stat_sh); FCL_ARG(&a, sc.seqlen_q);
  FCL_ARG(&a, sc.seqlen_k); FCL_ARG(&a, sc.heads_q); FCL_ARG(&a, varlen);

  /* The B operands of masked products: K (dS K), Q (dS^T Q), dO (P^T dO);
   * flags per kv head. */
  const fcl_nf_input nfin[3] = {
      {k, p->varlen, p->total_k, d->seqlen_k, d->heads_kv, d->head_dim, 1},
      {q, p->varlen, p->total_q, d->seqlen_q, d->heads_q, d->head_dim, sc.group},
      {dout, p->varlen, p->total_q, d->seqlen_q, d->heads_q, d->head_dim_v, sc.group}};
  const size_t wg = (size_t)warps * 32, bm = (size_t)warps * 16;
  size_t gq[3] = {((size_t)d->seqlen_q + bm - 1) / bm * wg, 1, (size_t)(d->batch * d->heads_q)};
  size_t gk[3] = {((size_t)d->seqlen_k + bm - 1) / bm * wg, 1, (size_t)(d->batch * d->heads_kv)};
  size_t lw[3] = {wg, 1, 1};
  fcl_log(ctx, "attention backward: tensor cores, %d warps, %d columns per tile%s%s", warps,
          block_n, vec ? ", cp.async" : "", general ? ", general scores" : "");
  if ((s = fcl_launch(ctx, k_delta, &a, gq, lw, "enqueueing backward delta (mma)")) ||
      (s = fcl_nonfinite_flags(ctx, scan, nfin, 3, (int)d->heads_kv, &nf_flags)))
    return s;
  for (int i = 0; i < 2; ++i) {
    fcl_args ag[2] = {{k_dq[i], 0, CL_SUCCESS}, {k_dkdv[i], 0, CL_SUCCESS}};
    for (int j = 0; j < 2; ++j) {
      fcl_args *x = &ag[j];
      FCL_ARG(x, q->buffer); FCL_ARG(x, k->buffer); FCL_ARG(x, v->buffer);
      FCL_ARG(x, dout->buffer); FCL_ARG(x, lse); FCL_ARG(x, delta);
      FCL_ARG(x, alibi_b); FCL_ARG(x, cuq_b); FCL_ARG(x, cuk_b);
      fcl_arg_tensor(x, q); fcl_arg_tensor(x, k); fcl_arg_tensor(x, v);
      fcl_arg_tensor(x, dout);
      FCL_ARG(x, sc.stat_sb); FCL_ARG(x, sc.stat_sh);
      fcl_arg_scalars(x, &sc);
      FCL_ARG(x, sc.scale); FCL_ARG(x, flags); FCL_ARG(x, nf_flags);
    }
    FCL_ARG(&ag[0], dq->buffer); fcl_arg_tensor(&ag[0], dq);
    FCL_ARG(&ag[1], dk->buffer); fcl_arg_tensor(&ag[1], dk);
    FCL_ARG(&ag[1], dv->buffer); fcl_arg_tensor(&ag[1], dv);
    if ((s = fcl_launch(ctx, k_dq[i], &ag[0], gq, lw, "enqueueing backward dq (mma)")) ||
        (s = fcl_launch(ctx, k_dkdv[i], &ag[1], gk, lw, "enqueueing backward dk/dv (mma)")))
      return s;
  }
  *done = true;
  return FCL_OK;
}
