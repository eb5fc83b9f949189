/* fcl_attention_kvcache: validation, the table of KV-cache kernel
 * variants, and the call through the context's plans. */
#include "attention/attention.h"

/* Chunked prefill on the forward's kernels (tensor cores where they
 * apply), the decode kernel on NVIDIA's tensor cores (f16, bf16), then the
 * portable decode kernel, which takes every problem on every device. The
 * decode variant's program holds the append, so it is the prefill row's
 * too: while fa-tune overrides it, the tensor-core row stands aside. */
static const fcl_variant_row rows[] = {
    {.variant = &fcl_variant_attention_decode, .applies = fcl_kvcache_prefill_applies,
     .launch = fcl_kvcache_prefill_launch},
    {.variant = &fcl_variant_attention_decode_mma, .applies = fcl_kvcache_mma_applies,
     .launch = fcl_kvcache_mma_launch},
    {.variant = &fcl_variant_attention_decode, .launch = fcl_kvcache_decode_launch},
};
const fcl_variant_table fcl_kvcache_table = {"KV-cache attention", rows, (int)FCL_COUNT(rows),
                                             fcl_kvcache_class};

/* One call's arguments, for the plan that runs it. */
typedef struct {
  const fcl_kvcache_desc *d;
  const fcl_tensor       *q, *k_cache, *v_cache, *k_new, *v_new, *o;
  cl_mem                  lse;
} kvcache_call;

static fcl_status run(fcl_context *ctx, const void *args) {
  const kvcache_call *c = args;
  fcl_kvcache_problem p;
  fcl_status s;
  if ((s = fcl_check_kvcache(ctx, c->d, c->q, c->k_cache, c->v_cache, c->k_new, c->v_new,
                             c->o, c->lse, &p)) ||
      (s = fcl_device_probe(ctx)))
    return s;
  return fcl_variant_run(ctx, &fcl_kvcache_table, &p);
}

/* Every field of the descriptor and every argument: what the plan of a
 * call depends on. */
_Static_assert(sizeof(void *) != 8 || sizeof(fcl_kvcache_desc) == 224, "a new field of fcl_kvcache_desc: key it");
static void key(fcl_key *key, const kvcache_call *c) {
  const fcl_kvcache_desc *d = c->d;
  fcl_key_init(key, 0x6b766361); /* "kvca" */
  if (!d) {
    key->ok = false;
    return;
  }
  const int64_t f[] = {d->batch, d->seqlen_q, d->heads_q, d->heads_kv, d->head_dim,
                       d->head_dim_v, d->cache_capacity, d->page_size, d->num_pages,
                       d->cache_batch, d->causal, d->window_left, d->window_right,
                       d->rotary_dim, d->rotary_positions, d->rotary_interleaved,
                       d->num_splits, d->scale_count};
  fcl_key_bytes(key, f, sizeof f);
  fcl_key_f32(key, d->softmax_scale);
  fcl_key_f32(key, d->softcap);
  const cl_mem m[] = {d->alibi_slopes, d->cache_seqlens, d->cache_batch_idx, d->block_table,
                      d->cu_seqlens_q, d->rotary_cos, d->rotary_sin, d->k_scale,
                      d->v_scale, c->lse};
  for (size_t i = 0; i < FCL_COUNT(m); ++i) fcl_key_mem(key, m[i]);
  const fcl_tensor *t[] = {c->q, c->k_cache, c->v_cache, c->k_new, c->v_new, c->o};
  for (size_t i = 0; i < FCL_COUNT(t); ++i) fcl_key_tensor(key, t[i]);
}

fcl_status fcl_attention_kvcache(fcl_context *ctx, const fcl_kvcache_desc *d,
                                 const fcl_tensor *q, const fcl_tensor *k_cache,
                                 const fcl_tensor *v_cache, const fcl_tensor *k_new,
                                 const fcl_tensor *v_new, const fcl_tensor *o, cl_mem lse) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_kvcache_desc own;
  fcl_status s;
  if ((s = fcl_kvcache_desc_in(ctx, &d, &own))) return s;
  const kvcache_call c = {d, q, k_cache, v_cache, k_new, v_new, o, lse};
  fcl_key k;
  key(&k, &c);
  return fcl_plan_call(ctx, &k, run, &c);
}

fcl_status fcl_attention_kvcache_plan(fcl_context *ctx, const fcl_kvcache_desc *d,
                                      const fcl_tensor *q, const fcl_tensor *k_cache,
                                      const fcl_tensor *v_cache, const fcl_tensor *k_new,
                                      const fcl_tensor *v_new, const fcl_tensor *o, cl_mem lse,
                                      fcl_plan **out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_kvcache_desc own;
  fcl_status s;
  if ((s = fcl_kvcache_desc_in(ctx, &d, &own))) return s;
  const kvcache_call c = {d, q, k_cache, v_cache, k_new, v_new, o, lse};
  return fcl_plan_make(ctx, run, &c, out);
}
