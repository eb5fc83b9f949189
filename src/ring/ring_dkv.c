/* The backward's running dK/dV sums (ring.h, "ring_dkv.c"). At step s
 * this rank holds the sums of the slice of origin rank - s over ranks
 * origin .. rank - 1 (the ones it receives) and adds its own (inc += local,
 * in that order on either transport, so the results are the same bits).
 *
 * Over MPI the sums move through pinned staging: read back, sent, received,
 * uploaded. Node-local each rank reads its sums back into its own send
 * segment s % 2 and tells the rank after (a zero-byte "ready" message); that
 * rank uploads them straight from the segment and, once the upload has
 * finished, acknowledges, so that segment s % 2 is written again at step
 * s + 2 only after it was read. The last two segments' reads (steps R - 2
 * and R - 1) need no acknowledgement: the segments are next written in a
 * later call, and every call ends with each rank's clFinish before an
 * MPI_Allreduce (ring_agree). */
#include "ring/ring.h"

enum { H_SEND = 3, H_RECV = 4 /* and 5: MPI */, H_SLOT = 3 /* and 4: shm, this rank's */ };

/* The sums of step s (from its sender); shm: and the acknowledgement of
 * their upload. */
static int tag_ready(int s) { return 2 * s + 3; }
static int tag_ack(int s) { return 2 * s + 4; }

void ring_dkv_init(ring_dkv *x) {
  x->xs.n = x->xr.n = 0;
  x->ready = x->ack = MPI_REQUEST_NULL;
}

fcl_status ring_dkv_prepare(fcl_ring *r, size_t bytes) {
  void *h;
  fcl_status s;
  if (r->size == 1) return FCL_OK;
  if (r->shm)
    return (s = ring_host_get(r, H_SLOT, bytes, &h)) ? s : ring_host_get(r, H_SLOT + 1, bytes, &h);
  if ((s = ring_host_get(r, H_SEND, bytes, &h)) || (s = ring_host_get(r, H_RECV, bytes, &h)) ||
      (s = ring_host_get(r, H_RECV + 1, bytes, &h)))
    return s;
  return FCL_OK;
}

fcl_status ring_dkv_receive(fcl_ring *r, ring_dkv *x, int step, size_t bytes) {
  if (r->shm || step == 0) return FCL_OK;
  return ring_xfer_start(r, &x->xr, NULL, 0, r->host[H_RECV + step % 2].ptr, bytes,
                         tag_ready(step - 1));
}

static fcl_status pass_on_mpi(fcl_ring *r, ring_dkv *x, const ring_kernels *k, int step,
                              size_t bytes, cl_mem local, cl_mem inc) {
  cl_mem acc = local;
  fcl_status s = FCL_OK, w;
  if (step > 0) {
    s = ring_xfer_finish(r, &x->xr);
    cl_int err = clEnqueueWriteBuffer(r->queue, inc, CL_FALSE, 0, bytes,
                                      r->host[H_RECV + step % 2].ptr, 0, NULL, NULL);
    if (err && !s) s = ring_fail_cl(r, err, "uploading dK/dV sums");
    if (!s) s = ring_sum(r, k, inc, local, bytes / 4);
    acc = inc;
  }
  if ((w = ring_xfer_finish(r, &x->xs)) && !s) s = w; /* the send staging is free */
  const cl_int err = clEnqueueReadBuffer(r->queue, acc, CL_TRUE, 0, bytes, r->host[H_SEND].ptr,
                                         0, NULL, NULL);
  if (err && !s) s = ring_fail_cl(r, err, "reading dK/dV sums");
  if ((w = ring_xfer_start(r, &x->xs, r->host[H_SEND].ptr, bytes, NULL, 0, tag_ready(step))) &&
      !s)
    s = w;
  return s;
}

/* Node-local: uploads the rank before's sums of step s - 1 into inc on
 * the second queue (beside the tail of this step's compute), the main
 * queue waiting for it. */
static fcl_status fetch(fcl_ring *r, int step, size_t bytes, cl_mem inc, cl_command_queue q) {
  const int prev = (r->rank + r->size - 1) % r->size, slot = H_SLOT + (step - 1) % 2;
  fcl_status s = ring_shm_await(r, slot, prev, tag_ready(step - 1));
  cl_event up = NULL;
  cl_int err = clEnqueueWriteBuffer(q, inc, CL_FALSE, 0, bytes, ring_shm_peer(r, slot, prev), 0,
                                    NULL, q == r->queue ? NULL : &up);
  if (!err && up) {
    clFlush(q);
    err = clEnqueueBarrierWithWaitList(r->queue, 1, &up, NULL);
  }
  if (up) clReleaseEvent(up);
  if (err && !s) s = ring_fail_cl(r, err, "uploading dK/dV sums");
  return s;
}

/* The protocol runs on whatever fails, so that no rank waits for a
 * message that does not come; a failure leaves garbage in the sums, and
 * every rank then returns an error. */
static fcl_status pass_on_shm(fcl_ring *r, ring_dkv *x, const ring_kernels *k, int step,
                              size_t bytes, cl_mem local, cl_mem inc) {
  const int prev = (r->rank + r->size - 1) % r->size, next = (r->rank + 1) % r->size;
  const int mine = H_SLOT + step % 2;
  cl_mem acc = local;
  fcl_status s = FCL_OK, w;
  if (step > 0) {
    s = fetch(r, step, bytes, inc, r->xq);
    if (!s) s = ring_sum(r, k, inc, local, bytes / 4);
    acc = inc;
  }
  /* Segment `mine` was last read by the rank after at its step s - 1. */
  if (step >= 2 && (w = ring_shm_await(r, mine, next, tag_ack(step - 2))) && !s) s = w;
  /* Blocking: when it returns, the upload from the rank before is done
   * too (the main queue waited for it). */
  const cl_int err = clEnqueueReadBuffer(r->queue, acc, CL_TRUE, 0, bytes, r->host[mine].ptr,
                                         0, NULL, NULL);
  if (err && !s) s = ring_fail_cl(r, err, "reading dK/dV sums");
  if (step > 0 && step - 1 <= r->size - 3 &&
      (w = ring_shm_signal(r, &x->ack, H_SLOT + (step - 1) % 2, prev, tag_ack(step - 1))) && !s)
    s = w;
  if ((w = ring_shm_signal(r, &x->ready, mine, next, tag_ready(step))) && !s) s = w;
  r->stats.bytes_sent += (int64_t)bytes;
  return s;
}

fcl_status ring_dkv_pass_on(fcl_ring *r, ring_dkv *x, const ring_kernels *k, int step,
                            size_t bytes, cl_mem local, cl_mem inc) {
  return r->shm ? pass_on_shm(r, x, k, step, bytes, local, inc)
                : pass_on_mpi(r, x, k, step, bytes, local, inc);
}

fcl_status ring_dkv_home(fcl_ring *r, ring_dkv *x, size_t bytes, cl_mem inc) {
  fcl_status s, w;
  if (r->shm) { /* enqueued on the main queue; the call's clFinish waits */
    s = fetch(r, r->size, bytes, inc, r->queue);
    if ((w = ring_shm_complete(r, &x->ack)) && !s) s = w;
    if ((w = ring_shm_complete(r, &x->ready)) && !s) s = w;
    return s;
  }
  void *home = r->host[H_RECV].ptr;
  s = ring_xfer_start(r, &x->xr, NULL, 0, home, bytes, tag_ready(r->size - 1));
  if ((w = ring_xfer_finish(r, &x->xr)) && !s) s = w;
  if ((w = ring_xfer_finish(r, &x->xs)) && !s) s = w;
  const cl_int err = clEnqueueWriteBuffer(r->queue, inc, CL_TRUE, 0, bytes, home, 0, NULL, NULL);
  if (err && !s) s = ring_fail_cl(r, err, "uploading dK/dV");
  return s;
}
