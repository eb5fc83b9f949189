/* Kernel launches: per-context scratch memory, arguments and enqueueing. */
#include "core/core.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t fcl_bytes(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  const int64_t f[5] = {a, b, c, d, e};
  size_t p = 1;
  for (int i = 0; i < 5; ++i) {
    if (f[i] < 0) return SIZE_MAX;
    if (f[i] != 0 && p > SIZE_MAX / (uint64_t)f[i]) return SIZE_MAX;
    p *= (size_t)f[i];
  }
  return p;
}

fcl_status fcl_scratch(fcl_context *ctx, int slot, size_t bytes, cl_mem *out) {
  if (bytes == 0) bytes = 4;
  if (ctx->scratch[slot] && ctx->scratch_size[slot] >= bytes) {
    *out = ctx->scratch[slot];
    return fcl_plan_hold(ctx, *out);
  }
  /* clCreateBuffer reports a size above the device's limit as
   * CL_INVALID_BUFFER_SIZE; for the caller it is memory the device lacks. */
  if ((ctx->info.max_alloc && bytes > ctx->info.max_alloc) ||
      (ctx->info.global_mem && bytes > ctx->info.global_mem))
    return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY,
                    "this problem needs %.4g bytes of scratch memory in one buffer; the "
                    "device allows %llu per buffer (%llu in all)",
                    bytes == SIZE_MAX ? 0x1p64 : (double)bytes,
                    (unsigned long long)ctx->info.max_alloc,
                    (unsigned long long)ctx->info.global_mem);
  /* Released buffers live on until the commands that use them complete. */
  cl_int err;
  cl_mem m = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err == CL_INVALID_BUFFER_SIZE)
    return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY,
                    "allocating %zu bytes of scratch memory failed: %s", bytes,
                    fcl_cl_error_name(err));
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "allocating scratch memory");
  if (ctx->scratch[slot]) clReleaseMemObject(ctx->scratch[slot]);
  ctx->scratch[slot] = m;
  ctx->scratch_size[slot] = bytes;
  *out = m;
  return fcl_plan_hold(ctx, m);
}

fcl_status fcl_counters(fcl_context *ctx, size_t n, cl_mem *out) {
  if (n == 0) n = 1;
  if (ctx->counters && ctx->counters_size >= n) {
    *out = ctx->counters;
    return fcl_plan_hold(ctx, *out);
  }
  if (n > (size_t)1 << 28)
    return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "%zu counters are too many", n);
  cl_int *zeros = calloc(n, sizeof *zeros);
  if (!zeros) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "allocating %zu counters", n);
  cl_int err;
  cl_mem m = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                            n * sizeof *zeros, zeros, &err);
  free(zeros);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "allocating counters");
  if (ctx->counters) clReleaseMemObject(ctx->counters);
  ctx->counters = m;
  ctx->counters_size = n;
  *out = m;
  return fcl_plan_hold(ctx, m);
}

void fcl_tensor_view(const fcl_tensor *t, cl_long view[4]) {
  view[0] = (cl_long)(fcl_dtype_block(t->dtype) > 1 ? t->offset
                                                     : t->offset / fcl_dtype_size(t->dtype));
  for (int j = 0; j < 3; ++j) view[j + 1] = t->strides[j];
}

void fcl_arg_tensor(fcl_args *a, const fcl_tensor *t) {
  cl_long view[4];
  fcl_tensor_view(t, view);
  for (int j = 0; j < 4; ++j) FCL_ARG(a, view[j]);
}

void fcl_arg_kind(fcl_args *a, size_t size, const void *value, bool mem) {
  if (a->err == CL_SUCCESS) a->err = clSetKernelArg(a->k, a->i, size, value);
  if (a->i < FCL_MAX_ARGS && value && size <= sizeof a->value[0]) {
    a->size[a->i] = (unsigned char)size;
    a->mem[a->i] = mem;
    a->value[a->i] = 0;
    memcpy(&a->value[a->i], value, size);
  } else {
    a->unrecordable = true;
  }
  a->i++;
}

void fcl_arg_struct(fcl_args *a, size_t size, const void *value) {
  if (a->err == CL_SUCCESS) a->err = clSetKernelArg(a->k, a->i, size, value);
  if (a->i < FCL_MAX_ARGS && !a->has_struct && size <= sizeof a->struct_value) {
    a->size[a->i] = 0;
    a->has_struct = true, a->struct_at = a->i, a->struct_size = size;
    memcpy(a->struct_value, value, size);
  } else {
    a->unrecordable = true;
  }
  a->i++;
}

fcl_status fcl_launch(fcl_context *ctx, cl_kernel k, const fcl_args *a,
                      const size_t global[3], const size_t local[3],
                      const char *what) {
  if (a && a->err != CL_SUCCESS) return fcl_fail_cl(ctx, a->err, "clSetKernelArg");
  /* An empty range (all varlen sequences empty) has nothing to do, and
   * OpenCL 1.2 rejects a zero global size. */
  if (global[0] == 0 || global[1] == 0 || global[2] == 0 || ctx->dry_run) return FCL_OK;
  fcl_status s;
  if (ctx->rec && (s = fcl_plan_record_kernel(ctx, k, a, global, local, &k))) return s;
  if (ctx->rec && !ctx->rec_enqueue) return FCL_OK;
  cl_event ev = NULL;
  cl_int err = clEnqueueNDRangeKernel(ctx->queue, k, 3, NULL, global, local, 0, NULL,
                                      fcl_events_wanted(ctx) ? &ev : NULL);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, what);
  if (ev && ctx->opt.trace) fcl_op_trace(ctx, k, ev, global, local);
  if (ev) fcl_op_record(ctx, ev);
  return FCL_OK;
}

fcl_status fcl_enqueue_zero(fcl_context *ctx, cl_mem buf, size_t bytes, const char *what) {
  if (bytes == 0 || ctx->dry_run) return FCL_OK;
  fcl_status s;
  if (ctx->rec && (s = fcl_plan_record_zero(ctx, buf, bytes))) return s;
  if (ctx->rec && !ctx->rec_enqueue) return FCL_OK;
  const cl_int zero = 0;
  cl_event ev = NULL;
  cl_int err = clEnqueueFillBuffer(ctx->queue, buf, &zero, sizeof zero, 0, bytes, 0, NULL,
                                   fcl_events_wanted(ctx) ? &ev : NULL);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, what);
  if (ev) fcl_op_record(ctx, ev);
  return FCL_OK;
}
