/* requires: common/mma_common.cl */
/* Probe of the tensor-core helpers (prepend dtype.cl and mma_common.cl),
 * run by one warp on small integers, exact in f16, bf16 and f32:
 * a = A (16x16, row-major), bt = B^T (8x16, row-major), bkn = B (16x8,
 * row-major), all copied to local memory by mma_cp16. out receives, per
 * lane, D = A B with B read by ldmatrix (4 floats), D with B read by
 * ldmatrix.trans (4), the lane's value xor-shuffled by 3 (1) and the
 * packed pair (lane + 0.5, -lane) (1): 10 words per lane. */
__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void fcl_mma_probe(const __global ushort *a, const __global ushort *bt,
                   const __global ushort *bkn, __global uint *out) {
  __local ushort a_s[16 * 24] __attribute__((aligned(16)));
  __local ushort bt_s[8 * 24] __attribute__((aligned(16)));
  __local ushort bkn_s[16 * 16] __attribute__((aligned(16)));
  MMA_EMU_DECL(1)
  const int lane = get_local_id(0);
  /* 16 rows x 2 chunks of A, 8 rows x 2 of B^T, 16 rows x 1 of B */
  mma_cp16(a_s, (lane >> 1) * 24 + (lane & 1) * 8, a + (lane >> 1) * 16 + (lane & 1) * 8, 16u);
  if (lane < 16) {
    mma_cp16(bt_s, (lane >> 1) * 24 + (lane & 1) * 8, bt + (lane >> 1) * 16 + (lane & 1) * 8, 16u);
    mma_cp16(bkn_s, lane * 16, bkn + lane * 8, 16u);
    mma_cp16(bkn_s, lane * 16 + 8, bkn, 0u); /* zero fill */
  }
  mma_cp_commit();
  mma_cp_wait_all();
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint4 af = mma_ldsm_x4(a_s, (lane & 15) * 24 + (lane >> 4) * 8);
  /* matrices: keys 0-7 x k 0-7, k 8-15, then the same again */
  const uint4 b1 = mma_ldsm_x4(bt_s, (lane & 7) * 24 + ((lane >> 3) & 1) * 8);
  /* matrices: k 0-7 x n 0-7, k 8-15 x n 0-7, then zero columns 8-15 */
  const uint4 b2 = mma_ldsm_x4_t(bkn_s, (((lane >> 3) & 1) * 8 + (lane & 7)) * 16 + (lane >> 4) * 8);
  const float4 d1 = mma_16816(af, b1.xy, (float4)(0.0f));
  const float4 d2 = mma_16816(af, b2.xy, (float4)(0.0f));
  const float sh = mma_shfl_xor((float)lane, 3);
  const uint pk = mma_pack((float)lane + 0.5f, -(float)lane);
  __global uint *w = out + lane * 10;
  w[0] = as_uint(d1.x); w[1] = as_uint(d1.y); w[2] = as_uint(d1.z); w[3] = as_uint(d1.w);
  w[4] = as_uint(d2.x); w[5] = as_uint(d2.y); w[6] = as_uint(d2.z); w[7] = as_uint(d2.w);
  w[8] = as_uint(sh);
  w[9] = pk | (b2.z | b2.w); /* columns 8-15 of B were zero-filled */
}
