/* The RWKV7 plan: the tables of the forward and the backward
 * (tuning/variant_table.c walks them), what their rows make of a problem
 * and add to its build options. fcl_rwkv7_config() reports exactly what
 * the calls run. The forward: the step kernel for short sequences, the
 * chunked kernels where decay_lower_bound allows them (output on tensor
 * cores, then portable), then the fused recurrent kernel; the backward:
 * the fused recurrent kernels. */
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
  const int64_t seqlen = ((const fcl_rwkv7_problem *)problem)->d->seqlen;
  x->defs[x->ndefs++] = (fcl_define){"RW_STEPS", fcl_rwkv_step_positions(seqlen)};
}

/* Untuned, AUTO's chunked forward from this length (a guess: not yet
 * measured against the recurrent kernel on any device). */
#define RW7_CHUNKED_FROM 256

/* The chunked forward only where decay_lower_bound allows it (with none,
 * every w <= 0 must stay exact: not even fa-tune's override runs it);
 * there AUTO's where fa-tune measured it faster than the recurrent kernel
 * for this class or, untimed, from RW7_CHUNKED_FROM positions; else only
 * forced. */
static fcl_status chunked_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_rwkv7_problem *p = problem;
  if (!fcl_rwkv7_chunk_of_bound(p->d->decay_lower_bound)) {
    *fit = FCL_FIT_NO;
    return FCL_OK;
  }
  fcl_tuning_class rc, cc;
  class_of(p, &fcl_variant_rwkv7_recurrent, &rc);
  class_of(p, &fcl_variant_rwkv7_chunked, &cc);
  const double tr = fcl_tuning_stored_time(ctx, &rc), tc = fcl_tuning_stored_time(ctx, &cc);
  const bool chunked = tr > 0 && tc > 0 ? tc < tr : p->d->seqlen >= RW7_CHUNKED_FROM;
  *fit = chunked ? FCL_FIT_YES : FCL_FIT_FORCED;
  return FCL_OK;
}

/* Chunks no longer than the bound allows (a class's configuration does
 * not know the bound). */
static void chunked_refit(fcl_context *ctx, fcl_variant_plan *pl, const void *problem) {
  const fcl_rwkv7_problem *p = problem;
  fcl_rwkv7_chunk_params *c = FCL_PARAMS(fcl_rwkv7_chunk_params, &pl->cfg);
  const int most = fcl_rwkv7_chunk_of_bound(p->d->decay_lower_bound);
  if (c->TC > most) {
    fcl_log(ctx, "rwkv7 chunked forward: chunks of %d, the most decay_lower_bound %g allows (not %d)",
            most, (double)p->d->decay_lower_bound, c->TC);
    c->TC = most;
  }
}

/* The chunked forward with its output on tensor cores where chunked_applies
 * would take the portable one and the device and problem allow. */
static fcl_status chunked_mma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  fcl_status s = chunked_applies(ctx, problem, fit);
  return s ? s : fcl_rwkv7_chunk_mma_applies(ctx, problem, fit);
}

static void mma_options(const fcl_context *ctx, const void *problem, fcl_build_extra *x) {
  unrolled(ctx, problem, x);
  x->tail = fcl_mma_build_options(ctx, ((const fcl_rwkv7_problem *)problem)->dtype);
}

/* Forward: the step kernel, the chunked kernels (tensor cores, then
 * portable), the fused recurrent kernel. */
static const fcl_variant_row fwd_rows[] = {
    {.variant = &fcl_variant_rwkv7_step, .applies = step_applies, .options = step_options,
     .launch = fcl_rwkv7_step_forward},
    {.variant = &fcl_variant_rwkv7_chunked_mma, .applies = chunked_mma_applies,
     .refit = chunked_refit, .options = mma_options, .launch = fcl_rwkv7_chunk_mma_forward},
    {.variant = &fcl_variant_rwkv7_chunked, .applies = chunked_applies, .refit = chunked_refit,
     .options = unrolled, .launch = fcl_rwkv7_chunked_forward},
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
