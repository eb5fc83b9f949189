/* fa-bench, rwkv7-fwd in loop mode (--layers L, loop.h): the recurrent
 * inference step, as rwkv6_loop.c runs RWKV6's. Each layer has two f32
 * states [B, H, K, V]; step i reads h0 from one and writes ht to the other
 * (state[i % 2] -> state[(i+1) % 2]), so each step carries on from the
 * last. r, w, k, v, a, b and o are the case's (rwkv7_bench.c), shared by
 * every layer; the states come from bench_loop_states (the last layer's
 * from its own seed, so that the check also catches a call that read or
 * wrote another layer's state).
 *
 * Check: the last layer's h0 is read back before the device-time step;
 * then its o and ht are compared, with rwkv7-fwd's tolerances, with
 * ref_rwkv7_forward from that h0 (err(o): the larger of the two errors).
 * GB/s counts what rwkv7-fwd counts (the state read and written in f32
 * included). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "loop.h"
#include "ref_rwkv7.h"
#include "test_util.h"
#include "rwkv7_bench.h"

typedef struct {
  fcl_rwkv7_desc d;
  fcl_tensor     x[IB + 1], o; /* r, w, k, v, a, b */
  const cl_mem  *state; /* its two states, in the loop's array */
} r7layer;

static fcl_status layer_call(fcl_context *ctx, const void *arg, int layer, int step) {
  const r7layer *c = (const r7layer *)arg + layer;
  return fcl_rwkv7_forward(ctx, &c->d, &c->x[IR], &c->x[IW], &c->x[IK], &c->x[IV], &c->x[IA],
                           &c->x[IB], c->state[step & 1], &c->o, c->state[(step + 1) & 1]);
}

/* o and ht (on the device) against the reference from h0 (host f32). */
static const char *check(fcl_context *ctx, const r7shape *s, const r7inputs *in,
                         const float *h0, cl_mem ht_buf, bench_row *r) {
  const size_t nrow = rwkv7_rows(s, s->b), ns = rwkv7_state_n(s, s->b);
  const size_t es = tu_dtype_size(s->dt), no = nrow * (size_t)s->v;
  double *x[IB + 1] = {NULL}, *h = malloc(ns * sizeof *h), *o = malloc(no * sizeof *o);
  double *ht = malloc(ns * sizeof *ht);
  void *raw = malloc((no * es > ns * 4 ? no * es : ns * 4) + 1);
  const char *verdict = "ERROR";
  int ok = h && o && ht && raw;
  for (int i = IR; ok && i <= IB; i++) {
    const size_t n = nrow * (size_t)(i == IV ? s->v : s->k);
    if ((ok = (x[i] = malloc(n * sizeof(double))) != NULL)) bench_decode(in->x[i], s->dt, n, x[i]);
  }
  if (!ok) {
    fprintf(stderr, "fa-bench: rwkv7-fwd --layers: out of host memory for the check\n");
    goto done;
  }
  for (size_t e = 0; e < ns; e++) h[e] = h0[e];
  const ref_rwkv7_problem p = {s->b, s->t, s->h, s->k, s->v, 0.0, 0, NULL};
  const ref_rwkv7_in rin = {x[IR], x[IW], x[IK], x[IV], x[IA], x[IB], h};
  ref_rwkv7_forward(&p, &rin, o, ht);
  r->err_o = 0;
  if (bench_read(ctx, in->by[OO], no * es, raw)) goto done;
  ok = rwkv7_compare(s, "rwkv7-fwd --layers", "o", raw, s->dt, o, no, tu_tol_rwkv6(s->dt),
                     &r->err_o);
  if (bench_read(ctx, ht_buf, ns * sizeof(float), raw)) goto done;
  ok &= rwkv7_compare(s, "rwkv7-fwd --layers", "ht", raw, FCL_F32, ht, ns,
                      tu_tol_rwkv6_state(), &r->err_o);
  verdict = ok ? "PASS" : "FAIL";
done:
  for (int i = IR; i <= IB; i++) free(x[i]);
  free(h), free(o), free(ht), free(raw);
  return verdict;
}

int rwkv7_loop_case(fcl_context *ctx, const bench_args *a, const r7shape *s,
                    const r7inputs *in, bench_row *r) {
  const int layers = a->layers;
  const size_t ns = rwkv7_state_n(s, s->b);
  r7layer *ls = calloc((size_t)layers, sizeof *ls);
  cl_mem *st = NULL;
  float *h0 = malloc(ns * sizeof *h0);
  int setup_failed = 1;
  if (!ls || !h0) {
    fprintf(stderr, "fa-bench: rwkv7-fwd --layers: out of host memory\n");
    goto done;
  }
  if (!(st = bench_loop_states(ctx, "rwkv7-fwd", ns, layers))) goto done;
  setup_failed = 0;
  for (int l = 0; l < layers; l++) {
    r7layer *c = &ls[l];
    c->d = rwkv7_desc(s);
    for (int i = IR; i <= IB; i++) c->x[i] = rwkv7_view(in->bx[i], s, i == IV ? s->v : s->k);
    c->o = rwkv7_view(in->by[OO], s, s->v);
    c->state = st + 2 * l;
  }
  bench_loop lp = {ctx, layer_call, ls, layers, 0};
  r->check = "ERROR";
  if (bench_loop_time(&lp, a->steps, a->kernels_per_call, r)) goto failed;
  /* The device-time step is step lp.step: the last layer reads state[step % 2]. */
  const r7layer *last = &ls[layers - 1];
  cl_mem h0_buf = last->state[lp.step & 1], ht_buf = last->state[(lp.step + 1) & 1];
  if (bench_loop_state_step(&lp, a->check, h0_buf, h0, ns, in->by[OO],
                            rwkv7_rows(s, s->b) * (size_t)s->v * tu_dtype_size(s->dt), ht_buf, r))
    goto failed;
  r->check = a->check ? check(ctx, s, in, h0, ht_buf, r) : "SKIP";
  goto done;
failed:
  r->ms = r->wall_ms = r->host_ms = NAN;
done:
  bench_loop_states_free(st, layers);
  free(ls), free(h0);
  return setup_failed;
}
