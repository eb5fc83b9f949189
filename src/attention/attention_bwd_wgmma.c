/* The Hopper backward of attention: the tensor-core backward
 * (attention_bwd_mma.c: delta, dQ on mma.sync) with its dK/dV kernel on
 * wgmma (cl/attention/attention_bwd_wgmma_dkdv.cl, built for sm_90a through
 * core/ptx_retarget.c). Heads with inf or NaN in K, Q or dO run the
 * mma.sync dK/dV kernel of the other build. f16 and bf16, head dims among
 * wgmma's N, 16-byte rows, where core/wgmma_probe.c found the products
 * right; anything else, or a build that fails, goes to the next row. */
#include "attention/attention.h"

#include <stdio.h>

/* dQ's four, as the mma.sync row's first four, then the wgmma dK/dV
 * kernel's warps (4 or 8: 64 keys a warpgroup), queries per tile (an N of
 * cl/common/wgmma_ops.cl) and tiles in flight. The mma.sync dK/dV kernel
 * (heads with inf or NaN only) takes the mma.sync row's defaults. */
#define PARAMS(X) X(WARPS) X(BLOCK_N) X(MT) X(STAGES) X(WK_WARPS) X(WK_BLOCK_N) X(WK_STAGES)
FCL_PARAM_STRUCT(bwg_params, PARAMS);

/* The mma.sync row's configuration with this one's dQ. */
static void mma_config(const fcl_device_info *dev, const fcl_tuning_class *cls,
                       const fcl_config *cfg, fcl_config *mma) {
  *mma = *cfg;
  fcl_attention_bwd_mma_defaults(dev, cls, mma);
  for (int i = 0; i < 4; ++i) mma->v[i] = cfg->v[i];
}

static bool wgmma_n(int64_t n) {
  return n == 16 || n == 32 || n == 48 || n == 64 || n == 96 || n == 128;
}

/* K and V of the block, the stages' Q and dO tiles, each aligned to 1024
 * bytes (the kernel's arrays), and the emulation's scratch. */
static size_t local_bytes(const fcl_device_info *dev, const fcl_tuning_class *cls,
                          const bwg_params *c) {
  const size_t d = (size_t)cls->head_dim, dv = (size_t)cls->head_dim_v;
  const size_t keys = 16 * (size_t)c->WK_WARPS, n = (size_t)c->WK_STAGES * (size_t)c->WK_BLOCK_N;
#define R1K(x) (((x) + 1023) / 1024 * 1024)
  return R1K(2 * keys * d) + R1K(2 * keys * dv) + R1K(2 * n * d) + R1K(2 * n * dv) +
         (dev->mma_emulate ? 1024u * (size_t)c->WK_WARPS : 0);
#undef R1K
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  fcl_attention_bwd_mma_defaults(dev, cls, cfg); /* the first four */
  bwg_params *c = FCL_PARAMS(bwg_params, cfg);
  /* One warpgroup; the most queries a tile that 48 KiB takes, in two
   * stages where they fit (D = 64: 64 in two, D = 128: 32 in one). */
  c->WK_WARPS = 4, c->WK_BLOCK_N = 64, c->WK_STAGES = 2;
  while (local_bytes(dev, cls, c) > dev->local_mem && c->WK_BLOCK_N > 16) {
    if (c->WK_STAGES == 2 && c->WK_BLOCK_N <= 32) c->WK_STAGES = 1, c->WK_BLOCK_N = 64;
    else c->WK_BLOCK_N = c->WK_BLOCK_N == 48 ? 32 : c->WK_BLOCK_N - 16;
  }
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const bwg_params *c = FCL_CPARAMS(bwg_params, cfg);
  fcl_config mma;
  mma_config(dev, cls, cfg, &mma);
  const char *bad = fcl_attention_bwd_mma_bad(dev, cls, &mma);
  if (bad) {
  } else if ((c->WK_WARPS != 4 && c->WK_WARPS != 8) || !wgmma_n(c->WK_BLOCK_N) ||
             c->WK_STAGES < 1 || c->WK_STAGES > 2) {
    bad = "WK_WARPS 4 or 8, WK_BLOCK_N one of 16, 32, 48, 64, 96, 128, WK_STAGES 1 or 2";
  } else if (c->MT != 1) {
    bad = "MT 1 (the wgmma dK/dV kernel's warps own 16 keys)";
  } else if ((size_t)c->WK_WARPS * 32 > dev->max_wg) {
    bad = "work-group larger than the device allows (wgmma dK/dV)";
  } else if (local_bytes(dev, cls, c) > dev->local_mem) {
    bad = "local memory exceeded (wgmma dK/dV)";
  }
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

/* dQ's shape and the wgmma dK/dV kernel's; the mma.sync dK/dV kernel runs
 * only heads with inf or NaN and keeps its defaults. */
static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"WARPS", 4, {1, 2, 4, 8}};
  a[1] = (fcl_axis){"BLOCK_N", 8, {16, 32, 48, 64, 80, 96, 112, 128}};
  a[2] = (fcl_axis){"STAGES", 2, {1, 2}};
  a[3] = (fcl_axis){"WK_WARPS", 2, {4, 8}};
  a[4] = (fcl_axis){"WK_BLOCK_N", 6, {16, 32, 48, 64, 96, 128}};
  a[5] = (fcl_axis){"WK_STAGES", 2, {1, 2}};
  return 6;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  (void)cls;
  bwg_params *c = FCL_PARAMS(bwg_params, cfg);
  c->WARPS = v[0], c->BLOCK_N = v[1], c->STAGES = v[2];
  c->WK_WARPS = v[3], c->WK_BLOCK_N = v[4], c->WK_STAGES = v[5];
}

static const char *const files[] = {
    "attention/attention_abi.h",          "common/dtype.cl",
    "attention/attention_common.cl",      "common/mma_warp.cl",
    "common/mma_common.cl",               "common/wgmma_ops.cl",
    "common/wgmma.cl",                    "attention/attention_bwd_mma.cl",
    "attention/attention_bwd_mma_dq.cl",  "attention/attention_bwd_mma_dkdv.cl",
    "attention/attention_bwd_wgmma_dkdv.cl"};
const fcl_variant fcl_variant_attention_bwd_wgmma = {
    "attention_bwd_wgmma", FCL_TUNING_ATTENTION_BWD, files, (int)FCL_COUNT(files),
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, true, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, NULL, 0};

fcl_status fcl_attention_bwd_wgmma_applies(fcl_context *ctx, const fcl_attention_desc *d,
                                           fcl_dtype dtype, bool *yes) {
  *yes = false;
  if (dtype == FCL_F32 || !wgmma_n(d->head_dim) || !wgmma_n(d->head_dim_v)) return FCL_OK;
  /* Emulated, no device is a Hopper: only where an override names it (the
   * forced tests), as the wgmma forward. */
  if (ctx->info.mma_emulate && !fcl_tuning_overridden(ctx, &fcl_variant_attention_bwd_wgmma))
    return FCL_OK;
  fcl_status s = fcl_attention_bwd_mma_applies(ctx, d, dtype, yes);
  if (s || !*yes) return s;
  return fcl_wgmma_ready(ctx, dtype, yes);
}

fcl_status fcl_attention_bwd_wgmma_launch(fcl_context *ctx, const fcl_attention_plan *pl,
                                          const fcl_attention_problem *p, bool *fallback) {
  const bwg_params *c = FCL_CPARAMS(bwg_params, &pl->cfg);
  const size_t es = fcl_dtype_size(p->dtype);
  /* 16-byte copies only (cp.async into wgmma's tiles) */
  if (!fcl_tensor_aligned(p->q, es, p->varlen, 8) || !fcl_tensor_aligned(p->k, es, p->varlen, 8) ||
      !fcl_tensor_aligned(p->v, es, p->varlen, 8) ||
      !fcl_tensor_aligned(p->dout, es, p->varlen, 8) ||
      !fcl_tensor_aligned(p->o, es, p->varlen, 8)) {
    fcl_log(ctx, "attention backward: q, k, v, o or dout not in 16-byte rows for wgmma; the "
                 "next kernels");
    *fallback = true;
    return FCL_OK;
  }
  fcl_config mma;
  mma_config(&ctx->info, &pl->cls, &pl->cfg, &mma);
  const int kv_warps = mma.v[4], kv_n = mma.v[5], kv_stages = mma.v[6];
  char opts[128]; /* the mma.sync dK/dV kernel's shape, and sm_90a */
  snprintf(opts, sizeof opts, " -DKV_WARPS=%d -DKV_BLOCK_N=%d -DKV_STAGES=%d%s", kv_warps, kv_n,
           kv_stages, ctx->info.mma_emulate ? "" : " " FCL_SM90A_OPTION);
  const fcl_attention_bwd_kernels kn = {
      files,
      (int)FCL_COUNT(files),
      opts,
      "wgmma dK/dV",
      {{"fcl_attention_bwd_wgmma_dkdv", c->WK_WARPS, 16 * c->WK_WARPS, c->WK_BLOCK_N,
        c->WK_STAGES},
       {"fcl_attention_bwd_mma_dkdv", kv_warps, 16 * kv_warps * c->MT, kv_n, kv_stages}}};
  return fcl_attention_bwd_mma_run(ctx, pl, p, &kn, fallback);
}
