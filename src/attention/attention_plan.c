/* The attention plan: the table of kernel variants of each pass, in order
 * of preference, and the choice of a row and its configuration for one
 * problem. fcl_attention_config() reports exactly what the calls run. */
#include "attention/attention.h"

#include <stdio.h>

/* Forward: few query rows against many keys (the KV-cache kernels, on
 * tensor cores, then portable), Hopper's wgmma (sm_90, f16 and bf16), the
 * tensor cores' mma.sync (NVIDIA), the CPU kernel (CPUs but llvmpipe), the
 * portable kernel (everywhere). */
const fcl_attention_row fcl_attention_fwd_rows[] = {
    {&fcl_variant_attention_decode_mma, fcl_attention_fwd_decode_mma_applies, true, NULL,
     fcl_attention_fwd_decode_mma_launch},
    {&fcl_variant_attention_decode, fcl_attention_fwd_decode_applies, true, NULL,
     fcl_attention_fwd_decode_launch},
    {&fcl_variant_attention_fwd_wgmma, fcl_attention_fwd_wgmma_applies, true,
     fcl_mma_build_options, fcl_attention_fwd_wgmma_launch},
    {&fcl_variant_attention_fwd_mma, fcl_attention_fwd_mma_applies, true,
     fcl_mma_build_options, fcl_attention_fwd_mma_launch},
    {&fcl_variant_attention_fwd_cpu, fcl_attention_fwd_cpu_applies, false,
     fcl_attention_fwd_cpu_tail, fcl_attention_fwd_cpu_launch},
    {&fcl_variant_attention_fwd, NULL, false, NULL, fcl_attention_fwd_launch},
};
const int fcl_attention_fwd_nrows = (int)FCL_COUNT(fcl_attention_fwd_rows);

/* Backward: Hopper's wgmma for dK/dV (sm_90, f16 and bf16), the tensor
 * cores' mma.sync (f16, bf16), the portable kernels. */
const fcl_attention_row fcl_attention_bwd_rows[] = {
    {&fcl_variant_attention_bwd_wgmma, fcl_attention_bwd_wgmma_applies, true,
     fcl_mma_build_options, fcl_attention_bwd_wgmma_launch},
    {&fcl_variant_attention_bwd_mma, fcl_attention_bwd_mma_applies, true,
     fcl_mma_build_options, fcl_attention_bwd_mma_launch},
    {&fcl_variant_attention_bwd, NULL, false, NULL, fcl_attention_bwd_launch},
};
const int fcl_attention_bwd_nrows = (int)FCL_COUNT(fcl_attention_bwd_rows);

void fcl_attention_class(const fcl_attention_desc *d, fcl_dtype dtype, const fcl_variant *v,
                         fcl_tuning_class *cls) {
  cls->variant = v;
  cls->dtype = dtype;
  cls->head_dim = (int)d->head_dim;
  cls->head_dim_v = (int)d->head_dim_v;
  cls->causal = v->causal_classes && d->causal != 0;
  cls->bucket = fcl_seqlen_bucket(d->seqlen_q > d->seqlen_k ? d->seqlen_q : d->seqlen_k);
}

/* The row fa-tune overrides, if any: it runs wherever it applies. */
static int overridden_row(const fcl_context *ctx, const fcl_attention_row *rows, int n) {
  for (int i = 0; i < n; ++i)
    if (fcl_tuning_overridden(ctx, rows[i].variant)) return i;
  return -1;
}

fcl_status fcl_attention_plan_make(fcl_context *ctx, const fcl_attention_desc *d,
                                   fcl_dtype dtype, bool backward, int first,
                                   fcl_attention_plan *pl) {
  const fcl_attention_row *rows = backward ? fcl_attention_bwd_rows : fcl_attention_fwd_rows;
  const int n = backward ? fcl_attention_bwd_nrows : fcl_attention_fwd_nrows;
  const int forced = overridden_row(ctx, rows, n);
  fcl_status s;
  for (int i = first; i < n; ++i) {
    const fcl_attention_row *r = &rows[i];
    bool yes = true;
    if (forced >= 0 && i < forced) continue;
    if (r->applies && (s = r->applies(ctx, d, dtype, &yes))) return s;
    if (!yes) continue;
    pl->row = r;
    pl->index = i;
    fcl_attention_class(d, dtype, r->variant, &pl->cls);
    if ((s = fcl_tuning_choose(ctx, &pl->cls, &pl->cfg, pl->from, sizeof pl->from))) return s;
    if (r->skip_invalid && i + 1 < n &&
        !r->variant->valid(&ctx->info, &pl->cls, &pl->cfg, NULL, 0)) {
      fcl_log(ctx, "%s: no configuration fits this device; the next kernel", r->variant->name);
      continue;
    }
    fcl_build_options(&pl->cls, &pl->cfg, NULL, 0,
                      r->options_tail ? r->options_tail(ctx, dtype) : NULL, pl->options,
                      sizeof pl->options);
    return FCL_OK;
  }
  return fcl_fail(ctx, FCL_ERROR_INTERNAL, "no attention kernel takes this problem");
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
  fcl_attention_plan pl;
  if ((s = fcl_device_probe(ctx)) ||
      (s = fcl_attention_plan_make(ctx, d, dtype, backward != 0, 0, &pl)))
    return s;
  fcl_config_info_fill(out, &pl.cls, &pl.cfg, pl.from);
  return FCL_OK;
}
