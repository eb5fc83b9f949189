/* Ring attention across MPI ranks (flashcl_mpi): each rank holds its
 * zig-zag slice of one causal sequence; rank 0 holds token 0, which sees
 * only itself, so its output row must equal v[0].
 *
 *   mpirun -np 2 ring_example [DEVICE]
 */
#include <flashcl_mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 256, H = 4, D = 64 }; /* the whole sequence, heads, head dim */

static float value(int64_t token, int64_t i, int t) { return (float)sin(0.01 * (double)(token * H * D + i) + t); }

static cl_mem upload(fcl_context *ctx, const float *x, size_t n) {
  cl_int err;
  cl_mem m = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                            n * sizeof(float), (void *)x, &err);
  return err == CL_SUCCESS ? m : NULL;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  fcl_context *ctx = NULL;
  fcl_ring *ring = NULL;
  fcl_status s = fcl_context_create(argc > 1 ? argv[1] : NULL, &ctx);
  if (!s) s = fcl_ring_create(ctx, MPI_COMM_WORLD, &ring);
  if (s) {
    fprintf(stderr, "rank %d: %s: %s%s\n", rank, fcl_status_string(s),
            fcl_context_last_error(NULL), fcl_ring_last_error(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* This rank's tokens: pieces of the sequence, one after the other. */
  fcl_ring_slice_info sl;
  fcl_ring_slice(FCL_RING_ZIGZAG, N, size, rank, &sl);
  const size_t row = H * D, n = (size_t)sl.length * row;
  float *host = malloc(3 * n * sizeof(float)), *out = malloc(n * sizeof(float));
  if (!host || !out) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int t = 0; t < 3; ++t) { /* q, k, v */
    size_t at = 0;
    for (int p = 0; p < sl.pieces; ++p)
      for (int64_t j = 0; j < sl.len[p]; ++j)
        for (size_t i = 0; i < row; ++i) host[t * n + at++] = value(sl.start[p] + j, (int64_t)i, t);
  }
  cl_mem buf[4] = {upload(ctx, host, n), upload(ctx, host + n, n), upload(ctx, host + 2 * n, n),
                   upload(ctx, out, n)};
  fcl_tensor q = {buf[0], 0, FCL_F32, {(int64_t)n, (int64_t)row, D, 1}};
  fcl_tensor k = q, v = q, o = q;
  k.buffer = buf[1], v.buffer = buf[2], o.buffer = buf[3];

  fcl_ring_desc d = FCL_RING_DESC_INIT; /* zig-zag */
  d.attn.batch = 1, d.attn.seqlen_q = d.attn.seqlen_k = N; /* the whole sequence */
  d.attn.heads_q = d.attn.heads_kv = H, d.attn.head_dim = d.attn.head_dim_v = D;
  d.attn.causal = 1;
  s = fcl_ring_attention_forward(ring, &d, &q, &k, &v, &o, NULL);
  if (s) {
    fprintf(stderr, "rank %d: fcl_ring_attention_forward: %s\n", rank, fcl_ring_last_error(ring));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  clEnqueueReadBuffer(fcl_context_queue(ctx), buf[3], CL_TRUE, 0, n * sizeof(float), out, 0,
                      NULL, NULL);
  int rc = 0;
  if (rank == 0) { /* token 0 sees only itself: o = v[0] */
    double err = 0.0;
    for (int i = 0; i < D; ++i) err = fmax(err, fabs(out[i] - value(0, i, 2)));
    printf("%d ranks on %s: o[0] %.5f %.5f ..., |o[0] - v[0]| = %.2g\n", size,
           fcl_context_device_name(ctx), out[0], out[1], err);
    rc = err < 1e-5 ? 0 : 1;
  }
  for (int i = 0; i < 4; ++i) clReleaseMemObject(buf[i]);
  free(host), free(out);
  fcl_ring_destroy(ring);
  fcl_context_destroy(ctx);
  MPI_Finalize();
  return rc;
}
