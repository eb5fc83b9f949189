/* The chunked RWKV6 variants' descriptors (forward and backward share the
 * parameters): built-in tiles fitted to local memory and work-group
 * limits, checks, search spaces, and the state pass's segment lengths. */
#include "rwkv6/rwkv6.h"

#include <stdio.h>

typedef fcl_rwkv6_chunk_params params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int imin(int a, int b) { return a < b ? a : b; }


/* Local memory (bytes) of the chunk kernels (rwkv6_chunk_out.cl and
 * rwkv6_chunk_bwd.cl; the backward needs both) and of the state pass. */
static size_t chunk_bytes(const params *c, bool backward) {
  const size_t tc = (size_t)c->TC, bk = (size_t)c->BK, bv = (size_t)c->BV;
  const size_t nsub = tc < 16 ? 1 : tc / 16, tri = tc * (tc + 1) / 2;
  const size_t small = bk * (nsub * (3 + nsub) + 3);
  const size_t out_pool = 5 * tc * bk + bk * bv > tc * bv ? 5 * tc * bk + bk * bv : tc * bv;
  const size_t out = 4 * (out_pool + small + tri);
  const size_t dk = fcl_rwkv6_chunk_dk_bytes(c->TC, c->BK, 2 * (tc + bk) * bv);
  return backward && dk > out ? dk : out;
}

size_t fcl_rwkv6_chunk_dk_bytes(int tc_, int bk_, size_t p1) {
  const size_t tc = (size_t)tc_, bk = (size_t)bk_;
  const size_t nsub = tc < 16 ? 1 : tc / 16, tri = tc * (tc + 1) / 2;
  const size_t small = bk * (nsub * (3 + nsub) + 3);
  const size_t pool = p1 > 9 * tc * bk ? p1 : 9 * tc * bk;
  return 4 * (pool + small + tri);
}
static size_t state_bytes(const params *c) {
  return 4 * (size_t)c->TC * (2 * (size_t)c->HK + (size_t)c->HV);
}
static size_t state_wg(const params *c) { return (size_t)c->HK * (size_t)(c->HV / c->HC); }

/* Loop iterations of one state-pass work-item per chunk, counted as
 * llvmpipe does (every iteration of every loop). */
static long state_iterations(const params *c) {
  const long wg = (long)state_wg(c);
  return 3L * c->HC + ceil_div(c->TC * c->HK, (int)wg) * 2 + ceil_div(c->TC * c->HV, (int)wg) +
         c->TC + (long)c->TC * (1 + c->HC);
}
/* ... and of one chunk-kernel work-item (the larger of the two kernels). */
static long chunk_iterations(int K, int V, const params *c) {
  const long tc = c->TC, bk = c->BK, bv = c->BV, wg = c->WG, bc = tc < 16 ? tc : 16;
  const long na = (tc * (tc + 1) / 2 + wg - 1) / wg, nq = (tc * bk + wg - 1) / wg;
  const long no = (tc * bv + wg - 1) / wg, nkt = ceil_div(K, c->BK), nvt = ceil_div(V, c->BV);
  const long loads = 4 * nq + (bk * bv + wg - 1) / wg + 1;
  const long decays = 2 * bc + tc + tc * tc / 16 + 4;
  const long out = nkt * (loads + decays + na * bk * (1 + bc / 2) + no * bk) + no * tc + na;
  const long dk = nvt * (loads + (bk * bv + wg - 1) / wg + na * bv + nq * bv + bv) + loads +
                  decays + nq * 3 * tc + 3 * tc;
  return out > dk ? out : dk;
}

static bool local_fits(const fcl_device_info *dev, const params *c, bool backward) {
  const size_t budget = fcl_rwkv_local_budget(dev);
  return chunk_bytes(c, backward) <= budget && state_bytes(c) <= budget;
}

static bool fits(const fcl_device_info *dev, int K, int V, const params *c, bool backward) {
  if (!local_fits(dev, c, backward)) return false;
  if ((size_t)c->WG > dev->max_wg || state_wg(c) > dev->max_wg) return false;
  if (!fcl_rwkv_loops_fit(dev, chunk_iterations(K, V, c))) return false;
  return true;
}

static void choose(const fcl_device_info *dev, int K, int V, bool backward, params *c) {
  /* GPUs: chunks of 64 in sub-chunks of 16, as fla; 256 work-items. CPUs:
   * short chunks (work per position grows with the chunk) and few
   * work-items, which PoCL runs as loops. */
  c->TC = dev->is_cpu ? 16 : 64;
  c->WG = dev->is_cpu ? 64 : 256;
  c->BK = imin(K, dev->is_cpu ? 64 : 32);
  c->BV = imin(V, 64);
  c->HK = imin(K, dev->is_cpu ? 64 : 32);
  c->HV = imin(V, 64);
  c->HC = imin(c->HV, 8);
  while (c->HV % c->HC) --c->HC;
  while (!fits(dev, K, V, c, backward)) {
    const bool local = chunk_bytes(c, backward) > fcl_rwkv_local_budget(dev);
    if (c->WG > 64 && (size_t)c->WG > dev->max_wg) c->WG /= 2;
    else if (local && c->BK > 16) c->BK /= 2; /* key tiles first: A is per value tile */
    else if (local && c->BV > 32) c->BV /= 2;
    else if (local && c->BK > 8) c->BK /= 2;
    else if (local && c->BV > 16) c->BV /= 2;
    else if (state_wg(c) > dev->max_wg && c->HK > 1) c->HK /= 2;
    else if (state_bytes(c) > fcl_rwkv_local_budget(dev) && c->HV > 8)
      c->HV /= 2, c->HC = imin(c->HC, c->HV);
    else if (c->TC > 16) c->TC /= 2;
    else if (c->WG > 16) c->WG /= 2;
    else if (c->BK > 4) c->BK /= 2;
    else if (c->BV > 4) c->BV /= 2;
    else if (c->TC > 4) c->TC /= 2;
    else break;
  }
}

static bool is_bwd(const fcl_tuning_class *c) {
  return c->variant == &fcl_variant_rwkv6_bwd_chunked;
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *c, fcl_config *cfg) {
  choose(dev, c->head_dim, c->head_dim_v, is_bwd(c), FCL_PARAMS(params, cfg));
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const params *c = FCL_CPARAMS(params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  const char *bad = NULL;
  if (c->TC < 1 || c->TC > 128 || (c->TC > 16 && c->TC % 16) || c->BK < 1 || c->BK > K ||
      c->BV < 1 || c->BV > V || c->WG < 1 || c->HK < 1 || c->HK > K || c->HV < 1 ||
      c->HV > V || c->HC < 1 || c->HV % c->HC || c->HC > 32)
    bad = "a size out of range (TC up to 16 or a multiple of 16, HC dividing HV)";
  else if (c->WG < c->BK)
    bad = "fewer chunk work-items than key columns";
  else if ((size_t)c->WG > dev->max_wg || state_wg(c) > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (!local_fits(dev, c, is_bwd(cls)))
    bad = "local memory exceeded";
  else if (!fcl_rwkv_loops_fit(dev, chunk_iterations(K, V, c)))
    bad = "a chunk's loops exceed the device's loop budget";
  else if ((c->TC * (c->TC + 1) / 2 + c->WG - 1) / c->WG + (c->TC * c->BV + c->WG - 1) / c->WG > 96)
    bad = "too many register entries a work-item";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *c, fcl_axis *a) {
  (void)c;
  a[0] = (fcl_axis){"TC", 3, {16, 32, 64}};
  a[1] = (fcl_axis){"BK", 4, {8, 16, 32, 64}};
  a[2] = (fcl_axis){"BV", 4, {16, 32, 64, 128}};
  a[3] = (fcl_axis){"WG", 4, {64, 128, 256, 512}};
  a[4] = (fcl_axis){"HK", 4, {8, 16, 32, 64}};
  a[5] = (fcl_axis){"HC", 4, {2, 4, 8, 16}};
  return 6;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  params *c = FCL_PARAMS(params, cfg);
  c->TC = v[0];
  c->BK = imin(v[1], cls->head_dim);
  c->BV = imin(v[2], cls->head_dim_v);
  c->WG = v[3];
  c->HK = imin(v[4], cls->head_dim);
  c->HC = imin(v[5], c->HV);
}

static bool worth_trying(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         const fcl_config *cfg) {
  const params *c = FCL_CPARAMS(params, cfg);
  (void)cls;
  return fcl_whole_warps(dev, (size_t)c->WG) && fcl_whole_warps(dev, state_wg(c));
}

#define DIMS {"K_DIM", "V_DIM"}
const fcl_variant fcl_variant_rwkv6_chunked = {
    "rwkv6_chunked", FCL_TUNING_RWKV6_CHUNKED, FCL_TOPS("rwkv6/rwkv6_chunk_out.cl"), DIMS,
    FCL_RWKV_MAX_DIM, false, FCL_PARAM_COUNT(FCL_RWKV6_CHUNK_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV6_CHUNK_PARAMS), defaults, valid, axes, point, worth_trying, 0};
/* rwkv6_chunk_bwd.cl follows the portable passes here and the tensor
 * cores' in rwkv6_chunk_mma.c: it requires neither, so the backward names
 * both tops. */
const fcl_variant fcl_variant_rwkv6_bwd_chunked = {
    "rwkv6_bwd_chunked", FCL_TUNING_RWKV6_BWD_CHUNKED,
    FCL_TOPS("rwkv6/rwkv6_chunk_out.cl", "rwkv6/rwkv6_chunk_bwd.cl"), DIMS, FCL_RWKV_MAX_DIM,
    false, FCL_PARAM_COUNT(FCL_RWKV6_CHUNK_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV6_CHUNK_PARAMS), defaults, valid, axes, point, worth_trying, 0};

fcl_rwkv6_chunk_launch fcl_rwkv6_chunk_state_launch(const fcl_device_info *dev,
                                                    const fcl_rwkv6_chunk_params *c) {
  fcl_rwkv6_chunk_launch l = {c->TC, c->HK, c->HV, state_wg(c), 0, 4, 1};
  l.per_launch = fcl_rwkv_positions_per_launch(dev, state_iterations(c), 1); /* chunks */
  return l;
}
