/* A public plan's launches recorded once into an OpenCL command buffer
 * (cl_khr_command_buffer) and enqueued as one command, where
 * FCL_COMMAND_BUFFER=1 asks for it and the device offers the extension:
 * one enqueue a run however many kernels the plan has, and no argument set
 * again (off by default: on PoCL it took more host time than the
 * launches, docs/api.md). Only public plans (fcl_*_plan) take one:
 * they hold the caller's buffers alive anyway, while the context's cache
 * of plans watches reference counts to see a buffer released, which a
 * command buffer holding its arguments would hide (buffer_refs.c).
 *
 * The entry points are taken from the platform with their 0.9 signatures,
 * which later revisions of the extension kept (the properties' type was
 * renamed); where one of them fails the plan replays its launches as
 * before, so a revision that differs elsewhere costs only the speed-up.
 * Each command waits on the one before it (sync points): in order, as the
 * plan's launches are on an in-order queue. */
#include "core/plan.h"

#ifdef __APPLE__
#include <OpenCL/cl_ext.h>
#else
#include <CL/cl_ext.h>
#endif

#include <stdlib.h>

#ifdef cl_khr_command_buffer
typedef cl_command_buffer_khr(CL_API_CALL *create_fn)(cl_uint, const cl_command_queue *,
                                                      const cl_command_buffer_properties_khr *,
                                                      cl_int *);
typedef cl_int(CL_API_CALL *buffer_fn)(cl_command_buffer_khr);
typedef cl_int(CL_API_CALL *enqueue_fn)(cl_uint, cl_command_queue *, cl_command_buffer_khr,
                                        cl_uint, const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *ndrange_fn)(cl_command_buffer_khr, cl_command_queue,
                                        const cl_ulong *, cl_kernel, cl_uint, const size_t *,
                                        const size_t *, const size_t *, cl_uint,
                                        const cl_sync_point_khr *, cl_sync_point_khr *,
                                        void *);

struct fcl_cmdbuf_api {
  create_fn  create;
  buffer_fn  finalize, release;
  enqueue_fn enqueue;
  ndrange_fn ndrange;
  bool       simultaneous; /* a buffer may be enqueued while one is pending */
};

/* The extension's entry points, and whether ctx's queue has the
 * properties a command buffer requires of it; NULL otherwise. */
static struct fcl_cmdbuf_api *load(fcl_context *ctx) {
  if (!ctx->info.has_command_buffer) return NULL;
  cl_command_queue_properties need = 0, have = 0;
  cl_device_command_buffer_capabilities_khr caps = 0;
  if (clGetDeviceInfo(ctx->device, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
                      sizeof need, &need, NULL) != CL_SUCCESS ||
      clGetDeviceInfo(ctx->device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, sizeof caps,
                      &caps, NULL) != CL_SUCCESS ||
      clGetCommandQueueInfo(ctx->queue, CL_QUEUE_PROPERTIES, sizeof have, &have, NULL) !=
          CL_SUCCESS ||
      (need & ~have))
    return NULL;
  struct fcl_cmdbuf_api a = {0};
#define ENTRY(field, type, name)                                                   \
  a.field = (type)clGetExtensionFunctionAddressForPlatform(ctx->platform, name)
  ENTRY(create, create_fn, "clCreateCommandBufferKHR");
  ENTRY(finalize, buffer_fn, "clFinalizeCommandBufferKHR");
  ENTRY(release, buffer_fn, "clReleaseCommandBufferKHR");
  ENTRY(enqueue, enqueue_fn, "clEnqueueCommandBufferKHR");
  ENTRY(ndrange, ndrange_fn, "clCommandNDRangeKernelKHR");
#undef ENTRY
  if (!a.create || !a.finalize || !a.release || !a.enqueue || !a.ndrange) return NULL;
  a.simultaneous = (caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR) != 0;
  struct fcl_cmdbuf_api *api = malloc(sizeof *api);
  if (api) *api = a;
  return api;
}

bool fcl_cmdbuf_available(fcl_context *ctx) {
  if (!ctx->cmdbuf_state) {
    ctx->cmdbuf = load(ctx);
    ctx->cmdbuf_state = ctx->cmdbuf ? 1 : -1;
    fcl_log(ctx, "command buffers (cl_khr_command_buffer) for plans: %s",
            ctx->cmdbuf ? (ctx->cmdbuf->simultaneous ? "yes" : "yes, one run pending at a time")
                        : "not offered");
  }
  return ctx->cmdbuf_state > 0;
}

void fcl_cmdbuf_free(fcl_context *ctx) {
  free(ctx->cmdbuf);
  ctx->cmdbuf = NULL;
  ctx->cmdbuf_state = 0;
}

void fcl_cmdbuf_record(fcl_context *ctx, fcl_plan *pl) {
  if (!ctx->opt.command_buffer || pl->ncmd == 0 || !fcl_cmdbuf_available(ctx)) return;
  for (int i = 0; i < pl->ncmd; ++i) /* kernels with fixed arguments only */
    if (!pl->cmd[i].k || pl->cmd[i].patch_len) return;
  const struct fcl_cmdbuf_api *a = ctx->cmdbuf;
  const cl_command_buffer_properties_khr props[] = {
      CL_COMMAND_BUFFER_FLAGS_KHR, CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, 0};
  cl_int err = CL_SUCCESS;
  cl_command_buffer_khr cb = a->create(1, &ctx->queue, a->simultaneous ? props : NULL, &err);
  if (!cb || err != CL_SUCCESS) {
    fcl_log(ctx, "command buffer not made (%s): the plan replays its launches",
            fcl_cl_error_name(err));
    return;
  }
  cl_sync_point_khr prev = 0;
  for (int i = 0; i < pl->ncmd && err == CL_SUCCESS; ++i) {
    const fcl_plan_cmd *c = &pl->cmd[i];
    cl_sync_point_khr sp = 0;
    err = a->ndrange(cb, NULL, NULL, c->k, 3, NULL, c->global, c->has_local ? c->local : NULL,
                     i ? 1 : 0, i ? &prev : NULL, &sp, NULL);
    prev = sp;
  }
  if (err == CL_SUCCESS) err = a->finalize(cb);
  if (err != CL_SUCCESS) {
    fcl_log(ctx, "command buffer not recorded (%s): the plan replays its launches",
            fcl_cl_error_name(err));
    a->release(cb);
    return;
  }
  pl->cb = cb;
}

bool fcl_cmdbuf_enqueue(fcl_context *ctx, const fcl_plan *pl) {
  if (!pl->cb || fcl_events_wanted(ctx)) return false;
  /* A buffer still pending from the run before, where the device does not
   * allow two at once, fails here: that run replays its launches. */
  return ctx->cmdbuf->enqueue(0, NULL, (cl_command_buffer_khr)pl->cb, 0, NULL, NULL) ==
         CL_SUCCESS;
}

void fcl_cmdbuf_release(fcl_context *ctx, fcl_plan *pl) {
  if (pl->cb && ctx->cmdbuf) ctx->cmdbuf->release((cl_command_buffer_khr)pl->cb);
  pl->cb = NULL;
}
#else /* headers without cl_khr_command_buffer: plans replay their launches */
bool fcl_cmdbuf_available(fcl_context *ctx) { return (void)ctx, false; }
void fcl_cmdbuf_free(fcl_context *ctx) { (void)ctx; }
void fcl_cmdbuf_record(fcl_context *ctx, fcl_plan *pl) { (void)ctx, (void)pl; }
bool fcl_cmdbuf_enqueue(fcl_context *ctx, const fcl_plan *pl) {
  return (void)ctx, (void)pl, false;
}
void fcl_cmdbuf_release(fcl_context *ctx, fcl_plan *pl) { (void)ctx, (void)pl; }
#endif
