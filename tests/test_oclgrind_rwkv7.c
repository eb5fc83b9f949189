/* The RWKV7 kernels under Oclgrind (tests/reliability.cmake runs it as
 * test_oclgrind_rwkv7 through oclgrind_check.cmake, which fails on any
 * report): the step kernel, the fused recurrent forward, the backward
 * (checkpoints, reverse pass, sums) and the chunked forward (the chunks'
 * factors, the state pass, the outputs), with parameters forced to a GPU's
 * paths (rows of a column summed across work-items in local memory:
 * rw7_colsum with one and with two stage-1 sums; several column groups a
 * work-group; value blocks that do not divide V; chunks and key tiles
 * that do not divide T and K), on tiny shapes: h0/ht,
 * dht/dh0, reverse, varlen with an empty sequence, f32, f16, bf16. Its
 * CTest entry sets FCL_SCRATCH_CAP=1, so every backward runs in segments
 * of one chunk, each summed apart. Views fill their buffers exactly, so a
 * read or write past one leaves the buffer and Oclgrind reports it;
 * results are checked against the double reference (op_rwkv7.c).
 *
 * Linked with the static library, so that the library's OpenCL calls go
 * through tests/oclgrind/shadow_shim.c as test_oclgrind's do, and the
 * tuning override is at hand.
 *
 * Environment: FCL_DEVICE (default "oclgrind"), FCL_TEST_FILTER,
 * FCL_OCLGRIND_KERNELS (kernels that must have been launched). */
#include "oclgrind/shadow_shim.h"
#include "op_rwkv7.h"
#define FCL_STATIC_LINKING_ONLY
#include "flashcl_tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  /* overrides (NULL: the device's parameters) */
  const char   *step, *fwd, *bwd, *chunk, *chunk_mma;
  oh_rwkv7_case c;
} ocase;

#define F32 OH_DT(FCL_F32)
#define F16 OH_DT(FCL_F16)
#define BF16 OH_DT(FCL_BF16)
#define C(s, f, b, ...) {s, f, b, NULL, NULL, {.exact = 1, __VA_ARGS__}}
/* The chunked forward, forced (the override picks it at any length where
 * the bound allows chunks: models' decays, w >= -exp(-0.5)). */
#define CH(p, m, ...)                                                               \
  {NULL, NULL, NULL, p, m,                                                          \
   {.exact = 1, .fwd_only = 1, .decay = REF_RWKV7_W_MODEL,                          \
    .decay_lower_bound = -0.60653066f, __VA_ARGS__}}
static const ocase cases[] = {
  C("KS=4,VS=2,VC=4", NULL, NULL, .name = "step T=3 reverse K 16 V 8", .dtypes = F16,
    .dk = 16, .dv = 8, .b = 2, .t = 3, .h = 1, .reverse = 1, .fwd_only = 1),
  C("KS=9,VS=2,VC=2", NULL, NULL, .name = "step varlen 2,0,1 K 9 V 5 h0 NULL", .dtypes = BF16,
    .dk = 9, .dv = 5, .nseq = 3, .lens = {2, 0, 1}, .h = 2, .no_h0 = 1, .fwd_only = 1),
  C(NULL, "TC=3,KS=4,VS=2,VC=2", "TC=2,KS=4,VC=2", .name = "recurrent T=7 K 9 V 6",
    .dtypes = F32, .dk = 9, .dv = 6, .b = 1, .t = 7, .h = 2),
  C(NULL, "TC=2,KS=9,VS=1,VC=3", "TC=3,KS=9,VC=4",
    .name = "recurrent varlen 5,0,3 reverse K 17 V 7", .dtypes = BF16, .dk = 17, .dv = 7,
    .nseq = 3, .lens = {5, 0, 3}, .h = 1, .reverse = 1, .no_dht = 1),
  CH("TC=12,BK=24,BV=20,HV=24,WG=40", NULL, .name = "chunked T=29 K 40 V 52", .dtypes = F32,
     .dk = 40, .dv = 52, .b = 1, .t = 29, .h = 1),
  CH("TC=12,BK=24,BV=20,HV=24,WG=40", NULL, .name = "chunked varlen 14,0,3 reverse h0 NULL",
     .dtypes = BF16, .dk = 40, .dv = 52, .nseq = 3, .lens = {14, 0, 3}, .h = 1, .reverse = 1,
     .no_h0 = 1),
  /* The outputs on tensor cores where they run (FCL_MMA_EMULATE=1: the
   * CTest entry test_oclgrind_rwkv7_mma); elsewhere the forced variant
   * does not apply and the recurrent kernel runs it. */
  CH(NULL, "TC=16,BK=16,HV=16,WG=32",
     .name = "chunked mma T=37 K 32 V 48 reverse", .dtypes = BF16, .dk = 32, .dv = 48, .b = 1,
     .t = 37, .h = 1, .reverse = 1),
};

/* Whether name contains one of the |-separated parts of FCL_TEST_FILTER. */
static int selected(const char *name) {
  const char *f = getenv("FCL_TEST_FILTER");
  if (!f || !*f) return 1;
  for (const char *p = f; *p;) {
    const size_t len = strcspn(p, "|");
    char part[128];
    if (len > 0 && len < sizeof part) {
      memcpy(part, p, len);
      part[len] = '\0';
      if (strstr(name, part)) return 1;
    }
    p += len + (p[len] == '|');
  }
  return 0;
}

static fcl_status force(fcl_context *ctx, const ocase *o) {
  fcl_status s = fcl_tuning_override(ctx, fcl_variant_find("rwkv7_step"), o->step);
  if (s == FCL_OK) s = fcl_tuning_override(ctx, fcl_variant_find("rwkv7_recurrent"), o->fwd);
  if (s == FCL_OK) s = fcl_tuning_override(ctx, fcl_variant_find("rwkv7_bwd"), o->bwd);
  if (s == FCL_OK) s = fcl_tuning_override(ctx, fcl_variant_find("rwkv7_chunked"), o->chunk);
  if (s == FCL_OK)
    s = fcl_tuning_override(ctx, fcl_variant_find("rwkv7_chunked_mma"), o->chunk_mma);
  return s;
}

int main(void) {
  const double t0 = tu_now();
  const char *dev = getenv("FCL_DEVICE");
  fcl_context *ctx = NULL;
  if (fcl_context_create(dev && *dev ? dev : "oclgrind", &ctx) != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  int runs = 0, failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const ocase *o = &cases[i];
    if (!selected(o->c.name)) continue;
    for (int t = FCL_F32; t <= FCL_BF16; ++t) {
      if (!(o->c.dtypes & OH_DT(t))) continue;
      ++runs;
      if (force(ctx, o) != FCL_OK) {
        printf("FAIL %s: override: %s\n", o->c.name, fcl_context_last_error(ctx));
        ++failed;
        continue;
      }
      failed += !oh_rwkv7_case_run(ctx, &o->c, (fcl_dtype)t, 0);
    }
  }
  fcl_context_destroy(ctx);
  shadow_shim_finish();
  printf("kernels launched:\n");
  shadow_shim_print_launches("  ");
  int missing = 0;
  char list[1024];
  snprintf(list, sizeof list, "%s", getenv("FCL_OCLGRIND_KERNELS") ? getenv("FCL_OCLGRIND_KERNELS") : "");
  for (char *k = strtok(list, " ;"); k; k = strtok(NULL, " ;"))
    if (shadow_shim_launches(k) == 0) printf("FAIL: kernel %s was not launched\n", k), ++missing;
  printf("test_oclgrind_rwkv7: %d runs, %d failed; %.1f s\n", runs, failed, tu_now() - t0);
  return failed || runs == 0 || shadow_shim_refused() || missing ? 1 : 0;
}
