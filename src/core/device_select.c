/* Device selection ("P:D", name substrings, defaults) and device facts. */
#include "core/core.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLATFORMS 16
#define MAX_DEVICES 64

bool fcl_str_icontains(const char *haystack, const char *needle) {
  size_t n = strlen(needle);
  if (n == 0) return false;
  for (const char *h = haystack; *h; ++h) {
    size_t i = 0;
    while (i < n && h[i] &&
           tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i]))
      ++i;
    if (i == n) return true;
  }
  return false;
}

static void platform_str(cl_platform_id p, cl_platform_info what, char *buf,
                         size_t n) {
  buf[0] = '\0';
  if (clGetPlatformInfo(p, what, n, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
  buf[n - 1] = '\0';
}

static void device_str(cl_device_id d, cl_device_info what, char *buf,
                       size_t n) {
  buf[0] = '\0';
  if (clGetDeviceInfo(d, what, n, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
  buf[n - 1] = '\0';
}

void fcl_read_device_info(cl_platform_id p, cl_device_id d, const fcl_options *opt,
                          fcl_device_info *info) {
  memset(info, 0, sizeof *info);
  platform_str(p, CL_PLATFORM_NAME, info->platform_name, sizeof info->platform_name);
  platform_str(p, CL_PLATFORM_VERSION, info->platform_version,
               sizeof info->platform_version);
  device_str(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
  device_str(d, CL_DEVICE_NAME, info->device_name, sizeof info->device_name);
  device_str(d, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);
  snprintf(info->label, sizeof info->label, "%s / %s / %s", info->platform_name,
           info->device_name, info->driver_version);
  clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof info->type, &info->type, NULL);
  clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof info->local_mem,
                  &info->local_mem, NULL);
  clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof info->global_mem,
                  &info->global_mem, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof info->max_alloc,
                  &info->max_alloc, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof info->max_wg,
                  &info->max_wg, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof info->compute_units,
                  &info->compute_units, NULL);
  clGetDeviceInfo(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof info->native_float_width,
                  &info->native_float_width, NULL);
  size_t ext_size = 0;
  if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_size) == CL_SUCCESS &&
      ext_size > 0) {
    char *ext = malloc(ext_size + 1);
    if (ext && clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, ext_size, ext, NULL) ==
                   CL_SUCCESS) {
      ext[ext_size] = '\0';
      info->has_subgroups = strstr(ext, "cl_khr_subgroups") ||
                            strstr(ext, "cl_intel_subgroups");
      info->has_command_buffer = strstr(ext, "cl_khr_command_buffer") != NULL;
      cl_uint major = 0, minor = 0; /* CL_DEVICE_COMPUTE_CAPABILITY_{MAJOR,MINOR}_NV */
      if (strstr(ext, "cl_nv_device_attribute_query") &&
          clGetDeviceInfo(d, 0x4000, sizeof major, &major, NULL) == CL_SUCCESS &&
          clGetDeviceInfo(d, 0x4001, sizeof minor, &minor, NULL) == CL_SUCCESS)
        info->nv_sm = (int)(10 * major + minor);
    }
    free(ext);
  }
  info->is_nvidia = fcl_str_icontains(info->vendor, "nvidia");
  info->is_amd = fcl_str_icontains(info->vendor, "advanced micro devices") ||
                 fcl_str_icontains(info->vendor, "amd");
  info->is_intel = fcl_str_icontains(info->vendor, "intel");
  info->is_cpu = (info->type & CL_DEVICE_TYPE_CPU) != 0;
  info->is_llvmpipe = fcl_str_icontains(info->device_name, "llvmpipe");
  info->driver_caches_binaries =
      fcl_str_icontains(info->platform_name, "Portable Computing Language") ||
      fcl_str_icontains(info->platform_version, "pocl") ||
      fcl_str_icontains(info->platform_name, "rusticl");
  info->loop_budget = info->is_llvmpipe ? 65535 : 0;
  if (opt && opt->loop_budget >= 0) info->loop_budget = opt->loop_budget; /* testing splits */
  info->mma_emulate = opt && opt->mma_emulate;
}

typedef struct {
  cl_platform_id platform;
  cl_device_id   device;
  int            pi, di;
  cl_device_type type;
} candidate;

static int enumerate(candidate *out, int max) {
  cl_platform_id plats[MAX_PLATFORMS];
  cl_uint        np = 0;
  if (clGetPlatformIDs(MAX_PLATFORMS, plats, &np) != CL_SUCCESS) return 0;
  if (np > MAX_PLATFORMS) np = MAX_PLATFORMS;
  int n = 0;
  for (cl_uint p = 0; p < np; ++p) {
    cl_device_id devs[MAX_DEVICES];
    cl_uint      nd = 0;
    /* A platform without devices (Clover, rusticl unconfigured) is skipped. */
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd) !=
        CL_SUCCESS)
      continue;
    if (nd > MAX_DEVICES) nd = MAX_DEVICES;
    for (cl_uint d = 0; d < nd && n < max; ++d) {
      out[n].platform = plats[p];
      out[n].device = devs[d];
      out[n].pi = (int)p;
      out[n].di = (int)d;
      out[n].type = 0;
      clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof out[n].type, &out[n].type, NULL);
      ++n;
    }
  }
  return n;
}

static bool parse_index_pair(const char *s, int *p, int *d) {
  char *end;
  long  a = strtol(s, &end, 10);
  if (end == s || *end != ':') return false;
  const char *t = end + 1;
  long        b = strtol(t, &end, 10);
  if (end == t || *end != '\0' || a < 0 || b < 0) return false;
  *p = (int)a;
  *d = (int)b;
  return true;
}

static bool matches(const candidate *c, const char *sel) {
  fcl_device_info info;
  fcl_read_device_info(c->platform, c->device, NULL, &info);
  return fcl_str_icontains(info.platform_name, sel) ||
         fcl_str_icontains(info.platform_version, sel) ||
         fcl_str_icontains(info.vendor, sel) ||
         fcl_str_icontains(info.device_name, sel);
}

/* Among candidates accepted by the selector, the first GPU, else the first. */
fcl_status fcl_select_device(const char *selector, const fcl_options *opt,
                             cl_platform_id *platform, cl_device_id *device) {
  candidate all[MAX_PLATFORMS * 4];
  int       n = enumerate(all, (int)FCL_COUNT(all));
  const char *sel = selector;
  const char *origin = "argument";
  if (!sel || !*sel) {
    sel = opt->device;
    origin = "$FCL_DEVICE";
  }
  if (sel && !*sel) sel = NULL;
  if (n == 0)
    return fcl_fail(NULL, FCL_ERROR_NO_DEVICE,
                    "device: no OpenCL platform offers a device (is an ICD such "
                    "as pocl-opencl-icd installed?)");
  int pi, di, pick = -1;
  bool by_index = sel && parse_index_pair(sel, &pi, &di);
  for (int i = 0; i < n && pick < 0; ++i) {
    if (by_index) {
      if (all[i].pi == pi && all[i].di == di) pick = i;
    } else if (!sel || matches(&all[i], sel)) {
      if (all[i].type & CL_DEVICE_TYPE_GPU) pick = i;
    }
  }
  for (int i = 0; i < n && pick < 0 && !by_index; ++i) {
    if (sel ? matches(&all[i], sel) : (all[i].type & CL_DEVICE_TYPE_CPU) != 0)
      pick = i;
  }
  if (pick < 0 && !sel) pick = 0; /* accelerators, custom devices */
  if (pick < 0)
    return fcl_fail(NULL, FCL_ERROR_NO_DEVICE,
                    "device: no OpenCL device matches \"%s\" (from %s); %d "
                    "device(s) present", sel, origin, n);
  *platform = all[pick].platform;
  *device = all[pick].device;
  return FCL_OK;
}
