/* The kernels of shadow_demo.c: fill writes b[0 .. n), copy reads b[0 .. m)
 * and stores c[i] = b[i] + 1. Every value copy reads was written by fill
 * (m <= n) or by the host, so Oclgrind's --uninitialized has nothing to
 * report unless m > n (the "real" case of shadow_demo.c). */
__kernel void fill(__global float *b, int n) {
  const int i = get_global_id(0);
  if (i < n) b[i] = (float)i;
}

__kernel void copy(__global const float *b, __global float *c, int m) {
  const int i = get_global_id(0);
  if (i < m) c[i] = b[i] + 1.0f;
}
