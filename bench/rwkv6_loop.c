/* fa-bench, rwkv6-fwd in loop mode (--layers L, loop.h): the recurrent
 * inference step. Each layer has two f32 states [B, H, K, V]; step i reads
 * h0 from one and writes ht to the other (state[i % 2] -> state[(i+1) % 2]),
 * so each step carries on from the last. r, k, v, w, u and o are the case's
 * (rwkv6_bench.c), shared by every layer. The initial states are random
 * (bench_loop_states: the last layer's from its own seed).
 *
 * Check: the last layer's h0 is read back before the device-time step;
 * then its o and ht are compared, with the tolerances of the rwkv6-fwd
 * check, with ref_rwkv6_forward from that h0 (err(o): the larger of the
 * two errors). GB/s adds the state, read and written in f32, to the
 * tensors rwkv6-fwd counts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "loop.h"
#include "ref_rwkv6.h"
#include "rwkv6_bench.h"
#include "test_util.h"

typedef struct {
  fcl_rwkv6_desc d;
  fcl_tensor     r, k, v, w, o;
  cl_mem         u;
  const cl_mem  *state; /* its two states, in the loop's array */
} rlayer;

static fcl_status layer_call(fcl_context *ctx, const void *arg, int layer, int step) {
  const rlayer *c = (const rlayer *)arg + layer;
  return fcl_rwkv6_forward(ctx, &c->d, &c->r, &c->k, &c->v, &c->w, c->u, c->state[step & 1],
                           &c->o, c->state[(step + 1) & 1]);
}

/* --plans: layer l's two calls (h0 from state 0 or 1) planned once, run by
 * fcl_plan_run in turn. */
static fcl_status layer_plan_run(fcl_context *ctx, const void *arg, int layer, int step) {
  (void)ctx;
  return fcl_plan_run(((fcl_plan *const *)arg)[2 * layer + (step & 1)]);
}

static int plans_make(fcl_context *ctx, const rlayer *ls, int layers, fcl_plan **plans) {
  for (int l = 0; l < 2 * layers; l++) {
    const rlayer *c = &ls[l / 2];
    if (fcl_rwkv6_forward_plan(ctx, &c->d, &c->r, &c->k, &c->v, &c->w, c->u, c->state[l & 1],
                               &c->o, c->state[(l + 1) & 1], &plans[l])) {
      fprintf(stderr, "fa-bench: rwkv6-fwd --plans: fcl_rwkv6_forward_plan: %s\n",
              fcl_context_last_error(ctx));
      return -1;
    }
  }
  return 0;
}

static size_t state_elems(const rshape *s) { return (size_t)(s->b * s->h * s->k * s->v); }

/* Compares o and ht (now on the device) with the reference from h0 (f32,
 * host); the verdict, the error in r->err_o. */
static const char *check(fcl_context *ctx, const rshape *s, const rinputs *in, const float *h0,
                         cl_mem ht_buf, bench_row *r) {
  const size_t tok = rwkv6_tokens(s), ns = state_elems(s), nu = (size_t)(s->h * s->k);
  const size_t es = tu_dtype_size(s->dt);
  double *x[4] = {NULL}, *u = malloc(nu * sizeof *u), *h = malloc(ns * sizeof *h);
  double *o = malloc(tok * (size_t)s->v * sizeof *o), *ht = malloc(ns * sizeof *ht);
  void *raw = malloc((tok * (size_t)s->v * es > ns * 4 ? tok * (size_t)s->v * es : ns * 4) + 1);
  const char *verdict = "ERROR";
  int ok = 1;
  for (int i = R; i <= W; i++) {
    const size_t n = tok * (size_t)(i == V ? s->v : s->k);
    if ((x[i] = malloc(n * sizeof(double)))) bench_decode(in->x[i], s->dt, n, x[i]);
  }
  if (!u || !h || !o || !ht || !raw || !x[R] || !x[K] || !x[V] || !x[W]) {
    fprintf(stderr, "fa-bench: rwkv6-fwd --layers: out of host memory for the check\n");
    goto done;
  }
  bench_decode(in->u, s->dt, nu, u);
  for (size_t i = 0; i < ns; i++) h[i] = h0[i];
  const ref_rwkv6_problem p = {s->b, s->t, s->h, s->k, s->v, 0.0, 0, NULL};
  ref_rwkv6_forward(&p, x[R], x[K], x[V], x[W], u, h, o, ht);
  r->err_o = 0;
  if (bench_read(ctx, in->by[O], tok * (size_t)s->v * es, raw)) goto done;
  ok &= rwkv6_compare(s, "rwkv6-fwd --layers", "o", raw, s->dt, o, tok * (size_t)s->v, s->v, 0,
                      &r->err_o);
  if (bench_read(ctx, ht_buf, ns * sizeof(float), raw)) goto done;
  ok &= rwkv6_compare(s, "rwkv6-fwd --layers", "ht", raw, FCL_F32, ht, ns, s->v, 0, &r->err_o);
  verdict = ok ? "PASS" : "FAIL";
done:
  for (int i = 0; i < 4; i++) free(x[i]);
  free(u), free(h), free(o), free(ht), free(raw);
  return verdict;
}

int rwkv6_loop_case(fcl_context *ctx, const bench_args *a, int plans, const rshape *s,
                    const rinputs *in, bench_row *r) {
  const int layers = a->layers;
  const size_t ns = state_elems(s);
  rlayer *ls = calloc((size_t)layers, sizeof *ls);
  cl_mem *st = NULL;
  float *h0 = malloc(ns * sizeof *h0);
  fcl_plan **pl = plans ? calloc(2 * (size_t)layers, sizeof *pl) : NULL;
  int setup_failed = 1;
  r->bytes += 2.0 * (double)ns * sizeof(float); /* h0 read, ht written */
  if (plans) r->impl = "flashcl-plan";
  if (!ls || !h0 || (plans && !pl)) {
    fprintf(stderr, "fa-bench: rwkv6-fwd --layers: out of host memory\n");
    goto done;
  }
  if (!(st = bench_loop_states(ctx, "rwkv6-fwd", ns, layers))) goto done;
  setup_failed = 0;
  for (int l = 0; l < layers; l++) {
    rlayer *c = &ls[l];
    c->d = rwkv6_desc(s, s->b);
    c->r = rwkv6_view(in->bx[R], s, s->k), c->k = rwkv6_view(in->bx[K], s, s->k);
    c->v = rwkv6_view(in->bx[V], s, s->v), c->w = rwkv6_view(in->bx[W], s, s->k);
    c->o = rwkv6_view(in->by[O], s, s->v), c->u = in->bu, c->state = st + 2 * l;
  }
  bench_loop lp = {ctx, layer_call, ls, layers, 0};
  if (plans) lp.call = layer_plan_run, lp.arg = pl;
  r->check = "ERROR";
  if ((plans && plans_make(ctx, ls, layers, pl)) ||
      bench_loop_time(&lp, a->steps, a->kernels_per_call, r))
    goto failed;
  /* The device-time step is step lp.step: the last layer reads state[step % 2]. */
  const rlayer *last = &ls[layers - 1];
  cl_mem h0_buf = last->state[lp.step & 1], ht_buf = last->state[(lp.step + 1) & 1];
  if (bench_loop_state_step(&lp, a->check, h0_buf, h0, ns, in->by[O],
                            rwkv6_tokens(s) * (size_t)s->v * tu_dtype_size(s->dt), ht_buf, r))
    goto failed;
  r->check = a->check ? check(ctx, s, in, h0, ht_buf, r) : "SKIP";
  goto done;
failed:
  r->ms = r->wall_ms = r->host_ms = NAN;
done:
  bench_loop_states_free(st, layers);
  for (int l = 0; pl && l < 2 * layers; l++) fcl_plan_destroy(pl[l]);
  free(ls), free(h0), free(pl);
  return setup_failed;
}
