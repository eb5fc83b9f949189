/* The decode variant on NVIDIA's tensor cores
 * (cl/attention/kvcache_decode_mma.cl): its descriptor (parameters,
 * defaults, checks, search space), where it applies (f16 and bf16, head
 * dims that its permuted 16-byte loads cover, 16-byte aligned caches) and
 * its launch, through the decode's runner (splits, append, attention with
 * the splits' merge). */
#include "attention/attention.h"

#include <stdio.h>

/* Work-group size (warps of 32), 16-key steps a warp iteration, and the
 * splits' choice as the portable decode makes it: work-groups a compute
 * unit in a wave (WAVES; WAVES_Q where both caches hold a byte a value or
 * less: q8_0, q4_0, fp8), fewest keys a split. */
#define PARAMS(X) X(WG) X(KSUB) X(WAVES) X(SPLIT_KEYS) X(WAVES_Q)
FCL_PARAM_STRUCT(decode_mma_params, PARAMS);
/* The splits' three shape the launch alone: one program serves them all. */
#define HOST_PARAMS (1u << 2 | 1u << 3 | 1u << 4) /* WAVES, SPLIT_KEYS, WAVES_Q */

#define MMA_ROWS 16 /* a tile's rows: one m16 tile of S */

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  (void)dev, (void)cls;
  decode_mma_params *c = FCL_PARAMS(decode_mma_params, cfg);
  /* Splits chosen for two work-groups an SM (flash-attn's count too),
   * though three fit (150 registers a work-item at D=128): at 32768 cached
   * keys, B1 Hkv8, 32 splits of 16 blocks took 56.7 us on the H100 where
   * the 47 of 11 that three give took 67.0; 1024 and 4096 keys split the
   * same either way. Splits of 64 keys and up: at 1024 keys that is 16
   * splits a head, which short contexts need to fill the GPU
   * (docs/defaults.md). A cache of a byte a value or less holds half the
   * bytes or fewer in flight a work-group, and wants more of them: three
   * an SM (H200, B1 32768 keys: q8_0 45.5 us against 49.8 with two, fp8
   * E4M3 47.1 against 52.9; B8 8192: 71.4 against 83.0, 75.9 against
   * 90.2), where three slow f16 down (57.4 against 44.4 us). */
  c->WG = 128, c->KSUB = 1, c->WAVES = 2, c->SPLIT_KEYS = 64, c->WAVES_Q = 3;
}

/* The kernel's local memory: q_s and out_s (f32 rows; out_s a slice a
 * warp where those fit in 4096 floats), qa_s (Q's A fragments, 16 bytes a
 * lane a k-step), the warps' and the rows' m and l, the split merge's join
 * of its parts (at most WG * 10 floats) and the emulation's scratch (1 KiB
 * a warp) where the device emulates. */
static size_t local_bytes(const fcl_device_info *dev, const fcl_tuning_class *cls, int wg) {
  const size_t d = (size_t)cls->head_dim, dv = (size_t)cls->head_dim_v, warps = (size_t)wg / 32;
  const size_t out = MMA_ROWS * dv > 4096 ? MMA_ROWS * dv : 4096;
  return 4 * (MMA_ROWS * (d + 4) + out + 2 * 16 * warps + 2 * MMA_ROWS + 10 * (size_t)wg) +
         16 * 32 * (d / 16) + (dev->mma_emulate ? 1024 * warps : 0);
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const decode_mma_params *c = FCL_CPARAMS(decode_mma_params, cfg);
  const char *bad = NULL;
  if (c->WG < 32 || c->WG > 512 || c->WG % 32 || c->KSUB < 1 || c->KSUB > 4 || c->WAVES < 1 ||
      c->WAVES_Q < 1 || c->SPLIT_KEYS < 16)
    bad = "a size out of range (WG whole warps up to 512, KSUB 1 to 4)";
  else if ((size_t)c->WG > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (cls->head_dim % 32 || cls->head_dim_v % 64 || cls->head_dim > 256 ||
           cls->head_dim_v > 256)
    bad = "head dims not multiples of 32 (K) and 64 (V) up to 256";
  else if (local_bytes(dev, cls, c->WG) + 512 > dev->local_mem)
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"WG", 3, {64, 128, 256}};
  a[1] = (fcl_axis){"KSUB", 2, {1, 2}};
  a[2] = (fcl_axis){"WAVES", 4, {1, 2, 3, 4}};
  a[3] = (fcl_axis){"SPLIT_KEYS", 4, {64, 128, 256, 512}};
  return 4;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  (void)cls;
  decode_mma_params *c = FCL_PARAMS(decode_mma_params, cfg);
  c->WG = v[0], c->KSUB = v[1], c->WAVES = v[2], c->SPLIT_KEYS = v[3];
}

/* The program holds the append beside the kernel. */
const fcl_variant fcl_variant_attention_decode_mma = {
    "attention_decode_mma", FCL_TUNING_ATTENTION_DECODE,
    FCL_TOPS("attention/kvcache_decode_mma.cl"),
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, false, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, NULL, HOST_PARAMS};

bool fcl_kvcache_mma_suits(fcl_context *ctx, fcl_dtype dtype, int64_t head_dim,
                           int64_t head_dim_v) {
  bool ready = false;
  if (dtype == FCL_F32 || head_dim % 32 || head_dim_v % 64 || head_dim > 256 ||
      head_dim_v > 256 || ctx->info.loop_budget > 0)
    return false;
  if (fcl_mma_ready(ctx, dtype, &ready) != FCL_OK) fcl_clear_error(ctx), ready = false;
  return ready;
}

/* Paged caches with pages of a multiple of 16 tokens (a 16-key step lies
 * in one page); others (pages of 1, say) run on the portable kernel, and
 * so does one row a kv head (MHA decode: 40 us against 46 at 4096 keys on
 * the H100, where the portable kernel's work-items all read). */
fcl_status fcl_kvcache_mma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_kvcache_problem *p = problem;
  *fit = fcl_fit_if(fcl_kvcache_mma_suits(ctx, p->dtype, p->d->head_dim, p->d->head_dim_v) &&
                    fcl_kvcache_vector_width(p) == 8 &&
                    (!p->paged || p->d->page_size % 16 == 0) &&
                    p->d->heads_q / p->d->heads_kv * p->d->seqlen_q >= 2);
  return FCL_OK;
}

fcl_status fcl_kvcache_mma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                  const void *problem, bool *fallback) {
  const fcl_kvcache_problem *p = problem;
  const fcl_tuning_class *cls = &pl->cls;
  const fcl_config *cfg = &pl->cfg;
  const decode_mma_params *c = FCL_CPARAMS(decode_mma_params, cfg);
  (void)fallback;
  const int rows = fcl_kvcache_tile_rows(MMA_ROWS, p->d);
  bool ptx;
  fcl_status s = fcl_kvcache_ptx(ctx, &ptx);
  if (s) return s;
  const fcl_define extra[] = {{"ROWS", rows},         {"VEC", 8},
                              {"FCL_UNROLL_HINTS", 1}, {"KV_PART_PTX", ptx},
                              {"KV_K_FMT", (int)p->k_fmt}, {"KV_V_FMT", (int)p->v_fmt},
                              {"KV_APPEND_FUSED", fcl_kvcache_fused_append(MMA_ROWS, p)},
                              {"KV_K_LANE", fcl_kvcache_lane_blocks(p->k_cache, p->d->head_dim)},
                              {"KV_V_LANE", fcl_kvcache_lane_blocks(p->v_cache, p->d->head_dim_v)}};
  char options[512];
  fcl_build_options(cls, cfg, extra, (int)FCL_COUNT(extra),
                    fcl_mma_build_options(ctx, p->dtype), options, sizeof options);
  const bool narrow = p->k_fmt >= FCL_Q8_0 && p->v_fmt >= FCL_Q8_0;
  const fcl_kv_shape sh = {"fcl_kv_decode_mma", c->WG, c->WG / 32 * 16 * c->KSUB, rows,
                           MMA_ROWS, narrow ? c->WAVES_Q : c->WAVES, c->SPLIT_KEYS};
  return fcl_kvcache_run(ctx, cls->variant, options, &sh, p);
}

/* The forward row: the portable decode row's problems, where the tensor
 * cores take them; caches whose views are not 16-byte aligned fall back. */
fcl_status fcl_attention_fwd_decode_mma_applies(fcl_context *ctx, const void *problem,
                                                fcl_fit *fit) {
  const fcl_attention_problem *p = problem;
  const fcl_attention_desc *d = p->d;
  fcl_status s = fcl_attention_fwd_decode_applies(ctx, problem, fit);
  if (s == FCL_OK && *fit == FCL_FIT_YES)
    *fit = fcl_fit_if(d->heads_q / d->heads_kv * d->seqlen_q >= 2 &&
                      fcl_kvcache_mma_suits(ctx, p->dtype, d->head_dim, d->head_dim_v));
  return s;
}

fcl_status fcl_attention_fwd_decode_mma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                               const void *problem, bool *fallback) {
  fcl_kvcache_desc d;
  fcl_kvcache_problem kp;
  fcl_kvcache_from_forward(problem, &d, &kp);
  if (fcl_kvcache_vector_width(&kp) != 8) return *fallback = true, FCL_OK;
  return fcl_kvcache_mma_launch(ctx, pl, &kp, fallback);
}
