/* fa-bench: building and timing its own kernels (see clprog.h). */
#include "clprog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table written by cmake/embed_cl.cmake, renamed at compile time so it
 * cannot clash with the library's (bench/CMakeLists.txt). */
struct fcl_embedded_source {
  const char *name; const char *text; size_t size;
  const char *requires; const int *closure; /* none of fa-bench's requires another */
};
extern const struct fcl_embedded_source bench_embedded_sources[];

cl_device_id bench_cl_device(fcl_context *ctx) {
  cl_device_id dev = NULL;
  clGetCommandQueueInfo(fcl_context_queue(ctx), CL_QUEUE_DEVICE, sizeof dev, &dev, NULL);
  return dev;
}

cl_program bench_cl_build(fcl_context *ctx, const char *name, const char *options) {
  const struct fcl_embedded_source *src = bench_embedded_sources;
  while (src->name && strcmp(src->name, name)) src++;
  if (!src->name) {
    fprintf(stderr, "fa-bench: no embedded kernel file %s\n", name);
    return NULL;
  }
  cl_int err;
  cl_device_id dev = bench_cl_device(ctx);
  const char *text = src->text;
  cl_program prog = clCreateProgramWithSource(fcl_context_cl(ctx), 1, &text, &src->size, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "fa-bench: clCreateProgramWithSource(%s): OpenCL error %d\n", name, err);
    return NULL;
  }
  err = clBuildProgram(prog, 1, &dev, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    char *log = malloc(n + 1);
    if (log && !clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log, NULL)) log[n] = 0;
    fprintf(stderr, "fa-bench: building %s (%s) failed, OpenCL error %d:\n%s\n", name, options,
            err, log ? log : "");
    free(log);
    clReleaseProgram(prog);
    return NULL;
  }
  return prog;
}

int bench_cl_span_ms(cl_event first, cl_event last, double *ms) {
  cl_ulong start = 0, end = 0;
  cl_int err = clWaitForEvents(1, &last);
  if (!err)
    err = clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
  if (!err) err = clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
  if (err) {
    fprintf(stderr, "fa-bench: reading profiling events: OpenCL error %d\n", err);
    return 1;
  }
  *ms = end > start ? (double)(end - start) * 1e-6 : 0.0;
  return 0;
}
