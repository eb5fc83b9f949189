/* Validation of strided tensor views and raw buffers against their sizes. */
#include "core/core.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

size_t fcl_buffer_size(cl_mem buf) {
  size_t size = 0;
  if (!buf || clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof size, &size, NULL) !=
                  CL_SUCCESS)
    return 0;
  return size;
}

bool fcl_tensor_aligned(const fcl_tensor *t, size_t esize, bool varlen, int64_t n) {
  const int64_t off = (int64_t)(t->offset / esize);
  return off % n == 0 && (varlen || t->strides[0] % n == 0) && t->strides[1] % n == 0 &&
         t->strides[2] % n == 0;
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
    if (st == INT64_MIN) return false; /* before negating it */
    int64_t mag = st < 0 ? -st : st;
    if (mag > INT64_MAX / n) return false;
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

/* A block format's view, which reaches values lo .. hi from its start:
 * whole blocks of bv values (es bytes), as its head vectors start at
 * multiples of bv and span whole blocks, from byte offset + lo / bv * es
 * up to offset + (hi + 1) / bv * es. */
static fcl_status check_blocks(fcl_context *ctx, const fcl_tensor *t,
                               const fcl_tensor_shape *shape, int64_t lo, int64_t hi,
                               size_t es, int64_t bv) {
  const int64_t before = lo / bv, blocks = (hi + 1) / bv; /* lo <= 0 < hi + 1 */
  const int64_t off = (int64_t)t->offset, size = (int64_t)fcl_buffer_size(t->buffer);
  if (before < -(off / (int64_t)es))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s.strides: negative strides reach %" PRId64
                    " blocks before the buffer", shape->name, -before - off / (int64_t)es);
  if (blocks > (size - off) / (int64_t)es || off > size)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s: the view (offset %zu bytes, shape [%" PRId64 ",%" PRId64
                    ",%" PRId64 ",%" PRId64 "], strides [%" PRId64 ",%" PRId64
                    ",%" PRId64 ",1], blocks of %" PRId64 " values in %zu bytes) ends "
                    "past its buffer of %zu bytes",
                    shape->name, t->offset, shape->dims[0], shape->dims[1], shape->dims[2],
                    shape->dims[3], t->strides[0], t->strides[1], t->strides[2], bv, es,
                    fcl_buffer_size(t->buffer));
  return FCL_OK;
}

static fcl_status check_tensor(fcl_context *ctx, const fcl_tensor *t,
                               const fcl_tensor_shape *shape, bool cache_format) {
  const char *name = shape->name;
  if (!t) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s: is NULL", name);
  const size_t es = fcl_dtype_size(t->dtype);
  if (es == 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s.dtype: unknown value %d",
                    name, (int)t->dtype);
  if (fcl_dtype_cache_format(t->dtype) && !cache_format)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s.dtype: is %s, a KV-cache format; %s must be f32, f16 or bf16", name,
                    fcl_dtype_name(t->dtype), name);
  /* Block formats: values in blocks of bv, a block es bytes. */
  const int64_t bv = fcl_dtype_block(t->dtype);
  if (!t->buffer)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s.buffer: is NULL", name);
  fcl_status s = check_same_context(ctx, t->buffer, name);
  if (s != FCL_OK) return s;
  if (t->strides[3] != 1)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s.strides[3]: is %" PRId64 ", must be 1", name, t->strides[3]);
  const size_t align = bv > 1 ? 2 : es; /* blocks: their f16 scale's */
  if (t->offset % align != 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s.offset: %zu is not a multiple of %s %zu", name, t->offset,
                    bv > 1 ? "2 (a block's f16 scale)" : "the element size", align);
  if (bv > 1) {
    if (shape->dims[3] % bv)
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                      "%s: its head dim %" PRId64 " is not a multiple of %" PRId64
                      " (the blocks of %s)", name, shape->dims[3], bv,
                      fcl_dtype_name(t->dtype));
    for (int i = 0; i < 3; ++i)
      if (t->strides[i] % bv)
        return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                        "%s.strides[%d]: %" PRId64 " is not a multiple of %" PRId64
                        " (a block of %s would straddle two head vectors)",
                        name, i, t->strides[i], bv, fcl_dtype_name(t->dtype));
  }
  for (int i = 0; i < 4; ++i)
    if (shape->dims[i] == 0) return FCL_OK; /* an empty view reaches nothing */
  int64_t lo, hi;
  if (!view_span(shape->dims, t->strides, &lo, &hi))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s.strides: the view's extent overflows 64 bits", name);
  if (bv > 1) return check_blocks(ctx, t, shape, lo, hi, es, bv);
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

fcl_status fcl_check_tensor(fcl_context *ctx, const fcl_tensor *t,
                            const fcl_tensor_shape *shape) {
  return check_tensor(ctx, t, shape, false);
}

fcl_status fcl_check_cu_seqlens(fcl_context *ctx, cl_mem buf, const int32_t *host,
                                const char *name, int64_t batch, int64_t max_len,
                                int64_t *total) {
  fcl_status s = fcl_check_buffer(ctx, buf, name, (size_t)(batch + 1) * 4);
  if (s != FCL_OK) return s;
  int32_t *cu = malloc((size_t)(batch + 1) * sizeof *cu);
  if (!cu) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "%s: host copy", name);
  if (host) {
    memcpy(cu, host, (size_t)(batch + 1) * sizeof *cu);
  } else {
    /* What the call does now depends on the buffer's contents: a cached
     * plan would not see them change. */
    fcl_plan_depends_on_device_data(ctx);
    cl_int err = clEnqueueReadBuffer(ctx->queue, buf, CL_TRUE, 0,
                                     (size_t)(batch + 1) * 4, cu, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
      free(cu);
      return fcl_fail_cl(ctx, err, "reading cu_seqlens");
    }
  }
  s = FCL_OK;
  if (cu[0] < 0)
    s = fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s[0]: is %d, must be >= 0",
                 name, (int)cu[0]);
  for (int64_t b = 0; b < batch && s == FCL_OK; ++b) {
    int64_t len = (int64_t)cu[b + 1] - cu[b];
    if (len < 0 || len > max_len)
      s = fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                   "%s: sequence %" PRId64 " has length %" PRId64
                   " (entries %d, %d), must be in 0..%" PRId64,
                   name, b, len, (int)cu[b], (int)cu[b + 1], max_len);
  }
  *total = cu[batch];
  free(cu);
  return s;
}

fcl_status fcl_check_view(fcl_context *ctx, const fcl_tensor *t,
                          const fcl_tensor_shape *shape, bool varlen,
                          const fcl_tensor *like, const char *like_name) {
  if (!t) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s: is NULL", shape->name);
  fcl_tensor view = *t;
  if (varlen) view.strides[0] = 0; /* ignored: tokens are indexed by dim 1 */
  fcl_status s = fcl_check_tensor(ctx, &view, shape);
  if (s == FCL_OK && like && t->dtype != like->dtype)
    s = fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                 "%s.dtype: is %d but %s.dtype is %d; they must match", shape->name,
                 (int)t->dtype, like_name, (int)like->dtype);
  return s;
}

fcl_status fcl_check_cache_view(fcl_context *ctx, const fcl_tensor *t,
                                const fcl_tensor_shape *shape, const fcl_tensor *like,
                                const char *like_name) {
  if (!t) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "%s: is NULL", shape->name);
  fcl_status s = check_tensor(ctx, t, shape, true);
  if (s == FCL_OK && t->dtype != like->dtype && !fcl_dtype_cache_format(t->dtype))
    s = fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                 "%s.dtype: is %s but %s.dtype is %s; a cache holds its queries' dtype "
                 "or a KV-cache format (q8_0, q4_0, fp8_e4m3, fp8_e5m2)",
                 shape->name, fcl_dtype_name(t->dtype), like_name,
                 fcl_dtype_name(like->dtype));
  return s;
}
