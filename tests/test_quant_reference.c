/* The host reference of the KV-cache formats (tests/ref/ref_quant.c), no
 * device needed:
 *  - against independent implementations (tests/data/quant_golden.h, made
 *    by tests/data/make_quant_golden.py): every golden q8_0 / q4_0 block
 *    quantized to the same bytes as gguf's quantizers (ggml's C reference
 *    where gguf differs), every one of the 256 fp8 bytes of both formats
 *    decoded to torch's value, every golden encode giving torch's byte (or
 *    a NaN byte for a NaN);
 *  - properties over many random blocks and values: dequantize(quantize(x))
 *    within half a step (q8_0) / a step (q4_0) of x, plus what the f16
 *    rounding of d moves; fp8 encodes to the nearest value (ties to even)
 *    and saturates, and every finite byte survives a round trip. */
#include "ref_quant.h"
#include "test_util.h"

#include "quant_golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0, g_checks = 0;

/* Counts every check, failed or not. */
#define CHECK(cond, ...)                           \
  do {                                             \
    ++g_checks;                                    \
    TU_CHECK(g_failures, cond, __VA_ARGS__);       \
  } while (0)

static void hex(const uint8_t *b, size_t n, char *out) {
  for (size_t i = 0; i < n; ++i) sprintf(out + 2 * i, "%02x", b[i]);
}

/* ---- golden data ------------------------------------------------------------------ */
static void golden_blocks(void) {
  char a[80], b[80];
  for (int i = 0; i < QG_Q8_0_COUNT; ++i) {
    uint8_t got[34];
    ref_quantize_q8_0(qg_q8_0[i].x, got);
    hex(got, 34, a);
    hex(qg_q8_0[i].bytes, 34, b);
    CHECK(memcmp(got, qg_q8_0[i].bytes, 34) == 0, "q8_0 golden %d (%s):\n    got  %s\n    want %s",
          i, qg_q8_0[i].what, a, b);
  }
  for (int i = 0; i < QG_Q4_0_COUNT; ++i) {
    uint8_t got[18];
    ref_quantize_q4_0(qg_q4_0[i].x, got);
    hex(got, 18, a);
    hex(qg_q4_0[i].bytes, 18, b);
    CHECK(memcmp(got, qg_q4_0[i].bytes, 18) == 0, "q4_0 golden %d (%s):\n    got  %s\n    want %s",
          i, qg_q4_0[i].what, a, b);
  }
  /* The dequantizers on the golden bytes: d * q, d read as f16. */
  for (int i = 0; i < QG_Q8_0_COUNT; ++i) {
    float y[32];
    ref_dequantize_q8_0(qg_q8_0[i].bytes, y);
    const double d = tu_f16_value((uint16_t)(qg_q8_0[i].bytes[0] | qg_q8_0[i].bytes[1] << 8));
    for (int j = 0; j < 32; ++j)
      CHECK(y[j] == d * (int8_t)qg_q8_0[i].bytes[2 + j], "q8_0 dequantize %d[%d]: %a", i, j,
            (double)y[j]);
  }
  for (int i = 0; i < QG_Q4_0_COUNT; ++i) {
    float y[32];
    ref_dequantize_q4_0(qg_q4_0[i].bytes, y);
    const double d = tu_f16_value((uint16_t)(qg_q4_0[i].bytes[0] | qg_q4_0[i].bytes[1] << 8));
    for (int j = 0; j < 32; ++j) {
      const int nib = j < 16 ? qg_q4_0[i].bytes[2 + j] & 15 : qg_q4_0[i].bytes[2 + j - 16] >> 4;
      CHECK(y[j] == d * (nib - 8), "q4_0 dequantize %d[%d]: %a", i, j, (double)y[j]);
    }
  }
  printf("golden q8_0 (%d blocks), q4_0 (%d blocks): done\n", QG_Q8_0_COUNT, QG_Q4_0_COUNT);
}

static void golden_fp8(fcl_dtype fmt, const float *value, const qg_fp8_enc *enc, int n_enc) {
  const char *name = tu_dtype_name(fmt);
  for (int b = 0; b < 256; ++b) {
    const float got = ref_fp8_decode((uint8_t)b, fmt), want = value[b];
    if (isnan(want)) {
      CHECK(isnan(got), "%s decode 0x%02x: %a, want NaN", name, b, (double)got);
    } else {
      CHECK(got == want && !signbit(got) == !signbit(want), "%s decode 0x%02x: %a, want %a",
            name, b, (double)got, (double)want);
    }
  }
  for (int i = 0; i < n_enc; ++i) {
    const uint8_t got = ref_fp8_encode(enc[i].x, enc[i].scale, fmt);
    if (enc[i].nan) {
      CHECK(isnan(ref_fp8_decode(got, fmt)), "%s encode %d (%s): 0x%02x is not a NaN", name, i,
            enc[i].what, got);
    } else {
      CHECK(got == enc[i].byte, "%s encode %d (%s): x %a scale %a: 0x%02x, want 0x%02x", name, i,
            enc[i].what, (double)enc[i].x, (double)enc[i].scale, got, enc[i].byte);
    }
  }
  printf("golden %s (256 bytes decoded, %d encodes): done\n", name, n_enc);
}

/* ---- properties --------------------------------------------------------------------- */
/* A random block: normal or uniform values, sometimes an outlier, at a
 * magnitude from 1e-6 to 1e4. */
static void random_block(tu_rng *g, float x[32]) {
  const double mag = pow(10.0, tu_rng_range(g, -6.0, 4.0));
  const int kind = (int)tu_rng_int(g, 0, 2);
  for (int j = 0; j < 32; ++j)
    x[j] = (float)(mag * (kind == 1 ? tu_rng_range(g, -1.0, 1.0) : tu_rng_normal(g)));
  if (kind == 2) x[tu_rng_int(g, 0, 31)] = (float)(mag * tu_rng_range(g, -40.0, 40.0));
}

static void block_properties(void) {
  tu_rng g;
  tu_rng_seed(&g, 31337);
  const int n = 20000;
  double worst8 = 0.0, worst4 = 0.0;
  for (int i = 0; i < n; ++i) {
    float x[32], y[32];
    uint8_t b8[34], b4[18];
    random_block(&g, x);
    /* q8_0: d = amax / 127 in f32; x * id rounds to q within half a step,
     * and the f16 d moves q * d by |q| times its rounding. The slack of
     * 2^-14 steps covers the f32 roundings of id and x * id (at most
     * 2 * 127 * 2^-24 steps). */
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(x[j]));
    const double d8 = (double)(amax / 127);
    ref_quantize_q8_0(x, b8);
    ref_dequantize_q8_0(b8, y);
    const double d8h = tu_f16_value((uint16_t)(b8[0] | b8[1] << 8));
    for (int j = 0; j < 32; ++j) {
      const int q = (int8_t)b8[2 + j];
      const double step_err = fabs(x[j] - q * d8), err = fabs(x[j] - y[j]);
      const double half = (0.5 + 0x1p-14) * d8, bound = half + abs(q) * fabs(d8h - d8);
      CHECK(step_err <= half && err <= bound,
            "q8_0 random block %d[%d]: x %a q %d d %a: |x - q d| %g, |x - y| %g > %g", i, j,
            (double)x[j], q, d8, step_err, err, bound);
      if (d8 > 0) worst8 = fmax(worst8, step_err / d8);
    }
    /* q4_0: d = m / -8 (m the first value of largest magnitude);
     * truncating x * id + 8.5 rounds to nearest within half a step, except
     * x * id in (7.5, 8] (the side opposite m), clamped to 7: a step. */
    float m = 0.0f, am = 0.0f;
    for (int j = 0; j < 32; ++j)
      if (am < fabsf(x[j])) am = fabsf(x[j]), m = x[j];
    const double d4 = (double)(m / -8);
    ref_quantize_q4_0(x, b4);
    ref_dequantize_q4_0(b4, y);
    const double d4h = tu_f16_value((uint16_t)(b4[0] | b4[1] << 8));
    for (int j = 0; j < 32; ++j) {
      const int q = (j < 16 ? b4[2 + j] & 15 : b4[2 + j - 16] >> 4) - 8;
      const double step_err = fabs(x[j] - q * d4), err = fabs(x[j] - y[j]);
      const double step = (1 + 0x1p-14) * fabs(d4), bound = step + abs(q) * fabs(d4h - d4);
      CHECK(step_err <= step && err <= bound,
            "q4_0 random block %d[%d]: x %a q %d d %a: |x - q d| %g, |x - y| %g > %g", i, j,
            (double)x[j], q, d4, step_err, err, bound);
      /* Within half a step unless clamped. */
      if (q != 7)
        CHECK(step_err <= (0.5 + 0x1p-14) * fabs(d4), "q4_0 %d[%d]: not the nearest step", i, j);
      if (d4 != 0) worst4 = fmax(worst4, step_err / fabs(d4));
    }
    /* The first value of largest magnitude becomes -8 exactly (q8_0: +-127). */
    for (int j = 0; j < 32; ++j)
      if (x[j] == m && fabsf(m) > 0) {
        const int q = (j < 16 ? b4[2 + j] & 15 : b4[2 + j - 16] >> 4) - 8;
        CHECK(q == -8, "q4_0 block %d: its largest value %a got q %d", i, (double)m, q);
        break;
      }
  }
  printf("q8_0/q4_0 properties over %d random blocks: worst |x - q d| %.4f / %.4f of d: done\n",
         n, worst8, worst4);
}

static void fp8_properties(fcl_dtype fmt) {
  const char *name = tu_dtype_name(fmt);
  const float mx = ref_fp8_max(fmt);
  /* Every finite byte: a round trip, and scale 2^k moves nothing. */
  for (int b = 0; b < 256; ++b) {
    const float v = ref_fp8_decode((uint8_t)b, fmt);
    if (!isfinite(v)) continue;
    CHECK(ref_fp8_encode(v, 1.0f, fmt) == b, "%s: byte 0x%02x (%a) does not round-trip", name, b,
          (double)v);
    CHECK(ref_fp8_encode(v * 0.25f, 0.25f, fmt) == b, "%s: byte 0x%02x at scale 1/4", name, b);
  }
  /* Random values: the nearest of the two bytes around y (ties: the even
   * one), or the largest finite value beyond it. */
  tu_rng g;
  tu_rng_seed(&g, 777 + (uint64_t)fmt);
  for (int i = 0; i < 50000; ++i) {
    const float scale = (float)pow(2.0, tu_rng_range(&g, -3, 3));
    const double mag = pow(2.0, tu_rng_range(&g, fmt == FCL_FP8_E4M3 ? -12 : -19,
                                             fmt == FCL_FP8_E4M3 ? 10 : 17));
    const float x = (float)(mag * tu_rng_range(&g, -1, 1) * scale);
    const float y = x / scale;
    const uint8_t b = ref_fp8_encode(x, scale, fmt);
    const float v = ref_fp8_decode(b, fmt);
    if (fabsf(y) >= mx) {
      CHECK(v == copysignf(mx, y), "%s: %a saturates to %a", name, (double)y, (double)v);
      continue;
    }
    /* The byte on the other side of y: magnitudes are ordered like the bytes. */
    const int up = fabsf(v) < fabsf(y);
    const int other = (b & 0x7f) == 0 && !up ? -1 : up ? b + 1 : b - 1;
    CHECK(signbit(v) == signbit(y) || v == 0, "%s: %a encoded with the wrong sign", name, (double)y);
    if (other < 0 || fabsf(v) == fabsf(y)) continue;
    const float w = ref_fp8_decode((uint8_t)other, fmt);
    if (!isfinite(w)) continue;
    const double ev = fabs((double)v - y), ew = fabs((double)w - y);
    CHECK(ev < ew || (ev == ew && b % 2 == 0),
          "%s: %a encoded as 0x%02x (%a), but 0x%02x (%a) is %s", name, (double)y, b, (double)v,
          other, (double)w, ev == ew ? "as near and even" : "nearer");
  }
  printf("%s properties (round trips, nearest-even, saturation): done\n", name);
}

int main(void) {
  const double t0 = tu_now();
  golden_blocks();
  golden_fp8(FCL_FP8_E4M3, qg_e4m3_value, qg_e4m3_enc, QG_E4M3_ENC_COUNT);
  golden_fp8(FCL_FP8_E5M2, qg_e5m2_value, qg_e5m2_enc, QG_E5M2_ENC_COUNT);
  block_properties();
  fp8_properties(FCL_FP8_E4M3);
  fp8_properties(FCL_FP8_E5M2);
  printf("test_quant_reference: %d checks, %d failed, %.2f s\n", g_checks, g_failures,
         tu_now() - t0);
  printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  return g_failures ? 1 : 0;
}
