/* fa-arg-cost: the host time of one clEnqueueNDRangeKernel by the kinds and
 * number of the kernel's arguments, on empty kernels, which is what the
 * choices of flashcl's kernel arguments rest on (a kernel's scalars in one
 * struct argument, NULL for unused buffers: docs/defaults.md).
 *
 *   fa-arg-cost [PLATFORM]   (a substring of the OpenCL platform's name;
 *                             default: the first platform)
 *
 * Each profile is launched 32 times between clFinish calls, 40 rounds, five
 * times over; it prints the lowest of the five means. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

/* An empty kernel a profile: B buffers, L longs, I ints, F floats, or a
 * struct S of 18 longs, 22 ints (a decode kernel's scalars). */
static const char *source =
    "typedef struct { long l[18]; int i[22]; } s_t;\n"
    "#define B8 __global float *b0, __global float *b1, __global float *b2, "
    "__global float *b3, __global float *b4, __global float *b5, __global float *b6, "
    "__global float *b7\n"
    "#define B14 B8, __global float *b8, __global float *b9, __global float *b10, "
    "__global float *b11, __global float *b12, __global float *b13\n"
    "#define L6(p) long p##0, long p##1, long p##2, long p##3, long p##4, long p##5\n"
    "#define I6(p) int p##0, int p##1, int p##2, int p##3, int p##4, int p##5\n"
    "__kernel void b8_s16(B8, I6(i), L6(l), float f0, float f1, float f2, float f3) {}\n"
    "__kernel void b14_s41(B14, L6(l), L6(m), L6(n), I6(i), I6(j), I6(k), float f0, "
    "float f1, int x0, int x1, int x2, int x3, int x4) {}\n"
    "__kernel void b14_struct(B14, s_t s) {}\n"
    "__kernel void b14(B14) {}\n"
    "__kernel void b1(__global float *b0) {}\n";

typedef struct {
  const char *kernel, *what;
  int         nulls; /* the last buffers set to NULL */
} profile;

static const profile profiles[] = {
    {"b1", "1 buffer", 0},
    {"b8_s16", "8 buffers, 16 scalars", 0},
    {"b14", "14 buffers", 0},
    {"b14", "14 buffers, 7 of them NULL", 7},
    {"b14_s41", "14 buffers, 41 scalars", 0},
    {"b14_s41", "14 buffers (7 NULL), 41 scalars", 7},
    {"b14_struct", "14 buffers, one struct of 41 scalars", 0},
    {"b14_struct", "14 buffers (7 NULL), one struct of 41 scalars", 7},
};

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* Sets every argument of k (buffers first, the last `nulls` of them NULL);
 * the kernel's argument sizes are known from the source above. */
static cl_int set_args(cl_kernel k, const char *name, cl_mem buf, int nulls) {
  const int buffers = name[1] == '1' && name[2] == '4' ? 14 : name[1] == '8' ? 8 : 1;
  cl_uint n = 0;
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < buffers && !err; ++i)
    err = clSetKernelArg(k, n++, sizeof buf, i >= buffers - nulls ? NULL : &buf);
  const cl_long l = 1;
  const cl_int x = 1;
  const cl_float f = 1;
  const struct { cl_long l[18]; cl_int i[22]; } s = {{0}, {0}};
  if (!strcmp(name, "b8_s16")) {
    for (int i = 0; i < 6 && !err; ++i) err = clSetKernelArg(k, n++, sizeof x, &x);
    for (int i = 0; i < 6 && !err; ++i) err = clSetKernelArg(k, n++, sizeof l, &l);
    for (int i = 0; i < 4 && !err; ++i) err = clSetKernelArg(k, n++, sizeof f, &f);
  } else if (!strcmp(name, "b14_s41")) {
    for (int i = 0; i < 18 && !err; ++i) err = clSetKernelArg(k, n++, sizeof l, &l);
    for (int i = 0; i < 18 && !err; ++i) err = clSetKernelArg(k, n++, sizeof x, &x);
    for (int i = 0; i < 2 && !err; ++i) err = clSetKernelArg(k, n++, sizeof f, &f);
    for (int i = 0; i < 5 && !err; ++i) err = clSetKernelArg(k, n++, sizeof x, &x);
  } else if (!strcmp(name, "b14_struct")) {
    err = clSetKernelArg(k, n++, sizeof s, &s);
  }
  return err;
}

static double enqueue_us(cl_command_queue q, cl_kernel k) {
  const size_t global[3] = {16384, 1, 1}, local[3] = {128, 1, 1};
  double best = -1;
  for (int rep = 0; rep < 6; ++rep) {
    double total = 0;
    for (int round = 0; round < 40; ++round) {
      for (int i = 0; i < 32; ++i) {
        const double t0 = now_us();
        if (clEnqueueNDRangeKernel(q, k, 3, NULL, global, local, 0, NULL, NULL)) return -1;
        total += now_us() - t0;
      }
      if (clFinish(q)) return -1;
    }
    const double mean = total / (40 * 32);
    if (rep > 0 && (best < 0 || mean < best)) best = mean; /* rep 0 warms up */
  }
  return best;
}

int main(int argc, char **argv) {
  cl_platform_id platforms[16];
  cl_uint np = 0;
  cl_device_id dev = NULL;
  char name[256] = "";
  if (clGetPlatformIDs(16, platforms, &np) || np == 0) return fprintf(stderr, "no OpenCL platform\n"), 1;
  for (cl_uint i = 0; i < np && !dev; ++i) {
    clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
    if (argc < 2 || strstr(name, argv[1])) clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL);
  }
  if (!dev) return fprintf(stderr, "fa-arg-cost: no device on a platform named like %s\n", argv[1]), 1;
  char dname[256] = "";
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof dname, dname, NULL);
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_command_queue q = err ? NULL : clCreateCommandQueue(ctx, dev, 0, &err);
  cl_program prog = err ? NULL : clCreateProgramWithSource(ctx, 1, (const char **)&source, NULL, &err);
  if (!err) err = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
  cl_mem buf = err ? NULL : clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, NULL, &err);
  if (err) return fprintf(stderr, "fa-arg-cost: OpenCL set-up failed: %d\n", err), 1;
  printf("device: %s / %s\nhost us an enqueue, empty kernel, 128 work-groups of 128\n", name, dname);
  int rc = 0;
  for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; ++i) {
    const profile *p = &profiles[i];
    cl_kernel k = clCreateKernel(prog, p->kernel, &err);
    if (!err) err = set_args(k, p->kernel, buf, p->nulls);
    const double us = err ? -1 : enqueue_us(q, k);
    if (us < 0) printf("%-48s error %d\n", p->what, err), rc = 1;
    else printf("%-48s %6.2f\n", p->what, us);
    if (k) clReleaseKernel(k);
  }
  clReleaseMemObject(buf), clReleaseProgram(prog), clReleaseCommandQueue(q), clReleaseContext(ctx);
  return rc;
}
