/* The attention forward on CPUs (cl/attention/attention_fwd_cpu.cl): where
 * it applies, its descriptor and its launch. */
#include "attention/attention.h"

#include <stdio.h>

/* Query rows per block (vector lanes), query blocks per work-item, keys per
 * block and per chunk, output columns per work-item, work-items per group. */
#define PARAMS(X) X(ROWS) X(QB) X(BLOCK_N) X(KEY_CHUNK) X(BLOCK_DV) X(WG_SIZE)
FCL_PARAM_STRUCT(cpu_params, PARAMS);

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Private floats of one work-item: Q transposed and the accumulators of its
 * query blocks, and the staged key chunk. Beyond this the arrays spill out
 * of the L2 cache (and PoCL's work-item stacks grow). */
#define PRIVATE_FLOATS 49152

static long private_floats(const cpu_params *c, int head_dim) {
  return ((long)c->QB * c->ROWS + c->KEY_CHUNK) * (head_dim + c->BLOCK_DV);
}

fcl_status fcl_attention_fwd_cpu_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  (void)problem;
  /* llvmpipe stops work-items after a loop budget, which the portable
   * kernel's split-keys path respects. */
  *fit = fcl_fit_if(ctx->opt.cpu_kernel && ctx->info.is_cpu && !ctx->info.is_llvmpipe &&
                    ctx->info.loop_budget <= 0);
  return FCL_OK;
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  cpu_params *c = FCL_PARAMS(cpu_params, cfg);
  /* Two native vectors of rows per key (one with 512-bit vectors) and
   * BLOCK_N keys: 2 x 6 accumulators leave 4 of AVX2's 16 registers for Q
   * and the broadcast key; AVX-512 has 32 registers. */
  const int width = dev->native_float_width ? (int)dev->native_float_width : 8;
  c->ROWS = width >= 8 ? 16 : 8;
  c->BLOCK_N = width >= 16 ? 8 : 6;
  c->KEY_CHUNK = 4 * c->BLOCK_N;
  c->BLOCK_DV = cls->head_dim_v;
  c->WG_SIZE = 1;
  /* Up to 8 query blocks share each key chunk while it is in the cache. */
  c->QB = 8;
  while (c->QB > 1 && private_floats(c, cls->head_dim) > PRIVATE_FLOATS) c->QB /= 2;
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const cpu_params *c = FCL_CPARAMS(cpu_params, cfg);
  const char *bad = NULL;
  if (c->ROWS != 4 && c->ROWS != 8 && c->ROWS != 16)
    bad = "ROWS is not 4, 8 or 16";
  else if (c->QB < 1 || c->QB > 16)
    bad = "QB out of 1..16";
  else if (c->BLOCK_N < 1 || c->BLOCK_N > 16)
    bad = "BLOCK_N out of 1..16";
  else if (c->KEY_CHUNK < c->BLOCK_N || c->KEY_CHUNK % c->BLOCK_N || c->KEY_CHUNK > 256)
    bad = "KEY_CHUNK not a multiple of BLOCK_N up to 256";
  else if (c->BLOCK_DV < 1 || c->BLOCK_DV > cls->head_dim_v)
    bad = "BLOCK_DV out of 1..head_dim_v";
  else if (c->WG_SIZE < 1 || (size_t)c->WG_SIZE > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (private_floats(c, cls->head_dim) > 2 * PRIVATE_FLOATS)
    bad = "private arrays too large";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"ROWS", 3, {4, 8, 16}};
  a[1] = (fcl_axis){"QB", 5, {1, 2, 4, 8, 16}};
  a[2] = (fcl_axis){"BLOCK_N", 5, {4, 6, 8, 12, 16}};
  a[3] = (fcl_axis){"BLOCKS_PER_CHUNK", 3, {2, 4, 8}};
  a[4] = (fcl_axis){"V_SLICES", 2, {1, 2}};
  return 5;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  cpu_params *c = FCL_PARAMS(cpu_params, cfg);
  c->ROWS = v[0], c->QB = v[1], c->BLOCK_N = v[2];
  c->KEY_CHUNK = v[2] * v[3];
  c->BLOCK_DV = ceil_div(cls->head_dim_v, v[4]);
  c->WG_SIZE = 1;
}

const fcl_variant fcl_variant_attention_fwd_cpu = {
    "attention_fwd_cpu", FCL_TUNING_ATTENTION_FWD, FCL_TOPS("attention/attention_fwd_cpu.cl"),
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, true, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, NULL, 0};

/* PoCL warns about the vector code it cannot vectorise further. */
void fcl_attention_fwd_cpu_options(const fcl_context *ctx, const void *problem,
                                   fcl_build_extra *x) {
  (void)ctx, (void)problem;
  x->tail = "-w";
}

fcl_status fcl_attention_fwd_cpu_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback) {
  const fcl_attention_problem *p = problem;
  const fcl_attention_desc *d = p->d;
  const cpu_params *c = FCL_CPARAMS(cpu_params, &pl->cfg);
  const fcl_variant *v = pl->cls.variant;
  (void)fallback;
  cl_kernel kern;
  fcl_status s;
  if ((s = fcl_get_kernel(ctx, v->tops, pl->options, "fcl_attention_fwd_cpu",
                          &kern)))
    return s;
  /* Fewer query blocks per work-item where there would be under 8
   * work-items per compute unit, so that every core gets a share (not
   * when fa-tune or a test asks for these parameters). */
  const int64_t blocks = (d->seqlen_q + c->ROWS - 1) / c->ROWS;
  const int64_t want = 8 * (int64_t)(ctx->info.compute_units ? ctx->info.compute_units : 1);
  cl_int qbs = c->QB;
  while (qbs > 1 && !fcl_tuning_overridden(ctx, v) &&
         d->batch * d->heads_q * ((blocks + qbs - 1) / qbs) < want)
    qbs /= 2;
  const cl_int nitems = (cl_int)((blocks + qbs - 1) / qbs);

  fcl_args a = FCL_ARGS(kern);
  fcl_attention_fwd_args(&a, p, fcl_attention_flags(p));
  FCL_ARG(&a, qbs);
  FCL_ARG(&a, nitems);
  const size_t wg = (size_t)c->WG_SIZE;
  const size_t nslice = (size_t)ceil_div((int)d->head_dim_v, c->BLOCK_DV);
  size_t global[3] = {((size_t)nitems + wg - 1) / wg * wg, nslice,
                      (size_t)(d->batch * d->heads_q)};
  size_t local[3] = {wg, 1, 1};
  return fcl_launch(ctx, kern, &a, global, local, "enqueueing attention forward (CPU)");
}
