/* Validation of strided tensor views and raw buffers against their sizes. */
#include "internal.h"

#include <inttypes.h>

size_t fcl_buffer_size(cl_mem buf) {
  size_t size = 0;
  if (!buf || clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof size, &size, NULL) !=
                  CL_SUCCESS)
    return 0;
  return size;
}

static fcl_status check_same_context(fcl_context *ctx, cl_mem buf,
                                     const char *name) {
  cl_context c = NULL;
  if (clGetMemObjectInfo(buf, CL_MEM_CONTEXT, sizeof c, &c, NULL) != CL_SUCCESS)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s: is not a valid cl_mem", name);
  if (c != ctx->cl_ctx)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s: belongs to another OpenCL context", name);
  return FCL_OK;
}

fcl_status fcl_check_buffer(fcl_context *ctx, cl_mem buf, const char *name,
                            size_t bytes_needed) {
  if (!buf) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s: is NULL", name);
  fcl_status s = check_same_context(ctx, buf, name);
  if (s != FCL_OK) return s;
  size_t have = fcl_buffer_size(buf);
  if (have < bytes_needed)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s: buffer holds %zu bytes, %zu needed", name, have,
                    bytes_needed);
  return FCL_OK;
}

/* The lowest and highest element offsets a view reaches, relative to its
 * offset; false on 64-bit overflow. */
static bool view_span(const int64_t *dims, const int64_t *strides, int64_t *lo,
                      int64_t *hi) {
  int64_t a = 0, b = 0;
  for (int i = 0; i < 4; ++i) {
    if (dims[i] <= 1 || strides[i] == 0) continue;
    int64_t n = dims[i] - 1, st = strides[i];
    int64_t mag = st < 0 ? -st : st;
    if (st == INT64_MIN || mag > INT64_MAX / n) return false;
    int64_t reach = mag * n;
    if (st > 0) {
      if (b > INT64_MAX - reach) return false;
      b += reach;
    } else {
      if (a < INT64_MIN + reach) return false;
      a -= reach;
    }
  }
  *lo = a;
  *hi = b;
  return true;
}

fcl_status fcl_check_tensor(fcl_context *ctx, const fcl_tensor *t,
                            const fcl_tensor_shape *shape) {
  const char *name = shape->name;
  if (!t) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s: is NULL", name);
  size_t es = fcl_dtype_size(t->dtype);
  if (es == 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s.dtype: unknown value %d",
                    name, (int)t->dtype);
  if (!t->buffer)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s.buffer: is NULL", name);
  fcl_status s = check_same_context(ctx, t->buffer, name);
  if (s != FCL_OK) return s;
  if (t->strides[3] != 1)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s.strides[3]: is %" PRId64 ", must be 1", name, t->strides[3]);
  if (t->offset % es != 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s.offset: %zu is not a multiple of the element size %zu",
                    name, t->offset, es);
  int64_t lo, hi;
  if (!view_span(shape->dims, t->strides, &lo, &hi))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s.strides: the view's extent overflows 64 bits", name);
  const int64_t first = (int64_t)(t->offset / es);
  const size_t  have = fcl_buffer_size(t->buffer) / es;
  if (first + lo < 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s.strides: negative strides reach %" PRId64
                    " elements before the buffer", name, -(first + lo));
  if (hi > INT64_MAX - first - 1 || (uint64_t)(first + hi + 1) > (uint64_t)have)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s: the view (offset %zu bytes, shape [%" PRId64 ",%" PRId64
                    ",%" PRId64 ",%" PRId64 "], strides [%" PRId64 ",%" PRId64
                    ",%" PRId64 ",1]) ends past its buffer of %zu bytes",
                    name, t->offset, shape->dims[0], shape->dims[1],
                    shape->dims[2], shape->dims[3], t->strides[0], t->strides[1],
                    t->strides[2], fcl_buffer_size(t->buffer));
  return FCL_OK;
}
