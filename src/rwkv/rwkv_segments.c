/* Launches in segments (where the device bounds a launch's loops, or a
 * launch is built for a few positions): which positions each takes, and
 * the state it reads and writes: the caller's at the ends, the carry
 * between. One launch may read and write the carry: each element is read,
 * then written, by one work-item. */
#include "rwkv/rwkv.h"

fcl_status fcl_rwkv_segments_of(fcl_context *ctx, int64_t n, int64_t per, size_t state_bytes,
                                cl_mem in, cl_mem out, cl_mem none, bool backward,
                                fcl_rwkv_segments *sg) {
  const int64_t seg = per > 0 ? per : n > 0 ? n : 1;
  *sg = (fcl_rwkv_segments){n, seg, n > 0 ? (n + seg - 1) / seg : 1, backward, in, out, none,
                            none};
  return sg->count > 1 ? fcl_scratch(ctx, 5, state_bytes, &sg->carry) : FCL_OK;
}

fcl_rwkv_segment fcl_rwkv_segment_at(const fcl_rwkv_segments *sg, int64_t i) {
  const int64_t si = sg->backward ? sg->count - 1 - i : i;
  const bool first = i == 0, last = i == sg->count - 1;
  const cl_mem in = first ? sg->in : sg->carry, out = last ? sg->out : sg->carry;
  return (fcl_rwkv_segment){(cl_int)(si * sg->per),
                            (cl_int)(si == sg->count - 1 ? sg->n : (si + 1) * sg->per),
                            in != NULL, out != NULL, in ? in : sg->none, out ? out : sg->none};
}
