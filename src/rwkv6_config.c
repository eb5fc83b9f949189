/* Built-in block sizes of the RWKV6 kernels, fitted to local memory and
 * work-group limits. */
#include "rwkv6.h"

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static size_t budget(const fcl_device_info *dev) {
  return dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
}

void fcl_rwkv6_fwd_choose(const fcl_device_info *dev, int K, int V, bool chunked,
                          fcl_rwkv6_fwd_config *c) {
  /* At most 64 state rows per work-item; 8 on llvmpipe, where fewer loop
   * iterations per work-item mean longer launches. */
  c->ks = ceil_div(K, dev->is_llvmpipe ? 8 : 64);
  c->bv = V < 32 ? V : 32;
  while (c->bv > 1 && (size_t)(c->bv * c->ks) > dev->max_wg) c->bv /= 2;
  const int kpad = c->ks * ceil_div(K, c->ks);
  c->tc = 16;
  c->bvc = V < 16 ? V : 16;
  for (;;) {
    size_t rec = 4 * (size_t)c->tc * (3 * kpad + c->bv + (c->ks > 1 ? c->bv * c->ks : 0));
    size_t out = 4 * ((size_t)c->tc * (5 * K + c->bvc) + (size_t)K * c->bvc +
                      (size_t)c->tc * (c->tc + 1));
    bool fits = rec <= budget(dev) && (!chunked || out <= budget(dev)) &&
                (!chunked || (size_t)(c->tc * c->bvc) <= dev->max_wg);
    if (fits || c->tc == 1) break;
    if (chunked && c->bvc > 4) c->bvc /= 2;
    else c->tc /= 2;
  }
}

void fcl_rwkv6_bwd_choose(const fcl_device_info *dev, int K, int V,
                          fcl_rwkv6_bwd_config *c) {
  c->bvb = V < 8 ? V : 8;
  c->tc = 8;
  for (;;) {
    size_t bytes = 4 * ((size_t)c->tc * (3 * K + 2 * c->bvb) +
                        2 * (size_t)c->tc * c->bvb * K);
    if (bytes <= budget(dev) || (c->tc == 1 && c->bvb == 1)) break;
    if (c->tc > 2) c->tc /= 2;
    else if (c->bvb > 1) c->bvb /= 2;
    else c->tc /= 2;
  }
}

static int64_t positions(const fcl_device_info *dev, long per_chunk, int tc) {
  if (dev->loop_budget <= 0) return 0;
  long chunks = (dev->loop_budget * 3 / 4) / per_chunk;
  return (int64_t)(chunks < 1 ? 1 : chunks) * tc;
}

/* Loop iterations per chunk, counted as llvmpipe does (every iteration of
 * every loop, nested ones included). */
int64_t fcl_rwkv6_fwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv6_fwd_config *c) {
  const int kr = ceil_div(K, c->ks), kpad = kr * c->ks, wg = c->bv * c->ks;
  long it = 1 + kr + 3 * ceil_div(c->tc * kpad, wg) + ceil_div(c->tc * c->bv, wg) +
            c->tc * (1 + kr);
  if (c->ks > 1) it += ceil_div(c->tc * c->bv, wg) * (1 + c->ks);
  return positions(dev, it, c->tc);
}

int64_t fcl_rwkv6_bwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv6_bwd_config *c) {
  const long loads = 3 * c->tc + 2 * ceil_div(c->tc * c->bvb, K);
  const long fwd = 1 + c->bvb + loads + c->tc * (1 + c->bvb);
  const long rev = 1 + loads + c->bvb + 2 * c->tc * (1 + c->bvb) +
                   ceil_div(c->tc * c->bvb, K) * (1 + K);
  return positions(dev, fwd > rev ? fwd : rev, c->tc);
}
