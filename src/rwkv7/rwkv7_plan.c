/* The RWKV7 plan: the tables of the forward and the backward
 * (tuning/variant_table.c walks them), what their rows make of a problem
 * and add to its build options. fcl_rwkv7_config() reports exactly what
 * the calls run. The forward: the step kernel for short sequences, then
 * the fused recurrent kernel; the backward: the fused recurrent kernels. A
 * chunked form is new rows ahead of the recurrent ones. */
#include "rwkv7/rwkv7.h"

static void class_of(const void *problem, const fcl_variant *v, fcl_tuning_class *cls) {
  const fcl_rwkv7_problem *p = problem;
  cls->variant = v;
  cls->dtype = p->dtype;
  cls->head_dim = (int)p->d->head_dim_k;
  cls->head_dim_v = (int)p->d->head_dim_v;
  cls->causal = 0;
  cls->bucket = fcl_seqlen_bucket(p->d->seqlen);
}

/* Build options: loop unrolling hints (not on CPUs). */
static void unrolled(const fcl_context *ctx, const void *problem, fcl_build_extra *x) {
  (void)problem;
  x->defs[x->ndefs++] = (fcl_define){"FCL_UNROLL_HINTS", !ctx->info.is_cpu};
}

/* The step kernel (rwkv7_step.c) for the forward of at most
 * RW_STEP_MAX_T positions (one launch; varlen too, whose seqlen bounds
 * every sequence); forced (fa-tune), at any length, in launches of up to
 * RW_STEP_MAX_T positions, the state carried between them. */
static fcl_status step_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_rwkv7_problem *p = problem;
  (void)ctx;
  *fit = p->d->seqlen <= RW_STEP_MAX_T ? FCL_FIT_YES : FCL_FIT_FORCED;
  return FCL_OK;
}

static void step_options(const fcl_context *ctx, const void *problem, fcl_build_extra *x) {
  unrolled(ctx, problem, x);
  x->defs[x->ndefs++] =
      (fcl_define){"RW_STEPS", fcl_rwkv7_step_positions(((const fcl_rwkv7_problem *)problem)->d)};
}

/* Forward: the step kernel, the fused recurrent kernel. */
static const fcl_variant_row fwd_rows[] = {
    {.variant = &fcl_variant_rwkv7_step, .applies = step_applies, .options = step_options,
     .launch = fcl_rwkv7_step_forward},
    {.variant = &fcl_variant_rwkv7_recurrent, .options = unrolled,
     .launch = fcl_rwkv7_recurrent_forward},
};
const fcl_variant_table fcl_rwkv7_fwd_table = {"rwkv7 forward", fwd_rows,
                                               (int)FCL_COUNT(fwd_rows), class_of};

static const fcl_variant_row bwd_rows[] = {
    {.variant = &fcl_variant_rwkv7_bwd, .options = unrolled,
     .launch = fcl_rwkv7_recurrent_backward},
};
const fcl_variant_table fcl_rwkv7_bwd_table = {"rwkv7 backward", bwd_rows,
                                               (int)FCL_COUNT(bwd_rows), class_of};

void fcl_rwkv7_problem_of(const fcl_rwkv7_desc *d, fcl_dtype dtype, fcl_rwkv7_problem *p) {
  *p = (fcl_rwkv7_problem){.d = d, .varlen = d->cu_seqlens != NULL,
                           .ntok = d->batch * d->seqlen, .dtype = dtype};
}

fcl_status fcl_rwkv7_plan_make(fcl_context *ctx, fcl_rwkv7_problem *p, bool backward,
                               fcl_variant_plan *pl) {
  return fcl_variant_plan_make(ctx, backward ? &fcl_rwkv7_bwd_table : &fcl_rwkv7_fwd_table, p,
                               0, pl);
}

fcl_status fcl_rwkv7_run(fcl_context *ctx, fcl_rwkv7_problem *p, bool backward) {
  return fcl_variant_run(ctx, backward ? &fcl_rwkv7_bwd_table : &fcl_rwkv7_fwd_table, p);
}
