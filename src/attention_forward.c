/* fcl_attention_forward: validation, launch configuration and enqueue of
 * cl/attention_fwd.cl. */
#include "attention.h"

#include <math.h>
#include <stdio.h>

static const char *const fwd_files[] = {"dtype.cl", "attention_fwd.cl"};

/* Sets kernel arguments in order; stops at the first failure. */
typedef struct {
  cl_kernel k;
  cl_uint   i;
  cl_int    err;
} arg_list;

static void arg(arg_list *a, size_t size, const void *value) {
  if (a->err == CL_SUCCESS) a->err = clSetKernelArg(a->k, a->i, size, value);
  a->i++;
}
#define ARG(a, x) arg((a), sizeof(x), &(x))

static int clamp_window(int64_t w, int64_t limit) {
  return (int)(w < 0 || w > limit ? limit : w);
}

fcl_status fcl_attention_forward(fcl_context *ctx, const fcl_attention_desc *d,
                                 const fcl_tensor *q, const fcl_tensor *k,
                                 const fcl_tensor *v, const fcl_tensor *o,
                                 cl_mem lse) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_attention_problem p;
  fcl_status s = fcl_check_attention(ctx, d, q, k, v, o, &p);
  if (s != FCL_OK) return s;
  if (lse && (s = fcl_check_buffer(ctx, lse, "lse",
                                   (size_t)(d->heads_q * p.total_q) * sizeof(float))))
    return s;

  if ((s = fcl_device_probe(ctx))) return s;
  fcl_attention_fwd_config c;
  fcl_attention_fwd_choose(&ctx->info, (int)d->head_dim, (int)d->head_dim_v, &c);
  char opts[512];
  snprintf(opts, sizeof opts,
           "-DFCL_DTYPE=%d -DHEAD_DIM=%d -DHEAD_DIM_V=%d -DBLOCK_M=%d -DBLOCK_N=%d "
           "-DBLOCK_D=%d -DBLOCK_DV=%d -DWG_ROWS=%d -DWG_COLS=%d",
           (int)p.dtype, (int)d->head_dim, (int)d->head_dim_v, c.block_m,
           c.block_n, c.block_d, c.block_dv, c.wg_rows, c.wg_cols);
  cl_kernel kern;
  if ((s = fcl_get_kernel(ctx, fwd_files, 2, opts, "fcl_attention_fwd", &kern)))
    return s;

  const size_t es = fcl_dtype_size(p.dtype);
  cl_long q_off = (cl_long)(q->offset / es), k_off = (cl_long)(k->offset / es);
  cl_long v_off = (cl_long)(v->offset / es), o_off = (cl_long)(o->offset / es);
  cl_long lse_sb = p.varlen ? 0 : d->heads_q * d->seqlen_q;
  cl_long lse_sh = p.varlen ? p.total_q : d->seqlen_q;
  cl_int  sq = (cl_int)d->seqlen_q, sk = (cl_int)d->seqlen_k;
  cl_int  hq = (cl_int)d->heads_q, group = (cl_int)(d->heads_q / d->heads_kv);
  const int64_t limit = d->seqlen_q + d->seqlen_k;
  cl_int  wl = clamp_window(d->window_left, limit);
  cl_int  wr = clamp_window(d->window_right, limit);
  if (d->causal) wr = 0 < wr ? 0 : wr;
  const double scale =
      d->softmax_scale != 0.0f ? d->softmax_scale : 1.0 / sqrt((double)d->head_dim);
  const double log2e = 1.4426950408889634;
  cl_float qk_scale = (cl_float)(d->softcap > 0 ? scale / d->softcap : scale * log2e);
  cl_float cap_l2 = (cl_float)(d->softcap > 0 ? d->softcap * log2e : 0.0);
  cl_int   flags = (lse ? 1 : 0) | (d->alibi_slopes ? 2 : 0) | (p.varlen ? 4 : 0);
  /* Unused pointer arguments get a valid buffer that is never dereferenced. */
  cl_mem lse_b = lse ? lse : q->buffer;
  cl_mem alibi_b = d->alibi_slopes ? d->alibi_slopes : q->buffer;
  cl_mem cuq_b = p.varlen ? d->cu_seqlens_q : q->buffer;
  cl_mem cuk_b = p.varlen ? d->cu_seqlens_k : q->buffer;

  arg_list a = {kern, 0, CL_SUCCESS};
  ARG(&a, q->buffer); ARG(&a, k->buffer); ARG(&a, v->buffer); ARG(&a, o->buffer);
  ARG(&a, lse_b); ARG(&a, alibi_b); ARG(&a, cuq_b); ARG(&a, cuk_b);
  ARG(&a, q_off); ARG(&a, q->strides[0]); ARG(&a, q->strides[1]); ARG(&a, q->strides[2]);
  ARG(&a, k_off); ARG(&a, k->strides[0]); ARG(&a, k->strides[1]); ARG(&a, k->strides[2]);
  ARG(&a, v_off); ARG(&a, v->strides[0]); ARG(&a, v->strides[1]); ARG(&a, v->strides[2]);
  ARG(&a, o_off); ARG(&a, o->strides[0]); ARG(&a, o->strides[1]); ARG(&a, o->strides[2]);
  ARG(&a, lse_sb); ARG(&a, lse_sh);
  ARG(&a, sq); ARG(&a, sk); ARG(&a, hq); ARG(&a, group); ARG(&a, wl); ARG(&a, wr);
  ARG(&a, qk_scale); ARG(&a, cap_l2); ARG(&a, flags);
  if (a.err != CL_SUCCESS) return fcl_fail_cl(ctx, a.err, "clSetKernelArg");

  const size_t wg = (size_t)c.wg_rows * c.wg_cols;
  const size_t nqb = (size_t)((d->seqlen_q + c.block_m - 1) / c.block_m);
  const size_t nslice = (size_t)((d->head_dim_v + c.block_dv - 1) / c.block_dv);
  size_t global[3] = {nqb * wg, nslice, (size_t)(d->batch * d->heads_q)};
  size_t local[3] = {wg, 1, 1};
  cl_int err = clEnqueueNDRangeKernel(ctx->queue, kern, 3, NULL, global, local, 0,
                                      NULL, NULL);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "enqueueing attention forward");
  return FCL_OK;
}
