/* The RWKV6 plan: step, recurrent or chunked, the configuration
 * of the chosen variant and its build options. fcl_rwkv6_config() reports
 * exactly what the calls run. */
#include "rwkv6/rwkv6.h"

#include <stdio.h>

static void rwkv6_class(const fcl_rwkv6_desc *d, fcl_dtype dtype, const fcl_variant *v,
                        fcl_tuning_class *cls) {
  cls->variant = v;
  cls->dtype = dtype;
  cls->head_dim = (int)d->head_dim_k;
  cls->head_dim_v = (int)d->head_dim_v;
  cls->causal = 0;
  cls->bucket = fcl_seqlen_bucket(d->seqlen);
}

/* Chunked or recurrent, for the forward or the backward: the descriptor,
 * $FCL_RWKV6_ALGORITHM, a variant fa-tune overrides, then the faster of
 * the two where fa-tune measured both for this class (the chunked one's
 * best variant, portable or tensor cores). Untuned: chunked where its
 * tensor-core variants apply, from T = 256 (four chunks) for the
 * backward and T = 512 for the forward (f32, split into bf16 pairs: from
 * T = 256 at K >= 128, past T = 4096 below), else recurrent. What the
 * H100 measured (fa-bench, untuned), chunked against recurrent, ms:
 *   bf16 B8 H32 T4096 K=V=64:   forward 1.96 / 2.2, backward 4.9 / 46;
 *   bf16 B32 H16 T512 K=V=128:  forward 1.11 / 2.24,   backward 3.0 / 55;
 *   bf16 B2 H16 T16384 K=V=128: forward 2.42 / 10.9,   backward 6.9 / 119;
 *   f32  B8 H32 T4096 K=V=64:   backward 7.6 / 45 (2026-11-26).
 * The f32 forward on 2026-11-27: K=V=64 B32 H32 T1024 2.34 / 1.54, B8
 * H32 T4096 2.36 / 2.13, B4 H32 T8192 2.54 / 3.65; K=V=128 B64 H16 T256
 * 1.81 / 2.21, B32 H16 T512 1.81 / 2.23, B8 H16 T2048 1.80 / 2.23, B2 H16
 * T16384 3.98 / 10.5. */
static bool use_chunked(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype,
                        bool backward) {
  if (d->algorithm != FCL_RWKV6_AUTO) return d->algorithm == FCL_RWKV6_CHUNKED;
  if (ctx->opt.rwkv6_algorithm) return ctx->opt.rwkv6_algorithm == 2;
  const fcl_variant *vr = backward ? &fcl_variant_rwkv6_bwd : &fcl_variant_rwkv6_recurrent;
  const fcl_variant *vc = backward ? &fcl_variant_rwkv6_bwd_chunked : &fcl_variant_rwkv6_chunked;
  const fcl_variant *vm = backward ? &fcl_variant_rwkv6_bwd_chunked_mma
                                  : &fcl_variant_rwkv6_chunked_mma;
  const bool oc = fcl_tuning_overridden(ctx, vc) || fcl_tuning_overridden(ctx, vm);
  if (oc || fcl_tuning_overridden(ctx, vr)) return oc; /* fa-tune's */
  fcl_tuning_class rc, cc, cm;
  rwkv6_class(d, dtype, vr, &rc);
  rwkv6_class(d, dtype, vc, &cc);
  rwkv6_class(d, dtype, vm, &cm);
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

/* The step kernel (rwkv6_step.c) for the forward of sequences of at most
 * RW_STEP_MAX_T positions (one launch; varlen too, whose seqlen bounds
 * every sequence) under AUTO, unless $FCL_RWKV6_ALGORITHM or fa-tune's
 * override of another forward variant decides. RECURRENT keeps the fused
 * recurrent kernel. Overridden itself (fa-tune), it runs wherever the
 * forward is not chunked, at any length: launches of up to
 * RW_STEP_MAX_T positions with the state carried between them. */
static bool use_step(fcl_context *ctx, const fcl_rwkv6_desc *d, bool backward) {
  if (backward) return false;
  if (fcl_tuning_overridden(ctx, &fcl_variant_rwkv6_step))
    return d->algorithm != FCL_RWKV6_CHUNKED;
  if (d->algorithm != FCL_RWKV6_AUTO || ctx->opt.rwkv6_algorithm) return false;
  if (fcl_tuning_overridden(ctx, &fcl_variant_rwkv6_recurrent) ||
      fcl_tuning_overridden(ctx, &fcl_variant_rwkv6_chunked) ||
      fcl_tuning_overridden(ctx, &fcl_variant_rwkv6_chunked_mma))
    return false;
  return d->seqlen <= RW_STEP_MAX_T;
}

/* The chunked variant: on tensor cores where they apply (unless fa-tune
 * overrides the portable one), else portable. */
static fcl_status chunked_variant(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype,
                                  bool backward, const fcl_variant **v) {
  const fcl_variant *portable = backward ? &fcl_variant_rwkv6_bwd_chunked
                                         : &fcl_variant_rwkv6_chunked;
  bool mma = false;
  fcl_status s = fcl_tuning_overridden(ctx, portable)
                     ? FCL_OK
                     : fcl_rwkv6_chunk_mma_applies(ctx, d, dtype, &mma);
  *v = !mma ? portable : backward ? &fcl_variant_rwkv6_bwd_chunked_mma
                                  : &fcl_variant_rwkv6_chunked_mma;
  return s;
}

fcl_status fcl_rwkv6_plan_make(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype,
                               bool backward, const fcl_rwkv6_problem *p, fcl_rwkv6_plan *pl) {
  if (use_step(ctx, d, backward))
    return fcl_rwkv6_plan_variant(ctx, d, dtype, &fcl_variant_rwkv6_step, p, pl);
  const bool chunked = use_chunked(ctx, d, dtype, backward);
  const fcl_variant *v = backward ? &fcl_variant_rwkv6_bwd : &fcl_variant_rwkv6_recurrent;
  fcl_status s0;
  if (chunked && (s0 = chunked_variant(ctx, d, dtype, backward, &v))) return s0;
  return fcl_rwkv6_plan_variant(ctx, d, dtype, v, p, pl);
}

fcl_status fcl_rwkv6_plan_variant(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype,
                                  const fcl_variant *v, const fcl_rwkv6_problem *p,
                                  fcl_rwkv6_plan *pl) {
  rwkv6_class(d, dtype, v, &pl->cls);
  fcl_status s = fcl_tuning_choose(ctx, &pl->cls, &pl->cfg, pl->from, sizeof pl->from);
  if (s != FCL_OK) return s;
  const int K = (int)d->head_dim_k, V = (int)d->head_dim_v;
  const int64_t ntok = p ? p->ntok : d->batch * d->seqlen;
  if (v == &fcl_variant_rwkv6_bwd) {
    /* Each block of BVB value columns keeps its own partial dr, dk and dw,
     * so a tuned small BVB can need more than one buffer may hold where the
     * defaults fit (BVB=1 at 128 sequences of 16384, K=V=64: 32 GiB a
     * buffer on the H100, which allows 20 GiB): the defaults then. */
    const fcl_rwkv6_bwd_params *c = FCL_CPARAMS(fcl_rwkv6_bwd_params, &pl->cfg);
    if (ctx->info.max_alloc &&
        fcl_bytes((V + c->BVB - 1) / c->BVB, ntok, d->heads, K, sizeof(float)) >
            ctx->info.max_alloc) {
      fcl_config def;
      v->defaults(&ctx->info, &pl->cls, &def);
      if (FCL_CPARAMS(fcl_rwkv6_bwd_params, &def)->BVB > c->BVB) {
        char was[64];
        fcl_params_format(v, &pl->cfg, was, sizeof was);
        snprintf(pl->from, sizeof pl->from,
                 "built-in defaults (%s needs partial gradients over one buffer's limit here)",
                 was);
        fcl_log(ctx, "rwkv6 backward: %s", pl->from);
        pl->cfg = def;
      }
    }
  }
  const fcl_define extra[2] = {{"FCL_UNROLL_HINTS", !ctx->info.is_cpu},
                               {"RW_STEPS", fcl_rwkv6_step_positions(d)}};
  const int nextra = v == &fcl_variant_rwkv6_bwd ? 0 : v == &fcl_variant_rwkv6_step ? 2 : 1;
  fcl_build_options(&pl->cls, &pl->cfg, extra, nextra,
                    v == &fcl_variant_rwkv6_chunked_mma || v == &fcl_variant_rwkv6_bwd_chunked_mma
                        ? fcl_mma_build_options(ctx, fcl_rwkv6_mma_operand(dtype))
                        : NULL,
                    pl->options, sizeof pl->options);
  return FCL_OK;
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
  fcl_rwkv6_plan pl;
  if ((s = fcl_device_probe(ctx)) ||
      (s = fcl_rwkv6_plan_make(ctx, d, dtype, backward != 0, NULL, &pl)))
    return s;
  fcl_config_info_fill(out, &pl.cls, &pl.cfg, pl.from);
  return FCL_OK;
}
