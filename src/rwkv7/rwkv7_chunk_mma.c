/* The chunked RWKV7 forward with its output on NVIDIA tensor cores
 * (cl/rwkv7/rwkv7_chunk_out_mma.cl; the prep kernel and the state pass
 * are the portable ones): which problems it takes, its descriptor and
 * launches. f16 and bf16 only: the output's factors and states are
 * rounded to the data's type (an f32 output would need them split). */
#include "rwkv7/rwkv7.h"

#include <stdio.h>

typedef struct { FCL_RWKV7_CHUNK_MMA_PARAMS(FCL_PARAM_FIELD_) } params;
_Static_assert(sizeof(params) <= sizeof(fcl_config), "params fit a configuration");

static int imin(int a, int b) { return a < b ? a : b; }


/* Local memory of the output kernel: its 16-bit pool (Q and S_c tiles,
 * then P and v) and, emulated, the warps' scratch. */
static size_t out_bytes(const fcl_device_info *dev, int V, const params *c) {
  const size_t tc = (size_t)c->TC, ldk = (size_t)c->BK + 8, ldv = (size_t)V + 8;
  const size_t a = tc * ldk + (size_t)c->BK * ldv, b = tc * (tc + 8) + tc * ldv;
  return 2 * (a > b ? a : b) + (dev->mma_emulate ? 1024 * (tc / 16) : 0);
}

static const char *misfit(const fcl_device_info *dev, const fcl_tuning_class *cls,
                          const params *c) {
  const int K = cls->head_dim, V = cls->head_dim_v;
  if (cls->dtype != FCL_F16 && cls->dtype != FCL_BF16) return "f16 and bf16 only";
  if (K % 16 || V % 16 || V > 128) return "K and V multiples of 16, V at most 128";
  if (c->TC < 16 || c->TC > 64 || c->TC % 16 || c->BK < 16 || c->BK % 16 || K % c->BK)
    return "TC 16, 32 or 64, BK a multiple of 16 dividing K";
  if ((size_t)c->TC * 2 > dev->max_wg) return "work-group larger than the device allows";
  if (out_bytes(dev, V, c) > fcl_rwkv_local_budget(dev)) return "local memory exceeded";
  return fcl_rwkv7_chunk_misfit(dev, K, c->TC, c->BK, c->HV, c->WG, 0, out_bytes(dev, V, c));
}

/* Chunks of 32 (the GPU default of the portable kernels), key tiles of 32
 * where they divide K, 256 work-items for the prep kernel and the state
 * pass; halved until they fit. Not yet measured on a GPU. */
static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  params *c = FCL_PARAMS(params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  c->TC = 32, c->BK = K % 32 == 0 ? 32 : 16, c->HV = imin(V, 64), c->WG = 256;
  while (misfit(dev, cls, c)) {
    if ((size_t)c->WG > dev->max_wg && c->WG > 32) c->WG /= 2;
    else if (c->BK > 16) c->BK /= 2;
    else if (c->HV > 16) c->HV /= 2;
    else if (c->TC > 16) c->TC /= 2;
    else break;
  }
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const params *c = FCL_CPARAMS(params, cfg);
  const char *bad = c->HV > cls->head_dim_v ? "a size out of range" : misfit(dev, cls, c);
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"TC", 3, {16, 32, 64}};
  a[1] = (fcl_axis){"BK", 3, {16, 32, 64}};
  a[2] = (fcl_axis){"HV", 4, {8, 16, 32, 64}};
  a[3] = (fcl_axis){"WG", 3, {64, 128, 256}};
  return 4;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  params *c = FCL_PARAMS(params, cfg);
  c->TC = v[0], c->BK = imin(v[1], cls->head_dim), c->HV = imin(v[2], cls->head_dim_v);
  c->WG = v[3];
}

static bool worth_trying(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         const fcl_config *cfg) {
  (void)cls;
  return fcl_whole_warps(dev, (size_t)FCL_CPARAMS(params, cfg)->WG);
}

const fcl_variant fcl_variant_rwkv7_chunked_mma = {
    "rwkv7_chunked_mma", FCL_TUNING_RWKV7_RECURRENT, FCL_TOPS("rwkv7/rwkv7_chunk_out_mma.cl"),
    {"K_DIM", "V_DIM"}, FCL_RWKV_MAX_DIM, false, FCL_PARAM_COUNT(FCL_RWKV7_CHUNK_MMA_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV7_CHUNK_MMA_PARAMS), defaults, valid, axes, point, worth_trying, 0};

fcl_status fcl_rwkv7_chunk_mma_applies(fcl_context *ctx, const fcl_rwkv7_problem *p,
                                       fcl_fit *fit) {
  const fcl_rwkv7_desc *d = p->d;
  bool ready = false;
  fcl_status s = FCL_OK;
  if (*fit != FCL_FIT_NO && (p->dtype == FCL_F16 || p->dtype == FCL_BF16) &&
      d->head_dim_k % 16 == 0 && d->head_dim_v % 16 == 0 && d->head_dim_v <= 128)
    s = fcl_mma_ready(ctx, p->dtype, &ready);
  if (!ready) *fit = FCL_FIT_NO;
  return s;
}

fcl_status fcl_rwkv7_chunk_mma_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                       const void *problem, bool *fallback) {
  const params *c = FCL_CPARAMS(params, &pl->cfg);
  const fcl_rwkv7_problem *p = problem;
  return fcl_rwkv7_chunk_launches(ctx, pl, p, "fcl_rwkv7_chunk_out_mma", (size_t)c->TC * 2,
                                  (int)p->d->head_dim_v, fallback);
}
