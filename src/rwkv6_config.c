/* Built-in block sizes of the RWKV6 kernels, fitted to local memory and
 * work-group limits. */
#include "rwkv6.h"

#include <stdio.h>

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static size_t budget(const fcl_device_info *dev) {
  return dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
}

/* Local memory of the recurrent (state) kernel and of the chunk-output
 * kernel. */
static size_t recurrent_bytes(int K, const fcl_rwkv6_fwd_config *c) {
  const int kpad = c->ks * ceil_div(K, c->ks), bv = c->vs * c->vc;
  return 4 * (size_t)c->tc * (3 * kpad + bv + (c->ks > 1 ? bv * c->ks : 0));
}
static size_t chunk_output_bytes(int K, const fcl_rwkv6_fwd_config *c) {
  return 4 * ((size_t)c->tc * (4 * (K + 1) + c->bvc) + (size_t)K * c->bvc +
              (size_t)c->tc * (c->tc + 1));
}
static size_t bwd_bytes(int K, const fcl_rwkv6_bwd_config *c) {
  return 4 * ((size_t)c->tc * (3 * K + 2 * c->bvb) + 2 * (size_t)c->tc * c->bvb * K);
}

void fcl_rwkv6_fwd_choose(const fcl_device_info *dev, int K, int V, bool chunked,
                          fcl_rwkv6_fwd_config *c) {
  if (!dev->is_cpu) {
    /* 8 x 8 state blocks: few local reads per multiply-add, and enough
     * work-items to hide the latency of the chunk loads. */
    c->ks = ceil_div(K, 8);
    c->vc = V < 8 ? V : 8;
    c->vs = 8;
  } else {
    /* Whole columns of up to 64 rows (8 on llvmpipe, where fewer loop
     * iterations per work-item mean longer launches). */
    c->ks = ceil_div(K, dev->is_llvmpipe ? 8 : 64);
    c->vc = 1;
    c->vs = 32;
  }
  while (c->vs > 1 && c->vs * c->vc >= 2 * V) c->vs /= 2;
  while (c->vs > 1 && (size_t)(c->vs * c->ks) > dev->max_wg) c->vs /= 2;
  c->tc = 16;
  c->bvc = V < 16 ? V : 16;
  for (;;) {
    bool fits = recurrent_bytes(K, c) <= budget(dev) &&
                (!chunked || chunk_output_bytes(K, c) <= budget(dev)) &&
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
    if (bwd_bytes(K, c) <= budget(dev) || (c->tc == 1 && c->bvb == 1)) break;
    if (c->tc > 2) c->tc /= 2;
    else if (c->bvb > 1) c->bvb /= 2;
    else c->tc /= 2;
  }
}

/* Checks of tuned parameters (fa-tune candidates, database rows): sizes,
 * work-group and local-memory limits, and the per-work-item state block
 * (KR x VC floats in registers). */
bool fcl_rwkv6_fwd_valid(const fcl_device_info *dev, int K, int V, bool chunked,
                         const fcl_rwkv6_fwd_config *c, char *why, size_t why_size) {
  const char *bad = NULL;
  if (c->tc < 1 || c->ks < 1 || c->vs < 1 || c->vc < 1 || c->bvc < 1 ||
      c->tc > 256 || c->ks > K || c->vc > V || c->bvc > V)
    bad = "a size out of range";
  else if ((size_t)c->vs * c->ks > dev->max_wg ||
           (chunked && (size_t)c->tc * c->bvc > dev->max_wg))
    bad = "work-group larger than the device allows";
  else if (c->vs * c->vc >= 2 * V && c->vs > 1)
    bad = "more value columns than the head has";
  else if (recurrent_bytes(K, c) > budget(dev) ||
           (chunked && chunk_output_bytes(K, c) > budget(dev)))
    bad = "local memory exceeded";
  else if (ceil_div(K, c->ks) * c->vc > 128)
    bad = "state block too large for registers";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

bool fcl_rwkv6_bwd_valid(const fcl_device_info *dev, int K, int V,
                         const fcl_rwkv6_bwd_config *c, char *why, size_t why_size) {
  const char *bad = NULL;
  if (c->tc < 1 || c->bvb < 1 || c->tc > 256 || c->bvb > V || c->bvb > 64)
    bad = "a size out of range";
  else if ((size_t)K > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (bwd_bytes(K, c) > budget(dev))
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
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
  const int kr = ceil_div(K, c->ks), kpad = kr * c->ks, bv = c->vs * c->vc;
  const int wg = c->vs * c->ks;
  long it = 1 + kr * (1 + c->vc) + 3 * ceil_div(c->tc * kpad, wg) +
            ceil_div(c->tc * bv, wg) + c->tc * (1 + c->vc + kr * (1 + c->vc));
  if (c->ks > 1) it += c->tc * c->vc + ceil_div(c->tc * bv, wg) * (1 + c->ks);
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
