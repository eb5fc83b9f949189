/* The KV-cache formats on the host; see ref_quant.h. Built with
 * -ffp-contract=off (tests/ref/CMakeLists.txt): the q4_0 reference is
 * f32(f32(x * id) + 8.5f), two roundings, which a fused multiply-add would
 * change. */
#include "ref_quant.h"

#include "test_util.h"

#include <math.h>
#include <string.h>

int ref_quant_format(fcl_dtype t) {
  return t == FCL_Q8_0 || t == FCL_Q4_0 || t == FCL_FP8_E4M3 || t == FCL_FP8_E5M2;
}

int64_t ref_quant_unit_values(fcl_dtype t) {
  if (t == FCL_Q8_0 || t == FCL_Q4_0) return REF_QBLOCK;
  return ref_quant_unit_bytes(t) ? 1 : 0;
}

size_t ref_quant_unit_bytes(fcl_dtype t) {
  switch (t) {
  case FCL_Q8_0: return REF_Q8_0_BYTES;
  case FCL_Q4_0: return REF_Q4_0_BYTES;
  case FCL_FP8_E4M3:
  case FCL_FP8_E5M2: return 1;
  default: return tu_dtype_size(t);
  }
}

/* ggml stores d as f16, rounded to nearest even (GGML_FP32_TO_FP16). */
static void put_f16(uint8_t *dst, float d) {
  const uint16_t b = tu_f16_bits((double)d);
  memcpy(dst, &b, 2);
}

static float get_f16(const uint8_t *src) {
  uint16_t b;
  memcpy(&b, src, 2);
  return (float)tu_f16_value(b);
}

int ref_q8_0_q(float x, float id) {
  const float x0 = x * id;
  return (int8_t)roundf(x0); /* half away from zero */
}

int ref_q4_0_nibble(float x, float id) {
  const float x0 = x * id;
  const int8_t t = (int8_t)(x0 + 8.5f);
  return t < 15 ? t : 15;
}

void ref_quantize_q8_0(const float x[32], uint8_t out[34]) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = fabsf(x[j]);
    amax = amax > a ? amax : a;
  }
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  for (int j = 0; j < 32; ++j) out[2 + j] = (uint8_t)(int8_t)ref_q8_0_q(x[j], id);
}

void ref_quantize_q4_0(const float x[32], uint8_t out[18]) {
  /* The first value of largest magnitude, with its sign; a block of zeros
   * keeps max = +0.0f, so d = -0.0f (f16 0x8000), as in ggml. */
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  for (int j = 0; j < 16; ++j)
    out[2 + j] = (uint8_t)(ref_q4_0_nibble(x[j], id) | ref_q4_0_nibble(x[j + 16], id) << 4);
}

void ref_dequantize_q8_0(const uint8_t in[34], float y[32]) {
  const float d = get_f16(in);
  for (int j = 0; j < 32; ++j) y[j] = (float)(int8_t)in[2 + j] * d;
}

void ref_dequantize_q4_0(const uint8_t in[18], float y[32]) {
  const float d = get_f16(in);
  for (int j = 0; j < 16; ++j) {
    y[j] = (float)((in[2 + j] & 0x0f) - 8) * d;
    y[j + 16] = (float)((in[2 + j] >> 4) - 8) * d;
  }
}

/* ---- fp8 ----------------------------------------------------------------------- */
typedef struct {
  int    mb, bias; /* mantissa bits, exponent bias */
  double max;
} fp8_format;

static fp8_format fp8_of(fcl_dtype fmt) {
  return fmt == FCL_FP8_E4M3 ? (fp8_format){3, 7, 448.0} : (fp8_format){2, 15, 57344.0};
}

float ref_fp8_max(fcl_dtype fmt) { return (float)fp8_of(fmt).max; }

uint8_t ref_fp8_encode(float x, float scale, fcl_dtype fmt) {
  const fp8_format f = fp8_of(fmt);
  const float y = x / scale;
  const uint8_t sign = signbit(y) ? 0x80u : 0u;
  if (isnan(y)) return sign | 0x7fu;
  double a = fabs((double)y);
  if (a > f.max) a = f.max; /* saturate (infinities too) */
  if (a == 0.0) return sign;
  int e;
  frexp(a, &e);
  e -= 1; /* a = 1.m * 2^e */
  const int emin = 1 - f.bias;
  if (e < emin) e = emin; /* subnormal: steps of 2^(emin - mb) */
  /* The value in steps of the quantum at its exponent: exact in double,
   * then rounded to nearest even. */
  double q = nearbyint(ldexp(a, f.mb - e));
  if (q >= (double)(2 << f.mb)) { /* rounded up to the next power of two */
    q /= 2;
    ++e;
  }
  const unsigned qi = (unsigned)q, lead = 1u << f.mb;
  const unsigned bits = qi < lead ? qi : ((unsigned)(e + f.bias) << f.mb) | (qi - lead);
  return (uint8_t)(sign | bits);
}

float ref_fp8_decode(uint8_t b, fcl_dtype fmt) {
  const fp8_format f = fp8_of(fmt);
  const int eb = 7 - f.mb, top = (1 << eb) - 1;
  const int ex = (b >> f.mb) & top, m = b & ((1 << f.mb) - 1);
  double v;
  if (fmt == FCL_FP8_E4M3 && ex == top && m == (1 << f.mb) - 1) v = NAN;
  else if (fmt == FCL_FP8_E5M2 && ex == top) v = m ? NAN : INFINITY;
  else if (ex == 0) v = ldexp((double)m, 1 - f.bias - f.mb);
  else v = ldexp((double)((1 << f.mb) + m), ex - f.bias - f.mb);
  return (float)(b & 0x80 ? -v : v);
}

/* ---- head vectors ----------------------------------------------------------------- */
void ref_dequantize_vec(fcl_dtype fmt, const uint8_t *src, int64_t n, float scale, float *y) {
  if (fmt == FCL_Q8_0 || fmt == FCL_Q4_0) {
    const size_t bb = ref_quant_unit_bytes(fmt);
    for (int64_t i = 0; i < n / REF_QBLOCK; ++i) {
      if (fmt == FCL_Q8_0) ref_dequantize_q8_0(src + i * bb, y + i * REF_QBLOCK);
      else ref_dequantize_q4_0(src + i * bb, y + i * REF_QBLOCK);
    }
  } else if (fmt == FCL_FP8_E4M3 || fmt == FCL_FP8_E5M2) {
    for (int64_t i = 0; i < n; ++i) y[i] = scale * ref_fp8_decode(src[i], fmt);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = NAN;
  }
}

void ref_quantize_vec(fcl_dtype fmt, const float *x, int64_t n, float scale, uint8_t *dst) {
  if (fmt == FCL_Q8_0 || fmt == FCL_Q4_0) {
    const size_t bb = ref_quant_unit_bytes(fmt);
    for (int64_t i = 0; i < n / REF_QBLOCK; ++i) {
      if (fmt == FCL_Q8_0) ref_quantize_q8_0(x + i * REF_QBLOCK, dst + i * bb);
      else ref_quantize_q4_0(x + i * REF_QBLOCK, dst + i * bb);
    }
  } else if (fmt == FCL_FP8_E4M3 || fmt == FCL_FP8_E5M2) {
    for (int64_t i = 0; i < n; ++i) dst[i] = ref_fp8_encode(x[i], scale, fmt);
  }
}
