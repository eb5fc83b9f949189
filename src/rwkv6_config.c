/* Built-in block sizes of the RWKV6 kernels, fitted to local memory and
 * work-group limits. */
#include "rwkv6.h"

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static size_t budget(const fcl_device_info *dev) {
  return dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
}

void fcl_rwkv6_fwd_choose(const fcl_device_info *dev, int K, int V, bool chunked,
                          fcl_rwkv6_fwd_config *c) {
  c->ks = ceil_div(K, 64); /* at most 64 state rows per work-item */
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
