/* The fused-recurrent RWKV6 variants' descriptors (forward and backward):
 * built-in block sizes fitted to local memory and work-group limits,
 * checks, search spaces, and the loop budgets' segment lengths. The
 * chunked pair is in rwkv6_chunk_variants.c. */
#include "rwkv6/rwkv6.h"

#include <stdio.h>

typedef fcl_rwkv_fwd_params fwd_params;
typedef fcl_rwkv6_bwd_params bwd_params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Local memory of the forward and of the backward. */
static size_t recurrent_bytes(int K, const fcl_config *cfg) {
  const fwd_params *c = FCL_CPARAMS(fwd_params, cfg);
  const int kpad = c->KS * ceil_div(K, c->KS), bv = c->VS * c->VC;
  return 4 * (size_t)c->TC * (3 * kpad + bv + (c->KS > 1 ? bv * c->KS : 0));
}
static size_t bwd_bytes(int K, const bwd_params *c) {
  return 4 * ((size_t)c->TC * (3 * K + 2 * c->BVB) + 2 * (size_t)c->TC * c->BVB * K);
}

/* The forward's checks of tuned parameters (fa-tune candidates, database
 * rows) past rwkv/rwkv_recurrent.c's: its local memory and a state block
 * of KR x VC floats in registers. */
static const fcl_rwkv_block_costs fwd_costs = {recurrent_bytes, NULL, 128};

static void fwd_defaults(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         fcl_config *cfg) {
  fwd_params *c = FCL_PARAMS(fwd_params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  if (!dev->is_cpu) {
    /* 8 x 8 state blocks: few local reads per multiply-add, and enough
     * work-items to hide the latency of the chunk loads. */
    c->KS = ceil_div(K, 8);
    c->VC = V < 8 ? V : 8;
    c->VS = 8;
  } else {
    /* Whole columns of up to 64 rows (8 on llvmpipe, where fewer loop
     * iterations per work-item mean longer launches). */
    c->KS = ceil_div(K, dev->is_llvmpipe ? 8 : 64);
    c->VC = 1;
    c->VS = 32;
  }
  fcl_rwkv_fwd_fit(&fwd_costs, dev, K, V, cfg);
}

static bool fwd_valid(const fcl_device_info *dev, const fcl_tuning_class *c,
                      const fcl_config *cfg, char *why, size_t n) {
  return fcl_rwkv_fwd_valid(&fwd_costs, dev, c, cfg, why, n);
}

static int fwd_axes(const fcl_tuning_class *c, fcl_axis *a) {
  (void)c;
  a[0] = (fcl_axis){"TC", 5, {4, 8, 16, 32, 64}};
  a[1] = (fcl_axis){"K_ROWS_PER_ITEM", 7, {1, 2, 4, 8, 16, 32, 64}};
  a[2] = (fcl_axis){"VS", 7, {1, 2, 4, 8, 16, 32, 64}};
  a[3] = (fcl_axis){"VC", 5, {1, 2, 4, 8, 16}};
  return 4;
}

static void bwd_defaults(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         fcl_config *cfg) {
  bwd_params *c = FCL_PARAMS(bwd_params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  c->BVB = V < 8 ? V : 8;
  c->TC = 8;
  for (;;) {
    if (bwd_bytes(K, c) <= fcl_rwkv_local_budget(dev) || (c->TC == 1 && c->BVB == 1)) break;
    if (c->TC > 2) c->TC /= 2;
    else if (c->BVB > 1) c->BVB /= 2;
    else c->TC /= 2;
  }
}

static bool bwd_valid(const fcl_device_info *dev, const fcl_tuning_class *cls,
                      const fcl_config *cfg, char *why, size_t why_size) {
  const bwd_params *c = FCL_CPARAMS(bwd_params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  const char *bad = NULL;
  if (c->TC < 1 || c->BVB < 1 || c->TC > 256 || c->BVB > V || c->BVB > 64)
    bad = "a size out of range";
  else if ((size_t)K > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (bwd_bytes(K, c) > fcl_rwkv_local_budget(dev))
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int bwd_axes(const fcl_tuning_class *c, fcl_axis *a) {
  (void)c;
  a[0] = (fcl_axis){"TC", 6, {1, 2, 4, 8, 16, 32}};
  a[1] = (fcl_axis){"BVB", 6, {1, 2, 4, 8, 16, 32}};
  return 2;
}

static void bwd_point(const fcl_tuning_class *c, const int *v, fcl_config *cfg) {
  (void)c;
  bwd_params *b = FCL_PARAMS(bwd_params, cfg);
  b->TC = v[0], b->BVB = v[1];
}

#define DIMS {"K_DIM", "V_DIM"}
const fcl_variant fcl_variant_rwkv6_recurrent = {
    "rwkv6_recurrent", FCL_TUNING_RWKV6_RECURRENT, FCL_TOPS("rwkv6/rwkv6_recurrent.cl"), DIMS,
    FCL_RWKV_MAX_DIM, false, FCL_PARAM_COUNT(FCL_RWKV_FWD_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV_FWD_PARAMS), fwd_defaults, fwd_valid, fwd_axes, fcl_rwkv_fwd_point,
    fcl_rwkv_fwd_worth_trying, 0};
const fcl_variant fcl_variant_rwkv6_bwd = {
    "rwkv6_bwd", FCL_TUNING_RWKV6_BWD, FCL_TOPS("rwkv6/rwkv6_backward.cl"), DIMS,
    FCL_RWKV_MAX_DIM, false, FCL_PARAM_COUNT(FCL_RWKV6_BWD_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV6_BWD_PARAMS), bwd_defaults, bwd_valid, bwd_axes, bwd_point, NULL, 0};

/* Loop iterations per chunk, counted as llvmpipe does (every iteration of
 * every loop, nested ones included). */
int64_t fcl_rwkv6_fwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fwd_params *c) {
  const int kr = ceil_div(K, c->KS), kpad = kr * c->KS, bv = c->VS * c->VC;
  const int wg = c->VS * c->KS;
  long it = 1 + kr * (1 + c->VC) + 3 * ceil_div(c->TC * kpad, wg) +
            ceil_div(c->TC * bv, wg) + c->TC * (1 + c->VC + kr * (1 + c->VC));
  if (c->KS > 1) it += c->TC * c->VC + ceil_div(c->TC * bv, wg) * (1 + c->KS);
  return fcl_rwkv_positions_per_launch(dev, it, c->TC);
}

int64_t fcl_rwkv6_bwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const bwd_params *c) {
  const long loads = 3 * c->TC + 2 * ceil_div(c->TC * c->BVB, K);
  const long fwd = 1 + c->BVB + loads + c->TC * (1 + c->BVB);
  const long rev = 1 + loads + c->BVB + 2 * c->TC * (1 + c->BVB) +
                   ceil_div(c->TC * c->BVB, K) * (1 + K);
  return fcl_rwkv_positions_per_launch(dev, fwd > rev ? fwd : rev, c->TC);
}
