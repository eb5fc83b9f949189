/* fa-bench --baseline: host side of the unfused attention (see baseline.h
 * and baseline.cl). One program per dtype, built on first use; the S buffer
 * grows to the largest shape run and is kept until unfused_release. */
#include "baseline.h"

#include <math.h>
#include <stdio.h>

#include "clprog.h"

static struct {
  cl_program prog[3];               /* by fcl_dtype */
  cl_kernel  scores[3], softmax[3], pv[3];
  cl_mem     s;
  size_t     s_bytes;
  cl_event   first, last;
} g;

static size_t s_bytes(const attn_shape *s) {
  return (size_t)s->b * (size_t)s->h * (size_t)s->sq * (size_t)s->sk * sizeof(float);
}

const char *unfused_skip_reason(fcl_context *ctx, const attn_shape *s, char *buf, size_t n) {
  cl_device_id dev = bench_cl_device(ctx);
  cl_ulong max_alloc = 0, global_mem = 0;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_mem, &global_mem, NULL);
  if (s->cu) {
    snprintf(buf, n, "unfused baseline skipped: --varlen (it runs dense batches only)");
    return buf;
  }
  const double need = (double)s->b * (double)s->h * (double)s->sq * (double)s->sk * 4.0;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (need <= (double)max_alloc && need <= 0.75 * (double)global_mem) return NULL;
  snprintf(buf, n,
           "unfused baseline skipped for B=%lld H=%lld Nq=%lld Nk=%lld: S takes %.2f GiB, more "
           "than the device's %s (%.2f GiB)",
           (long long)s->b, (long long)s->h, (long long)s->sq, (long long)s->sk, need / gib,
           need > (double)max_alloc ? "largest allocation" : "memory, less a quarter",
           (need > (double)max_alloc ? (double)max_alloc : 0.75 * (double)global_mem) / gib);
  return buf;
}

static int build(fcl_context *ctx, fcl_dtype t) {
  if (g.prog[t]) return 0;
  char opts[32];
  snprintf(opts, sizeof opts, "-DDTYPE=%d", t == FCL_F32 ? 0 : t == FCL_F16 ? 1 : 2);
  if (!(g.prog[t] = bench_cl_build(ctx, "baseline.cl", opts))) return -1;
  cl_int e1, e2, e3;
  g.scores[t] = clCreateKernel(g.prog[t], "bl_scores", &e1);
  g.softmax[t] = clCreateKernel(g.prog[t], "bl_softmax", &e2);
  g.pv[t] = clCreateKernel(g.prog[t], "bl_pv", &e3);
  if (e1 || e2 || e3) {
    fprintf(stderr, "fa-bench: clCreateKernel (baseline): OpenCL error %d\n", e1 ? e1 : e2 ? e2 : e3);
    return -1;
  }
  return 0;
}

/* Sets the arguments of kernel from a list of (size, pointer) pairs. */
static cl_int set_args(cl_kernel k, int n, const size_t *sizes, const void *const *vals) {
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < n && !err; i++) err = clSetKernelArg(k, (cl_uint)i, sizes[i], vals[i]);
  return err;
}

fcl_status unfused_forward(fcl_context *ctx, const void *arg) {
  const unfused_call *c = arg;
  const attn_shape *s = c->s;
  const size_t need = s_bytes(s);
  cl_command_queue queue = fcl_context_queue(ctx);
  cl_int err = CL_SUCCESS;
  if (build(ctx, s->t)) return FCL_ERROR_BUILD;
  if (need > g.s_bytes) {
    if (g.s) clReleaseMemObject(g.s);
    g.s = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, need, NULL, &err);
    g.s_bytes = err ? 0 : need;
    if (err) {
      fprintf(stderr, "fa-bench: unfused baseline: allocating S (%zu bytes): OpenCL error %d\n",
              need, err);
      g.s = NULL;
      return FCL_ERROR_OUT_OF_MEMORY;
    }
  }
  if (g.first) clReleaseEvent(g.first);
  if (g.last) clReleaseEvent(g.last);
  g.first = g.last = NULL;

  const cl_int nq = (cl_int)s->sq, nk = (cl_int)s->sk, h = (cl_int)s->h, hkv = (cl_int)s->hkv;
  const cl_int d = (cl_int)s->d, dv = (cl_int)s->dv, causal = s->causal;
  const cl_float scale = (cl_float)(1.0 / sqrt((double)s->d));
  const size_t m = sizeof(cl_mem), i = sizeof(cl_int);
  const size_t sz1[10] = {m, m, m, i, i, i, i, i, sizeof scale, i};
  const void *const a1[10] = {&c->q, &c->k, &g.s, &nq, &nk, &h, &hkv, &d, &scale, &causal};
  const size_t sz2[3] = {m, m, i};
  const void *const a2[3] = {&g.s, &c->lse, &nk};
  const size_t sz3[8] = {m, m, m, i, i, i, i, i};
  const void *const a3[8] = {&g.s, &c->v, &c->o, &nq, &nk, &h, &hkv, &dv};
  const size_t wg[3] = {16, 16, 1}, bh = (size_t)(s->b * s->h);
  const size_t g1[3] = {(size_t)(s->sk + 63) / 64 * 16, (size_t)(s->sq + 63) / 64 * 16, bh};
  const size_t wg2 = 128, g2 = bh * (size_t)s->sq * wg2; /* a work-group per row */
  const size_t g3[3] = {(size_t)(s->dv + 63) / 64 * 16, (size_t)(s->sq + 63) / 64 * 16, bh};
  err = set_args(g.scores[s->t], 10, sz1, a1);
  if (!err) err = set_args(g.softmax[s->t], 3, sz2, a2);
  if (!err) err = set_args(g.pv[s->t], 8, sz3, a3);
  if (!err) err = clEnqueueNDRangeKernel(queue, g.scores[s->t], 3, NULL, g1, wg, 0, NULL, &g.first);
  if (!err) err = clEnqueueNDRangeKernel(queue, g.softmax[s->t], 1, NULL, &g2, &wg2, 0, NULL, NULL);
  if (!err) err = clEnqueueNDRangeKernel(queue, g.pv[s->t], 3, NULL, g3, wg, 0, NULL, &g.last);
  if (err) {
    fprintf(stderr, "fa-bench: unfused baseline: enqueueing its kernels: OpenCL error %d\n", err);
    return err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES
               ? FCL_ERROR_OUT_OF_MEMORY
               : FCL_ERROR_OPENCL;
  }
  return FCL_OK;
}

int unfused_last_ms(fcl_context *ctx, const void *arg, double *ms) {
  (void)ctx, (void)arg;
  if (!g.first || !g.last) return 1;
  return bench_cl_span_ms(g.first, g.last, ms);
}

void unfused_release(void) {
  for (int t = 0; t < 3; t++) {
    if (g.scores[t]) clReleaseKernel(g.scores[t]);
    if (g.softmax[t]) clReleaseKernel(g.softmax[t]);
    if (g.pv[t]) clReleaseKernel(g.pv[t]);
    if (g.prog[t]) clReleaseProgram(g.prog[t]);
  }
  if (g.s) clReleaseMemObject(g.s);
  if (g.first) clReleaseEvent(g.first);
  if (g.last) clReleaseEvent(g.last);
  g.s_bytes = 0;
  g.s = NULL;
  for (int t = 0; t < 3; t++) g.prog[t] = NULL, g.scores[t] = g.softmax[t] = g.pv[t] = NULL;
  g.first = g.last = NULL;
}
