/* Context options (fcl_context_set_option): settings of a context that
 * hold for every later call, range-checked. */
#include "core/core.h"

#include <inttypes.h>

/* value outside [lo, hi]: the error naming the option and what it takes. */
static bool out_of_range(fcl_context *ctx, int64_t value, int64_t lo, int64_t hi,
                         const char *option, const char *takes) {
  if (value >= lo && value <= hi) return false;
  fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "value: is %" PRId64 ", %s takes %s", value, option,
           takes);
  return true;
}

fcl_status fcl_context_set_option(fcl_context *ctx, fcl_option option, int64_t value) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  switch (option) {
  case FCL_OPTION_TIMING:
    if (out_of_range(ctx, value, 0, 1, "FCL_OPTION_TIMING", "0 or 1"))
      return FCL_ERROR_INVALID_ARGUMENT;
    if (value && !ctx->profiling)
      return fcl_fail(ctx, FCL_ERROR_UNSUPPORTED,
                      "option: FCL_OPTION_TIMING needs a queue created with "
                      "CL_QUEUE_PROFILING_ENABLE");
    ctx->timing = value != 0;
    return FCL_OK;
  case FCL_OPTION_PLAN_CACHE:
    if (out_of_range(ctx, value, 0, 4096, "FCL_OPTION_PLAN_CACHE", "0..4096"))
      return FCL_ERROR_INVALID_ARGUMENT;
    ctx->plan_cache = (int)value;
    fcl_plan_cache_clear(ctx);
    return FCL_OK;
  case FCL_OPTION_LOG:
    if (out_of_range(ctx, value, 0, 1, "FCL_OPTION_LOG", "0 or 1"))
      return FCL_ERROR_INVALID_ARGUMENT;
    ctx->opt.log = value != 0;
    return FCL_OK;
  case FCL_OPTION_RWKV6_ALGORITHM:
    if (out_of_range(ctx, value, FCL_RWKV6_AUTO, FCL_RWKV6_CHUNKED, "FCL_OPTION_RWKV6_ALGORITHM",
                     "an fcl_rwkv6_algorithm (0 auto, 1 recurrent, 2 chunked)"))
      return FCL_ERROR_INVALID_ARGUMENT;
    ctx->opt.rwkv6_algorithm = (int)value;
    fcl_plan_cache_clear(ctx); /* the cached plans chose by the old value */
    return FCL_OK;
  case FCL_OPTION_F32_PRECISION:
    if (out_of_range(ctx, value, FCL_F32_PRECISION_HIGHEST, FCL_F32_PRECISION_MEDIUM,
                     "FCL_OPTION_F32_PRECISION", "an fcl_f32_precision (0 highest, 1 high, 2 medium)"))
      return FCL_ERROR_INVALID_ARGUMENT;
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
