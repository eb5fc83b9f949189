/* Probe of the wgmma helpers (prepend dtype.cl, mma_warp.cl, mma_common.cl,
 * wgmma_ops.cl, wgmma.cl), run by one warpgroup on small integers, exact in
 * f16 and bf16, in the two forms the attention kernels use: A (64 x 16,
 * row-major) through a descriptor times bt = B^T (16 x 16, rows n:
 * K-major, as Q and K in S = Q K^T), and A from registers (ldmatrix of the
 * same tile) times bkn = B (16 x 16, rows k: N-major, as P and V in
 * O = P V); every tile filled by wg_tile_load (cp.async). out[e * 128 +
 * lid] holds this work-item's accumulator element e: 0-7 of A B through
 * bt, 8-15 through bkn (the m16n8 layout of its warp's rows, two n8
 * tiles). */
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void fcl_wgmma_probe(const __global ushort *a, const __global ushort *bt,
                     const __global ushort *bkn, __global float *out) {
  __local ushort a_s[64 * 16] __attribute__((aligned(128)));
  __local ushort bt_s[16 * 16] __attribute__((aligned(128)));
  __local ushort bkn_s[16 * 16] __attribute__((aligned(128)));
  MMA_EMU_DECL(4)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  wg_tile_load(a_s, 64, 16, a, 0, 16, 0, 64, lid, 128);
  wg_tile_load(bt_s, 16, 16, bt, 0, 16, 0, 16, lid, 128);
  wg_tile_load(bkn_s, 16, 16, bkn, 0, 16, 0, 16, lid, 128);
  mma_cp_commit();
  mma_cp_wait_all();
  wg_fence_proxy();
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint4 af = mma_ldsm_x4(a_s, WG_CORE(warp * 16 + (lane & 15), (lane >> 4) * 8, 16));
  float4 c1[2] = {(float4)(0.0f), (float4)(0.0f)}, c2[2] = {(float4)(0.0f), (float4)(0.0f)};
  WG_TIE(c1, 2);
  WG_TIE(c2, 2);
  wg_fence();
  wg_ss_n16(c1, wg_desc(a_s, 0, 128u, 16u * 16), wg_desc(bt_s, 0, 128u, 16u * 16));
  wg_rs_n16(c2, af, wg_desc(bkn_s, 0, 16u * 16, 128u));
  wg_commit();
  wg_wait0();
  WG_TIE(c1, 2);
  WG_TIE(c2, 2);
  const float v[16] = {c1[0].x, c1[0].y, c1[0].z, c1[0].w, c1[1].x, c1[1].y, c1[1].z, c1[1].w,
                       c2[0].x, c2[0].y, c2[0].z, c2[0].w, c2[1].x, c2[1].y, c2[1].z, c2[1].w};
  for (int e = 0; e < 16; ++e) out[e * 128 + lid] = v[e];
}
