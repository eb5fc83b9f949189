/* fa-ring-bench's inputs and checks on the device (see ring_data.h). */
#include "ring_data.h"

#include "clprog.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUPS 1024 /* work-groups of 256 that stride over a tensor */

static cl_program g_prog; /* built once, on the first call's device */

static cl_kernel kernel(fcl_context *ctx, const char *name) {
  if (!g_prog && !(g_prog = bench_cl_build(ctx, "ring_data.cl", ""))) return NULL;
  cl_int err;
  cl_kernel k = clCreateKernel(g_prog, name, &err);
  return err == CL_SUCCESS ? k : NULL;
}

static int dtype_code(fcl_dtype t) { return t == FCL_F32 ? 0 : t == FCL_F16 ? 1 : 2; }

int ring_data_tensor(fcl_context *ctx, int64_t b, int64_t s, int64_t h, int64_t d, fcl_dtype t,
                     tu_tensor *out) {
  memset(out, 0, sizeof *out);
  const size_t bytes = (size_t)(b * s * h * d) * fcl_dtype_size(t);
  cl_int err;
  out->buffer = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) return 1;
  out->bytes = bytes;
  out->t = (fcl_tensor){out->buffer, 0, t, {s * h * d, h * d, d, 1}};
  out->b = b, out->s = s, out->h = h, out->d = d, out->layout = TU_BSHD;
  return 0;
}

/* Sets the arguments that ring_fill and ring_maxdiff share after their
 * first `at`: batch, tokens, n_whole, row, then the slice's pieces. */
static cl_int set_shape(cl_kernel k, cl_uint at, const tu_tensor *x, int64_t n,
                        const fcl_ring_slice_info *sl, int with_local) {
  const cl_long batch = x->b, tokens = x->s, whole = n, row = x->h * x->d;
  const cl_int local = sl != NULL;
  const cl_long s0 = sl ? sl->start[0] : 0, l0 = sl ? sl->len[0] : n;
  const cl_long s1 = sl && sl->pieces > 1 ? sl->start[1] : 0;
  cl_int err = clSetKernelArg(k, at++, sizeof batch, &batch);
  err |= clSetKernelArg(k, at++, sizeof tokens, &tokens);
  err |= clSetKernelArg(k, at++, sizeof whole, &whole);
  err |= clSetKernelArg(k, at++, sizeof row, &row);
  if (with_local) err |= clSetKernelArg(k, at++, sizeof local, &local);
  err |= clSetKernelArg(k, at++, sizeof s0, &s0);
  err |= clSetKernelArg(k, at++, sizeof l0, &l0);
  err |= clSetKernelArg(k, at++, sizeof s1, &s1);
  return err;
}

int ring_data_fill(fcl_context *ctx, const tu_tensor *x, unsigned seed, double amp, int64_t n,
                   const fcl_ring_slice_info *sl) {
  cl_kernel k = kernel(ctx, "ring_fill");
  if (!k) return 1;
  const cl_int dt = dtype_code(x->t.dtype);
  const cl_uint sd = seed;
  const cl_float a = (cl_float)amp;
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &x->buffer);
  err |= clSetKernelArg(k, 1, sizeof dt, &dt);
  err |= clSetKernelArg(k, 2, sizeof sd, &sd);
  err |= clSetKernelArg(k, 3, sizeof a, &a);
  err |= set_shape(k, 4, x, n, sl, 1);
  const size_t global = GROUPS * 256, local = 256;
  if (!err)
    err = clEnqueueNDRangeKernel(fcl_context_queue(ctx), k, 1, NULL, &global, &local, 0, NULL,
                                 NULL);
  clReleaseKernel(k);
  return err != CL_SUCCESS;
}

double ring_data_maxdiff(fcl_context *ctx, const tu_tensor *whole, const tu_tensor *mine,
                         int64_t n, const fcl_ring_slice_info *sl) {
  cl_kernel k = kernel(ctx, "ring_maxdiff");
  if (!k) return -1.0;
  cl_int err;
  cl_mem part = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, GROUPS * sizeof(float),
                               NULL, &err);
  const cl_int dt = dtype_code(mine->t.dtype);
  float m[GROUPS];
  err |= clSetKernelArg(k, 0, sizeof(cl_mem), &whole->buffer);
  err |= clSetKernelArg(k, 1, sizeof(cl_mem), &mine->buffer);
  err |= clSetKernelArg(k, 2, sizeof dt, &dt);
  err |= set_shape(k, 3, mine, n, sl, 0);
  err |= clSetKernelArg(k, 10, sizeof(cl_mem), &part);
  const size_t global = GROUPS * 256, local = 256;
  if (!err)
    err = clEnqueueNDRangeKernel(fcl_context_queue(ctx), k, 1, NULL, &global, &local, 0, NULL,
                                 NULL);
  if (!err)
    err = clEnqueueReadBuffer(fcl_context_queue(ctx), part, CL_TRUE, 0, sizeof m, m, 0, NULL,
                              NULL);
  clReleaseKernel(k);
  if (part) clReleaseMemObject(part);
  if (err) return -1.0;
  double worst = 0.0;
  for (int i = 0; i < GROUPS; ++i) worst = fmax(worst, m[i]); /* fmax keeps inf */
  return worst;
}
