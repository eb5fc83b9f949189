/* Context options (fcl_context_set_option): settings of a context that
 * hold for every later call, range-checked. */
#include "core/core.h"

#include <inttypes.h>

fcl_status fcl_context_set_option(fcl_context *ctx, fcl_option option, int64_t value) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  switch (option) {
  case FCL_OPTION_TIMING:
    if (value != 0 && value != 1)
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                      "value: is %" PRId64 ", FCL_OPTION_TIMING takes 0 or 1", value);
    if (value && !ctx->profiling)
      return fcl_fail(ctx, FCL_ERROR_UNSUPPORTED,
                      "option: FCL_OPTION_TIMING needs a queue created with "
                      "CL_QUEUE_PROFILING_ENABLE");
    ctx->timing = value != 0;
    return FCL_OK;
  case FCL_OPTION_PLAN_CACHE:
    if (value < 0 || value > 4096)
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                      "value: is %" PRId64 ", FCL_OPTION_PLAN_CACHE takes 0..4096", value);
    ctx->plan_cache = (int)value;
    fcl_plan_cache_clear(ctx);
    return FCL_OK;
  case FCL_OPTION_LOG:
    if (value != 0 && value != 1)
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                      "value: is %" PRId64 ", FCL_OPTION_LOG takes 0 or 1", value);
    ctx->opt.log = value != 0;
    return FCL_OK;
  case FCL_OPTION_RWKV6_ALGORITHM:
    if (value < FCL_RWKV6_AUTO || value > FCL_RWKV6_CHUNKED)
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                      "value: is %" PRId64 ", FCL_OPTION_RWKV6_ALGORITHM takes an "
                      "fcl_rwkv6_algorithm (0 auto, 1 recurrent, 2 chunked)", value);
    ctx->opt.rwkv6_algorithm = (int)value;
    fcl_plan_cache_clear(ctx); /* the cached plans chose by the old value */
    return FCL_OK;
  case FCL_OPTION_F32_PRECISION:
    if (value < FCL_F32_PRECISION_HIGHEST || value > FCL_F32_PRECISION_MEDIUM)
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                      "value: is %" PRId64 ", FCL_OPTION_F32_PRECISION takes an "
                      "fcl_f32_precision (0 highest, 1 high, 2 medium)", value);
    ctx->opt.f32_precision = (int)value;
    fcl_plan_cache_clear(ctx); /* their kernels were built for the old value */
    return FCL_OK;
  }
  return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "option: is %d, not a fcl_option",
                  (int)option);
}

fcl_status fcl_context_get_option(const fcl_context *ctx, fcl_option option, int64_t *value) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  if (!value) return FCL_ERROR_INVALID_ARGUMENT;
  switch (option) {
  case FCL_OPTION_TIMING: *value = ctx->timing; return FCL_OK;
  case FCL_OPTION_PLAN_CACHE: *value = ctx->plan_cache; return FCL_OK;
  case FCL_OPTION_LOG: *value = ctx->opt.log; return FCL_OK;
  case FCL_OPTION_RWKV6_ALGORITHM: *value = ctx->opt.rwkv6_algorithm; return FCL_OK;
  case FCL_OPTION_F32_PRECISION: *value = ctx->opt.f32_precision; return FCL_OK;
  }
  return FCL_ERROR_INVALID_ARGUMENT;
}
