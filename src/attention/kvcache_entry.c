/* fcl_attention_kvcache: validation, the table of KV-cache kernel
 * variants, the plan (row, class, configuration) and its launch. */
#include "attention/attention.h"

/* One row of the KV-cache table: a variant (whose program holds the
 * append), the problems it takes (NULL: all) and its launch. */
typedef struct {
  const fcl_variant *variant;
  bool (*applies)(fcl_context *ctx, const fcl_kvcache_problem *p);
  fcl_status (*launch)(fcl_context *ctx, const fcl_tuning_class *cls, const fcl_config *cfg,
                       const fcl_kvcache_problem *p);
} kvcache_row;

/* Chunked prefill on the forward's kernels (tensor cores where they
 * apply), the decode kernel on NVIDIA's tensor cores (f16, bf16), then the
 * portable decode kernel, which takes every problem on every device. */
static const kvcache_row rows[] = {
    {&fcl_variant_attention_decode, fcl_kvcache_prefill_applies, fcl_kvcache_prefill_launch},
    {&fcl_variant_attention_decode_mma, fcl_kvcache_mma_applies, fcl_kvcache_mma_launch},
    {&fcl_variant_attention_decode, NULL, fcl_kvcache_decode_launch},
};

/* The row for a problem: the first that applies; while fa-tune overrides
 * a variant, only that variant's rows (and the last, which takes all). */
static const kvcache_row *choose_row(fcl_context *ctx, const fcl_kvcache_problem *p) {
  const fcl_variant *forced = NULL;
  for (const kvcache_row *r = rows; !forced && r->applies; ++r)
    if (fcl_tuning_overridden(ctx, r->variant)) forced = r->variant;
  const kvcache_row *r = rows;
  while (r->applies && ((forced && r->variant != forced) || !r->applies(ctx, p))) ++r;
  return r;
}

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
  const kvcache_row *r = choose_row(ctx, &p);
  fcl_tuning_class cls;
  fcl_config cfg;
  fcl_kvcache_class(&p, r->variant, &cls);
  /* A database row or override is valid here (fcl_tuning_choose checks). */
  if ((s = fcl_tuning_choose(ctx, &cls, &cfg, NULL, 0))) return s;
  return r->launch(ctx, &cls, &cfg, &p);
}

/* Every field of the descriptor and every argument: what the plan of a
 * call depends on. */
_Static_assert(sizeof(void *) != 8 || sizeof(fcl_kvcache_desc) == 200, "a new field of fcl_kvcache_desc: key it");
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
                       d->num_splits};
  fcl_key_bytes(key, f, sizeof f);
  fcl_key_f32(key, d->softmax_scale);
  fcl_key_f32(key, d->softcap);
  const cl_mem m[] = {d->alibi_slopes, d->cache_seqlens, d->cache_batch_idx, d->block_table,
                      d->cu_seqlens_q, d->rotary_cos, d->rotary_sin, c->lse};
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
