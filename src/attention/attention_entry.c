/* fcl_attention_forward and fcl_attention_backward: validation, the plan,
 * and its launch (the next row of the table where a kernel does not build). */
#include "attention/attention.h"

fcl_status fcl_attention_run(fcl_context *ctx, const fcl_attention_problem *p, bool backward) {
  fcl_status s;
  if ((s = fcl_device_probe(ctx))) return s;
  for (int first = 0;;) {
    fcl_attention_plan pl;
    bool fallback = false;
    if ((s = fcl_attention_plan_make(ctx, p->d, p->dtype, backward, first, &pl)) ||
        (s = pl.row->launch(ctx, &pl, p, &fallback)) || !fallback)
      return s;
    first = pl.index + 1;
  }
}

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
  p.lse = lse;
  return fcl_attention_run(ctx, &p, false);
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
  p.lse = lse, p.dout = dout, p.dq = dq, p.dk = dk, p.dv = dv;
  if ((s = fcl_check_attention_grads(ctx, &p))) return s;
  return fcl_attention_run(ctx, &p, true);
}
