/* An empty kernel with 24 arguments of the kinds flashcl's kernels take
 * (buffers, int, long, float): its launch costs the host only what the
 * driver charges for one clEnqueueNDRangeKernel (launch_cost.c). */
__kernel void bench_empty24(__global float *b0, __global float *b1, __global float *b2,
                            __global float *b3, __global float *b4, __global float *b5,
                            __global float *b6, __global float *b7, int i0, int i1, int i2,
                            int i3, int i4, int i5, long l0, long l1, long l2, long l3,
                            long l4, long l5, float f0, float f1, float f2, float f3) {}
