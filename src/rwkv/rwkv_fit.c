/* The limits every RWKV variant's parameters answer to: local memory and,
 * where the device bounds a launch's loop iterations (llvmpipe), the
 * positions a launch may walk; the checks of kernels of state blocks (the
 * recurrent forwards, the steps). */
#include "rwkv/rwkv.h"

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

size_t fcl_rwkv_local_budget(const fcl_device_info *dev) {
  return dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
}

bool fcl_rwkv_loops_fit(const fcl_device_info *dev, long iterations) {
  return dev->loop_budget <= 0 || iterations <= dev->loop_budget * 3 / 4;
}

int64_t fcl_rwkv_positions_per_launch(const fcl_device_info *dev, long per_chunk, int tc) {
  if (dev->loop_budget <= 0) return 0;
  long chunks = (dev->loop_budget * 3 / 4) / per_chunk;
  return (int64_t)(chunks < 1 ? 1 : chunks) * tc;
}

const char *fcl_rwkv_block_misfit(const fcl_rwkv_block_costs *k, const fcl_device_info *dev,
                                  int K, int V, int KS, int VS, int VC, const fcl_config *cfg) {
  if (KS < 1 || VS < 1 || VC < 1 || KS > K || VC > V) return "a size out of range";
  if ((size_t)VS * KS > dev->max_wg) return "work-group larger than the device allows";
  if (VS * VC >= 2 * V && VS > 1) return "more value columns than the head has";
  if (k->local_bytes(K, cfg) > fcl_rwkv_local_budget(dev)) return "local memory exceeded";
  if (ceil_div(K, KS) * VC > k->max_block) return "state block too large for registers";
  if (k->iterations && !fcl_rwkv_loops_fit(dev, k->iterations(K, cfg)))
    return "more loop iterations than the device allows";
  return NULL;
}

bool fcl_rwkv_block_worth_trying(const fcl_device_info *dev, int K, int KS, int VS, int VC) {
  if (dev->is_cpu) return true;
  if (ceil_div(K, KS) * VC > 64) return false;
  return fcl_whole_warps(dev, (size_t)VS * KS);
}
