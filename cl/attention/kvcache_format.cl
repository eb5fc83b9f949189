/* requires: attention/kvcache_common.cl */
/* The KV caches' formats (prepend kvcache_common.cl): q's dtype, or a
 * quantized format (KV_K_FMT, KV_V_FMT: attention_abi.h's FCL_KV_Q8_0 ..
 * FCL_KV_FP8_E5M2; DESIGN.md, "Quantized KV caches"):
 *   q8_0: blocks of 32 values, f16 d then 32 int8 (34 bytes), d * q;
 *   q4_0: blocks of 32, f16 d then 16 bytes, value j in byte j % 16's low
 *         (j < 16) or high nibble (18 bytes), d * (nibble - 8);
 *   fp8:  a byte a value (E4M3 "fn" or E5M2), times the tensor's scale,
 *         which the kernels fold into the softmax scale (K) and the output
 *         (V) rather than into each value.
 * Block formats' views are in values with their offsets in bytes: the
 * vector at value index r starts at byte off + r / 32 * block bytes.
 *
 * For each cache (KC_ for K, VC_ for V): its element type (kc_elem), the
 * raw bits of VEC values at value index i, a multiple of VEC (kc_raw,
 * KC_LOAD), their conversion to f32 (KC_CONVERT, the scale left out), one
 * value's (KC_VALUE), and the offset that value indices start from
 * (KC_IDX_OFF: 0 for block formats, whose offset the loads add in bytes).
 * And the append's quantizers, byte for byte ggml's reference ones
 * (quantize_row_q8_0_ref, quantize_row_q4_0_ref) and fp8 rounding to
 * nearest even with saturation. */
#ifndef KV_K_FMT
#define KV_K_FMT FCL_DTYPE
#endif
#ifndef KV_V_FMT
#define KV_V_FMT FCL_DTYPE
#endif
#define KV_BLOCK_FMT(f) ((f) == FCL_KV_Q8_0 || (f) == FCL_KV_Q4_0)
#define KV_BLOCK_BYTES(f) ((f) == FCL_KV_Q8_0 ? 34 : 18)

/* ---- reading ------------------------------------------------------------- */

inline float fcl_e4m3_to_f32(uint b) {
  const uint s = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 0) return as_float(s | as_uint((float)m * 0.001953125f)); /* m 2^-9 */
  if (e == 15 && m == 7) return as_float(s | 0x7fc00000u);
  return as_float(s | ((e + 120u) << 23) | (m << 20));
}
inline float fcl_e5m2_to_f32(uint b) { return fcl_f16_bits_to_f32((ushort)(b << 8)); }

/* VEC bytes from p (aligned to their size, at most 8) as words. */
inline uint2 kvq_bytes(const __global uchar *p) {
#if VEC == 8
  return *(const __global uint2 *)p;
#elif VEC == 4
  return (uint2)(*(const __global uint *)p, 0u);
#elif VEC == 2
  return (uint2)(*(const __global ushort *)p, 0u);
#else
  return (uint2)(*p, 0u);
#endif
}
/* VEC bytes from p, two-byte aligned (a block's qs). */
inline uint2 kvq_bytes2(const __global uchar *p) {
#if VEC == 8
  const ushort4 w = vload4(0, (const __global ushort *)p);
  return (uint2)(w.x | ((uint)w.y << 16), w.z | ((uint)w.w << 16));
#elif VEC == 4
  const ushort2 w = vload2(0, (const __global ushort *)p);
  return (uint2)(w.x | ((uint)w.y << 16), 0u);
#elif VEC == 2
  return (uint2)(*(const __global ushort *)p, 0u);
#else
  return (uint2)(*p, 0u);
#endif
}
inline uint kvq_byte(uint2 w, int e) { return ((e < 4 ? w.x : w.y) >> (8 * (e % 4))) & 0xffu; }

/* Raw bits of a block format's VEC values: (d, bytes 0-3, bytes 4-7, the
 * nibble's shift). */
inline uint4 kvq_block_load(const __global uchar *p, long off, long i, int fmt) {
  const __global uchar *blk = p + off + i / 32 * KV_BLOCK_BYTES(fmt);
  const int j = (int)(i % 32), b0 = fmt == FCL_KV_Q8_0 ? j : j % 16;
  const uint2 w = kvq_bytes2(blk + 2 + b0);
  return (uint4)(*(const __global ushort *)blk, w.x, w.y, fmt == FCL_KV_Q4_0 && j >= 16 ? 4u : 0u);
}
inline float kvq_block_value(uint4 r, int e, int fmt) {
  const float d = fcl_f16_bits_to_f32((ushort)r.x);
  const uint b = kvq_byte(r.yz, e);
  return fmt == FCL_KV_Q8_0 ? d * (float)(char)b : d * (float)((int)((b >> r.w) & 15u) - 8);
}
inline float kvq_fp8_value(uint b, int fmt) {
  return fmt == FCL_KV_FP8_E4M3 ? fcl_e4m3_to_f32(b) : fcl_e5m2_to_f32(b);
}

/* One value of a cache of format fmt at value index i (counted from
 * KC_IDX_OFF(off): block formats add their offset off in bytes here), its
 * scale left out. */
#define KV_VALUE_(fmt, p, off, i)                                                     \
  (KV_BLOCK_FMT(fmt) ? kvq_value1((const __global uchar *)(p), off, i, fmt)           \
   : (fmt) > 2       ? kvq_fp8_value(((const __global uchar *)(p))[i], fmt)           \
                     : FCL_LOAD((const __global fcl_elem *)(p), i))
inline float kvq_value1(const __global uchar *p, long off, long i, int fmt) {
  const __global uchar *blk = p + off + i / 32 * KV_BLOCK_BYTES(fmt);
  const int j = (int)(i % 32);
  const float d = fcl_f16_bits_to_f32(*(const __global ushort *)blk);
  if (fmt == FCL_KV_Q8_0) return d * (float)(char)blk[2 + j];
  return d * (float)((int)((blk[2 + j % 16] >> (j >= 16 ? 4 : 0)) & 15) - 8);
}

/* The per-cache definitions, for K (KC_) and V (VC_). */
#if KV_K_FMT > 2
typedef uchar kc_elem;
#define KC_IDX_OFF(off) (KV_BLOCK_FMT(KV_K_FMT) ? 0 : (off))
#else
typedef fcl_elem kc_elem;
#define KC_IDX_OFF(off) (off)
#endif
#if KV_V_FMT > 2
typedef uchar vc_elem;
#define VC_IDX_OFF(off) (KV_BLOCK_FMT(KV_V_FMT) ? 0 : (off))
#else
typedef fcl_elem vc_elem;
#define VC_IDX_OFF(off) (off)
#endif
#define KC_VALUE(p, off, i) KV_VALUE_(KV_K_FMT, p, off, i)
#define VC_VALUE(p, off, i) KV_VALUE_(KV_V_FMT, p, off, i)

/* VEC values at index i (counted as for KC_VALUE), raw, and converted. */
#if KV_BLOCK_FMT(KV_K_FMT)
typedef uint4 kc_raw;
#define KC_LOAD(p, off, i) kvq_block_load((const __global uchar *)(p), off, i, KV_K_FMT)
#define KC_CONVERT(x, r) \
  FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_) (x)[e_] = kvq_block_value(r, e_, KV_K_FMT)
#define KC_ZERO ((uint4)(0u))
#elif KV_K_FMT > 2
typedef uint2 kc_raw;
#define KC_LOAD(p, off, i) kvq_bytes((const __global uchar *)(p) + (i))
#define KC_CONVERT(x, r) \
  FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_) (x)[e_] = kvq_fp8_value(kvq_byte(r, e_), KV_K_FMT)
#define KC_ZERO ((uint2)(0u))
#else
typedef kv_raw kc_raw;
#define KC_LOAD(p, off, i) KV_LOAD_RAW(p, i)
#define KC_CONVERT(x, r) KV_CONVERT(x, r)
#define KC_ZERO ((kv_raw)(0))
#endif
#if KV_BLOCK_FMT(KV_V_FMT)
typedef uint4 vc_raw;
#define VC_LOAD(p, off, i) kvq_block_load((const __global uchar *)(p), off, i, KV_V_FMT)
#define VC_CONVERT(x, r) \
  FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_) (x)[e_] = kvq_block_value(r, e_, KV_V_FMT)
#define VC_ZERO ((uint4)(0u))
#elif KV_V_FMT > 2
typedef uint2 vc_raw;
#define VC_LOAD(p, off, i) kvq_bytes((const __global uchar *)(p) + (i))
#define VC_CONVERT(x, r) \
  FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_) (x)[e_] = kvq_fp8_value(kvq_byte(r, e_), KV_V_FMT)
#define VC_ZERO ((uint2)(0u))
#else
typedef kv_raw vc_raw;
#define VC_LOAD(p, off, i) KV_LOAD_RAW(p, i)
#define VC_CONVERT(x, r) KV_CONVERT(x, r)
#define VC_ZERO ((kv_raw)(0))
#endif

/* The fp8 scales of kv head hk (1 without; a constant in a program of no
 * fp8 cache). */
#define KV_FP8_FMT(f) ((f) == FCL_KV_FP8_E4M3 || (f) == FCL_KV_FP8_E5M2)
#define KV_K_SCALE(hk) \
  (KV_FP8_FMT(KV_K_FMT) && (kv_flags & FCL_KV_K_SCALE) ? k_scale[scale_heads ? (hk) : 0] : 1.0f)
#define KV_V_SCALE(hk) \
  (KV_FP8_FMT(KV_V_FMT) && (kv_flags & FCL_KV_V_SCALE) ? v_scale[scale_heads ? (hk) : 0] : 1.0f)

/* ---- writing (the append) ------------------------------------------------ */

/* a / b rounded to nearest, as IEEE division is (OpenCL's `/` may be off
 * by 2.5 ulp): the quotient corrected once, then the nearest of it and its
 * two neighbours by their exact remainders (a quotient of two floats is
 * never halfway between two). */
inline float fcl_div_rn(float a, float b) {
  float q = a / b;
  if (!isfinite(q) || q == 0.0f) return q;
  q = fma(fma(-b, q, a), 1.0f / b, q);
  const float lo = nextafter(q, -INFINITY), hi = nextafter(q, INFINITY);
  const float e = fabs(fma(-b, q, a)), el = fabs(fma(-b, lo, a)), eh = fabs(fma(-b, hi, a));
  return el < e && el <= eh ? lo : eh < e ? hi : q;
}

/* A block of 32 values (x) as ggml's reference quantizers write it. */
inline void kvq_store_q8_0(__global uchar *blk, const float *x) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = fmax(amax, fabs(x[j]));
  const float d = fcl_div_rn(amax, 127.0f), id = d != 0.0f ? fcl_div_rn(1.0f, d) : 0.0f;
  vstore_half_rte(d, 0, (__global half *)blk);
  for (int j = 0; j < 32; ++j) blk[2 + j] = (uchar)(char)round(x[j] * id);
}
inline void kvq_store_q4_0(__global uchar *blk, const float *x) {
#pragma OPENCL FP_CONTRACT OFF /* x * id + 8.5f rounds twice, as in C: never one fma */
  float amax = 0.0f, mx = 0.0f; /* the first value of largest magnitude */
  for (int j = 0; j < 32; ++j)
    if (amax < fabs(x[j])) amax = fabs(x[j]), mx = x[j];
  const float d = mx / -8.0f, id = d != 0.0f ? fcl_div_rn(1.0f, d) : 0.0f;
  vstore_half_rte(d, 0, (__global half *)blk);
  for (int j = 0; j < 16; ++j) {
    const int lo = min(15, (int)(char)(x[j] * id + 8.5f));
    const int hi = min(15, (int)(char)(x[j + 16] * id + 8.5f));
    blk[2 + j] = (uchar)(lo | (hi << 4));
  }
}
/* x as fp8 (E4M3 or E5M2), to nearest even, saturated to the largest
 * finite value; NaN stays NaN. */
inline uchar fcl_f32_to_fp8(float x, int fmt) {
  const bool e5 = fmt == FCL_KV_FP8_E5M2;
  const uint s = (as_uint(x) >> 24) & 0x80u;
  if (isnan(x)) return (uchar)(s | 0x7fu);
  const float a = fabs(x);
  if (a >= (e5 ? 57344.0f : 448.0f)) return (uchar)(s | (e5 ? 0x7bu : 0x7eu));
  if (a < (e5 ? 0x1p-14f : 0x1p-6f)) /* subnormal: units of 2^-16 or 2^-9 */
    return (uchar)(s | (uint)rint(a * (e5 ? 0x1p16f : 0x1p9f)));
  const int mb = e5 ? 2 : 3, sh = 23 - mb;
  uint u = as_uint(a);
  u += (1u << (sh - 1)) - 1u + ((u >> sh) & 1u);
  const uint e = (u >> 23) - 127u + (e5 ? 15u : 7u);
  return (uchar)(s | (e << mb) | ((u >> sh) & ((1u << mb) - 1u)));
}
