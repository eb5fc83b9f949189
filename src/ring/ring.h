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

/* Pinned host staging (a mapped CL_MEM_ALLOC_HOST_PTR buffer, else malloc). */
typedef struct {
  cl_mem mem;
  void  *ptr;
  size_t size;
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
  MPI_Comm         comm;
  int              rank, size;
  bool             profiling;
  ring_kernels     kern[3];  /* per dtype, built on first use */
  ring_dev         dev[16];  /* device staging and accumulators (ring_fwd/bwd slots) */
  ring_host        host[6];  /* host staging: send and receive buffers */
  fcl_ring_stats   stats;
  char             msg[FCL_RING_MSG];
};

/* ring_context.c: errors, buffers, kernels. ring_fail records the message
 * and returns s; ring_fail_cl names an OpenCL error. */
fcl_status ring_fail(fcl_ring *r, fcl_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
fcl_status ring_fail_cl(fcl_ring *r, cl_int err, const char *what);
fcl_status ring_dev_get(fcl_ring *r, int slot, size_t bytes, cl_mem *out);
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
 * on every rank. q_slice, k_slice receive this rank's slices. */
typedef struct {
  const fcl_ring_desc *d;
  const fcl_tensor    *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  cl_mem               lse;
  bool                 backward;
} ring_call;
fcl_status ring_check(fcl_ring *r, const ring_call *c, ring_slice *q_slice, ring_slice *k_slice);
/* Agrees on a status of this rank with every other: the first failing
 * rank's status on all (its message is kept where it failed; the others
 * name it). */
fcl_status ring_agree(fcl_ring *r, fcl_status s);

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

/* ring_kv.c: the keys and values travelling the ring. Each step's slice
 * comes from the rank before into double-buffered host staging (pinned),
 * is uploaded to dense device staging (K [B, len, Hkv, D] then V
 * [B, len, Hkv, Dv]) and sent on to the rank after, the transfer of the
 * next step's slice running while the device computes on this one. */
enum { RING_DEV_KV = 0 /* and 1 */, RING_DEV_OWN = 2, RING_HOST_OWN = 0, RING_HOST_KV = 1 /* and 2 */ };
typedef struct {
  const fcl_ring_desc *d;
  fcl_dtype            dt;
  const ring_kernels  *kern;
  cl_event             up[2]; /* the uploads from host staging 1 + i */
  ring_xfer            x;
  int                  step;
} ring_kv;
/* Origin rank of the keys at step s, and its slice. */
int    ring_origin(const fcl_ring *r, int step);
size_t ring_kv_bytes(const ring_kv *kv, int64_t len);
/* Staging for every slice of d (before the ranks agree). */
fcl_status ring_kv_prepare(fcl_ring *r, ring_kv *kv, const fcl_ring_desc *d, fcl_dtype dt,
                           const ring_kernels *kern);
/* This rank's k, v packed into host staging (before step 0). */
fcl_status ring_kv_begin(fcl_ring *r, ring_kv *kv, const fcl_tensor *k, const fcl_tensor *v,
                         int64_t len);
/* Step s: *k, *v are the keys of the step's origin (this rank's own views
 * at step 0, else the uploaded slice); the next slice's transfer is
 * posted. ring_kv_wait: waits for it (after the step's compute is enqueued). */
fcl_status ring_kv_step(fcl_ring *r, ring_kv *kv, int s, const fcl_tensor *own_k,
                        const fcl_tensor *own_v, fcl_tensor *k, fcl_tensor *v);
fcl_status ring_kv_wait(fcl_ring *r, ring_kv *kv);
void       ring_kv_end(ring_kv *kv);

/* ring_fwd.c, ring_bwd.c: the passes (after ring_check). */
fcl_status ring_forward_run(fcl_ring *r, const ring_call *c, const ring_slice *qs,
                            const ring_slice *ks);
fcl_status ring_backward_run(fcl_ring *r, const ring_call *c, const ring_slice *qs,
                             const ring_slice *ks);
#endif
