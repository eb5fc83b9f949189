/* fcl_rwkv7_forward and fcl_rwkv7_backward: the calls through the
 * context's plans (core/plan.c), keyed by every descriptor field and
 * argument, and fcl_rwkv7_config. */
#include "rwkv7/rwkv7.h"

/* One call: its descriptor and arguments (the backward's NULL in a forward). */
typedef struct {
  const fcl_rwkv7_desc *d;
  fcl_rwkv7_args        a;
} rwkv7_call;

/* The calls, checked (the descriptor already read) and run by their
 * pass's table (rwkv7_plan.c). */
static fcl_status forward_run(fcl_context *ctx, const fcl_rwkv7_desc *d,
                              const fcl_rwkv7_args *a) {
  fcl_rwkv7_problem p;
  fcl_status s = fcl_check_rwkv7(ctx, d, a->r, a->w, a->k, a->v, a->a, a->b, a->h0, &p);
  if (s != FCL_OK) return s;
  if ((s = fcl_check_rwkv7_view(ctx, &p, a->o, "o", true, a->r))) return s;
  if (a->ht && (s = fcl_check_buffer(ctx, a->ht, "ht", p.state_bytes))) return s;
  p.a = *a;
  return fcl_rwkv7_run(ctx, &p, false);
}

static fcl_status backward_run(fcl_context *ctx, const fcl_rwkv7_desc *d,
                               const fcl_rwkv7_args *a) {
  fcl_rwkv7_problem p;
  fcl_status s = fcl_check_rwkv7(ctx, d, a->r, a->w, a->k, a->v, a->a, a->b, a->h0, &p);
  if (s != FCL_OK) return s;
  if ((s = fcl_check_rwkv7_view(ctx, &p, a->dout, "dout", true, a->r)) ||
      (s = fcl_check_rwkv7_view(ctx, &p, a->dr, "dr", false, a->r)) ||
      (s = fcl_check_rwkv7_view(ctx, &p, a->dw, "dw", false, a->r)) ||
      (s = fcl_check_rwkv7_view(ctx, &p, a->dk, "dk", false, a->r)) ||
      (s = fcl_check_rwkv7_view(ctx, &p, a->dv, "dv", true, a->r)) ||
      (s = fcl_check_rwkv7_view(ctx, &p, a->da, "da", false, a->r)) ||
      (s = fcl_check_rwkv7_view(ctx, &p, a->db, "db", false, a->r)) ||
      (a->dht && (s = fcl_check_buffer(ctx, a->dht, "dht", p.state_bytes))) ||
      (a->dh0 && (s = fcl_check_buffer(ctx, a->dh0, "dh0", p.state_bytes))))
    return s;
  p.a = *a;
  return fcl_rwkv7_run(ctx, &p, true);
}

static fcl_status forward(fcl_context *ctx, const void *args) {
  const rwkv7_call *c = args;
  return forward_run(ctx, c->d, &c->a);
}

static fcl_status backward(fcl_context *ctx, const void *args) {
  const rwkv7_call *c = args;
  return backward_run(ctx, c->d, &c->a);
}

_Static_assert(sizeof(void *) != 8 || sizeof(fcl_rwkv7_desc) == 80,
               "a new field of fcl_rwkv7_desc: key it");
static void key(fcl_key *key, const rwkv7_call *c, bool bwd) {
  const fcl_rwkv7_desc *d = c->d;
  fcl_key_init(key, bwd ? 0x37627764 : 0x37667764); /* "7bwd", "7fwd" */
  if (!d) {
    key->ok = false;
    return;
  }
  const int64_t f[] = {d->batch,      d->seqlen,  d->heads,         d->head_dim_k,
                       d->head_dim_v, d->reverse, (int64_t)d->reserved0};
  fcl_key_bytes(key, f, sizeof f);
  fcl_key_f32(key, d->scale);
  fcl_key_f32(key, d->decay_lower_bound);
  fcl_key_host_offsets(key, d->cu_seqlens_host, d->batch);
  const fcl_rwkv7_args *a = &c->a;
  const cl_mem m[] = {d->cu_seqlens, a->h0, a->ht, a->dht, a->dh0};
  for (size_t i = 0; i < FCL_COUNT(m); ++i) fcl_key_mem(key, m[i]);
  const fcl_tensor *t[] = {a->r, a->w,  a->k,  a->v,  a->a,  a->b,  a->o,
                           a->dout, a->dr, a->dw, a->dk, a->dv, a->da, a->db};
  for (size_t i = 0; i < FCL_COUNT(t); ++i) fcl_key_tensor(key, t[i]);
}

fcl_status fcl_rwkv7_forward(fcl_context *ctx, const fcl_rwkv7_desc *d, const fcl_tensor *r,
                             const fcl_tensor *w, const fcl_tensor *k, const fcl_tensor *v,
                             const fcl_tensor *a, const fcl_tensor *b, cl_mem h0,
                             const fcl_tensor *o, cl_mem ht) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_rwkv7_desc own;
  fcl_status s;
  if ((s = fcl_rwkv7_desc_in(ctx, &d, &own))) return s;
  const rwkv7_call c = {d, {.r = r, .w = w, .k = k, .v = v, .a = a, .b = b, .o = o,
                            .h0 = h0, .ht = ht}};
  fcl_key kc;
  key(&kc, &c, false);
  return fcl_plan_call(ctx, &kc, forward, &c);
}

fcl_status fcl_rwkv7_backward(fcl_context *ctx, const fcl_rwkv7_desc *d, const fcl_tensor *r,
                              const fcl_tensor *w, const fcl_tensor *k, const fcl_tensor *v,
                              const fcl_tensor *a, const fcl_tensor *b, cl_mem h0,
                              const fcl_tensor *dout, cl_mem dht, const fcl_tensor *dr,
                              const fcl_tensor *dw, const fcl_tensor *dk, const fcl_tensor *dv,
                              const fcl_tensor *da, const fcl_tensor *db, cl_mem dh0) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_rwkv7_desc own;
  fcl_status s;
  if ((s = fcl_rwkv7_desc_in(ctx, &d, &own))) return s;
  const rwkv7_call c = {d, {.r = r, .w = w, .k = k, .v = v, .a = a, .b = b, .dout = dout,
                            .dr = dr, .dw = dw, .dk = dk, .dv = dv, .da = da, .db = db,
                            .h0 = h0, .dht = dht, .dh0 = dh0}};
  fcl_key kc;
  key(&kc, &c, true);
  return fcl_plan_call(ctx, &kc, backward, &c);
}

fcl_status fcl_rwkv7_config(fcl_context *ctx, const fcl_rwkv7_desc *d, fcl_dtype dtype,
                            int backward, fcl_config_info *out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_rwkv7_desc own;
  fcl_status s;
  if ((s = fcl_rwkv7_desc_in(ctx, &d, &own)) || (s = fcl_check_rwkv7_desc(ctx, d))) return s;
  if (!out) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "out: is NULL");
  if (dtype != FCL_F32 && dtype != FCL_F16 && dtype != FCL_BF16)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "dtype: is %d, not f32, f16 or bf16",
                    (int)dtype);
  fcl_rwkv7_problem p;
  fcl_variant_plan pl;
  fcl_rwkv7_problem_of(d, dtype, &p);
  if ((s = fcl_device_probe(ctx)) || (s = fcl_rwkv7_plan_make(ctx, &p, backward != 0, &pl)))
    return s;
  fcl_config_info_fill(out, &pl.cls, &pl.cfg, pl.from);
  return FCL_OK;
}
