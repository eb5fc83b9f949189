/* Head vectors of quantized KV caches for kvcache_harness.c: random
 * contents that decode to sane values, and the check of a head vector the
 * append wrote against the host reference (tests/ref/ref_quant.h).
 *
 * A head vector of n values is n / 32 blocks (q8_0, q4_0) or n bytes (fp8,
 * values scale * fp8). */
#ifndef FCL_KVCACHE_QUANT_CACHE_H
#define FCL_KVCACHE_QUANT_CACHE_H

#include "ref_quant.h"
#include "test_util.h"

/* Random bytes for one head vector, values within about +-amp: blocks get
 * a random f16 d of either sign, |d| in [1/2, 1] of amp / 127 (q8_0) or
 * amp / 8 (q4_0), and random q (q8_0: every int8, -128 too); one block in
 * 16 has an f16-subnormal d. fp8 bytes encode uniform values in
 * [-amp, amp] at the scale. */
void kvq_fill_vec(fcl_dtype fmt, uint8_t *dst, int64_t n, float scale, double amp, tu_rng *g);

/* A scale for an fp8 cache whose values reach amp: its largest value is
 * amp times 0.6 to 1.5, so some appended values saturate. 1 for the
 * other formats. */
float kvq_pick_scale(fcl_dtype fmt, double amp, tu_rng *g);

/* What kvq_check_vec found over the head vectors it saw. */
typedef struct {
  size_t units;    /* blocks or bytes checked */
  size_t bad;      /* outside what the reference allows */
  size_t inexact;  /* rotated units that differ from quantizing the exact rotation (allowed) */
} kvq_stats;

/* Checks the n values at got (format fmt, scale) that the append wrote for
 * a head vector whose f32 value e lies within err[e] of x[e] (err[e] = 0:
 * x[e] exactly, an f32 value). A unit (block, fp8 byte) whose values are
 * all exact must equal ref_quantize_vec's bytes. Otherwise the bytes must
 * be what some values within the bounds give:
 *  - fp8: the byte's value between the encodings of the bounds;
 *  - q8_0: the f16 d between the roundings of the bounds of amax / 127,
 *    each q between roundf(x * id) at the corners of x's bounds and id's
 *    (id = 1 / d, d from those bounds of amax);
 *  - q4_0: likewise for the first value of largest magnitude m: d between
 *    the bounds of m / -8 for one sign of m that a value within its
 *    bounds can have, and each nibble within the corners.
 * Returns the number of bad units (added to st->bad). */
size_t kvq_check_vec(fcl_dtype fmt, const uint8_t *got, const double *x, const double *err,
                     int64_t n, float scale, kvq_stats *st);
#endif
