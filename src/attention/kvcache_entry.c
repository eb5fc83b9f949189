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

fcl_status fcl_attention_kvcache(fcl_context *ctx, const fcl_kvcache_desc *d,
                                 const fcl_tensor *q, const fcl_tensor *k_cache,
                                 const fcl_tensor *v_cache, const fcl_tensor *k_new,
                                 const fcl_tensor *v_new, const fcl_tensor *o, cl_mem lse) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_op_begin(ctx);
  fcl_kvcache_problem p;
  fcl_status s;
  if ((s = fcl_check_kvcache(ctx, d, q, k_cache, v_cache, k_new, v_new, o, lse, &p)) ||
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
