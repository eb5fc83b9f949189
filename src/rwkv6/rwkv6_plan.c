/* The RWKV6 plan: the algorithm a call asks for (or AUTO's choice), the
 * tables of the forward and the backward (tuning/variant_table.c walks
 * them), what their rows make of a problem and add to its build options.
 * fcl_rwkv6_config() reports exactly what the calls run. */
#include "rwkv6/rwkv6.h"

#include <stdio.h>

static void class_of(const void *problem, const fcl_variant *v, fcl_tuning_class *cls) {
  const fcl_rwkv6_problem *p = problem;
  cls->variant = v;
  cls->dtype = p->dtype;
  cls->head_dim = (int)p->d->head_dim_k;
  cls->head_dim_v = (int)p->d->head_dim_v;
  cls->causal = 0;
  cls->bucket = fcl_seqlen_bucket(p->d->seqlen);
}

/* AUTO's choice of chunked or recurrent, for the forward or the backward:
 * a variant fa-tune overrides, then the faster of the two where fa-tune
 * measured both for this class (the chunked one's best variant, portable
 * or tensor cores). Untuned: chunked where its tensor-core variants apply,
 * from T = 256 (four chunks) for the backward and T = 512 for the forward
 * (f32, split into bf16 pairs: from T = 256 at K >= 128, past T = 4096
 * below), else recurrent: on the H100 the chunked backward is many times
 * faster than the recurrent one at every shape measured, the chunked
 * forward faster from those lengths on, and the recurrent f32 forward
 * faster at K=V=64 up to T = 4096 (untuned fa-bench, chunked against
 * recurrent: docs/defaults.md, "RWKV6: AUTO's choice", which has the
 * figures, their log and the command). */
static bool auto_chunked(fcl_context *ctx, const fcl_rwkv6_problem *p, bool backward) {
  const fcl_rwkv6_desc *d = p->d;
  const fcl_dtype dtype = p->dtype;
  const fcl_variant *vr = backward ? &fcl_variant_rwkv6_bwd : &fcl_variant_rwkv6_recurrent;
  const fcl_variant *vc = backward ? &fcl_variant_rwkv6_bwd_chunked : &fcl_variant_rwkv6_chunked;
  const fcl_variant *vm = backward ? &fcl_variant_rwkv6_bwd_chunked_mma
                                  : &fcl_variant_rwkv6_chunked_mma;
  const bool oc = fcl_tuning_overridden(ctx, vc) || fcl_tuning_overridden(ctx, vm);
  if (oc || fcl_tuning_overridden(ctx, vr)) return oc; /* fa-tune's */
  fcl_tuning_class rc, cc, cm;
  class_of(p, vr, &rc);
  class_of(p, vc, &cc);
  class_of(p, vm, &cm);
  const double tr = fcl_tuning_stored_time(ctx, &rc);
  const double tc = fcl_tuning_stored_time(ctx, &cc), tm = fcl_tuning_stored_time(ctx, &cm);
  const double tch = tm > 0 && (tc <= 0 || tm < tc) ? tm : tc;
  if (tr > 0 && tch > 0) return tch < tr;
  bool mma = false;
  const int64_t from = backward                ? 256
                       : dtype != FCL_F32        ? 512
                       : d->head_dim_k >= 128    ? 256
                                                 : 4097;
  if (d->seqlen < from || fcl_rwkv6_chunk_mma_applies(ctx, d, dtype, &mma))
    return false;
  return mma;
}

/* The algorithm the call asks for: the descriptor's, else
 * $FCL_RWKV6_ALGORITHM (the context's option); and whether the chunked
 * kernels run. */
static void describe(fcl_context *ctx, fcl_rwkv6_problem *p, bool backward) {
  const int opt = ctx->opt.rwkv6_algorithm;
  p->algorithm = p->d->algorithm != FCL_RWKV6_AUTO ? p->d->algorithm
                 : opt == 2                          ? FCL_RWKV6_CHUNKED
                 : opt                               ? FCL_RWKV6_RECURRENT
                                                     : FCL_RWKV6_AUTO;
  p->chunked = p->algorithm == FCL_RWKV6_AUTO ? auto_chunked(ctx, p, backward)
                                              : p->algorithm == FCL_RWKV6_CHUNKED;
}

/* The step kernel (rwkv6_step.c) for AUTO's forward of at most
 * RW_STEP_MAX_T positions (one launch; varlen too, whose seqlen bounds
 * every sequence). Forced (fa-tune), it runs wherever the descriptor does
 * not ask for the chunked kernels, whatever the context's option, at any
 * length: launches of up to RW_STEP_MAX_T positions with the state
 * carried between them. */
static fcl_status step_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_rwkv6_problem *p = problem;
  (void)ctx;
  *fit = p->d->algorithm == FCL_RWKV6_CHUNKED ? FCL_FIT_BARRED
         : p->algorithm == FCL_RWKV6_AUTO && p->d->seqlen <= RW_STEP_MAX_T ? FCL_FIT_YES
                                                                            : FCL_FIT_FORCED;
  return FCL_OK;
}

/* The chunked kernels on tensor cores where they apply, unless fa-tune
 * overrides the portable ones (portable). Where the chunked kernels do not
 * run, neither does this row: a forced chunked variant makes AUTO choose
 * them (auto_chunked). */
static fcl_status chunked_mma_applies(fcl_context *ctx, const fcl_rwkv6_problem *p,
                                      const fcl_variant *portable, fcl_fit *fit) {
  bool mma = false;
  fcl_status s = FCL_OK;
  if (p->chunked && !fcl_tuning_overridden(ctx, portable))
    s = fcl_rwkv6_chunk_mma_applies(ctx, p->d, p->dtype, &mma);
  *fit = p->algorithm == FCL_RWKV6_RECURRENT ? FCL_FIT_BARRED : fcl_fit_if(mma);
  return s;
}

static fcl_status fwd_chunked_mma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  return chunked_mma_applies(ctx, problem, &fcl_variant_rwkv6_chunked, fit);
}

static fcl_status bwd_chunked_mma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  return chunked_mma_applies(ctx, problem, &fcl_variant_rwkv6_bwd_chunked, fit);
}

static fcl_status chunked_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_rwkv6_problem *p = problem;
  (void)ctx;
  *fit = p->algorithm == FCL_RWKV6_RECURRENT ? FCL_FIT_BARRED : fcl_fit_if(p->chunked);
  return FCL_OK;
}

static fcl_status recurrent_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_rwkv6_problem *p = problem;
  (void)ctx;
  *fit = p->algorithm == FCL_RWKV6_CHUNKED ? FCL_FIT_BARRED : fcl_fit_if(!p->chunked);
  return FCL_OK;
}

/* Each block of BVB value columns keeps its own partial dr, dk and dw,
 * so a tuned small BVB can need more than one buffer may hold where the
 * defaults fit (BVB=1 at 128 sequences of 16384, K=V=64: 32 GiB a buffer
 * on the H100, which allows 20 GiB): the defaults then. */
static void bwd_refit(fcl_context *ctx, fcl_variant_plan *pl, const void *problem) {
  const fcl_rwkv6_problem *p = problem;
  const fcl_variant *v = pl->cls.variant;
  const int K = (int)p->d->head_dim_k, V = (int)p->d->head_dim_v;
  const fcl_rwkv6_bwd_params *c = FCL_CPARAMS(fcl_rwkv6_bwd_params, &pl->cfg);
  if (!ctx->info.max_alloc ||
      fcl_bytes((V + c->BVB - 1) / c->BVB, p->ntok, p->d->heads, K, sizeof(float)) <=
          ctx->info.max_alloc)
    return;
  fcl_config def;
  v->defaults(&ctx->info, &pl->cls, &def);
  if (FCL_CPARAMS(fcl_rwkv6_bwd_params, &def)->BVB > c->BVB) {
    char was[64];
    fcl_params_format(v, &pl->cfg, was, sizeof was);
    snprintf(pl->from, sizeof pl->from,
             "built-in defaults (%s needs partial gradients over one buffer's limit here)", was);
    fcl_log(ctx, "rwkv6 backward: %s", pl->from);
    pl->cfg = def;
  }
}

/* Build options: loop unrolling hints (not on CPUs), the step kernel's
 * positions a launch, the tensor cores' options. */
static void unrolled(const fcl_context *ctx, const void *problem, fcl_build_extra *x) {
  (void)problem;
  x->defs[x->ndefs++] = (fcl_define){"FCL_UNROLL_HINTS", !ctx->info.is_cpu};
}

static void step_options(const fcl_context *ctx, const void *problem, fcl_build_extra *x) {
  unrolled(ctx, problem, x);
  const int64_t seqlen = ((const fcl_rwkv6_problem *)problem)->d->seqlen;
  x->defs[x->ndefs++] = (fcl_define){"RW_STEPS", fcl_rwkv_step_positions(seqlen)};
}

static void mma_options(const fcl_context *ctx, const void *problem, fcl_build_extra *x) {
  unrolled(ctx, problem, x);
  x->tail = fcl_mma_build_options(
      ctx, fcl_rwkv6_mma_operand(((const fcl_rwkv6_problem *)problem)->dtype));
}

/* Forward: the step kernel, the chunked kernels (tensor cores, then
 * portable), the fused recurrent kernel. */
static const fcl_variant_row fwd_rows[] = {
    {.variant = &fcl_variant_rwkv6_step, .applies = step_applies, .options = step_options,
     .launch = fcl_rwkv6_step_forward},
    {.variant = &fcl_variant_rwkv6_chunked_mma, .applies = fwd_chunked_mma_applies,
     .options = mma_options, .launch = fcl_rwkv6_chunk_mma_forward},
    {.variant = &fcl_variant_rwkv6_chunked, .applies = chunked_applies, .options = unrolled,
     .launch = fcl_rwkv6_chunked_forward},
    {.variant = &fcl_variant_rwkv6_recurrent, .applies = recurrent_applies,
     .options = unrolled, .launch = fcl_rwkv6_recurrent_forward},
};
const fcl_variant_table fcl_rwkv6_fwd_table = {"rwkv6 forward", fwd_rows,
                                               (int)FCL_COUNT(fwd_rows), class_of};

/* Backward: the chunked kernels (tensor cores, then portable), the fused
 * recurrent kernels. */
static const fcl_variant_row bwd_rows[] = {
    {.variant = &fcl_variant_rwkv6_bwd_chunked_mma, .applies = bwd_chunked_mma_applies,
     .options = mma_options, .launch = fcl_rwkv6_chunk_mma_backward},
    {.variant = &fcl_variant_rwkv6_bwd_chunked, .applies = chunked_applies,
     .options = unrolled, .launch = fcl_rwkv6_chunked_backward},
    {.variant = &fcl_variant_rwkv6_bwd, .applies = recurrent_applies, .refit = bwd_refit,
     .launch = fcl_rwkv6_recurrent_backward},
};
const fcl_variant_table fcl_rwkv6_bwd_table = {"rwkv6 backward", bwd_rows,
                                               (int)FCL_COUNT(bwd_rows), class_of};

void fcl_rwkv6_problem_of(const fcl_rwkv6_desc *d, fcl_dtype dtype, fcl_rwkv6_problem *p) {
  *p = (fcl_rwkv6_problem){.d = d, .varlen = d->cu_seqlens != NULL,
                           .ntok = d->batch * d->seqlen, .dtype = dtype};
}

fcl_status fcl_rwkv6_plan_make(fcl_context *ctx, fcl_rwkv6_problem *p, bool backward,
                               fcl_variant_plan *pl) {
  describe(ctx, p, backward);
  return fcl_variant_plan_make(ctx, backward ? &fcl_rwkv6_bwd_table : &fcl_rwkv6_fwd_table, p,
                               0, pl);
}

fcl_status fcl_rwkv6_run(fcl_context *ctx, fcl_rwkv6_problem *p, bool backward) {
  describe(ctx, p, backward);
  return fcl_variant_run(ctx, backward ? &fcl_rwkv6_bwd_table : &fcl_rwkv6_fwd_table, p);
}

fcl_status fcl_rwkv6_config(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype,
                            int backward, fcl_config_info *out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_rwkv6_desc own;
  fcl_status s;
  if ((s = fcl_rwkv6_desc_in(ctx, &d, &own)) || (s = fcl_check_rwkv6_desc(ctx, d))) return s;
  if (!out) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "out: is NULL");
  if (fcl_dtype_size(dtype) == 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "dtype: is %d, not a fcl_dtype",
                    (int)dtype);
  fcl_rwkv6_problem p;
  fcl_variant_plan pl;
  fcl_rwkv6_problem_of(d, dtype, &p);
  if ((s = fcl_device_probe(ctx)) || (s = fcl_rwkv6_plan_make(ctx, &p, backward != 0, &pl)))
    return s;
  fcl_config_info_fill(out, &pl.cls, &pl.cfg, pl.from);
  return FCL_OK;
}
