/* fcl_attention_forward and fcl_attention_backward (and their *_plan
 * forms): validation, the plan, and its launch (the next row of the table
 * where a kernel does not build), through the context's plans. */
#include "attention/attention.h"

fcl_status fcl_attention_run(fcl_context *ctx, const fcl_attention_problem *p, bool backward) {
  fcl_status s = fcl_device_probe(ctx);
  return s ? s
           : fcl_variant_run(ctx, backward ? &fcl_attention_bwd_table : &fcl_attention_fwd_table,
                             p);
}

_Static_assert(sizeof(void *) != 8 || sizeof(fcl_attention_desc) == 168,
               "a new field of fcl_attention_desc: key it");
void fcl_key_attention_desc(fcl_key *key, const fcl_attention_desc *d) {
  if (!d) {
    key->ok = false;
    return;
  }
  const int64_t f[] = {d->batch,       d->seqlen_q,    d->seqlen_k,     d->heads_q,
                       d->heads_kv,    d->head_dim,    d->head_dim_v,   d->causal,
                       d->window_left, d->window_right, d->diag_shift};
  fcl_key_bytes(key, f, sizeof f);
  fcl_key_f32(key, d->softmax_scale);
  fcl_key_f32(key, d->softcap);
  fcl_key_mem(key, d->alibi_slopes);
  fcl_key_mem(key, d->cu_seqlens_q);
  fcl_key_mem(key, d->cu_seqlens_k);
  fcl_key_host_offsets(key, d->cu_seqlens_q_host, d->batch);
  fcl_key_host_offsets(key, d->cu_seqlens_k_host, d->batch);
  /* Not the dropout's seed and offset: every call of a training run has
   * its own, and the calls' plans take them from each call instead
   * (fcl_attention_drop_patch). */
  fcl_key_f32(key, d->dropout_p);
  fcl_key_i64(key, d->reserved0);
}

size_t fcl_attention_drop_patch(const fcl_attention_desc *d, cl_int patch[4]) {
  if (!d || !(d->dropout_p > 0.0f)) return 0;
  patch[0] = (cl_int)(uint32_t)d->dropout_seed;
  patch[1] = (cl_int)(uint32_t)(d->dropout_seed >> 32);
  patch[2] = (cl_int)(uint32_t)d->dropout_offset;
  patch[3] = (cl_int)(uint32_t)(d->dropout_offset >> 32);
  return 4 * sizeof(cl_int);
}

/* One call's arguments (the backward's four NULL in a forward). */
typedef struct {
  const fcl_attention_desc *d;
  const fcl_tensor         *q, *k, *v, *o;
  cl_mem                    lse;
  const fcl_tensor         *dout, *dq, *dk, *dv;
} attention_call;

static void key(fcl_key *key, const attention_call *c, bool backward) {
  fcl_key_init(key, backward ? 0x61627764 : 0x61667764); /* "abwd", "afwd" */
  fcl_key_attention_desc(key, c->d);
  fcl_key_mem(key, c->lse);
  const fcl_tensor *t[] = {c->q, c->k, c->v, c->o, c->dout, c->dq, c->dk, c->dv};
  for (size_t i = 0; i < FCL_COUNT(t); ++i) fcl_key_tensor(key, t[i]);
}

static fcl_status forward(fcl_context *ctx, const void *args) {
  const attention_call *c = args;
  fcl_attention_problem p;
  fcl_status s = fcl_check_attention(ctx, c->d, c->q, c->k, c->v, c->o, &p);
  if (s != FCL_OK) return s;
  if (c->lse && (s = fcl_check_buffer(ctx, c->lse, "lse",
                                      (size_t)(c->d->heads_q * p.total_q) * sizeof(float))))
    return s;
  p.lse = c->lse;
  return fcl_attention_run(ctx, &p, false);
}

static fcl_status backward(fcl_context *ctx, const void *args) {
  const attention_call *c = args;
  fcl_attention_problem p;
  fcl_status s = fcl_check_attention(ctx, c->d, c->q, c->k, c->v, c->o, &p);
  if (s != FCL_OK) return s;
  p.lse = c->lse, p.dout = c->dout, p.dq = c->dq, p.dk = c->dk, p.dv = c->dv;
  if ((s = fcl_check_attention_grads(ctx, &p))) return s;
  return fcl_attention_run(ctx, &p, true);
}

fcl_status fcl_attention_forward(fcl_context *ctx, const fcl_attention_desc *d,
                                 const fcl_tensor *q, const fcl_tensor *k,
                                 const fcl_tensor *v, const fcl_tensor *o,
                                 cl_mem lse) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_attention_desc own;
  fcl_status s;
  if ((s = fcl_attention_desc_in(ctx, &d, &own))) return s;
  const attention_call c = {d, q, k, v, o, lse, NULL, NULL, NULL, NULL};
  fcl_key kc;
  key(&kc, &c, false);
  cl_int patch[4];
  const size_t len = fcl_attention_drop_patch(d, patch);
  return fcl_plan_call_patched(ctx, &kc, forward, &c, patch, len);
}

fcl_status fcl_attention_backward(fcl_context *ctx, const fcl_attention_desc *d,
                                  const fcl_tensor *q, const fcl_tensor *k,
                                  const fcl_tensor *v, const fcl_tensor *o,
                                  cl_mem lse, const fcl_tensor *dout,
                                  const fcl_tensor *dq, const fcl_tensor *dk,
                                  const fcl_tensor *dv) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_attention_desc own;
  fcl_status s;
  if ((s = fcl_attention_desc_in(ctx, &d, &own))) return s;
  const attention_call c = {d, q, k, v, o, lse, dout, dq, dk, dv};
  fcl_key kc;
  key(&kc, &c, true);
  cl_int patch[4];
  const size_t len = fcl_attention_drop_patch(d, patch);
  return fcl_plan_call_patched(ctx, &kc, backward, &c, patch, len);
}

fcl_status fcl_attention_forward_plan(fcl_context *ctx, const fcl_attention_desc *d,
                                      const fcl_tensor *q, const fcl_tensor *k,
                                      const fcl_tensor *v, const fcl_tensor *o, cl_mem lse,
                                      fcl_plan **out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_attention_desc own;
  fcl_status s;
  if ((s = fcl_attention_desc_in(ctx, &d, &own))) return s;
  const attention_call c = {d, q, k, v, o, lse, NULL, NULL, NULL, NULL};
  return fcl_plan_make(ctx, forward, &c, out);
}

fcl_status fcl_attention_backward_plan(fcl_context *ctx, const fcl_attention_desc *d,
                                       const fcl_tensor *q, const fcl_tensor *k,
                                       const fcl_tensor *v, const fcl_tensor *o, cl_mem lse,
                                       const fcl_tensor *dout, const fcl_tensor *dq,
                                       const fcl_tensor *dk, const fcl_tensor *dv,
                                       fcl_plan **out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_attention_desc own;
  fcl_status s;
  if ((s = fcl_attention_desc_in(ctx, &d, &own))) return s;
  const attention_call c = {d, q, k, v, o, lse, dout, dq, dk, dv};
  return fcl_plan_make(ctx, backward, &c, out);
}
