/* Bad input to the ring calls (test_ring.c): every rank must return the
 * same status, the message must name the argument (and the failing rank),
 * and no output may change. And FCL_RING_TRANSPORT that is wrong, or not
 * the same on every rank: fcl_ring_create fails on every rank. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include "flashcl_mpi.h"
#include "test_util.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_bad_failed;
int ring_bad_failed(void) { return g_bad_failed; }

typedef struct {
  fcl_context *ctx;
  fcl_ring    *ring;
  const char  *transport;
  int          rank, size;
  tu_tensor    q, k, v, o, dq, dk, dv;
  cl_mem       lse;
  size_t       lse_bytes;
} bad_setup;

/* o, dq, dk, dv and lse still poison. */
static long outputs_changed(bad_setup *b) {
  cl_command_queue qu = fcl_context_queue(b->ctx);
  long n = 0;
  tu_tensor *outs[4] = {&b->o, &b->dq, &b->dk, &b->dv};
  for (int i = 0; i < 4; ++i) n += tu_buffer_poison_left(qu, outs[i]->buffer, 0, outs[i]->bytes, NULL);
  return n + tu_buffer_poison_left(qu, b->lse, 0, b->lse_bytes, NULL);
}

/* Runs the forward (backward 0) or backward with d and the given q and
 * lse; expects status want on every rank and each word in the message. */
static void expect(bad_setup *b, const char *what, const fcl_ring_desc *d, const fcl_tensor *q,
                   cl_mem lse, int backward, fcl_status want, const char *const *words) {
  fcl_status s = backward ? fcl_ring_attention_backward(b->ring, d, q, &b->k.t, &b->v.t, &b->o.t,
                                                        lse, &b->o.t, &b->dq.t, &b->dk.t,
                                                        &b->dv.t)
                          : fcl_ring_attention_forward(b->ring, d, q, &b->k.t, &b->v.t, &b->o.t,
                                                       lse);
  const char *msg = fcl_ring_last_error(b->ring);
  char missing[256] = "";
  const long changed = outputs_changed(b);
  int fail = s != want || !tu_has_words(msg, words, missing, sizeof missing) || changed != 0;
  if (fail)
    printf("  rank %d: %s: got %s (want %s), message \"%s\"%s%s, %ld output bytes changed\n",
           b->rank, what, fcl_status_string(s), fcl_status_string(want), msg,
           missing[0] ? ", missing " : "", missing, changed);
  int any = 0;
  MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  g_bad_failed += any;
  if (b->rank == 0)
    printf("%s np=%d %s bad input: %s | %s\n", any ? "FAIL" : "PASS", b->size, b->transport,
           what, msg);
  fflush(stdout);
}

fcl_status ring_create_with(fcl_context *ctx, const char *transport, fcl_ring **out);
void ring_bad_input(fcl_context *ctx, fcl_ring *ring, const char *transport, int rank, int size);
void ring_bad_create(fcl_context *ctx, int rank, int size);

/* A ring over MPI_COMM_WORLD made with FCL_RING_TRANSPORT = transport
 * (NULL: unset); the variable is restored after. */
fcl_status ring_create_with(fcl_context *ctx, const char *transport, fcl_ring **out) {
  const char *was = getenv("FCL_RING_TRANSPORT");
  char old[64] = "";
  if (was) snprintf(old, sizeof old, "%s", was);
  if (transport) setenv("FCL_RING_TRANSPORT", transport, 1);
  else unsetenv("FCL_RING_TRANSPORT");
  const fcl_status s = fcl_ring_create(ctx, MPI_COMM_WORLD, out);
  if (was) setenv("FCL_RING_TRANSPORT", old, 1);
  else unsetenv("FCL_RING_TRANSPORT");
  return s;
}

static void expect_create(fcl_context *ctx, int rank, int size, const char *what,
                          const char *transport, const char *const *words) {
  fcl_ring *ring = NULL;
  const fcl_status s = ring_create_with(ctx, transport, &ring);
  const char *msg = fcl_ring_last_error(NULL);
  char missing[256] = "";
  const int fail = s != FCL_ERROR_INVALID_ARGUMENT || ring != NULL ||
                   !tu_has_words(msg, words, missing, sizeof missing);
  if (fail)
    printf("  rank %d: %s: got %s (want %s), message \"%s\"%s%s\n", rank, what,
           fcl_status_string(s), fcl_status_string(FCL_ERROR_INVALID_ARGUMENT), msg,
           missing[0] ? ", missing " : "", missing);
  fcl_ring_destroy(ring); /* collective: every rank has one or none */
  int any = 0;
  MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  g_bad_failed += any;
  if (rank == 0)
    printf("%s np=%d bad input: %s | %s\n", any ? "FAIL" : "PASS", size, what, msg);
  fflush(stdout);
}

void ring_bad_create(fcl_context *ctx, int rank, int size) {
  {
    char last[32];
    snprintf(last, sizeof last, "%d", size - 1);
    const char *w[] = {"FCL_RING_TRANSPORT", rank == size - 1 ? "tcp" : last, NULL};
    expect_create(ctx, rank, size, "FCL_RING_TRANSPORT=tcp on the last rank",
                  rank == size - 1 ? "tcp" : "shm", w);
  }
  if (size > 1) {
    const char *w[] = {"FCL_RING_TRANSPORT", "differs", NULL};
    expect_create(ctx, rank, size, "FCL_RING_TRANSPORT mpi on rank 0, shm elsewhere",
                  rank == 0 ? "mpi" : "shm", w);
  }
}

void ring_bad_input(fcl_context *ctx, fcl_ring *ring, const char *transport, int rank, int size) {
  bad_setup b;
  memset(&b, 0, sizeof b);
  b.ctx = ctx, b.ring = ring, b.transport = transport, b.rank = rank, b.size = size;
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue qu = fcl_context_queue(ctx);
  const int64_t N = 8 * size, L = 8, H = 2, D = 16; /* zig-zag: 8 tokens a rank */
  fcl_ring_desc d = FCL_RING_DESC_INIT;
  d.attn.batch = 1, d.attn.seqlen_q = d.attn.seqlen_k = N, d.attn.heads_q = d.attn.heads_kv = H;
  d.attn.head_dim = d.attn.head_dim_v = D, d.attn.causal = 1;
  double x[8 * 2 * 16];
  for (int i = 0; i < 8 * 2 * 16; ++i) x[i] = (double)(i % 7) * 0.25 - 0.5;
  tu_tensor *in[3] = {&b.q, &b.k, &b.v}, *out[4] = {&b.o, &b.dq, &b.dk, &b.dv};
  for (int i = 0; i < 3; ++i)
    tu_tensor_create(cl, qu, x, 1, L, H, D, FCL_F32, TU_BSHD, 0, 0, in[i]);
  for (int i = 0; i < 4; ++i)
    tu_tensor_create(cl, qu, NULL, 1, L, H, D, FCL_F32, TU_BSHD, 0, 0, out[i]);
  b.lse_bytes = (size_t)(H * L) * 4;
  b.lse = tu_buffer_poison(cl, qu, b.lse_bytes);
  char last[32];
  snprintf(last, sizeof last, "%d", size - 1);

  { /* a sequence shorter than the chunks: 2R - 1 tokens */
    fcl_ring_desc e = d;
    e.attn.seqlen_q = e.attn.seqlen_k = 2 * size - 1;
    const char *w[] = {"seqlen_q", "chunks", NULL};
    expect(&b, "seqlen shorter than 2 chunks a rank", &e, &b.q.t, b.lse, 0,
           FCL_ERROR_INVALID_ARGUMENT, w);
  }
  { /* q NULL on the last rank only: every rank fails, naming it */
    const char *w[] = {"rank", last, "q", NULL};
    expect(&b, "q NULL on the last rank", &d, rank == size - 1 ? NULL : &b.q.t, b.lse, 0,
           FCL_ERROR_INVALID_ARGUMENT, w);
  }
  { /* a view too long for its buffer: the slice holds L rows, not L + 1 */
    fcl_ring_desc e = d;
    e.attn.seqlen_q = e.attn.seqlen_k = N + 2 * size;
    const char *w[] = {"q", "buffer", NULL};
    expect(&b, "slice longer than the tensors", &e, &b.q.t, b.lse, 0, FCL_ERROR_INVALID_ARGUMENT, w);
  }
  if (size > 1) { /* rank 0's descriptor differs */
    fcl_ring_desc e = d;
    if (rank == 0) e.attn.causal = 0;
    const char *w[] = {"causal", "differs", NULL};
    expect(&b, "descriptors differ between ranks", &e, &b.q.t, b.lse, 0,
           FCL_ERROR_INVALID_ARGUMENT, w);
  }
  { /* varlen */
    fcl_ring_desc e = d;
    e.attn.cu_seqlens_q = e.attn.cu_seqlens_k = b.lse;
    const char *w[] = {"cu_seqlens_q", "varlen", NULL};
    expect(&b, "varlen", &e, &b.q.t, b.lse, 0, FCL_ERROR_UNSUPPORTED, w);
  }
  { /* the backward without lse */
    const char *w[] = {"lse", NULL};
    expect(&b, "backward without lse", &d, &b.q.t, NULL, 1, FCL_ERROR_INVALID_ARGUMENT, w);
  }
  { /* an invalid layout */
    fcl_ring_desc e = d;
    e.layout = (fcl_ring_layout)7;
    const char *w[] = {"layout", "7", NULL};
    expect(&b, "layout 7", &e, &b.q.t, b.lse, 0, FCL_ERROR_INVALID_ARGUMENT, w);
  }
  { /* a descriptor not started from FCL_RING_DESC_INIT (size 0) */
    fcl_ring_desc e = d;
    e.size = 0;
    const char *w[] = {"d->size", "FCL_RING_DESC_INIT", NULL};
    expect(&b, "size 0", &e, &b.q.t, b.lse, 0, FCL_ERROR_INVALID_ARGUMENT, w);
  }
  { /* its attention descriptor's size not the one its own size leaves */
    fcl_ring_desc e = d;
    e.attn.size = 8;
    const char *w[] = {"d->attn.size", "8", NULL};
    expect(&b, "attn.size 8", &e, &b.q.t, b.lse, 0, FCL_ERROR_INVALID_ARGUMENT, w);
  }
  { /* head_dim out of range: flashcl's own check of the whole problem */
    fcl_ring_desc e = d;
    e.attn.head_dim = 0;
    const char *w[] = {"head_dim", "0", NULL};
    expect(&b, "head_dim 0", &e, &b.q.t, b.lse, 0, FCL_ERROR_INVALID_ARGUMENT, w);
  }
  { /* dropout: the mask would need the whole sequence's (i, j) on each rank */
    fcl_ring_desc e = d;
    e.attn.dropout_p = 0.1f;
    const char *w[] = {"attn.dropout_p", "0.1", "not supported", NULL};
    expect(&b, "dropout", &e, &b.q.t, b.lse, 0, FCL_ERROR_UNSUPPORTED, w);
  }
  { /* a descriptor of 0.2.0's size (attn ending with cu_seqlens_k_host) is
     * read, zero-extended: it reaches the check of its head_dim */
    fcl_ring_desc e = d;
    e.attn.size = offsetof(fcl_attention_desc, cu_seqlens_k_host) + sizeof(void *);
    e.size = offsetof(fcl_ring_desc, attn) + e.attn.size;
    e.attn.head_dim = 0;
    e.attn.dropout_p = 0.5f; /* past the caller's size: never read */
    const char *w[] = {"head_dim", "0", NULL};
    expect(&b, "0.2.0's descriptor size", &e, &b.q.t, b.lse, 0, FCL_ERROR_INVALID_ARGUMENT, w);
  }
  for (int i = 0; i < 3; ++i) tu_tensor_release(in[i]);
  for (int i = 0; i < 4; ++i) tu_tensor_release(out[i]);
  clReleaseMemObject(b.lse);
}
