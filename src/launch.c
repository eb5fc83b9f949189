/* Kernel launches: per-context scratch memory, arguments and enqueueing. */
#include "internal.h"

fcl_status fcl_scratch(fcl_context *ctx, int slot, size_t bytes, cl_mem *out) {
  if (bytes == 0) bytes = 4;
  if (ctx->scratch[slot] && ctx->scratch_size[slot] >= bytes) {
    *out = ctx->scratch[slot];
    return FCL_OK;
  }
  /* Released buffers live on until the commands that use them complete. */
  cl_int err;
  cl_mem m = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "allocating scratch memory");
  if (ctx->scratch[slot]) clReleaseMemObject(ctx->scratch[slot]);
  ctx->scratch[slot] = m;
  ctx->scratch_size[slot] = bytes;
  *out = m;
  return FCL_OK;
}

void fcl_arg(fcl_args *a, size_t size, const void *value) {
  if (a->err == CL_SUCCESS) a->err = clSetKernelArg(a->k, a->i, size, value);
  a->i++;
}

fcl_status fcl_launch(fcl_context *ctx, cl_kernel k, const fcl_args *a,
                      const size_t global[3], const size_t local[3],
                      const char *what) {
  if (a && a->err != CL_SUCCESS) return fcl_fail_cl(ctx, a->err, "clSetKernelArg");
  /* An empty range (all varlen sequences empty) has nothing to do, and
   * OpenCL 1.2 rejects a zero global size. */
  if (global[0] == 0 || global[1] == 0 || global[2] == 0) return FCL_OK;
  cl_event ev = NULL;
  cl_int err = clEnqueueNDRangeKernel(ctx->queue, k, 3, NULL, global, local, 0, NULL,
                                      ctx->profiling ? &ev : NULL);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, what);
  if (ev) fcl_op_record(ctx, ev);
  return FCL_OK;
}
