/* flashcl_mpi: context-parallel (ring) attention across MPI processes.
 *
 * Each rank of an MPI communicator holds a slice of one long sequence: its
 * queries, keys and values (and for the backward pass o, lse, dout and the
 * gradients of its slice). The key/value slices travel around the ring of
 * ranks; every rank attends its queries to every slice with
 * fcl_attention_forward (a shifted diagonal, fcl_attention_desc.diag_shift,
 * places each pair of slices in the whole sequence) and merges the partial
 * results by their log-sum-exp in f32 (fcl_attention_merge). The next
 * slice's transfer runs while the device computes on the current one. In
 * the backward pass the key/value gradients travel with the keys and
 * values, summed in f32 in a fixed order, and come home: the result is
 * deterministic for a fixed number of ranks.
 *
 * Transports. Where every rank of the communicator is on one node
 * (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED gives all of them), the
 * host staging is MPI-3 shared memory (MPI_Win_allocate_shared): each rank
 * reads its keys and values back into its own segment once per call and
 * every other rank uploads them to its device straight from there, and
 * the running dK/dV sums are handed on the same way, zero-byte messages
 * saying when a segment is ready and when it has been read: no host copy
 * and no MPI message carrying data. Otherwise the slices and sums travel
 * as MPI messages (non-blocking, through double-buffered pinned host
 * staging). The environment variable FCL_RING_TRANSPORT, read by
 * fcl_ring_create, chooses: "mpi" or "shm" forces one ("shm" where the
 * ranks span nodes is an error), unset or empty takes shm where it can.
 * Every rank must set the same. Both give the same bits.
 *
 * Layout (fcl_ring_slice says which tokens a rank holds): the sequence is
 * cut into 2R chunks for R ranks (FCL_RING_ZIGZAG; chunk c spans tokens
 * c*N/(2R) .. (c+1)*N/(2R) - 1, rounded down), and rank i holds chunks i
 * and 2R-1-i, in that order, one after the other along the sequence
 * dimension of its tensors: with a causal mask every rank then has the
 * same work. FCL_RING_CONTIGUOUS: R chunks, rank i holds chunk i. Lengths
 * that do not divide evenly are allowed (ranks then hold slices of
 * different lengths). Queries and keys are cut the same way (each by its
 * own length when seqlen_q != seqlen_k).
 *
 * Every call is collective: all ranks of the ring's communicator make it,
 * with the same descriptor (checked: a mismatch is an error on every rank)
 * and their own slices. The arguments are checked on each rank, then the
 * ranks agree: if any rank's arguments are wrong, every rank returns the
 * error, nothing is enqueued and nothing is written, and
 * fcl_ring_last_error() names the argument (and the rank). A failure later
 * (an OpenCL error, a kernel that does not build) is returned by every
 * rank; outputs are then unspecified. Unlike flashcl's calls, these return
 * when the device has finished (the transfers go through host memory).
 *
 * MPI must be initialised (any thread level: the ring calls MPI from the
 * calling thread only). A ring is not thread-safe, like its fcl_context.
 */
#ifndef FLASHCL_MPI_H
#define FLASHCL_MPI_H

#include <mpi.h>

#include "flashcl.h"

/* As FCL_API, for flashcl_mpi's own names: its sources are compiled with
 * FCL_MPI_BUILDING (they import flashcl's, they export these). */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(FCL_STATIC)
#define FCL_MPI_API
#elif defined(FCL_MPI_BUILDING)
#define FCL_MPI_API __declspec(dllexport)
#else
#define FCL_MPI_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define FCL_MPI_API __attribute__((visibility("default")))
#else
#define FCL_MPI_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fcl_ring fcl_ring;

typedef enum {
  FCL_RING_ZIGZAG = 0,    /* 2R chunks: rank i holds chunks i and 2R-1-i */
  FCL_RING_CONTIGUOUS = 1 /* R chunks: rank i holds chunk i              */
} fcl_ring_layout;

/* The whole problem, as fcl_attention_forward would take it on one device:
 * seqlen_q and seqlen_k are the lengths of the whole sequence (not of a
 * rank's slice). Not varlen (cu_seqlens_q/k NULL). diag_shift applies to
 * the whole sequence. Each rank's tensors hold its slice:
 *   q, o, dout, dq   [batch, local_q, heads_q, head_dim(_v)]
 *   k, v, dk, dv     [batch, local_k, heads_kv, head_dim(_v)]
 *   lse              f32 [batch, heads_q, local_q] contiguous
 * with local_q, local_k from fcl_ring_slice. Any strides, as for flashcl. */
typedef struct {
  size_t             size;   /* sizeof(fcl_ring_desc): FCL_RING_DESC_INIT */
  fcl_ring_layout    layout;
  /* Last, so that it can grow as flashcl.h's rule for descriptors says;
   * no field of the ring itself is ever appended after it. */
  fcl_attention_desc attn;
} fcl_ring_desc;

#define FCL_RING_DESC_INIT { sizeof(fcl_ring_desc), FCL_RING_ZIGZAG, FCL_ATTENTION_DESC_INIT }

/* The tokens rank `rank` of `ranks` holds of a sequence of `seqlen`: up to
 * two pieces (start in the whole sequence, length), stored one after the
 * other; `length` is their sum. Pieces that touch are reported as one.
 * FCL_ERROR_INVALID_ARGUMENT when seqlen is shorter than the number of
 * chunks (2R zig-zag, R contiguous): every rank must hold some tokens. */
typedef struct {
  int     pieces;
  int64_t start[2], len[2];
  int64_t length;
} fcl_ring_slice_info;
FCL_MPI_API fcl_status fcl_ring_slice(fcl_ring_layout layout, int64_t seqlen, int ranks, int rank,
                                  fcl_ring_slice_info *out);

/* A ring over the ranks of comm (duplicated: the ring talks on its own
 * communicator), computing on ctx's device and queue (and, node-local, a
 * second queue of its own on that device for the uploads). Collective.
 * Staging buffers grow to the largest problem seen (node-local, every rank
 * grows a shared window together, inside the collective calls) and are
 * kept until destroy. FCL_RING_TRANSPORT that is neither mpi nor shm, or
 * differs between ranks: FCL_ERROR_INVALID_ARGUMENT; shm where the ranks
 * span nodes: FCL_ERROR_UNSUPPORTED (on every rank). Errors of create:
 * fcl_ring_last_error(NULL), per thread. */
FCL_MPI_API fcl_status fcl_ring_create(fcl_context *ctx, MPI_Comm comm, fcl_ring **out);
FCL_MPI_API void       fcl_ring_destroy(fcl_ring *ring); /* NULL: no-op; collective */
/* The message of the last failed call on ring ("" if none); with NULL,
 * of the last failed fcl_ring_create in this thread. */
FCL_MPI_API const char *fcl_ring_last_error(const fcl_ring *ring);
FCL_MPI_API int         fcl_ring_rank(const fcl_ring *ring);
FCL_MPI_API int         fcl_ring_size(const fcl_ring *ring);

/* o and lse of this rank's queries against the whole sequence's keys:
 * what fcl_attention_forward on one device gives for those rows. lse: NULL
 * or f32 [batch, heads_q, local_q]. */
FCL_MPI_API fcl_status fcl_ring_attention_forward(fcl_ring *ring, const fcl_ring_desc *d,
                                              const fcl_tensor *q, const fcl_tensor *k,
                                              const fcl_tensor *v, const fcl_tensor *o,
                                              cl_mem lse);

/* Gradients of fcl_ring_attention_forward: from this rank's q, k, v, o,
 * lse (required), dout, writes dq of its queries and dk, dv of its keys
 * and values (summed over every rank's queries; with GQA over the query
 * heads of a group), in the dtype of q. Deterministic for a fixed number
 * of ranks. */
FCL_MPI_API fcl_status fcl_ring_attention_backward(fcl_ring *ring, const fcl_ring_desc *d,
                                               const fcl_tensor *q, const fcl_tensor *k,
                                               const fcl_tensor *v, const fcl_tensor *o,
                                               cl_mem lse, const fcl_tensor *dout,
                                               const fcl_tensor *dq, const fcl_tensor *dk,
                                               const fcl_tensor *dv);

/* What the last successful call of this rank did: ring steps, wall time
 * of the call, the device time of its attention and merge work (from
 * profiling events: -1 when the queue does not profile), the host time
 * spent blocked on transfers (over MPI: waiting for the messages;
 * node-local: for the other ranks' keys and values to be read back, for
 * the rank before's dK/dV sums, and for the rank after to have uploaded
 * the ones it was handed), and bytes_sent, the bytes this rank handed on
 * (node-local: its own keys and values once for each other rank that reads
 * them, and its dK/dV sums). compute_ms / wall_ms is the overlap achieved:
 * near 1 when the transfers hide behind the compute. */
typedef struct {
  int     ranks, steps;
  double  wall_ms, compute_ms, wait_ms;
  int64_t bytes_sent;
} fcl_ring_stats;
FCL_MPI_API fcl_status fcl_ring_last_stats(const fcl_ring *ring, fcl_ring_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* FLASHCL_MPI_H */
