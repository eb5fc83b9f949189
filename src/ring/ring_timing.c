/* The device time of each step's compute, between two markers on the
 * queue, read once the call's work is done (profiling queues only). */
#include "ring/ring.h"

double ring_now_ms(void) { return MPI_Wtime() * 1e3; }

void ring_mark(fcl_ring *r, ring_marks *m) {
  if (!r->profiling) return;
  if (m->n == (int)(sizeof m->ev / sizeof m->ev[0]) ||
      clEnqueueMarkerWithWaitList(r->queue, 0, NULL, &m->ev[m->n]) != CL_SUCCESS)
    m->lost = true;
  else
    m->n++;
}

double ring_marks_ms(fcl_ring *r, ring_marks *m) {
  if (!r->profiling || m->lost) return -1.0;
  double ms = 0.0;
  for (int i = 0; i + 1 < m->n; i += 2) {
    cl_ulong a = 0, b = 0;
    if (clWaitForEvents(2, &m->ev[i]) != CL_SUCCESS ||
        clGetEventProfilingInfo(m->ev[i], CL_PROFILING_COMMAND_END, sizeof a, &a, NULL) ||
        clGetEventProfilingInfo(m->ev[i + 1], CL_PROFILING_COMMAND_END, sizeof b, &b, NULL))
      return -1.0;
    if (b > a) ms += (double)(b - a) * 1e-6;
  }
  return ms;
}

void ring_marks_release(ring_marks *m) {
  for (int i = 0; i < m->n; ++i) clReleaseEvent(m->ev[i]);
  m->n = 0;
}
