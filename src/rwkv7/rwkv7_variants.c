/* The fused-recurrent RWKV7 variants' descriptors (forward and backward):
 * built-in block sizes fitted to local memory and work-group limits,
 * checks, search spaces, and the loop budgets' segment lengths. */
#include "rwkv7/rwkv7.h"

#include <stdio.h>

typedef fcl_rwkv_fwd_params fwd_params;
typedef fcl_rwkv7_bwd_params bwd_params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Floats of rw7_colsum's buffers (rwkv7_common.cl) for bw columns. */
static size_t colsum_floats(int KS, int bw) {
  return KS > 1 ? (size_t)(KS + ceil_div(KS, 8)) * 2 * bw : 0;
}

/* Local memory of the forward (r, exp(w), k, a, b, v) and of the backward's
 * reverse pass (those, dout, sa and the chunk's states). */
static size_t fwd_bytes(int K, const fcl_config *cfg) {
  const fwd_params *c = FCL_CPARAMS(fwd_params, cfg);
  const int kpad = c->KS * ceil_div(K, c->KS), bv = c->VS * c->VC;
  return 4 * ((size_t)c->TC * (5 * kpad + bv) + colsum_floats(c->KS, bv));
}
static size_t bwd_bytes(int K, const bwd_params *c) {
  const int kpad = c->KS * ceil_div(K, c->KS);
  return 4 * ((size_t)c->TC * (5 * kpad + 3 * c->VC + (size_t)kpad * c->VC) +
              colsum_floats(c->KS, c->VC));
}

/* The forward's checks past rwkv/rwkv_recurrent.c's: its local memory and
 * a state block of KR x VC floats in registers. */
static const fcl_rwkv_block_costs fwd_costs = {fwd_bytes, NULL, 256};

/* GPUs: 8 x 4 state blocks, rows summed across 8 work-items a column;
 * CPUs: whole columns a work-item (no sums across work-items). */
static void fwd_defaults(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         fcl_config *cfg) {
  fwd_params *c = FCL_PARAMS(fwd_params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  if (!dev->is_cpu) {
    c->KS = ceil_div(K, 8);
    c->VC = V < 4 ? V : 4;
    c->VS = 8;
  } else {
    c->KS = 1;
    c->VC = 1;
    c->VS = 32;
  }
  fcl_rwkv_fwd_fit(&fwd_costs, dev, K, V, cfg);
}

static bool fwd_valid(const fcl_device_info *dev, const fcl_tuning_class *cls,
                      const fcl_config *cfg, char *why, size_t why_size) {
  return fcl_rwkv_fwd_valid(&fwd_costs, dev, cls, cfg, why, why_size);
}

static int fwd_axes(const fcl_tuning_class *c, fcl_axis *a) {
  (void)c;
  a[0] = (fcl_axis){"TC", 4, {4, 8, 16, 32}};
  a[1] = (fcl_axis){"K_ROWS_PER_ITEM", 7, {1, 2, 4, 8, 16, 32, 64}};
  a[2] = (fcl_axis){"VS", 6, {1, 2, 4, 8, 16, 32}};
  a[3] = (fcl_axis){"VC", 4, {1, 2, 4, 8}};
  return 4;
}

/* GPUs: a work-item a row (its gradient and state for VC columns); CPUs: a
 * work-item a column block; llvmpipe, which bounds a launch's loop
 * iterations: 8 rows a work-item (one work-item walking every row took
 * launches of one chunk each, 5x slower at T = 300). Then TC, then VC,
 * halved until local memory fits. */
static void bwd_defaults(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         fcl_config *cfg) {
  bwd_params *c = FCL_PARAMS(bwd_params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  c->KS = dev->is_llvmpipe ? (K + 7) / 8 : dev->is_cpu ? 1 : K;
  while ((size_t)c->KS > dev->max_wg) c->KS = ceil_div(c->KS, 2);
  c->VC = V < 8 ? V : 8;
  c->TC = 8;
  for (;;) {
    if (bwd_bytes(K, c) <= fcl_rwkv_local_budget(dev) || (c->TC == 1 && c->VC == 1)) break;
    if (c->TC > 2) c->TC /= 2;
    else if (c->VC > 1) c->VC /= 2;
    else c->TC /= 2;
  }
}

static bool bwd_valid(const fcl_device_info *dev, const fcl_tuning_class *cls,
                      const fcl_config *cfg, char *why, size_t why_size) {
  const bwd_params *c = FCL_CPARAMS(bwd_params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  const char *bad = NULL;
  if (c->TC < 1 || c->KS < 1 || c->VC < 1 || c->TC > 256 || c->KS > K || c->VC > V ||
      c->VC > 64)
    bad = "a size out of range";
  else if ((size_t)c->KS > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (bwd_bytes(K, c) > fcl_rwkv_local_budget(dev))
    bad = "local memory exceeded";
  else if (ceil_div(K, c->KS) * c->VC > 2048)
    bad = "state block too large for registers";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int bwd_axes(const fcl_tuning_class *c, fcl_axis *a) {
  (void)c;
  a[0] = (fcl_axis){"TC", 5, {1, 2, 4, 8, 16}};
  a[1] = (fcl_axis){"K_ROWS_PER_ITEM", 7, {1, 2, 4, 8, 16, 32, 64}};
  a[2] = (fcl_axis){"VC", 6, {1, 2, 4, 8, 16, 32}};
  return 3;
}

static void bwd_point(const fcl_tuning_class *c, const int *v, fcl_config *cfg) {
  bwd_params *b = FCL_PARAMS(bwd_params, cfg);
  b->TC = v[0];
  b->KS = ceil_div(c->head_dim, v[1]);
  b->VC = v[2];
}

static bool bwd_worth_trying(const fcl_device_info *dev, const fcl_tuning_class *c,
                             const fcl_config *cfg) {
  const bwd_params *b = FCL_CPARAMS(bwd_params, cfg);
  if (dev->is_cpu) return true;
  if (ceil_div(c->head_dim, b->KS) * b->VC > 32) return false; /* g and S in registers */
  return fcl_whole_warps(dev, (size_t)b->KS);
}

#define DIMS {"K_DIM", "V_DIM"}
const fcl_variant fcl_variant_rwkv7_recurrent = {
    "rwkv7_recurrent", FCL_TUNING_RWKV7_RECURRENT, FCL_TOPS("rwkv7/rwkv7_recurrent.cl"), DIMS,
    FCL_RWKV_MAX_DIM, false, FCL_PARAM_COUNT(FCL_RWKV_FWD_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV_FWD_PARAMS), fwd_defaults, fwd_valid, fwd_axes, fcl_rwkv_fwd_point,
    fcl_rwkv_fwd_worth_trying, 0};
const fcl_variant fcl_variant_rwkv7_bwd = {
    "rwkv7_bwd", FCL_TUNING_RWKV7_BWD, FCL_TOPS("rwkv7/rwkv7_backward.cl"), DIMS,
    FCL_RWKV_MAX_DIM, false, FCL_PARAM_COUNT(FCL_RWKV7_BWD_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV7_BWD_PARAMS), bwd_defaults, bwd_valid, bwd_axes, bwd_point,
    bwd_worth_trying, 0};

static long colsum_iterations(int KS, int bw, int wg, int nx, int vc) {
  if (KS <= 1) return 0;
  const int np = ceil_div(KS, 8);
  return nx * vc + ceil_div(np * nx * bw, wg) * 9 + nx * vc * (1 + np);
}

static long load_iterations(int tc, int kpad, int bw, int wg, int nv) {
  return 5 * (2 + 2 * 8 * ceil_div(tc * kpad, 8 * wg)) + nv * (2 + 2 * 8 * ceil_div(tc * bw, 8 * wg));
}

int64_t fcl_rwkv7_fwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fwd_params *c) {
  const int kr = ceil_div(K, c->KS), kpad = kr * c->KS, bv = c->VS * c->VC;
  const int wg = c->VS * c->KS;
  const long step = 4 * c->VC + kr * (1 + c->VC) * 2 + colsum_iterations(c->KS, bv, wg, 2, c->VC) +
                    2 * c->VC;
  const long it = 2 + kr * (1 + c->VC) + load_iterations(c->TC, kpad, bv, wg, 1) + c->TC * step;
  return fcl_rwkv_positions_per_launch(dev, it, c->TC);
}

int64_t fcl_rwkv7_bwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const bwd_params *c) {
  const int kr = ceil_div(K, c->KS), kpad = kr * c->KS, wg = c->KS;
  const long step = 2 * (4 * c->VC + kr * (1 + c->VC) * 2 + colsum_iterations(c->KS, c->VC, wg, 2, c->VC) +
                         2 * c->VC);
  const long it = 2 + kr * (1 + c->VC) * 2 + load_iterations(c->TC, kpad, c->VC, wg, 2) + c->TC * step;
  return fcl_rwkv_positions_per_launch(dev, it, c->TC);
}
