/* The two ways Oclgrind's --uninitialized plugin goes wrong for flashcl
 * (shadow_shim.h), shown on the two kernels of shadow_demo.cl, and that the
 * shim removes both without hiding a real read of unwritten memory. Run as
 *   oclgrind --uninitialized --log LOG shadow_demo MODE
 * (tests/oclgrind/shadow_demo.cmake runs every mode and counts the reports):
 *
 *   reuse  A 16-byte buffer written by the host is released; a 256-byte
 *          buffer b created next, without host data, gets its number.
 *          fill writes all 64 floats of b, copy reads them: Oclgrind
 *          reports the 60 values past byte 16 as uninitialised (the old
 *          buffer's shadow was kept, 16 bytes long), though every one was
 *          written. This is what fcl_rwkv6_bwd_finish's dr, dk, dw stores
 *          and fcl_rwkv6_bwd_reverse's st_s store showed: their scratch
 *          buffers took the numbers of buffers released before.
 *   fill   b is cleared with clEnqueueFillBuffer (a float 0 pattern), then
 *          copy reads it: Oclgrind reports values 1 to 63, and 0 too as a
 *          rule (the shadow was replaced, store by store, by one of the
 *          pattern's 4 bytes, of indeterminate content), though the fill
 *          wrote all of them. flashcl clears its non-finite flags so.
 *   shim   both sequences with the shim on (releases held, fills by a
 *          kernel): no report.
 *   real   the shim on, and a real bug: fill writes 32 floats, copy reads
 *          64: exactly the 32 unwritten ones are reported. */
#include "shadow_shim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cl_context       g_ctx;
static cl_command_queue g_q;
static cl_kernel        g_fill, g_copy;

static int check(cl_int err, const char *what) {
  if (err == CL_SUCCESS) return 0;
  printf("FAIL: %s: %d\n", what, (int)err);
  exit(1);
}

static cl_mem host_buffer(size_t bytes) {
  float host[64] = {0};
  cl_int err;
  cl_mem m = clCreateBuffer(g_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host, &err);
  check(err, "clCreateBuffer (host data)");
  return m;
}

static cl_mem device_buffer(size_t bytes) {
  cl_int err;
  cl_mem m = clCreateBuffer(g_ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  check(err, "clCreateBuffer");
  return m;
}

static void run(cl_kernel k, cl_mem a, cl_mem b, int n) {
  const size_t global = 64;
  int i = 0;
  check(clSetKernelArg(k, i++, sizeof a, &a), "clSetKernelArg");
  if (b) check(clSetKernelArg(k, i++, sizeof b, &b), "clSetKernelArg");
  check(clSetKernelArg(k, i, sizeof n, &n), "clSetKernelArg");
  check(clEnqueueNDRangeKernel(g_q, k, 1, NULL, &global, NULL, 0, NULL, NULL),
        "clEnqueueNDRangeKernel");
}

/* fill writes nfill floats of a fresh b (after a host buffer was released),
 * copy reads 64. */
static void released_then_fill(int nfill) {
  cl_mem a = host_buffer(16);
  clReleaseMemObject(a);
  cl_mem b = device_buffer(256), c = host_buffer(256);
  run(g_fill, b, NULL, nfill);
  run(g_copy, b, c, 64);
  check(clFinish(g_q), "clFinish");
  clReleaseMemObject(b);
  clReleaseMemObject(c);
}

/* b cleared by clEnqueueFillBuffer, copy reads 64. */
static void cleared_by_fill_buffer(void) {
  const float zero = 0.0f;
  cl_mem b = device_buffer(256), c = host_buffer(256);
  check(clEnqueueFillBuffer(g_q, b, &zero, sizeof zero, 0, 256, 0, NULL, NULL),
        "clEnqueueFillBuffer");
  run(g_copy, b, c, 64);
  check(clFinish(g_q), "clFinish");
  clReleaseMemObject(b);
  clReleaseMemObject(c);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s) s[n] = '\0';
  fclose(f);
  return s;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "reuse") && strcmp(mode, "fill") && strcmp(mode, "shim") &&
      strcmp(mode, "real")) {
    printf("usage: shadow_demo reuse|fill|shim|real\n");
    return 2;
  }
  shadow_shim_hold_releases = strcmp(mode, "reuse") != 0;
  shadow_shim_fill_by_kernel = strcmp(mode, "fill") != 0;

  cl_platform_id platform;
  cl_device_id   dev;
  cl_int         err;
  check(clGetPlatformIDs(1, &platform, NULL), "clGetPlatformIDs");
  check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, NULL), "clGetDeviceIDs");
  g_ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  check(err, "clCreateContext");
  g_q = clCreateCommandQueue(g_ctx, dev, 0, &err);
  check(err, "clCreateCommandQueue");
  char *src = read_text(SHADOW_DEMO_CL);
  if (!src) {
    printf("FAIL: cannot read %s\n", SHADOW_DEMO_CL);
    return 1;
  }
  const char *srcs[1] = {src};
  cl_program prog = clCreateProgramWithSource(g_ctx, 1, srcs, NULL, &err);
  check(err, "clCreateProgramWithSource");
  check(clBuildProgram(prog, 1, &dev, "", NULL, NULL), "clBuildProgram");
  g_fill = clCreateKernel(prog, "fill", &err);
  check(err, "clCreateKernel");
  g_copy = clCreateKernel(prog, "copy", &err);
  check(err, "clCreateKernel");

  if (!strcmp(mode, "reuse")) released_then_fill(64);
  if (!strcmp(mode, "fill")) cleared_by_fill_buffer();
  if (!strcmp(mode, "shim")) {
    released_then_fill(64);
    cleared_by_fill_buffer();
  }
  if (!strcmp(mode, "real")) released_then_fill(32);

  clReleaseKernel(g_fill);
  clReleaseKernel(g_copy);
  clReleaseProgram(prog);
  free(src);
  shadow_shim_finish();
  clReleaseCommandQueue(g_q);
  clReleaseContext(g_ctx);
  printf("shadow_demo %s: done\n", mode);
  return shadow_shim_refused() ? 1 : 0;
}
