/* A 128-bit non-cryptographic hash (two independent 64-bit lanes: FNV-1a
 * and a multiply-rotate mix) keying the program table and binary cache. */
#include "core/core.h"

void fcl_hash_init(fcl_hash *hs) {
  hs->h[0] = 0xcbf29ce484222325ULL;
  hs->h[1] = 0x9e3779b97f4a7c15ULL;
}

void fcl_hash_bytes(fcl_hash *hs, const void *data, size_t n) {
  const unsigned char *p = data;
  unsigned long long a = hs->h[0], b = hs->h[1];
  for (size_t i = 0; i < n; ++i) {
    a = (a ^ p[i]) * 0x100000001b3ULL;
    b = (b ^ p[i]) * 0xff51afd7ed558ccdULL;
    b = (b << 31) | (b >> 33);
  }
  hs->h[0] = a;
  hs->h[1] = b;
}

void fcl_hash_str(fcl_hash *hs, const char *s) {
  size_t n = 0;
  while (s[n]) ++n;
  fcl_hash_bytes(hs, s, n + 1);
}
