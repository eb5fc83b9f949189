/* fa-bench, decode in loop mode (--layers L, loop.h): L calls of
 * fcl_attention_kvcache a step, each on its own layer's k and v cache (of
 * the case's shape), with the same q, o, lse, cache_seqlens, block table
 * and (--append) k_new, v_new. The last layer's cache is the case's inputs
 * (decode.c), the others hold other random values (fixed seeds), so that
 * the check of the last layer's o after the device-time step also catches
 * a call that read another layer's cache. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "decode.h"
#include "loop.h"
#include "test_util.h"

static fcl_status layer_call(fcl_context *ctx, const void *arg, int layer, int step) {
  (void)step;
  return decode_call_run(ctx, (const decode_call *)arg + layer);
}

/* --plans: layer l's call planned once, run by fcl_plan_run. */
static fcl_status layer_plan_run(fcl_context *ctx, const void *arg, int layer, int step) {
  (void)ctx, (void)step;
  return fcl_plan_run(((fcl_plan *const *)arg)[layer]);
}

static int plans_make(fcl_context *ctx, const decode_call *calls, int layers, fcl_plan **plans) {
  for (int l = 0; l < layers; l++) {
    const decode_call *c = &calls[l];
    if (fcl_attention_kvcache_plan(ctx, &c->d, &c->q, &c->kc, &c->vc, c->append ? &c->kn : NULL,
                                   c->append ? &c->vn : NULL, &c->o, c->lse, &plans[l])) {
      fprintf(stderr, "fa-bench: decode --plans: fcl_attention_kvcache_plan: %s\n",
              fcl_context_last_error(ctx));
      return -1;
    }
  }
  return 0;
}

/* Layers 0 .. L-2's caches, two buffers a layer (k, v), from other seeds
 * than the last layer's; 0, or -1 with a message. */
static int other_layers_make(fcl_context *ctx, const dshape *s, int layers, cl_mem *caches) {
  const size_t kb = decode_cache_bytes(s, s->d, s->kf), vb = decode_cache_bytes(s, s->dv, s->vf);
  void *k = decode_cache_values(s, s->d, s->kf, 102);
  void *v = decode_cache_values(s, s->dv, s->vf, 103);
  cl_int err = k && v ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  for (int l = 0; l < layers - 1 && err == CL_SUCCESS; l++) {
    caches[2 * l] = bench_upload(ctx, k, kb, &err);
    if (err == CL_SUCCESS) caches[2 * l + 1] = bench_upload(ctx, v, vb, &err);
  }
  free(k), free(v);
  if (err != CL_SUCCESS)
    fprintf(stderr, "fa-bench: decode --layers %d: could not allocate the caches (%.3g GB "
            "each layer; OpenCL error %d)\n", layers, (double)(kb + vb) * 1e-9, err);
  return err == CL_SUCCESS ? 0 : -1;
}

int decode_loop_case(fcl_context *ctx, const bench_args *a, int plans, const dshape *s,
                     const dinputs *in, bench_row *r) {
  const int layers = a->layers;
  cl_mem *caches = calloc(2 * (size_t)layers, sizeof *caches);
  decode_call *calls = calloc((size_t)layers, sizeof *calls);
  fcl_plan **pl = plans ? calloc((size_t)layers, sizeof *pl) : NULL;
  int setup_failed = 1;
  if (plans) r->impl = "flashcl-plan";
  if (!caches || !calls || (plans && !pl)) {
    fprintf(stderr, "fa-bench: decode --layers: out of host memory\n");
    goto done;
  }
  if (other_layers_make(ctx, s, layers, caches)) goto done;
  setup_failed = 0;
  for (int l = 0; l < layers; l++) {
    dinputs layer = *in; /* the same q, o, lse, seqlens, block table, k_new, v_new */
    if (l < layers - 1) layer.bkc = caches[2 * l], layer.bvc = caches[2 * l + 1];
    decode_call_make(s, &layer, &calls[l]);
  }
  bench_loop lp = {ctx, layer_call, calls, layers, 0};
  if (plans) lp.call = layer_plan_run, lp.arg = pl;
  r->check = "ERROR";
  if ((plans && plans_make(ctx, calls, layers, pl)) || bench_loop_time(&lp, a->steps, a->kernels_per_call, r) ||
      (a->check && decode_poison_outputs(ctx, s, in)) || bench_loop_device_step(&lp, r)) {
    r->ms = r->wall_ms = r->host_ms = NAN;
    goto done;
  }
  r->check = a->check ? decode_check_outputs(ctx, s, in, r) : "SKIP";
done:
  for (int i = 0; caches && i < 2 * layers; i++)
    if (caches[i]) clReleaseMemObject(caches[i]);
  for (int l = 0; pl && l < layers; l++) fcl_plan_destroy(pl[l]);
  free(caches), free(calls), free(pl);
  return setup_failed;
}
