/* The caller's buffers that cached plans name, held by the context. A
 * cached plan's kernels keep the arguments they were recorded with, and
 * its key names each buffer by handle: the handle must go on naming the
 * same buffer while the plan is cached. Were the buffer destroyed, a new
 * one could be made at the same address and the plan would run on it with
 * arguments and checks made for the old one; a destructor callback does
 * not close that gap, because drivers run it late (NVIDIA's, from its own
 * thread, after the address has been handed out again). So the context
 * retains each such buffer once, and lets it go when no cached plan names
 * it any more, or when it sees that only the context still holds it (the
 * caller released it: its reference count is 1, plus the plans' kernels
 * that name it on drivers whose kernels retain their arguments), a few
 * buffers at each call (fcl_refs_released); its plans go then too. */
#include "core/core.h"

#include <stdlib.h>

typedef struct {
  cl_mem mem;
  int    plans; /* cached plans that name it */
  int    kargs; /* their kernels' arguments that name it */
} buffer_ref;

struct fcl_buffer_refs {
  buffer_ref *ref;
  int         n, cap;
  int         next; /* where the next check of reference counts starts */
};

fcl_buffer_refs *fcl_refs_new(void) { return calloc(1, sizeof(fcl_buffer_refs)); }

static int find(const fcl_buffer_refs *r, cl_mem m) {
  for (int i = 0; i < r->n; ++i)
    if (r->ref[i].mem == m) return i;
  return -1;
}

bool fcl_refs_add(fcl_buffer_refs *r, cl_mem m, int kargs) {
  const int i = find(r, m);
  if (i >= 0) return r->ref[i].plans++, r->ref[i].kargs += kargs, true;
  if (r->n == r->cap) {
    const int cap = r->cap ? 2 * r->cap : 32;
    buffer_ref *ref = realloc(r->ref, (size_t)cap * sizeof *ref);
    if (!ref) return false;
    r->ref = ref, r->cap = cap;
  }
  if (clRetainMemObject(m) != CL_SUCCESS) return false;
  r->ref[r->n++] = (buffer_ref){m, 1, kargs};
  return true;
}

void fcl_refs_drop(fcl_buffer_refs *r, cl_mem m, int kargs) {
  const int i = find(r, m);
  if (i < 0) return;
  r->ref[i].kargs -= kargs;
  if (--r->ref[i].plans > 0) return;
  clReleaseMemObject(m);
  r->ref[i] = r->ref[--r->n];
}

cl_mem fcl_refs_released(fcl_buffer_refs *r, int budget) {
  for (; budget > 0 && r && r->n > 0; --budget) {
    if (r->next >= r->n) r->next = 0;
    const buffer_ref *b = &r->ref[r->next++];
    const cl_uint ours = 1 + (cl_uint)b->kargs;
    cl_uint count = 0;
    if (clGetMemObjectInfo(b->mem, CL_MEM_REFERENCE_COUNT, sizeof count, &count, NULL) ==
            CL_SUCCESS &&
        count <= ours)
      return b->mem;
  }
  return NULL;
}

void fcl_refs_free(fcl_buffer_refs *r) {
  if (!r) return;
  for (int i = 0; i < r->n; ++i) clReleaseMemObject(r->ref[i].mem);
  free(r->ref);
  free(r);
}
