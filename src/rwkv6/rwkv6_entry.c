/* fcl_rwkv6_forward and fcl_rwkv6_backward, and their *_plan forms: the
 * calls through the context's plans (core/plan.c), keyed by every
 * descriptor field and argument. */
#include "rwkv6/rwkv6.h"

/* One call's arguments (the backward's NULL in a forward). */
typedef struct {
  const fcl_rwkv6_desc *d;
  const fcl_tensor     *r, *k, *v, *w, *o, *dout, *dr, *dk, *dv, *dw;
  cl_mem                u, h0, ht, dht, du, dh0;
} rwkv6_call;

static fcl_status forward(fcl_context *ctx, const void *args) {
  const rwkv6_call *c = args;
  return fcl_rwkv6_forward_run(ctx, c->d, c->r, c->k, c->v, c->w, c->u, c->h0, c->o, c->ht);
}

static fcl_status backward(fcl_context *ctx, const void *args) {
  const rwkv6_call *c = args;
  return fcl_rwkv6_backward_run(ctx, c->d, c->r, c->k, c->v, c->w, c->u, c->h0, c->dout,
                                c->dht, c->dr, c->dk, c->dv, c->dw, c->du, c->dh0);
}

_Static_assert(sizeof(void *) != 8 || sizeof(fcl_rwkv6_desc) == 80,
               "a new field of fcl_rwkv6_desc: key it");
static void key(fcl_key *key, const rwkv6_call *c, bool bwd) {
  const fcl_rwkv6_desc *d = c->d;
  fcl_key_init(key, bwd ? 0x72627764 : 0x72667764); /* "rbwd", "rfwd" */
  if (!d) {
    key->ok = false;
    return;
  }
  const int64_t f[] = {d->batch,      d->seqlen,  d->heads,          d->head_dim_k,
                       d->head_dim_v, d->reverse, (int64_t)d->algorithm};
  fcl_key_bytes(key, f, sizeof f);
  fcl_key_f32(key, d->scale);
  fcl_key_host_offsets(key, d->cu_seqlens_host, d->batch);
  const cl_mem m[] = {d->cu_seqlens, c->u, c->h0, c->ht, c->dht, c->du, c->dh0};
  for (size_t i = 0; i < FCL_COUNT(m); ++i) fcl_key_mem(key, m[i]);
  const fcl_tensor *t[] = {c->r, c->k, c->v, c->w, c->o, c->dout, c->dr, c->dk, c->dv, c->dw};
  for (size_t i = 0; i < FCL_COUNT(t); ++i) fcl_key_tensor(key, t[i]);
}

fcl_status fcl_rwkv6_forward(fcl_context *ctx, const fcl_rwkv6_desc *d, const fcl_tensor *r,
                             const fcl_tensor *k, const fcl_tensor *v, const fcl_tensor *w,
                             cl_mem u, cl_mem h0, const fcl_tensor *o, cl_mem ht) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_rwkv6_desc own;
  fcl_status s;
  if ((s = fcl_rwkv6_desc_in(ctx, &d, &own))) return s;
  const rwkv6_call c = {.d = d, .r = r, .k = k, .v = v, .w = w, .o = o, .u = u, .h0 = h0,
                        .ht = ht};
  fcl_key kc;
  key(&kc, &c, false);
  return fcl_plan_call(ctx, &kc, forward, &c);
}

fcl_status fcl_rwkv6_backward(fcl_context *ctx, const fcl_rwkv6_desc *d, const fcl_tensor *r,
                              const fcl_tensor *k, const fcl_tensor *v, const fcl_tensor *w,
                              cl_mem u, cl_mem h0, const fcl_tensor *dout, cl_mem dht,
                              const fcl_tensor *dr, const fcl_tensor *dk, const fcl_tensor *dv,
                              const fcl_tensor *dw, cl_mem du, cl_mem dh0) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_rwkv6_desc own;
  fcl_status s;
  if ((s = fcl_rwkv6_desc_in(ctx, &d, &own))) return s;
  const rwkv6_call c = {.d = d, .r = r, .k = k, .v = v, .w = w, .dout = dout, .dr = dr,
                        .dk = dk, .dv = dv, .dw = dw, .u = u, .h0 = h0, .dht = dht, .du = du,
                        .dh0 = dh0};
  fcl_key kc;
  key(&kc, &c, true);
  return fcl_plan_call(ctx, &kc, backward, &c);
}

fcl_status fcl_rwkv6_forward_plan(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                  const fcl_tensor *r, const fcl_tensor *k,
                                  const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                                  cl_mem h0, const fcl_tensor *o, cl_mem ht, fcl_plan **out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_rwkv6_desc own;
  fcl_status s;
  if ((s = fcl_rwkv6_desc_in(ctx, &d, &own))) return s;
  const rwkv6_call c = {.d = d, .r = r, .k = k, .v = v, .w = w, .o = o, .u = u, .h0 = h0,
                        .ht = ht};
  return fcl_plan_make(ctx, forward, &c, out);
}

fcl_status fcl_rwkv6_backward_plan(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                   const fcl_tensor *r, const fcl_tensor *k,
                                   const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                                   cl_mem h0, const fcl_tensor *dout, cl_mem dht,
                                   const fcl_tensor *dr, const fcl_tensor *dk,
                                   const fcl_tensor *dv, const fcl_tensor *dw, cl_mem du,
                                   cl_mem dh0, fcl_plan **out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_rwkv6_desc own;
  fcl_status s;
  if ((s = fcl_rwkv6_desc_in(ctx, &d, &own))) return s;
  const rwkv6_call c = {.d = d, .r = r, .k = k, .v = v, .w = w, .dout = dout, .dr = dr,
                        .dk = dk, .dv = dv, .dw = dw, .u = u, .h0 = h0, .dht = dht, .du = du,
                        .dh0 = dh0};
  return fcl_plan_make(ctx, backward, &c, out);
}
