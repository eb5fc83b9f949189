/* fcl_attention_backward: validation and the three kernels of
 * cl/attention_bwd.cl (delta, dQ, dK/dV), enqueued in order. */
#include "attention.h"

#include <stdio.h>


/* The gradient tensors must look like the ones they mirror. */
static fcl_status check_like(fcl_context *ctx, const fcl_tensor *t,
                             const char *name, const fcl_tensor_shape *like,
                             const fcl_tensor *q, bool varlen) {
  fcl_tensor_shape shape = *like;
  shape.name = name;
  return fcl_check_view(ctx, t, &shape, varlen, q, "q");
}

fcl_status fcl_attention_backward(fcl_context *ctx, const fcl_attention_desc *d,
                                  const fcl_tensor *q, const fcl_tensor *k,
                                  const fcl_tensor *v, const fcl_tensor *o,
                                  cl_mem lse, const fcl_tensor *dout,
                                  const fcl_tensor *dq, const fcl_tensor *dk,
                                  const fcl_tensor *dv) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_op_begin(ctx);
  fcl_attention_problem p;
  fcl_status s = fcl_check_attention(ctx, d, q, k, v, o, &p);
  if (s != FCL_OK) return s;
  const size_t nstat = (size_t)(d->heads_q * p.total_q);
  const int64_t nb = p.varlen ? 1 : d->batch;
  const int64_t nq = p.varlen ? p.total_q : d->seqlen_q;
  const int64_t nk = p.varlen ? p.total_k : d->seqlen_k;
  const fcl_tensor_shape qs = {"q", {nb, nq, d->heads_q, d->head_dim}};
  const fcl_tensor_shape ks = {"k", {nb, nk, d->heads_kv, d->head_dim}};
  const fcl_tensor_shape vs = {"v", {nb, nk, d->heads_kv, d->head_dim_v}};
  const fcl_tensor_shape os = {"o", {nb, nq, d->heads_q, d->head_dim_v}};
  if ((s = fcl_check_buffer(ctx, lse, "lse", nstat * sizeof(float))) ||
      (s = check_like(ctx, dout, "dout", &os, q, p.varlen)) ||
      (s = check_like(ctx, dq, "dq", &qs, q, p.varlen)) ||
      (s = check_like(ctx, dk, "dk", &ks, q, p.varlen)) ||
      (s = check_like(ctx, dv, "dv", &vs, q, p.varlen)))
    return s;
  if ((s = fcl_device_probe(ctx))) return s;
  bool done = false;
  if ((s = fcl_attention_backward_fast(ctx, d, &p, q, k, v, o, lse, dout, dq, dk, dv,
                                       &done)) || done)
    return s;

  fcl_tuning_class cls;
  fcl_attention_class(d, p.dtype, true, &cls);
  fcl_attention_bwd_config c;
  if ((s = fcl_tuning_choose(ctx, &cls, &c, NULL, 0))) return s;
  const fcl_kernel_desc *kd = fcl_kernel_get(cls.kernel);
  char opts[512];
  snprintf(opts, sizeof opts,
           "-DFCL_DTYPE=%d -DHEAD_DIM=%d -DHEAD_DIM_V=%d -DBLOCK_R=%d -DBLOCK_C=%d "
           "-DBLOCK_K=%d -DWG_ROWS=%d -DWG_COLS=%d",
           (int)p.dtype, (int)d->head_dim, (int)d->head_dim_v, c.block_r,
           c.block_c, c.block_k, c.wg_rows, c.wg_cols);
  cl_kernel k_delta, k_dq, k_dkdv, k_sum = NULL;
  cl_mem    delta;
  if ((s = fcl_get_kernel(ctx, kd->files, kd->nfiles, opts, "fcl_attention_bwd_delta", &k_delta)) ||
      (s = fcl_get_kernel(ctx, kd->files, kd->nfiles, opts, "fcl_attention_bwd_dq", &k_dq)) ||
      (s = fcl_get_kernel(ctx, kd->files, kd->nfiles, opts, "fcl_attention_bwd_dkdv", &k_dkdv)) ||
      (s = fcl_scratch(ctx, 0, nstat * sizeof(float), &delta)))
    return s;

  /* Where a work-group may not walk all keys (dQ) or all queries (dK/dV),
   * each split writes f32 partial sums that a last pass adds in order. */
  const cl_int group = (cl_int)(d->heads_q / d->heads_kv);
  const int64_t per_dq = fcl_attention_bwd_cols_per_group(
      &ctx->info, &c, (int)d->head_dim, (int)d->head_dim_v, 1);
  const int64_t per_dkv = fcl_attention_bwd_cols_per_group(
      &ctx->info, &c, (int)d->head_dim, (int)d->head_dim_v, group);
  cl_int split_dq = per_dq > 0 ? (cl_int)((d->seqlen_k + per_dq - 1) / per_dq) : 1;
  cl_int split_dkv = per_dkv > 0 ? (cl_int)((d->seqlen_q + per_dkv - 1) / per_dkv) : 1;
  cl_int per_dq_i = (cl_int)per_dq, per_dkv_i = (cl_int)per_dkv;
  cl_long nrows_q = (cl_long)nstat, nrows_k = d->heads_kv * p.total_k;
  cl_mem dq_part = q->buffer, dk_part = q->buffer, dv_part = q->buffer;
  if (split_dq > 1 || split_dkv > 1) {
    fcl_log(ctx, "attention backward: dQ split %d ways, dK/dV %d ways", split_dq, split_dkv);
    if ((s = fcl_get_kernel(ctx, kd->files, kd->nfiles, opts, "fcl_attention_bwd_sum", &k_sum)))
      return s;
  }
  if (split_dq > 1 &&
      (s = fcl_scratch(ctx, 1, fcl_bytes(split_dq, nrows_q, d->head_dim, 4, 1), &dq_part)))
    return s;
  if (split_dkv > 1 &&
      ((s = fcl_scratch(ctx, 2, fcl_bytes(split_dkv, nrows_k, d->head_dim, 4, 1), &dk_part)) ||
       (s = fcl_scratch(ctx, 3, fcl_bytes(split_dkv, nrows_k, d->head_dim_v, 4, 1), &dv_part))))
    return s;

  fcl_attention_scalars sc;
  fcl_attention_scalars_init(d, &p, &sc);
  cl_int flags = (d->alibi_slopes ? 2 : 0) | (p.varlen ? 4 : 0);
  cl_int varlen = p.varlen;
  cl_mem alibi_b = d->alibi_slopes ? d->alibi_slopes : q->buffer;
  cl_mem cuq_b = p.varlen ? d->cu_seqlens_q : q->buffer;
  cl_mem cuk_b = p.varlen ? d->cu_seqlens_k : q->buffer;
  const size_t bh = (size_t)(d->batch * d->heads_q);
  const size_t bhk = (size_t)(d->batch * d->heads_kv);

  /* 1. delta = rowsum(dO * O) */
  fcl_args a = {k_delta, 0, CL_SUCCESS};
  FCL_ARG(&a, o->buffer); FCL_ARG(&a, dout->buffer); FCL_ARG(&a, delta);
  FCL_ARG(&a, cuq_b); FCL_ARG(&a, cuk_b);
  fcl_arg_tensor(&a, o); fcl_arg_tensor(&a, dout);
  FCL_ARG(&a, sc.stat_sb); FCL_ARG(&a, sc.stat_sh); FCL_ARG(&a, sc.seqlen_q);
  FCL_ARG(&a, sc.seqlen_k); FCL_ARG(&a, sc.heads_q); FCL_ARG(&a, varlen);
  if (a.err != CL_SUCCESS) return fcl_fail_cl(ctx, a.err, "clSetKernelArg");

  /* 2. dQ, 3. dK and dV: the same leading arguments. */
  const size_t wg = (size_t)c.wg_rows * c.wg_cols;
  const int64_t widest = d->head_dim > d->head_dim_v ? d->head_dim : d->head_dim_v;
  cl_int nslice_dq = (cl_int)((d->head_dim + c.block_k - 1) / c.block_k);
  cl_int nslice_dkv = (cl_int)((widest + c.block_k - 1) / c.block_k);
  cl_kernel kernels[2] = {k_dq, k_dkdv};
  const cl_int nsplit[2] = {split_dq, split_dkv};
  cl_int per[2] = {per_dq_i, per_dkv_i}, nsl[2] = {nslice_dq, nslice_dkv};
  cl_mem parts[2][2] = {{dq_part, dq_part}, {dk_part, dv_part}};
  cl_long nrows[2] = {nrows_q, nrows_k};
  cl_uint   ncommon = 0; /* where the kernel-specific arguments start */
  for (int i = 0; i < 2; ++i) {
    fcl_args ac = {kernels[i], 0, CL_SUCCESS};
    FCL_ARG(&ac, q->buffer); FCL_ARG(&ac, k->buffer); FCL_ARG(&ac, v->buffer);
    FCL_ARG(&ac, dout->buffer); FCL_ARG(&ac, lse); FCL_ARG(&ac, delta);
    FCL_ARG(&ac, alibi_b); FCL_ARG(&ac, cuq_b); FCL_ARG(&ac, cuk_b);
    fcl_arg_tensor(&ac, q); fcl_arg_tensor(&ac, k); fcl_arg_tensor(&ac, v);
    fcl_arg_tensor(&ac, dout);
    FCL_ARG(&ac, sc.stat_sb); FCL_ARG(&ac, sc.stat_sh);
    fcl_arg_scalars(&ac, &sc);
    cl_int fl = flags | (nsplit[i] > 1 ? 8 : 0);
    FCL_ARG(&ac, sc.scale); FCL_ARG(&ac, fl);
    FCL_ARG(&ac, per[i]); FCL_ARG(&ac, nsl[i]); FCL_ARG(&ac, parts[i][0]);
    FCL_ARG(&ac, parts[i][1]); FCL_ARG(&ac, nrows[i]);
    ncommon = ac.i;
    if (ac.err != CL_SUCCESS) return fcl_fail_cl(ctx, ac.err, "clSetKernelArg");
  }
  size_t lw[3] = {wg, 1, 1};

  fcl_args adq = {k_dq, ncommon, CL_SUCCESS};
  FCL_ARG(&adq, dq->buffer); fcl_arg_tensor(&adq, dq);
  fcl_args adkv = {k_dkdv, ncommon, CL_SUCCESS};
  FCL_ARG(&adkv, dk->buffer); fcl_arg_tensor(&adkv, dk);
  FCL_ARG(&adkv, dv->buffer); fcl_arg_tensor(&adkv, dv);
  cl_long kstat_sb = p.varlen ? 0 : d->heads_kv * d->seqlen_k;
  cl_long kstat_sh = p.varlen ? p.total_k : d->seqlen_k;
  FCL_ARG(&adkv, kstat_sb); FCL_ARG(&adkv, kstat_sh);

  /* The partial sums' final pass, one per split gradient. */
  struct { cl_mem part; const fcl_tensor *t; cl_long row_sh, nrows; cl_int heads, dim, n; }
      sums[3] = {{dq_part, dq, sc.stat_sh, nrows_q, sc.heads_q, (cl_int)d->head_dim, split_dq},
                 {dk_part, dk, kstat_sh, nrows_k, (cl_int)d->heads_kv, (cl_int)d->head_dim, split_dkv},
                 {dv_part, dv, kstat_sh, nrows_k, (cl_int)d->heads_kv, (cl_int)d->head_dim_v, split_dkv}};

  /* All arguments but the sums' are set before the first enqueue. */
  const size_t rows = (size_t)((d->seqlen_q + 63) / 64 * 64);
  size_t g0[3] = {rows, bh, 1}, l0[3] = {64, 1, 1};
  size_t gq[3] = {(size_t)((d->seqlen_q + c.block_r - 1) / c.block_r) * wg,
                  (size_t)(nslice_dq * split_dq), bh};
  size_t gk[3] = {(size_t)((d->seqlen_k + c.block_r - 1) / c.block_r) * wg,
                  (size_t)(nslice_dkv * split_dkv), bhk};
  if ((s = fcl_launch(ctx, k_delta, &a, g0, l0, "enqueueing backward delta")) ||
      (s = fcl_launch(ctx, k_dq, &adq, gq, lw, "enqueueing backward dq")) ||
      (s = fcl_launch(ctx, k_dkdv, &adkv, gk, lw, "enqueueing backward dk/dv")))
    return s;
  /* One kernel object serves the three sums: arguments are captured at
   * enqueue, so each sum sets them just before its enqueue. */
  for (int i = 0; i < 3; ++i) {
    if (sums[i].n <= 1) continue;
    fcl_args as = {k_sum, 0, CL_SUCCESS};
    cl_long off = (cl_long)(sums[i].t->offset / fcl_dtype_size(p.dtype));
    FCL_ARG(&as, sums[i].part); FCL_ARG(&as, sums[i].t->buffer); FCL_ARG(&as, off);
    FCL_ARG(&as, sums[i].t->strides[0]); FCL_ARG(&as, sums[i].t->strides[1]);
    FCL_ARG(&as, sums[i].t->strides[2]); FCL_ARG(&as, sums[i].row_sh);
    FCL_ARG(&as, sums[i].heads); FCL_ARG(&as, sums[i].nrows); FCL_ARG(&as, sums[i].dim);
    FCL_ARG(&as, sums[i].n); FCL_ARG(&as, flags);
    size_t gs[3] = {(size_t)(sums[i].dim + 31) / 32 * 32, (size_t)sums[i].nrows, 1};
    size_t ls[3] = {32, 1, 1};
    if ((s = fcl_launch(ctx, k_sum, &as, gs, ls, "enqueueing backward sums"))) return s;
  }
  return FCL_OK;
}
