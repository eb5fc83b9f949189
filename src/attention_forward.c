/* fcl_attention_forward: validation, launch configuration and enqueue of
 * cl/attention_fwd.cl. */
#include "attention.h"

#include <stdio.h>


fcl_status fcl_attention_forward(fcl_context *ctx, const fcl_attention_desc *d,
                                 const fcl_tensor *q, const fcl_tensor *k,
                                 const fcl_tensor *v, const fcl_tensor *o,
                                 cl_mem lse) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_op_begin(ctx);
  fcl_attention_problem p;
  fcl_status s = fcl_check_attention(ctx, d, q, k, v, o, &p);
  if (s != FCL_OK) return s;
  if (lse && (s = fcl_check_buffer(ctx, lse, "lse",
                                   (size_t)(d->heads_q * p.total_q) * sizeof(float))))
    return s;
  if ((s = fcl_device_probe(ctx))) return s;
  bool done = false;
  if ((s = fcl_attention_forward_fast(ctx, d, &p, q, k, v, o, lse, &done)) || done)
    return s;
  if ((s = fcl_attention_forward_cpu(ctx, d, &p, q, k, v, o, lse, &done)) || done)
    return s;

  fcl_tuning_class cls;
  fcl_attention_class(d, p.dtype, false, &cls);
  fcl_attention_fwd_config c;
  if ((s = fcl_tuning_choose(ctx, &cls, &c, NULL, 0))) return s;
  const fcl_kernel_desc *kd = fcl_kernel_get(cls.kernel);
  char opts[512];
  snprintf(opts, sizeof opts,
           "-DFCL_DTYPE=%d -DHEAD_DIM=%d -DHEAD_DIM_V=%d -DBLOCK_M=%d -DBLOCK_N=%d "
           "-DBLOCK_D=%d -DBLOCK_DV=%d -DWG_ROWS=%d -DWG_COLS=%d",
           (int)p.dtype, (int)d->head_dim, (int)d->head_dim_v, c.block_m,
           c.block_n, c.block_d, c.block_dv, c.wg_rows, c.wg_cols);
  cl_kernel kern;
  if ((s = fcl_get_kernel(ctx, kd->files, kd->nfiles, opts, "fcl_attention_fwd", &kern)))
    return s;

  fcl_attention_scalars sc;
  fcl_attention_scalars_init(d, &p, &sc);
  cl_int flags = (lse ? 1 : 0) | (d->alibi_slopes ? 2 : 0) | (p.varlen ? 4 : 0);
  /* Unused pointer arguments get a valid buffer that is never dereferenced. */
  cl_mem lse_b = lse ? lse : q->buffer;
  cl_mem alibi_b = d->alibi_slopes ? d->alibi_slopes : q->buffer;
  cl_mem cuq_b = p.varlen ? d->cu_seqlens_q : q->buffer;
  cl_mem cuk_b = p.varlen ? d->cu_seqlens_k : q->buffer;

  /* Split the keys across work-groups where one may not walk them all. */
  const int64_t kpg = fcl_attention_fwd_keys_per_group(&ctx->info, &c, (int)d->head_dim);
  const cl_int nsplit = kpg > 0 ? (cl_int)((d->seqlen_k + kpg - 1) / kpg) : 1;
  cl_int keys_per_split = (cl_int)kpg;
  cl_long nrows = d->heads_q * p.total_q;
  const cl_int nslice = (cl_int)((d->head_dim_v + c.block_dv - 1) / c.block_dv);
  cl_mem o_part = q->buffer, lse_part = q->buffer;
  cl_kernel comb = NULL;
  if (nsplit > 1) {
    flags |= 8;
    fcl_log(ctx, "attention forward: keys split %d ways (%d per work-group)", nsplit,
            keys_per_split);
    if ((s = fcl_get_kernel(ctx, kd->files, kd->nfiles, opts, "fcl_attention_fwd_combine", &comb)) ||
        (s = fcl_scratch(ctx, 0, fcl_bytes(nsplit, nrows, d->head_dim_v, 4, 1), &o_part)) ||
        (s = fcl_scratch(ctx, 1, fcl_bytes(nsplit, nrows, 4, 1, 1), &lse_part)))
      return s;
  }

  fcl_args a = {kern, 0, CL_SUCCESS};
  FCL_ARG(&a, q->buffer); FCL_ARG(&a, k->buffer); FCL_ARG(&a, v->buffer);
  FCL_ARG(&a, o->buffer); FCL_ARG(&a, lse_b); FCL_ARG(&a, alibi_b);
  FCL_ARG(&a, cuq_b); FCL_ARG(&a, cuk_b);
  fcl_arg_tensor(&a, q); fcl_arg_tensor(&a, k); fcl_arg_tensor(&a, v);
  fcl_arg_tensor(&a, o);
  FCL_ARG(&a, sc.stat_sb); FCL_ARG(&a, sc.stat_sh);
  fcl_arg_scalars(&a, &sc);
  FCL_ARG(&a, flags);
  FCL_ARG(&a, keys_per_split); FCL_ARG(&a, nslice); FCL_ARG(&a, o_part);
  FCL_ARG(&a, lse_part); FCL_ARG(&a, nrows);
  fcl_args ac = {comb, 0, CL_SUCCESS};
  if (comb) {
    FCL_ARG(&ac, o_part); FCL_ARG(&ac, lse_part); FCL_ARG(&ac, o->buffer);
    FCL_ARG(&ac, lse_b); fcl_arg_tensor(&ac, o); FCL_ARG(&ac, sc.stat_sh); FCL_ARG(&ac, sc.heads_q); FCL_ARG(&ac, nrows);
    FCL_ARG(&ac, nsplit); FCL_ARG(&ac, flags);
    if (ac.err != CL_SUCCESS) return fcl_fail_cl(ctx, ac.err, "clSetKernelArg");
  }

  const size_t wg = (size_t)c.wg_rows * c.wg_cols;
  const size_t nqb = (size_t)((d->seqlen_q + c.block_m - 1) / c.block_m);
  size_t global[3] = {nqb * wg, (size_t)(nslice * nsplit), (size_t)(d->batch * d->heads_q)};
  size_t local[3] = {wg, 1, 1};
  if ((s = fcl_launch(ctx, kern, &a, global, local, "enqueueing attention forward")) ||
      !comb)
    return s;
  size_t gc[3] = {(size_t)(d->head_dim_v + 31) / 32 * 32, (size_t)nrows, 1};
  size_t lc[3] = {32, 1, 1};
  return fcl_launch(ctx, comb, &ac, gc, lc, "enqueueing attention combine");
}
