/* One step's transfers around the ring, over MPI (non-blocking, so that
 * the device computes while they run): from the rank before, to the rank
 * after, in chunks of at most 1 GiB (MPI counts are int). */
#include "ring/ring.h"

#include <string.h>

#define CHUNK ((size_t)1 << 30)

static fcl_status post(fcl_ring *r, ring_xfer *x, void *buf, size_t bytes, int peer, int tag,
                       bool send) {
  for (size_t at = 0; at < bytes; at += CHUNK) {
    const int n = (int)(bytes - at < CHUNK ? bytes - at : CHUNK);
    if (x->n == (int)(sizeof x->req / sizeof x->req[0]))
      return ring_fail(r, FCL_ERROR_UNSUPPORTED, "a ring message of %zu bytes is too large",
                       bytes);
    const int rc = send ? MPI_Isend((char *)buf + at, n, MPI_BYTE, peer, tag, r->comm,
                                    &x->req[x->n])
                        : MPI_Irecv((char *)buf + at, n, MPI_BYTE, peer, tag, r->comm,
                                    &x->req[x->n]);
    if (rc != MPI_SUCCESS)
      return ring_fail(r, FCL_ERROR_INTERNAL, "MPI_%s failed (code %d)", send ? "Isend" : "Irecv",
                       rc);
    x->n++;
  }
  return FCL_OK;
}

fcl_status ring_xfer_start(fcl_ring *r, ring_xfer *x, const void *send, size_t send_bytes,
                           void *recv, size_t recv_bytes, int tag) {
  const int next = (r->rank + 1) % r->size, prev = (r->rank + r->size - 1) % r->size;
  fcl_status s = FCL_OK;
  if (recv) s = post(r, x, recv, recv_bytes, prev, tag, false);
  if (!s && send) {
    s = post(r, x, (void *)send, send_bytes, next, tag, true);
    r->stats.bytes_sent += (int64_t)send_bytes;
  }
  return s;
}

fcl_status ring_xfer_finish(fcl_ring *r, ring_xfer *x) {
  if (x->n == 0) return FCL_OK;
  const double t0 = ring_now_ms();
  const int rc = MPI_Waitall(x->n, x->req, MPI_STATUSES_IGNORE);
  r->stats.wait_ms += ring_now_ms() - t0;
  x->n = 0;
  return rc == MPI_SUCCESS ? FCL_OK
                           : ring_fail(r, FCL_ERROR_INTERNAL, "MPI_Waitall failed (code %d)", rc);
}
