/* fcl_attention_merge: partial attention results over disjoint key sets
 * combined by their log-sum-exp (cl/attention/attention_merge.cl), one
 * part a launch into an f32 running result. */
#include "attention/attention.h"

#include <inttypes.h>
#include <stdio.h>


typedef struct {
  const fcl_attention_desc *d;
  int64_t                   n;
  const fcl_tensor         *o_parts;
  const cl_mem             *lse_parts;
  const fcl_tensor         *o;
  cl_mem                    lse;
} merge_call;

static fcl_status run(fcl_context *ctx, const void *args) {
  const merge_call *c = args;
  const fcl_attention_desc *d = c->d;
  const int64_t n = c->n;
  const fcl_tensor *o_parts = c->o_parts, *o = c->o;
  const cl_mem *lse_parts = c->lse_parts;
  const cl_mem lse = c->lse;
  fcl_status s;
  if (!d) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "d: is NULL");
  if (d->batch < 1 || d->seqlen_q < 1 || d->heads_q < 1 || d->head_dim_v < 1 ||
      d->head_dim_v > FCL_MAX_HEAD_DIM || d->batch * d->seqlen_q > INT32_MAX ||
      d->seqlen_q * d->heads_q > INT32_MAX)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "d: batch %" PRId64 ", seqlen_q %" PRId64 ", heads_q %" PRId64
                    ", head_dim_v %" PRId64 ": each must be >= 1 (head_dim_v <= %d)",
                    d->batch, d->seqlen_q, d->heads_q, d->head_dim_v, FCL_MAX_HEAD_DIM);
  if (n < 1 || n > 1 << 20)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "n: is %" PRId64 ", must be 1..%d", n,
                    1 << 20);
  if (!o_parts) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "o_parts: is NULL");
  if (!lse_parts) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "lse_parts: is NULL");
  const bool varlen = d->cu_seqlens_q != NULL;
  const int64_t B = varlen ? 1 : d->batch, T = varlen ? 1 : d->seqlen_q;
  const fcl_tensor_shape so = {"o", {B, T, d->heads_q, d->head_dim_v}};
  if ((s = fcl_check_view(ctx, o, &so, varlen, NULL, NULL))) return s;
  int64_t tokens = varlen ? fcl_view_tokens(o, d->heads_q, d->head_dim_v) : d->batch * d->seqlen_q;
  int64_t lse_len = varlen ? INT64_MAX : d->batch * d->heads_q * d->seqlen_q;
  const size_t lse_min = (size_t)(varlen ? d->heads_q : lse_len) * 4;
  if (varlen && (s = fcl_check_buffer(ctx, d->cu_seqlens_q, "d->cu_seqlens_q",
                                      (size_t)(d->batch + 1) * 4)))
    return s;
  for (int64_t i = 0; i < n; ++i) {
    char name[48];
    snprintf(name, sizeof name, "o_parts[%" PRId64 "]", i);
    const fcl_tensor_shape sp = {name, {B, T, d->heads_q, d->head_dim_v}};
    if ((s = fcl_check_view(ctx, &o_parts[i], &sp, varlen, NULL, NULL))) return s;
    snprintf(name, sizeof name, "lse_parts[%" PRId64 "]", i);
    if ((s = fcl_check_buffer(ctx, lse_parts[i], name, lse_min))) return s;
    if (varlen) {
      const int64_t t = fcl_view_tokens(&o_parts[i], d->heads_q, d->head_dim_v);
      const int64_t l = (int64_t)(fcl_buffer_size(lse_parts[i]) / 4);
      if (t < tokens) tokens = t;
      if (l < lse_len) lse_len = l;
    }
  }
  if (lse) {
    if ((s = fcl_check_buffer(ctx, lse, "lse", lse_min))) return s;
    if (varlen && (int64_t)(fcl_buffer_size(lse) / 4) < lse_len)
      lse_len = (int64_t)(fcl_buffer_size(lse) / 4);
  }

  /* The kernel and the running result before anything is enqueued. */
  cl_kernel k;
  cl_mem acc_o = o->buffer, acc_lse = o->buffer;
  const int64_t nrows = d->batch * d->seqlen_q * d->heads_q;
  if ((s = fcl_get_kernel(ctx, FCL_TOPS("attention/attention_merge.cl"), "",
                          "fcl_attention_merge_step", &k)) ||
      (n > 1 && ((s = fcl_scratch(ctx, 0, fcl_bytes(nrows, d->head_dim_v, 4, 1, 1), &acc_o)) ||
                 (s = fcl_scratch(ctx, 1, fcl_bytes(nrows, 4, 1, 1, 1), &acc_lse)))))
    return s;
  const cl_int flags = (varlen ? FCL_ATTN_VARLEN : 0) | (lse ? FCL_ATTN_LSE : 0);
  const cl_int batch = (cl_int)d->batch, seqlen_q = (cl_int)d->seqlen_q;
  const cl_int heads_q = (cl_int)d->heads_q, dv = (cl_int)d->head_dim_v;
  const cl_int o_dtype = (cl_int)o->dtype;
  const cl_long ctokens = tokens, clse_len = lse_len;
  const cl_mem cu = varlen ? d->cu_seqlens_q : o->buffer;
  const cl_mem lse_out = lse ? lse : o->buffer;
  /* A fixed work-group size, not the driver's choice: PoCL compiles a
   * kernel again for every work-group size it picks (one per shape). */
  enum { WG = 64 };
  const size_t global[3] = {(size_t)((d->seqlen_q * d->heads_q + WG - 1) / WG * WG),
                            (size_t)d->batch, 1};
  const size_t local[3] = {WG, 1, 1};
  for (int64_t i = 0; i < n; ++i) {
    const cl_int step = (i == 0 ? FCL_MERGE_FIRST : 0) | (i == n - 1 ? FCL_MERGE_LAST : 0);
    const cl_int p_dtype = (cl_int)o_parts[i].dtype;
    fcl_args a = FCL_ARGS(k);
    FCL_ARG(&a, o_parts[i].buffer);
    FCL_ARG(&a, lse_parts[i]);
    FCL_ARG(&a, acc_o);
    FCL_ARG(&a, acc_lse);
    FCL_ARG(&a, o->buffer);
    FCL_ARG(&a, lse_out);
    FCL_ARG(&a, cu);
    fcl_arg_tensor(&a, &o_parts[i]);
    FCL_ARG(&a, p_dtype);
    fcl_arg_tensor(&a, o);
    FCL_ARG(&a, o_dtype);
    FCL_ARG(&a, batch);
    FCL_ARG(&a, seqlen_q);
    FCL_ARG(&a, heads_q);
    FCL_ARG(&a, dv);
    FCL_ARG(&a, ctokens);
    FCL_ARG(&a, clse_len);
    FCL_ARG(&a, flags);
    FCL_ARG(&a, step);
    if ((s = fcl_launch(ctx, k, &a, global, local, "enqueueing attention merge"))) return s;
  }
  return FCL_OK;
}

/* Every argument; a key too long for many parts is not kept. */
static void key(fcl_key *key, const merge_call *c) {
  fcl_key_init(key, 0x616d7267); /* "amrg" */
  fcl_key_attention_desc(key, c->d);
  fcl_key_i64(key, c->n);
  fcl_key_tensor(key, c->o);
  fcl_key_mem(key, c->lse);
  if (!c->o_parts || !c->lse_parts || c->n < 1 || c->n > 64) {
    key->ok = false;
    return;
  }
  for (int64_t i = 0; i < c->n; ++i) {
    fcl_key_tensor(key, &c->o_parts[i]);
    fcl_key_mem(key, c->lse_parts[i]);
  }
}

fcl_status fcl_attention_merge(fcl_context *ctx, const fcl_attention_desc *d, int64_t n,
                               const fcl_tensor *o_parts, const cl_mem *lse_parts,
                               const fcl_tensor *o, cl_mem lse) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_attention_desc own;
  fcl_status s;
  if ((s = fcl_attention_desc_in(ctx, &d, &own))) return s;
  const merge_call c = {d, n, o_parts, lse_parts, o, lse};
  fcl_key k;
  key(&k, &c);
  return fcl_plan_call(ctx, &k, run, &c);
}

fcl_status fcl_attention_merge_plan(fcl_context *ctx, const fcl_attention_desc *d, int64_t n,
                                    const fcl_tensor *o_parts, const cl_mem *lse_parts,
                                    const fcl_tensor *o, cl_mem lse, fcl_plan **out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_attention_desc own;
  fcl_status s;
  if ((s = fcl_attention_desc_in(ctx, &d, &own))) return s;
  const merge_call c = {d, n, o_parts, lse_parts, o, lse};
  return fcl_plan_make(ctx, run, &c, out);
}
