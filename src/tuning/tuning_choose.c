/* The choice of kernel parameters: an fa-tune override, else this device's
 * database rows (this driver first, then another), else the built-in
 * defaults. The database is read once per context, on first use. */
#include "tuning/tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the context keeps per variant it has met: the hash of its sources
 * and fa-tune's override. The table grows as variants are met (no fixed
 * limit to outgrow as variants are added). */
typedef struct {
  const fcl_variant *variant;
  bool               hashed;
  char               hash[33];
  char              *override;
} variant_state;

struct fcl_tuning_state {
  bool            loaded, db_ok;
  char            why[512]; /* why the database is not used */
  fcl_tuning_row *rows;
  int             nrows;
  variant_state  *var; /* variants seen: hashes and overrides */
  int             nvariants, capacity;
};

static void state_free(struct fcl_tuning_state *t) {
  for (int i = 0; i < t->nvariants; ++i) free(t->var[i].override);
  free(t->var);
  free(t->rows);
  free(t);
}

static struct fcl_tuning_state *state(fcl_context *ctx) {
  if (!ctx->tuning) {
    ctx->tuning = calloc(1, sizeof *ctx->tuning);
    ctx->tuning_free = state_free;
  }
  return ctx->tuning;
}

/* The slot of variant v in t, -1 when there is no memory for a new one. */
static int slot(struct fcl_tuning_state *t, const fcl_variant *v) {
  for (int i = 0; i < t->nvariants; ++i)
    if (t->var[i].variant == v) return i;
  if (t->nvariants == t->capacity) {
    const int      cap = t->capacity ? 2 * t->capacity : 16;
    variant_state *grown = realloc(t->var, (size_t)cap * sizeof *grown);
    if (!grown) return -1;
    t->var = grown;
    t->capacity = cap;
  }
  t->var[t->nvariants] = (variant_state){.variant = v};
  return t->nvariants++;
}

fcl_status fcl_tuning_override(fcl_context *ctx, const fcl_variant *v, const char *params) {
  struct fcl_tuning_state *t = state(ctx);
  const int i = t ? slot(t, v) : -1;
  if (i < 0) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "tuning state");
  fcl_plan_cache_clear(ctx); /* the calls' plans chose under the old overrides */
  free(t->var[i].override);
  t->var[i].override = NULL;
  if (params) {
    const size_t n = strlen(params) + 1;
    if (!(t->var[i].override = malloc(n)))
      return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "tuning override");
    memcpy(t->var[i].override, params, n);
  }
  return FCL_OK;
}

static const char *override_of(const fcl_context *ctx, const fcl_variant *v) {
  const struct fcl_tuning_state *t = ctx->tuning;
  for (int i = 0; t && i < t->nvariants; ++i)
    if (t->var[i].variant == v) return t->var[i].override;
  return NULL;
}

bool fcl_tuning_overridden(const fcl_context *ctx, const fcl_variant *v) {
  return override_of(ctx, v) != NULL;
}

fcl_status fcl_tuning_unbuilt(fcl_context *ctx, const fcl_variant *v, fcl_status s,
                              const char *what, bool *fallback) {
  if (fcl_tuning_overridden(ctx, v)) return s;
  fcl_log(ctx, "fast path: %s not built, using the next kernels: %s", what, ctx->message);
  fcl_clear_error(ctx);
  *fallback = true;
  return FCL_OK;
}

static void load(fcl_context *ctx, struct fcl_tuning_state *t) {
  t->loaded = true;
  const char *path = ctx->opt.tuning_db;
  if (!*path) {
    snprintf(t->why, sizeof t->why, "no tuning database (FCL_TUNING_DB off or no HOME)");
  } else if (fcl_tuning_db_read(path, &ctx->info, &t->rows, &t->nrows, t->why,
                                sizeof t->why)) {
    t->db_ok = true;
    fcl_log(ctx, "tuning database %s: %d rows for this device", path, t->nrows);
    return;
  }
  fcl_log(ctx, "tuning database %s not used: %s", path, t->why);
}

/* The current hash of a variant's sources, "" if they cannot be read. */
static const char *variant_hash(fcl_context *ctx, struct fcl_tuning_state *t,
                                const fcl_variant *v) {
  const int i = slot(t, v);
  if (i < 0) {
    fcl_log(ctx, "tuning: no memory to keep the source hash of %s", v->name);
    return "";
  }
  variant_state *e = &t->var[i];
  if (!e->hashed) {
    e->hashed = true;
    if (fcl_variant_hash(ctx, v, e->hash) != FCL_OK) {
      e->hash[0] = '\0';
      fcl_clear_error(ctx);
    }
  }
  return e->hash;
}

/* Rank of a row for cls, lower is better, -1 if it does not apply: this
 * driver before another, then the nearest length bucket. */
static int rank(const fcl_device_info *dev, const fcl_tuning_row *r,
                const fcl_tuning_class *cls) {
  if (strcmp(r->kernel, cls->variant->name) != 0 || r->cls.dtype != cls->dtype ||
      r->cls.head_dim != cls->head_dim || r->cls.head_dim_v != cls->head_dim_v ||
      r->cls.causal != cls->causal)
    return -1;
  const int dist = abs(r->cls.bucket - cls->bucket);
  return (strcmp(r->driver, dev->driver_version) == 0 ? 0 : 100) + dist;
}

/* The best valid database row for cls, or NULL; counts rows of a changed
 * kernel (another source hash), which are never used. */
static const fcl_tuning_row *best_row(fcl_context *ctx, struct fcl_tuning_state *t,
                                      const fcl_tuning_class *cls, fcl_config *cfg,
                                      int *stale) {
  const fcl_variant *v = cls->variant;
  const char *hash = variant_hash(ctx, t, v);
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
    fcl_config tmp;
    v->defaults(&ctx->info, cls, &tmp); /* fields that are not parameters */
    if (!fcl_params_parse(v, r->params, &tmp, why, sizeof why) ||
        !v->valid(&ctx->info, cls, &tmp, why, sizeof why)) {
      fcl_log(ctx, "tuning row %s '%s' ignored: %s", v->name, r->params, why);
      continue;
    }
    *cfg = tmp;
    best = r;
    best_rank = rk;
  }
  return best;
}

static void describe(const fcl_tuning_class *c, char *out, size_t n) {
  snprintf(out, n, "%s %s d=%d/%d%s bucket %d", c->variant->name, fcl_dtype_name(c->dtype),
           c->head_dim, c->head_dim_v, c->causal ? " causal" : "", c->bucket);
}

fcl_status fcl_tuning_choose(fcl_context *ctx, const fcl_tuning_class *cls, fcl_config *cfg,
                             char *from, size_t from_size) {
  const fcl_variant *v = cls->variant;
  struct fcl_tuning_state *t = state(ctx);
  char buf[512], what[128], params[160];
  describe(cls, what, sizeof what);
  if (!from) {
    from = buf;
    from_size = sizeof buf;
  }
  memset(cfg, 0, sizeof *cfg);
  const char *over = override_of(ctx, v);
  if (over) {
    char why[160];
    v->defaults(&ctx->info, cls, cfg);
    if (!fcl_params_parse(v, over, cfg, why, sizeof why) ||
        !v->valid(&ctx->info, cls, cfg, why, sizeof why))
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "tuning override '%s' of %s: %s", over,
                      v->name, why);
    snprintf(from, from_size, "override");
  } else {
    if (t && !t->loaded) load(ctx, t);
    int stale = 0;
    const fcl_tuning_row *r = t && t->db_ok ? best_row(ctx, t, cls, cfg, &stale) : NULL;
    if (r) {
      snprintf(from, from_size, "tuning database %s (%s, bucket %d, %s)", ctx->opt.tuning_db,
               strcmp(r->driver, ctx->info.driver_version) == 0 ? "this driver"
                                                                 : "another driver",
               r->cls.bucket, r->created);
    } else {
      v->defaults(&ctx->info, cls, cfg);
      if (!t) snprintf(from, from_size, "built-in defaults (out of memory)");
      else if (!t->db_ok) snprintf(from, from_size, "built-in defaults (%s)", t->why);
      else if (stale)
        snprintf(from, from_size, "built-in defaults (%d rows for a changed kernel ignored)",
                 stale);
      else snprintf(from, from_size, "built-in defaults (no tuned row)");
    }
  }
  fcl_params_format(v, cfg, params, sizeof params);
  fcl_log(ctx, "%s: %s from %s", what, params, from);
  return FCL_OK;
}

double fcl_tuning_stored_time(fcl_context *ctx, const fcl_tuning_class *cls) {
  struct fcl_tuning_state *t = state(ctx);
  if (!t) return -1;
  if (!t->loaded) load(ctx, t);
  fcl_config cfg;
  int stale;
  const fcl_tuning_row *r = t->db_ok ? best_row(ctx, t, cls, &cfg, &stale) : NULL;
  return r && r->cls.bucket == cls->bucket ? r->time_ms : -1.0;
}
