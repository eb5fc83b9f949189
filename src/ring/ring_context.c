/* The ring handle: create and destroy, the staging
 * buffers it keeps between calls, and its kernels (cl/ring/ring_copy.cl). */
#include "ring/ring.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The embedded kernels (cmake/embed_cl.cmake, table fcl_ring_sources):
 * ring_copy.cl and what it requires. */
struct fcl_embedded_source {
  const char *name, *text;
  size_t      size;
  const char *requires;
  const int  *closure; /* its program's files, in build order; -1 ends */
};
extern const struct fcl_embedded_source fcl_ring_sources[];

int fcl_ring_rank(const fcl_ring *ring) { return ring ? ring->rank : -1; }
int fcl_ring_size(const fcl_ring *ring) { return ring ? ring->size : 0; }

fcl_status fcl_ring_last_stats(const fcl_ring *ring, fcl_ring_stats *out) {
  if (!ring) return ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ring: is NULL");
  if (!out) return FCL_ERROR_INVALID_ARGUMENT;
  *out = ring->stats;
  return FCL_OK;
}

/* The node-local transport's queue for uploads (on ctx's device), so that
 * they run beside the compute; collective: made on every rank or none. */
static fcl_status second_queue(fcl_ring *r) {
  cl_device_id dev = NULL;
  cl_int err = clGetCommandQueueInfo(r->queue, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL);
  if (err == CL_SUCCESS) r->xq = clCreateCommandQueue(r->cl, dev, 0, &err);
  int ok = err == CL_SUCCESS, all = 0;
  if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, r->comm) != MPI_SUCCESS) all = 0;
  if (all) return FCL_OK;
  if (ok) clReleaseCommandQueue(r->xq);
  r->xq = NULL;
  return ok ? ring_fail(NULL, FCL_ERROR_OPENCL, "creating the ring's upload queue failed on "
                                               "another rank")
            : ring_fail(NULL, FCL_ERROR_OPENCL, "creating the ring's upload queue: OpenCL "
                                               "error %d", (int)err);
}

fcl_status fcl_ring_create(fcl_context *ctx, MPI_Comm comm, fcl_ring **out) {
  ring_error_reset();
  if (!out) return ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "out: is NULL");
  *out = NULL;
  if (!ctx) return ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin)
    return ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT,
                     "comm: MPI is %s", fin ? "finalized" : "not initialized");
  if (comm == MPI_COMM_NULL)
    return ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "comm: is MPI_COMM_NULL");
  fcl_ring *r = calloc(1, sizeof *r);
  if (!r) return ring_fail(NULL, FCL_ERROR_OUT_OF_MEMORY, "ring: host allocation");
  r->ctx = ctx;
  r->cl = fcl_context_cl(ctx);
  r->queue = fcl_context_queue(ctx);
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(r->queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  r->profiling = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  if (MPI_Comm_dup(comm, &r->comm) != MPI_SUCCESS) {
    free(r);
    return ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "comm: MPI_Comm_dup failed");
  }
  /* Errors come back as codes, never abort the application. */
  MPI_Comm_set_errhandler(r->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(r->comm, &r->rank);
  MPI_Comm_size(r->comm, &r->size);
  fcl_status s = ring_transport_choose(r);
  if (!s && r->shm && r->size > 1) s = second_queue(r);
  if (s) {
    MPI_Comm_free(&r->comm);
    free(r);
    return s;
  }
  *out = r;
  return FCL_OK;
}

static void host_release(fcl_ring *r, ring_host *h) {
  if (h->mem) {
    clEnqueueUnmapMemObject(r->queue, h->mem, h->ptr, 0, NULL, NULL);
    clFinish(r->queue);
    clReleaseMemObject(h->mem);
  } else {
    free(h->ptr);
  }
  memset(h, 0, sizeof *h);
}

void fcl_ring_destroy(fcl_ring *ring) {
  if (!ring) return;
  clFinish(ring->queue);
  for (int t = 0; t < 3; ++t) {
    ring_kernels *k = &ring->kern[t];
    cl_kernel ks[4] = {k->pack, k->add, k->store, k->sum};
    for (int i = 0; i < 4; ++i)
      if (ks[i]) clReleaseKernel(ks[i]);
    if (k->prog) clReleaseProgram(k->prog);
  }
  for (size_t i = 0; i < sizeof ring->dev / sizeof ring->dev[0]; ++i)
    if (ring->dev[i].buf) clReleaseMemObject(ring->dev[i].buf);
  if (ring->xq) {
    clFinish(ring->xq);
    clReleaseCommandQueue(ring->xq);
  }
  /* Windows are freed collectively, in the same slot order on every rank. */
  for (size_t i = 0; i < sizeof ring->host / sizeof ring->host[0]; ++i)
    if (ring->shm) ring_shm_release(ring, &ring->host[i]);
    else host_release(ring, &ring->host[i]);
  MPI_Comm_free(&ring->comm);
  free(ring);
}

fcl_status ring_dev_get(fcl_ring *r, int slot, size_t bytes, cl_mem *out) {
  ring_dev *d = &r->dev[slot];
  if (bytes == 0) bytes = 4;
  if (d->size < bytes) {
    if (d->buf) clReleaseMemObject(d->buf); /* the queue keeps it while in use */
    d->buf = NULL, d->size = 0;
    cl_int err;
    d->buf = clCreateBuffer(r->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
      d->buf = NULL;
      return ring_fail_cl(r, err, "allocating device staging");
    }
    d->size = bytes;
  }
  *out = d->buf;
  return FCL_OK;
}

/* Over MPI: pinned memory where the device offers it (faster transfers);
 * the caller has waited for every transfer that used the old buffer. */
fcl_status ring_host_get(fcl_ring *r, int slot, size_t bytes, void **out) {
  ring_host *h = &r->host[slot];
  if (bytes == 0) bytes = 4;
  if (r->shm) { /* grown by ring_host_commit, with every rank */
    h->want = bytes;
    *out = h->ptr;
    return FCL_OK;
  }
  if (h->size < bytes) {
    host_release(r, h);
    cl_int err;
    h->mem = clCreateBuffer(r->cl, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err == CL_SUCCESS) {
      h->ptr = clEnqueueMapBuffer(r->queue, h->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                  bytes, 0, NULL, NULL, &err);
      if (err != CL_SUCCESS) {
        clReleaseMemObject(h->mem);
        h->mem = NULL, h->ptr = NULL;
      }
    } else {
      h->mem = NULL;
    }
    if (!h->ptr && !(h->ptr = malloc(bytes)))
      return ring_fail(r, FCL_ERROR_OUT_OF_MEMORY, "allocating %zu bytes of host staging",
                       bytes);
    h->size = bytes;
  }
  *out = h->ptr;
  return FCL_OK;
}

/* The texts of ring_copy.cl's program, in build order; n gets how many. */
static const char **program_sources(cl_uint *n) {
  const struct fcl_embedded_source *top = fcl_ring_sources;
  while (strcmp(top->name, "ring/ring_copy.cl") != 0) ++top;
  *n = 0;
  while (top->closure[*n] >= 0) ++*n;
  const char **src = malloc(*n * sizeof *src);
  for (cl_uint i = 0; src && i < *n; ++i) src[i] = fcl_ring_sources[top->closure[i]].text;
  return src;
}

fcl_status ring_kernels_get(fcl_ring *r, fcl_dtype t, const ring_kernels **out) {
  ring_kernels *k = &r->kern[t];
  if (!k->prog) {
    cl_uint      n;
    const char **src = program_sources(&n);
    if (!src) return ring_fail(r, FCL_ERROR_OUT_OF_MEMORY, "the kernels' sources");
    cl_int err;
    cl_program p = clCreateProgramWithSource(r->cl, n, src, NULL, &err);
    free(src);
    if (err != CL_SUCCESS) return ring_fail_cl(r, err, "clCreateProgramWithSource");
    char opts[64];
    snprintf(opts, sizeof opts, "-DFCL_DTYPE=%d", (int)t);
    cl_device_id dev;
    clGetCommandQueueInfo(r->queue, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL);
    err = clBuildProgram(p, 1, &dev, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
      char log[768] = "";
      clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
      clReleaseProgram(p);
      return ring_fail(r, FCL_ERROR_BUILD, "building cl/ring/ring_copy.cl (%s): %s", opts, log);
    }
    cl_kernel ks[4];
    const char *names[4] = {"fcl_ring_pack", "fcl_ring_add", "fcl_ring_store", "fcl_ring_sum"};
    for (int i = 0; i < 4; ++i) {
      ks[i] = clCreateKernel(p, names[i], &err);
      if (err != CL_SUCCESS) {
        for (int j = 0; j < i; ++j) clReleaseKernel(ks[j]);
        clReleaseProgram(p);
        return ring_fail_cl(r, err, names[i]);
      }
    }
    k->prog = p, k->pack = ks[0], k->add = ks[1], k->store = ks[2], k->sum = ks[3];
  }
  *out = k;
  return FCL_OK;
}
