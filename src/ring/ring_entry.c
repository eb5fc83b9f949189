/* fcl_ring_attention_forward and _backward: the checks every rank agrees
 * on (ring_check.c), then the pass. */
#include "ring/ring.h"

fcl_status fcl_ring_attention_forward(fcl_ring *ring, const fcl_ring_desc *d,
                                      const fcl_tensor *q, const fcl_tensor *k,
                                      const fcl_tensor *v, const fcl_tensor *o, cl_mem lse) {
  if (!ring) return ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ring: is NULL");
  ring->msg[0] = '\0';
  ring_call c = {.d = d, .q = q, .k = k, .v = v, .o = o, .lse = lse};
  ring_slice qs, ks;
  fcl_status s = ring_check(ring, &c, &qs, &ks);
  return s ? s : ring_forward_run(ring, &c, &qs, &ks);
}

fcl_status fcl_ring_attention_backward(fcl_ring *ring, const fcl_ring_desc *d,
                                       const fcl_tensor *q, const fcl_tensor *k,
                                       const fcl_tensor *v, const fcl_tensor *o, cl_mem lse,
                                       const fcl_tensor *dout, const fcl_tensor *dq,
                                       const fcl_tensor *dk, const fcl_tensor *dv) {
  if (!ring) return ring_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ring: is NULL");
  ring->msg[0] = '\0';
  ring_call c = {.d = d, .q = q, .k = k, .v = v, .o = o, .lse = lse, .dout = dout,
                       .dq = dq, .dk = dk, .dv = dv, .backward = true};
  ring_slice qs, ks;
  fcl_status s = ring_check(ring, &c, &qs, &ks);
  return s ? s : ring_backward_run(ring, &c, &qs, &ks);
}
