/* The RWKV6 step variant: the forward of short sequences (decoding, one
 * token a call), a work-group per (sequence, head, block of value columns)
 * with the state in VC-wide vectors (cl/rwkv6/rwkv6_step.cl). Its
 * descriptor (built-in parameters, checks, search space) and its launches:
 * up to RW_STEP_MAX_T positions each, the state carried between them. */
#include "rwkv6/rwkv6.h"

#include <stdio.h>

typedef fcl_rwkv6_step_params params;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static size_t budget(const fcl_device_info *dev) {
  return dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
}

/* Local memory: the partial sums of every step, row group and column. */
static size_t step_bytes(const params *c) {
  return c->KS > 1 ? 4 * (size_t)RW_STEP_MAX_T * c->KS * c->VS * c->VC : 0;
}

/* Loop iterations of one work-item, counted as llvmpipe does (every
 * iteration of every loop). */
static long step_iterations(int K, const params *c) {
  const long kr = ceil_div(K, c->KS), tm = RW_STEP_MAX_T, cols = tm * (1 + c->VC);
  long levels = 0;
  for (int w = 1; w < c->KS; w *= 2) ++levels;
  return 3 * kr * (1 + c->VC) + cols + kr * (1 + cols) + cols * (1 + levels) + cols;
}

static void choose(const fcl_device_info *dev, int K, int V, params *c) {
  if (!dev->is_cpu) {
    /* Four rows of VC-wide vectors a work-item, blocks of 16 columns: a
     * work-group per 16 columns of a head (B1 H32 K=V=64: 128 of 64
     * work-items), each work-item's loads all in flight at once. */
    c->VC = V % 4 == 0 ? 4 : V % 2 == 0 ? 2 : 1;
    c->KS = ceil_div(K, 4);
    c->VS = 16 / c->VC;
  } else {
    /* Consecutive work-items on consecutive columns, which PoCL runs as
     * vector lanes; up to 64 rows a work-item (8 on llvmpipe, as the
     * recurrent kernel). */
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

static bool worth_trying(const fcl_device_info *dev, const fcl_tuning_class *c,
                         const fcl_config *cfg) {
  const params *p = FCL_CPARAMS(params, cfg);
  if (dev->is_cpu) return true;
  /* Past 64 floats of state a work-item a GPU spills (as the recurrent
   * kernel's blocks). */
  if (ceil_div(c->head_dim, p->KS) * p->VC > 64) return false;
  return fcl_whole_warps(dev, (size_t)p->VS * p->KS);
}

const fcl_variant fcl_variant_rwkv6_step = {
    "rwkv6_step", FCL_TUNING_RWKV6_RECURRENT, FCL_TOPS("rwkv6/rwkv6_step.cl"), {"K_DIM", "V_DIM"},
    FCL_RWKV_MAX_DIM, false, FCL_PARAM_COUNT(FCL_RWKV6_STEP_PARAMS),
    FCL_PARAM_NAMES(FCL_RWKV6_STEP_PARAMS), defaults, valid, axes, point, worth_trying, 0};

int fcl_rwkv6_step_positions(const fcl_rwkv6_desc *d) {
  return d->seqlen < RW_STEP_MAX_T ? (int)d->seqlen : RW_STEP_MAX_T;
}

fcl_status fcl_rwkv6_step_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                  const void *problem, bool *fallback) {
  const fcl_rwkv6_problem *p = problem;
  const fcl_rwkv6_desc *d = p->d;
  const fcl_rwkv6_args *a = &p->a;
  (void)fallback;
  const params *c = FCL_CPARAMS(params, &pl->cfg);
  const fcl_variant *kd = pl->cls.variant;
  cl_kernel ks;
  fcl_status s = fcl_get_kernel(ctx, kd->tops, pl->options, "fcl_rwkv6_fwd_step",
                                &ks);
  if (s) return s;
  const int steps = fcl_rwkv6_step_positions(d);
  const int64_t nseg = (d->seqlen + steps - 1) / steps;
  cl_mem carry = a->r->buffer;
  if (nseg > 1 && (s = fcl_scratch(ctx, 5, p->state_bytes, &carry))) return s;

  cl_int seqlen = (cl_int)d->seqlen, heads = (cl_int)d->heads;
  cl_float scale = fcl_rwkv_scale(d->scale, d->head_dim_k);
  const cl_int base_flags = fcl_rwkv_flags(p->varlen, d->reverse);
  cl_mem cu = p->varlen ? d->cu_seqlens : a->r->buffer;
  const size_t wg = (size_t)c->KS * (size_t)c->VS, bv = (size_t)c->VS * (size_t)c->VC;
  const size_t global[3] = {((size_t)d->head_dim_v + bv - 1) / bv * wg,
                            (size_t)(d->batch * d->heads), 1};
  const size_t local[3] = {wg, 1, 1};
  for (int64_t si = 0; si < nseg; ++si) {
    /* The carry may be read and written by one launch: each element is
     * read, then written, by one work-item. */
    const bool first = si == 0, last = si == nseg - 1;
    cl_mem in = first ? a->h0 : carry, out = last ? a->ht : carry;
    cl_int flags = base_flags | (in ? RW_H0 : 0) | (out ? RW_HT : 0);
    cl_int p_begin = (cl_int)(si * steps);
    if (!in) in = a->r->buffer;
    if (!out) out = a->r->buffer;
    fcl_args g = FCL_ARGS(ks);
    FCL_ARG(&g, a->r->buffer); FCL_ARG(&g, a->k->buffer); FCL_ARG(&g, a->v->buffer);
    FCL_ARG(&g, a->w->buffer); FCL_ARG(&g, a->u); FCL_ARG(&g, in); FCL_ARG(&g, a->o->buffer);
    FCL_ARG(&g, out); FCL_ARG(&g, cu);
    fcl_arg_tensor(&g, a->r); fcl_arg_tensor(&g, a->k); fcl_arg_tensor(&g, a->v);
    fcl_arg_tensor(&g, a->w); fcl_arg_tensor(&g, a->o);
    FCL_ARG(&g, seqlen); FCL_ARG(&g, heads); FCL_ARG(&g, scale);
    FCL_ARG(&g, flags); FCL_ARG(&g, p_begin);
    if ((s = fcl_launch(ctx, ks, &g, global, local, "enqueueing rwkv6 step forward"))) return s;
  }
  return FCL_OK;
}
