/* The environment, read once when a context is created: every FCL_*
 * variable the library honours (README: Environment variables) and the
 * cache homes. This is the only file that calls getenv. */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* Set and not "0". */
static bool flag(const char *name, bool dflt) {
  const char *v = env(name);
  return v ? strcmp(v, "0") != 0 : dflt;
}

static void copy(char *dst, size_t n, const char *src) {
  snprintf(dst, n, "%s", src ? src : "");
}

/* $XDG_CACHE_HOME/flashcl/<leaf>, else $HOME/.cache/flashcl/<leaf>. */
static bool cache_home(const char *leaf, char *out, size_t n) {
  const char *xdg = env("XDG_CACHE_HOME"), *home = env("HOME");
  int k;
  if (xdg) k = snprintf(out, n, "%s/flashcl/%s", xdg, leaf);
  else if (home) k = snprintf(out, n, "%s/.cache/flashcl/%s", home, leaf);
  else return false;
  return k > 0 && (size_t)k < n;
}

bool fcl_options_tuning_db(char *out, size_t size) {
  const char *db = env("FCL_TUNING_DB");
  if (db && strcmp(db, "off") == 0) return false;
  if (db) {
    int k = snprintf(out, size, "%s", db);
    return k > 0 && (size_t)k < size;
  }
  return cache_home("tuning.db", out, size);
}

void fcl_options_read(fcl_options *o) {
  memset(o, 0, sizeof *o);
  copy(o->device, sizeof o->device, env("FCL_DEVICE"));
  o->log = flag("FCL_LOG", false);
  o->trace = flag("FCL_TRACE", false);
  copy(o->kernel_dir, sizeof o->kernel_dir, env("FCL_KERNEL_DIR"));
  copy(o->build_options, sizeof o->build_options, env("FCL_BUILD_OPTIONS"));
  const char *cache = env("FCL_CACHE_DIR");
  /* FCL_CACHE: unset, the cache where the driver keeps none (program.c);
   * 0, never; anything else, on every driver. */
  o->cache_forced = flag("FCL_CACHE", false);
  if (!flag("FCL_CACHE", true)) o->cache_dir[0] = '\0';
  else if (cache) copy(o->cache_dir, sizeof o->cache_dir, cache);
  else if (!cache_home("kernels", o->cache_dir, sizeof o->cache_dir)) o->cache_dir[0] = '\0';
  if (!fcl_options_tuning_db(o->tuning_db, sizeof o->tuning_db)) o->tuning_db[0] = '\0';
  const char *budget = env("FCL_LOOP_BUDGET"); /* testing the split paths */
  o->loop_budget = budget ? atol(budget) : -1;
  const char *cap = env("FCL_SCRATCH_CAP"); /* testing the segmented paths */
  o->scratch_cap = cap ? atol(cap) : -1;
  o->f32_tensor_cores = flag("FCL_F32_TENSOR_CORES", true);
  o->cpu_kernel = flag("FCL_CPU_KERNEL", true);
  o->mma_emulate = flag("FCL_MMA_EMULATE", false);
  o->disable_fastpath = flag("FCL_DISABLE_FASTPATH", false);
  o->command_buffer = flag("FCL_COMMAND_BUFFER", false);
  o->wgmma = flag("FCL_WGMMA", true);
  const char *alg = env("FCL_RWKV6_ALGORITHM");
  o->rwkv6_algorithm = !alg ? 0 : strcmp(alg, "recurrent") == 0 ? 1 : strcmp(alg, "chunked") == 0 ? 2 : 0;
  const char *prec = env("FCL_F32_PRECISION");
  o->f32_precision = !prec ? 0 : strcmp(prec, "high") == 0 ? 1 : strcmp(prec, "medium") == 0 ? 2 : 0;
}
