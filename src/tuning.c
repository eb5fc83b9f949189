/* The choice of kernel parameters: an fa-tune override, else this device's
 * database rows (this driver first, then another), else the built-in
 * defaults. The database is read once per context, on first use. */
#include "tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fcl_tuning_state {
  bool            loaded, db_ok;
  char            path[4096];
  char            why[512]; /* why the database is not used */
  fcl_tuning_row *rows;
  int             nrows;
  bool            hashed[FCL_KERNEL_COUNT];
  char            hash[FCL_KERNEL_COUNT][33];
  char           *override[FCL_KERNEL_COUNT];
};

static struct fcl_tuning_state *state(fcl_context *ctx) {
  if (!ctx->tuning) ctx->tuning = calloc(1, sizeof *ctx->tuning);
  return ctx->tuning;
}

void fcl_tuning_release(fcl_context *ctx) {
  struct fcl_tuning_state *t = ctx->tuning;
  if (!t) return;
  for (int i = 0; i < FCL_KERNEL_COUNT; ++i) free(t->override[i]);
  free(t->rows);
  free(t);
  ctx->tuning = NULL;
}

fcl_status fcl_tuning_override(fcl_context *ctx, fcl_kernel_id kernel,
                               const char *params) {
  struct fcl_tuning_state *t = state(ctx);
  if (!t) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "tuning state");
  free(t->override[kernel]);
  t->override[kernel] = NULL;
  if (params) {
    const size_t n = strlen(params) + 1;
    if (!(t->override[kernel] = malloc(n)))
      return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "tuning override");
    memcpy(t->override[kernel], params, n);
  }
  return FCL_OK;
}

bool fcl_tuning_overridden(const fcl_context *ctx, fcl_kernel_id kernel) {
  return ctx->tuning && ctx->tuning->override[kernel] != NULL;
}

static void load(fcl_context *ctx, struct fcl_tuning_state *t) {
  t->loaded = true;
  if (!fcl_tuning_db_path(t->path, sizeof t->path)) {
    snprintf(t->why, sizeof t->why, "no tuning database (FCL_TUNING_DB off or no HOME)");
  } else if (fcl_tuning_db_read(t->path, &ctx->info, &t->rows, &t->nrows, t->why,
                                sizeof t->why)) {
    t->db_ok = true;
    fcl_log(ctx, "tuning database %s: %d rows for this device", t->path, t->nrows);
    return;
  }
  fcl_log(ctx, "tuning database %s not used: %s", t->path, t->why);
}

/* The current hash of a kernel's sources, "" if they cannot be read. */
static const char *kernel_hash(fcl_context *ctx, struct fcl_tuning_state *t,
                               fcl_kernel_id id) {
  if (!t->hashed[id]) {
    t->hashed[id] = true;
    if (fcl_kernel_hash(ctx, id, t->hash[id]) != FCL_OK) t->hash[id][0] = '\0';
  }
  return t->hash[id];
}

static bool same_problem(const fcl_tuning_class *a, const fcl_tuning_class *b) {
  return a->kernel == b->kernel && a->dtype == b->dtype &&
         a->head_dim == b->head_dim && a->head_dim_v == b->head_dim_v &&
         a->causal == b->causal;
}

/* Rank of a row for cls, lower is better, -1 if it does not apply: this
 * driver before another, then the nearest length bucket. */
static int rank(const fcl_device_info *dev, const fcl_tuning_row *r,
                const fcl_tuning_class *cls) {
  if (!same_problem(&r->cls, cls)) return -1;
  const int dist = abs(r->cls.bucket - cls->bucket);
  return (strcmp(r->driver, dev->driver_version) == 0 ? 0 : 100) + dist;
}

/* The best valid database row for cls, or NULL; counts rows of a changed
 * kernel (another source hash), which are never used. */
static const fcl_tuning_row *best_row(fcl_context *ctx, struct fcl_tuning_state *t,
                                      const fcl_tuning_class *cls, void *cfg,
                                      int *stale) {
  const char *hash = kernel_hash(ctx, t, cls->kernel);
  const fcl_kernel_desc *kd = fcl_kernel_get(cls->kernel);
  const fcl_tuning_row *best = NULL;
  int best_rank = 0;
  *stale = 0;
  for (int i = 0; i < t->nrows; ++i) {
    const fcl_tuning_row *r = &t->rows[i];
    int rk = rank(&ctx->info, r, cls);
    if (rk < 0) continue;
    if (!*hash || strcmp(r->kernel_hash, hash) != 0) {
      ++*stale;
      continue;
    }
    if (best && (rk > best_rank || (rk == best_rank && strcmp(r->created, best->created) <= 0)))
      continue;
    char why[160];
    _Alignas(16) unsigned char tmp[256]; /* defaults for fields that are not parameters */
    kd->defaults(&ctx->info, cls, tmp);
    if (!fcl_params_parse(cls->kernel, r->params, tmp, why, sizeof why) ||
        !kd->valid(&ctx->info, cls, tmp, why, sizeof why)) {
      fcl_log(ctx, "tuning row %s '%s' ignored: %s", kd->name, r->params, why);
      continue;
    }
    memcpy(cfg, tmp, kd->config_size);
    best = r;
    best_rank = rk;
  }
  return best;
}

static void describe(const fcl_tuning_class *c, char *out, size_t n) {
  snprintf(out, n, "%s %s d=%d/%d%s bucket %d", fcl_kernel_get(c->kernel)->name,
           fcl_dtype_name(c->dtype), c->head_dim, c->head_dim_v,
           c->causal ? " causal" : "", c->bucket);
}

fcl_status fcl_tuning_choose(fcl_context *ctx, const fcl_tuning_class *cls,
                             void *cfg, char *from, size_t from_size) {
  const fcl_kernel_desc *kd = fcl_kernel_get(cls->kernel);
  struct fcl_tuning_state *t = state(ctx);
  char buf[512], what[128], params[160];
  describe(cls, what, sizeof what);
  if (!from) {
    from = buf;
    from_size = sizeof buf;
  }
  if (t && t->override[cls->kernel]) {
    char why[160];
    kd->defaults(&ctx->info, cls, cfg);
    if (!fcl_params_parse(cls->kernel, t->override[cls->kernel], cfg, why, sizeof why) ||
        !kd->valid(&ctx->info, cls, cfg, why, sizeof why))
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "tuning override '%s' of %s: %s",
                      t->override[cls->kernel], kd->name, why);
    snprintf(from, from_size, "override");
  } else {
    if (t && !t->loaded) load(ctx, t);
    int stale = 0;
    const fcl_tuning_row *r = t && t->db_ok ? best_row(ctx, t, cls, cfg, &stale) : NULL;
    if (r) {
      snprintf(from, from_size, "tuning database %s (%s, bucket %d, %s)", t->path,
               strcmp(r->driver, ctx->info.driver_version) == 0 ? "this driver"
                                                                 : "another driver",
               r->cls.bucket, r->created);
    } else {
      kd->defaults(&ctx->info, cls, cfg);
      if (!t) snprintf(from, from_size, "built-in defaults (out of memory)");
      else if (!t->db_ok) snprintf(from, from_size, "built-in defaults (%s)", t->why);
      else if (stale)
        snprintf(from, from_size, "built-in defaults (%d rows for a changed kernel ignored)",
                 stale);
      else snprintf(from, from_size, "built-in defaults (no tuned row)");
    }
  }
  fcl_params_format(cls->kernel, cfg, params, sizeof params);
  fcl_log(ctx, "%s: %s from %s", what, params, from);
  return FCL_OK;
}

double fcl_tuning_stored_time(fcl_context *ctx, const fcl_tuning_class *cls) {
  struct fcl_tuning_state *t = state(ctx);
  if (!t) return -1;
  if (!t->loaded) load(ctx, t);
  _Alignas(16) unsigned char cfg[256];
  int stale;
  const fcl_tuning_row *r = t->db_ok ? best_row(ctx, t, cls, cfg, &stale) : NULL;
  return r && r->cls.bucket == cls->bucket ? r->time_ms : -1.0;
}

void fcl_config_info_fill(fcl_config_info *out, fcl_kernel_id id, const void *cfg,
                          const char *from) {
  snprintf(out->kernel, sizeof out->kernel, "%s", fcl_kernel_get(id)->name);
  fcl_params_format(id, cfg, out->params, sizeof out->params);
  snprintf(out->source, sizeof out->source, "%s", from);
}
