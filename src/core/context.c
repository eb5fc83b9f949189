/* Contexts: device, OpenCL context and in-order queue, and the programs
 * built for them. */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

static fcl_status new_context(const fcl_options *opt, cl_platform_id p, cl_device_id d,
                              fcl_context **out) {
  fcl_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx)
    return fcl_fail(NULL, FCL_ERROR_OUT_OF_MEMORY, "out: cannot allocate a context");
  ctx->platform = p;
  ctx->device = d;
  ctx->opt = *opt;
  ctx->plan_cache = 256;
  fcl_read_device_info(p, d, opt, &ctx->info);
  *out = ctx;
  return FCL_OK;
}

static void log_device(const fcl_context *ctx) {
  const fcl_device_info *i = &ctx->info;
  fcl_log(ctx, "device: %s (%s; %u compute units, local memory %llu B, "
          "max work-group %zu%s)", i->label, i->platform_version,
          i->compute_units, (unsigned long long)i->local_mem, i->max_wg,
          i->has_subgroups ? ", subgroups" : "");
  if (!ctx->opt.cache_dir[0])
    fcl_log(ctx, "program cache: off (FCL_CACHE=0 or no cache directory)");
  else if (i->driver_caches_binaries && !ctx->opt.cache_forced)
    fcl_log(ctx, "program cache: off, the driver keeps compiled kernels itself "
            "(FCL_CACHE=1 turns it on)");
  else
    fcl_log(ctx, "program cache: %s", ctx->opt.cache_dir);
}

fcl_status fcl_context_create(const char *device, fcl_context **out) {
  fcl_clear_error(NULL);
  if (!out) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "out: is NULL");
  *out = NULL;
  fcl_options opt;
  fcl_options_read(&opt);
  cl_platform_id p;
  cl_device_id   d;
  fcl_status     s = fcl_select_device(device, &opt, &p, &d);
  if (s != FCL_OK) return s;
  fcl_context *ctx = NULL;
  if ((s = new_context(&opt, p, d, &ctx)) != FCL_OK) return s;

  cl_int err;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   (cl_context_properties)p, 0};
  ctx->cl_ctx = clCreateContext(props, 1, &d, NULL, NULL, &err);
  if (err != CL_SUCCESS) {
    s = fcl_fail_cl(NULL, err, "clCreateContext");
    fcl_context_destroy(ctx);
    return s;
  }
  /* Profiling on: fcl_context_last_op_time(), fa-bench and fa-tune. */
  ctx->queue = clCreateCommandQueue(ctx->cl_ctx, d, CL_QUEUE_PROFILING_ENABLE, &err);
  ctx->profiling = true;
  if (err != CL_SUCCESS) {
    s = fcl_fail_cl(NULL, err, "clCreateCommandQueue");
    fcl_context_destroy(ctx);
    return s;
  }
  log_device(ctx);
  *out = ctx;
  return FCL_OK;
}

fcl_status fcl_context_create_from_queue(cl_command_queue queue,
                                         fcl_context **out) {
  fcl_clear_error(NULL);
  if (!out) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "out: is NULL");
  *out = NULL;
  if (!queue) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "queue: is NULL");
  cl_device_id   d;
  cl_context     c;
  cl_platform_id p;
  cl_command_queue_properties qp = 0;
  cl_int err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof d, &d, NULL);
  if (err == CL_SUCCESS)
    err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof c, &c, NULL);
  if (err == CL_SUCCESS)
    err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof qp, &qp, NULL);
  if (err == CL_SUCCESS)
    err = clGetDeviceInfo(d, CL_DEVICE_PLATFORM, sizeof p, &p, NULL);
  if (err != CL_SUCCESS)
    return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT,
                    "queue: not a valid command queue (%s)", fcl_cl_error_name(err));
  if (qp & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return fcl_fail(NULL, FCL_ERROR_UNSUPPORTED,
                    "queue: is out-of-order; flashcl needs an in-order queue");
  fcl_options opt;
  fcl_options_read(&opt);
  fcl_context *ctx = NULL;
  fcl_status   s = new_context(&opt, p, d, &ctx);
  if (s != FCL_OK) return s;
  clRetainContext(c);
  clRetainCommandQueue(queue);
  ctx->cl_ctx = c;
  ctx->queue = queue;
  ctx->profiling = (qp & CL_QUEUE_PROFILING_ENABLE) != 0;
  log_device(ctx);
  *out = ctx;
  return FCL_OK;
}

void fcl_context_destroy(fcl_context *ctx) {
  if (!ctx) return;
  if (ctx->queue) clFinish(ctx->queue);
  fcl_op_release(ctx);
  fcl_plan_cache_clear(ctx);
  fcl_refs_free(ctx->refs);
  fcl_cmdbuf_free(ctx);
  if (ctx->tuning && ctx->tuning_free) ctx->tuning_free(ctx->tuning);
  fcl_release_programs(ctx);
  for (int i = 0; i < (int)FCL_COUNT(ctx->scratch); ++i)
    if (ctx->scratch[i]) clReleaseMemObject(ctx->scratch[i]);
  if (ctx->counters) clReleaseMemObject(ctx->counters);
  if (ctx->probe_mem) clReleaseMemObject(ctx->probe_mem);
  if (ctx->queue) clReleaseCommandQueue(ctx->queue);
  if (ctx->cl_ctx) clReleaseContext(ctx->cl_ctx);
  free(ctx);
}

cl_context fcl_context_cl(const fcl_context *ctx) { return ctx ? ctx->cl_ctx : NULL; }
cl_command_queue fcl_context_queue(const fcl_context *ctx) {
  return ctx ? ctx->queue : NULL;
}
const char *fcl_context_device_name(const fcl_context *ctx) {
  return ctx ? ctx->info.label : "";
}

fcl_status fcl_context_get_stats(const fcl_context *ctx, fcl_context_stats *out) {
  if (!ctx || !out) return FCL_ERROR_INVALID_ARGUMENT;
  *out = ctx->stats;
  return FCL_OK;
}
