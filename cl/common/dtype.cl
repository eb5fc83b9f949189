/* Element load/store for the storage dtype chosen by FCL_DTYPE
 * (0 = f32, 1 = f16, 2 = bf16). Arithmetic is always f32. f16 goes through
 * vload_half/vstore_half_rte and bf16 through bit shifts, so neither needs
 * cl_khr_fp16. */
#ifndef FCL_DTYPE
#define FCL_DTYPE 0
#endif
/* The products f32 data may use (fcl_f32_precision: 0 highest, 1 high =
 * one TF32 product, 2 medium = one bf16 product); the kernels that have
 * such products read it (mma_tf32.cl, mma_common.cl). */
#ifndef FCL_F32_PRECISION
#define FCL_F32_PRECISION 0
#endif

/* Conversions of 16-bit bits, for any FCL_DTYPE (a kernel may read or
 * write another dtype than its own: the merge's parts and output). */
inline float fcl_bf16_to_f32(ushort x) { return as_float((uint)x << 16); }
/* Round to nearest even; NaN stays a (quiet) NaN. */
inline ushort fcl_f32_to_bf16(float f) {
  uint u = as_uint(f);
  if (isnan(f)) return (ushort)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ushort)(u >> 16);
}
/* IEEE half bits to float, exact for normals, subnormals, inf and NaN. */
inline float fcl_f16_bits_to_f32(ushort h) {
  const uint sign = ((uint)h & 0x8000u) << 16, e = ((uint)h >> 10) & 0x1fu;
  const uint mant = (uint)h & 0x3ffu;
  if (e == 0) return as_float(sign | as_uint((float)mant * 5.9604644775390625e-8f));
  if (e == 31) return as_float(sign | 0x7f800000u | (mant << 13));
  return as_float(sign | ((e + 112u) << 23) | (mant << 13));
}

#if FCL_DTYPE == 0
typedef float fcl_elem;
#define FCL_LOAD(p, i) ((p)[i])
#define FCL_STORE(p, i, x) ((p)[i] = (x))
#elif FCL_DTYPE == 1
typedef half fcl_elem;
#define FCL_LOAD(p, i) vload_half((size_t)(i), (p))
#define FCL_STORE(p, i, x) vstore_half_rte((x), (size_t)(i), (p))
#elif FCL_DTYPE == 2
typedef ushort fcl_elem;
#define FCL_LOAD(p, i) fcl_bf16_to_f32((p)[i])
#define FCL_STORE(p, i, x) ((p)[i] = fcl_f32_to_bf16(x))
#else
#error "FCL_DTYPE must be 0 (f32), 1 (f16) or 2 (bf16)"
#endif

/* Raw loads: the stored bits, converted to f32 later. A prefetch keeps raw
 * values in registers so that the conversion, which waits for the load,
 * happens when the value is used rather than right after the load. */
#if FCL_DTYPE == 0
typedef float fcl_raw;
#define FCL_LOAD_RAW(p, i) ((p)[i])
#define FCL_RAW_F32(x) (x)
#else
typedef ushort fcl_raw;
#define FCL_LOAD_RAW(p, i) (((const __global ushort *)(p))[i])
#if FCL_DTYPE == 1
#define FCL_RAW_F32(x) fcl_f16_bits_to_f32(x)
#else
#define FCL_RAW_F32(x) fcl_bf16_to_f32(x)
#endif
#endif

#define FCL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define FCL_CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

/* Unroll hints for loops with compile-time trip counts, which keep register
 * tiles in registers on GPUs; the host turns them on for GPUs only, as CPU
 * compilers (PoCL) take far longer on fully unrolled kernels. */
#if defined(FCL_UNROLL_HINTS) && FCL_UNROLL_HINTS
#define FCL_UNROLL _Pragma("unroll")
#else
#define FCL_UNROLL
#endif
#define FCL_LOG2E 1.4426950408889634f
#define FCL_LN2 0.6931471805599453f
