/* The checks both RWKV operations make of a call: the descriptor's common
 * fields, its sequences and the views' shapes. Each refusal names the
 * argument and its value; nothing is written on failure. */
#include "rwkv/rwkv.h"

#include <inttypes.h>
#include <math.h>

fcl_status fcl_check_rwkv_dims(fcl_context *ctx, const fcl_rwkv_dims *d) {
  const struct { const char *name; int64_t v, max; } sizes[] = {
      {"batch", d->batch, INT32_MAX}, {"seqlen", d->seqlen, 1LL << 30},
      {"heads", d->heads, INT32_MAX}, {"head_dim_k", d->head_dim_k, FCL_RWKV_MAX_DIM},
      {"head_dim_v", d->head_dim_v, FCL_RWKV_MAX_DIM}};
  for (size_t i = 0; i < FCL_COUNT(sizes); ++i)
    if (sizes[i].v <= 0 || sizes[i].v > sizes[i].max)
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                      "%s: is %" PRId64 ", must be in 1..%" PRId64, sizes[i].name,
                      sizes[i].v, sizes[i].max);
  if (d->batch * d->heads > INT32_MAX)
    return fcl_fail(ctx, FCL_ERROR_UNSUPPORTED, "batch: batch * heads exceeds 2^31 - 1");
  if (!isfinite(d->scale))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "scale: is %g, must be finite",
                    (double)d->scale);
  return FCL_OK;
}

fcl_status fcl_check_rwkv_layout(fcl_context *ctx, const fcl_rwkv_dims *d, fcl_rwkv_layout *l) {
  *l = (fcl_rwkv_layout){.varlen = d->cu_seqlens != NULL, .ntok = d->batch * d->seqlen};
  if (!l->varlen && d->cu_seqlens_host)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "cu_seqlens_host: is set while cu_seqlens is NULL (not varlen)");
  fcl_status s;
  if (l->varlen && (s = fcl_check_cu_seqlens(ctx, d->cu_seqlens, d->cu_seqlens_host,
                                             d->cu_seqlens_host ? "cu_seqlens_host"
                                                                : "cu_seqlens",
                                             d->batch, d->seqlen, &l->ntok)))
    return s;
  l->state_bytes = fcl_bytes(d->batch * d->heads, d->head_dim_k, d->head_dim_v, 4, 1);
  return FCL_OK;
}

fcl_status fcl_check_rwkv_view(fcl_context *ctx, const fcl_rwkv_dims *d,
                               const fcl_rwkv_layout *l, const fcl_tensor *t, const char *name,
                               bool value_dim, const fcl_tensor *r) {
  const fcl_tensor_shape shape = {
      name, {l->varlen ? 1 : d->batch, l->varlen ? l->ntok : d->seqlen, d->heads,
             value_dim ? d->head_dim_v : d->head_dim_k}};
  return fcl_check_view(ctx, t, &shape, l->varlen, r, "r");
}

float fcl_rwkv_scale(float scale, int64_t head_dim_k) {
  return scale != 0.0f ? scale : (float)(1.0 / sqrt((double)head_dim_k));
}

int fcl_rwkv_flags(bool varlen, int reverse) {
  return (varlen ? RW_VARLEN : 0) | (reverse ? RW_REVERSE : 0);
}
