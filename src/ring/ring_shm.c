/* The node-local transport: when every rank of the ring is on one node,
 * the host staging is this rank's segment of an MPI-3 shared-memory window
 * (MPI_Win_allocate_shared), and a rank uploads what another rank read
 * back straight from that rank's segment (MPI_Win_shared_query): no host
 * copy and no MPI message carrying data. Here: the choice of transport,
 * the windows (grown collectively), and the small messages and barriers
 * that order a segment's writes before the other ranks' reads.
 *
 * The memory model is MPI's unified one (shared windows): every window is
 * locked (MPI_Win_lock_all) for its whole life, and MPI_Win_sync on both
 * sides of each barrier or message is the memory barrier it requires
 * between a store and another process's load. The stores and loads are
 * the device's copies; a read-back has finished (its event or blocking
 * call returned) before the writer syncs, and an upload is enqueued only
 * after the reader synced. */
#include "ring/ring.h"

#include <stdlib.h>
#include <string.h>

/* Segments in whole pages: each starts on a page (alloc_shared_noncontig
 * too), which the devices' copies from plain host memory prefer. */
#define PAGE ((size_t)4096)

/* FCL_RING_TRANSPORT is read here, once, when the ring is created (the
 * library's only getenv). */
fcl_status ring_transport_choose(fcl_ring *r) {
  const char *env = getenv("FCL_RING_TRANSPORT");
  /* 0 automatic, 1 mpi, 2 shm, 3 not understood */
  const int want = !env || !*env             ? 0
                   : strcmp(env, "mpi") == 0 ? 1
                   : strcmp(env, "shm") == 0 ? 2
                                             : 3;
  int node_size = 0;
  MPI_Comm node;
  if (MPI_Comm_split_type(r->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
  }
  /* Every rank decides alike: the largest and smallest choice, whether
   * some rank shares its node with fewer than all, and the last rank whose
   * variable is not understood. */
  int in[4] = {want, -want, node_size != r->size, want == 3 ? r->rank : -1}, out[4];
  if (MPI_Allreduce(in, out, 4, MPI_INT, MPI_MAX, r->comm) != MPI_SUCCESS)
    return ring_fail(NULL, FCL_ERROR_INTERNAL, "MPI_Allreduce failed while choosing the transport");
  if (out[3] >= 0)
    return want == 3 ? ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT,
                                 "FCL_RING_TRANSPORT: is \"%s\"; must be mpi or shm", env)
                     : ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT,
                                 "FCL_RING_TRANSPORT: rank %d's is neither mpi nor shm", out[3]);
  if (out[0] != -out[1])
    return ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT,
                     "FCL_RING_TRANSPORT: differs between ranks; every rank must set the same");
  if (want == 2 && out[2])
    return ring_fail(NULL, FCL_ERROR_UNSUPPORTED,
                     "FCL_RING_TRANSPORT: is shm, but the ranks are not all on one node");
  r->shm = want != 1 && !out[2];
  return FCL_OK;
}

static void shm_free(ring_host *h) {
  MPI_Win_unlock_all(h->win);
  MPI_Win_free(&h->win);
  free(h->peer);
  h->peer = NULL, h->ptr = NULL, h->size = 0;
}

void ring_shm_release(fcl_ring *r, ring_host *h) {
  (void)r;
  if (h->peer) shm_free(h);
}

void *ring_shm_peer(const fcl_ring *r, int slot, int rank) { return r->host[slot].peer[rank]; }

/* Collective: slot h as this rank's `bytes` of a new window. Each stage
 * ends with the ranks agreeing, so that a failure on one rank is a
 * failure on all, and every rank then has no window. */
static fcl_status shm_alloc(fcl_ring *r, ring_host *h, size_t bytes) {
  fcl_status s = FCL_OK;
  void **peer = calloc((size_t)r->size, sizeof *peer);
  if (!peer) s = ring_fail(r, FCL_ERROR_OUT_OF_MEMORY, "allocating the ring's segment table");
  if ((s = ring_agree(r, s))) {
    free(peer);
    return s;
  }
  MPI_Info info;
  if (MPI_Info_create(&info) != MPI_SUCCESS) info = MPI_INFO_NULL;
  else MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void *base = NULL;
  MPI_Win win;
  const int rc = MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, r->comm, &base, &win);
  if (info != MPI_INFO_NULL) MPI_Info_free(&info);
  if (rc != MPI_SUCCESS)
    s = ring_fail(r, FCL_ERROR_OUT_OF_MEMORY,
                  "MPI_Win_allocate_shared of %zu bytes of host staging failed (code %d)", bytes,
                  rc);
  if ((s = ring_agree(r, s))) {
    /* Where some ranks made the window and others did not, it cannot be
     * freed (MPI_Win_free waits for every rank): MPI_Finalize frees it. */
    free(peer);
    return s;
  }
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  for (int i = 0; i < r->size && !s; ++i) {
    MPI_Aint size;
    int unit;
    if (MPI_Win_shared_query(win, i, &size, &unit, &peer[i]) != MPI_SUCCESS)
      s = ring_fail(r, FCL_ERROR_INTERNAL, "MPI_Win_shared_query of rank %d failed", i);
  }
  const bool locked = !s && MPI_Win_lock_all(MPI_MODE_NOCHECK, win) == MPI_SUCCESS;
  if (!s && !locked) s = ring_fail(r, FCL_ERROR_INTERNAL, "MPI_Win_lock_all failed");
  if ((s = ring_agree(r, s))) {
    if (locked) MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    free(peer);
    return s;
  }
  h->win = win, h->peer = peer, h->ptr = base, h->size = bytes;
  return FCL_OK;
}

fcl_status ring_host_commit(fcl_ring *r, fcl_status agreed) {
  enum { N = (int)(sizeof r->host / sizeof r->host[0]) };
  fcl_status s = agreed;
  if (!s && r->shm) {
    int grow[N], any[N];
    for (int i = 0; i < N; ++i) grow[i] = r->host[i].want > r->host[i].size;
    if (MPI_Allreduce(grow, any, N, MPI_INT, MPI_MAX, r->comm) != MPI_SUCCESS)
      s = ring_fail(r, FCL_ERROR_INTERNAL, "MPI_Allreduce failed while growing host staging");
    for (int i = 0; i < N && !s; ++i) {
      ring_host *h = &r->host[i];
      if (!any[i]) continue;
      const size_t want = h->want > h->size ? h->want : h->size;
      /* Nobody reads the old segment any more: the last call ended with
       * every rank's clFinish before an MPI_Allreduce (ring_agree). */
      ring_shm_release(r, h);
      s = shm_alloc(r, h, (want + PAGE - 1) / PAGE * PAGE);
    }
  }
  for (int i = 0; i < N; ++i) r->host[i].want = 0;
  return s;
}

fcl_status ring_shm_publish(fcl_ring *r, int slot) {
  MPI_Win win = r->host[slot].win;
  const double t0 = ring_now_ms();
  MPI_Win_sync(win);
  const int rc = MPI_Barrier(r->comm);
  MPI_Win_sync(win);
  r->stats.wait_ms += ring_now_ms() - t0;
  return rc == MPI_SUCCESS ? FCL_OK
                           : ring_fail(r, FCL_ERROR_INTERNAL, "MPI_Barrier failed (code %d)", rc);
}

fcl_status ring_shm_complete(fcl_ring *r, MPI_Request *req) {
  if (*req == MPI_REQUEST_NULL) return FCL_OK;
  const double t0 = ring_now_ms();
  const int rc = MPI_Wait(req, MPI_STATUS_IGNORE);
  r->stats.wait_ms += ring_now_ms() - t0;
  return rc == MPI_SUCCESS ? FCL_OK
                           : ring_fail(r, FCL_ERROR_INTERNAL, "MPI_Wait failed (code %d)", rc);
}

fcl_status ring_shm_signal(fcl_ring *r, MPI_Request *req, int slot, int peer, int tag) {
  const fcl_status s = ring_shm_complete(r, req);
  MPI_Win_sync(r->host[slot].win);
  const int rc = MPI_Isend(NULL, 0, MPI_BYTE, peer, tag, r->comm, req);
  if (rc != MPI_SUCCESS) {
    *req = MPI_REQUEST_NULL;
    return s ? s : ring_fail(r, FCL_ERROR_INTERNAL, "MPI_Isend failed (code %d)", rc);
  }
  return s;
}

fcl_status ring_shm_await(fcl_ring *r, int slot, int peer, int tag) {
  const double t0 = ring_now_ms();
  const int rc = MPI_Recv(NULL, 0, MPI_BYTE, peer, tag, r->comm, MPI_STATUS_IGNORE);
  r->stats.wait_ms += ring_now_ms() - t0;
  MPI_Win_sync(r->host[slot].win);
  return rc == MPI_SUCCESS ? FCL_OK
                           : ring_fail(r, FCL_ERROR_INTERNAL, "MPI_Recv failed (code %d)", rc);
}
