/* fa-bench: the driver's host cost of one launch (see launch_cost.h). */
#include "launch_cost.h"

#include <math.h>
#include <stdio.h>

#include "bench.h"
#include "clprog.h"

#define LAUNCH_BUFFERS 8
#define LAUNCH_WARMUP 20 /* the first launches may build or upload the kernel */

static cl_int set_args(cl_kernel k, cl_mem buf) {
  const cl_int i = 1;
  const cl_long l = 1;
  const cl_float f = 1.0f;
  cl_uint n = 0;
  cl_int err = CL_SUCCESS;
  for (int j = 0; j < LAUNCH_BUFFERS && !err; j++) err = clSetKernelArg(k, n++, sizeof buf, &buf);
  for (int j = 0; j < 6 && !err; j++) err = clSetKernelArg(k, n++, sizeof i, &i);
  for (int j = 0; j < 6 && !err; j++) err = clSetKernelArg(k, n++, sizeof l, &l);
  for (int j = 0; j < 4 && !err; j++) err = clSetKernelArg(k, n++, sizeof f, &f);
  return err;
}

/* Mean host time of one enqueue over `launches` in bursts of `burst`, with
 * or without an event; negative on error. */
static double time_launches(cl_command_queue queue, cl_kernel k, int launches, int burst,
                            int event) {
  const size_t global = 128, local = 128;
  double total = 0;
  for (int j = -LAUNCH_WARMUP; j < launches; j++) {
    cl_event ev = NULL;
    const double t0 = bench_now_ms();
    cl_int err = clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, &local, 0, NULL,
                                        event ? &ev : NULL);
    if (ev) clReleaseEvent(ev);
    const double t = bench_now_ms() - t0;
    if (err) {
      fprintf(stderr, "fa-bench: empty kernel launch: OpenCL error %d\n", err);
      return -1;
    }
    if ((j == -1 || (j >= 0 && (j + 1) % burst == 0)) && clFinish(queue)) return -1;
    if (j >= 0) total += t;
  }
  return clFinish(queue) ? -1 : total / launches;
}

/* The kernel's mean device time over n launches, each waited for; NAN
 * where the queue does not profile, negative on error. */
static double device_time(cl_command_queue queue, cl_kernel k, int n) {
  const size_t global = 128, local = 128;
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  if (!(props & CL_QUEUE_PROFILING_ENABLE)) return NAN;
  double total = 0;
  for (int j = -LAUNCH_WARMUP; j < n; j++) {
    cl_event ev = NULL;
    cl_ulong t0 = 0, t1 = 0;
    cl_int err = clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, &local, 0, NULL, &ev);
    if (!err) err = clWaitForEvents(1, &ev);
    if (!err) err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (!err) err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    if (ev) clReleaseEvent(ev);
    if (err) return -1;
    if (j >= 0) total += (double)(t1 - t0) * 1e-6;
  }
  return total / n;
}

int bench_launch_cost(fcl_context *ctx, int launches, int burst, double *ms, double *event_ms,
                      double *dev_ms) {
  cl_program prog = bench_cl_build(ctx, "launch.cl", "");
  cl_kernel k = NULL;
  cl_mem buf = NULL;
  cl_int err = CL_OUT_OF_RESOURCES;
  int rc = 1;
  if (!prog) return 1;
  k = clCreateKernel(prog, "bench_empty24", &err);
  if (!err) buf = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, 4096, NULL, &err);
  if (!err) err = set_args(k, buf);
  if (err) {
    fprintf(stderr, "fa-bench: setting up the empty kernel: OpenCL error %d\n", err);
    goto done;
  }
  cl_command_queue queue = fcl_context_queue(ctx);
  *ms = time_launches(queue, k, launches, burst > 0 ? burst : launches, 0);
  *event_ms = *ms < 0 ? -1 : time_launches(queue, k, launches, burst > 0 ? burst : launches, 1);
  *dev_ms = *event_ms < 0 ? -1 : device_time(queue, k, launches / 10 + 1);
  rc = *ms < 0 || *event_ms < 0 || *dev_ms < 0;
done:
  if (buf) clReleaseMemObject(buf);
  if (k) clReleaseKernel(k);
  clReleaseProgram(prog);
  return rc;
}
