/* flashcl_tuning.h: the variants of every operation in one registry, made
 * of the operations' tables, and what fa-tune and the tests ask of them.
 * This file stands above the operations (src/README.md): it is the only
 * one that knows them all. */
#include "attention/attention.h"
#include "rwkv6/rwkv6.h"

#include <string.h>

/* Every operation's tables: the registry of variants is made of their
 * rows, so that a new variant is one new row. */
static const fcl_variant_table *const tables[] = {
    &fcl_attention_fwd_table, &fcl_attention_bwd_table, &fcl_rwkv6_fwd_table,
    &fcl_rwkv6_bwd_table,     &fcl_kvcache_table};

/* Tuning order: what the library runs most first, so that a budget spent
 * early (builds cost seconds a candidate on some drivers) leaves the less
 * used classes untuned, not the forward: the attention forwards, the
 * attention backward, the RWKV6 step (decoding) and recurrent forward, the
 * recurrent backward, the chunked RWKV6 backward and forward, decoding
 * against a KV cache; within one, the tables' order. What is not named
 * here comes last. */
static const fcl_tuning_op order[] = {
    FCL_TUNING_ATTENTION_FWD, FCL_TUNING_ATTENTION_BWD,    FCL_TUNING_RWKV6_RECURRENT,
    FCL_TUNING_RWKV6_BWD,     FCL_TUNING_RWKV6_BWD_CHUNKED, FCL_TUNING_RWKV6_CHUNKED,
    FCL_TUNING_ATTENTION_DECODE};

static int rank(fcl_tuning_op op) {
  int r = 0;
  while (r < (int)FCL_COUNT(order) && order[r] != op) ++r;
  return r;
}

/* Whether the row is its variant's first in the tables (a variant may
 * have several rows, and serve several tables). */
static bool first_row(int ti, int ri) {
  const fcl_variant *v = tables[ti]->rows[ri].variant;
  for (int t = 0; t <= ti; ++t)
    for (int r = 0; r < (t == ti ? ri : tables[t]->nrows); ++r)
      if (tables[t]->rows[r].variant == v) return false;
  return true;
}

/* The variant at place i in tuning order (name NULL), or the one named
 * name; its place in *n. Without either, *n counts them all. */
static const fcl_variant *walk(int i, const char *name, int *n) {
  *n = 0;
  for (int k = 0; k <= (int)FCL_COUNT(order); ++k)
    for (int ti = 0; ti < (int)FCL_COUNT(tables); ++ti)
      for (int ri = 0; ri < tables[ti]->nrows; ++ri) {
        const fcl_variant *v = tables[ti]->rows[ri].variant;
        if (rank(v->op) != k || !first_row(ti, ri)) continue;
        if (name ? strcmp(v->name, name) == 0 : *n == i) return v;
        ++*n;
      }
  return NULL;
}

int fcl_variant_count(void) {
  int n;
  walk(-1, NULL, &n);
  return n;
}

const fcl_variant *fcl_variant_at(int i) {
  int n;
  return i >= 0 ? walk(i, NULL, &n) : NULL;
}

const fcl_variant *fcl_variant_find(const char *name) {
  int n;
  return name ? walk(-1, name, &n) : NULL;
}

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

/* The plan of a problem of the class: its head dims, causal flag and
 * bucket length. fcl_attention_kvcache runs a decode variant on every class
 * it has. */
static fcl_status plans(fcl_context *ctx, const fcl_tuning_class *c, bool *runs) {
  const fcl_variant *v = c->variant;
  const int64_t len = fcl_seqlen_bucket_length(c->bucket);
  fcl_status s;
  if (v->op == FCL_TUNING_ATTENTION_FWD || v->op == FCL_TUNING_ATTENTION_BWD) {
    fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
    d.batch = 1, d.seqlen_q = d.seqlen_k = len, d.heads_q = d.heads_kv = 1;
    d.head_dim = c->head_dim, d.head_dim_v = c->head_dim_v, d.causal = c->causal;
    const fcl_attention_problem p = {.d = &d, .dtype = c->dtype};
    fcl_variant_plan pl;
    s = fcl_attention_plan_make(ctx, &p, v->op == FCL_TUNING_ATTENTION_BWD, &pl);
    *runs = s == FCL_OK && pl.cls.variant == v;
  } else if (v->op == FCL_TUNING_ATTENTION_DECODE) {
    /* The tensor-core kernel where it suits the class, else the portable
     * one (which runs anywhere when forced). */
    const bool mma = fcl_kvcache_mma_suits(ctx, c->dtype, c->head_dim, c->head_dim_v);
    s = FCL_OK;
    *runs = fcl_tuning_class_valid(c) &&
            (v == &fcl_variant_attention_decode_mma ? mma
                                                     : !mma || fcl_tuning_overridden(ctx, v));
  } else {
    fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
    d.batch = 1, d.seqlen = len, d.heads = 1;
    d.head_dim_k = c->head_dim, d.head_dim_v = c->head_dim_v;
    const bool chunked = v->op == FCL_TUNING_RWKV6_CHUNKED || v->op == FCL_TUNING_RWKV6_BWD_CHUNKED;
    d.algorithm = chunked ? FCL_RWKV6_CHUNKED : FCL_RWKV6_RECURRENT;
    /* The step kernel runs on the shortest sequences (bucket 0) under AUTO;
     * fa-tune times it at the bucket's length, which its override lets it
     * run (launches of a few positions each). */
    if (v == &fcl_variant_rwkv6_step) d.seqlen = 1, d.algorithm = FCL_RWKV6_AUTO;
    fcl_rwkv6_problem p;
    fcl_variant_plan pl;
    fcl_rwkv6_problem_of(&d, c->dtype, &p);
    s = fcl_rwkv6_plan_make(
        ctx, &p, v->op == FCL_TUNING_RWKV6_BWD || v->op == FCL_TUNING_RWKV6_BWD_CHUNKED, &pl);
    *runs = s == FCL_OK && pl.cls.variant == v &&
            (v != &fcl_variant_rwkv6_step || c->bucket == 0);
  }
  return s;
}

fcl_status fcl_tuning_runs(fcl_context *ctx, const fcl_tuning_class *c, bool forced,
                           bool *runs) {
  fcl_status s = fcl_device_probe(ctx);
  *runs = false;
  if (s || !forced) return s ? s : plans(ctx, c, runs);
  fcl_config cfg;
  char params[160];
  fcl_tuning_defaults(ctx, c, &cfg);
  fcl_params_format(c->variant, &cfg, params, sizeof params);
  if ((s = fcl_tuning_override(ctx, c->variant, params))) return s;
  s = plans(ctx, c, runs);
  fcl_tuning_override(ctx, c->variant, NULL);
  if (s != FCL_OK) fcl_clear_error(ctx), s = FCL_OK; /* the defaults do not fit here */
  return s;
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
