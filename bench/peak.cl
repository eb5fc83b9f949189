/* fa-bench peak micro-benchmarks, built at run time by bench/peak.c.
 *
 * peak_fma: each work-item runs 8 independent chains of float8 multiply-adds
 * (64 FMAs per loop trip), enough independent work to fill the FMA pipelines
 * of a GPU lane or a CPU vector unit. a and b are arguments, so nothing
 * folds; the sum is stored so nothing is dead.
 * peak_copy: dst = src in float4, one element per work-item. */

__kernel void peak_fma(__global float *out, float a, float b, int iters) {
  const float x = (float)(get_global_id(0) & 1023) * 1e-3f;
  float8 x0 = (float8)(x), x1 = x0 + 0.125f, x2 = x0 + 0.25f, x3 = x0 + 0.375f;
  float8 x4 = x0 + 0.5f, x5 = x0 + 0.625f, x6 = x0 + 0.75f, x7 = x0 + 0.875f;
  for (int i = 0; i < iters; i++) {
    x0 = mad(x0, a, b);
    x1 = mad(x1, a, b);
    x2 = mad(x2, a, b);
    x3 = mad(x3, a, b);
    x4 = mad(x4, a, b);
    x5 = mad(x5, a, b);
    x6 = mad(x6, a, b);
    x7 = mad(x7, a, b);
  }
  const float8 s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
  out[get_global_id(0)] = ((s.s0 + s.s1) + (s.s2 + s.s3)) + ((s.s4 + s.s5) + (s.s6 + s.s7));
}

__kernel void peak_copy(__global const float4 *src, __global float4 *dst) {
  const size_t i = get_global_id(0);
  dst[i] = src[i];
}
