/* The limits every RWKV variant's parameters answer to: local memory and,
 * where the device bounds a launch's loop iterations (llvmpipe), the
 * positions a launch may walk. */
#include "rwkv/rwkv.h"

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
