/* requires: common/mma_common.cl attention/kvcache_format.cl */
/* How the tensor-core decode (kvcache_decode_mma.cl) reads quantized
 * caches: a load's eight values converted to operand pairs (by byte
 * permutes and packed f16 arithmetic for f16 on NVIDIA), and the block
 * formats' lane-owned blocks where the rows are 8-byte aligned. The lane
 * mapping of dims (K_COL, V_COL) that goes with the latter is the
 * kernel's. */
#ifndef KV_K_LANE
#define KV_K_LANE 0
#endif
#ifndef KV_V_LANE
#define KV_V_LANE 0
#endif
/* A load's eight values as pairs of the operand dtype: a 16-bit cache's as
 * loaded, a quantized one's dequantized (its fp8 scale left out) and
 * rounded to the dtype. For f16 on NVIDIA, by byte permutes and packed f16
 * arithmetic (kvm_fast_pairs), not through f32: int-to-float and f32-to-f16
 * conversions issue at a sixteenth of the FMA rate on Hopper, and the
 * decode of a quantized cache spent twice f16's time in them. The results
 * are the same bits: q and nibbles are exact in f16, d * q is one rounded
 * product either way, and fp8 values are exact in f16. */
#if FCL_DTYPE == 1 && !FCL_MMA_EMULATE && (KV_K_FMT > 2 || KV_V_FMT > 2)
inline uint kvm_prmt(uint a, uint b, uint sel) {
  uint r;
  FCL_ASM("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
inline uint kvm_hsub2(uint a, uint b) {
  uint r;
  FCL_ASM("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
inline uint kvm_hmul2(uint a, uint b) {
  uint r;
  FCL_ASM("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
/* Bytes u0..u3 (0..255) as f16 pairs 1024 + u: (u0, u1), (u2, u3). */
#define KVM_BIAS_LO(u) kvm_prmt(u, 0x64646464u, 0x5140u)
#define KVM_BIAS_HI(u) kvm_prmt(u, 0x64646464u, 0x7362u)
/* q8_0 (d, bytes 0-3, bytes 4-7): d * q, q = u - 128 with u = byte ^ 0x80. */
inline uint4 kvm_q8_pairs(uint4 r) {
  const uint dd = r.x | (r.x << 16), lo = r.y ^ 0x80808080u, hi = r.z ^ 0x80808080u;
  const uint c = 0x64806480u; /* 1152, 1152 */
  return (uint4)(kvm_hmul2(kvm_hsub2(KVM_BIAS_LO(lo), c), dd),
                 kvm_hmul2(kvm_hsub2(KVM_BIAS_HI(lo), c), dd),
                 kvm_hmul2(kvm_hsub2(KVM_BIAS_LO(hi), c), dd),
                 kvm_hmul2(kvm_hsub2(KVM_BIAS_HI(hi), c), dd));
}
/* q4_0 (d, bytes 0-3, bytes 4-7, the nibbles' shift): d * (n - 8). */
inline uint4 kvm_q4_pairs(uint4 r) {
  const uint dd = r.x | (r.x << 16);
  const uint lo = (r.y >> r.w) & 0x0f0f0f0fu, hi = (r.z >> r.w) & 0x0f0f0f0fu;
  const uint c = 0x64086408u; /* 1032, 1032 */
  return (uint4)(kvm_hmul2(kvm_hsub2(KVM_BIAS_LO(lo), c), dd),
                 kvm_hmul2(kvm_hsub2(KVM_BIAS_HI(lo), c), dd),
                 kvm_hmul2(kvm_hsub2(KVM_BIAS_LO(hi), c), dd),
                 kvm_hmul2(kvm_hsub2(KVM_BIAS_HI(hi), c), dd));
}
/* Bytes b0..b3 into the high bytes of f16 pairs (b0, b1), (b2, b3). */
#define KVM_HIGH_LO(w) kvm_prmt(w, 0u, 0x1404u)
#define KVM_HIGH_HI(w) kvm_prmt(w, 0u, 0x3424u)
/* E5M2 is an f16's high byte. */
inline uint4 kvm_e5m2_pairs(uint2 w) {
  return (uint4)(KVM_HIGH_LO(w.x), KVM_HIGH_HI(w.x), KVM_HIGH_LO(w.y), KVM_HIGH_HI(w.y));
}
/* E4M3 s.eeee.mmm as f16 s.0eeee.mmm0000000, which is its value / 2^8
 * (subnormals too), times 2^8; a NaN byte (0x7f, 0xff) takes the exact
 * conversion (f16 would read it as 480). */
inline uint kvm_e4m3_pair(uint x) {
  return kvm_hmul2((x & 0x80008000u) | ((x & 0x7f007f00u) >> 1), 0x5c005c00u);
}
inline uint4 kvm_e4m3_pairs(uint2 w) {
  const uint nan = (((w.x & 0x7f7f7f7fu) + 0x01010101u) | ((w.y & 0x7f7f7f7fu) + 0x01010101u)) &
                   0x80808080u;
  if (nan) {
    float x[8];
    FCL_UNROLL for (int e = 0; e < 8; ++e) x[e] = fcl_e4m3_to_f32(kvq_byte(w, e));
    return (uint4)(mma_pack(x[0], x[1]), mma_pack(x[2], x[3]), mma_pack(x[4], x[5]),
                   mma_pack(x[6], x[7]));
  }
  return (uint4)(kvm_e4m3_pair(KVM_HIGH_LO(w.x)), kvm_e4m3_pair(KVM_HIGH_HI(w.x)),
                 kvm_e4m3_pair(KVM_HIGH_LO(w.y)), kvm_e4m3_pair(KVM_HIGH_HI(w.y)));
}
/* Block formats' raw loads are uint4, fp8's uint2. */
#define KVM_FAST_PAIRS_B(fmt, r) ((fmt) == FCL_KV_Q8_0 ? kvm_q8_pairs(r) : kvm_q4_pairs(r))
#define KVM_FAST_PAIRS_8(fmt, r) ((fmt) == FCL_KV_FP8_E5M2 ? kvm_e5m2_pairs(r) : kvm_e4m3_pairs(r))
#endif
#if KV_K_FMT > 2 && FCL_DTYPE == 1 && !FCL_MMA_EMULATE
#if KV_BLOCK_FMT(KV_K_FMT)
#define KC_PAIRS(r) KVM_FAST_PAIRS_B(KV_K_FMT, r)
#else
#define KC_PAIRS(r) KVM_FAST_PAIRS_8(KV_K_FMT, r)
#endif
#elif KV_K_FMT > 2
inline uint4 kvm_k_pairs(kc_raw r) {
  float x[8];
  KC_CONVERT(x, r);
  return (uint4)(mma_pack(x[0], x[1]), mma_pack(x[2], x[3]), mma_pack(x[4], x[5]),
                 mma_pack(x[6], x[7]));
}
#define KC_PAIRS(r) kvm_k_pairs(r)
#else
#define KC_PAIRS(r) (r)
#endif
#if KV_V_FMT > 2 && FCL_DTYPE == 1 && !FCL_MMA_EMULATE
#if KV_BLOCK_FMT(KV_V_FMT)
#define VC_PAIRS(r) KVM_FAST_PAIRS_B(KV_V_FMT, r)
#else
#define VC_PAIRS(r) KVM_FAST_PAIRS_8(KV_V_FMT, r)
#endif
#elif KV_V_FMT > 2
inline uint4 kvm_v_pairs(vc_raw r) {
  float x[8];
  VC_CONVERT(x, r);
  return (uint4)(mma_pack(x[0], x[1]), mma_pack(x[2], x[3]), mma_pack(x[4], x[5]),
                 mma_pack(x[6], x[7]));
}
#define VC_PAIRS(r) kvm_v_pairs(r)
#else
#define VC_PAIRS(r) (r)
#endif

/* Block formats read a lane's own blocks. A q8_0 or q4_0 block is only
 * 2-byte aligned (34 or 18 bytes), so the loads above take a lane's 8
 * values in five 2-byte loads; where every cache row starts at a multiple
 * of 8 bytes (the host checks the view: KV_K_LANE, KV_V_LANE), a lane
 * instead owns consecutive values of the row (K_COL, V_COL), whole blocks
 * of K (D / 4 values a lane: a block at D = 128) and D_V / 8 values of V,
 * and reads them as a window of aligned 8-byte loads (at D = 128, q8_0:
 * 5 a K row where there were 20, and 4 a V row and lane where there were
 * 10). Where used, the window is realigned to its first byte (its byte
 * offset o in the first word is even and fixed a lane: a select and a
 * funnel shift a word, never a computed index, so it stays in
 * registers), and the values are then picked at constant offsets. */
#define KBB KV_BLOCK_BYTES(KV_K_FMT)
#define VBB KV_BLOCK_BYTES(KV_V_FMT)
/* n[0 .. nn) = the window's bytes from o as words (w holds nn + 2). */
inline void kvw_align(const uint *w, int o, uint *n, const int nn) {
  FCL_UNROLL for (int k = 0; k < nn; ++k) {
    const uint a = o >= 4 ? w[k + 1] : w[k], b = o >= 4 ? w[k + 2] : w[k + 1];
    n[k] = (o & 2) ? (a >> 16) | (b << 16) : a;
  }
}
/* The 32 and 16 bits at byte c (a constant, even) of a realigned window. */
#define KVN_U32(n, c) ((c) % 4 ? ((n)[(c) / 4] >> 16) | ((n)[(c) / 4 + 1] << 16) : (n)[(c) / 4])
#define KVN_U16(n, c) ((c) % 4 ? (n)[(c) / 4] >> 16 : (n)[(c) / 4] & 0xffffu)
#if KV_K_LANE
/* K: lane t's window starts at its first block (d inside): NBK blocks,
 * o = t NBK KBB mod 8 (at most 6, or 4 for two blocks), so every lane's
 * window is KW8K words and the last lane's ends at the row's end. */
#define NBK (HEAD_DIM / 128)
#define KW8K ((NBK * KBB + (NBK == 1 ? 6 : 4) + 7) / 8)
#define KNN ((NBK * KBB + 3) / 4)
/* The raw bits (kvcache_format.cl's kvq_block_load) of the lane's values
 * 8 i .. 8 i + 7 (block i / 4, its eighth i % 4) from its realigned
 * window n. */
#define KVM_K_LANE_RAW(n, i)                                                       \
  (uint4)(KVN_U16(n, KBB * ((i) / 4)), KVN_U32(n, KBB * ((i) / 4) + KC_QS(i)),      \
          KVN_U32(n, KBB * ((i) / 4) + KC_QS(i) + 4),                               \
          KV_K_FMT == FCL_KV_Q4_0 && (i) % 4 >= 2 ? 4u : 0u)
#define KC_QS(i) (KV_K_FMT == FCL_KV_Q8_0 ? 2 + 8 * ((i) % 4) : 2 + 8 * ((i) % 2))
#endif
#if KV_V_LANE
/* V: lane g's values lie in block g / 2 (D_V = 128: half h = g % 2 of it)
 * or g (256); its window holds their bytes (q8_0: the half's 16, q4_0:
 * the block's 16, both halves' nibbles), d is loaded on its own. The
 * window's last word only where o > 0 (the row may end with the first). */
#define VHALF (HEAD_DIM_V == 128)
#define VLEN (KV_V_FMT == FCL_KV_Q8_0 && !VHALF ? 32 : 16)
#define KW8V (VLEN / 8 + 1)
#define VNN (VLEN / 4)
/* The raw bits of the lane's values 8 i .. 8 i + 7. */
#define KVM_V_LANE_RAW(n, d, h, i)                                                 \
  (uint4)(d, (n)[VC_QS(i) / 4], (n)[VC_QS(i) / 4 + 1],                              \
          KV_V_FMT == FCL_KV_Q8_0 ? 0u : VHALF ? 4u * (h) : 4u * ((i) / 2))
#define VC_QS(i) (KV_V_FMT == FCL_KV_Q8_0 || VHALF ? 8 * (i) : 8 * ((i) % 2))
#endif
