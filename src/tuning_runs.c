/* flashcl_tuning.h's fcl_tuning_runs: whether the library runs a variant
 * on a class, asked of the plan of the operation the variant belongs to.
 * It stands above the operations (src/README.md), beside the registry
 * (variant_registry.c). */
#include "attention/attention.h"
#include "rwkv6/rwkv6.h"
#include "rwkv7/rwkv7.h"

/* The plan of a problem of the class: its head dims, causal flag and
 * bucket length. fcl_attention_kvcache runs a decode variant on every class
 * it has. */
static fcl_status plans(fcl_context *ctx, const fcl_tuning_class *c, bool *runs) {
  const fcl_variant *v = c->variant;
  const int64_t len = fcl_seqlen_bucket_length(c->bucket);
  fcl_status s;
  if (v->op == FCL_TUNING_ATTENTION_FWD || v->op == FCL_TUNING_ATTENTION_BWD) {
    fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
    d.batch = 1, d.seqlen_q = d.seqlen_k = len, d.heads_q = d.heads_kv = 1;
    d.head_dim = c->head_dim, d.head_dim_v = c->head_dim_v, d.causal = c->causal;
    const fcl_attention_problem p = {.d = &d, .dtype = c->dtype};
    fcl_variant_plan pl;
    s = fcl_attention_plan_make(ctx, &p, v->op == FCL_TUNING_ATTENTION_BWD, &pl);
    *runs = s == FCL_OK && pl.cls.variant == v;
  } else if (v->op == FCL_TUNING_ATTENTION_DECODE) {
    /* The tensor-core kernel where it suits the class, else the portable
     * one (which runs anywhere when forced). */
    const bool mma = fcl_kvcache_mma_suits(ctx, c->dtype, c->head_dim, c->head_dim_v);
    s = FCL_OK;
    *runs = fcl_tuning_class_valid(c) &&
            (v == &fcl_variant_attention_decode_mma ? mma
                                                     : !mma || fcl_tuning_overridden(ctx, v));
  } else if (v->op == FCL_TUNING_RWKV7_RECURRENT || v->op == FCL_TUNING_RWKV7_BWD) {
    fcl_rwkv7_desc d = FCL_RWKV7_DESC_INIT;
    d.batch = 1, d.seqlen = len, d.heads = 1;
    d.head_dim_k = c->head_dim, d.head_dim_v = c->head_dim_v;
    if (v == &fcl_variant_rwkv7_step) d.seqlen = 1; /* as RWKV6's step, below */
    /* The chunked forward runs only under a decay bound: the models'. */
    if (v == &fcl_variant_rwkv7_chunked || v == &fcl_variant_rwkv7_chunked_mma)
      d.decay_lower_bound = -0.60653066f;
    fcl_rwkv7_problem p;
    fcl_variant_plan pl;
    fcl_rwkv7_problem_of(&d, c->dtype, &p);
    s = fcl_rwkv7_plan_make(ctx, &p, v->op == FCL_TUNING_RWKV7_BWD, &pl);
    *runs = s == FCL_OK && pl.cls.variant == v && (v != &fcl_variant_rwkv7_step || c->bucket == 0);
  } else {
    fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
    d.batch = 1, d.seqlen = len, d.heads = 1;
    d.head_dim_k = c->head_dim, d.head_dim_v = c->head_dim_v;
    const bool chunked = v->op == FCL_TUNING_RWKV6_CHUNKED || v->op == FCL_TUNING_RWKV6_BWD_CHUNKED;
    d.algorithm = chunked ? FCL_RWKV6_CHUNKED : FCL_RWKV6_RECURRENT;
    /* The step kernel runs on the shortest sequences (bucket 0) under AUTO;
     * fa-tune times it at the bucket's length, which its override lets it
     * run (launches of a few positions each). */
    if (v == &fcl_variant_rwkv6_step) d.seqlen = 1, d.algorithm = FCL_RWKV6_AUTO;
    fcl_rwkv6_problem p;
    fcl_variant_plan pl;
    fcl_rwkv6_problem_of(&d, c->dtype, &p);
    s = fcl_rwkv6_plan_make(
        ctx, &p, v->op == FCL_TUNING_RWKV6_BWD || v->op == FCL_TUNING_RWKV6_BWD_CHUNKED, &pl);
    *runs = s == FCL_OK && pl.cls.variant == v &&
            (v != &fcl_variant_rwkv6_step || c->bucket == 0);
  }
  return s;
}

fcl_status fcl_tuning_runs(fcl_context *ctx, const fcl_tuning_class *c, bool forced,
                           bool *runs) {
  fcl_status s = fcl_device_probe(ctx);
  *runs = false;
  if (s || !forced) return s ? s : plans(ctx, c, runs);
  fcl_config cfg;
  char params[160];
  fcl_tuning_defaults(ctx, c, &cfg);
  fcl_params_format(c->variant, &cfg, params, sizeof params);
  if ((s = fcl_tuning_override(ctx, c->variant, params))) return s;
  s = plans(ctx, c, runs);
  fcl_tuning_override(ctx, c->variant, NULL);
  if (s != FCL_OK) fcl_clear_error(ctx), s = FCL_OK; /* the defaults do not fit here */
  return s;
}
