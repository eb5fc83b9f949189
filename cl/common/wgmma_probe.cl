/* requires: common/wgmma.cl */
/* Probe of the wgmma helpers (prepend dtype.cl, mma_warp.cl, mma_common.cl,
 * wgmma_ops.cl, wgmma.cl), run by one warpgroup on small integers, exact in
 * f16 and bf16, in the forms the attention kernels use, in both of
 * wgmma.cl's layouts (64 columns: swizzled; 16: core matrices). Inputs
 * a (64 x 64), bt = B^T (16 x 64, rows n) and bkn = B (16 x 64, rows k),
 * row-major; every tile filled by wg_tile_load (cp.async). Products, each
 * lane's accumulators in out[e * 128 + lid] (the m16n8 layout of its
 * warp's rows), e in order:
 *   0-7    A B over k < 64, N = 16, both through K-major descriptors
 *          (swizzled), as Q and K in S = Q K^T;
 *   8-15   the same over k < 16 from 16-column tiles (core matrices);
 *   16-47  A (k < 16, fragments by ldmatrix) B, N = 64, B N-major
 *          (swizzled), as P and V in O = P V;
 *   48-55  the same with N = 16 from a 16-column tile (core matrices);
 *   56-63  A (k < 16, the same fragments) B, N = 16, B K-major (swizzled),
 *          as Q in registers and K in S = Q K^T. */
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void fcl_wgmma_probe(const __global ushort *a, const __global ushort *bt,
                     const __global ushort *bkn, __global float *out) {
  __local ushort a_s[64 * 64] __attribute__((aligned(1024)));
  __local ushort bt_s[16 * 64] __attribute__((aligned(1024)));
  __local ushort bkn_s[16 * 64] __attribute__((aligned(1024)));
  __local ushort a16_s[64 * 16] __attribute__((aligned(1024)));
  __local ushort bt16_s[16 * 16] __attribute__((aligned(1024)));
  __local ushort bkn16_s[16 * 16] __attribute__((aligned(1024)));
  MMA_EMU_DECL(4)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  wg_tile_load(a_s, 64, 64, a, 0, 64, 0, 64, lid, 128);
  wg_tile_load(bt_s, 16, 64, bt, 0, 64, 0, 16, lid, 128);
  wg_tile_load(bkn_s, 16, 64, bkn, 0, 64, 0, 16, lid, 128);
  wg_tile_load(a16_s, 64, 16, a, 0, 64, 0, 64, lid, 128);
  wg_tile_load(bt16_s, 16, 16, bt, 0, 64, 0, 16, lid, 128);
  wg_tile_load(bkn16_s, 16, 16, bkn, 0, 64, 0, 16, lid, 128);
  mma_cp_commit();
  mma_cp_wait_all();
  wg_fence_proxy();
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint4 af = mma_ldsm_x4(a_s, WG_AT(warp * 16 + (lane & 15), (lane >> 4) * 8, 64, 64));
  const uint4 af16 = mma_ldsm_x4(a16_s, WG_AT(warp * 16 + (lane & 15), (lane >> 4) * 8, 64, 16));
  float4 c1[2], c2[2], c3[8], c4[2], c5[2];
  for (int i = 0; i < 8; ++i) c3[i] = (float4)(0.0f);
  for (int i = 0; i < 2; ++i) c1[i] = c2[i] = c4[i] = c5[i] = (float4)(0.0f);
  WG_TIE(c1, 2);
  WG_TIE(c2, 2);
  WG_TIE(c3, 8);
  WG_TIE(c4, 2);
  WG_TIE(c5, 2);
  wg_fence();
  for (int kk = 0; kk < 4; ++kk)
    wg_ss_n16(c1, wg_desc_k(a_s, 64, 64, 0, kk * 16), wg_desc_k(bt_s, 16, 64, 0, kk * 16));
  wg_ss_n16(c2, wg_desc_k(a16_s, 64, 16, 0, 0), wg_desc_k(bt16_s, 16, 16, 0, 0));
  wg_rs_n64(c3, af, wg_desc_n(bkn_s, 16, 64, 0));
  wg_rs_n16(c4, af16, wg_desc_n(bkn16_s, 16, 16, 0));
  wg_rsk_n16(c5, af, wg_desc_k(bt_s, 16, 64, 0, 0));
  wg_commit();
  wg_wait0();
  WG_TIE(c1, 2);
  WG_TIE(c2, 2);
  WG_TIE(c3, 8);
  WG_TIE(c4, 2);
  WG_TIE(c5, 2);
  float4 all[16];
  for (int i = 0; i < 2; ++i)
    all[i] = c1[i], all[2 + i] = c2[i], all[12 + i] = c4[i], all[14 + i] = c5[i];
  for (int i = 0; i < 8; ++i) all[4 + i] = c3[i];
  for (int i = 0; i < 16; ++i) {
    out[(4 * i) * 128 + lid] = all[i].x;
    out[(4 * i + 1) * 128 + lid] = all[i].y;
    out[(4 * i + 2) * 128 + lid] = all[i].z;
    out[(4 * i + 3) * 128 + lid] = all[i].w;
  }
}
