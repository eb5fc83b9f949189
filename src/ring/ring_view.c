/* Views of pieces of the tensors, and the ring's copies on them: packing a
 * slice into dense staging, f32 sums of partial gradients, and the final
 * stores (cl/ring/ring_copy.cl); lse rows through rectangle copies. */
#include "ring/ring.h"

fcl_tensor ring_rows(const fcl_tensor *t, int64_t row) {
  fcl_tensor v = *t;
  v.offset = (size_t)((int64_t)t->offset + row * t->strides[1] * (int64_t)fcl_dtype_size(t->dtype));
  return v;
}

fcl_tensor ring_dense(cl_mem buf, fcl_dtype t, size_t off, int64_t seq, int64_t heads,
                      int64_t dim) {
  fcl_tensor v = {buf, off * fcl_dtype_size(t), t, {seq * heads * dim, heads * dim, dim, 1}};
  return v;
}

typedef struct {
  cl_kernel k;
  cl_uint   i;
  cl_int    err;
} args;
#define ARG(a, x)                                                            \
  do {                                                                       \
    if ((a)->err == CL_SUCCESS) (a)->err = clSetKernelArg((a)->k, (a)->i, sizeof(x), &(x)); \
    (a)->i++;                                                                \
  } while (0)

static void arg_view(args *a, const fcl_tensor *t) {
  const cl_long off = (cl_long)(t->offset / fcl_dtype_size(t->dtype));
  const cl_long sb = t->strides[0], ss = t->strides[1], sh = t->strides[2];
  ARG(a, off);
  ARG(a, sb);
  ARG(a, ss);
  ARG(a, sh);
}

/* A dense staging or accumulator buffer: buffer, element offset, batch
 * stride. */
static void arg_dense(args *a, ring_dense_at x) {
  const cl_long off = (cl_long)x.off, sb = x.sb;
  ARG(a, x.buf);
  ARG(a, off);
  ARG(a, sb);
}

enum { RING_WG = 64 };

static fcl_status launch(fcl_ring *r, args *a, int64_t b, int64_t s, int64_t h, int64_t d,
                         const char *what) {
  if (a->err != CL_SUCCESS) return ring_fail_cl(r, a->err, "clSetKernelArg");
  /* A fixed work-group size (ring_copy.cl says why). */
  const size_t g[3] = {(size_t)((h * d + RING_WG - 1) / RING_WG * RING_WG), (size_t)s, (size_t)b};
  const size_t l[3] = {RING_WG, 1, 1};
  const cl_int err = clEnqueueNDRangeKernel(r->queue, a->k, 3, NULL, g, l, 0, NULL, NULL);
  return err == CL_SUCCESS ? FCL_OK : ring_fail_cl(r, err, what);
}

fcl_status ring_pack(fcl_ring *r, const ring_kernels *k, ring_dense_at dst,
                     const fcl_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d) {
  args a = {k->pack, 0, CL_SUCCESS};
  const cl_int nd = (cl_int)d, nhd = (cl_int)(h * d);
  arg_dense(&a, dst);
  ARG(&a, t->buffer);
  arg_view(&a, t);
  ARG(&a, nd);
  ARG(&a, nhd);
  return launch(r, &a, b, s, h, d, "enqueueing the ring's pack");
}

fcl_status ring_add(fcl_ring *r, const ring_kernels *k, ring_dense_at acc,
                    const fcl_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d,
                    bool first) {
  args a = {k->add, 0, CL_SUCCESS};
  const cl_int nd = (cl_int)d, nhd = (cl_int)(h * d), f = first;
  arg_dense(&a, acc);
  ARG(&a, t->buffer);
  arg_view(&a, t);
  ARG(&a, nd);
  ARG(&a, nhd);
  ARG(&a, f);
  return launch(r, &a, b, s, h, d, "enqueueing the ring's gradient sum");
}

fcl_status ring_store(fcl_ring *r, const ring_kernels *k, const fcl_tensor *t,
                      ring_dense_at acc, int64_t b, int64_t s, int64_t h, int64_t d) {
  args a = {k->store, 0, CL_SUCCESS};
  const cl_int nd = (cl_int)d, nhd = (cl_int)(h * d);
  ARG(&a, t->buffer);
  arg_view(&a, t);
  arg_dense(&a, acc);
  ARG(&a, nd);
  ARG(&a, nhd);
  return launch(r, &a, b, s, h, d, "enqueueing the ring's gradient store");
}

fcl_status ring_sum(fcl_ring *r, const ring_kernels *k, cl_mem x, cl_mem y, size_t n) {
  args a = {k->sum, 0, CL_SUCCESS};
  const cl_long cn = (cl_long)n;
  ARG(&a, x);
  ARG(&a, y);
  ARG(&a, cn);
  if (a.err != CL_SUCCESS) return ring_fail_cl(r, a.err, "clSetKernelArg");
  const size_t g = (n + 255) / 256 * 256, l = 256;
  const cl_int err = clEnqueueNDRangeKernel(r->queue, k->sum, 1, NULL, &g, &l, 0, NULL, NULL);
  return err == CL_SUCCESS ? FCL_OK : ring_fail_cl(r, err, "enqueueing the ring's f32 sum");
}

fcl_status ring_lse_copy(fcl_ring *r, cl_mem src, int64_t src_ld, int64_t src_row, cl_mem dst,
                         int64_t dst_ld, int64_t dst_row, int64_t len, int64_t bh) {
  const size_t so[3] = {(size_t)src_row * 4, 0, 0}, dso[3] = {(size_t)dst_row * 4, 0, 0};
  const size_t region[3] = {(size_t)len * 4, (size_t)bh, 1};
  const cl_int err = clEnqueueCopyBufferRect(r->queue, src, dst, so, dso, region,
                                             (size_t)src_ld * 4, 0, (size_t)dst_ld * 4, 0, 0,
                                             NULL, NULL);
  return err == CL_SUCCESS ? FCL_OK : ring_fail_cl(r, err, "copying lse rows");
}
