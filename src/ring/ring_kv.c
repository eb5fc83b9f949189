/* The keys and values travelling the ring (ring.h, "ring_kv.c"). */
#include "ring/ring.h"

int ring_origin(const fcl_ring *r, int step) { return (r->rank - step + r->size) % r->size; }

static int64_t origin_len(const fcl_ring *r, const ring_kv *kv, int origin) {
  ring_slice s;
  ring_slice_of(kv->d->layout, kv->d->attn.seqlen_k, r->size, origin, &s);
  return s.length;
}

size_t ring_kv_bytes(const ring_kv *kv, int64_t len) {
  const fcl_attention_desc *a = &kv->d->attn;
  return (size_t)(a->batch * len * a->heads_kv * (a->head_dim + a->head_dim_v)) *
         fcl_dtype_size(kv->dt);
}

fcl_status ring_kv_prepare(fcl_ring *r, ring_kv *kv, const fcl_ring_desc *d, fcl_dtype dt,
                           const ring_kernels *kern) {
  *kv = (ring_kv){.d = d, .dt = dt, .kern = kern};
  if (r->size == 1) return FCL_OK;
  size_t most = 0;
  for (int o = 0; o < r->size; ++o) {
    const size_t b = ring_kv_bytes(kv, origin_len(r, kv, o));
    if (b > most) most = b;
  }
  const size_t own = ring_kv_bytes(kv, origin_len(r, kv, r->rank));
  cl_mem m;
  void  *h;
  fcl_status s;
  if ((s = ring_dev_get(r, RING_DEV_KV, most, &m)) || (s = ring_dev_get(r, RING_DEV_KV + 1, most, &m)) ||
      (s = ring_dev_get(r, RING_DEV_OWN, own, &m)) || (s = ring_host_get(r, RING_HOST_OWN, own, &h)))
    return s;
  if (r->shm) return FCL_OK; /* the others' slices are read where they are */
  if ((s = ring_host_get(r, RING_HOST_KV, most, &h))) return s;
  return ring_host_get(r, RING_HOST_KV + 1, most, &h);
}

/* Node-local: the upload of step t's slice into device staging t % 2,
 * straight from its origin's segment, on the second queue; it waits for
 * the compute of step t - 2, which read that staging. */
static fcl_status prefetch(fcl_ring *r, ring_kv *kv, int t) {
  if (t >= r->size) return FCL_OK;
  const int i = t % 2, origin = ring_origin(r, t);
  if (kv->up[i]) clReleaseEvent(kv->up[i]); /* the main queue waited for it */
  kv->up[i] = NULL;
  cl_event *after = kv->done[i] ? &kv->done[i] : NULL;
  const cl_int err = clEnqueueWriteBuffer(r->xq, r->dev[RING_DEV_KV + i].buf, CL_FALSE, 0,
                                          ring_kv_bytes(kv, origin_len(r, kv, origin)),
                                          ring_shm_peer(r, RING_HOST_OWN, origin), after ? 1 : 0,
                                          after, &kv->up[i]);
  if (after) clReleaseEvent(kv->done[i]);
  kv->done[i] = NULL;
  if (err != CL_SUCCESS) {
    kv->up[i] = NULL;
    return ring_fail_cl(r, err, "uploading keys and values");
  }
  clFlush(r->xq);
  return FCL_OK;
}

fcl_status ring_kv_begin(fcl_ring *r, ring_kv *kv, const fcl_tensor *k, const fcl_tensor *v,
                         int64_t len) {
  if (r->size == 1) return FCL_OK;
  const fcl_attention_desc *a = &kv->d->attn;
  const int64_t B = a->batch, H = a->heads_kv, D = a->head_dim, Dv = a->head_dim_v;
  cl_mem own = r->dev[RING_DEV_OWN].buf;
  const ring_dense_at kd = {own, 0, len * H * D}, vd = {own, B * len * H * D, len * H * Dv};
  fcl_status s;
  if (!(s = ring_pack(r, kv->kern, kd, k, B, len, H, D)) &&
      !(s = ring_pack(r, kv->kern, vd, v, B, len, H, Dv))) {
    const cl_int err = clEnqueueReadBuffer(r->queue, own, CL_TRUE, 0, ring_kv_bytes(kv, len),
                                           r->host[RING_HOST_OWN].ptr, 0, NULL, NULL);
    if (err != CL_SUCCESS) s = ring_fail_cl(r, err, "reading this rank's keys and values");
  }
  if (!r->shm) return s;
  /* Every rank's slice in its segment (a failure still joins the barrier:
   * the others wait in it), each read by the R - 1 other ranks; step 1's
   * upload then runs while step 0 computes. */
  const fcl_status w = ring_shm_publish(r, RING_HOST_OWN);
  r->stats.bytes_sent += (int64_t)ring_kv_bytes(kv, len) * (r->size - 1);
  const fcl_status p = prefetch(r, kv, 1);
  return s ? s : w ? w : p;
}

static fcl_status wait_upload(fcl_ring *r, ring_kv *kv, int i) {
  if (!kv->up[i]) return FCL_OK;
  const cl_int err = clWaitForEvents(1, &kv->up[i]);
  clReleaseEvent(kv->up[i]);
  kv->up[i] = NULL;
  return err == CL_SUCCESS ? FCL_OK : ring_fail_cl(r, err, "uploading keys and values");
}

fcl_status ring_kv_step(fcl_ring *r, ring_kv *kv, int s, const fcl_tensor *own_k,
                        const fcl_tensor *own_v, fcl_tensor *k, fcl_tensor *v) {
  const fcl_attention_desc *a = &kv->d->attn;
  const int origin = ring_origin(r, s);
  const int64_t len = origin_len(r, kv, origin);
  /* A failure still posts the transfers: the other ranks wait for them. */
  fcl_status up = FCL_OK;
  kv->step = s;
  if (s == 0) {
    *k = *own_k, *v = *own_v;
  } else { /* the slice in device staging s % 2 */
    cl_mem dev = r->dev[RING_DEV_KV + s % 2].buf;
    cl_int err;
    if (r->shm) { /* uploading since step s - 1 (prefetch) */
      err = kv->up[s % 2] ? CL_SUCCESS : CL_INVALID_EVENT; /* the prefetch failed */
      if (!err) err = clEnqueueBarrierWithWaitList(r->queue, 1, &kv->up[s % 2], NULL);
      if (err != CL_SUCCESS) up = ring_fail_cl(r, err, "waiting for the keys and values");
    } else { /* arrived during step s - 1 in host staging 1 + s % 2 */
      err = clEnqueueWriteBuffer(r->queue, dev, CL_FALSE, 0, ring_kv_bytes(kv, len),
                                 r->host[RING_HOST_KV + s % 2].ptr, 0, NULL, &kv->up[s % 2]);
      if (err != CL_SUCCESS) up = ring_fail_cl(r, err, "uploading keys and values");
    }
    *k = ring_dense(dev, kv->dt, 0, len, a->heads_kv, a->head_dim);
    *v = ring_dense(dev, kv->dt, (size_t)(a->batch * len * a->heads_kv * a->head_dim), len,
                    a->heads_kv, a->head_dim_v);
  }
  if (s == r->size - 1 || r->shm) return up; /* nothing to pass on */
  /* The next slice lands where step s - 1's upload read from. */
  const fcl_status w = wait_upload(r, kv, (s + 1) % 2);
  const void *send = r->host[s == 0 ? RING_HOST_OWN : RING_HOST_KV + s % 2].ptr;
  void *recv = r->host[RING_HOST_KV + (s + 1) % 2].ptr;
  const int64_t next_len = origin_len(r, kv, ring_origin(r, s + 1));
  const fcl_status x = ring_xfer_start(r, &kv->x, send, ring_kv_bytes(kv, len), recv,
                                       ring_kv_bytes(kv, next_len), 2 * s);
  return up ? up : w ? w : x;
}

/* Node-local: step s + 2's upload into the staging of step s, once step
 * s's compute (enqueued by now) has read it; nothing to wait for on the
 * host. Over MPI: the next slice's transfer. */
fcl_status ring_kv_wait(fcl_ring *r, ring_kv *kv) {
  if (!r->shm) return ring_xfer_finish(r, &kv->x);
  const int s = kv->step, i = s % 2;
  if (s + 2 >= r->size) return FCL_OK;
  /* Step 0 computed on this rank's own views: staging 0 is free. */
  if (s > 0) {
    const cl_int err = clEnqueueMarkerWithWaitList(r->queue, 0, NULL, &kv->done[i]);
    if (err != CL_SUCCESS) {
      kv->done[i] = NULL;
      return ring_fail_cl(r, err, "marking the step's compute");
    }
    clFlush(r->queue); /* the other queue waits for the marker */
  }
  return prefetch(r, kv, s + 2);
}

void ring_kv_end(fcl_ring *r, ring_kv *kv) {
  if (r->xq) clFinish(r->xq);
  for (int i = 0; i < 2; ++i) {
    if (kv->up[i]) {
      clWaitForEvents(1, &kv->up[i]);
      clReleaseEvent(kv->up[i]);
      kv->up[i] = NULL;
    }
    if (kv->done[i]) {
      clReleaseEvent(kv->done[i]);
      kv->done[i] = NULL;
    }
  }
}
