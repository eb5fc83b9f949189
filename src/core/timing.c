/* Device time of an operation, from the profiling events of its first and
 * last kernels (only those two are kept). */
#include "core/core.h"

void fcl_op_release(fcl_context *ctx) {
  if (ctx->op_first) clReleaseEvent(ctx->op_first);
  if (ctx->op_last) clReleaseEvent(ctx->op_last);
  ctx->op_first = ctx->op_last = NULL;
}

void fcl_op_begin(fcl_context *ctx) { fcl_op_release(ctx); }

void fcl_op_record(fcl_context *ctx, cl_event ev) {
  if (!ctx->op_first) {
    ctx->op_first = ev;
    return;
  }
  if (ctx->op_last) clReleaseEvent(ctx->op_last);
  ctx->op_last = ev;
}

fcl_status fcl_context_last_op_time(fcl_context *ctx, double *ms) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  if (!ms) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "ms: is NULL");
  if (!ctx->profiling)
    return fcl_fail(ctx, FCL_ERROR_UNSUPPORTED,
                    "queue: created without CL_QUEUE_PROFILING_ENABLE");
  *ms = 0;
  if (!ctx->op_first) return FCL_OK;
  cl_event last = ctx->op_last ? ctx->op_last : ctx->op_first;
  cl_int err = clWaitForEvents(1, &last);
  cl_ulong start = 0, end = 0;
  if (err == CL_SUCCESS)
    err = clGetEventProfilingInfo(ctx->op_first, CL_PROFILING_COMMAND_START,
                                  sizeof start, &start, NULL);
  if (err == CL_SUCCESS)
    err = clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof end,
                                  &end, NULL);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "reading profiling events");
  *ms = end > start ? (double)(end - start) * 1e-6 : 0.0;
  return FCL_OK;
}
