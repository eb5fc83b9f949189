/* Status strings, OpenCL error names and the per-context error message. */
#include "core/core.h"

#include <stdio.h>
#include <string.h>

/* Where fcl_context_create* leaves its message: there is no context yet. */
static _Thread_local char create_message[FCL_MSG_MAX];

const char *fcl_status_string(fcl_status s) {
  switch (s) {
  case FCL_OK: return "ok";
  case FCL_ERROR_INVALID_ARGUMENT: return "invalid argument";
  case FCL_ERROR_UNSUPPORTED: return "unsupported";
  case FCL_ERROR_OPENCL: return "OpenCL error";
  case FCL_ERROR_BUILD: return "kernel build failed";
  case FCL_ERROR_OUT_OF_MEMORY: return "out of memory";
  case FCL_ERROR_NO_DEVICE: return "no matching OpenCL device";
  case FCL_ERROR_TUNING_DB: return "tuning database error";
  case FCL_ERROR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

unsigned    fcl_version_number(void) { return FCL_VERSION_NUMBER; }
const char *fcl_version_string(void) { return FCL_VERSION_STRING; }

size_t fcl_dtype_size(fcl_dtype t) {
  switch (t) {
  case FCL_F32: return 4;
  case FCL_F16:
  case FCL_BF16: return 2;
  case FCL_Q8_0: return 34;
  case FCL_Q4_0: return 18;
  case FCL_FP8_E4M3:
  case FCL_FP8_E5M2: return 1;
  }
  return 0;
}

const char *fcl_dtype_name(fcl_dtype t) {
  static const char *const names[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "fp8_e4m3",
                                      "fp8_e5m2"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

int64_t fcl_dtype_block(fcl_dtype t) {
  if (t == FCL_Q8_0 || t == FCL_Q4_0) return 32;
  return fcl_dtype_size(t) ? 1 : 0;
}

const char *fcl_context_last_error(const fcl_context *ctx) {
  return ctx ? ctx->message : create_message;
}

void fcl_clear_error(fcl_context *ctx) {
  if (ctx) ctx->message[0] = '\0';
  else create_message[0] = '\0';
}

fcl_status fcl_fail(fcl_context *ctx, fcl_status s, const char *fmt, ...) {
  char *buf = ctx ? ctx->message : create_message;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, FCL_MSG_MAX, fmt, ap);
  va_end(ap);
  if (ctx) fcl_log(ctx, "error (%s): %s", fcl_status_string(s), buf);
  return s;
}

const char *fcl_cl_error_name(cl_int err) {
  switch (err) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE)
    E(CL_COMPILER_NOT_AVAILABLE) E(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP)
    E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE)
    E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES)
    E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR) E(CL_INVALID_MEM_OBJECT)
    E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
    E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL_DEFINITION) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX)
    E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS)
    E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET)
    E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION)
    E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_GLOBAL_WORK_SIZE)
#undef E
  }
  return "unknown OpenCL error";
}

fcl_status fcl_fail_cl(fcl_context *ctx, cl_int err, const char *what) {
  fcl_status s = FCL_ERROR_OPENCL;
  if (err == CL_OUT_OF_HOST_MEMORY || err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
      err == CL_OUT_OF_RESOURCES)
    s = FCL_ERROR_OUT_OF_MEMORY;
  return fcl_fail(ctx, s, "%s failed: %s (%d)", what, fcl_cl_error_name(err),
                  (int)err);
}
