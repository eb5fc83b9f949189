/* Built-in block sizes of the portable forward kernel, fitted to the
 * device's local memory and work-group limits. fa-tune will override them. */
#include "attention.h"

#include <stdio.h>

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

/* Loop iterations per key tile of cl/attention_fwd.cl, counting nested loops
 * the way llvmpipe does (each iteration of each loop). */
static long fwd_iterations_per_tile(const fcl_attention_fwd_config *c, int head_dim) {
  const long wg = (long)c->wg_rows * c->wg_cols;
  const long rm = c->block_m / c->wg_rows, cn = c->block_n / c->wg_cols;
  const long cv = c->block_dv / c->wg_cols;
  const long nchunk = ceil_div(head_dim, c->block_d);
  const long load_q = nchunk > 1 ? ceil_div(c->block_m * c->block_d, (int)wg) : 0;
  long it = 1 + nchunk * (1 + load_q + ceil_div(c->block_n * c->block_d, (int)wg) +
                          c->block_d * (1 + rm + cn + rm * (1 + cn)));
  it += rm * (1 + cn) + ceil_div(c->block_n * c->block_dv, (int)wg);
  it += rm * (1 + c->wg_cols + cv + cn);
  it += c->block_n * (1 + cv + rm * (1 + cv));
  return it;
}

int64_t fcl_attention_fwd_keys_per_group(const fcl_device_info *dev,
                                         const fcl_attention_fwd_config *c,
                                         int head_dim) {
  if (dev->loop_budget <= 0) return 0;
  /* A quarter of the budget for the prologue, epilogue and safety. */
  long tiles = (dev->loop_budget * 3 / 4) / fwd_iterations_per_tile(c, head_dim);
  return (int64_t)(tiles < 1 ? 1 : tiles) * c->block_n;
}

void fcl_attention_fwd_choose(const fcl_device_info *dev, int head_dim,
                              int head_dim_v, fcl_attention_fwd_config *c) {
  c->wg_cols = 8;
  c->wg_rows = 16;
  c->block_n = 32;
  int max_slice = 128;
  if (dev->is_llvmpipe && dev->max_wg >= 1024) {
    /* Many work-items, each with little to do, walk more keys per group
     * within llvmpipe's loop budget. */
    c->wg_cols = 32;
    c->wg_rows = 32;
    max_slice = 64;
  }
  while (c->wg_rows > 1 && (size_t)(c->wg_rows * c->wg_cols) > dev->max_wg)
    c->wg_rows /= 2;
  c->block_m = (dev->is_llvmpipe ? 1 : 4) * c->wg_rows;
  /* Output columns per work-group: up to max_slice, split evenly. */
  const int nslice = ceil_div(head_dim_v, max_slice);
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

/* Loop iterations of bwd_contract over dim, counted as llvmpipe does. */
static long bwd_contract_iterations(const fcl_attention_bwd_config *c, int dim) {
  const int wg = c->wg_rows * c->wg_cols;
  const long rr = c->block_r / c->wg_rows, cc = c->block_c / c->wg_cols;
  return ceil_div(dim, c->block_k) *
         (1 + ceil_div(c->block_r * c->block_k, wg) + ceil_div(c->block_c * c->block_k, wg) +
          c->block_k * (1 + rr + cc + rr * (1 + cc)));
}

int64_t fcl_attention_bwd_cols_per_group(const fcl_device_info *dev,
                                         const fcl_attention_bwd_config *c,
                                         int head_dim, int head_dim_v, int group) {
  if (dev->loop_budget <= 0) return 0;
  const int wg = c->wg_rows * c->wg_cols;
  const long rr = c->block_r / c->wg_rows, cc = c->block_c / c->wg_cols;
  const long ck = c->block_k / c->wg_cols;
  const long accumulate = ceil_div(c->block_c * c->block_k, wg) +
                          c->block_c * (1 + ck + rr * (1 + ck));
  /* The dK/dV tile (two accumulations) bounds the dQ tile too. */
  const long tile = 2 + cc + bwd_contract_iterations(c, head_dim) +
                    bwd_contract_iterations(c, head_dim_v) + 2 * rr * (1 + cc) +
                    2 * accumulate;
  long tiles = (dev->loop_budget * 3 / 4) / (tile * group);
  return (int64_t)(tiles < 1 ? 1 : tiles) * c->block_c;
}

void fcl_attention_bwd_choose(const fcl_device_info *dev, int head_dim,
                              int head_dim_v, fcl_attention_bwd_config *c) {
  c->wg_cols = 8;
  c->wg_rows = 16;
  if (dev->is_llvmpipe && dev->max_wg >= 1024) c->wg_cols = c->wg_rows = 32;
  while (c->wg_rows > 1 && (size_t)(c->wg_rows * c->wg_cols) > dev->max_wg)
    c->wg_rows /= 2;
  c->block_r = (dev->is_llvmpipe ? 1 : 4) * c->wg_rows;
  c->block_c = 32;
  /* One width for contraction chunks and gradient slices: up to 64 (128
   * on GPUs, where a narrower slice recomputes S and dP once more). */
  const int widest = head_dim > head_dim_v ? head_dim : head_dim_v;
  const int nslice = ceil_div(widest, dev->is_cpu ? 64 : 128);
  c->block_k = round_up(ceil_div(widest, nslice), c->wg_cols);
  const size_t budget = dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
  while (bwd_local_bytes(c) > budget) {
    if (c->block_c > c->wg_cols) c->block_c /= 2;
    else if (c->block_k > c->wg_cols) c->block_k = round_up(c->block_k / 2, c->wg_cols);
    else if (c->block_r > c->wg_rows) c->block_r /= 2;
    else break;
  }
}

/* Checks of tuned parameters (fa-tune candidates and database rows): the
 * kernels' #error conditions, work-group and local-memory limits, and a
 * cap on the per-work-item register tile, beyond which every device
 * spills. */
#define FCL_MAX_TILE_FLOATS 192

bool fcl_attention_fwd_valid(const fcl_device_info *dev, int head_dim,
                             int head_dim_v, const fcl_attention_fwd_config *c,
                             char *why, size_t why_size) {
  const char *bad = NULL;
  if (c->block_m < 1 || c->block_n < 1 || c->block_d < 1 || c->block_dv < 1 ||
      c->wg_rows < 1 || c->wg_cols < 1 || c->block_m > 512 || c->block_n > 512)
    bad = "a size out of range";
  else if (c->block_m % c->wg_rows || c->block_n % c->wg_cols ||
           c->block_dv % c->wg_cols)
    bad = "BLOCK_M, BLOCK_N, BLOCK_DV not multiples of the work-item grid";
  else if ((size_t)c->wg_rows * c->wg_cols > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (c->block_d > head_dim || c->block_dv > round_up(head_dim_v, c->wg_cols))
    bad = "BLOCK_D or BLOCK_DV wider than the head";
  else if (fcl_attention_fwd_local_bytes(c, head_dim) + 512 > dev->local_mem)
    bad = "local memory exceeded";
  else if ((c->block_m / c->wg_rows) * (c->block_n / c->wg_cols + c->block_dv / c->wg_cols) >
           FCL_MAX_TILE_FLOATS)
    bad = "register tile too large";
  /* PoCL (3.1 here) corrupts the host heap running this kernel with one
   * query row and one output column per work-item (RM = CV = 1), e.g.
   * 8 x 16 work-items for BLOCK_M 8 and BLOCK_DV 16, while Oclgrind finds
   * those launches clean and correct; fa-tune met it as a crash. */
  else if (dev->is_cpu && !dev->is_llvmpipe && c->block_m == c->wg_rows &&
           c->block_dv == c->wg_cols)
    bad = "one row and one output column per work-item (PoCL fails on it)";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

bool fcl_attention_bwd_valid(const fcl_device_info *dev, int head_dim,
                             int head_dim_v, const fcl_attention_bwd_config *c,
                             char *why, size_t why_size) {
  const int widest = head_dim > head_dim_v ? head_dim : head_dim_v;
  const char *bad = NULL;
  if (c->block_r < 1 || c->block_c < 1 || c->block_k < 1 || c->wg_rows < 1 ||
      c->wg_cols < 1 || c->block_r > 512 || c->block_c > 512)
    bad = "a size out of range";
  else if (c->block_r % c->wg_rows || c->block_c % c->wg_cols || c->block_k % c->wg_cols)
    bad = "BLOCK_R, BLOCK_C, BLOCK_K not multiples of the work-item grid";
  else if ((size_t)c->wg_rows * c->wg_cols > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (c->block_k > round_up(widest, c->wg_cols))
    bad = "BLOCK_K wider than the head";
  else if (bwd_local_bytes(c) + 512 > dev->local_mem)
    bad = "local memory exceeded";
  else {
    const int rr = c->block_r / c->wg_rows, cc = c->block_c / c->wg_cols;
    const int ck = c->block_k / c->wg_cols;
    if (2 * rr * cc + 2 * (rr > cc ? rr : cc) * ck > FCL_MAX_TILE_FLOATS)
      bad = "register tile too large";
  }
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}
