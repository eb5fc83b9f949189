/* An empty kernel with 24 arguments of the kinds flashcl's kernels take
 * (buffers, int, long, float): its launch costs the host only what the
 * driver charges for one clEnqueueNDRangeKernel (launch_cost.c). */
__kernel void bench_empty24(__global float *b0, __global float *b1, __global float *b2,
                            __global float *b3, __global float *b4, __global float *b5,
                            __global float *b6, __global float *b7, int i0, int i1, int i2,
                            int i3, int i4, int i5, long l0, long l1, long l2, long l3,
                            long l4, long l5, float f0, float f1, float f2, float f3) {}

/* A work-item that keeps the device busy for about n dependent steps: the
 * calls enqueued behind it queue up meanwhile and then run back to back
 * (back_to_back.c). x[0] in, x[1] out, so the loop cannot be dropped. */
__kernel void bench_spin(__global float *x, int n) {
  float v = x[0];
  for (int i = 0; i < n; i++) v = fma(v, 0.9999f, 1e-6f);
  x[1] = v;
}

/* The kernel after them: its start is the end of the calls' work. */
__kernel void bench_tail(__global float *x) {}
