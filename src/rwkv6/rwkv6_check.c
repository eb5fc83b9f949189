/* Validation of RWKV6 problems: what RWKV7 checks too (rwkv/rwkv_check.c),
 * then RWKV6's own fields and arguments. Nothing is written on failure. */
#include "rwkv6/rwkv6.h"

#include <stddef.h>

fcl_status fcl_check_rwkv6_view(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                const fcl_rwkv6_problem *p, const fcl_tensor *t,
                                const char *name, bool value_dim,
                                const fcl_tensor *r) {
  const fcl_rwkv_layout l = {p->varlen, p->ntok, p->state_bytes};
  return fcl_check_rwkv_view(ctx, &FCL_RWKV_DIMS(d), &l, t, name, value_dim, r);
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
  const fcl_status s = fcl_check_rwkv_dims(ctx, &FCL_RWKV_DIMS(d));
  if (s != FCL_OK) return s;
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
  fcl_rwkv_layout l;
  s = fcl_check_rwkv_layout(ctx, &FCL_RWKV_DIMS(d), &l);
  *p = (fcl_rwkv6_problem){.d = d, .varlen = l.varlen, .ntok = l.ntok,
                           .state_bytes = l.state_bytes};
  if (s != FCL_OK) return s;
  if ((s = fcl_check_rwkv6_view(ctx, d, p, r, "r", false, NULL)) ||
      (s = fcl_check_rwkv6_view(ctx, d, p, k, "k", false, r)) ||
      (s = fcl_check_rwkv6_view(ctx, d, p, v, "v", true, r)) ||
      (s = fcl_check_rwkv6_view(ctx, d, p, w, "w", false, r)))
    return s;
  p->dtype = r->dtype;
  p->u_bytes = (size_t)(d->heads * d->head_dim_k) * fcl_dtype_size(r->dtype);
  if ((s = fcl_check_buffer(ctx, u, "u", p->u_bytes))) return s;
  if (h0 && (s = fcl_check_buffer(ctx, h0, "h0", p->state_bytes))) return s;
  return FCL_OK;
}
