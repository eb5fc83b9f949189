/* Validation of RWKV6 problems. Nothing is written on failure. */
#include "rwkv6/rwkv6.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>


fcl_status fcl_check_rwkv6_view(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                const fcl_rwkv6_problem *p, const fcl_tensor *t,
                                const char *name, bool value_dim,
                                const fcl_tensor *r) {
  const fcl_tensor_shape shape = {
      name, {p->varlen ? 1 : d->batch, p->varlen ? p->ntok : d->seqlen, d->heads,
             value_dim ? d->head_dim_v : d->head_dim_k}};
  return fcl_check_view(ctx, t, &shape, p->varlen, r, "r");
}

static const fcl_desc_kind rwkv6_desc_kind = {
    "fcl_rwkv6_desc", "FCL_RWKV6_DESC_INIT",
    offsetof(fcl_rwkv6_desc, cu_seqlens_host) + sizeof(void *), sizeof(fcl_rwkv6_desc)};

fcl_status fcl_rwkv6_desc_in(fcl_context *ctx, const fcl_rwkv6_desc **d, fcl_rwkv6_desc *own) {
  if (!*d) return FCL_OK;
  const fcl_status s = fcl_desc_read(ctx, *d, &rwkv6_desc_kind, "d", own);
  if (s == FCL_OK) *d = own;
  return s;
}

fcl_status fcl_check_rwkv6_desc(fcl_context *ctx, const fcl_rwkv6_desc *d) {
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
  if (d->algorithm < FCL_RWKV6_AUTO || d->algorithm > FCL_RWKV6_CHUNKED)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "algorithm: is %d, must be 0 (auto), 1 (recurrent) or 2 (chunked)",
                    (int)d->algorithm);
  return FCL_OK;
}

fcl_status fcl_check_rwkv6(fcl_context *ctx, const fcl_rwkv6_desc *d,
                           const fcl_tensor *r, const fcl_tensor *k,
                           const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                           cl_mem h0, fcl_rwkv6_problem *p) {
  fcl_status s = fcl_check_rwkv6_desc(ctx, d);
  if (s != FCL_OK) return s;
  *p = (fcl_rwkv6_problem){.d = d};
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
  if ((s = fcl_check_rwkv6_view(ctx, d, p, r, "r", false, NULL)) ||
      (s = fcl_check_rwkv6_view(ctx, d, p, k, "k", false, r)) ||
      (s = fcl_check_rwkv6_view(ctx, d, p, v, "v", true, r)) ||
      (s = fcl_check_rwkv6_view(ctx, d, p, w, "w", false, r)))
    return s;
  p->dtype = r->dtype;
  p->u_bytes = (size_t)(d->heads * d->head_dim_k) * fcl_dtype_size(r->dtype);
  p->state_bytes = (size_t)(d->batch * d->heads * d->head_dim_k * d->head_dim_v) * 4;
  if ((s = fcl_check_buffer(ctx, u, "u", p->u_bytes))) return s;
  if (h0 && (s = fcl_check_buffer(ctx, h0, "h0", p->state_bytes))) return s;
  return FCL_OK;
}
