/* Tuning classes of problems and the public queries of the configuration
 * an operation would use (fcl_attention_config, fcl_rwkv6_config). */
#include "attention.h"
#include "rwkv6.h"

#include <stdio.h>

void fcl_attention_class(const fcl_attention_desc *d, fcl_dtype dtype, bool backward,
                         fcl_tuning_class *cls) {
  cls->kernel = backward ? FCL_KERNEL_ATTN_BWD : FCL_KERNEL_ATTN_FWD;
  cls->dtype = dtype;
  cls->head_dim = (int)d->head_dim;
  cls->head_dim_v = (int)d->head_dim_v;
  cls->causal = d->causal != 0;
  cls->bucket = fcl_seqlen_bucket(d->seqlen_q > d->seqlen_k ? d->seqlen_q : d->seqlen_k);
}

void fcl_rwkv6_class(const fcl_rwkv6_desc *d, fcl_dtype dtype, fcl_kernel_id kernel,
                     fcl_tuning_class *cls) {
  cls->kernel = kernel;
  cls->dtype = dtype;
  cls->head_dim = (int)d->head_dim_k;
  cls->head_dim_v = (int)d->head_dim_v;
  cls->causal = 0;
  cls->bucket = fcl_seqlen_bucket(d->seqlen);
}

static fcl_status check_common(fcl_context *ctx, fcl_dtype dtype, fcl_config_info *out) {
  if (!out) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "out: is NULL");
  if (fcl_dtype_size(dtype) == 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "dtype: is %d, not a fcl_dtype",
                    (int)dtype);
  return fcl_device_probe(ctx);
}

fcl_status fcl_attention_config(fcl_context *ctx, const fcl_attention_desc *d,
                                fcl_dtype dtype, int backward, fcl_config_info *out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_status s;
  if ((s = fcl_check_attention_desc(ctx, d)) || (s = check_common(ctx, dtype, out)))
    return s;
  fcl_tuning_class cls;
  fcl_attention_class(d, dtype, backward != 0, &cls);
  bool fast = false;
  if (!backward && (s = fcl_attention_fast_applies(ctx, d, dtype, &fast))) return s;
  if (fast) cls.kernel = FCL_KERNEL_ATTN_FWD_MMA;
  else if (!backward && fcl_attention_cpu_applies(ctx)) cls.kernel = FCL_KERNEL_ATTN_FWD_CPU;
  int warps, block_n;
  if (backward && (s = fcl_attention_bwd_fast_applies(ctx, d, dtype, &fast))) return s;
  if (backward && fast &&
      fcl_attention_bwd_mma_blocks(ctx, (int)d->head_dim, (int)d->head_dim_v, &warps, &block_n)) {
    snprintf(out->kernel, sizeof out->kernel, "attention_bwd_mma");
    snprintf(out->params, sizeof out->params, "WARPS=%d,BLOCK_N=%d", warps, block_n);
    snprintf(out->source, sizeof out->source, "built-in (tensor cores; not tuned)");
    return FCL_OK;
  }
  _Alignas(16) unsigned char cfg[256];
  char from[512];
  if ((s = fcl_tuning_choose(ctx, &cls, cfg, from, sizeof from))) return s;
  fcl_config_info_fill(out, cls.kernel, cfg, from);
  return FCL_OK;
}

fcl_status fcl_rwkv6_config(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype,
                            int backward, fcl_config_info *out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_status s;
  if ((s = fcl_check_rwkv6_desc(ctx, d)) || (s = check_common(ctx, dtype, out))) return s;
  fcl_tuning_class cls;
  fcl_rwkv6_class(d, dtype,
                  backward ? FCL_KERNEL_RWKV6_BWD
                  : fcl_rwkv6_use_chunked(ctx, d, dtype) ? FCL_KERNEL_RWKV6_CHUNKED
                                                         : FCL_KERNEL_RWKV6_RECURRENT,
                  &cls);
  _Alignas(16) unsigned char cfg[256];
  char from[512];
  if ((s = fcl_tuning_choose(ctx, &cls, cfg, from, sizeof from))) return s;
  fcl_config_info_fill(out, cls.kernel, cfg, from);
  return FCL_OK;
}
