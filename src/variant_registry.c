/* The registry of kernel variants (flashcl_tuning.h's fcl_variant_count,
 * fcl_variant_at, fcl_variant_find): every variant of every operation, made
 * of the operations' tables, in tuning order. This file stands above the
 * operations (src/README.md): with tuning_runs.c, the only one that knows
 * them all. A new variant is a row in its operation's table; a new
 * operation's tables are added to the list below. */
#include "attention/attention.h"
#include "rwkv6/rwkv6.h"
#include "rwkv7/rwkv7.h"

#include <string.h>

/* Every operation's tables: the registry of variants is made of their
 * rows, so that a new variant is one new row. */
static const fcl_variant_table *const tables[] = {
    &fcl_attention_fwd_table, &fcl_attention_bwd_table, &fcl_rwkv6_fwd_table,
    &fcl_rwkv6_bwd_table,     &fcl_kvcache_table,       &fcl_rwkv7_fwd_table,
    &fcl_rwkv7_bwd_table};

/* Tuning order: what the library runs most first, so that a budget spent
 * early (builds cost seconds a candidate on some drivers) leaves the less
 * used classes untuned, not the forward: the attention forwards, the
 * attention backward, the RWKV6 step (decoding) and recurrent forward, the
 * recurrent backward, the chunked RWKV6 backward and forward, the kvcache
 * operation's decode variants (FCL_TUNING_ATTENTION_DECODE,
 * docs/layout.md's names), the RWKV7 forward (chunked, recurrent) and backward; within
 * one, the tables' order. What is not named
 * here comes last. */
static const fcl_tuning_op order[] = {
    FCL_TUNING_ATTENTION_FWD, FCL_TUNING_ATTENTION_BWD,    FCL_TUNING_RWKV6_RECURRENT,
    FCL_TUNING_RWKV6_BWD,     FCL_TUNING_RWKV6_BWD_CHUNKED, FCL_TUNING_RWKV6_CHUNKED,
    FCL_TUNING_ATTENTION_DECODE, FCL_TUNING_RWKV7_RECURRENT, FCL_TUNING_RWKV7_BWD};

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
