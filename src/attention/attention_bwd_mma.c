/* The tensor-core backward (cl/attention/attention_bwd_mma*.cl): its
 * descriptor and its three launches (delta, dQ, dK/dV), in order on the
 * queue. On wherever the forward's probe passed, for f16 and bf16
 * (FCL_DISABLE_FASTPATH=1 turns both off). */
#include "attention/attention.h"

#include <stdio.h>

/* dQ's work-group and walk: warps of MT m16 tiles of query rows each, key
 * columns a tile, tiles in flight (2: the next one loads while this one is
 * worked on); dK/dV's the same with KV_ (rows are keys, tiles queries; MT
 * shared). The two kernels want different ones (H100 D=128: dQ 4 warps
 * and tiles of 16 in two stages, dK/dV 2 warps and 48 in one). */
#define PARAMS(X) X(WARPS) X(BLOCK_N) X(MT) X(STAGES) X(KV_WARPS) X(KV_BLOCK_N) X(KV_STAGES)
FCL_PARAM_STRUCT(bmma_params, PARAMS);

/* One kernel's shape (dQ's or dK/dV's). */
typedef struct {
  int warps, n, stages;
} kernel_shape;
static kernel_shape dq_shape(const bmma_params *c) {
  return (kernel_shape){c->WARPS, c->BLOCK_N, c->STAGES};
}
static kernel_shape kv_shape(const bmma_params *c) {
  return (kernel_shape){c->KV_WARPS, c->KV_BLOCK_N, c->KV_STAGES};
}

/* Local memory of the dQ or the dK/dV kernel (the kernel's DQ_SIZE,
 * DKDV_SIZE and their flags, lse and delta), and what the emulation adds. */
static size_t local_bytes(const fcl_device_info *dev, const fcl_tuning_class *cls, int mt,
                          kernel_shape k, bool dkdv) {
  const size_t ldk = FCL_MMA16_LD(cls->head_dim), ldv = FCL_MMA16_LD(cls->head_dim_v);
  const size_t bm = 16 * (size_t)k.warps * (size_t)mt, n = (size_t)k.n;
  const size_t stages = (size_t)k.stages, tiles = stages * n * (ldk + ldv);
  const size_t nfw = 4 * stages * (size_t)FCL_MMA_NFW(k.n);
  const size_t emu = dev->mma_emulate ? 1024u * (size_t)k.warps : 0;
  if (!dkdv) return 2 * (bm * (ldk + ldv) > tiles ? bm * (ldk + ldv) : tiles) + nfw + emu;
  return 2 * (bm * ldk + (bm * ldv > tiles ? bm * ldv : tiles)) + 8 * stages * n + 2 * nfw + emu;
}
static bool fits(const fcl_device_info *dev, const fcl_tuning_class *cls, int mt, kernel_shape k,
                 bool dkdv) {
  return local_bytes(dev, cls, mt, k, dkdv) + 256 <= dev->local_mem;
}

/* Shrinks a kernel's shape until it fits (or nothing is left to shrink). */
static void shrink(const fcl_device_info *dev, const fcl_tuning_class *cls, int mt, int *warps,
                   int *n, int *stages, bool dkdv) {
  while (!fits(dev, cls, mt, (kernel_shape){*warps, *n, *stages}, dkdv)) {
    if (*stages > 1) *stages = 1;
    else if (*n > 16) *n -= 16;
    else if (*warps > 1) *warps /= 2;
    else break; /* none fits: valid() says so and the portable kernels run */
  }
}

/* Also the configuration of the wgmma row's kernels for heads with inf or NaN. */
void fcl_attention_bwd_mma_defaults(const fcl_device_info *dev, const fcl_tuning_class *cls,
                                    fcl_config *cfg) {
  bmma_params *c = FCL_PARAMS(bmma_params, cfg);
  /* The fastest per kernel on the H100 (docs/defaults.md, "Attention
   * backward on tensor cores"): up to head dim 64 both kernels take 4
   * warps and tiles of 32 with the next one loading; past it dQ takes 4
   * warps and tiles of 16 in two stages, dK/dV 2 warps and 48 in one
   * stage. Two m16 tiles a warp paid nothing at D=64 and spill at D=128
   * (an override can still set MT=2). */
  const bool small = FCL_MMA16_PAD(cls->head_dim) <= 64 && FCL_MMA16_PAD(cls->head_dim_v) <= 64;
  c->MT = 1;
  c->WARPS = 4, c->BLOCK_N = small ? 32 : 16, c->STAGES = 2;
  c->KV_WARPS = small ? 4 : 2, c->KV_BLOCK_N = small ? 32 : 48, c->KV_STAGES = small ? 2 : 1;
  shrink(dev, cls, c->MT, &c->WARPS, &c->BLOCK_N, &c->STAGES, false);
  shrink(dev, cls, c->MT, &c->KV_WARPS, &c->KV_BLOCK_N, &c->KV_STAGES, true);
}

static const char *bad_shape(const fcl_device_info *dev, const fcl_tuning_class *cls, int mt,
                             kernel_shape k, bool dkdv) {
  if (k.warps < 1 || k.warps > 8 || k.n < 16 || k.n > 128 || k.n % 16 || k.stages < 1 ||
      k.stages > 2)
    return dkdv ? "KV_WARPS in 1..8, KV_BLOCK_N a multiple of 16 in 16..128, KV_STAGES 1 or 2"
                : "WARPS in 1..8, BLOCK_N a multiple of 16 in 16..128, STAGES 1 or 2";
  if ((size_t)k.warps * 32 > dev->max_wg) return "work-group larger than the device allows";
  if (!fits(dev, cls, mt, k, dkdv))
    return dkdv ? "local memory exceeded (dK/dV)" : "local memory exceeded (dQ)";
  return NULL;
}

const char *fcl_attention_bwd_mma_bad(const fcl_device_info *dev, const fcl_tuning_class *cls,
                                      const fcl_config *cfg) {
  const bmma_params *c = FCL_CPARAMS(bmma_params, cfg);
  const char *bad = c->MT < 1 || c->MT > 2 ? "MT 1 or 2" : NULL;
  if (!bad) bad = bad_shape(dev, cls, c->MT, dq_shape(c), false);
  if (!bad) bad = bad_shape(dev, cls, c->MT, kv_shape(c), true);
  return bad;
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const char *bad = fcl_attention_bwd_mma_bad(dev, cls, cfg);
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

/* MT stays as the defaults have it: 2 never paid on the H100
 * (docs/defaults.md) and would double the space. */
static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"WARPS", 4, {1, 2, 4, 8}};
  a[1] = (fcl_axis){"BLOCK_N", 8, {16, 32, 48, 64, 80, 96, 112, 128}};
  a[2] = (fcl_axis){"STAGES", 2, {1, 2}};
  a[3] = (fcl_axis){"KV_WARPS", 4, {1, 2, 4, 8}};
  a[4] = (fcl_axis){"KV_BLOCK_N", 8, {16, 32, 48, 64, 80, 96, 112, 128}};
  a[5] = (fcl_axis){"KV_STAGES", 2, {1, 2}};
  return 6;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  (void)cls;
  bmma_params *c = FCL_PARAMS(bmma_params, cfg);
  c->WARPS = v[0], c->BLOCK_N = v[1], c->STAGES = v[2];
  c->KV_WARPS = v[3], c->KV_BLOCK_N = v[4], c->KV_STAGES = v[5];
}

static const char *const tops[] = {"attention/attention_bwd_mma_dkdv.cl", NULL};
const fcl_variant fcl_variant_attention_bwd_mma = {
    "attention_bwd_mma", FCL_TUNING_ATTENTION_BWD, tops,
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, true, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), fcl_attention_bwd_mma_defaults, valid, axes, point, NULL, 0};

fcl_status fcl_attention_bwd_mma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_attention_problem *p = problem;
  bool yes = false;
  fcl_status s =
      p->dtype == FCL_F32 ? FCL_OK : fcl_attention_mma_applies(ctx, p->d, p->dtype, &yes);
  *fit = fcl_fit_if(yes);
  return s;
}

/* Enqueues delta, then dQ and dK/dV in both builds (FCL_NONFINITE 0, 1)
 * of the program kn names: the runner of this row and of the wgmma one
 * (attention_bwd_wgmma.c), which differ in their dQ and dK/dV kernels. */
fcl_status fcl_attention_bwd_mma_run(fcl_context *ctx, const fcl_variant_plan *pl,
                                     const fcl_attention_problem *p,
                                     const fcl_attention_bwd_kernels *kn, bool *fallback) {
  const fcl_attention_desc *d = p->d;
  const size_t es = fcl_dtype_size(p->dtype);
  const int vec = d->head_dim % 8 == 0 && d->head_dim_v % 8 == 0 &&
                  fcl_tensor_aligned(p->q, es, p->varlen, 8) &&
                  fcl_tensor_aligned(p->k, es, p->varlen, 8) &&
                  fcl_tensor_aligned(p->v, es, p->varlen, 8) &&
                  fcl_tensor_aligned(p->dout, es, p->varlen, 8) &&
                  fcl_tensor_aligned(p->o, es, p->varlen, 8);
  if (kn->needs_cp_async && !vec) {
    fcl_log(ctx, "attention backward: q, k, v, o or dout not in 16-byte rows for %s; the next "
                 "kernels", kn->what);
    *fallback = true;
    return FCL_OK;
  }
  const int general = d->softcap > 0 || d->alibi_slopes || !(p->sc.qk_scale > 0);
  char opts[640];
  snprintf(opts, sizeof opts, "%s -DMMA_VEC=%d -DMMA_GENERAL=%d%s", pl->options, vec, general,
           kn->options);
  const size_t nstat = (size_t)(d->heads_q * p->total_q);
  /* dQ and dK/dV built without and with the handling of inf and NaN in
   * masked products (nonfinite_flags.c), before anything is enqueued. */
  cl_kernel k_delta, k_dq[2], k_dkdv[2], scan[2];
  cl_mem delta, nf_flags;
  fcl_status s = fcl_get_kernel(ctx, kn->tops, opts, "fcl_attention_bwd_mma_delta",
                                &k_delta);
  if (s == FCL_OK) s = fcl_nonfinite_kernel(ctx, p->dtype, scan);
  for (int i = 0; i < 2 && s == FCL_OK; ++i) {
    char nf_opts[700];
    snprintf(nf_opts, sizeof nf_opts, "%s -DFCL_NONFINITE=%d", opts, i);
    s = fcl_get_kernel(ctx, kn->tops, nf_opts, kn->dq[i].name, &k_dq[i]);
    if (s == FCL_OK)
      s = fcl_get_kernel(ctx, kn->tops, nf_opts, kn->dkdv[i].name, &k_dkdv[i]);
  }
  if (s) {
    char what[64];
    snprintf(what, sizeof what, "the %s backward", kn->what);
    return fcl_tuning_unbuilt(ctx, pl->row->variant, s, what, fallback);
  }
  if ((s = fcl_scratch(ctx, 0, nstat * sizeof(float), &delta))) return s;

  const fcl_attention_scalars *sc = &p->sc;
  const cl_int flags = fcl_attention_flags(p);
  cl_int varlen = p->varlen;
  cl_mem cuq_b = p->varlen ? d->cu_seqlens_q : p->q->buffer;
  cl_mem cuk_b = p->varlen ? d->cu_seqlens_k : p->q->buffer;

  fcl_args a = FCL_ARGS(k_delta);
  FCL_ARG(&a, p->o->buffer); FCL_ARG(&a, p->dout->buffer); FCL_ARG(&a, delta);
  FCL_ARG(&a, cuq_b); FCL_ARG(&a, cuk_b);
  fcl_arg_tensor(&a, p->o); fcl_arg_tensor(&a, p->dout);
  FCL_ARG(&a, sc->stat_sb); FCL_ARG(&a, sc->stat_sh); FCL_ARG(&a, sc->seqlen_q);
  FCL_ARG(&a, sc->seqlen_k); FCL_ARG(&a, sc->heads_q); FCL_ARG(&a, varlen);

  /* The B operands of masked products: K (dS K), Q (dS^T Q), dO (P^T dO);
   * flags per kv head. */
  const fcl_nf_input nfin[3] = {
      {p->k, p->varlen, p->total_k, d->seqlen_k, d->heads_kv, d->head_dim, 1},
      {p->q, p->varlen, p->total_q, d->seqlen_q, d->heads_q, d->head_dim, sc->group},
      {p->dout, p->varlen, p->total_q, d->seqlen_q, d->heads_q, d->head_dim_v, sc->group}};
  const fcl_attention_bwd_kernel *q0 = &kn->dq[0], *q1 = &kn->dq[1];
  const fcl_attention_bwd_kernel *k0 = &kn->dkdv[0], *k1 = &kn->dkdv[1];
  fcl_log(ctx,
          "attention backward: %s; dQ %d warps, %d rows, tiles of %d, %d stage(s); dK/dV %d "
          "warps, %d keys, tiles of %d, %d stage(s); heads with inf or NaN: dQ %d warps, %d rows, "
          "dK/dV %d warps, %d keys%s%s",
          kn->what, q0->warps, q0->rows, q0->n, q0->stages, k0->warps, k0->rows, k0->n,
          k0->stages, q1->warps, q1->rows, k1->warps, k1->rows, vec ? ", cp.async" : "",
          general ? ", general scores" : "");
  const size_t wd = (size_t)q1->warps * 32, bd = (size_t)q1->rows;
  size_t gd[3] = {((size_t)d->seqlen_q + bd - 1) / bd * wd, 1, (size_t)(d->batch * d->heads_q)};
  size_t ld[3] = {wd, 1, 1};
  if ((s = fcl_launch(ctx, k_delta, &a, gd, ld, "enqueueing backward delta (mma)")) ||
      (s = fcl_nonfinite_flags(ctx, scan, nfin, 3, (int)d->heads_kv, 0, &nf_flags)))
    return s;
  for (int i = 0; i < 2; ++i) {
    const size_t wq = (size_t)kn->dq[i].warps * 32, bq = (size_t)kn->dq[i].rows;
    size_t gq[3] = {((size_t)d->seqlen_q + bq - 1) / bq * wq, 1,
                    (size_t)(d->batch * d->heads_q)};
    size_t lq[3] = {wq, 1, 1};
    const size_t wk = (size_t)kn->dkdv[i].warps * 32, bk = (size_t)kn->dkdv[i].rows;
    size_t gk[3] = {((size_t)d->seqlen_k + bk - 1) / bk * wk, 1,
                    (size_t)(d->batch * d->heads_kv)};
    size_t lk[3] = {wk, 1, 1};
    fcl_args ag[2] = {FCL_ARGS(k_dq[i]), FCL_ARGS(k_dkdv[i])};
    for (int j = 0; j < 2; ++j) {
      fcl_attention_bwd_args(&ag[j], p, delta, flags);
      FCL_ARG(&ag[j], nf_flags);
    }
    FCL_ARG(&ag[0], p->dq->buffer); fcl_arg_tensor(&ag[0], p->dq);
    FCL_ARG(&ag[1], p->dk->buffer); fcl_arg_tensor(&ag[1], p->dk);
    FCL_ARG(&ag[1], p->dv->buffer); fcl_arg_tensor(&ag[1], p->dv);
    if ((s = fcl_launch(ctx, k_dq[i], &ag[0], gq, lq, "enqueueing backward dq")) ||
        (s = fcl_launch(ctx, k_dkdv[i], &ag[1], gk, lk, "enqueueing backward dk/dv")))
      return s;
  }
  return FCL_OK;
}

fcl_status fcl_attention_bwd_mma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback) {
  const fcl_attention_problem *p = problem;
  const bmma_params *c = FCL_CPARAMS(bmma_params, &pl->cfg);
  const fcl_attention_bwd_kernel dq = {"fcl_attention_bwd_mma_dq", c->WARPS,
                                       16 * c->WARPS * c->MT, c->BLOCK_N, c->STAGES};
  const fcl_attention_bwd_kernel kv = {"fcl_attention_bwd_mma_dkdv", c->KV_WARPS,
                                       16 * c->KV_WARPS * c->MT, c->KV_BLOCK_N, c->KV_STAGES};
  const fcl_attention_bwd_kernels kn = {tops, "", "tensor cores", false,
                                        {dq, dq}, {kv, kv}};
  return fcl_attention_bwd_mma_run(ctx, pl, p, &kn, fallback);
}
