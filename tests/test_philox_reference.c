/* Device-free: the host Philox-4x32-10 (tests/ref/ref_philox.c) against
 * Random123's known-answer vectors (kat_vectors, philox4x32 with 10
 * rounds), and the dropout mask's threshold and word selection. */
#include "ref_philox.h"

#include <inttypes.h>
#include <stdio.h>

static int failed, run;

static void expect(const char *what, int ok) {
  ++run;
  failed += !ok;
  printf("%s %s\n", ok ? "PASS" : "FAIL", what);
}

int main(void) {
  static const struct {
    uint32_t ctr[4], key[2], out[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (int t = 0; t < 3; ++t) {
    uint32_t w[4];
    ref_philox4x32_10(kat[t].ctr, kat[t].key, w);
    char what[160];
    snprintf(what, sizeof what,
             "philox4x32_10 KAT %d: %08" PRIx32 " %08" PRIx32 " %08" PRIx32 " %08" PRIx32, t,
             w[0], w[1], w[2], w[3]);
    expect(what, w[0] == kat[t].out[0] && w[1] == kat[t].out[1] && w[2] == kat[t].out[2] &&
                     w[3] == kat[t].out[3]);
  }

  /* The mask: element n takes word n % 4 of counter (n / 4, offset), key
   * (seed lo, seed hi), against (uint32_t)(p * 2^32). */
  expect("threshold 0 / 0.5 / 0.1",
         ref_dropout_threshold(0.0) == 0 && ref_dropout_threshold(0.5) == 0x80000000u &&
             ref_dropout_threshold(0.1) == 429496729u);
  /* Seed and offset 0, elements 0..3: the words of KAT 0, one each. */
  int sel = 1;
  for (int t = 0; t < 4; ++t) {
    const uint32_t r = kat[0].out[t];
    const double just_keep = (double)r / 4294967296.0;        /* threshold r: kept */
    const double just_drop = ((double)r + 1.0) / 4294967296.0; /* threshold r + 1   */
    sel &= ref_dropout_keep(0, 0, just_keep, (uint64_t)t) &&
           !ref_dropout_keep(0, 0, just_drop, (uint64_t)t) && ref_dropout_keep(0, 0, 0.0, (uint64_t)t);
  }
  /* Every word in its place: counter (n/4 lo, n/4 hi, offset lo, offset
   * hi), key (seed lo, seed hi), with every half nonzero. */
  const uint64_t seed = 0x299f31d0a4093822u, off = 0x0370734413198a2eu, g = 0x35a308d3243f6a88u;
  const uint32_t ctr[4] = {0x243f6a88u, 0x35a308d3u, 0x13198a2eu, 0x03707344u};
  const uint32_t key[2] = {0xa4093822u, 0x299f31d0u};
  uint32_t w[4];
  ref_philox4x32_10(ctr, key, w);
  for (int t = 0; t < 4; ++t) {
    const uint64_t n = g * 4 + (uint64_t)t;
    sel &= ref_dropout_keep(seed, off, (double)w[t] / 4294967296.0, n) &&
           !ref_dropout_keep(seed, off, ((double)w[t] + 1.0) / 4294967296.0, n);
  }
  expect("keep(n) compares word n % 4 of block n / 4 (seed, offset, n/4 in their halves)", sel);
  expect("index ((b*hq + h)*sq + i)*sk + j",
         ref_dropout_index(1, 2, 3, 4, 5, 6, 7) == ((1 * 5 + 2) * 6 + 3) * 7 + 4);

  printf("test_philox_reference: %d cases, %d failed\n", run, failed);
  return failed || !run;
}
