/* The ring's errors: the message of a handle (or of the last failed
 * create on this thread), OpenCL errors by status and code (this library
 * sees flashcl.h only, not the core's error names), and the agreement of
 * every rank on one status, so that all return the same failure and none
 * waits for a transfer that will not come. Below every other ring file. */
#include "ring/ring.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char create_msg[FCL_RING_MSG];

fcl_status ring_fail(fcl_ring *r, fcl_status s, const char *fmt, ...) {
  char *dst = r ? r->msg : create_msg;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, FCL_RING_MSG, fmt, ap);
  va_end(ap);
  return s;
}

fcl_status ring_fail_cl(fcl_ring *r, cl_int err, const char *what) {
  const fcl_status s = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
                               err == CL_OUT_OF_HOST_MEMORY
                           ? FCL_ERROR_OUT_OF_MEMORY
                           : FCL_ERROR_OPENCL;
  return ring_fail(r, s, "%s: OpenCL error %d", what, (int)err);
}

const char *fcl_ring_last_error(const fcl_ring *ring) { return ring ? ring->msg : create_msg; }

void ring_error_reset(void) { create_msg[0] = '\0'; }

fcl_status ring_agree_values(fcl_ring *r, fcl_status s, const int64_t *v, int n, int *differs,
                             int64_t *lo, int64_t *hi) {
  enum { MAXV = 32 };
  int64_t in[1 + 2 * MAXV] = {0}, out[1 + 2 * MAXV];
  if (!v || n > MAXV) n = 0;
  in[0] = s ? (int64_t)r->rank * 16 + (int64_t)s : INT64_MAX;
  for (int i = 0; i < n; ++i) in[1 + i] = v[i], in[1 + n + i] = -v[i];
  if (differs) *differs = -1;
  /* One MPI_Allreduce (MIN) of the first failing rank and status, and of
   * the values and their negations (min and max). */
  if (MPI_Allreduce(in, out, 1 + 2 * n, MPI_INT64_T, MPI_MIN, r->comm) != MPI_SUCCESS)
    return ring_fail(r, FCL_ERROR_INTERNAL, "MPI_Allreduce failed while the ranks agreed");
  if (out[0] != INT64_MAX) {
    const int who = (int)(out[0] / 16);
    /* Every rank reports the failing rank's message. */
    char msg[FCL_RING_MSG];
    memcpy(msg, r->msg, sizeof msg);
    MPI_Bcast(msg, FCL_RING_MSG, MPI_CHAR, who, r->comm);
    msg[FCL_RING_MSG - 1] = '\0';
    ring_fail(r, (fcl_status)(out[0] % 16), "rank %d: %s", who, msg);
    return (fcl_status)(out[0] % 16);
  }
  for (int i = 0; i < n; ++i)
    if (out[1 + i] != -out[1 + n + i]) {
      if (differs) *differs = i, *lo = out[1 + i], *hi = -out[1 + n + i];
      break;
    }
  return FCL_OK;
}

fcl_status ring_agree(fcl_ring *r, fcl_status s) {
  return ring_agree_values(r, s, NULL, 0, NULL, NULL, NULL);
}
