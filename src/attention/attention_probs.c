/* fcl_attention_probs: a forward's probabilities, and its dropout mask as
 * their signs (cl/attention/attention_probs.cl), through the context's
 * plans like every call. */
#include "attention/attention.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct {
  const fcl_attention_desc *d;
  const fcl_tensor         *q, *k;
  cl_mem                    lse, p;
} probs_call;

static fcl_status run(fcl_context *ctx, const void *args) {
  const probs_call *c = args;
  fcl_attention_problem pr;
  fcl_status s = fcl_check_attention_qk(ctx, c->d, c->q, c->k, &pr);
  if (s != FCL_OK) return s;
  const fcl_attention_desc *d = c->d;
  if ((s = fcl_check_buffer(ctx, c->lse, "lse",
                            (size_t)(d->heads_q * pr.total_q) * sizeof(float))))
    return s;
  /* one buffer's worth of floats at most, bounded a factor at a time */
  const int64_t rows = d->batch * d->heads_q; /* <= 2^31 - 1, checked */
  if (d->seqlen_q > INT32_MAX / rows || d->seqlen_k > INT32_MAX / (rows * d->seqlen_q))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "p: batch * heads_q * seqlen_q * seqlen_k = %" PRId64 " x %" PRId64
                    " x %" PRId64 " floats, more than 2^31 - 1",
                    rows, d->seqlen_q, d->seqlen_k);
  const int64_t count = rows * d->seqlen_q * d->seqlen_k;
  if ((s = fcl_check_buffer(ctx, c->p, "p", (size_t)count * sizeof(float)))) return s;
  if ((s = fcl_device_probe(ctx))) return s;

  char opts[64];
  snprintf(opts, sizeof opts, "-DFCL_DTYPE=%d -DFCL_DROPOUT=%d", (int)pr.dtype,
           d->dropout_p > 0.0f);
  cl_kernel k;
  if ((s = fcl_get_kernel(ctx, FCL_TOPS("attention/attention_probs.cl"), opts,
                          "fcl_attention_probs", &k)))
    return s;
  pr.v = c->k, pr.o = c->q, pr.lse = c->lse; /* v and o: views the kernel never reads */
  const cl_int head_dim = (cl_int)d->head_dim;
  fcl_args a = FCL_ARGS(k);
  fcl_attention_fwd_args(&a, &pr, fcl_attention_flags(&pr) & ~FCL_ATTN_LSE);
  FCL_ARG(&a, c->p);
  FCL_ARG(&a, head_dim);
  const size_t wg = 64;
  const size_t global[3] = {((size_t)d->seqlen_k + wg - 1) / wg * wg, (size_t)d->seqlen_q,
                            (size_t)rows};
  const size_t local[3] = {ctx->info.max_wg >= wg ? wg : 1, 1, 1};
  return fcl_launch(ctx, k, &a, global, local, "enqueueing attention probabilities");
}

static void key(fcl_key *key, const probs_call *c) {
  fcl_key_init(key, 0x61707262); /* "aprb" */
  fcl_key_attention_desc(key, c->d);
  fcl_key_tensor(key, c->q);
  fcl_key_tensor(key, c->k);
  fcl_key_mem(key, c->lse);
  fcl_key_mem(key, c->p);
}

fcl_status fcl_attention_probs(fcl_context *ctx, const fcl_attention_desc *d,
                               const fcl_tensor *q, const fcl_tensor *k, cl_mem lse, cl_mem p) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_attention_desc own;
  fcl_status s;
  if ((s = fcl_attention_desc_in(ctx, &d, &own))) return s;
  const probs_call c = {d, q, k, lse, p};
  fcl_key kc;
  key(&kc, &c);
  cl_int patch[4];
  const size_t len = fcl_attention_drop_patch(d, patch);
  return fcl_plan_call_patched(ctx, &kc, run, &c, patch, len);
}
