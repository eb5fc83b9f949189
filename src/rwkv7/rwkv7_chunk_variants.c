/* The chunked RWKV7 forward's variant (cl/rwkv7/rwkv7_chunk_*.cl): the
 * chunk length a decay bound allows, built-in tiles fitted to local memory
 * and work-group limits, checks, search space, the state pass's segment
 * lengths and the scratch a chunk takes. */
#include "rwkv7/rwkv7.h"

#include <math.h>
#include <stdio.h>

typedef fcl_rwkv7_chunk_params params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int imin(int a, int b) { return a < b ? a : b; }


/* The chunked form's factors reach e^{+-TC |w|} (rwkv7_chunk_prep.cl):
 * TC |decay_lower_bound| at most RW7_LOG_RANGE keeps them far inside f32
 * (e^40 = 2.4e17; no product of two of them is formed outside the ratios
 * that cancel). The models' bound, -exp(-0.5), allows chunks of 64. */
#define RW7_LOG_RANGE 40.0
#define RW7_MIN_CHUNK 16
#define RW7_MAX_CHUNK 64

int fcl_rwkv7_chunk_of_bound(float bound) {
  if (!(bound < 0.0f)) return 0; /* 0: unknown, no promise */
  int c = RW7_MAX_CHUNK;
  while (c >= RW7_MIN_CHUNK && c * -(double)bound > RW7_LOG_RANGE) c /= 2;
  return c >= RW7_MIN_CHUNK ? c : 0;
}

size_t fcl_rwkv7_chunk_floats(int K, int tc) {
  return (size_t)2 * tc * K + (size_t)tc * tc + (size_t)K * tc + (size_t)K * K;
}

/* Local memory (bytes) of the prep kernel, the state pass and the
 * portable output (bv columns; 0: not built). */
static size_t chunk_bytes(int K, int tc_, int bk, int hv, int bv) {
  const size_t tc = (size_t)tc_, prep = 5 * tc * bk + 3 * tc * tc + bk;
  const size_t state = ((size_t)K + tc) * hv, out = ((size_t)K + tc) * bv;
  size_t m = prep > state ? prep : state;
  return 4 * (m > out ? m : out);
}

/* Loop iterations of one work-item (every iteration of every loop, as
 * llvmpipe counts them; generously): the prep kernel, and the state pass a
 * chunk. */
static long prep_iterations(int K, int tc_, int bk_, int wg_) {
  const long tc = tc_, wg = wg_, bk = bk_, nkt = ceil_div(K, bk_);
  const long ne = (tc * tc + wg - 1) / wg, nq = (tc * bk + wg - 1) / wg, nr = (tc + wg - 1) / wg;
  const long loads = 5 * (2 + 2 * 8 * ((tc * bk + 8 * wg - 1) / (8 * wg)));
  const long walk = ((bk + wg - 1) / wg) * tc;
  return nkt * (loads + walk + ne * bk) + tc * nr * tc + 3 * ne * tc +
         nkt * (loads + walk + 2 * nq * tc + ((bk * K + wg - 1) / wg) * tc);
}
static long state_iterations(int K, int tc, int hv, int wg) {
  const long ns = ((long)K * hv + wg - 1) / wg;
  return 2 * ns + ns * (K + tc) + 2 + 2 * 8 * (((long)tc * hv + 8 * wg - 1) / (8 * wg));
}

const char *fcl_rwkv7_chunk_misfit(const fcl_device_info *dev, int K, int tc, int bk, int hv,
                                   int wg, int bv, size_t extra_local) {
  if (tc < 1 || tc > RW7_MAX_CHUNK || bk < 1 || bk > K || hv < 1 || wg < 1 || bv < 0)
    return "a size out of range (TC up to 64)";
  if ((size_t)wg > dev->max_wg) return "work-group larger than the device allows";
  const size_t local = chunk_bytes(K, tc, bk, hv, bv);
  if ((local > extra_local ? local : extra_local) > fcl_rwkv_local_budget(dev))
    return "local memory exceeded";
  if (!fcl_rwkv_loops_fit(dev, prep_iterations(K, tc, bk, wg)) ||
      !fcl_rwkv_loops_fit(dev, state_iterations(K, tc, hv, wg)))
    return "a chunk's loops exceed the device's loop budget";
  if (4 * ceil_div(tc * tc, wg) + ceil_div(K * hv, wg) > 512)
    return "too many register entries a work-item";
  return NULL;
}

static const char *misfit(const fcl_device_info *dev, int K, const params *c) {
  return fcl_rwkv7_chunk_misfit(dev, K, c->TC, c->BK, c->HV, c->WG, c->BV, 0);
}

/* GPUs: chunks of 32, 256 work-items; CPUs: chunks of 64 (the longest the
 * models' bound allows: fewer chunks to walk) and 64 work-items, which
 * PoCL runs as loops. Key tiles of 32 and value blocks of 64; then halved
 * until local memory, the work-group limit and the loop budget fit. */
static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  params *c = FCL_PARAMS(params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  c->TC = dev->is_cpu ? 64 : 32;
  c->WG = dev->is_cpu ? 64 : 256;
  c->BK = imin(K, 32);
  c->BV = imin(V, 64);
  c->HV = imin(V, 64);
  while (misfit(dev, K, c)) {
    if ((size_t)c->WG > dev->max_wg && c->WG > 16) c->WG /= 2;
    else if (c->BK > 8) c->BK /= 2;
    else if (c->HV > 16) c->HV /= 2;
    else if (c->BV > 16) c->BV /= 2;
    else if (c->TC > RW7_MIN_CHUNK) c->TC /= 2;
    else if (c->HV > 1) c->HV /= 2;
    else if (c->BV > 1) c->BV /= 2;
    else break;
  }
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const params *c = FCL_CPARAMS(params, cfg);
  const char *bad = c->BV < 1 || c->BV > cls->head_dim_v || c->HV > cls->head_dim_v
                        ? "a size out of range"
                        : misfit(dev, cls->head_dim, c);
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"TC", 3, {16, 32, 64}};
  a[1] = (fcl_axis){"BK", 4, {8, 16, 32, 64}};
  a[2] = (fcl_axis){"HV", 4, {8, 16, 32, 64}};
  a[3] = (fcl_axis){"WG", 4, {64, 128, 256, 512}};
  a[4] = (fcl_axis){"BV", 4, {16, 32, 64, 128}};
  return 5;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  params *c = FCL_PARAMS(params, cfg);
  c->TC = v[0];
  c->BK = imin(v[1], cls->head_dim);
  c->HV = imin(v[2], cls->head_dim_v);
  c->WG = v[3];
  c->BV = imin(v[4], cls->head_dim_v);
}

static bool worth_trying(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         const fcl_config *cfg) {
  (void)cls;
  return fcl_whole_warps(dev, (size_t)FCL_CPARAMS(params, cfg)->WG);
}

const fcl_variant fcl_variant_rwkv7_chunked = {
    "rwkv7_chunked", FCL_TUNING_RWKV7_RECURRENT, FCL_TOPS("rwkv7/rwkv7_chunk_out.cl"),
    {"K_DIM", "V_DIM"}, FCL_RWKV_MAX_DIM, false, FCL_PARAM_COUNT(FCL_RWKV7_CHUNK_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV7_CHUNK_PARAMS), defaults, valid, axes, point, worth_trying, 0};

int64_t fcl_rwkv7_chunk_state_per_launch(const fcl_device_info *dev, int K, int tc, int hv,
                                         int wg) {
  return fcl_rwkv_positions_per_launch(dev, state_iterations(K, tc, hv, wg), 1); /* chunks */
}
