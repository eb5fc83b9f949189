/* The step variants' descriptors (rwkv6/rwkv6_step.c, rwkv7/rwkv7_step.c)
 * but what their kernels take (local memory, loop iterations): built-in
 * parameters, checks (rwkv_fit.c's of state blocks, VC a vector's width),
 * search space, and the positions a launch takes. */
#include "rwkv/rwkv.h"

#include <stdio.h>

typedef fcl_rwkv_step_params params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static void choose(const fcl_device_info *dev, int K, int V, int rows, params *c) {
  if (!dev->is_cpu) {
    /* rows rows of VC-wide vectors a work-item, blocks of 16 columns: a
     * work-group per 16 columns of a head (B1 H32 K=V=64, 4 rows: 128 of
     * 64 work-items), each work-item's loads all in flight at once. */
    c->VC = V % 4 == 0 ? 4 : V % 2 == 0 ? 2 : 1;
    c->KS = ceil_div(K, rows);
    c->VS = 16 / c->VC;
  } else {
    /* Consecutive work-items on consecutive columns, which PoCL runs as
     * vector lanes; up to 64 rows a work-item (8 on llvmpipe, as the
     * recurrent kernels). */
    c->VC = 1;
    c->KS = ceil_div(K, dev->is_llvmpipe ? 8 : 64);
    c->VS = 32;
  }
  while (c->VS > 1 && c->VS * c->VC >= 2 * V) c->VS /= 2;
  while (c->VS > 1 && (size_t)(c->VS * c->KS) > dev->max_wg) c->VS /= 2;
  while (c->KS > 1 && (size_t)(c->VS * c->KS) > dev->max_wg)
    c->KS = ceil_div(K, 2 * ceil_div(K, c->KS));
}

void fcl_rwkv_step_choose(const fcl_rwkv_block_costs *k, const fcl_device_info *dev,
                          const fcl_tuning_class *c, int rows, fcl_config *cfg) {
  const int K = (int)c->head_dim, V = (int)c->head_dim_v;
  params *p = FCL_PARAMS(params, cfg);
  for (;; rows *= 2) {
    choose(dev, K, V, rows, p);
    if (dev->is_cpu || rows >= 4 || !fcl_rwkv_block_misfit(k, dev, K, V, p->KS, p->VS, p->VC, cfg))
      return;
  }
}

bool fcl_rwkv_step_valid(const fcl_rwkv_block_costs *k, const fcl_device_info *dev,
                         const fcl_tuning_class *cls, const fcl_config *cfg, char *why,
                         size_t why_size) {
  const params *c = FCL_CPARAMS(params, cfg);
  const char *bad = c->VC != 1 && c->VC != 2 && c->VC != 4
                        ? "a size out of range"
                        : fcl_rwkv_block_misfit(k, dev, cls->head_dim, cls->head_dim_v, c->KS,
                                                c->VS, c->VC, cfg);
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

int fcl_rwkv_step_axes(const fcl_tuning_class *c, fcl_axis *a) {
  (void)c;
  a[0] = (fcl_axis){"K_ROWS_PER_ITEM", 7, {1, 2, 4, 8, 16, 32, 64}};
  a[1] = (fcl_axis){"VS", 7, {1, 2, 4, 8, 16, 32, 64}};
  a[2] = (fcl_axis){"VC", 3, {1, 2, 4}};
  return 3;
}

void fcl_rwkv_step_point(const fcl_tuning_class *c, const int *v, fcl_config *cfg) {
  params *p = FCL_PARAMS(params, cfg);
  p->KS = ceil_div(c->head_dim, v[0]);
  p->VS = v[1], p->VC = v[2];
}

bool fcl_rwkv_step_worth_trying(const fcl_device_info *dev, const fcl_tuning_class *c,
                                const fcl_config *cfg) {
  const params *p = FCL_CPARAMS(params, cfg);
  return fcl_rwkv_block_worth_trying(dev, (int)c->head_dim, p->KS, p->VS, p->VC);
}

int fcl_rwkv_step_positions(int64_t seqlen) {
  return seqlen < 1 ? 1 : seqlen < RW_STEP_MAX_T ? (int)seqlen : RW_STEP_MAX_T;
}
