/* fa-ring-bench's inputs and checks on the device (bench/ring_data.cl):
 * seeded tensors of a whole sequence or of a rank's slice of it, and the
 * largest difference between a slice and the whole sequence's rows. */
#ifndef FCL_BENCH_RING_DATA_H
#define FCL_BENCH_RING_DATA_H

#include "flashcl_mpi.h"
#include "test_util.h"

/* A dense [b][s][h][d] tensor of dtype t on the context's device; its
 * values are left as they are (set them with ring_data_fill). 0 on
 * success. */
int ring_data_tensor(fcl_context *ctx, int64_t b, int64_t s, int64_t h, int64_t d, fcl_dtype t,
                     tu_tensor *out);
/* Fills x with seeded uniform values in [-amp, amp] of a whole sequence of
 * n tokens; with sl, x holds the slice's tokens only (the same values as
 * the whole sequence's at those tokens). 0 on success. */
int ring_data_fill(fcl_context *ctx, const tu_tensor *x, unsigned seed, double amp, int64_t n,
                   const fcl_ring_slice_info *sl);
/* The largest |whole - mine| where mine holds slice sl of whole (n tokens);
 * infinity where one is NaN, -1 on an OpenCL error. */
double ring_data_maxdiff(fcl_context *ctx, const tu_tensor *whole, const tu_tensor *mine,
                         int64_t n, const fcl_ring_slice_info *sl);

#endif
