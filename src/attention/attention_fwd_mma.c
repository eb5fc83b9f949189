/* The NVIDIA tensor-core forward of attention: which problems it takes,
 * its descriptor and its launch. f16 and bf16 run
 * cl/attention/attention_fwd_mma.cl (m16n8k16), f32 runs
 * cl/attention/attention_fwd_tf32.cl (m16n8k8 in 3xTF32); one variant,
 * attention_fwd_mma, tuned per dtype. The probes that decide whether the
 * helpers work are in core/mma_probe.c. */
#include "attention/attention.h"

#include <stdio.h>

/* Warps, keys per tile, m16 tiles of query rows a warp (16-bit: 1 or 2,
 * two sharing every K and V fragment; f32: 1). */
#define PARAMS(X) X(WARPS) X(BLOCK_N) X(MT)
FCL_PARAM_STRUCT(mma_params, PARAMS);

/* Local memory: the kernels' tiles (attention_abi.h) and what the
 * emulation adds. */
static size_t local_bytes(const fcl_device_info *dev, const fcl_tuning_class *cls,
                          const mma_params *c) {
  const size_t emu = dev->mma_emulate ? 1024u * (size_t)c->WARPS : 0;
  const size_t d = (size_t)cls->head_dim, dv = (size_t)cls->head_dim_v;
  const size_t w = (size_t)c->WARPS * (size_t)c->MT, n = (size_t)c->BLOCK_N;
  return (cls->dtype == FCL_F32 ? FCL_TF32_FWD_LOCAL(d, dv, n)
                                : FCL_MMA16_FWD_LOCAL(d, dv, w, n)) + emu;
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  mma_params *c = FCL_PARAMS(mma_params, cfg);
  /* H100: 4 warps and 64 keys; 8 warps were 10-20% slower, 128 keys the
   * same. f32 tiles are twice the bytes: 64 keys up to head dim 64.
   * 16-bit up to head dim 64: two m16 tiles a warp (B4 H32 N4096 f16:
   * 236 -> 255 TFLOP/s, causal 216 -> 221). At D=128 two tiles (242+
   * registers) measured the same as one at that shape (fa-tune takes them
   * where they pay: 1.05x at 16384 tokens with 48 keys a tile). */
  c->WARPS = 4, c->BLOCK_N = 64, c->MT = 1;
  if (cls->dtype != FCL_F32 && cls->head_dim <= 64 && cls->head_dim_v <= 64) c->MT = 2;
  while (local_bytes(dev, cls, c) + 256 > dev->local_mem) {
    if (c->MT > 1) c->MT = 1;
    else if (c->BLOCK_N > 16) c->BLOCK_N /= 2;
    else if (c->WARPS > 1) c->WARPS /= 2;
    else break;
  }
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const mma_params *c = FCL_CPARAMS(mma_params, cfg);
  const bool f32 = cls->dtype == FCL_F32;
  const char *bad = NULL;
  if (c->WARPS < 1 || c->WARPS > 8 || c->BLOCK_N < 16 || c->BLOCK_N > 128 ||
      (!f32 && c->BLOCK_N % 16) || c->MT < 1 || c->MT > (f32 ? 1 : 2))
    bad = "WARPS in 1..8, BLOCK_N a multiple of 16 in 16..128, MT 1 or 2 (f32: 1)";
  else if ((size_t)c->WARPS * 32 > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (f32 && c->BLOCK_N % 8)
    bad = "BLOCK_N a multiple of 8";
  else if (local_bytes(dev, cls, c) + 256 > dev->local_mem)
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"WARPS", 4, {1, 2, 4, 8}};
  a[1] = (fcl_axis){"BLOCK_N", 8, {16, 32, 48, 64, 80, 96, 112, 128}};
  if (cls->dtype == FCL_F32) return 2; /* MT stays 1 */
  a[2] = (fcl_axis){"MT", 2, {1, 2}};
  return 3;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  mma_params *c = FCL_PARAMS(mma_params, cfg);
  c->WARPS = v[0], c->BLOCK_N = v[1], c->MT = cls->dtype == FCL_F32 ? 1 : v[2];
}

/* Both forwards (16-bit and f32) guard the rows, with the flags' scan of
 * 3xTF32's; a launch builds one. */
static const char *const tops16[] = {"attention/attention_fwd_mma.cl", NULL};
static const char *const tops32[] = {"attention/attention_fwd_tf32.cl", NULL};
const fcl_variant fcl_variant_attention_fwd_mma = {
    "attention_fwd_mma", FCL_TUNING_ATTENTION_FWD,
    FCL_TOPS("attention/attention_fwd_mma.cl", "attention/attention_fwd_tf32.cl",
             "attention/nonfinite_flags.cl"),
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, true, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, NULL, 0};

fcl_status fcl_attention_mma_applies(fcl_context *ctx, const fcl_attention_desc *d,
                                     fcl_dtype dtype, bool *yes) {
  *yes = false;
  /* Head dims above 128 would not fit the registers; loop budgets (which
   * split the keys) are the portable kernels'. Every tensor-core row takes
   * dropout. */
  if (d->head_dim > 128 || d->head_dim_v > 128 || ctx->info.loop_budget > 0) return FCL_OK;
  return fcl_mma_ready(ctx, dtype, yes);
}

fcl_status fcl_attention_fwd_mma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_attention_problem *p = problem;
  bool yes = false;
  /* f32 in 3xTF32 unless FCL_F32_TENSOR_CORES=0 (on the H100 1.6x to 1.75x
   * the portable kernel, with its accuracy). */
  fcl_status s = p->dtype == FCL_F32 && !ctx->opt.f32_tensor_cores
                     ? FCL_OK
                     : fcl_attention_mma_applies(ctx, p->d, p->dtype, &yes);
  *fit = fcl_fit_if(yes);
  return s;
}

fcl_status fcl_attention_fwd_mma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback) {
  const fcl_attention_problem *p = problem;
  const fcl_attention_desc *d = p->d;
  const mma_params *c = FCL_CPARAMS(mma_params, &pl->cfg);
  const bool f32 = p->dtype == FCL_F32;
  const size_t es = fcl_dtype_size(p->dtype);
  /* 16-byte copies: 8 elements of 16 bits or 4 of f32 */
  const int64_t vw = f32 ? 4 : 8;
  const int vec = d->head_dim % vw == 0 && d->head_dim_v % vw == 0 &&
                  fcl_tensor_aligned(p->q, es, p->varlen, vw) &&
                  fcl_tensor_aligned(p->k, es, p->varlen, vw) &&
                  fcl_tensor_aligned(p->v, es, p->varlen, vw);
  const int general = d->softcap > 0 || d->alibi_slopes || !(p->sc.qk_scale > 0);
  /* Built without and with the handling of inf and NaN in masked products
   * (nonfinite_flags.c), and in 3xTF32 the scans that choose between them,
   * before anything is enqueued. */
  cl_kernel kern[2], scan[2] = {NULL, NULL};
  for (int nf = 0; nf < 2; ++nf) {
    char opts[640];
    snprintf(opts, sizeof opts, "%s -DMMA_VEC=%d -DMMA_GENERAL=%d -DFCL_NONFINITE=%d",
             pl->options, vec, general, nf);
    fcl_status s = fcl_get_kernel(ctx, f32 ? tops32 : tops16, opts,
                                  f32 ? "fcl_attention_fwd_tf32" : "fcl_attention_fwd_mma",
                                  &kern[nf]);
    if (s == FCL_OK && nf == 1 && f32) s = fcl_nonfinite_kernel(ctx, p->dtype, scan);
    if (s) return fcl_tuning_unbuilt(ctx, pl->row->variant, s, "the tensor-core forward", fallback);
  }
  /* 3xTF32's split of inf is NaN even where visible: K and V flagged per
   * kv head before. In f16 and bf16 only V's masked products matter, which
   * the kernel finds in its own sums. */
  const fcl_nf_input nfin[2] = {
      {p->v, p->varlen, p->total_k, d->seqlen_k, d->heads_kv, d->head_dim_v, 1},
      {p->k, p->varlen, p->total_k, d->seqlen_k, d->heads_kv, d->head_dim, 1}};
  const size_t wg = (size_t)c->WARPS * 32, block_m = (size_t)c->WARPS * 16 * c->MT;
  const size_t nqb = ((size_t)d->seqlen_q + block_m - 1) / block_m;
  size_t global[3] = {nqb * wg, 1, (size_t)(d->batch * d->heads_q)};
  size_t local[3] = {wg, 1, 1};
  fcl_log(ctx, "attention forward: tensor cores%s, %d warps of %d rows, %d keys per tile%s%s",
          f32 ? " (3xTF32)" : "", c->WARPS, 16 * c->MT, c->BLOCK_N, vec ? ", cp.async" : "",
          general ? ", general scores" : "");
  return fcl_attention_fwd_nf_run(ctx, p, kern, scan, nfin, f32 ? 2 : 0, global, local,
                                  "enqueueing attention forward (mma)");
}
