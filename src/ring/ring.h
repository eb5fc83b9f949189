/* flashcl_mpi's internals: the ring handle, its staging buffers and
 * kernels, the layout of the slices, the checks and the transport. Built
 * as its own library on top of flashcl's public API (flashcl.h): nothing
 * here includes flashcl's internal headers. */
#ifndef FCL_RING_H
#define FCL_RING_H

#include "flashcl_mpi.h"

#include <stdbool.h>

#define FCL_RING_MSG 1024 /* bytes of an error message */

/* A device buffer that grows on demand (contents not kept). */
typedef struct {
  cl_mem buf;
  size_t size;
} ring_dev;

/* Host staging. Over MPI: pinned (a mapped CL_MEM_ALLOC_HOST_PTR buffer,
 * else malloc). Node-local (fcl_ring.shm): this rank's segment of an MPI
 * shared-memory window, which every rank of the ring can read (peer[i]:
 * rank i's segment); grown collectively by ring_host_commit to the sizes
 * ring_host_get asked for (want). */
typedef struct {
  cl_mem  mem;
  void   *ptr;
  size_t  size, want;
  MPI_Win win;  /* shm only: valid while peer is set */
  void  **peer; /* each rank's segment, [ring size] */
} ring_host;

/* The ring's kernels for one dtype (cl/ring/ring_copy.cl). */
typedef struct {
  cl_program prog;
  cl_kernel  pack, add, store, sum;
} ring_kernels;

struct fcl_ring {
  fcl_context     *ctx;
  cl_context       cl;
  cl_command_queue queue;
  cl_command_queue xq;   /* shm: uploads from the other ranks' segments */
  MPI_Comm         comm;
  int              rank, size;
  bool             profiling;
  bool             shm;  /* node-local transport (ring_shm.c), else MPI */
  ring_kernels     kern[3];  /* per dtype, built on first use */
  ring_dev         dev[16];  /* device staging and accumulators (ring_fwd/bwd slots) */
  ring_host        host[6];  /* host staging: send and receive buffers */
  fcl_ring_stats   stats;
  char             msg[FCL_RING_MSG];
};

/* ring_error.c: ring_fail records the message (r NULL: the create's) and
 * returns s; ring_fail_cl an OpenCL error's status and code; ring_error_reset clears
 * the create's message. ring_context.c: buffers, kernels. */
fcl_status ring_fail(fcl_ring *r, fcl_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
fcl_status ring_fail_cl(fcl_ring *r, cl_int err, const char *what);
void       ring_error_reset(void);
fcl_status ring_dev_get(fcl_ring *r, int slot, size_t bytes, cl_mem *out);
/* Over MPI: grows host slot to bytes now. Node-local: notes the size
 * (*out is then the current segment, maybe smaller, maybe NULL); the
 * segments grow in ring_host_commit, after the ranks agree on prepare. */
fcl_status ring_host_get(fcl_ring *r, int slot, size_t bytes, void **out);
fcl_status ring_kernels_get(fcl_ring *r, fcl_dtype t, const ring_kernels **out);

/* ring_layout.c: a rank's pieces of a sequence, and the pairs of pieces
 * (queries of this rank, keys of an origin rank) that see each other. */
typedef struct {
  int64_t start, len; /* in the whole sequence   */
  int64_t local;      /* first row in the slice  */
} ring_piece;
typedef struct {
  int        n;
  ring_piece p[2];
  int64_t    length;
} ring_slice;
void ring_slice_of(fcl_ring_layout layout, int64_t seqlen, int ranks, int rank, ring_slice *s);
/* The desc of queries qp against keys kp of the whole problem d: lengths
 * and the diag_shift that puts them where they are in the sequence.
 * Returns false when no query of qp sees any key of kp. */
bool ring_pair(const fcl_attention_desc *d, const ring_piece *qp, const ring_piece *kp,
               fcl_attention_desc *out);

/* ring_check.c: the arguments of a call on this rank, then agreed by
 * every rank (an MPI_Allreduce): FCL_OK on every rank or the same failure
 * on every rank. The caller's descriptor is first read into own by
 * flashcl.h's rule for descriptors, d then pointing at it. q_slice,
 * k_slice receive this rank's slices. */
typedef struct {
  const fcl_ring_desc *d;
  const fcl_tensor    *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  cl_mem               lse;
  bool                 backward;
  fcl_ring_desc        own;
} ring_call;
fcl_status ring_check(fcl_ring *r, ring_call *c, ring_slice *q_slice, ring_slice *k_slice);
/* Agrees on a status of this rank with every other: the first failing
 * rank's status on all (its message is kept where it failed; the others
 * name it). */
fcl_status ring_agree(fcl_ring *r, fcl_status s);
/* ring_agree, and the first of n (at most 32) values v that differ between
 * ranks: its index in *differs (-1: none) and its least and largest value
 * (ring_error.c). */
fcl_status ring_agree_values(fcl_ring *r, fcl_status s, const int64_t *v, int n, int *differs,
                             int64_t *lo, int64_t *hi);

/* ring_view.c: views of a piece of a tensor, and the ring's kernels on
 * them. ring_rows: t from row `row` on along the sequence. */
fcl_tensor ring_rows(const fcl_tensor *t, int64_t row);
/* A dense [batch, seq, heads, dim] view of buf from element offset off. */
fcl_tensor ring_dense(cl_mem buf, fcl_dtype t, size_t off, int64_t seq, int64_t heads,
                      int64_t dim);
/* Rows of dense staging: the buffer, the element offset of the first row
 * of batch 0, and the batch stride (rows of heads * dim elements). */
typedef struct {
  cl_mem  buf;
  int64_t off, sb;
} ring_dense_at;
/* dst (dense, t's dtype) = the view t of shape [b, s, h, d]. */
fcl_status ring_pack(fcl_ring *r, const ring_kernels *k, ring_dense_at dst, const fcl_tensor *t,
                     int64_t b, int64_t s, int64_t h, int64_t d);
/* acc (f32 dense) = (first ? 0 : acc) + the view t of shape [b, s, h, d]. */
fcl_status ring_add(fcl_ring *r, const ring_kernels *k, ring_dense_at acc, const fcl_tensor *t,
                    int64_t b, int64_t s, int64_t h, int64_t d, bool first);
/* The view t of shape [b, s, h, d] = acc (f32 dense). */
fcl_status ring_store(fcl_ring *r, const ring_kernels *k, const fcl_tensor *t, ring_dense_at acc,
                      int64_t b, int64_t s, int64_t h, int64_t d);
/* a[0..n) += b[0..n) (f32). */
fcl_status ring_sum(fcl_ring *r, const ring_kernels *k, cl_mem a, cl_mem b, size_t n);
/* Rows [row, row + len) of an lse [b*h, ld] to or from a dense [b*h, len]. */
fcl_status ring_lse_copy(fcl_ring *r, cl_mem src, int64_t src_ld, int64_t src_row, cl_mem dst,
                         int64_t dst_ld, int64_t dst_row, int64_t len, int64_t bh);

/* ring_transport.c: one step's transfers. Receives from the rank before,
 * sends to the rank after, in chunks of at most 1 GiB; start posts them,
 * finish waits (adding the time to wait_ms). */
typedef struct {
  MPI_Request req[64];
  int         n;
} ring_xfer;
fcl_status ring_xfer_start(fcl_ring *r, ring_xfer *x, const void *send, size_t send_bytes,
                           void *recv, size_t recv_bytes, int tag);
fcl_status ring_xfer_finish(fcl_ring *r, ring_xfer *x);

/* ring_shm.c: the node-local transport. ring_transport_choose (at create,
 * collective): shm when every rank is on one node (MPI_COMM_TYPE_SHARED)
 * unless FCL_RING_TRANSPORT=mpi; FCL_RING_TRANSPORT=shm where the ranks
 * span nodes is an error. The rest is collective where it says so. */
fcl_status ring_transport_choose(fcl_ring *r);
/* Collective, with the status the ranks agreed on for prepare: when
 * FCL_OK, grows every slot that some rank asked to grow, on every rank,
 * in slot order; the same status on every rank. Over MPI: nothing. */
fcl_status ring_host_commit(fcl_ring *r, fcl_status agreed);
void       ring_shm_release(fcl_ring *r, ring_host *h); /* collective */
void      *ring_shm_peer(const fcl_ring *r, int slot, int rank);
/* Collective: every rank's writes to its own segment of slot (finished
 * before the call) are visible to all when it returns (barrier). */
fcl_status ring_shm_publish(fcl_ring *r, int slot);
/* Tells peer (a zero-byte message) that this rank is done with slot: its
 * own segment written, or the peer's read. *req: the previous signal of
 * this kind, completed first (MPI_REQUEST_NULL: none). */
fcl_status ring_shm_signal(fcl_ring *r, MPI_Request *req, int slot, int peer, int tag);
/* Waits for peer's signal, then sees what it wrote. */
fcl_status ring_shm_await(fcl_ring *r, int slot, int peer, int tag);
/* Completes a signal (at the end of a pass). */
fcl_status ring_shm_complete(fcl_ring *r, MPI_Request *req);

/* ring_timing.c: device time of a step's work between two markers. */
typedef struct {
  cl_event ev[2 * 64];
  int      n;
  bool     lost; /* more steps than events: no total */
} ring_marks;
void   ring_mark(fcl_ring *r, ring_marks *m);
/* Sum over pairs of markers of (end - begin) in ms; -1 without profiling. */
double ring_marks_ms(fcl_ring *r, ring_marks *m);
void   ring_marks_release(ring_marks *m);
double ring_now_ms(void);

/* ring_kv.c: the keys and values travelling the ring. Over MPI, each
 * step's slice comes from the rank before into double-buffered host
 * staging (pinned), is uploaded to dense device staging (K [B, len, Hkv, D]
 * then V [B, len, Hkv, Dv]) and sent on to the rank after, the transfer of
 * the next step's slice running while the device computes on this one.
 * Node-local, every rank reads its own slice back into its segment once
 * and uploads each step's slice straight from its origin's segment, on
 * the ring's second queue (xq), a step ahead. */
enum { RING_DEV_KV = 0 /* and 1 */, RING_DEV_OWN = 2, RING_HOST_OWN = 0, RING_HOST_KV = 1 /* and 2 */ };
typedef struct {
  const fcl_ring_desc *d;
  fcl_dtype            dt;
  const ring_kernels  *kern;
  cl_event             up[2];   /* the uploads into device staging i */
  cl_event             done[2]; /* shm: the step's compute on staging i */
  ring_xfer            x;
  int                  step;
} ring_kv;
/* Origin rank of the keys at step s, and its slice. */
int    ring_origin(const fcl_ring *r, int step);
size_t ring_kv_bytes(const ring_kv *kv, int64_t len);
/* Staging for every slice of d (before the ranks agree). */
fcl_status ring_kv_prepare(fcl_ring *r, ring_kv *kv, const fcl_ring_desc *d, fcl_dtype dt,
                           const ring_kernels *kern);
/* This rank's k, v packed into host staging (before step 0); node-local,
 * then every rank's (a barrier), and step 1's upload enqueued. */
fcl_status ring_kv_begin(fcl_ring *r, ring_kv *kv, const fcl_tensor *k, const fcl_tensor *v,
                         int64_t len);
/* Step s: *k, *v are the keys of the step's origin (this rank's own views
 * at step 0, else the uploaded slice, which the main queue waits for).
 * Over MPI the next slice's transfer is posted, and ring_kv_wait (after
 * the step's compute is enqueued) waits for it; node-local ring_kv_wait
 * enqueues the upload of step s + 2 and waits for nothing. ring_kv_end,
 * after the call's clFinish: every upload has finished. */
fcl_status ring_kv_step(fcl_ring *r, ring_kv *kv, int s, const fcl_tensor *own_k,
                        const fcl_tensor *own_v, fcl_tensor *k, fcl_tensor *v);
fcl_status ring_kv_wait(fcl_ring *r, ring_kv *kv);
void       ring_kv_end(fcl_ring *r, ring_kv *kv);

/* ring_dkv.c: the backward's running dK/dV sums (f32, the layout of the
 * K/V staging) of the step's slice: the ones from the rank before plus
 * this rank's (local), handed to the rank after; after R steps they are
 * home (in inc). Over MPI through pinned staging; node-local the receiver
 * uploads straight from the sender's segment (double-buffered, with an
 * acknowledgement before a segment is written again). */
typedef struct {
  ring_xfer   xs, xr;     /* MPI: sends and receives          */
  MPI_Request ready, ack; /* shm: the last signals of each kind */
} ring_dkv;
void       ring_dkv_init(ring_dkv *x);
fcl_status ring_dkv_prepare(fcl_ring *r, size_t bytes);
/* Before step s's compute: over MPI, posts the receive of the sums that
 * arrive for it. */
fcl_status ring_dkv_receive(fcl_ring *r, ring_dkv *x, int step, size_t bytes);
/* After step s's compute (this rank's contribution in local). */
fcl_status ring_dkv_pass_on(fcl_ring *r, ring_dkv *x, const ring_kernels *k, int step,
                            size_t bytes, cl_mem local, cl_mem inc);
/* After the last step: this rank's own sums, home, into inc (enqueued). */
fcl_status ring_dkv_home(fcl_ring *r, ring_dkv *x, size_t bytes, cl_mem inc);

/* ring_fwd.c, ring_bwd.c: the passes (after ring_check). */
fcl_status ring_forward_run(fcl_ring *r, const ring_call *c, const ring_slice *qs,
                            const ring_slice *ks);
fcl_status ring_backward_run(fcl_ring *r, const ring_call *c, const ring_slice *qs,
                             const ring_slice *ks);
#endif
