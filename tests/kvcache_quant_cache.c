/* Head vectors of quantized KV caches; see kvcache_quant_cache.h. */
#include "kvcache_quant_cache.h"

#include <math.h>
#include <string.h>

void kvq_fill_vec(fcl_dtype fmt, uint8_t *dst, int64_t n, float scale, double amp, tu_rng *g) {
  if (fmt == FCL_Q8_0 || fmt == FCL_Q4_0) {
    const size_t bb = ref_quant_unit_bytes(fmt);
    for (int64_t i = 0; i < n / REF_QBLOCK; ++i, dst += bb) {
      double d = amp / (fmt == FCL_Q8_0 ? 127.0 : 8.0) * tu_rng_range(g, 0.5, 1.0);
      if (tu_rng_int(g, 0, 15) == 0) d = ldexp((double)tu_rng_int(g, 1, 1023), -24);
      if (tu_rng_int(g, 0, 1)) d = -d;
      const uint16_t bits = tu_f16_bits(d);
      memcpy(dst, &bits, 2);
      for (size_t j = 2; j < bb; ++j) dst[j] = (uint8_t)tu_rng_int(g, 0, 255);
    }
  } else {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = ref_fp8_encode((float)tu_rng_range(g, -amp, amp), scale, fmt);
  }
}

float kvq_pick_scale(fcl_dtype fmt, double amp, tu_rng *g) {
  if (fmt != FCL_FP8_E4M3 && fmt != FCL_FP8_E5M2) return 1.0f;
  return (float)(amp * tu_rng_range(g, 0.6, 1.5) / ref_fp8_max(fmt));
}

/* ---- bounds ------------------------------------------------------------------------ */
static float f32_down(double v) {
  float f = (float)v;
  if ((double)f > v) f = nextafterf(f, -INFINITY);
  return f;
}

static float f32_up(double v) {
  float f = (float)v;
  if ((double)f < v) f = nextafterf(f, INFINITY);
  return f;
}

static double f16_of(float v) { return tu_f16_value(tu_f16_bits((double)v)); }

static double f16_at(const uint8_t *p) {
  uint16_t b;
  memcpy(&b, p, 2);
  return tu_f16_value(b);
}

/* The least magnitude in [lo, hi]. */
static float mag_lo(float lo, float hi) { return lo > 0 ? lo : hi < 0 ? -hi : 0.0f; }

static int within(double v, double a, double b) { return v >= fmin(a, b) && v <= fmax(a, b); }

/* Whether q (from the block's f32 id in [ida, idb]) lies between the
 * values f gives at the corners of [lo, hi] x [ida, idb]: f is monotone in
 * x * id, and x * id takes its extremes at the corners. */
static int corners_ok(int q, int (*f)(float, float), float lo, float hi, float ida, float idb) {
  const int c[4] = {f(lo, ida), f(lo, idb), f(hi, ida), f(hi, idb)};
  int mn = c[0], mx = c[0];
  for (int i = 1; i < 4; ++i) {
    mn = c[i] < mn ? c[i] : mn;
    mx = c[i] > mx ? c[i] : mx;
  }
  return q >= mn && q <= mx;
}

static int q8_block_ok(const uint8_t *got, const float *lo, const float *hi) {
  float alo = 0.0f, ahi = 0.0f;
  for (int j = 0; j < REF_QBLOCK; ++j) {
    alo = fmaxf(alo, mag_lo(lo[j], hi[j]));
    ahi = fmaxf(ahi, fmaxf(fabsf(lo[j]), fabsf(hi[j])));
  }
  const float dlo = alo / 127, dhi = ahi / 127;
  if (!within(f16_at(got), f16_of(dlo), f16_of(dhi))) return 0;
  if (dlo == 0.0f) return 1; /* every value may be 0: id unbounded, any q */
  const float ida = 1.0f / dlo, idb = 1.0f / dhi;
  for (int j = 0; j < REF_QBLOCK; ++j)
    if (!corners_ok((int8_t)got[2 + j], ref_q8_0_q, lo[j], hi[j], ida, idb)) return 0;
  return 1;
}

static int q4_block_ok(const uint8_t *got, const float *lo, const float *hi) {
  float alo = 0.0f; /* amax is at least this */
  for (int j = 0; j < REF_QBLOCK; ++j) alo = fmaxf(alo, mag_lo(lo[j], hi[j]));
  if (alo == 0.0f) return 1; /* every value may be 0: d, q unbounded */
  /* m, the first value of largest magnitude, is one whose bounds reach
   * magnitude alo; it is s * [alo, mhi] for a sign s some such value has. */
  for (int s = 1; s >= -1; s -= 2) {
    float mhi = 0.0f;
    int any = 0;
    for (int j = 0; j < REF_QBLOCK; ++j) {
      const float reach = s > 0 ? hi[j] : -lo[j];
      if (reach >= alo) {
        any = 1;
        mhi = fmaxf(mhi, reach);
      }
    }
    if (!any) continue;
    const float da = (float)s * alo / -8, db = (float)s * mhi / -8;
    if (!within(f16_at(got), f16_of(da), f16_of(db))) continue;
    const float ida = 1.0f / da, idb = 1.0f / db;
    int ok = 1;
    for (int j = 0; j < REF_QBLOCK && ok; ++j) {
      const int nib = j < 16 ? got[2 + j] & 15 : got[2 + j - 16] >> 4;
      ok = corners_ok(nib, ref_q4_0_nibble, lo[j], hi[j], ida, idb);
    }
    if (ok) return 1;
  }
  return 0;
}

static int fp8_ok(uint8_t got, float lo, float hi, float scale, fcl_dtype fmt) {
  const float v = ref_fp8_decode(got, fmt);
  return !isnan(v) && within(v, ref_fp8_decode(ref_fp8_encode(lo, scale, fmt), fmt),
                             ref_fp8_decode(ref_fp8_encode(hi, scale, fmt), fmt));
}

size_t kvq_check_vec(fcl_dtype fmt, const uint8_t *got, const double *x, const double *err,
                     int64_t n, float scale, kvq_stats *st) {
  const int64_t uv = ref_quant_unit_values(fmt);
  const size_t ub = ref_quant_unit_bytes(fmt);
  size_t bad = 0;
  for (int64_t u = 0; u < n / uv; ++u, got += ub) {
    float lo[REF_QBLOCK], hi[REF_QBLOCK], xf[REF_QBLOCK];
    int exact = 1;
    for (int64_t j = 0; j < uv; ++j) {
      const double v = x[u * uv + j], e = err[u * uv + j];
      xf[j] = (float)v;
      lo[j] = e > 0 ? f32_down(v - e) : xf[j];
      hi[j] = e > 0 ? f32_up(v + e) : xf[j];
      exact &= !(e > 0);
    }
    uint8_t want[REF_Q8_0_BYTES];
    ref_quantize_vec(fmt, xf, uv, scale, want);
    const int same = memcmp(want, got, ub) == 0;
    int ok;
    if (exact) ok = same;
    else if (fmt == FCL_Q8_0) ok = q8_block_ok(got, lo, hi);
    else if (fmt == FCL_Q4_0) ok = q4_block_ok(got, lo, hi);
    else ok = fp8_ok(got[0], lo[0], hi[0], scale, fmt);
    bad += !ok;
    if (st) {
      ++st->units;
      st->inexact += ok && !exact && !same;
    }
  }
  if (st) st->bad += bad;
  return bad;
}
