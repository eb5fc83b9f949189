/* Decoding of fuzz inputs; see fuzz_decode.h. Values are drawn mostly from
 * small valid ranges (so that many calls pass validation and run kernels)
 * and otherwise from a table of edge values. Valid values above the caps
 * are folded back under them: large valid problems would only be slow. */
#include "fuzz_decode.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

uint8_t fz_u8(fz_reader *r) {
  if (!r->n) return 0;
  r->n--;
  return *r->p++;
}

static uint32_t u32(fz_reader *r) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | fz_u8(r);
  return v;
}

void fz_string(fz_reader *r, char *out, size_t cap) {
  static const char *const words[] = {"pocl", "POCL", "rusticl", "nvidia", "0:0", "0:99",
                                      "99:0", "-1:0", "0:", ":", "", "Portable",
                                      "oclgrind", "1:0", "cpu", "x"};
  const uint8_t b = fz_u8(r);
  if (b < 128) {
    snprintf(out, cap, "%s", words[b % (sizeof words / sizeof words[0])]);
    return;
  }
  size_t n = b % cap;
  for (size_t i = 0; i < n; ++i) out[i] = (char)(fz_u8(r) | 1); /* no NUL inside */
  out[n] = '\0';
}

static const int64_t edge[] = {0, -1, -2, 1, 2, 3, 7, 17, 33, 64, 65, 257, 512, 513,
                               1LL << 30, (1LL << 30) + 1, INT32_MAX, (int64_t)INT32_MAX + 1,
                               INT64_MAX, INT64_MIN, -(1LL << 40)};
#define NEDGE ((int)(sizeof edge / sizeof edge[0]))

/* A size: mostly 1..cap, else an edge value; valid values (1..valid_max)
 * above cap are folded to 1..cap. */
static int64_t dim(fz_reader *r, int64_t cap, int64_t valid_max) {
  const uint8_t b = fz_u8(r);
  int64_t v = b < 224 ? 1 + b % cap : edge[b % NEDGE];
  if (v > cap && v <= valid_max) v = 1 + v % cap;
  return v;
}

static int64_t window(fz_reader *r) {
  const uint8_t b = fz_u8(r);
  if (b < 96) return -1;
  if (b < 200) return b % 12;
  return edge[b % NEDGE];
}

static float real(fz_reader *r, float usual) {
  static const float odd[] = {0.0f, -1.0f, 1e30f, -0.0f, 1e-30f, 0.125f, 3.0f};
  const uint8_t b = fz_u8(r);
  if (b < 128) return usual;
  if (b < 240) return odd[b % 7];
  return b & 1 ? NAN : (b & 2 ? INFINITY : -INFINITY);
}

static int buffer_index(fz_reader *r) {
  const uint8_t b = fz_u8(r) % 12;
  if (b == 0) return FZ_NULL;
  if (b == 1) return FZ_FOREIGN;
  return b <= 8 ? b - 2 : FZ_NBUF - 1;
}

static fcl_dtype dtype(fz_reader *r, fcl_dtype shared) {
  const uint8_t b = fz_u8(r);
  if (b < 240) return shared;
  return (fcl_dtype)((int)(b % 6) - 1); /* -1 .. 4: three invalid */
}

/* A view of shape dims: contiguous, slightly off, or edge strides. */
static void view(fz_reader *r, fcl_tensor *t, const int64_t dims[4], fcl_dtype shared) {
  memset(t, 0, sizeof *t);
  t->dtype = dtype(r, shared);
  const uint8_t mode = fz_u8(r) % 8;
  int64_t st = 1;
  for (int i = 3; i >= 0; --i) {
    t->strides[i] = st;
    const int64_t d = dims[i] > 0 && dims[i] < (1LL << 20) ? dims[i] : 1;
    st *= d;
  }
  if (mode == 5) { /* one stride nudged */
    const int i = fz_u8(r) % 4;
    t->strides[i] += (int64_t)(int8_t)fz_u8(r);
  } else if (mode == 6) { /* strides from the edge table */
    for (int i = 0; i < 4; ++i) {
      const uint8_t b = fz_u8(r);
      if (b < 128) t->strides[i] = edge[b % NEDGE];
    }
  } else if (mode == 7) { /* a broadcast (stride 0) */
    t->strides[fz_u8(r) % 3] = 0;
  }
  const uint8_t ob = fz_u8(r);
  static const size_t odd[] = {1, 3, SIZE_MAX, SIZE_MAX - 3, (size_t)1 << 40,
                               (size_t)1 << 62, 4096, 1 << 20};
  t->offset = ob < 192 ? (size_t)(ob % 4) * 4 : odd[ob % 8];
}

static void cu_seqlens(fz_reader *r, int32_t *cu, int64_t max_len) {
  const uint8_t mode = fz_u8(r);
  cu[0] = mode < 240 ? 0 : (int32_t)u32(r);
  for (int i = 0; i < FZ_MAX_CU; ++i) {
    const uint8_t b = fz_u8(r);
    /* Wrapping as two's complement does (computed unsigned: no UB here). */
    if (b < 250)
      cu[i + 1] = (int32_t)((uint32_t)cu[i] +
                            (uint32_t)(b % (max_len > 0 && max_len < 100 ? max_len + 2 : 9)));
    else cu[i + 1] = (int32_t)u32(r);
  }
}

void fz_decode_attention(fz_reader *r, fz_attention *a, int backward) {
  memset(a, 0, sizeof *a);
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = dim(r, 3, INT32_MAX);
  d.seqlen_q = dim(r, 80, 1LL << 30);
  d.seqlen_k = dim(r, 80, 1LL << 30);
  d.heads_kv = dim(r, 3, INT32_MAX);
  const uint8_t g = fz_u8(r);
  /* A group of 1..3 query heads per kv head; edge values of heads_kv (up
   * to INT64_MAX) stay as they are rather than overflow here. */
  const int64_t group = 1 + g % 3;
  d.heads_q = g >= 240 ? dim(r, 9, INT32_MAX)
              : d.heads_kv > 0 && d.heads_kv <= INT64_MAX / group ? d.heads_kv * group
                                                                  : d.heads_kv;
  /* Valid head dims are 64: the programs the test suite compiles too, so
   * that CI finds them in PoCL's cache (compiling one under ASan takes a
   * minute). Odd head dims are the kernels' concern (test_oclgrind). */
  const uint8_t hd = fz_u8(r);
  if (hd < 240) {
    d.head_dim = d.head_dim_v = 64;
  } else {
    d.head_dim = edge[fz_u8(r) % NEDGE];
    d.head_dim_v = edge[fz_u8(r) % NEDGE];
    if (d.head_dim >= 1 && d.head_dim <= 512) d.head_dim = 64;
    if (d.head_dim_v >= 1 && d.head_dim_v <= 512) d.head_dim_v = 64;
  }
  d.softmax_scale = real(r, 0.0f);
  const uint8_t c = fz_u8(r);
  d.causal = c < 250 ? c & 1 : (int)u32(r);
  d.window_left = window(r);
  d.window_right = window(r);
  d.softcap = real(r, 0.0f);
  a->desc = d;
  const uint8_t side = fz_u8(r);
  a->alibi = side & 1 ? buffer_index(r) : FZ_NULL;
  a->lse = (side & 2) || backward ? buffer_index(r) : FZ_NULL;
  a->varlen = (side & 12) == 12;
  if (a->varlen) {
    a->cu_null[0] = fz_u8(r) >= 250;
    a->cu_null[1] = fz_u8(r) >= 250;
    cu_seqlens(r, a->cu_q, d.seqlen_q);
    cu_seqlens(r, a->cu_k, d.seqlen_k);
  }
  const int64_t nb = a->varlen ? 1 : d.batch;
  int64_t nq = d.seqlen_q, nk = d.seqlen_k;
  if (a->varlen && d.batch >= 0 && d.batch <= FZ_MAX_CU) {
    nq = a->cu_q[d.batch];
    nk = a->cu_k[d.batch];
  }
  const int64_t sq[4] = {nb, nq, d.heads_q, d.head_dim}, sk[4] = {nb, nk, d.heads_kv, d.head_dim},
                sv[4] = {nb, nk, d.heads_kv, d.head_dim_v}, so[4] = {nb, nq, d.heads_q, d.head_dim_v};
  const int64_t *shapes[8] = {sq, sk, sv, so, so, sq, sk, sv};
  const fcl_dtype shared = (fcl_dtype)(fz_u8(r) % 3);
  for (int i = 0; i < (backward ? 8 : 4); ++i) {
    view(r, &a->t[i], shapes[i], shared);
    a->tbuf[i] = buffer_index(r);
    a->tnull[i] = fz_u8(r) >= 250;
  }
  /* Read last, so that the corpus written before the field decodes as it
   * did: mostly 0, else a small shift either way or an edge value. */
  const uint8_t ds = fz_u8(r);
  const int64_t e = ds < 250 ? 0 : edge[fz_u8(r) % NEDGE];
  a->desc.diag_shift = ds < 160 ? 0 : ds < 250 ? (int64_t)(ds % 41) - 20
                                  : (ds & 1) && e != INT64_MIN ? -e : e;
}

void fz_decode_rwkv6(fz_reader *r, fz_rwkv6 *a, int backward) {
  memset(a, 0, sizeof *a);
  fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
  d.batch = dim(r, 3, INT32_MAX);
  d.seqlen = dim(r, 40, 1LL << 30);
  d.heads = dim(r, 4, INT32_MAX);
  const uint8_t hd = fz_u8(r); /* valid dims: 64, as for attention */
  if (hd < 240) {
    d.head_dim_k = d.head_dim_v = 64;
  } else {
    d.head_dim_k = edge[fz_u8(r) % NEDGE];
    d.head_dim_v = edge[fz_u8(r) % NEDGE];
    if (d.head_dim_k >= 1 && d.head_dim_k <= 256) d.head_dim_k = 64;
    if (d.head_dim_v >= 1 && d.head_dim_v <= 256) d.head_dim_v = 64;
  }
  d.scale = real(r, 0.0f);
  const uint8_t f = fz_u8(r);
  d.reverse = f & 1;
  d.algorithm = f < 240 ? (fcl_rwkv6_algorithm)((f >> 1) % 3)
                        : (fcl_rwkv6_algorithm)((int)(f % 7) - 3);
  a->varlen = (f & 0x30) == 0x30;
  if (a->varlen) cu_seqlens(r, a->cu, d.seqlen);
  a->desc = d;
  for (int i = 0; i < 6; ++i) {
    const uint8_t b = fz_u8(r);
    a->side[i] = (i == 0 || i == 4 || b & 1) ? buffer_index(r) : FZ_NULL;
  }
  const int64_t nb = a->varlen ? 1 : d.batch;
  int64_t nt = d.seqlen;
  if (a->varlen && d.batch >= 0 && d.batch <= FZ_MAX_CU) nt = a->cu[d.batch];
  const int64_t sk[4] = {nb, nt, d.heads, d.head_dim_k}, sv[4] = {nb, nt, d.heads, d.head_dim_v};
  const int64_t *shapes[9] = {sk, sk, sv, sk, sv, sk, sk, sv, sk};
  const fcl_dtype shared = (fcl_dtype)(fz_u8(r) % 3);
  for (int i = 0; i < (backward ? 9 : 5); ++i) {
    view(r, &a->t[i], shapes[i], shared);
    a->tbuf[i] = buffer_index(r);
    a->tnull[i] = fz_u8(r) >= 250;
  }
}
