/* The walk of a table of kernel variants, for every operation: the row
 * that takes a problem (fa-tune's override first), its configuration and
 * build options, and the run that goes on to the next row where a launch
 * falls back. */
#include "tuning/tuning.h"

static fcl_status fit_of(fcl_context *ctx, const fcl_variant_row *r, const void *problem,
                         fcl_fit *fit) {
  *fit = FCL_FIT_YES;
  return r->applies ? r->applies(ctx, problem, fit) : FCL_OK;
}

/* The variant fa-tune forces for this problem: that of the first row whose
 * variant is overridden and which the call does not bar (NULL: none), and
 * the index of its last row. Rows that cannot take the problem still count:
 * the rows after the forced one stand in for it, not those before. */
static fcl_status forced_variant(fcl_context *ctx, const fcl_variant_table *t,
                                 const void *problem, const fcl_variant **forced, int *last) {
  *forced = NULL;
  *last = -1;
  for (int i = 0; i < t->nrows && !*forced; ++i) {
    const fcl_variant_row *r = &t->rows[i];
    fcl_fit fit;
    fcl_status s;
    if (!fcl_tuning_overridden(ctx, r->variant)) continue;
    if ((s = fit_of(ctx, r, problem, &fit))) return s;
    if (fit != FCL_FIT_BARRED) *forced = r->variant;
  }
  for (int i = 0; *forced && i < t->nrows; ++i)
    if (t->rows[i].variant == *forced) *last = i;
  return FCL_OK;
}

fcl_status fcl_variant_plan_make(fcl_context *ctx, const fcl_variant_table *t,
                                 const void *problem, int first, fcl_variant_plan *pl) {
  const fcl_variant *forced;
  int last;
  fcl_status s = forced_variant(ctx, t, problem, &forced, &last);
  if (s) return s;
  for (int i = first; i < t->nrows; ++i) {
    const fcl_variant_row *r = &t->rows[i];
    const bool mine = r->variant == forced;
    fcl_fit fit;
    if (forced && !mine && i < last) continue;
    if ((s = fit_of(ctx, r, problem, &fit))) return s;
    if (fit != FCL_FIT_YES && !(fit == FCL_FIT_FORCED && mine)) continue;
    pl->row = r;
    pl->index = i;
    t->class_of(problem, r->variant, &pl->cls);
    if ((s = fcl_tuning_choose(ctx, &pl->cls, &pl->cfg, pl->from, sizeof pl->from))) return s;
    if (r->skip_invalid && i + 1 < t->nrows &&
        !r->variant->valid(&ctx->info, &pl->cls, &pl->cfg, NULL, 0)) {
      fcl_log(ctx, "%s: no configuration fits this device; the next kernel", r->variant->name);
      continue;
    }
    if (r->refit) r->refit(ctx, pl, problem);
    fcl_build_extra x = {.ndefs = 0, .tail = NULL};
    if (r->options) r->options(ctx, problem, &x);
    /* Only where it is not the default, so that HIGHEST's programs keep
     * their build options (and cached binaries). */
    if (pl->cls.dtype == FCL_F32 && ctx->opt.f32_precision != FCL_F32_PRECISION_HIGHEST &&
        x.ndefs < (int)FCL_COUNT(x.defs))
      x.defs[x.ndefs++] = (fcl_define){"FCL_F32_PRECISION", ctx->opt.f32_precision};
    fcl_build_options(&pl->cls, &pl->cfg, x.defs, x.ndefs, x.tail, pl->options,
                      sizeof pl->options);
    return FCL_OK;
  }
  return fcl_fail(ctx, FCL_ERROR_INTERNAL, "no %s kernel takes this problem", t->what);
}

fcl_status fcl_variant_run(fcl_context *ctx, const fcl_variant_table *t, const void *problem) {
  for (int first = 0;;) {
    fcl_variant_plan pl;
    bool fallback = false;
    fcl_status s;
    if ((s = fcl_variant_plan_make(ctx, t, problem, first, &pl)) ||
        (s = pl.row->launch(ctx, &pl, problem, &fallback)) || !fallback)
      return s;
    first = pl.index + 1;
  }
}
