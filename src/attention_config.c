/* Built-in block sizes of the portable forward kernel, fitted to the
 * device's local memory and work-group limits. fa-tune will override them. */
#include "attention.h"

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int round_up(int a, int b) { return ceil_div(a, b) * b; }

size_t fcl_attention_fwd_local_bytes(const fcl_attention_fwd_config *c,
                                     int head_dim) {
  const bool resident = c->block_d >= head_dim;
  size_t q = (size_t)c->block_m * (c->block_d + 1);
  size_t p = (size_t)c->block_m * (c->block_n + 1);
  size_t kd = (size_t)c->block_n * (c->block_d + 1);
  size_t kv = (size_t)c->block_n * (c->block_dv + 1);
  size_t red = (size_t)c->block_m * c->wg_cols;
  size_t qp = resident ? q + p : (q > p ? q : p);
  return 4 * (qp + (kd > kv ? kd : kv) + red);
}

void fcl_attention_fwd_choose(const fcl_device_info *dev, int head_dim,
                              int head_dim_v, fcl_attention_fwd_config *c) {
  c->wg_cols = 8;
  c->wg_rows = 16;
  while (c->wg_rows > 1 && (size_t)(c->wg_rows * c->wg_cols) > dev->max_wg)
    c->wg_rows /= 2;
  c->block_m = 4 * c->wg_rows;
  c->block_n = 32;
  /* Output columns per work-group: up to 128, split evenly. */
  const int nslice = ceil_div(head_dim_v, 128);
  c->block_dv = round_up(ceil_div(head_dim_v, nslice), c->wg_cols);
  /* Keep all of Q in local memory when it fits, else contract in chunks of
   * at most 64. */
  const size_t budget = dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
  c->block_d = head_dim;
  if (fcl_attention_fwd_local_bytes(c, head_dim) > budget)
    c->block_d = ceil_div(head_dim, ceil_div(head_dim, 64));
  while (fcl_attention_fwd_local_bytes(c, head_dim) > budget) {
    if (c->block_n > c->wg_cols) c->block_n /= 2;
    else if (c->block_d > 16) c->block_d = ceil_div(c->block_d, 2);
    else if (c->block_m > c->wg_rows) c->block_m /= 2;
    else break; /* the smallest configuration; the build will say if not */
  }
}

static size_t bwd_local_bytes(const fcl_attention_bwd_config *c) {
  return 4 * ((size_t)c->block_r * (c->block_k + 1) +
              (size_t)c->block_c * (c->block_k + 1) +
              (size_t)c->block_r * (c->block_c + 1));
}

void fcl_attention_bwd_choose(const fcl_device_info *dev, int head_dim,
                              int head_dim_v, fcl_attention_bwd_config *c) {
  c->wg_cols = 8;
  c->wg_rows = 16;
  while (c->wg_rows > 1 && (size_t)(c->wg_rows * c->wg_cols) > dev->max_wg)
    c->wg_rows /= 2;
  c->block_r = 4 * c->wg_rows;
  c->block_c = 32;
  /* One width for contraction chunks and gradient slices: up to 64. */
  const int widest = head_dim > head_dim_v ? head_dim : head_dim_v;
  const int nslice = ceil_div(widest, 64);
  c->block_k = round_up(ceil_div(widest, nslice), c->wg_cols);
  const size_t budget = dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
  while (bwd_local_bytes(c) > budget) {
    if (c->block_c > c->wg_cols) c->block_c /= 2;
    else if (c->block_k > c->wg_cols) c->block_k = round_up(c->block_k / 2, c->wg_cols);
    else if (c->block_r > c->wg_rows) c->block_r /= 2;
    else break;
  }
}
