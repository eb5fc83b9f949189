/* fa-ring-bench's inputs and checks, made on the device: at 128K tokens a
 * tensor has half a billion elements, too many to draw and convert on the
 * host for every shape. Element (batch b, token t, column c) of a whole
 * sequence [B][N][row] gets a hash of its flat index and a seed, mapped to
 * [-amp, amp]; a rank's slice holds the same values at its own rows, so a
 * rank makes its inputs without the whole tensors. Slices are up to two
 * pieces of tokens (fcl_ring_slice_info): local rows [0, len0) are tokens
 * [start0, start0 + len0), the rest start at start1. dtype: 0 f32, 1 f16,
 * 2 bf16 (stored round-to-nearest-even). */

/* The whole-sequence token of local token t. */
static long ring_token(long t, int sliced, long start0, long len0, long start1) {
  return !sliced ? t : t < len0 ? start0 + t : start1 + t - len0;
}

static float ring_value(ulong i, uint seed, float amp) {
  ulong z = i + 0x9e3779b97f4a7c15UL * (ulong)(seed + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
  z ^= z >> 31;
  return amp * ((float)(uint)(z >> 40) * 0x1p-23f - 1.0f); /* 2^24 steps over [-1, 1) */
}

static void ring_store(global uchar *out, long i, float v, int dtype) {
  if (dtype == 0) {
    ((global float *)out)[i] = v;
  } else if (dtype == 1) {
    vstore_half_rte(v, (size_t)i, (global half *)out);
  } else {
    const uint u = as_uint(v);
    ((global ushort *)out)[i] = (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

static float ring_load(global const uchar *in, long i, int dtype) {
  if (dtype == 0) return ((global const float *)in)[i];
  if (dtype == 1) return vload_half((size_t)i, (global const half *)in);
  return as_float((uint)((global const ushort *)in)[i] << 16);
}

/* out [batch][tokens][row]: the whole sequence (sliced 0) or a slice (1). */
kernel void ring_fill(global uchar *out, int dtype, uint seed, float amp, long batch,
                      long tokens, long n_whole, long row, int sliced, long start0, long len0,
                      long start1) {
  const long total = batch * tokens * row;
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    const long c = i % row, t = (i / row) % tokens, b = i / (row * tokens);
    const long g = (b * n_whole + ring_token(t, sliced, start0, len0, start1)) * row + c;
    ring_store(out, i, ring_value((ulong)g, seed, amp), dtype);
  }
}

/* The largest |whole - mine| over the slice's elements (whole at the
 * slice's tokens): one value per work-group in partial (local size 256). */
kernel void ring_maxdiff(global const uchar *whole, global const uchar *mine, int dtype,
                         long batch, long tokens, long n_whole, long row, long start0,
                         long len0, long start1, global float *partial) {
  local float red[256];
  const long total = batch * tokens * row;
  float m = 0.0f;
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    const long c = i % row, t = (i / row) % tokens, b = i / (row * tokens);
    const long g = (b * n_whole + ring_token(t, 1, start0, len0, start1)) * row + c;
    const float d = fabs(ring_load(whole, g, dtype) - ring_load(mine, i, dtype));
    m = isnan(d) ? INFINITY : fmax(m, d);
  }
  const uint l = get_local_id(0);
  red[l] = m;
  for (uint s = 128; s > 0; s >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < s) red[l] = fmax(red[l], red[l + s]);
  }
  if (l == 0) partial[get_group_id(0)] = red[0];
}
