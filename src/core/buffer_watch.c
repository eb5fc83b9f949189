/* Watching the caller's buffers that cached plans name. A cached plan does
 * not retain the caller's buffers (a cache must not keep memory alive), so
 * its key names them by handle: once a buffer is released, another may be
 * made at the same address, and a plan that was set up for the first must
 * never run on the second. A destructor callback on each watched buffer
 * (clSetMemObjectDestructorCallback, registered once a buffer and context)
 * reports its end; the context drains the reports before it looks a plan
 * up and drops the plans that name the buffer. A plan's kernels therefore
 * keep the arguments they were recorded with, and a call that finds its
 * plan makes no OpenCL call but its launches.
 *
 * The callbacks may come on any thread, at any time, also after the
 * context is gone: each registration's node is pushed onto a lock-free
 * stack (push only; the owner takes the whole stack at once), and the
 * watch is freed by the last of the context and the callbacks still due. */
#include "core/core.h"

#include <stdatomic.h>
#include <stdlib.h>

typedef struct watch_node {
  struct watch_node *next;
  cl_mem             mem;
  fcl_watch         *watch;
} watch_node;

struct fcl_watch {
  _Atomic(watch_node *) gone; /* nodes of destroyed buffers, not yet drained */
  atomic_int            refs; /* 1 for the context + callbacks still due */
  cl_mem               *live; /* watched, not reported destroyed (owner only) */
  int                   nlive, cap;
};

fcl_watch *fcl_watch_new(void) {
  fcl_watch *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  atomic_init(&w->gone, NULL);
  atomic_init(&w->refs, 1);
  return w;
}

static void free_nodes(watch_node *n) {
  while (n) {
    watch_node *next = n->next;
    free(n);
    n = next;
  }
}

static void unref(fcl_watch *w) {
  if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) != 1) return;
  free_nodes(atomic_exchange_explicit(&w->gone, NULL, memory_order_acquire));
  free(w->live);
  free(w);
}

static void CL_CALLBACK on_destroy(cl_mem mem, void *user) {
  (void)mem;
  watch_node *n = user;
  fcl_watch  *w = n->watch;
  n->next = atomic_load_explicit(&w->gone, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&w->gone, &n->next, n, memory_order_release,
                                                memory_order_relaxed)) {
  }
  unref(w);
}

bool fcl_watch_add(fcl_watch *w, cl_mem m) {
  for (int i = 0; i < w->nlive; ++i)
    if (w->live[i] == m) return true;
  if (w->nlive == w->cap) {
    const int cap = w->cap ? 2 * w->cap : 32;
    cl_mem *live = realloc(w->live, (size_t)cap * sizeof *live);
    if (!live) return false;
    w->live = live, w->cap = cap;
  }
  watch_node *n = malloc(sizeof *n);
  if (!n) return false;
  *n = (watch_node){NULL, m, w};
  atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
  if (clSetMemObjectDestructorCallback(m, on_destroy, n) != CL_SUCCESS) {
    atomic_fetch_sub_explicit(&w->refs, 1, memory_order_relaxed);
    free(n);
    return false;
  }
  w->live[w->nlive++] = m;
  return true;
}

void fcl_watch_drain(fcl_watch *w, void (*gone)(void *arg, cl_mem m), void *arg) {
  if (!w || !atomic_load_explicit(&w->gone, memory_order_relaxed)) return;
  watch_node *n = atomic_exchange_explicit(&w->gone, NULL, memory_order_acquire);
  for (watch_node *i = n; i; i = i->next) {
    for (int j = 0; j < w->nlive; ++j)
      if (w->live[j] == i->mem) {
        w->live[j] = w->live[--w->nlive];
        break;
      }
    gone(arg, i->mem);
  }
  free_nodes(n);
}

void fcl_watch_release(fcl_watch *w) {
  if (!w) return;
  free_nodes(atomic_exchange_explicit(&w->gone, NULL, memory_order_acquire));
  unref(w);
}
