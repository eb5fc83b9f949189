/* The chunked RWKV6 with its value-column products on NVIDIA tensor cores
 * (cl/rwkv6/rwkv6_chunk_out_mma.cl): the forward's output and the
 * backward's dv, and the chunk-boundary states (rwkv6_chunk_state_mma.cl).
 * Which problems they take, their descriptors and launches. The
 * backward's dr, dk, dw come from rwkv6_chunk_bwd.cl with its intra-chunk
 * sums on tensor cores (rwkv6_chunk_bwd_mma.cl), in the same program.
 * f16 and bf16 are operands as stored; f32 splits each operand into two
 * bf16 parts (3 products each, mma_common.cl), whose 16-bit tiles then
 * take twice the local memory ("parts" below). */
#include "rwkv6/rwkv6.h"

#include <stddef.h>
#include <stdio.h>

/* TC the chunk, BK the output kernel's key tile; the state pass's tile of
 * HK rows by HV columns, its steps in flight SST, and SEG its runs of
 * chunks side by side where its tiles leave compute units idle
 * (state_launch; the launch's alone: no build macro). */
#define PARAMS(X) X(TC) X(BK) X(HK) X(HV) X(SST) X(SEG)
FCL_PARAM_STRUCT(mma_params, PARAMS);
/* The backward's: BV is the dr dk dw kernel's value tile. */
#define BWD_PARAMS(X) X(TC) X(BK) X(HK) X(HV) X(SST) X(SEG) X(BV)
FCL_PARAM_STRUCT(bwd_params, BWD_PARAMS);
_Static_assert(offsetof(bwd_params, SEG) == offsetof(mma_params, SEG), "a common prefix");
#define HOST_PARAMS (1u << 5) /* SEG */

static int imin(int a, int b) { return a < b ? a : b; }
/* 16-bit tiles an operand takes: 2 where f32 is split. */
static size_t parts_of(const fcl_tuning_class *cls) { return cls->dtype == FCL_F32 ? 2 : 1; }

/* Local memory of the output kernel (rwkv6_chunk_out_mma.cl, emulation's
 * scratch included) and of the state pass. */
static size_t out_bytes(const fcl_device_info *dev, const fcl_tuning_class *cls,
                        const mma_params *c) {
  const size_t tc = (size_t)c->TC, bk = (size_t)c->BK, ldk = bk + 8;
  const size_t ldv = (size_t)cls->head_dim_v + 8, parts = parts_of(cls);
  const size_t nsub = tc / 16, warps = tc / 16, nblk = nsub > 1 ? nsub * (nsub - 1) / 2 : 1;
  const size_t v16 = 4 * ((parts * tc * ldv + 1) / 2);
  const size_t pool = 4 * 5 * tc * bk > v16 ? 4 * 5 * tc * bk : v16;
  /* the diagonal blocks (4 * 256 * warps bytes) share the qt16, kq16 tiles */
  return pool + 2 * parts * (2 * tc * ldk + nblk * 16 * ldk + bk * ldv) +
         4 * bk * (nsub * (3 + nsub) + 2) + (dev->mma_emulate ? 1024 * warps : 0);
}
/* ... and of the state pass (rwkv6_chunk_state_mma.cl). */
static size_t state_bytes(const fcl_device_info *dev, const fcl_tuning_class *cls,
                          const mma_params *c) {
  const size_t sb = c->TC < 32 ? (size_t)c->TC : 32, hk = (size_t)c->HK, hv = (size_t)c->HV;
  /* a, w, b as stored, SST steps of each, except a and w of split f32
   * tiles of more than 32 rows (RW_AW_REGS: to registers); split, b's
   * 16-bit parts. */
  const size_t split = parts_of(cls) - 1, sst = (size_t)c->SST;
  const size_t esize = fcl_dtype_size(cls->dtype), aw = split && hk > 32 ? 0 : 2 * hk;
  const size_t staged = esize * sst * sb * (aw + hv + 8) + split * 4 * sb * (hv + 8);
  return staged + 4 * sb * (hk + 8) + 4 * hk +
         (dev->mma_emulate ? 1024 * (hk / 16) : 0);
}
/* The largest of 64, 32, 16 dividing n. */
static int tile_of(int n) { return n % 64 == 0 ? 64 : n % 32 == 0 ? 32 : 16; }

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  mma_params *c = FCL_PARAMS(mma_params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  /* Chunks of 32 where K or V is 128: what fa-tune chose on the H100 for
   * every K=V=128 class it tuned (bf16, T 1024 and 16384, forward and
   * backward: TC=32 BK=16). Their checkpoints take twice the memory (K V
   * 2 bytes a chunk). The figures behind this function's choices:
   * docs/defaults.md, "RWKV6 chunked on tensor cores". */
  const bool wide = K >= 128 || V >= 128;
  c->TC = wide ? 32 : 64, c->BK = !wide && K % 32 == 0 ? 32 : 16;
  /* Runs side by side past T = 4096, where few sequence-heads leave the
   * walk's latency exposed, as a rule (measured faster there than one
   * walk or two runs). */
  c->HK = tile_of(K), c->HV = tile_of(V), c->SST = 2, c->SEG = cls->bucket >= 3 ? 8 : 1;
  if (cls->dtype == FCL_F32) {
    /* Split f32: chunks as fa-tune chose on the H100 for the backward at
     * K=V=64 (T 4096) and 128 (T 1024, 16384), faster than the shrunken
     * 16-bit defaults. Past T = 4096 (few sequence-heads, as a rule)
     * state tiles of 32: the pass walks a sequence's chunks one after
     * another, so more tiles side by side pay (at T 4096 the larger tiles
     * were faster). Runs side by side measured slower for f32. */
    c->TC = 32, c->BK = 16, c->SEG = 1;
    if (cls->bucket >= 3) c->HK = imin(c->HK, 32), c->HV = imin(c->HV, 32);
  }
  while (out_bytes(dev, cls, c) > fcl_rwkv_local_budget(dev) && (c->BK > 16 || c->TC > 16)) {
    if (c->BK > 16) c->BK /= 2;
    else c->TC /= 2;
  }
  while (state_bytes(dev, cls, c) > fcl_rwkv_local_budget(dev) && (c->HK > 16 || c->HV > 16)) {
    if (c->HK >= c->HV && c->HK > 16) c->HK /= 2; /* split f32 */
    else c->HV /= 2;
  }
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const mma_params *c = FCL_CPARAMS(mma_params, cfg);
  const int K = cls->head_dim, V = cls->head_dim_v;
  const char *bad = NULL;
  if (c->TC < 16 || c->TC > 64 || c->TC % 16 || c->BK < 16 || c->BK % 16 || K % c->BK)
    bad = "TC 16, 32 or 64, BK a multiple of 16 dividing K";
  else if (K % 16 || V % 16 || V > 128)
    bad = "K and V multiples of 16, V at most 128";
  else if (c->HK < 16 || c->HK % 16 || K % c->HK || c->HV < 16 || c->HV % 16 || V % c->HV ||
           c->SST < 2 || c->SST > 3 || c->SEG < 1 || c->SEG > 64)
    bad = "HK and HV multiples of 16 dividing K and V, SST 2 or 3, SEG 1 to 64";
  else if ((size_t)c->HK * 2 > dev->max_wg || (size_t)c->TC * 2 > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (out_bytes(dev, cls, c) > fcl_rwkv_local_budget(dev) ||
           state_bytes(dev, cls, c) > fcl_rwkv_local_budget(dev))
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"TC", 3, {16, 32, 64}};
  a[1] = (fcl_axis){"BK", 3, {16, 32, 64}};
  a[2] = (fcl_axis){"HK", 3, {16, 32, 64}};
  a[3] = (fcl_axis){"HV", 4, {16, 32, 64, 128}};
  a[4] = (fcl_axis){"SST", 2, {2, 3}};
  a[5] = (fcl_axis){"SEG", 5, {1, 2, 4, 8, 16}};
  return 6;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  mma_params *c = FCL_PARAMS(mma_params, cfg);
  c->TC = v[0], c->BK = v[1];
  c->HK = imin(v[2], cls->head_dim);
  c->HV = imin(v[3], cls->head_dim_v);
  c->SST = v[4], c->SEG = v[5];
}

/* Local memory of the dr dk dw kernel with its products on tensor cores
 * (its first phase: RW_DK_P1 of rwkv6_chunk_bwd_mma.cl) and, emulated,
 * the warps' scratch. */
static size_t dk_bytes(const fcl_device_info *dev, const fcl_tuning_class *cls, int tc, int bk,
                       int bv) {
  const size_t p1 = parts_of(cls) * (size_t)(tc + bk) * (size_t)(bv + 8) + (size_t)(bk * bv / 4);
  return fcl_rwkv6_chunk_dk_bytes(tc, bk, p1) + (dev->mma_emulate ? 1024 * (size_t)(tc / 16) : 0);
}

/* The dr dk dw kernel's value tile: the widest that fits. */
static int bwd_bv(const fcl_device_info *dev, const fcl_tuning_class *cls, int tc, int bk) {
  int bv = imin(cls->head_dim_v, 64);
  while (bv > 16 && dk_bytes(dev, cls, tc, bk, bv) > fcl_rwkv_local_budget(dev)) bv /= 2;
  return bv;
}

static void bwd_defaults(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         fcl_config *cfg) {
  defaults(dev, cls, cfg);
  bwd_params *c = FCL_PARAMS(bwd_params, cfg);
  while (dk_bytes(dev, cls, c->TC, c->BK, 16) > fcl_rwkv_local_budget(dev) && c->TC > 16)
    c->TC /= 2;
  c->BV = bwd_bv(dev, cls, c->TC, c->BK);
  if (cls->dtype == FCL_F32) c->BV = imin(c->BV, 16); /* fa-tune's choice, as above */
}

static bool bwd_valid(const fcl_device_info *dev, const fcl_tuning_class *cls,
                      const fcl_config *cfg, char *why, size_t why_size) {
  const bwd_params *c = FCL_CPARAMS(bwd_params, cfg);
  if (!valid(dev, cls, cfg, why, why_size)) return false;
  const char *bad = NULL;
  if (c->BV < 16 || c->BV % 16 || c->BV > cls->head_dim_v) bad = "BV a multiple of 16 up to V";
  else if (dk_bytes(dev, cls, c->TC, c->BK, c->BV) > fcl_rwkv_local_budget(dev))
    bad = "local memory exceeded (dr dk dw)";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int bwd_axes(const fcl_tuning_class *cls, fcl_axis *a) {
  const int n = axes(cls, a);
  a[n] = (fcl_axis){"BV", 3, {16, 32, 64}};
  return n + 1;
}

static void bwd_point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  point(cls, v, cfg);
  FCL_PARAMS(bwd_params, cfg)->BV = imin(v[6], cls->head_dim_v);
}

const fcl_variant fcl_variant_rwkv6_chunked_mma = {
    "rwkv6_chunked_mma", FCL_TUNING_RWKV6_CHUNKED, FCL_TOPS("rwkv6/rwkv6_chunk_out_mma.cl"),
    {"K_DIM", "V_DIM"}, 128, false, FCL_PARAM_COUNT(PARAMS), FCL_PARAM_NAMES(PARAMS),
    defaults, valid, axes, point, NULL, HOST_PARAMS};
/* The backward: rwkv6_chunk_bwd.cl after its tensor-core products
 * (rwkv6_chunk_variants.c says why both are named). */
const fcl_variant fcl_variant_rwkv6_bwd_chunked_mma = {
    "rwkv6_bwd_chunked_mma", FCL_TUNING_RWKV6_BWD_CHUNKED,
    FCL_TOPS("rwkv6/rwkv6_chunk_bwd_mma.cl", "rwkv6/rwkv6_chunk_bwd.cl"), {"K_DIM", "V_DIM"},
    128, false, FCL_PARAM_COUNT(BWD_PARAMS), FCL_PARAM_NAMES(BWD_PARAMS), bwd_defaults,
    bwd_valid, bwd_axes, bwd_point, NULL, HOST_PARAMS};

fcl_status fcl_rwkv6_chunk_mma_applies(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                       fcl_dtype dtype, bool *yes) {
  *yes = false;
  /* Loop budgets are the portable kernels'. f32 runs on bf16 operands. */
  if (d->head_dim_k % 16 || d->head_dim_v % 16 || d->head_dim_k > 128 ||
      d->head_dim_v > 128 || ctx->info.loop_budget > 0)
    return FCL_OK;
  return fcl_mma_ready(ctx, fcl_rwkv6_mma_operand(dtype), yes);
}

fcl_dtype fcl_rwkv6_mma_operand(fcl_dtype dtype) { return dtype == FCL_F32 ? FCL_BF16 : dtype; }

/* The state pass on tensor cores: a warp per 16 rows, every chunk in one
 * launch (no loop budgets here), 16-bit checkpoints for 16-bit data
 * (RW_CK16, rwkv6_chunk_rows.cl). Where its tiles are fewer than the
 * compute units, the chunks split into SEG runs walked side by side
 * (rwkv6_chunk_state_mma.cl), each of 4 chunks or more: the runs' own
 * walk costs one more pass, which pays only where the walk's latency,
 * not the device, was the bound (at 256 tiles, B8 H32 T4096 K=V=64, one
 * run was the fastest: docs/defaults.md). */
static fcl_rwkv6_chunk_launch state_launch(const fcl_context *ctx, const fcl_rwkv6_desc *d,
                                           const mma_params *c, fcl_dtype dtype) {
  fcl_rwkv6_chunk_launch l = {c->TC, c->HK, c->HV, (size_t)c->HK * 2, 0,
                              dtype == FCL_F32 ? 4 : 2, 1};
  const int64_t tiles = d->head_dim_k / c->HK * (d->head_dim_v / c->HV) * d->batch * d->heads;
  const int64_t most = (d->seqlen + c->TC - 1) / c->TC / 4;
  if (c->SEG > 1 && tiles < (int64_t)ctx->info.compute_units && most > 1)
    l.nseg = (int)(c->SEG < most ? c->SEG : most);
  return l;
}

/* The program's kernels with the work-group of the tensor-core kernel.
 * When they do not build: *fallback (the reason logged), so that the
 * portable kernels run, unless an override (fcl_tuning_override) asked
 * for this variant by name: then its build error. */
static fcl_status kernels(fcl_context *ctx, const fcl_variant_plan *pl, const char *const *names,
                          cl_kernel *out, int n, bool *fallback) {
  const fcl_variant *kd = pl->cls.variant;
  char opts[768];
  snprintf(opts, sizeof opts, "%s -DWG=%d", pl->options, pl->cfg.v[0] / 16 * 32);
  for (int i = 0; i < n; ++i) {
    const fcl_status s = fcl_get_kernel(ctx, kd->tops, opts, names[i], &out[i]);
    if (s) return fcl_tuning_unbuilt(ctx, kd, s, "the rwkv6 chunked kernels", fallback);
  }
  return FCL_OK;
}

fcl_status fcl_rwkv6_chunk_mma_backward(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback) {
  const fcl_rwkv6_problem *p = problem;
  const fcl_rwkv6_desc *d = p->d;
  const fcl_rwkv6_args *t = &p->a;
  const bwd_params *c = FCL_CPARAMS(bwd_params, &pl->cfg);
  static const char *const names[] = {"fcl_rwkv6_chunk_state_mma", "fcl_rwkv6_chunk_out_mma",
                                      "fcl_rwkv6_chunk_dk", "fcl_rwkv6_chunk_du"};
  cl_kernel k[4];
  fcl_status s = kernels(ctx, pl, names, k, 4, fallback);
  if (s != FCL_OK || *fallback) return s;
  const int wg = c->TC / 16 * 32;
  const fcl_rwkv6_chunk_bwd_launch lb = {state_launch(ctx, d, FCL_CPARAMS(mma_params, &pl->cfg),
                                                      pl->cls.dtype), c->BK,
                                         wg, (size_t)wg,
                                         (int)d->head_dim_v, k[0], k[1], k[2], k[3]};
  return fcl_rwkv6_chunk_backward_run(ctx, d, p, t, &lb);
}

fcl_status fcl_rwkv6_chunk_mma_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                       const void *problem, bool *fallback) {
  const fcl_rwkv6_problem *p = problem;
  const fcl_rwkv6_desc *d = p->d;
  const fcl_rwkv6_args *t = &p->a;
  const mma_params *c = FCL_CPARAMS(mma_params, &pl->cfg);
  const int wg = c->TC / 16 * 32;
  static const char *const names[] = {"fcl_rwkv6_chunk_state_mma", "fcl_rwkv6_chunk_out_mma"};
  cl_kernel k[2];
  fcl_status s = kernels(ctx, pl, names, k, 2, fallback);
  if (s != FCL_OK || *fallback) return s;
  const cl_kernel ks = k[0], ko = k[1];
  const fcl_rwkv6_chunk_launch lc = state_launch(ctx, d, c, pl->cls.dtype);
  cl_mem ck;
  s = fcl_rwkv6_chunk_begin(ctx, d, p, &lc, t, ks, &ck);
  if (s != FCL_OK) return s;
  const fcl_rwkv6_chunk_common m = fcl_rwkv6_chunk_common_of(d, p, c->TC, t);
  fcl_args a = FCL_ARGS(ko);
  FCL_ARG(&a, t->r->buffer); FCL_ARG(&a, t->k->buffer); FCL_ARG(&a, t->w->buffer);
  FCL_ARG(&a, t->u); FCL_ARG(&a, t->v->buffer); FCL_ARG(&a, ck); FCL_ARG(&a, t->o->buffer);
  FCL_ARG(&a, m.cu);
  fcl_arg_tensor(&a, t->r); fcl_arg_tensor(&a, t->k); fcl_arg_tensor(&a, t->w);
  fcl_arg_tensor(&a, t->v); fcl_arg_tensor(&a, t->o);
  FCL_ARG(&a, m.seqlen); FCL_ARG(&a, m.heads); FCL_ARG(&a, m.nchunk); FCL_ARG(&a, m.scale);
  FCL_ARG(&a, m.flags);
  size_t g[3] = {(size_t)m.nchunk * (size_t)wg, 1, m.bh}, l[3] = {(size_t)wg, 1, 1};
  return fcl_launch(ctx, ko, &a, g, l, "enqueueing rwkv6 chunk output (mma)");
}
