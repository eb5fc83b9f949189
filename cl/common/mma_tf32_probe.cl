/* requires: common/mma_tf32.cl */
/* Probe of the TF32 tensor-core helpers (prepend dtype.cl and mma_tf32.cl),
 * run by one warp. a = A (16x8, row-major) and b = B (8x8, row-major), with
 * A copied to local memory by cp.async (the second half of a zero-filled
 * copy must read as 0). out receives per lane: D = A B with one TF32 mma
 * (4 floats), D = A2 B2 in 3xTF32 where A2 = A (1 + 2^-12) and
 * B2 = B (1 + 2^-13), which one TF32 product cannot give (4), the lane's
 * value xor-shuffled by 3 (1) and the zero-filled word (1): 10 per lane. */
__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void fcl_mma_tf32_probe(const __global float *a, const __global float *b,
                        __global uint *out) {
  __local float a_s[16 * 12] __attribute__((aligned(16)));
  __local float z_s[4] __attribute__((aligned(16)));
  MMA_EMU_DECL(1)
  const int lane = get_local_id(0), g = lane >> 2, t = lane & 3;
  mma_cp16f(a_s + (lane >> 1) * 12 + (lane & 1) * 4, a + (lane >> 1) * 8 + (lane & 1) * 4, 16u);
  if (lane == 0) mma_cp16f(z_s, a, 0u);
  mma_cp_commit();
  mma_cp_wait_all();
  barrier(CLK_LOCAL_MEM_FENCE);
  const float4 af = (float4)(a_s[g * 12 + t], a_s[(g + 8) * 12 + t], a_s[g * 12 + t + 4],
                             a_s[(g + 8) * 12 + t + 4]);
  const float2 bf = (float2)(b[t * 8 + g], b[(t + 4) * 8 + g]);
  const float4 d1 = mma_1688(as_uint4(af), as_uint2(bf), (float4)(0.0f));
  const float ea = 1.0f + 0x1p-12f, eb = 1.0f + 0x1p-13f;
  const tf32_a a2 = tf32_split_a(af * ea);
  const tf32_b b2 = tf32_split_b(bf * eb);
  const float4 d2 = MMA_3XTF32(a2, b2, (float4)(0.0f));
  const float sh = mma_shfl_xor((float)lane, 3);
  __global uint *w = out + lane * 10;
  w[0] = as_uint(d1.x); w[1] = as_uint(d1.y); w[2] = as_uint(d1.z); w[3] = as_uint(d1.w);
  w[4] = as_uint(d2.x); w[5] = as_uint(d2.y); w[6] = as_uint(d2.z); w[7] = as_uint(d2.w);
  w[8] = as_uint(sh);
  w[9] = as_uint(z_s[lane & 3]);
}
