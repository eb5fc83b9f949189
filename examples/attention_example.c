/* A minimal application of flashcl: causal attention on the device of its
 * choice, with OpenCL buffers made through the library's context.
 *
 *   attention_example [DEVICE]     (DEVICE: e.g. "pocl", "nvidia", "0:0")
 */
#include <flashcl.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 2, N = 256, H = 4, D = 64 }; /* batch, sequence, heads, head dim */

static int fail(const fcl_context *ctx, const char *what, fcl_status s) {
  fprintf(stderr, "%s: %s: %s\n", what, fcl_status_string(s), fcl_context_last_error(ctx));
  return 1;
}

int main(int argc, char **argv) {
  const size_t n = (size_t)B * N * H * D, bytes = n * sizeof(float);
  float *host = malloc(3 * bytes), *out = malloc(bytes);
  if (!host || !out) return 1;
  for (size_t i = 0; i < 3 * n; i++) host[i] = (float)sin(0.01 * (double)i); /* q, k, v */

  fcl_context *ctx = NULL;
  fcl_status s = fcl_context_create(argc > 1 ? argv[1] : NULL, &ctx);
  if (s != FCL_OK) return fail(NULL, "fcl_context_create", s);
  printf("device: %s\n", fcl_context_device_name(ctx));

  /* Buffers live in the library's OpenCL context; work goes on its queue. */
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue queue = fcl_context_queue(ctx);
  cl_int err[4];
  cl_mem buf[4];
  for (int i = 0; i < 3; i++)
    buf[i] = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, host + i * n,
                            &err[i]);
  buf[3] = clCreateBuffer(cl, CL_MEM_WRITE_ONLY, bytes, NULL, &err[3]);
  for (int i = 0; i < 4; i++)
    if (err[i] != CL_SUCCESS) {
      fprintf(stderr, "clCreateBuffer failed: %d\n", err[i]);
      return 1;
    }

  /* Dense [batch, seq, head, dim] layout: strides in elements. */
  fcl_tensor q = {buf[0], 0, FCL_F32, {N * H * D, H * D, D, 1}};
  fcl_tensor k = q, v = q, o = q;
  k.buffer = buf[1], v.buffer = buf[2], o.buffer = buf[3];

  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = B, d.seqlen_q = d.seqlen_k = N;
  d.heads_q = d.heads_kv = H;
  d.head_dim = d.head_dim_v = D;
  d.causal = 1; /* softmax_scale 0: 1/sqrt(D) */

  s = fcl_attention_forward(ctx, &d, &q, &k, &v, &o, NULL);
  if (s != FCL_OK) return fail(ctx, "fcl_attention_forward", s);
  cl_int e = clEnqueueReadBuffer(queue, buf[3], CL_TRUE, 0, bytes, out, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    fprintf(stderr, "clEnqueueReadBuffer failed: %d\n", e);
    return 1;
  }

  /* With causal masking the first query sees only the first key: o = v there. */
  double checksum = 0, first_row_err = 0;
  for (size_t i = 0; i < n; i++) checksum += out[i];
  for (size_t i = 0; i < (size_t)H * D; i++)
    first_row_err = fmax(first_row_err, fabs(out[i] - host[2 * n + i]));
  printf("checksum %.6f, first row |o - v| %.2e\n", checksum, first_row_err);

  for (int i = 0; i < 4; i++) clReleaseMemObject(buf[i]);
  fcl_context_destroy(ctx);
  free(host), free(out);
  if (first_row_err > 1e-5) {
    fprintf(stderr, "unexpected result\n");
    return 1;
  }
  return 0;
}
