/* The pieces of the fused recurrent forward variants' descriptors
 * (rwkv6/rwkv6_variants.c, rwkv7/rwkv7_variants.c) that agree: the tail of
 * their built-in parameters, their checks (rwkv_fit.c's of state blocks,
 * TC a chunk of loads), a point of their search spaces, and which valid
 * points are worth building. */
#include "rwkv/rwkv.h"

#include <stdio.h>

typedef fcl_rwkv_fwd_params params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

void fcl_rwkv_fwd_fit(const fcl_rwkv_block_costs *k, const fcl_device_info *dev, int K, int V,
                      fcl_config *cfg) {
  params *c = FCL_PARAMS(params, cfg);
  while (c->VS > 1 && c->VS * c->VC >= 2 * V) c->VS /= 2;
  while (c->VS > 1 && (size_t)(c->VS * c->KS) > dev->max_wg) c->VS /= 2;
  c->TC = 16;
  while (k->local_bytes(K, cfg) > fcl_rwkv_local_budget(dev) && c->TC > 1) c->TC /= 2;
}

bool fcl_rwkv_fwd_valid(const fcl_rwkv_block_costs *k, const fcl_device_info *dev,
                        const fcl_tuning_class *cls, const fcl_config *cfg, char *why,
                        size_t why_size) {
  const params *c = FCL_CPARAMS(params, cfg);
  const char *bad = c->TC < 1 || c->TC > 256
                        ? "a size out of range"
                        : fcl_rwkv_block_misfit(k, dev, cls->head_dim, cls->head_dim_v, c->KS,
                                                c->VS, c->VC, cfg);
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

void fcl_rwkv_fwd_point(const fcl_tuning_class *c, const int *v, fcl_config *cfg) {
  params *r = FCL_PARAMS(params, cfg);
  r->TC = v[0];
  r->KS = ceil_div(c->head_dim, v[1]);
  r->VS = v[2], r->VC = v[3];
}

bool fcl_rwkv_fwd_worth_trying(const fcl_device_info *dev, const fcl_tuning_class *c,
                               const fcl_config *cfg) {
  const params *r = FCL_CPARAMS(params, cfg);
  return fcl_rwkv_block_worth_trying(dev, (int)c->head_dim, r->KS, r->VS, r->VC);
}
