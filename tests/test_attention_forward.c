/* fcl_attention_forward against the double reference on $FCL_DEVICE: the
 * shapes of tests/attention_cases.h the forward suite runs (edge shapes,
 * masks, softcap, ALiBi, GQA/MQA, varlen, layouts, head dims, every dtype)
 * and a seeded batch of random combinations, each run through the harness
 * (op_attention_case.c). Inputs are rounded to the dtype before the
 * reference sees them. Each case also checks that bytes outside the output
 * views stay poison, that the inputs are untouched and that a row seeing no
 * key gives exactly 0 and -inf.
 *
 * Environment: FCL_DEVICE (device selector), FCL_TEST_SEED (random batch),
 * FCL_TEST_FILTER (run only cases whose name contains it; for debugging). */
#include "attention_cases.h"

#include <stdio.h>
#include <stdlib.h>

int main(void) {
  const double t_start = tu_now();
  fcl_context *ctx = oh_open_context();
  if (!ctx) return 1;
  const char *seed_env = getenv("FCL_TEST_SEED");
  const uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 20240601u;
  oh_attention_stats stats = {0};

  attention_run_table(ctx, attention_feature_cases, ATTENTION_COUNT(attention_feature_cases), 0,
                      &stats);
  attention_run_table(ctx, attention_headdim_cases, ATTENTION_COUNT(attention_headdim_cases), 0,
                      &stats);
  printf("random batch: seed %llu (set FCL_TEST_SEED to change)\n", (unsigned long long)seed);
  tu_rng rng;
  tu_rng_seed(&rng, seed);
  for (int i = 0; i < 40; ++i) {
    oh_attention_case c;
    char name[32];
    attention_random_case(&rng, 0, &c, name, sizeof name, i);
    const uint64_t s = tu_rng_next(&rng);
    if (oh_selected(c.name))
      oh_attention_case_run(ctx, &c, attention_mask_dtype(c.fwd), 0, s, &stats);
  }

  fcl_context_stats cs = {0, 0, 0};
  fcl_context_get_stats(ctx, &cs);
  printf("programs built %d, from cache %d, cache writes %d\n", cs.programs_built,
         cs.programs_from_cache, cs.cache_writes);
  fcl_context_destroy(ctx);
  printf("test_attention_forward: %d cases, %d failed, %.1f s\n", stats.run, stats.failed,
         tu_now() - t_start);
  return stats.failed || stats.run == 0 ? 1 : 0;
}
