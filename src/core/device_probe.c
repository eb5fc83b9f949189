/* Device facts that only a built kernel reveals, read once per context. */
#include "core/core.h"

fcl_status fcl_device_probe(fcl_context *ctx) {
  if (ctx->info.preferred_multiple) return FCL_OK;
  cl_kernel  k;
  fcl_status s = fcl_get_kernel(ctx, FCL_TOPS("common/probe.cl"), "", "fcl_probe", &k);
  if (s != FCL_OK) return s;
  size_t m = 0;
  cl_int err = clGetKernelWorkGroupInfo(k, ctx->device,
                                        CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                        sizeof m, &m, NULL);
  ctx->info.preferred_multiple = (err == CL_SUCCESS && m > 0) ? m : 1;
  fcl_log(ctx, "device: preferred work-group multiple %zu", ctx->info.preferred_multiple);
  return FCL_OK;
}
