/* Device time of an operation, from the profiling events of its first and
 * last kernels (only those two are kept), and FCL_TRACE's timeline of its
 * kernels. */
#include "core/core.h"

#include <stdio.h>

bool fcl_events_wanted(const fcl_context *ctx) {
  return ctx->profiling && (ctx->timing || ctx->opt.trace);
}

void fcl_op_trace(fcl_context *ctx, cl_kernel k, cl_event ev, const size_t global[3],
                  const size_t local[3]) {
  if (ctx->trace_n == FCL_TRACE_MAX) {
    ctx->trace_dropped++;
    return;
  }
  struct fcl_trace_entry *e = &ctx->trace[ctx->trace_n];
  if (clRetainEvent(ev) != CL_SUCCESS) return;
  ctx->trace_n++;
  e->ev = ev;
  snprintf(e->name, sizeof e->name, "?");
  clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof e->name, e->name, NULL);
  for (int i = 0; i < 3; ++i) e->global[i] = global[i], e->local[i] = local ? local[i] : 0;
}

/* One line a kernel: its start after the operation's first kernel began,
 * its device time and the idle time since the kernel before it ended. The
 * kernels run as they would untraced; this waits for the last only when the
 * next operation begins (or the context goes). */
static void print_trace(fcl_context *ctx) {
  const int n = ctx->trace_n;
  cl_ulong t0 = 0, prev_end = 0;
  if (clWaitForEvents(1, &ctx->trace[n - 1].ev) != CL_SUCCESS) return;
  for (int i = 0; i < n; ++i) {
    const struct fcl_trace_entry *e = &ctx->trace[i];
    cl_ulong s = 0, t = 0;
    if (clGetEventProfilingInfo(e->ev, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) ||
        clGetEventProfilingInfo(e->ev, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL))
      return;
    if (i == 0) t0 = prev_end = s;
    fprintf(stderr,
            "[flashcl trace] %-32s %9.3f ms  at %9.3f  idle before %7.3f  global %zu,%zu,%zu "
            "local %zu,%zu,%zu\n",
            e->name, (double)(t - s) * 1e-6, (double)(s - t0) * 1e-6,
            s > prev_end ? (double)(s - prev_end) * 1e-6 : 0.0, e->global[0], e->global[1],
            e->global[2], e->local[0], e->local[1], e->local[2]);
    prev_end = t;
  }
  if (ctx->trace_dropped)
    fprintf(stderr, "[flashcl trace] (%d more kernels not shown)\n", ctx->trace_dropped);
}

void fcl_op_release(fcl_context *ctx) {
  if (ctx->trace_n) {
    print_trace(ctx);
    for (int i = 0; i < ctx->trace_n; ++i) clReleaseEvent(ctx->trace[i].ev);
    ctx->trace_n = ctx->trace_dropped = 0;
  }
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
  if (!fcl_events_wanted(ctx))
    return fcl_fail(ctx, FCL_ERROR_UNSUPPORTED,
                    "ctx: timing is off; fcl_context_set_option(ctx, FCL_OPTION_TIMING, 1) "
                    "keeps the operations' events");
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
