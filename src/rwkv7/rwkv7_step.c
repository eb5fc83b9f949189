/* The RWKV7 step variant: the forward of short sequences (decoding, one
 * token a call), a work-group per (sequence, head, block of value columns)
 * with the state in VC-wide vectors, read once and written once
 * (cl/rwkv7/rwkv7_step.cl). What its kernel takes (local memory, loop
 * iterations; the rest of its descriptor is rwkv/rwkv_step.c's) and its
 * launches: up to RW_STEP_MAX_T positions each, the state carried between
 * them. */
#include "rwkv7/rwkv7.h"

typedef fcl_rwkv_step_params params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Local memory: rw7_colsum's buffers (rwkv7_common.cl) for BV columns. */
static size_t step_bytes(int K, const fcl_config *cfg) {
  const params *c = FCL_CPARAMS(params, cfg);
  (void)K;
  const int bv = c->VS * c->VC;
  return c->KS > 1 ? 4 * (size_t)(c->KS + ceil_div(c->KS, 8)) * 2 * bv : 0;
}

/* Loop iterations of one work-item, counted as llvmpipe does (every
 * iteration of every loop), generously. */
static long step_iterations(int K, const fcl_config *cfg) {
  const params *c = FCL_CPARAMS(params, cfg);
  const long kr = ceil_div(K, c->KS), tm = RW_STEP_MAX_T, bv = c->VS * c->VC;
  const long colsum = c->KS > 1 ? 2 * c->VC + ceil_div(ceil_div(c->KS, 8) * 2 * bv, c->VS * c->KS) * 9 +
                                      2 * c->VC * (1 + ceil_div(c->KS, 8))
                                : 0;
  return 2 * kr * (1 + c->VC) + tm * (1 + kr + c->VC) + (tm + 1) * (1 + 2 * c->VC + kr * (1 + 2 * c->VC) + colsum + c->VC);
}

static const fcl_rwkv_block_costs costs = {step_bytes, step_iterations, 128};

/* Four rows a work-item on GPUs (RWKV6's step measured faster with one;
 * this kernel's column sums are not yet measured that way). */
static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  fcl_rwkv_step_choose(&costs, dev, cls, 4, cfg);
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  return fcl_rwkv_step_valid(&costs, dev, cls, cfg, why, why_size);
}

const fcl_variant fcl_variant_rwkv7_step = FCL_RWKV_STEP_VARIANT(
    "rwkv7_step", FCL_TUNING_RWKV7_RECURRENT, "rwkv7/rwkv7_step.cl", defaults, valid);

fcl_status fcl_rwkv7_step_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                  const void *problem, bool *fallback) {
  const fcl_rwkv7_problem *p = problem;
  const fcl_rwkv7_desc *d = p->d;
  const fcl_rwkv7_args *t = &p->a;
  const params *c = FCL_CPARAMS(params, &pl->cfg);
  cl_kernel ks;
  fcl_status s;
  (void)fallback;
  if ((s = fcl_get_kernel(ctx, pl->cls.variant->tops, pl->options, "fcl_rwkv7_fwd_step", &ks)))
    return s;
  fcl_rwkv_segments sg;
  if ((s = fcl_rwkv_segments_of(ctx, d->seqlen, fcl_rwkv_step_positions(d->seqlen),
                                p->state_bytes, t->h0, t->ht, t->r->buffer, false, &sg)))
    return s;
  const cl_int base = fcl_rwkv_flags(p->varlen, d->reverse);
  const size_t wg = (size_t)c->KS * c->VS, bv = (size_t)c->VS * c->VC;
  const size_t g[3] = {((size_t)d->head_dim_v + bv - 1) / bv * wg, (size_t)(d->batch * d->heads), 1};
  const size_t l[3] = {wg, 1, 1};
  for (int64_t si = 0; si < sg.count; ++si) {
    fcl_rwkv_segment sgi = fcl_rwkv_segment_at(&sg, si);
    cl_int flags = base | (sgi.reads ? RW_H0 : 0) | (sgi.writes ? RW_HT : 0);
    fcl_args a = FCL_ARGS(ks);
    fcl_rwkv7_input_args(&a, p, flags, &sgi);
    FCL_ARG(&a, sgi.in); FCL_ARG(&a, t->o->buffer); fcl_arg_tensor(&a, t->o);
    FCL_ARG(&a, sgi.out);
    if ((s = fcl_launch(ctx, ks, &a, g, l, "enqueueing rwkv7 step forward"))) return s;
  }
  return FCL_OK;
}
