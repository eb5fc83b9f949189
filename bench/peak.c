/* fa-bench: measures the device's f32 FMA rate and copy bandwidth with the
 * kernels of peak.cl, each calibrated to run 20 ms or more and timed with
 * profiling events; the best of several runs is the peak. */
#include "peak.h"

#include <math.h>
#include <stdio.h>

#include "clprog.h"

#define PEAK_FMA_PER_TRIP 64 /* 8 chains of float8 in peak.cl */
#define PEAK_MIN_MS 20.0
#define PEAK_RUNS 3

/* Device time of one launch of kernel, in ms; negative on error. */
static double launch_ms(fcl_context *ctx, cl_kernel kernel, size_t global, size_t local) {
  cl_event ev = NULL;
  double ms = -1;
  cl_int err = clEnqueueNDRangeKernel(fcl_context_queue(ctx), kernel, 1, NULL, &global,
                                      local ? &local : NULL, 0, NULL, &ev);
  if (err) fprintf(stderr, "fa-bench: peak kernel launch: OpenCL error %d\n", err);
  else if (bench_cl_span_ms(ev, ev, &ms)) ms = -1;
  if (ev) clReleaseEvent(ev);
  return ms;
}

static size_t device_size(cl_device_id dev, cl_device_info what) {
  size_t v = 0;
  clGetDeviceInfo(dev, what, sizeof v, &v, NULL);
  return v;
}

static double measure_fma(fcl_context *ctx, cl_program prog) {
  cl_device_id dev = bench_cl_device(ctx);
  cl_uint cus = 1;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
  size_t local = device_size(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  if (local > 256 || local == 0) local = 256;
  const size_t global = ((size_t)cus * 2048 + local - 1) / local * local;
  cl_int err;
  cl_kernel k = clCreateKernel(prog, "peak_fma", &err);
  cl_mem out = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_WRITE_ONLY, global * sizeof(float),
                              NULL, &err);
  float a = 0.9999f, b = 1e-4f;
  cl_int iters = 64;
  double best = NAN;
  if (!k || !out) goto done;
  clSetKernelArg(k, 0, sizeof out, &out);
  clSetKernelArg(k, 1, sizeof a, &a);
  clSetKernelArg(k, 2, sizeof b, &b);
  for (int run = 0, timed = 0; run < 32 && timed < PEAK_RUNS; run++) {
    clSetKernelArg(k, 3, sizeof iters, &iters);
    double ms = launch_ms(ctx, k, global, local);
    if (ms < 0) {
      best = NAN;
      break;
    }
    if (ms < PEAK_MIN_MS && iters < (1 << 24)) { /* too short to time: lengthen */
      double f = ms > 0 ? 1.5 * PEAK_MIN_MS / ms : 64;
      iters = (cl_int)(iters * (f < 2 ? 2 : f > 64 ? 64 : f));
      continue;
    }
    double gflops = 2.0 * PEAK_FMA_PER_TRIP * (double)global * iters / (ms * 1e6);
    if (!(best >= gflops)) best = gflops;
    timed++;
  }
done:
  if (k) clReleaseKernel(k);
  if (out) clReleaseMemObject(out);
  return best;
}

static double measure_copy(fcl_context *ctx, cl_program prog) {
  cl_device_id dev = bench_cl_device(ctx);
  cl_ulong max_alloc = 0, global_mem = 0;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_mem, &global_mem, NULL);
  cl_ulong bytes = (cl_ulong)256 << 20; /* well past the last-level caches */
  if (bytes > max_alloc) bytes = max_alloc;
  if (bytes > global_mem / 4) bytes = global_mem / 4;
  const size_t n = (size_t)(bytes / 16) / 256 * 256; /* float4 elements */
  cl_int err;
  cl_kernel k = clCreateKernel(prog, "peak_copy", &err);
  cl_mem src = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, n * 16, NULL, &err);
  cl_mem dst = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, n * 16, NULL, &err);
  double best = NAN;
  const cl_float zero = 0;
  if (!k || !src || !dst || !n ||
      clEnqueueFillBuffer(fcl_context_queue(ctx), src, &zero, sizeof zero, 0, n * 16, 0, NULL,
                          NULL))
    goto done;
  clSetKernelArg(k, 0, sizeof src, &src);
  clSetKernelArg(k, 1, sizeof dst, &dst);
  for (int run = 0; run <= PEAK_RUNS; run++) { /* the first is a warm-up */
    double ms = launch_ms(ctx, k, n, 0);
    if (ms < 0) {
      best = NAN;
      break;
    }
    double gbps = 2.0 * 16.0 * (double)n / (ms * 1e6);
    if (run && !(best >= gbps)) best = gbps;
  }
done:
  if (k) clReleaseKernel(k);
  if (src) clReleaseMemObject(src);
  if (dst) clReleaseMemObject(dst);
  return best;
}

bench_peak bench_measure_peak(fcl_context *ctx) {
  bench_peak p = {NAN, NAN, 0};
  cl_program prog = bench_cl_build(ctx, "peak.cl", "");
  if (!prog) return p;
  p.gflops = measure_fma(ctx, prog);
  p.gbps = measure_copy(ctx, prog);
  if (isnan(p.gflops) || isnan(p.gbps))
    fprintf(stderr, "fa-bench: a peak measurement failed; its utilisation column is empty\n");
  clReleaseProgram(prog);
  return p;
}
