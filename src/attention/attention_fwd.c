/* The portable attention forward (cl/attention/attention_fwd.cl): its
 * descriptor (parameters, built-in block sizes fitted to the device's
 * local memory and work-group limits, checks, search space) and its
 * launch, with the split across work-groups where the device bounds a
 * work-item's loop iterations (llvmpipe). */
#include "attention/attention.h"

#include <stdio.h>

/* Query rows and keys a tile, the contraction chunk, the output slice, and
 * the work-item grid. */
#define PARAMS(X) X(BLOCK_M) X(BLOCK_N) X(BLOCK_D) X(BLOCK_DV) X(WG_ROWS) X(WG_COLS)
FCL_PARAM_STRUCT(fwd_params, PARAMS);

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int round_up(int a, int b) { return ceil_div(a, b) * b; }

static size_t local_bytes(const fwd_params *c, int head_dim) {
  const bool resident = c->BLOCK_D >= head_dim;
  size_t q = (size_t)c->BLOCK_M * (c->BLOCK_D + 1);
  size_t p = (size_t)c->BLOCK_M * (c->BLOCK_N + 1);
  size_t kd = (size_t)c->BLOCK_N * (c->BLOCK_D + 1);
  size_t kv = (size_t)c->BLOCK_N * (c->BLOCK_DV + 1);
  size_t red = (size_t)c->BLOCK_M * c->WG_COLS;
  size_t qp = resident ? q + p : (q > p ? q : p);
  return 4 * (qp + (kd > kv ? kd : kv) + red);
}

/* Loop iterations per key tile of the kernel, counting nested loops the
 * way llvmpipe does (each iteration of each loop). */
static long iterations_per_tile(const fwd_params *c, int head_dim) {
  const long wg = (long)c->WG_ROWS * c->WG_COLS;
  const long rm = c->BLOCK_M / c->WG_ROWS, cn = c->BLOCK_N / c->WG_COLS;
  const long cv = c->BLOCK_DV / c->WG_COLS;
  const long nchunk = ceil_div(head_dim, c->BLOCK_D);
  const long load_q = nchunk > 1 ? ceil_div(c->BLOCK_M * c->BLOCK_D, (int)wg) : 0;
  long it = 1 + nchunk * (1 + load_q + ceil_div(c->BLOCK_N * c->BLOCK_D, (int)wg) +
                          c->BLOCK_D * (1 + rm + cn + rm * (1 + cn)));
  it += rm * (1 + cn) + ceil_div(c->BLOCK_N * c->BLOCK_DV, (int)wg);
  it += rm * (1 + c->WG_COLS + cv + cn);
  it += c->BLOCK_N * (1 + cv + rm * (1 + cv));
  return it;
}

/* Keys one work-group may walk within the device's loop budget (a multiple
 * of BLOCK_N), or 0 when unlimited. */
static int64_t keys_per_group(const fcl_device_info *dev, const fwd_params *c, int head_dim) {
  if (dev->loop_budget <= 0) return 0;
  /* A quarter of the budget for the prologue, epilogue and safety. */
  long tiles = (dev->loop_budget * 3 / 4) / iterations_per_tile(c, head_dim);
  return (int64_t)(tiles < 1 ? 1 : tiles) * c->BLOCK_N;
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  fwd_params *c = FCL_PARAMS(fwd_params, cfg);
  const int head_dim = cls->head_dim, head_dim_v = cls->head_dim_v;
  c->WG_COLS = 8;
  c->WG_ROWS = 16;
  c->BLOCK_N = 32;
  int max_slice = 128;
  if (dev->is_llvmpipe && dev->max_wg >= 1024) {
    /* Many work-items, each with little to do, walk more keys per group
     * within llvmpipe's loop budget. */
    c->WG_COLS = 32;
    c->WG_ROWS = 32;
    max_slice = 64;
  }
  while (c->WG_ROWS > 1 && (size_t)(c->WG_ROWS * c->WG_COLS) > dev->max_wg) c->WG_ROWS /= 2;
  c->BLOCK_M = (dev->is_llvmpipe ? 1 : 4) * c->WG_ROWS;
  /* Output columns per work-group: up to max_slice, split evenly. */
  const int nslice = ceil_div(head_dim_v, max_slice);
  c->BLOCK_DV = round_up(ceil_div(head_dim_v, nslice), c->WG_COLS);
  /* Keep all of Q in local memory when it fits, else contract in chunks of
   * at most 64. */
  const size_t budget = dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
  c->BLOCK_D = head_dim;
  if (local_bytes(c, head_dim) > budget) c->BLOCK_D = ceil_div(head_dim, ceil_div(head_dim, 64));
  while (local_bytes(c, head_dim) > budget) {
    if (c->BLOCK_N > c->WG_COLS) c->BLOCK_N /= 2;
    else if (c->BLOCK_D > 16) c->BLOCK_D = ceil_div(c->BLOCK_D, 2);
    else if (c->BLOCK_M > c->WG_ROWS) c->BLOCK_M /= 2;
    else break; /* the smallest configuration; the build will say if not */
  }
}

/* Beyond this many floats of a work-item's register tile every device spills. */
#define MAX_TILE_FLOATS 192

/* The kernel's #error conditions, work-group and local-memory limits, and
 * the register tile. */
static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const fwd_params *c = FCL_CPARAMS(fwd_params, cfg);
  const char *bad = NULL;
  if (c->BLOCK_M < 1 || c->BLOCK_N < 1 || c->BLOCK_D < 1 || c->BLOCK_DV < 1 ||
      c->WG_ROWS < 1 || c->WG_COLS < 1 || c->BLOCK_M > 512 || c->BLOCK_N > 512)
    bad = "a size out of range";
  else if (c->BLOCK_M % c->WG_ROWS || c->BLOCK_N % c->WG_COLS || c->BLOCK_DV % c->WG_COLS)
    bad = "BLOCK_M, BLOCK_N, BLOCK_DV not multiples of the work-item grid";
  else if ((size_t)c->WG_ROWS * c->WG_COLS > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (c->BLOCK_D > cls->head_dim || c->BLOCK_DV > round_up(cls->head_dim_v, c->WG_COLS))
    bad = "BLOCK_D or BLOCK_DV wider than the head";
  else if (local_bytes(c, cls->head_dim) + 512 > dev->local_mem)
    bad = "local memory exceeded";
  else if ((c->BLOCK_M / c->WG_ROWS) * (c->BLOCK_N / c->WG_COLS + c->BLOCK_DV / c->WG_COLS) >
           MAX_TILE_FLOATS)
    bad = "register tile too large";
  /* PoCL (3.1 here) corrupts the host heap running this kernel with one
   * query row and one output column per work-item (RM = CV = 1), e.g.
   * 8 x 16 work-items for BLOCK_M 8 and BLOCK_DV 16, while Oclgrind finds
   * those launches clean and correct; fa-tune met it as a crash. */
  else if (dev->is_cpu && !dev->is_llvmpipe && c->BLOCK_M == c->WG_ROWS &&
           c->BLOCK_DV == c->WG_COLS)
    bad = "one row and one output column per work-item (PoCL fails on it)";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  const int D = cls->head_dim;
  a[0] = (fcl_axis){"WG_ROWS", 6, {1, 2, 4, 8, 16, 32}};
  a[1] = (fcl_axis){"WG_COLS", 6, {1, 2, 4, 8, 16, 32}};
  a[2] = (fcl_axis){"ROWS_PER_ITEM", 4, {1, 2, 4, 8}};
  a[3] = (fcl_axis){"COLS_PER_ITEM", 4, {1, 2, 4, 8}};
  a[4] = (fcl_axis){"BLOCK_D", 1, {D}};
  for (int d = 64; d >= 16; d /= 2)
    if (D > d) a[4].values[a[4].n++] = d;
  a[5] = (fcl_axis){"V_SLICES", 3, {1, 2, 4}};
  return 6;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  fwd_params *c = FCL_PARAMS(fwd_params, cfg);
  c->WG_ROWS = v[0], c->WG_COLS = v[1];
  c->BLOCK_M = v[0] * v[2], c->BLOCK_N = v[1] * v[3];
  c->BLOCK_D = v[4];
  c->BLOCK_DV = round_up(ceil_div(cls->head_dim_v, v[5]), v[1]);
}

static bool worth_trying(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         const fcl_config *cfg) {
  const fwd_params *c = FCL_CPARAMS(fwd_params, cfg);
  return fcl_whole_warps(dev, (size_t)c->WG_ROWS * c->WG_COLS);
}

const fcl_variant fcl_variant_attention_fwd = {
    "attention_fwd", FCL_TUNING_ATTENTION_FWD, FCL_TOPS("attention/attention_fwd.cl"),
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, true, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, worth_trying, 0};

fcl_status fcl_attention_fwd_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                    const void *problem, bool *fallback) {
  const fcl_attention_problem *p = problem;
  const fcl_attention_desc *d = p->d;
  const fwd_params *c = FCL_CPARAMS(fwd_params, &pl->cfg);
  const fcl_variant *v = pl->cls.variant;
  cl_kernel kern, comb = NULL;
  fcl_status s;
  (void)fallback;
  if ((s = fcl_get_kernel(ctx, v->tops, pl->options, "fcl_attention_fwd", &kern)))
    return s;

  /* Split the keys across work-groups where one may not walk them all. */
  const int64_t kpg = keys_per_group(&ctx->info, c, (int)d->head_dim);
  const cl_int nsplit = kpg > 0 ? (cl_int)((d->seqlen_k + kpg - 1) / kpg) : 1;
  cl_int keys_per_split = (cl_int)kpg, flags = fcl_attention_flags(p);
  cl_long nrows = d->heads_q * p->total_q;
  const cl_int nslice = (cl_int)((d->head_dim_v + c->BLOCK_DV - 1) / c->BLOCK_DV);
  cl_mem o_part = p->q->buffer, lse_part = p->q->buffer;
  cl_mem lse_b = p->lse ? p->lse : p->q->buffer;
  if (nsplit > 1) {
    flags |= FCL_ATTN_SPLIT;
    fcl_log(ctx, "attention forward: keys split %d ways (%d per work-group)", nsplit,
            keys_per_split);
    if ((s = fcl_get_kernel(ctx, v->tops, pl->options, "fcl_attention_fwd_combine",
                            &comb)) ||
        (s = fcl_scratch(ctx, 0, fcl_bytes(nsplit, nrows, d->head_dim_v, 4, 1), &o_part)) ||
        (s = fcl_scratch(ctx, 1, fcl_bytes(nsplit, nrows, 4, 1, 1), &lse_part)))
      return s;
  }

  fcl_args a = FCL_ARGS(kern);
  fcl_attention_fwd_args(&a, p, flags);
  FCL_ARG(&a, keys_per_split); FCL_ARG(&a, nslice); FCL_ARG(&a, o_part);
  FCL_ARG(&a, lse_part); FCL_ARG(&a, nrows);
  fcl_args ac = FCL_ARGS(comb);
  if (comb) {
    FCL_ARG(&ac, o_part); FCL_ARG(&ac, lse_part); FCL_ARG(&ac, p->o->buffer);
    FCL_ARG(&ac, lse_b); fcl_arg_tensor(&ac, p->o); FCL_ARG(&ac, p->sc.stat_sh);
    FCL_ARG(&ac, p->sc.heads_q); FCL_ARG(&ac, nrows); FCL_ARG(&ac, nsplit); FCL_ARG(&ac, flags);
    if (ac.err != CL_SUCCESS) return fcl_fail_cl(ctx, ac.err, "clSetKernelArg");
  }

  const size_t wg = (size_t)c->WG_ROWS * c->WG_COLS;
  const size_t nqb = (size_t)((d->seqlen_q + c->BLOCK_M - 1) / c->BLOCK_M);
  size_t global[3] = {nqb * wg, (size_t)(nslice * nsplit), (size_t)(d->batch * d->heads_q)};
  size_t local[3] = {wg, 1, 1};
  if ((s = fcl_launch(ctx, kern, &a, global, local, "enqueueing attention forward")) || !comb)
    return s;
  size_t gc[3] = {(size_t)(d->head_dim_v + 31) / 32 * 32, (size_t)nrows, 1};
  size_t lc[3] = {32, 1, 1};
  return fcl_launch(ctx, comb, &ac, gc, lc, "enqueueing attention combine");
}
