/* flashcl_tuning.h's functions that need no operation: what a variant
 * and a class say of themselves (name, parameters, search axes, defaults,
 * validity), the device's identity and the database's path. The registry
 * of variants and fcl_tuning_runs, which know the operations, sit above
 * them (src/variant_registry.c, src/tuning_runs.c). */
#include "tuning/tuning.h"

#include <string.h>

const char   *fcl_variant_name(const fcl_variant *v) { return v->name; }
fcl_tuning_op fcl_variant_op(const fcl_variant *v) { return v->op; }
int           fcl_variant_nparams(const fcl_variant *v) { return v->nparams; }
const char   *fcl_variant_param(const fcl_variant *v, int i) {
  return i >= 0 && i < v->nparams ? v->params[i] : NULL;
}

int fcl_tuning_axes(const fcl_tuning_class *c, fcl_axis axes[FCL_TUNING_MAX_AXES]) {
  return c->variant->axes(c, axes);
}

void fcl_tuning_point(const fcl_tuning_class *c, const int *values, fcl_config *cfg) {
  c->variant->point(c, values, cfg);
}

void fcl_tuning_defaults(fcl_context *ctx, const fcl_tuning_class *c, fcl_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  c->variant->defaults(&ctx->info, c, cfg);
}

bool fcl_tuning_valid(fcl_context *ctx, const fcl_tuning_class *c, const fcl_config *cfg,
                      char *why, size_t why_size) {
  return c->variant->valid(&ctx->info, c, cfg, why, why_size);
}

bool fcl_tuning_worth_trying(fcl_context *ctx, const fcl_tuning_class *c,
                             const fcl_config *cfg) {
  return !c->variant->worth_trying || c->variant->worth_trying(&ctx->info, c, cfg);
}

fcl_status fcl_tuning_device_info(fcl_context *ctx, fcl_tuning_device *out) {
  fcl_status s = fcl_device_probe(ctx);
  if (s) return s;
  const fcl_device_info *i = &ctx->info;
  memset(out, 0, sizeof *out);
  memcpy(out->platform, i->platform_name, sizeof out->platform);
  memcpy(out->vendor, i->vendor, sizeof out->vendor);
  memcpy(out->device, i->device_name, sizeof out->device);
  memcpy(out->driver, i->driver_version, sizeof out->driver);
  memcpy(out->label, i->label, sizeof out->label);
  out->compute_units = i->compute_units;
  out->is_cpu = i->is_cpu;
  out->preferred_multiple = i->preferred_multiple;
  return FCL_OK;
}

bool fcl_tuning_db_path(char *out, size_t size) { return fcl_options_tuning_db(out, size); }
