/* The cache of plans of the public calls: keys (every argument a plan
 * depends on, as bytes), the most recently used plans of a context, up to
 * FCL_OPTION_PLAN_CACHE of them, and a public call run through it. */
#include "core/plan.h"

#include <stdlib.h>
#include <string.h>

void fcl_key_init(fcl_key *key, int op) {
  key->n = 0;
  key->nmem = 0;
  key->ok = true;
  fcl_key_i64(key, op);
}

void fcl_key_bytes(fcl_key *key, const void *p, size_t n) {
  if (!key->ok || n > FCL_KEY_MAX - key->n) {
    key->ok = false;
    return;
  }
  memcpy(key->b + key->n, p, n);
  key->n += n;
}

void fcl_key_i64(fcl_key *key, int64_t v) { fcl_key_bytes(key, &v, sizeof v); }

void fcl_key_f32(fcl_key *key, float v) { fcl_key_bytes(key, &v, sizeof v); }

/* The handle alone: the context holds the buffers of its cached plans
 * (buffer_refs.c), so a handle in a cached key names the buffer it named
 * when the plan was made. */
void fcl_key_mem(fcl_key *key, cl_mem m) {
  fcl_key_bytes(key, &m, sizeof m);
  if (!m) return;
  /* repeats stay: a kept plan takes each buffer once (fcl_plan_cache_put) */
  if (key->nmem == FCL_KEY_MEMS) key->ok = false;
  else key->mem[key->nmem++] = m;
}

void fcl_key_host_offsets(fcl_key *key, const int32_t *v, int64_t batch) {
  if (!v) {
    fcl_key_i64(key, -1);
    return;
  }
  /* batch is not checked yet: one no call accepts keys nothing (and
   * batch + 1 must not overflow) */
  if (batch < 0 || batch >= (int64_t)(FCL_KEY_MAX / sizeof *v)) {
    key->ok = false;
    return;
  }
  const int64_t n = batch + 1;
  fcl_key_i64(key, n);
  fcl_key_bytes(key, v, (size_t)n * sizeof *v);
}

void fcl_key_tensor(fcl_key *key, const fcl_tensor *t) {
  if (!t) {
    fcl_key_i64(key, -1);
    return;
  }
  fcl_key_mem(key, t->buffer);
  const int64_t f[6] = {(int64_t)t->offset, (int64_t)t->dtype, t->strides[0], t->strides[1],
                        t->strides[2], t->strides[3]};
  fcl_key_bytes(key, f, sizeof f);
}

static uint64_t key_hash(const fcl_key *key) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ key->n;
  size_t i = 0;
  for (; i + 8 <= key->n; i += 8) {
    uint64_t w;
    memcpy(&w, key->b + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
  }
  for (; i < key->n; ++i) h = (h ^ key->b[i]) * 0x100000001b3ULL;
  return h;
}

/* The arguments of pl's kernels that name m. */
static int kernel_refs(const fcl_plan *pl, cl_mem m) {
  int n = 0;
  for (int i = 0; i < pl->narg_mem; ++i) n += pl->arg_mem[i] == m;
  return n;
}

/* Takes plan *at out of the cache: the context lets go of the buffers
 * that no other cached plan names. */
static void drop(fcl_context *ctx, fcl_plan **at) {
  fcl_plan *pl = *at;
  *at = pl->next;
  for (int i = 0; i < pl->key_nmem; ++i)
    fcl_refs_drop(ctx->refs, pl->key_mem[i], kernel_refs(pl, pl->key_mem[i]));
  fcl_plan_free(pl);
  ctx->plans_n--;
}

/* Drops the cached plans that name a buffer the caller released, checking
 * at most budget of the held buffers (each check is one
 * clGetMemObjectInfo). */
static void let_go_released(fcl_context *ctx, int budget) {
  const cl_mem m = fcl_refs_released(ctx->refs, budget);
  if (!m) return;
  for (fcl_plan **at = &ctx->plans; *at;) {
    bool names = false;
    for (int i = 0; i < (*at)->key_nmem && !names; ++i) names = (*at)->key_mem[i] == m;
    if (names) drop(ctx, at); /* the last one releases m */
    else at = &(*at)->next;
  }
}

/* A call checks one held buffer, a call that makes a plan a few more: a
 * released buffer goes within as many calls as the context holds buffers. */
#define CHECKS_A_CALL 1
#define CHECKS_A_PLAN 8

const fcl_plan *fcl_plan_cache_find(fcl_context *ctx, const fcl_key *key) {
  let_go_released(ctx, CHECKS_A_CALL);
  const uint64_t h = key_hash(key);
  for (fcl_plan **at = &ctx->plans; *at; at = &(*at)->next) {
    fcl_plan *pl = *at;
    if (pl->hash != h || pl->key_n != key->n || memcmp(pl->key, key->b, key->n)) continue;
    *at = pl->next; /* to the front */
    pl->next = ctx->plans;
    ctx->plans = pl;
    return pl;
  }
  return NULL;
}

bool fcl_plan_cache_put(fcl_context *ctx, const fcl_key *key, fcl_plan *pl) {
  if (!ctx->refs && !(ctx->refs = fcl_refs_new())) return false;
  let_go_released(ctx, CHECKS_A_PLAN);
  pl->key = malloc(key->n);
  pl->key_mem = malloc((size_t)(key->nmem ? key->nmem : 1) * sizeof *pl->key_mem);
  if (!pl->key || !pl->key_mem) return false;
  memcpy(pl->key, key->b, key->n);
  pl->key_n = key->n;
  pl->key_nmem = 0;
  for (int i = 0; i < key->nmem; ++i) { /* each buffer once */
    bool seen = false;
    for (int j = 0; j < pl->key_nmem && !seen; ++j) seen = pl->key_mem[j] == key->mem[i];
    if (seen) continue;
    if (!fcl_refs_add(ctx->refs, key->mem[i], kernel_refs(pl, key->mem[i]))) {
      for (cl_mem m; pl->key_nmem > 0;)
        m = pl->key_mem[--pl->key_nmem], fcl_refs_drop(ctx->refs, m, kernel_refs(pl, m));
      return false;
    }
    pl->key_mem[pl->key_nmem++] = key->mem[i];
  }
  pl->hash = key_hash(key);
  pl->next = ctx->plans;
  ctx->plans = pl;
  if (++ctx->plans_n > ctx->plan_cache) { /* the least recently used goes */
    fcl_plan **at = &ctx->plans;
    while ((*at)->next) at = &(*at)->next;
    drop(ctx, at);
  }
  return true;
}

void fcl_plan_cache_clear(fcl_context *ctx) {
  while (ctx->plans) drop(ctx, &ctx->plans);
}

/* A public call: its cached plan replayed, or run while a plan records. */
fcl_status fcl_plan_call(fcl_context *ctx, const fcl_key *key, fcl_op_fn run,
                         const void *args) {
  return fcl_plan_call_patched(ctx, key, run, args, NULL, 0);
}

fcl_status fcl_plan_call_patched(fcl_context *ctx, const fcl_key *key, fcl_op_fn run,
                                 const void *args, const void *patch, size_t len) {
  fcl_clear_error(ctx);
  fcl_op_begin(ctx);
  const bool cache = key->ok && ctx->plan_cache > 0;
  if (cache) {
    const fcl_plan *pl = fcl_plan_cache_find(ctx, key);
    if (pl) return ctx->plans_reused++, fcl_plan_replay_patched(ctx, pl, patch, len);
  }
  fcl_plan *pl = cache ? fcl_plan_new(ctx, false) : NULL;
  if (!pl) return run(ctx, args);
  const fcl_status s = fcl_plan_record(ctx, pl, true, run, args);
  ctx->plans_made++;
  if (s == FCL_OK && !pl->broken && !pl->device_data && fcl_plan_cache_put(ctx, key, pl))
    return FCL_OK;
  fcl_plan_free(pl);
  return s;
}
