/* fa-bench: checks flashcl's operations against double-precision references
 * and times them (median device time of N runs from OpenCL profiling
 * events). Ops: attention forward (fwd) and backward (bwd), in attention.c,
 * with the unfused baseline of baseline.c beside fwd (--baseline); RWKV6
 * forward and backward (rwkv6-fwd, rwkv6-bwd), in rwkv6_bench.c; attention
 * against a KV cache (decode: fcl_attention_kvcache), in decode.c; RWKV7
 * forward and backward (rwkv7-fwd, rwkv7-bwd), in rwkv7_bench.c. Loop
 * mode (--layers: decode and rwkv6-fwd called as a model's decode step
 * calls them, loop.c) times them per call, host and device, beside the
 * driver's bare launch (launch_cost.c). The device's peaks (peak.c) are
 * measured first; output.c prints the rows (a table, CSV or JSON;
 * bench/py/plot.py draws the JSON). args.c parses. */
#define FCL_STATIC_LINKING_ONLY /* fcl_tuning_override, for --params */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "bench.h"
#include "output.h"
#include "peak.h"
#include "flashcl_tuning.h"

static int g_failed = 0;

/* --params VARIANT:PARAMS: the override for every call on ctx. */
static int set_params(fcl_context *ctx, const char *arg) {
  const char *colon = strchr(arg, ':');
  char name[64];
  if (!colon || (size_t)(colon - arg) >= sizeof name) {
    fprintf(stderr, "fa-bench: --params: expected VARIANT:NAME=v,..., got '%s'\n", arg);
    return 1;
  }
  memcpy(name, arg, (size_t)(colon - arg));
  name[colon - arg] = '\0';
  const fcl_variant *v = fcl_variant_find(name);
  if (!v) {
    fprintf(stderr, "fa-bench: --params: no kernel variant '%s'\n", name);
    return 1;
  }
  if (fcl_tuning_override(ctx, v, colon + 1) != FCL_OK) {
    fprintf(stderr, "fa-bench: --params: %s\n", fcl_context_last_error(ctx));
    return 1;
  }
  return 0;
}

static void emit(const bench_row *r) {
  g_failed |= bench_failed(r->check);
  out_row(r);
}

int main(int argc, char **argv) {
  bench_args a;
  int rc = bench_parse_args(argc, argv, &a);
  if (rc) return rc > 0 ? 0 : 2;

  fcl_context *ctx = NULL;
  fcl_status st = fcl_context_create(a.device, &ctx);
  if (st != FCL_OK) {
    fprintf(stderr, "fa-bench: fcl_context_create(%s): %s\n", a.device ? a.device : "NULL",
            fcl_context_last_error(NULL));
    return 1;
  }
  /* Device times come from the library's profiling events: on, where they
   * are an option (loop mode turns them off for its timed steps). */
  bench_set_timing(ctx, 1);
  if (a.f32_precision &&
      fcl_context_set_option(ctx, FCL_OPTION_F32_PRECISION, a.f32_precision) != FCL_OK) {
    fprintf(stderr, "fa-bench: --f32-precision: %s\n", fcl_context_last_error(ctx));
    fcl_context_destroy(ctx);
    return 2;
  }
  if (a.params && set_params(ctx, a.params)) {
    fcl_context_destroy(ctx);
    return 2;
  }
  const char *device = fcl_context_device_name(ctx);
  bench_peak peak = {NAN, NAN, 0};
  if (a.peak) peak = bench_measure_peak(ctx);
  if (a.peak_gbps > 0) peak.gbps = a.peak_gbps, peak.gbps_given = 1;
  int decode = 0;
  for (int i = 0; i < a.n_ops; i++) decode |= a.ops[i] == OP_DECODE;
  out_begin(a.output, device, &peak, decode, a.layers > 0);
  for (int i = 0; i < a.n_ops; i++) {
    const bench_op op = a.ops[i];
    g_failed |= op == OP_FWD || op == OP_BWD ? bench_attention(ctx, &a, op, emit)
              : op == OP_DECODE            ? bench_kvcache(ctx, &a, emit)
              : op == OP_RWKV7_FWD || op == OP_RWKV7_BWD ? bench_rwkv7(ctx, &a, op, emit)
                                           : bench_rwkv6(ctx, &a, op, emit);
  }
  out_end();
  fcl_context_destroy(ctx);
  return g_failed;
}
