/* The RWKV6 step variant: the forward of short sequences (decoding, one
 * token a call), a work-group per (sequence, head, block of value columns)
 * with the state in VC-wide vectors (cl/rwkv6/rwkv6_step.cl). What its
 * kernel takes (local memory, loop iterations; the rest of its descriptor
 * is rwkv/rwkv_step.c's) and its launches: up to RW_STEP_MAX_T positions
 * each, the state carried between them. */
#include "rwkv6/rwkv6.h"


typedef fcl_rwkv_step_params params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Local memory: the partial sums of every step, row group and column. */
static size_t step_bytes(int K, const fcl_config *cfg) {
  const params *c = FCL_CPARAMS(params, cfg);
  (void)K;
  return c->KS > 1 ? 4 * (size_t)RW_STEP_MAX_T * c->KS * c->VS * c->VC : 0;
}

/* Loop iterations of one work-item, counted as llvmpipe does (every
 * iteration of every loop). */
static long step_iterations(int K, const fcl_config *cfg) {
  const params *c = FCL_CPARAMS(params, cfg);
  const long kr = ceil_div(K, c->KS), tm = RW_STEP_MAX_T, cols = tm * (1 + c->VC);
  long levels = 0;
  for (int w = 1; w < c->KS; w *= 2) ++levels;
  return 3 * kr * (1 + c->VC) + cols + kr * (1 + cols) + cols * (1 + levels) + cols;
}

static const fcl_rwkv_block_costs costs = {step_bytes, step_iterations, 128};

/* One row a work-item on GPUs: B1 H32 K=V=64 bf16, a step of 32 layers
 * back to back on the H100, 3.49 us a call against 4.14 with four rows
 * (docs/defaults.md). */
static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  fcl_rwkv_step_choose(&costs, dev, cls, 1, cfg);
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  return fcl_rwkv_step_valid(&costs, dev, cls, cfg, why, why_size);
}

const fcl_variant fcl_variant_rwkv6_step = FCL_RWKV_STEP_VARIANT(
    "rwkv6_step", FCL_TUNING_RWKV6_RECURRENT, "rwkv6/rwkv6_step.cl", defaults, valid);

fcl_status fcl_rwkv6_step_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                  const void *problem, bool *fallback) {
  const fcl_rwkv6_problem *p = problem;
  const fcl_rwkv6_desc *d = p->d;
  const fcl_rwkv6_args *a = &p->a;
  (void)fallback;
  const params *c = FCL_CPARAMS(params, &pl->cfg);
  const fcl_variant *kd = pl->cls.variant;
  cl_kernel ks;
  fcl_status s = fcl_get_kernel(ctx, kd->tops, pl->options, "fcl_rwkv6_fwd_step",
                                &ks);
  if (s) return s;
  fcl_rwkv_segments sg;
  if ((s = fcl_rwkv_segments_of(ctx, d->seqlen, fcl_rwkv_step_positions(d->seqlen),
                                p->state_bytes, a->h0, a->ht, a->r->buffer, false, &sg)))
    return s;

  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads;
  cl_float scale = fcl_rwkv_scale(d->scale, d->head_dim_k);
  const cl_int base_flags = fcl_rwkv_flags(p->varlen, d->reverse);
  cl_mem cu = p->varlen ? d->cu_seqlens : a->r->buffer;
  const size_t wg = (size_t)c->KS * (size_t)c->VS, bv = (size_t)c->VS * (size_t)c->VC;
  const size_t global[3] = {((size_t)d->head_dim_v + bv - 1) / bv * wg,
                            (size_t)(d->batch * d->heads), 1};
  const size_t local[3] = {wg, 1, 1};
  for (int64_t si = 0; si < sg.count; ++si) {
    fcl_rwkv_segment sgi = fcl_rwkv_segment_at(&sg, si);
    cl_int flags = base_flags | (sgi.reads ? RW_H0 : 0) | (sgi.writes ? RW_HT : 0);
    fcl_args g = FCL_ARGS(ks);
    FCL_ARG(&g, a->r->buffer); FCL_ARG(&g, a->k->buffer); FCL_ARG(&g, a->v->buffer);
    FCL_ARG(&g, a->w->buffer); FCL_ARG(&g, a->u); FCL_ARG(&g, sgi.in);
    FCL_ARG(&g, a->o->buffer); FCL_ARG(&g, sgi.out); FCL_ARG(&g, cu);
    fcl_arg_tensor(&g, a->r); fcl_arg_tensor(&g, a->k); fcl_arg_tensor(&g, a->v);
    fcl_arg_tensor(&g, a->w); fcl_arg_tensor(&g, a->o);
    FCL_ARG(&g, seqlen); FCL_ARG(&g, heads); FCL_ARG(&g, scale);
    FCL_ARG(&g, flags); FCL_ARG(&g, sgi.begin);
    if ((s = fcl_launch(ctx, ks, &g, global, local, "enqueueing rwkv6 step forward"))) return s;
  }
  return FCL_OK;
}
