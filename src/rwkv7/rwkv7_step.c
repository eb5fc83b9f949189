/* The RWKV7 step variant: the forward of short sequences (decoding, one
 * token a call), a work-group per (sequence, head, block of value columns)
 * with the state in VC-wide vectors, read once and written once
 * (cl/rwkv7/rwkv7_step.cl). Its descriptor (built-in parameters, checks,
 * search space) and its launches: up to RW_STEP_MAX_T positions each, the
 * state carried between them. */
#include "rwkv7/rwkv7.h"

#include <stdio.h>

typedef fcl_rwkv7_step_params params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static size_t budget(const fcl_device_info *dev) {
  return dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
}

/* Local memory: rw7_colsum's buffers (rwkv7_common.cl) for BV columns. */
static size_t step_bytes(const params *c) {
  const int bv = c->VS * c->VC;
  return c->KS > 1 ? 4 * (size_t)(c->KS + ceil_div(c->KS, 8)) * 2 * bv : 0;
}

/* Loop iterations of one work-item, counted as llvmpipe does (every
 * iteration of every loop), generously. */
static long step_iterations(int K, const params *c) {
  const long kr = ceil_div(K, c->KS), tm = RW_STEP_MAX_T, bv = c->VS * c->VC;
  const long colsum = c->KS > 1 ? 2 * c->VC + ceil_div(ceil_div(c->KS, 8) * 2 * bv, c->VS * c->KS) * 9 +
                                      2 * c->VC * (1 + ceil_div(c->KS, 8))
                                : 0;
  return 2 * kr * (1 + c->VC) + tm * (1 + kr + c->VC) + (tm + 1) * (1 + 2 * c->VC + kr * (1 + 2 * c->VC) + colsum + c->VC);
}

static void choose(const fcl_device_info *dev, int K, int V, params *c) {
  if (!dev->is_cpu) {
    /* Four rows of VC-wide vectors a work-item, blocks of 16 columns (as
     * rwkv6_step): B1 H32 K=V=64 is 128 work-groups of 64 work-items. */
    c->VC = V % 4 == 0 ? 4 : V % 2 == 0 ? 2 : 1;
    c->KS = ceil_div(K, 4);
    c->VS = 16 / c->VC;
  } else {
    /* Consecutive work-items on consecutive columns, which PoCL runs as
     * vector lanes; up to 64 rows a work-item (8 on llvmpipe). */
    c->VC = 1;
    c->KS = ceil_div(K, dev->is_llvmpipe ? 8 : 64);
    c->VS = 32;
  }
  while (c->VS > 1 && c->VS * c->VC >= 2 * V) c->VS /= 2;
  while (c->VS > 1 && (size_t)(c->VS * c->KS) > dev->max_wg) c->VS /= 2;
  while (c->KS > 1 && (size_t)(c->VS * c->KS) > dev->max_wg)
    c->KS = ceil_div(K, 2 * ceil_div(K, c->KS));
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const params *c = FCL_CPARAMS(params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  const char *bad = NULL;
  if (c->KS < 1 || c->VS < 1 || c->KS > K || (c->VC != 1 && c->VC != 2 && c->VC != 4) ||
      c->VC > V)
    bad = "a size out of range";
  else if ((size_t)c->VS * c->KS > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (c->VS * c->VC >= 2 * V && c->VS > 1)
    bad = "more value columns than the head has";
  else if (step_bytes(c) > budget(dev))
    bad = "local memory exceeded";
  else if (ceil_div(K, c->KS) * c->VC > 128)
    bad = "state block too large for registers";
  else if (dev->loop_budget > 0 && step_iterations(K, c) > dev->loop_budget * 3 / 4)
    bad = "more loop iterations than the device allows";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *c, fcl_config *cfg) {
  choose(dev, c->head_dim, c->head_dim_v, FCL_PARAMS(params, cfg));
}

static int axes(const fcl_tuning_class *c, fcl_axis *a) {
  (void)c;
  a[0] = (fcl_axis){"K_ROWS_PER_ITEM", 7, {1, 2, 4, 8, 16, 32, 64}};
  a[1] = (fcl_axis){"VS", 7, {1, 2, 4, 8, 16, 32, 64}};
  a[2] = (fcl_axis){"VC", 3, {1, 2, 4}};
  return 3;
}

static void point(const fcl_tuning_class *c, const int *v, fcl_config *cfg) {
  params *p = FCL_PARAMS(params, cfg);
  p->KS = ceil_div(c->head_dim, v[0]);
  p->VS = v[1], p->VC = v[2];
}

/* Past 64 floats of state a work-item a GPU spills; warps whole. */
static bool worth_trying(const fcl_device_info *dev, const fcl_tuning_class *c,
                         const fcl_config *cfg) {
  const params *p = FCL_CPARAMS(params, cfg);
  if (dev->is_cpu) return true;
  if (ceil_div(c->head_dim, p->KS) * p->VC > 64) return false;
  return fcl_whole_warps(dev, (size_t)p->VS * p->KS);
}

const fcl_variant fcl_variant_rwkv7_step = {
    "rwkv7_step", FCL_TUNING_RWKV7_RECURRENT, FCL_TOPS("rwkv7/rwkv7_step.cl"), {"K_DIM", "V_DIM"},
    FCL_RWKV_MAX_DIM, false, FCL_PARAM_COUNT(FCL_RWKV7_STEP_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV7_STEP_PARAMS), defaults, valid, axes, point, worth_trying, 0};

int fcl_rwkv7_step_positions(const fcl_rwkv7_desc *d) {
  return d->seqlen < 1 ? 1 : d->seqlen < RW_STEP_MAX_T ? (int)d->seqlen : RW_STEP_MAX_T;
}

fcl_status fcl_rwkv7_step_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                  const void *problem, bool *fallback) {
  const fcl_rwkv7_problem *p = problem;
  const fcl_rwkv7_desc *d = p->d;
  const fcl_rwkv7_args *t = &p->a;
  const params *c = FCL_CPARAMS(params, &pl->cfg);
  cl_kernel ks;
  fcl_status s;
  (void)fallback;
  if ((s = fcl_get_kernel(ctx, pl->cls.variant->tops, pl->options, "fcl_rwkv7_fwd_step", &ks)))
    return s;
  const int steps = fcl_rwkv7_step_positions(d);
  const int64_t nseg = d->seqlen > 0 ? (d->seqlen + steps - 1) / steps : 1;
  cl_mem carry = t->r->buffer;
  if (nseg > 1 && (s = fcl_scratch(ctx, 5, p->state_bytes, &carry))) return s;
  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads;
  cl_float scale = fcl_rwkv_scale(d->scale, d->head_dim_k);
  const cl_int base = fcl_rwkv_flags(p->varlen, d->reverse);
  cl_mem cu = p->varlen ? d->cu_seqlens : t->r->buffer;
  const size_t wg = (size_t)c->KS * c->VS, bv = (size_t)c->VS * c->VC;
  const size_t g[3] = {((size_t)d->head_dim_v + bv - 1) / bv * wg, (size_t)(d->batch * d->heads), 1};
  const size_t l[3] = {wg, 1, 1};
  for (int64_t si = 0; si < nseg; ++si) {
    const bool first = si == 0, last = si == nseg - 1;
    cl_mem in = first ? t->h0 : carry, out = last ? t->ht : carry;
    cl_int flags = base | (in ? RW_H0 : 0) | (out ? RW_HT : 0);
    cl_int p_begin = (cl_int)(si * steps), p_end = p_begin + steps;
    if (!in) in = t->r->buffer;
    if (!out) out = t->r->buffer;
    fcl_args a = FCL_ARGS(ks);
    FCL_ARG(&a, t->r->buffer); FCL_ARG(&a, t->w->buffer); FCL_ARG(&a, t->k->buffer);
    FCL_ARG(&a, t->v->buffer); FCL_ARG(&a, t->a->buffer); FCL_ARG(&a, t->b->buffer);
    FCL_ARG(&a, cu);
    fcl_arg_tensor(&a, t->r); fcl_arg_tensor(&a, t->w); fcl_arg_tensor(&a, t->k);
    fcl_arg_tensor(&a, t->v); fcl_arg_tensor(&a, t->a); fcl_arg_tensor(&a, t->b);
    FCL_ARG(&a, seqlen); FCL_ARG(&a, heads); FCL_ARG(&a, scale); FCL_ARG(&a, flags);
    FCL_ARG(&a, p_begin); FCL_ARG(&a, p_end);
    FCL_ARG(&a, in); FCL_ARG(&a, t->o->buffer); fcl_arg_tensor(&a, t->o); FCL_ARG(&a, out);
    if ((s = fcl_launch(ctx, ks, &a, g, l, "enqueueing rwkv7 step forward"))) return s;
  }
  return FCL_OK;
}
