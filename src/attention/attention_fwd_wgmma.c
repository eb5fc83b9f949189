/* The Hopper forward of attention: cl/attention/attention_fwd_wgmma.cl,
 * f16 and bf16 on wgmma (warpgroup products, built for sm_90a through
 * core/ptx_retarget.c). It takes the problems of the mma.sync forward
 * (attention_fwd_mma.c) whose head dims and strides suit wgmma's tiles,
 * where core/wgmma_probe.c found the products right; anything else, or a
 * build that fails, goes to the next row. */
#include "attention/attention.h"

#include <stdio.h>

/* Warps (1 to 4 warpgroups), keys per tile (an N of cl/common/wgmma_ops.cl),
 * and the operands of S in local memory: 2 (Q and K) or 1 (K; Q in
 * registers). */
#define PARAMS(X) X(WARPS) X(BLOCK_N) X(LOCAL_OPS)
FCL_PARAM_STRUCT(wgmma_params, PARAMS);

/* Q's tile (unless in registers), K's and V's two tiles each, of 16-bit
 * elements, unpadded (attention_fwd_wgmma.cl); nothing else, so the whole
 * of the device's local memory is theirs (48 KiB on the H100: D = 64 with
 * 8 warps and 64 keys, D = 128 with 4 warps and 32, or 48 with Q in
 * registers). */
static size_t local_bytes(const fcl_tuning_class *cls, const wgmma_params *c) {
  const size_t d = (size_t)cls->head_dim, dv = (size_t)cls->head_dim_v, n = (size_t)c->BLOCK_N;
  const size_t q_rows = c->LOCAL_OPS == 2 ? 16 * (size_t)c->WARPS : 0;
  return 2 * (q_rows * d + 2 * n * d + 2 * n * dv);
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  wgmma_params *c = FCL_PARAMS(wgmma_params, cfg);
  /* fa-tune's best on the H100 at N = 4096 (D = 128: 32 keys, as 48 KiB
   * allows). Causal D = 64 up to N = 1024 (buckets 0 and 1) takes 4 warps:
   * 1.08x the 8 in fa-tune at N = 1024, B*H = 128; f16 / bf16 at B16 H32
   * 0.342 / 0.338 -> 0.326 / 0.310 ms (docs/data/h100_attention_wgmma_log.txt,
   * calls 48 and 52). */
  /* Above D = 64, Q in registers leaves the key tiles its 16 KiB: at D =
   * 128, 48 keys instead of 32, B4 H32 N4096 2.99 -> 2.70 ms f16 (causal
   * 1.75 -> 1.51), bf16 2.79 -> 2.67 (1.66 -> 1.64), on the H200 (call 84);
   * at B16 N1024 within 2% either way. At D = 64 (8 warps, 64 keys) it was
   * 4-13% slower. */
  const bool short_causal = cls->causal && cls->bucket <= 1;
  c->WARPS = cls->head_dim <= 64 && !short_causal ? 8 : 4, c->BLOCK_N = 64;
  c->LOCAL_OPS = cls->head_dim > 64 ? 1 : 2;
  while (local_bytes(cls, c) > dev->local_mem && c->BLOCK_N > 16)
    c->BLOCK_N = c->BLOCK_N == 48 ? 32 : c->BLOCK_N - 16;
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const wgmma_params *c = FCL_CPARAMS(wgmma_params, cfg);
  const char *bad = NULL;
  if (c->WARPS % 4 || c->WARPS < 4 || c->WARPS > 16 || !fcl_wgmma_n(c->BLOCK_N) ||
      c->LOCAL_OPS < 1 || c->LOCAL_OPS > 2)
    bad = "WARPS 4, 8, 12 or 16, BLOCK_N one of 16, 32, 48, 64, 96, 128, LOCAL_OPS 1 or 2";
  else if ((size_t)c->WARPS * 32 > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (local_bytes(cls, c) > dev->local_mem)
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"WARPS", 4, {4, 8, 12, 16}};
  a[1] = (fcl_axis){"BLOCK_N", 6, {16, 32, 48, 64, 96, 128}};
  a[2] = (fcl_axis){"LOCAL_OPS", 2, {1, 2}};
  return 3;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  (void)cls;
  wgmma_params *c = FCL_PARAMS(wgmma_params, cfg);
  c->WARPS = v[0], c->BLOCK_N = v[1], c->LOCAL_OPS = v[2];
}

static const char *const tops[] = {"attention/attention_fwd_wgmma.cl", NULL};
const fcl_variant fcl_variant_attention_fwd_wgmma = {
    "attention_fwd_wgmma", FCL_TUNING_ATTENTION_FWD, tops,
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, true, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, NULL, 0};

fcl_status fcl_attention_fwd_wgmma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_attention_problem *p = problem;
  const fcl_attention_desc *d = p->d;
  bool yes = false;
  fcl_status s = FCL_OK;
  *fit = FCL_FIT_NO;
  if (p->dtype == FCL_F32 || d->head_dim % 16 || !fcl_wgmma_n(d->head_dim_v)) return FCL_OK;
  /* Emulated, no device is a Hopper: only where an override names it (the
   * forced tests); the emulated forward stays mma.sync's. */
  if (ctx->info.mma_emulate && !fcl_tuning_overridden(ctx, &fcl_variant_attention_fwd_wgmma))
    return FCL_OK;
  if (!(s = fcl_attention_mma_applies(ctx, d, p->dtype, &yes)) && yes)
    s = fcl_wgmma_ready(ctx, p->dtype, &yes);
  *fit = fcl_fit_if(yes);
  return s;
}

fcl_status fcl_attention_fwd_wgmma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                          const void *problem, bool *fallback) {
  const fcl_attention_problem *p = problem;
  const fcl_attention_desc *d = p->d;
  const wgmma_params *c = FCL_CPARAMS(wgmma_params, &pl->cfg);
  const size_t es = fcl_dtype_size(p->dtype);
  /* 16-byte copies only (cp.async into core matrices) */
  if (!fcl_tensor_aligned(p->q, es, p->varlen, 8) || !fcl_tensor_aligned(p->k, es, p->varlen, 8) ||
      !fcl_tensor_aligned(p->v, es, p->varlen, 8)) {
    fcl_log(ctx, "attention forward: q, k or v not in 16-byte rows for wgmma; the next kernel");
    *fallback = true;
    return FCL_OK;
  }
  const int general = d->softcap > 0 || d->alibi_slopes || !(p->sc.qk_scale > 0);
  cl_kernel kern[2];
  for (int nf = 0; nf < 2; ++nf) {
    char opts[640];
    /* The mma helpers' options are the row's tail (fcl_mma_build_options);
     * unemulated the program is retargeted to sm_90a (core/ptx_retarget.c).
     * With eight warps the common build keeps registers for two work-groups
     * per SM (128 a work-item of sm_90's 64K); with four the cap would be
     * above ptxas's 255 and is left out (ptxas then schedules otherwise:
     * D=128 measured 3-9% slower with it). The build for inf/NaN runs few
     * work-groups. */
    const bool cap = !ctx->info.mma_emulate && !nf && c->WARPS > 4;
    snprintf(opts, sizeof opts, "%s -DMMA_GENERAL=%d -DFCL_NONFINITE=%d%s%s", pl->options, general,
             nf, ctx->info.mma_emulate ? "" : " " FCL_SM90A_OPTION,
             cap ? " " FCL_SM90A_GROUPS_OPTION "2" : "");
    const fcl_status s = fcl_get_kernel(ctx, tops, opts,
                                        "fcl_attention_fwd_wgmma", &kern[nf]);
    if (s) return fcl_tuning_unbuilt(ctx, pl->row->variant, s, "the wgmma forward", fallback);
  }
  const size_t wg = (size_t)c->WARPS * 32, block_m = (size_t)c->WARPS * 16;
  const size_t nqb = ((size_t)d->seqlen_q + block_m - 1) / block_m;
  size_t global[3] = {nqb * wg, 1, (size_t)(d->batch * d->heads_q)};
  size_t local[3] = {wg, 1, 1};
  fcl_log(ctx, "attention forward: wgmma, %d warpgroup(s) of 64 rows, %d keys per tile%s",
          c->WARPS / 4, c->BLOCK_N, general ? ", general scores" : "");
  /* V's inf and NaN in masked products: the kernel finds them in its own
   * sums (nonfinite_flags.c), no scan. */
  return fcl_attention_fwd_nf_run(ctx, p, kern, NULL, NULL, 0, global, local,
                                  "enqueueing attention forward (wgmma)");
}
