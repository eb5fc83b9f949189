/* Per-context scratch memory and kernel-argument helpers. */
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
