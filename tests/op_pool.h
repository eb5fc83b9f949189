/* The device buffers of one harness call, released together, and the
 * pieces every operation's run shares (op_harness.c, op_rwkv7.c): tensors
 * and buffers made from dense host arrays (NULL: poison bytes), inputs
 * watched for changes, results read back with the bytes outside their
 * views checked, and backward runs repeated into re-poisoned outputs that
 * must be bit-identical. Internal to the harness: include op_harness.h
 * first. */
#ifndef FCL_OP_POOL_H
#define FCL_OP_POOL_H
#include "op_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  fcl_context *ctx;
  tu_tensor    t[16];
  cl_mem       m[12];
  oh_watch     w[16];
  int          nt, nm, nw;
} oh_pool;

static inline tu_tensor *oh_pool_tensor(oh_pool *pl, const double *dense, int64_t b, int64_t s, int64_t h,
                             int64_t d, fcl_dtype dt, const oh_view *v) {
  tu_tensor *t = &pl->t[pl->nt];
  if (tu_tensor_create(fcl_context_cl(pl->ctx), fcl_context_queue(pl->ctx), dense, b, s, h, d,
                       dt, v->layout, v->offset, v->tail, t))
    return NULL;
  pl->nt++;
  return t;
}

/* n values of x (NULL: poison) in dtype dt, then tail poison bytes. */
static inline cl_mem oh_pool_buffer(oh_pool *pl, const double *x, size_t n, fcl_dtype dt, size_t tail) {
  const size_t es = tu_dtype_size(dt), bytes = n * es + tail;
  unsigned char *host = malloc(bytes + 1);
  if (!host) return NULL;
  memset(host, TU_POISON_BYTE, bytes + 1);
  for (size_t i = 0; x && i < n; ++i) tu_encode(host + i * es, x[i], dt);
  cl_mem m = tu_buffer_from(fcl_context_cl(pl->ctx), fcl_context_queue(pl->ctx), host,
                            bytes ? bytes : 1);
  free(host);
  if (m) pl->m[pl->nm++] = m;
  return m;
}

static inline cl_mem oh_pool_ints(oh_pool *pl, const int32_t *x, int64_t n) {
  cl_mem m = tu_buffer_from(fcl_context_cl(pl->ctx), NULL, x, (size_t)n * 4);
  if (m) pl->m[pl->nm++] = m;
  return m;
}

static inline unsigned char *oh_pool_read_all(oh_pool *pl, cl_mem m, size_t bytes) {
  return oh_read_all(pl->ctx, m, bytes);
}

/* Remembers the bytes of m (NULL: nothing) to check later that they stay. */
static inline void oh_pool_watch(oh_pool *pl, cl_mem m, const char *name) {
  oh_watch_add(pl->ctx, pl->w, &pl->nw, m, name);
}

static inline void oh_pool_release(oh_pool *pl) {
  for (int i = 0; i < pl->nt; ++i) tu_tensor_release(&pl->t[i]);
  for (int i = 0; i < pl->nm; ++i) clReleaseMemObject(pl->m[i]);
  for (int i = 0; i < pl->nw; ++i) free(pl->w[i].then);
}

/* Reads a tensor, noting bytes outside its view that changed. */
static inline int oh_pool_read_tensor(oh_pool *pl, const tu_tensor *t, double *dense, const char *name, char *why,
                       size_t nwhy) {
  size_t first = 0;
  const long bad = tu_tensor_read(fcl_context_queue(pl->ctx), t, dense, &first);
  if (bad < 0) oh_append(why, nwhy, " reading %s failed;", name);
  else if (bad > 0)
    oh_append(why, nwhy, " %s: %ld bytes outside the view written (first at byte %zu);", name,
              bad, first);
  return bad != 0;
}

/* Reads n values of dtype dt; the tail after them must still be poison. */
static inline int oh_pool_read_buffer(oh_pool *pl, cl_mem m, double *x, size_t n, fcl_dtype dt, size_t tail,
                       const char *name, char *why, size_t nwhy) {
  const size_t es = tu_dtype_size(dt), bytes = n * es + tail;
  unsigned char *host = oh_pool_read_all(pl, m, bytes);
  if (!host) {
    oh_append(why, nwhy, " reading %s failed;", name);
    return 1;
  }
  size_t bad = 0;
  for (size_t i = n * es; i < bytes; ++i) bad += host[i] != TU_POISON_BYTE;
  for (size_t i = 0; i < n; ++i) x[i] = tu_decode(host + i * es, dt);
  free(host);
  if (bad) oh_append(why, nwhy, " %s: %zu bytes past its end written;", name, bad);
  return bad != 0;
}

static inline int oh_pool_finish(oh_pool *pl, fcl_status st, const char *op, char *why, size_t nwhy) {
  if (st != FCL_OK) {
    oh_append(why, nwhy, " %s: %s: %s;", op, fcl_status_string(st),
              fcl_context_last_error(pl->ctx));
    return 1;
  }
  if (tu_cl_check(clFinish(fcl_context_queue(pl->ctx)), op)) {
    oh_append(why, nwhy, " %s: clFinish failed;", op);
    return 1;
  }
  return 0;
}

/* The backward outputs, for repeated runs. */
typedef struct {
  cl_mem         m[8];
  size_t         bytes[8];
  const char    *name[8];
  unsigned char *first[8];
  int            n;
} oh_grads;

static inline void oh_grads_add(oh_grads *g, cl_mem m, size_t bytes, const char *name) {
  if (!m) return;
  g->m[g->n] = m;
  g->bytes[g->n] = bytes;
  g->name[g->n++] = name;
}

static inline void oh_grads_poison(oh_pool *pl, const oh_grads *g) {
  for (int i = 0; i < g->n; ++i)
    tu_buffer_repoison(fcl_context_queue(pl->ctx), g->m[i], g->bytes[i]);
}

/* The first run's bytes are kept; a later run's must equal them. */
static inline int oh_grads_same(oh_pool *pl, oh_grads *g, int run, char *why, size_t nwhy) {
  int bad = 0;
  for (int i = 0; i < g->n; ++i) {
    unsigned char *now = oh_pool_read_all(pl, g->m[i], g->bytes[i]);
    if (run == 0) {
      g->first[i] = now;
      continue;
    }
    if (!now || !g->first[i] || memcmp(now, g->first[i], g->bytes[i])) {
      oh_append(why, nwhy, " %s differs between two backward runs (not deterministic);",
                g->name[i]);
      bad = 1;
    }
    free(now);
  }
  return bad;
}

/* Runs the backward `runs` times (at least once), each run after the first
 * into re-poisoned outputs and bit-identical to the first; read() reads
 * the first run's results. */
typedef fcl_status (*oh_bwd_call)(oh_pool *pl, const void *args);
typedef int (*oh_bwd_read)(oh_pool *pl, const void *args, char *why, size_t nwhy);
static inline int oh_run_backward(oh_pool *pl, oh_bwd_call call, oh_bwd_read read, const void *args, oh_grads *g,
                        int runs, double *secs, const char *op, char *why, size_t nwhy) {
  int fail = 0;
  for (int run = 0; run < (runs > 1 ? runs : 1) && !fail; ++run) {
    if (run) oh_grads_poison(pl, g);
    const double t0 = tu_now();
    fail = oh_pool_finish(pl, call(pl, args), op, why, nwhy);
    if (run == 0) *secs = tu_now() - t0;
    if (fail) break;
    if (run == 0) fail |= read(pl, args, why, nwhy);
    if (runs > 1) fail |= oh_grads_same(pl, g, run, why, nwhy);
  }
  for (int i = 0; i < g->n; ++i) free(g->first[i]);
  return fail;
}
#endif
