/* Validation of RWKV7 problems: what RWKV6 checks too (rwkv/rwkv_check.c),
 * then RWKV7's own fields and arguments, each refusal naming the argument
 * and its value. Nothing is written on failure. */
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
  const fcl_status s = fcl_check_rwkv_dims(ctx, &FCL_RWKV_DIMS(d));
  if (s != FCL_OK) return s;
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
  const fcl_rwkv_layout l = {p->varlen, p->ntok, p->state_bytes};
  return fcl_check_rwkv_view(ctx, &FCL_RWKV_DIMS(p->d), &l, t, name, value_dim, r);
}

fcl_status fcl_check_rwkv7(fcl_context *ctx, const fcl_rwkv7_desc *d, const fcl_tensor *r,
                           const fcl_tensor *w, const fcl_tensor *k, const fcl_tensor *v,
                           const fcl_tensor *a, const fcl_tensor *b, cl_mem h0,
                           fcl_rwkv7_problem *p) {
  fcl_status s = fcl_check_rwkv7_desc(ctx, d);
  if (s != FCL_OK) return s;
  fcl_rwkv_layout l;
  s = fcl_check_rwkv_layout(ctx, &FCL_RWKV_DIMS(d), &l);
  *p = (fcl_rwkv7_problem){.d = d, .varlen = l.varlen, .ntok = l.ntok,
                           .state_bytes = l.state_bytes};
  if (s != FCL_OK) return s;
  if ((s = fcl_check_rwkv7_view(ctx, p, r, "r", false, NULL)) ||
      (s = fcl_check_rwkv7_view(ctx, p, w, "w", false, r)) ||
      (s = fcl_check_rwkv7_view(ctx, p, k, "k", false, r)) ||
      (s = fcl_check_rwkv7_view(ctx, p, v, "v", true, r)) ||
      (s = fcl_check_rwkv7_view(ctx, p, a, "a", false, r)) ||
      (s = fcl_check_rwkv7_view(ctx, p, b, "b", false, r)))
    return s;
  p->dtype = r->dtype;
  if (h0 && (s = fcl_check_buffer(ctx, h0, "h0", p->state_bytes))) return s;
  return FCL_OK;
}
