/* The Hopper backward of attention: the tensor-core backward
 * (attention_bwd_mma.c: delta on mma.sync, the runner) with its dQ and
 * dK/dV kernels on wgmma (cl/attention/attention_bwd_wgmma_*.cl, built for
 * sm_90a through core/ptx_retarget.c). Heads with inf or NaN in K, Q or
 * dO run the mma.sync dQ and dK/dV kernels of the other build, at the
 * mma.sync row's defaults. f16 and bf16, head dims among
 * wgmma's N, 16-byte rows, where core/wgmma_probe.c found the products
 * right; anything else, or a build that fails, goes to the next row. */
#include "attention/attention.h"

#include <stdio.h>

/* The wgmma dK/dV kernel's warps (4 or 8: 64 keys a warpgroup), queries
 * per tile (an N of cl/common/wgmma_ops.cl) and tiles in flight; the
 * wgmma dQ kernel's likewise (64 query rows a warpgroup, keys a tile), and
 * the operands of its S and dP in local memory: 2 (Q, dO and the tile) or
 * 1 (the tile; Q and dO in registers). WK_LOCAL_OPS likewise for dK/dV's
 * S^T and dP^T: 2 (K, V and the tile) or 1 (V and the tile; K in
 * registers). */
#define PARAMS(X)                                                                          \
  X(WK_WARPS) X(WK_BLOCK_N) X(WK_STAGES) X(WQ_WARPS) X(WQ_BLOCK_N) X(WQ_STAGES) X(WQ_LOCAL_OPS) \
  X(WK_LOCAL_OPS)
FCL_PARAM_STRUCT(bwg_params, PARAMS);

/* One wgmma kernel's shape: warps, tile, stages (1 to 3; the third overlaps
 * one tile's gradient products with the next tile's scores), operands of
 * the score products in local memory (2 or 1), and which kernel. */
typedef struct {
  int  warps, n, stages, ops;
  bool dkdv;
} wg_shape;

/* A kernel's own rows (16 a warp) of the q/k and v widths, unless they are
 * in registers (ops 1: dQ's Q and dO, dK/dV's K), the stages' tiles of
 * them, each array aligned to 1024 bytes (the kernels'), and the
 * emulation's scratch: dK/dV's K, V and Q, dO tiles; dQ's Q, dO and K, V. */
static size_t local_bytes(const fcl_device_info *dev, const fcl_tuning_class *cls, wg_shape k) {
  const size_t d = (size_t)cls->head_dim, dv = (size_t)cls->head_dim_v;
  const size_t rows = 16 * (size_t)k.warps, n = (size_t)k.stages * (size_t)k.n;
  const size_t rows_d = k.ops == 2 ? rows : 0, rows_dv = k.ops == 2 || k.dkdv ? rows : 0;
#define R1K(x) (((x) + 1023) / 1024 * 1024)
  return R1K(2 * rows_d * d) + R1K(2 * rows_dv * dv) + R1K(2 * n * d) + R1K(2 * n * dv) +
         (dev->mma_emulate ? 1024u * (size_t)k.warps : 0);
#undef R1K
}

/* Shrinks a kernel's shape until it fits in local memory: tiles shorter,
 * then one stage fewer at tiles of 64, shorter again. */
static wg_shape fit(const fcl_device_info *dev, const fcl_tuning_class *cls, wg_shape k) {
  while (local_bytes(dev, cls, k) > dev->local_mem && (k.n > 16 || k.stages > 1)) {
    if (k.stages > 1 && k.n <= 32) k.stages -= 1, k.n = 64;
    else k.n = k.n > 64 ? k.n - 32 : k.n - 16; /* the next of wgmma's N down */
  }
  return k;
}

/* One warpgroup each. dK/dV overlaps each tile's gradient products with
 * the next tile's scores (WK_STAGES 2 or 3): at D = 64 in two stages of 64
 * queries, at D = 128 in two of 32 with K in registers (WK_LOCAL_OPS 1),
 * which leaves local memory room for the second; the overlap is what made
 * the backward faster at both head dims, once the step's end had no branch
 * (with one, ptxas serialized the two-stage step: C7513). dQ takes tiles
 * of 32 in three stages; at D = 128 with Q and dO in registers, which
 * frees the room for them and made dQ faster; at D = 64 they made it
 * slower, so there they stay in local memory. The figures and their
 * entries in docs/data/h100_attention_wgmma_log.txt: docs/defaults.md,
 * "Attention backward on wgmma". */
static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  bwg_params *c = FCL_PARAMS(bwg_params, cfg);
  const bool small = cls->head_dim <= 64 && cls->head_dim_v <= 64;
  const wg_shape k =
      fit(dev, cls, small ? (wg_shape){4, 64, 2, 2, true} : (wg_shape){4, 32, 2, 1, true});
  const wg_shape q =
      fit(dev, cls, small ? (wg_shape){4, 32, 3, 2, false} : (wg_shape){4, 32, 3, 1, false});
  c->WK_WARPS = k.warps, c->WK_BLOCK_N = k.n, c->WK_STAGES = k.stages, c->WK_LOCAL_OPS = k.ops;
  c->WQ_WARPS = q.warps, c->WQ_BLOCK_N = q.n, c->WQ_STAGES = q.stages, c->WQ_LOCAL_OPS = q.ops;
}

static const char *bad_shape(const fcl_device_info *dev, const fcl_tuning_class *cls,
                             wg_shape k) {
  if ((k.warps != 4 && k.warps != 8) || !fcl_wgmma_n(k.n) || k.stages < 1 || k.stages > 3 ||
      k.ops < 1 || k.ops > 2)
    return "warps 4 or 8, a tile of 16, 32, 48, 64, 96 or 128, 1 to 3 stages, 1 or 2 local "
           "operands";
  if ((size_t)k.warps * 32 > dev->max_wg) return "work-group larger than the device allows";
  if (local_bytes(dev, cls, k) > dev->local_mem) return "local memory exceeded";
  return NULL;
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const bwg_params *c = FCL_CPARAMS(bwg_params, cfg);
  fcl_config mma = {{0}};
  fcl_attention_bwd_mma_defaults(dev, cls, &mma);
  const char *bad = fcl_attention_bwd_mma_bad(dev, cls, &mma), *which = "mma.sync kernels";
  if (!bad)
    bad = bad_shape(dev, cls,
                    (wg_shape){c->WK_WARPS, c->WK_BLOCK_N, c->WK_STAGES, c->WK_LOCAL_OPS, true}),
    which = "WK_: dK/dV";
  if (!bad)
    bad = bad_shape(dev, cls,
                    (wg_shape){c->WQ_WARPS, c->WQ_BLOCK_N, c->WQ_STAGES, c->WQ_LOCAL_OPS, false}),
    which = "WQ_: dQ";
  if (bad && why) snprintf(why, why_size, "%s (%s)", bad, which);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"WK_WARPS", 2, {4, 8}};
  a[1] = (fcl_axis){"WK_BLOCK_N", 6, {16, 32, 48, 64, 96, 128}};
  a[2] = (fcl_axis){"WK_STAGES", 3, {1, 2, 3}};
  a[3] = (fcl_axis){"WQ_WARPS", 2, {4, 8}};
  a[4] = (fcl_axis){"WQ_BLOCK_N", 6, {16, 32, 48, 64, 96, 128}};
  a[5] = (fcl_axis){"WQ_STAGES", 3, {1, 2, 3}};
  a[6] = (fcl_axis){"WQ_LOCAL_OPS", 2, {1, 2}};
  a[7] = (fcl_axis){"WK_LOCAL_OPS", 2, {1, 2}};
  return 8;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  (void)cls;
  bwg_params *c = FCL_PARAMS(bwg_params, cfg);
  c->WK_WARPS = v[0], c->WK_BLOCK_N = v[1], c->WK_STAGES = v[2];
  c->WQ_WARPS = v[3], c->WQ_BLOCK_N = v[4], c->WQ_STAGES = v[5], c->WQ_LOCAL_OPS = v[6];
  c->WK_LOCAL_OPS = v[7];
}

/* The dK/dV kernels before dQ's, after the tensor-core backward's. */
static const char *const tops[] = {"attention/attention_bwd_wgmma_dq.cl", NULL};
const fcl_variant fcl_variant_attention_bwd_wgmma = {
    "attention_bwd_wgmma", FCL_TUNING_ATTENTION_BWD, tops,
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, true, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, NULL, 0};

fcl_status fcl_attention_bwd_wgmma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_attention_problem *p = problem;
  bool yes = false;
  fcl_status s = FCL_OK;
  *fit = FCL_FIT_NO;
  if (p->dtype == FCL_F32 || !fcl_wgmma_n(p->d->head_dim) || !fcl_wgmma_n(p->d->head_dim_v))
    return FCL_OK;
  /* Emulated, no device is a Hopper: only where an override names it (the
   * forced tests), as the wgmma forward. */
  if (ctx->info.mma_emulate && !fcl_tuning_overridden(ctx, &fcl_variant_attention_bwd_wgmma))
    return FCL_OK;
  if (!(s = fcl_attention_mma_applies(ctx, p->d, p->dtype, &yes)) && yes)
    s = fcl_wgmma_ready(ctx, p->dtype, &yes);
  *fit = fcl_fit_if(yes);
  return s;
}

fcl_status fcl_attention_bwd_wgmma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                          const void *problem, bool *fallback) {
  const fcl_attention_problem *p = problem;
  const bwg_params *c = FCL_CPARAMS(bwg_params, &pl->cfg);
  fcl_config mma = {{0}}; /* the kernels of heads with inf or NaN */
  fcl_attention_bwd_mma_defaults(&ctx->info, &pl->cls, &mma);
  const int *m = mma.v; /* WARPS BLOCK_N MT STAGES KV_WARPS KV_BLOCK_N KV_STAGES */
  char opts[256];
  snprintf(opts, sizeof opts,
           " -DWARPS=%d -DBLOCK_N=%d -DMT=%d -DSTAGES=%d -DKV_WARPS=%d -DKV_BLOCK_N=%d "
           "-DKV_STAGES=%d%s",
           m[0], m[1], m[2], m[3], m[4], m[5], m[6],
           ctx->info.mma_emulate ? "" : " " FCL_SM90A_OPTION);
  const fcl_attention_bwd_kernels kn = {
      tops,
      opts,
      "wgmma",
      true, /* 16-byte copies only (cp.async into wgmma's tiles) */
      {{"fcl_attention_bwd_wgmma_dq", c->WQ_WARPS, 16 * c->WQ_WARPS, c->WQ_BLOCK_N,
        c->WQ_STAGES},
       {"fcl_attention_bwd_mma_dq", m[0], 16 * m[0] * m[2], m[1], m[3]}},
      {{"fcl_attention_bwd_wgmma_dkdv", c->WK_WARPS, 16 * c->WK_WARPS, c->WK_BLOCK_N,
        c->WK_STAGES},
       {"fcl_attention_bwd_mma_dkdv", m[4], 16 * m[4] * m[2], m[5], m[6]}}};
  return fcl_attention_bwd_mma_run(ctx, pl, p, &kn, fallback);
}
