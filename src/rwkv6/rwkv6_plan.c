/* The RWKV6 plan: recurrent or chunked for the forward, the configuration
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

/* Chunked or recurrent: the descriptor, $FCL_RWKV6_ALGORITHM, then the
 * faster of the two where fa-tune measured both for this class; otherwise
 * the recurrent kernel, the faster one on every device measured so far
 * (H100: 2.2 ms against 41 ms on B8 T4096 H32 K64). */
static bool use_chunked(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype) {
  if (d->algorithm != FCL_RWKV6_AUTO) return d->algorithm == FCL_RWKV6_CHUNKED;
  if (ctx->opt.rwkv6_algorithm) return ctx->opt.rwkv6_algorithm == 2;
  fcl_tuning_class rc, cc;
  rwkv6_class(d, dtype, &fcl_variant_rwkv6_recurrent, &rc);
  rwkv6_class(d, dtype, &fcl_variant_rwkv6_chunked, &cc);
  const double tr = fcl_tuning_stored_time(ctx, &rc);
  const double tch = fcl_tuning_stored_time(ctx, &cc);
  return tr > 0 && tch > 0 && tch < tr;
}

fcl_status fcl_rwkv6_plan_make(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype,
                               bool backward, const fcl_rwkv6_problem *p, fcl_rwkv6_plan *pl) {
  const fcl_variant *v = backward              ? &fcl_variant_rwkv6_bwd
                         : use_chunked(ctx, d, dtype) ? &fcl_variant_rwkv6_chunked
                                                      : &fcl_variant_rwkv6_recurrent;
  rwkv6_class(d, dtype, v, &pl->cls);
  fcl_status s = fcl_tuning_choose(ctx, &pl->cls, &pl->cfg, pl->from, sizeof pl->from);
  if (s != FCL_OK) return s;
  const int K = (int)d->head_dim_k, V = (int)d->head_dim_v;
  const int64_t ntok = p ? p->ntok : d->batch * d->seqlen;
  if (backward) {
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
  /* The forward program holds both kernels; the recurrent one's
   * configuration leaves BVC (the chunk output's) at its default. */
  fcl_define extra[2];
  int n = 0;
  if (v == &fcl_variant_rwkv6_recurrent) extra[n++] = (fcl_define){"BVC", pl->cfg.v[4]};
  if (!backward) extra[n++] = (fcl_define){"FCL_UNROLL_HINTS", !ctx->info.is_cpu};
  fcl_build_options(&pl->cls, &pl->cfg, extra, n, NULL, pl->options, sizeof pl->options);
  return FCL_OK;
}

fcl_status fcl_rwkv6_config(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype,
                            int backward, fcl_config_info *out) {
  if (!ctx) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  fcl_clear_error(ctx);
  fcl_status s;
  if ((s = fcl_check_rwkv6_desc(ctx, d))) return s;
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
