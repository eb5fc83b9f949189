/* See shadow_shim.h. The functions below take the place of the OpenCL
 * library's for the whole program (flashcl's calls included): an
 * executable's definitions come first in the dynamic linker's search, and
 * dlsym(RTLD_NEXT) finds the real ones (Oclgrind's runtime under the
 * oclgrind command, else the ICD loader). */
#define _GNU_SOURCE
#include "shadow_shim.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int shadow_shim_hold_releases = 1;
int shadow_shim_fill_by_kernel = 1;

static void *real(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (!f) {
    fprintf(stderr, "shadow_shim: no %s after the executable\n", name);
    abort();
  }
  return f;
}
#define REAL(fn) ((__typeof__(&fn))real(#fn))

static int g_refused = 0;

/* SHADOW_SHIM=0 in the environment turns holding and filling off (to see
 * Oclgrind's false reports); the refusals and the counts stay. */
static int shim_on(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("SHADOW_SHIM");
    on = !(e && strcmp(e, "0") == 0);
  }
  return on;
}

static void refuse(const char *what) {
  ++g_refused;
  printf("FAIL: shadow_shim: %s: Oclgrind's --uninitialized would track it wrongly "
         "(tests/oclgrind/shadow_shim.h)\n", what);
  fflush(stdout);
}

int shadow_shim_refused(void) { return g_refused; }

/* ---- releases held --------------------------------------------------------- */
static cl_mem *g_held = NULL;
static size_t  g_nheld = 0, g_capheld = 0;

CL_API_ENTRY cl_int CL_API_CALL clReleaseMemObject(cl_mem m) {
  if (!shadow_shim_hold_releases || !shim_on() || !m) return REAL(clReleaseMemObject)(m);
  if (g_nheld == g_capheld) {
    const size_t cap = g_capheld ? 2 * g_capheld : 256;
    cl_mem *p = realloc(g_held, cap * sizeof *p);
    if (!p) return REAL(clReleaseMemObject)(m);
    g_held = p;
    g_capheld = cap;
  }
  g_held[g_nheld++] = m;
  return CL_SUCCESS;
}

/* ---- fills by a kernel -------------------------------------------------------- */
/* One work-item a byte of [off, off + n): pattern byte (i % psize). */
static const char fill_src[] =
    "__kernel void shadow_shim_fill(__global uchar *dst, ulong off, ulong n,\n"
    "                               uint psize, ulong16 pattern) {\n"
    "  const ulong i = get_global_id(0);\n"
    "  union { ulong16 v; uchar b[128]; } p;\n"
    "  p.v = pattern;\n"
    "  if (i < n) dst[off + i] = p.b[i % psize];\n"
    "}\n";

typedef struct {
  cl_context ctx;
  cl_program prog;
  cl_kernel  k;
} fill_kernel;
static fill_kernel g_fill[8];
static int         g_nfill = 0;

static cl_kernel fill_kernel_for(cl_command_queue q) {
  cl_context ctx;
  cl_device_id dev;
  if (clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL) != CL_SUCCESS ||
      clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL) != CL_SUCCESS)
    return NULL;
  for (int i = 0; i < g_nfill; ++i)
    if (g_fill[i].ctx == ctx) return g_fill[i].k;
  if (g_nfill == (int)(sizeof g_fill / sizeof g_fill[0])) return NULL;
  const char *src = fill_src;
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  if (err != CL_SUCCESS) return NULL;
  if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
    clReleaseProgram(prog);
    return NULL;
  }
  cl_kernel k = clCreateKernel(prog, "shadow_shim_fill", &err);
  if (err != CL_SUCCESS) {
    clReleaseProgram(prog);
    return NULL;
  }
  clRetainContext(ctx);
  g_fill[g_nfill++] = (fill_kernel){ctx, prog, k};
  return k;
}

static size_t mem_size(cl_mem m) {
  size_t n = 0;
  if (clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof n, &n, NULL) != CL_SUCCESS) return 0;
  return n;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueFillBuffer(cl_command_queue q, cl_mem buf,
                                                    const void *pattern, size_t psize,
                                                    size_t off, size_t n, cl_uint nwait,
                                                    const cl_event *wait, cl_event *ev) {
  /* Anything unusual goes to the implementation, whose checks then apply. */
  const int pow2 = psize >= 1 && psize <= 128 && (psize & (psize - 1)) == 0;
  cl_kernel k = NULL;
  if (shadow_shim_fill_by_kernel && shim_on() && q && buf && pattern && pow2 && n > 0 && off % psize == 0 &&
      n % psize == 0 && off + n <= mem_size(buf))
    k = fill_kernel_for(q);
  if (!k) return REAL(clEnqueueFillBuffer)(q, buf, pattern, psize, off, n, nwait, wait, ev);
  cl_ulong16 pat;
  memset(&pat, 0, sizeof pat);
  memcpy(&pat, pattern, psize);
  const cl_ulong off64 = off, n64 = n;
  const cl_uint ps = (cl_uint)psize;
  cl_int err = clSetKernelArg(k, 0, sizeof buf, &buf);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof off64, &off64);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 2, sizeof n64, &n64);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 3, sizeof ps, &ps);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 4, sizeof pat, &pat);
  if (err != CL_SUCCESS) return err;
  const size_t global = n;
  return REAL(clEnqueueNDRangeKernel)(q, k, 1, NULL, &global, NULL, nwait, wait, ev);
}

/* ---- launches counted ------------------------------------------------------ */
typedef struct {
  char name[96];
  long count;
} launch_count;
static launch_count g_launch[128];
static int          g_nlaunch = 0;

CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k,
                                                       cl_uint dims, const size_t *offset,
                                                       const size_t *global,
                                                       const size_t *local, cl_uint nwait,
                                                       const cl_event *wait, cl_event *ev) {
  const cl_int err = REAL(clEnqueueNDRangeKernel)(q, k, dims, offset, global, local, nwait,
                                                  wait, ev);
  char name[96] = "";
  if (err == CL_SUCCESS &&
      clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL) == CL_SUCCESS) {
    int i = 0;
    while (i < g_nlaunch && strcmp(g_launch[i].name, name) != 0) ++i;
    if (i == g_nlaunch && g_nlaunch < (int)(sizeof g_launch / sizeof g_launch[0])) {
      snprintf(g_launch[i].name, sizeof g_launch[i].name, "%s", name);
      ++g_nlaunch;
    }
    if (i < g_nlaunch) ++g_launch[i].count;
  }
  return err;
}

long shadow_shim_launches(const char *name) {
  for (int i = 0; i < g_nlaunch; ++i)
    if (strcmp(g_launch[i].name, name) == 0) return g_launch[i].count;
  return 0;
}

void shadow_shim_print_launches(const char *prefix) {
  for (int i = 0; i < g_nlaunch; ++i)
    printf("%s%-32s %6ld\n", prefix, g_launch[i].name, g_launch[i].count);
}

/* ---- transfers the plugin would track wrongly: refused ---------------------- */
CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue q, cl_mem buf,
                                                     cl_bool blocking, size_t off, size_t n,
                                                     const void *src, cl_uint nwait,
                                                     const cl_event *wait, cl_event *ev) {
  if (buf && (off != 0 || n != mem_size(buf))) {
    refuse("clEnqueueWriteBuffer of part of a buffer");
    return CL_INVALID_OPERATION;
  }
  return REAL(clEnqueueWriteBuffer)(q, buf, blocking, off, n, src, nwait, wait, ev);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBuffer(cl_command_queue q, cl_mem src,
                                                    cl_mem dst, size_t src_off,
                                                    size_t dst_off, size_t n, cl_uint nwait,
                                                    const cl_event *wait, cl_event *ev) {
  (void)q; (void)src; (void)dst; (void)src_off; (void)dst_off; (void)n;
  (void)nwait; (void)wait; (void)ev;
  refuse("clEnqueueCopyBuffer");
  return CL_INVALID_OPERATION;
}

CL_API_ENTRY void *CL_API_CALL clEnqueueMapBuffer(cl_command_queue q, cl_mem buf,
                                                  cl_bool blocking, cl_map_flags flags,
                                                  size_t off, size_t n, cl_uint nwait,
                                                  const cl_event *wait, cl_event *ev,
                                                  cl_int *err) {
  if (flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION)) {
    refuse("clEnqueueMapBuffer for writing");
    if (err) *err = CL_INVALID_OPERATION;
    return NULL;
  }
  return REAL(clEnqueueMapBuffer)(q, buf, blocking, flags, off, n, nwait, wait, ev, err);
}

void shadow_shim_finish(void) {
  for (size_t i = 0; i < g_nheld; ++i) REAL(clReleaseMemObject)(g_held[i]);
  free(g_held);
  g_held = NULL;
  g_nheld = g_capheld = 0;
  for (int i = 0; i < g_nfill; ++i) {
    clReleaseKernel(g_fill[i].k);
    clReleaseProgram(g_fill[i].prog);
    clReleaseContext(g_fill[i].ctx);
  }
  g_nfill = 0;
}
