/* The attention plan: the table of kernel variants of each pass, in order
 * of preference (tuning/variant_table.c walks them), and the class of a
 * problem. fcl_attention_config() reports exactly what the calls run. */
#include "attention/attention.h"

/* Build options: FCL_DROPOUT where the call drops (a build of its own, so
 * a call without dropout runs the kernels as they were); the tensor-core
 * rows' options. */
static void dropout_options(const fcl_context *ctx, const void *problem, fcl_build_extra *x) {
  (void)ctx;
  if (((const fcl_attention_problem *)problem)->d->dropout_p > 0.0f)
    x->defs[x->ndefs++] = (fcl_define){"FCL_DROPOUT", 1};
}
static void cpu_options(const fcl_context *ctx, const void *problem, fcl_build_extra *x) {
  dropout_options(ctx, problem, x);
  fcl_attention_fwd_cpu_options(ctx, problem, x);
}
static void mma_options(const fcl_context *ctx, const void *problem, fcl_build_extra *x) {
  dropout_options(ctx, problem, x);
  x->tail = fcl_mma_build_options(ctx, ((const fcl_attention_problem *)problem)->dtype);
}

static void class_of(const void *problem, const fcl_variant *v, fcl_tuning_class *cls) {
  const fcl_attention_problem *p = problem;
  fcl_attention_class(p->d, p->dtype, v, cls);
}

/* Forward: few query rows against many keys (the KV-cache kernels, on
 * tensor cores, then portable), Hopper's wgmma (sm_90, f16 and bf16), the
 * tensor cores' mma.sync (NVIDIA), the CPU kernel (CPUs but llvmpipe), the
 * portable kernel (everywhere). */
static const fcl_variant_row fwd_rows[] = {
    {.variant = &fcl_variant_attention_decode_mma,
     .applies = fcl_attention_fwd_decode_mma_applies, .skip_invalid = true,
     .launch = fcl_attention_fwd_decode_mma_launch},
    {.variant = &fcl_variant_attention_decode, .applies = fcl_attention_fwd_decode_applies,
     .skip_invalid = true, .launch = fcl_attention_fwd_decode_launch},
    {.variant = &fcl_variant_attention_fwd_wgmma, .applies = fcl_attention_fwd_wgmma_applies,
     .skip_invalid = true, .options = mma_options, .launch = fcl_attention_fwd_wgmma_launch},
    {.variant = &fcl_variant_attention_fwd_mma, .applies = fcl_attention_fwd_mma_applies,
     .skip_invalid = true, .options = mma_options, .launch = fcl_attention_fwd_mma_launch},
    {.variant = &fcl_variant_attention_fwd_cpu, .applies = fcl_attention_fwd_cpu_applies,
     .options = cpu_options, .launch = fcl_attention_fwd_cpu_launch},
    {.variant = &fcl_variant_attention_fwd, .options = dropout_options,
     .launch = fcl_attention_fwd_launch},
};
const fcl_variant_table fcl_attention_fwd_table = {"attention forward", fwd_rows,
                                                   (int)FCL_COUNT(fwd_rows), class_of};

/* Backward: Hopper's wgmma for dK/dV (sm_90, f16 and bf16), the tensor
 * cores' mma.sync (f16, bf16), the portable kernels. */
static const fcl_variant_row bwd_rows[] = {
    {.variant = &fcl_variant_attention_bwd_wgmma, .applies = fcl_attention_bwd_wgmma_applies,
     .skip_invalid = true, .options = mma_options, .launch = fcl_attention_bwd_wgmma_launch},
    {.variant = &fcl_variant_attention_bwd_mma, .applies = fcl_attention_bwd_mma_applies,
     .skip_invalid = true, .options = mma_options, .launch = fcl_attention_bwd_mma_launch},
    {.variant = &fcl_variant_attention_bwd, .options = dropout_options,
     .launch = fcl_attention_bwd_launch},
};
const fcl_variant_table fcl_attention_bwd_table = {"attention backward", bwd_rows,
                                                   (int)FCL_COUNT(bwd_rows), class_of};

void fcl_attention_class(const fcl_attention_desc *d, fcl_dtype dtype, const fcl_variant *v,
                         fcl_tuning_class *cls) {
  cls->variant = v;
  cls->dtype = dtype;
  cls->head_dim = (int)d->head_dim;
  cls->head_dim_v = (int)d->head_dim_v;
  cls->causal = v->causal_classes && d->causal != 0;
  cls->bucket = fcl_seqlen_bucket(d->seqlen_q > d->seqlen_k ? d->seqlen_q : d->seqlen_k);
}

fcl_status fcl_attention_plan_make(fcl_context *ctx, const fcl_attention_problem *p,
                                   bool backward, fcl_variant_plan *pl) {
  return fcl_variant_plan_make(ctx, backward ? &fcl_attention_bwd_table
                                             : &fcl_attention_fwd_table,
                               p, 0, pl);
}

fcl_status fcl_attention_config(fcl_context *ctx, const fcl_attention_desc *d,
                                fcl_dtype dtype, int backward, fcl_config_info *out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_attention_desc own;
  fcl_status s;
  if ((s = fcl_attention_desc_in(ctx, &d, &own)) || (s = fcl_check_attention_desc(ctx, d)))
    return s;
  if (!out) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "out: is NULL");
  if (fcl_dtype_size(dtype) == 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "dtype: is %d, not a fcl_dtype",
                    (int)dtype);
  const fcl_attention_problem p = {.d = d, .dtype = dtype};
  fcl_variant_plan pl;
  if ((s = fcl_device_probe(ctx)) || (s = fcl_attention_plan_make(ctx, &p, backward != 0, &pl)))
    return s;
  fcl_config_info_fill(out, &pl.cls, &pl.cfg, pl.from);
  return FCL_OK;
}
