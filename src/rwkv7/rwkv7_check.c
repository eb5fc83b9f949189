/* Validation of RWKV7 problems: the descriptor and every argument, each
 * refusal naming the argument and its value. Nothing is written on
 * failure. */
#include "rwkv7/rwkv7.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>

static const fcl_desc_kind rwkv7_desc_kind = {
    "fcl_rwkv7_desc", "FCL_RWKV7_DESC_INIT",
    offsetof(fcl_rwkv7_desc, reserved0) + sizeof(uint32_t), sizeof(fcl_rwkv7_desc)};

fcl_status fcl_rwkv7_desc_in(fcl_context *ctx, const fcl_rwkv7_desc **d, fcl_rwkv7_desc *own) {
  if (!*d) return FCL_OK;
  const fcl_status s = fcl_desc_read(ctx, *d, &rwkv7_desc_kind, "d", own);
  if (s == FCL_OK) *d = own;
  return s;
}

fcl_status fcl_check_rwkv7_desc(fcl_context *ctx, const fcl_rwkv7_desc *d) {
  if (!d) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "desc: is NULL");
  const struct { const char *name; int64_t v, max; } sizes[] = {
      {"batch", d->batch, INT32_MAX}, {"seqlen", d->seqlen, 1LL << 30},
      {"heads", d->heads, INT32_MAX}, {"head_dim_k", d->head_dim_k, FCL_RWKV6_MAX_DIM},
      {"head_dim_v", d->head_dim_v, FCL_RWKV6_MAX_DIM}};
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
  if (!(d->decay_lower_bound <= 0.0f) || !isfinite(d->decay_lower_bound))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "decay_lower_bound: is %g, must be 0 (unknown) or a finite bound below 0",
                    (double)d->decay_lower_bound);
  if (d->reserved0 != 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "reserved0: is %" PRIu32 ", must be 0",
                    d->reserved0);
  return FCL_OK;
}

fcl_status fcl_check_rwkv7_view(fcl_context *ctx, const fcl_rwkv7_problem *p,
                                const fcl_tensor *t, const char *name, bool value_dim,
                                const fcl_tensor *r) {
  const fcl_rwkv7_desc *d = p->d;
  const fcl_tensor_shape shape = {
      name, {p->varlen ? 1 : d->batch, p->varlen ? p->ntok : d->seqlen, d->heads,
             value_dim ? d->head_dim_v : d->head_dim_k}};
  return fcl_check_view(ctx, t, &shape, p->varlen, r, "r");
}

fcl_status fcl_check_rwkv7(fcl_context *ctx, const fcl_rwkv7_desc *d, const fcl_tensor *r,
                           const fcl_tensor *w, const fcl_tensor *k, const fcl_tensor *v,
                           const fcl_tensor *a, const fcl_tensor *b, cl_mem h0,
                           fcl_rwkv7_problem *p) {
  fcl_status s = fcl_check_rwkv7_desc(ctx, d);
  if (s != FCL_OK) return s;
  *p = (fcl_rwkv7_problem){.d = d};
  p->varlen = d->cu_seqlens != NULL;
  if (!p->varlen && d->cu_seqlens_host)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "cu_seqlens_host: is set while cu_seqlens is NULL (not varlen)");
  p->ntok = d->batch * d->seqlen;
  if (p->varlen && (s = fcl_check_cu_seqlens(ctx, d->cu_seqlens, d->cu_seqlens_host,
                                             d->cu_seqlens_host ? "cu_seqlens_host"
                                                                : "cu_seqlens",
                                             d->batch, d->seqlen, &p->ntok)))
    return s;
  if ((s = fcl_check_rwkv7_view(ctx, p, r, "r", false, NULL)) ||
      (s = fcl_check_rwkv7_view(ctx, p, w, "w", false, r)) ||
      (s = fcl_check_rwkv7_view(ctx, p, k, "k", false, r)) ||
      (s = fcl_check_rwkv7_view(ctx, p, v, "v", true, r)) ||
      (s = fcl_check_rwkv7_view(ctx, p, a, "a", false, r)) ||
      (s = fcl_check_rwkv7_view(ctx, p, b, "b", false, r)))
    return s;
  p->dtype = r->dtype;
  p->state_bytes = fcl_bytes(d->batch * d->heads, d->head_dim_k, d->head_dim_v, 4, 1);
  if (h0 && (s = fcl_check_buffer(ctx, h0, "h0", p->state_bytes))) return s;
  return FCL_OK;
}

float fcl_rwkv7_scale(const fcl_rwkv7_desc *d) {
  return d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)d->head_dim_k));
}

int fcl_rwkv7_flags(const fcl_rwkv7_problem *p) {
  return (p->varlen ? RW_VARLEN : 0) | (p->d->reverse ? RW_REVERSE : 0);
}
