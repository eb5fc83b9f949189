/* The tensor-core backward (cl/attention/attention_bwd_mma.cl): its
 * descriptor and its three launches (delta, dQ, dK/dV), in order on the
 * queue. On wherever the forward's probe passed, for f16 and bf16
 * (FCL_DISABLE_FASTPATH=1 turns both off). */
#include "attention/attention.h"

#include <stdio.h>

/* Warps of MT m16 tiles of rows each (queries for dQ, keys for dK/dV),
 * columns a tile, tiles in flight (2: the next one loads while this one is
 * worked on). */
#define PARAMS(X) X(WARPS) X(BLOCK_N) X(MT) X(STAGES)
FCL_PARAM_STRUCT(bmma_params, PARAMS);

/* The larger of the dQ and dK/dV kernels' local memory (the kernel's
 * DQ_SIZE, DKDV_SIZE and their flags, lse and delta), and what the
 * emulation adds. */
static size_t local_bytes(const fcl_device_info *dev, const fcl_tuning_class *cls,
                          const bmma_params *c) {
  const size_t ldk = FCL_MMA16_LD(cls->head_dim), ldv = FCL_MMA16_LD(cls->head_dim_v);
  const size_t bm = 16 * (size_t)c->WARPS * (size_t)c->MT, n = (size_t)c->BLOCK_N;
  const size_t stages = (size_t)c->STAGES, tiles = stages * n * (ldk + ldv);
  const size_t nfw = 4 * stages * (size_t)FCL_MMA_NFW(c->BLOCK_N);
  const size_t dq_tiles = bm * (ldk + ldv) > tiles ? bm * (ldk + ldv) : tiles;
  const size_t dkdv_tiles = bm * ldv > tiles ? bm * ldv : tiles;
  const size_t dq = 2 * dq_tiles + nfw;
  const size_t dkdv = 2 * (bm * ldk + dkdv_tiles) + 8 * stages * n + 2 * nfw;
  return (dq > dkdv ? dq : dkdv) + (dev->mma_emulate ? 1024u * (size_t)c->WARPS : 0);
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  bmma_params *c = FCL_PARAMS(bmma_params, cfg);
  /* H100, f16 B4 H32, N 1024 to 16384, causal and not: up to head dim 64,
   * tiles of 32 keys or queries with the next one loading (1.05-1.10x 64
   * and one stage); past it 48 in one stage, the largest that fits (two
   * stages of 32 do not: 1.06-1.12x 32 in one). Two m16 tiles a warp
   * measured 0.95-1.0x one at D64 and spill at D128: fa-tune may try them. */
  const bool small = FCL_MMA16_PAD(cls->head_dim) <= 64 && FCL_MMA16_PAD(cls->head_dim_v) <= 64;
  c->WARPS = 4, c->MT = 1, c->STAGES = small ? 2 : 1, c->BLOCK_N = small ? 32 : 48;
  while (local_bytes(dev, cls, c) + 256 > dev->local_mem) {
    if (c->STAGES > 1) c->STAGES = 1;
    else if (c->BLOCK_N > 16) c->BLOCK_N -= 16;
    else if (c->WARPS > 1) c->WARPS /= 2;
    else break; /* none fits: valid() says so and the portable kernels run */
  }
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const bmma_params *c = FCL_CPARAMS(bmma_params, cfg);
  const char *bad = NULL;
  if (c->WARPS < 1 || c->WARPS > 8 || c->BLOCK_N < 16 || c->BLOCK_N > 128 ||
      c->BLOCK_N % 16 || c->MT < 1 || c->MT > 2 || c->STAGES < 1 || c->STAGES > 2)
    bad = "WARPS in 1..8, BLOCK_N a multiple of 16 in 16..128, MT and STAGES 1 or 2";
  else if ((size_t)c->WARPS * 32 > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (local_bytes(dev, cls, c) + 256 > dev->local_mem)
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"WARPS", 4, {1, 2, 4, 8}};
  a[1] = (fcl_axis){"BLOCK_N", 8, {16, 32, 48, 64, 80, 96, 112, 128}};
  a[2] = (fcl_axis){"MT", 2, {1, 2}};
  a[3] = (fcl_axis){"STAGES", 2, {1, 2}};
  return 4;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  (void)cls;
  bmma_params *c = FCL_PARAMS(bmma_params, cfg);
  c->WARPS = v[0], c->BLOCK_N = v[1], c->MT = v[2], c->STAGES = v[3];
}

static const char *const files[] = {"attention/attention_abi.h", "common/dtype.cl",
                                    "attention/attention_common.cl", "common/mma_warp.cl",
                                    "common/mma_common.cl", "attention/attention_bwd_mma.cl"};
const fcl_variant fcl_variant_attention_bwd_mma = {
    "attention_bwd_mma", FCL_TUNING_ATTENTION_BWD, files, (int)FCL_COUNT(files),
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, true, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, NULL};

fcl_status fcl_attention_bwd_mma_applies(fcl_context *ctx, const fcl_attention_desc *d,
                                         fcl_dtype dtype, bool *yes) {
  if (dtype == FCL_F32) return *yes = false, FCL_OK;
  return fcl_attention_mma_applies(ctx, d, dtype, yes);
}

fcl_status fcl_attention_bwd_mma_launch(fcl_context *ctx, const fcl_attention_plan *pl,
                                        const fcl_attention_problem *p, bool *fallback) {
  const fcl_attention_desc *d = p->d;
  const bmma_params *c = FCL_CPARAMS(bmma_params, &pl->cfg);
  const fcl_variant *v = pl->cls.variant;
  const size_t es = fcl_dtype_size(p->dtype);
  const int vec = d->head_dim % 8 == 0 && d->head_dim_v % 8 == 0 &&
                  fcl_tensor_aligned(p->q, es, p->varlen, 8) &&
                  fcl_tensor_aligned(p->k, es, p->varlen, 8) &&
                  fcl_tensor_aligned(p->v, es, p->varlen, 8) &&
                  fcl_tensor_aligned(p->dout, es, p->varlen, 8) &&
                  fcl_tensor_aligned(p->o, es, p->varlen, 8);
  const int general = d->softcap > 0 || d->alibi_slopes || !(p->sc.qk_scale > 0);
  char opts[640];
  snprintf(opts, sizeof opts, "%s -DMMA_VEC=%d -DMMA_GENERAL=%d", pl->options, vec, general);
  const size_t nstat = (size_t)(d->heads_q * p->total_q);
  /* dQ and dK/dV built without and with the handling of inf and NaN in
   * masked products (nonfinite_flags.c), before anything is enqueued. */
  cl_kernel k_delta, k_dq[2], k_dkdv[2], scan[2];
  cl_mem delta, nf_flags;
  bool built = fcl_get_kernel(ctx, v->files, v->nfiles, opts, "fcl_attention_bwd_mma_delta",
                              &k_delta) == FCL_OK &&
               fcl_nonfinite_kernel(ctx, p->dtype, scan) == FCL_OK;
  for (int i = 0; i < 2 && built; ++i) {
    char nf_opts[700];
    snprintf(nf_opts, sizeof nf_opts, "%s -DFCL_NONFINITE=%d", opts, i);
    built = fcl_get_kernel(ctx, v->files, v->nfiles, nf_opts, "fcl_attention_bwd_mma_dq",
                           &k_dq[i]) == FCL_OK &&
            fcl_get_kernel(ctx, v->files, v->nfiles, nf_opts, "fcl_attention_bwd_mma_dkdv",
                           &k_dkdv[i]) == FCL_OK;
  }
  if (!built) {
    fcl_log(ctx, "fast path: the backward does not build, using the portable kernels: %s",
            ctx->message);
    fcl_clear_error(ctx);
    *fallback = true;
    return FCL_OK;
  }
  fcl_status s;
  if ((s = fcl_scratch(ctx, 0, nstat * sizeof(float), &delta))) return s;

  const fcl_attention_scalars *sc = &p->sc;
  const cl_int flags = fcl_attention_flags(p);
  cl_int varlen = p->varlen;
  cl_mem cuq_b = p->varlen ? d->cu_seqlens_q : p->q->buffer;
  cl_mem cuk_b = p->varlen ? d->cu_seqlens_k : p->q->buffer;

  fcl_args a = {k_delta, 0, CL_SUCCESS};
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
  const size_t wg = (size_t)c->WARPS * 32, bm = (size_t)c->WARPS * 16 * (size_t)c->MT;
  size_t gq[3] = {((size_t)d->seqlen_q + bm - 1) / bm * wg, 1, (size_t)(d->batch * d->heads_q)};
  size_t gk[3] = {((size_t)d->seqlen_k + bm - 1) / bm * wg, 1, (size_t)(d->batch * d->heads_kv)};
  size_t lw[3] = {wg, 1, 1};
  fcl_log(ctx, "attention backward: tensor cores, %d warps of %d rows, %d columns per tile, "
          "%d stage%s%s%s", c->WARPS, 16 * c->MT, c->BLOCK_N, c->STAGES, c->STAGES > 1 ? "s" : "",
          vec ? ", cp.async" : "", general ? ", general scores" : "");
  if ((s = fcl_launch(ctx, k_delta, &a, gq, lw, "enqueueing backward delta (mma)")) ||
      (s = fcl_nonfinite_flags(ctx, scan, nfin, 3, (int)d->heads_kv, &nf_flags)))
    return s;
  for (int i = 0; i < 2; ++i) {
    fcl_args ag[2] = {{k_dq[i], 0, CL_SUCCESS}, {k_dkdv[i], 0, CL_SUCCESS}};
    for (int j = 0; j < 2; ++j) {
      fcl_attention_bwd_args(&ag[j], p, delta, flags);
      FCL_ARG(&ag[j], nf_flags);
    }
    FCL_ARG(&ag[0], p->dq->buffer); fcl_arg_tensor(&ag[0], p->dq);
    FCL_ARG(&ag[1], p->dk->buffer); fcl_arg_tensor(&ag[1], p->dk);
    FCL_ARG(&ag[1], p->dv->buffer); fcl_arg_tensor(&ag[1], p->dv);
    if ((s = fcl_launch(ctx, k_dq[i], &ag[0], gq, lw, "enqueueing backward dq (mma)")) ||
        (s = fcl_launch(ctx, k_dkdv[i], &ag[1], gk, lw, "enqueueing backward dk/dv (mma)")))
      return s;
  }
  return FCL_OK;
}
