/* The portable attention backward (cl/attention/attention_bwd.cl): its
 * descriptor and its three kernels (delta, dQ, dK/dV) enqueued in order,
 * with partial sums added by a last pass where the device bounds a
 * work-item's loop iterations (llvmpipe). */
#include "attention/attention.h"

#include <stdio.h>

/* Rows and columns a tile, the contraction chunk and gradient slice, and
 * the work-item grid. */
#define PARAMS(X) X(BLOCK_R) X(BLOCK_C) X(BLOCK_K) X(WG_ROWS) X(WG_COLS)
FCL_PARAM_STRUCT(bwd_params, PARAMS);

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int round_up(int a, int b) { return ceil_div(a, b) * b; }

static size_t local_bytes(const bwd_params *c) {
  return 4 * ((size_t)c->BLOCK_R * (c->BLOCK_K + 1) + (size_t)c->BLOCK_C * (c->BLOCK_K + 1) +
              (size_t)c->BLOCK_R * (c->BLOCK_C + 1));
}

/* Loop iterations of bwd_contract over dim, counted as llvmpipe does. */
static long contract_iterations(const bwd_params *c, int dim) {
  const int wg = c->WG_ROWS * c->WG_COLS;
  const long rr = c->BLOCK_R / c->WG_ROWS, cc = c->BLOCK_C / c->WG_COLS;
  return ceil_div(dim, c->BLOCK_K) *
         (1 + ceil_div(c->BLOCK_R * c->BLOCK_K, wg) + ceil_div(c->BLOCK_C * c->BLOCK_K, wg) +
          c->BLOCK_K * (1 + rr + cc + rr * (1 + cc)));
}

/* Columns (keys for dQ, queries for dK/dV over `group` heads) one
 * work-group may walk within the loop budget, or 0 when unlimited. */
static int64_t cols_per_group(const fcl_device_info *dev, const bwd_params *c, int head_dim,
                              int head_dim_v, int group) {
  if (dev->loop_budget <= 0) return 0;
  const int wg = c->WG_ROWS * c->WG_COLS;
  const long rr = c->BLOCK_R / c->WG_ROWS, cc = c->BLOCK_C / c->WG_COLS;
  const long ck = c->BLOCK_K / c->WG_COLS;
  const long accumulate = ceil_div(c->BLOCK_C * c->BLOCK_K, wg) +
                          c->BLOCK_C * (1 + ck + rr * (1 + ck));
  /* The dK/dV tile (two accumulations) bounds the dQ tile too. */
  const long tile = 2 + cc + contract_iterations(c, head_dim) +
                    contract_iterations(c, head_dim_v) + 2 * rr * (1 + cc) + 2 * accumulate;
  long tiles = (dev->loop_budget * 3 / 4) / (tile * group);
  return (int64_t)(tiles < 1 ? 1 : tiles) * c->BLOCK_C;
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  bwd_params *c = FCL_PARAMS(bwd_params, cfg);
  c->WG_COLS = 8;
  c->WG_ROWS = 16;
  if (dev->is_llvmpipe && dev->max_wg >= 1024) c->WG_COLS = c->WG_ROWS = 32;
  while (c->WG_ROWS > 1 && (size_t)(c->WG_ROWS * c->WG_COLS) > dev->max_wg) c->WG_ROWS /= 2;
  c->BLOCK_R = (dev->is_llvmpipe ? 1 : 4) * c->WG_ROWS;
  c->BLOCK_C = 32;
  /* One width for contraction chunks and gradient slices: up to 64 (128
   * on GPUs, where a narrower slice recomputes S and dP once more). */
  const int widest = cls->head_dim > cls->head_dim_v ? cls->head_dim : cls->head_dim_v;
  const int nslice = ceil_div(widest, dev->is_cpu ? 64 : 128);
  c->BLOCK_K = round_up(ceil_div(widest, nslice), c->WG_COLS);
  const size_t budget = dev->local_mem > 1024 ? dev->local_mem - 512 : 0;
  while (local_bytes(c) > budget) {
    if (c->BLOCK_C > c->WG_COLS) c->BLOCK_C /= 2;
    else if (c->BLOCK_K > c->WG_COLS) c->BLOCK_K = round_up(c->BLOCK_K / 2, c->WG_COLS);
    else if (c->BLOCK_R > c->WG_ROWS) c->BLOCK_R /= 2;
    else break;
  }
}

/* Beyond this many floats of a work-item's register tile every device spills. */
#define MAX_TILE_FLOATS 192

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const bwd_params *c = FCL_CPARAMS(bwd_params, cfg);
  const int widest = cls->head_dim > cls->head_dim_v ? cls->head_dim : cls->head_dim_v;
  const char *bad = NULL;
  if (c->BLOCK_R < 1 || c->BLOCK_C < 1 || c->BLOCK_K < 1 || c->WG_ROWS < 1 || c->WG_COLS < 1 ||
      c->BLOCK_R > 512 || c->BLOCK_C > 512)
    bad = "a size out of range";
  else if (c->BLOCK_R % c->WG_ROWS || c->BLOCK_C % c->WG_COLS || c->BLOCK_K % c->WG_COLS)
    bad = "BLOCK_R, BLOCK_C, BLOCK_K not multiples of the work-item grid";
  else if ((size_t)c->WG_ROWS * c->WG_COLS > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (c->BLOCK_K > round_up(widest, c->WG_COLS))
    bad = "BLOCK_K wider than the head";
  else if (local_bytes(c) + 512 > dev->local_mem)
    bad = "local memory exceeded";
  else {
    const int rr = c->BLOCK_R / c->WG_ROWS, cc = c->BLOCK_C / c->WG_COLS;
    const int ck = c->BLOCK_K / c->WG_COLS;
    if (2 * rr * cc + 2 * (rr > cc ? rr : cc) * ck > MAX_TILE_FLOATS)
      bad = "register tile too large";
  }
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"WG_ROWS", 6, {1, 2, 4, 8, 16, 32}};
  a[1] = (fcl_axis){"WG_COLS", 6, {1, 2, 4, 8, 16, 32}};
  a[2] = (fcl_axis){"ROWS_PER_ITEM", 4, {1, 2, 4, 8}};
  a[3] = (fcl_axis){"COLS_PER_ITEM", 4, {1, 2, 4, 8}};
  a[4] = (fcl_axis){"K_SLICES", 3, {1, 2, 4}};
  return 5;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  bwd_params *c = FCL_PARAMS(bwd_params, cfg);
  const int widest = cls->head_dim > cls->head_dim_v ? cls->head_dim : cls->head_dim_v;
  c->WG_ROWS = v[0], c->WG_COLS = v[1];
  c->BLOCK_R = v[0] * v[2], c->BLOCK_C = v[1] * v[3];
  c->BLOCK_K = round_up(ceil_div(widest, v[4]), v[1]);
}

static bool worth_trying(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         const fcl_config *cfg) {
  const bwd_params *c = FCL_CPARAMS(bwd_params, cfg);
  return fcl_whole_warps(dev, (size_t)c->WG_ROWS * c->WG_COLS);
}

const fcl_variant fcl_variant_attention_bwd = {
    "attention_bwd", FCL_TUNING_ATTENTION_BWD, FCL_TOPS("attention/attention_bwd.cl"),
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, true, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, worth_trying, 0};

fcl_status fcl_attention_bwd_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                    const void *problem, bool *fallback) {
  const fcl_attention_problem *p = problem;
  const fcl_attention_desc *d = p->d;
  const bwd_params *c = FCL_CPARAMS(bwd_params, &pl->cfg);
  const fcl_variant *v = pl->cls.variant;
  const char *opts = pl->options;
  (void)fallback;
  const size_t nstat = (size_t)(d->heads_q * p->total_q);
  cl_kernel k_delta, k_dq, k_dkdv, k_sum = NULL;
  cl_mem    delta;
  fcl_status s;
  if ((s = fcl_get_kernel(ctx, v->tops, opts, "fcl_attention_bwd_delta", &k_delta)) ||
      (s = fcl_get_kernel(ctx, v->tops, opts, "fcl_attention_bwd_dq", &k_dq)) ||
      (s = fcl_get_kernel(ctx, v->tops, opts, "fcl_attention_bwd_dkdv", &k_dkdv)) ||
      (s = fcl_scratch(ctx, 0, nstat * sizeof(float), &delta)))
    return s;

  /* Where a work-group may not walk all keys (dQ) or all queries (dK/dV),
   * each split writes f32 partial sums that a last pass adds in order. */
  const cl_int group = p->sc.group;
  const int64_t per_dq =
      cols_per_group(&ctx->info, c, (int)d->head_dim, (int)d->head_dim_v, 1);
  const int64_t per_dkv =
      cols_per_group(&ctx->info, c, (int)d->head_dim, (int)d->head_dim_v, group);
  cl_int split_dq = per_dq > 0 ? (cl_int)((d->seqlen_k + per_dq - 1) / per_dq) : 1;
  cl_int split_dkv = per_dkv > 0 ? (cl_int)((d->seqlen_q + per_dkv - 1) / per_dkv) : 1;
  cl_int per_dq_i = (cl_int)per_dq, per_dkv_i = (cl_int)per_dkv;
  cl_long nrows_q = (cl_long)nstat, nrows_k = d->heads_kv * p->total_k;
  cl_mem dq_part = p->q->buffer, dk_part = p->q->buffer, dv_part = p->q->buffer;
  if (split_dq > 1 || split_dkv > 1) {
    fcl_log(ctx, "attention backward: dQ split %d ways, dK/dV %d ways", split_dq, split_dkv);
    if ((s = fcl_get_kernel(ctx, v->tops, opts, "fcl_attention_bwd_sum", &k_sum)))
      return s;
  }
  if (split_dq > 1 &&
      (s = fcl_scratch(ctx, 1, fcl_bytes(split_dq, nrows_q, d->head_dim, 4, 1), &dq_part)))
    return s;
  if (split_dkv > 1 &&
      ((s = fcl_scratch(ctx, 2, fcl_bytes(split_dkv, nrows_k, d->head_dim, 4, 1), &dk_part)) ||
       (s = fcl_scratch(ctx, 3, fcl_bytes(split_dkv, nrows_k, d->head_dim_v, 4, 1), &dv_part))))
    return s;

  const fcl_attention_scalars *sc = &p->sc;
  const cl_int flags = fcl_attention_flags(p);
  cl_int varlen = p->varlen;
  cl_mem cuq_b = p->varlen ? d->cu_seqlens_q : p->q->buffer;
  cl_mem cuk_b = p->varlen ? d->cu_seqlens_k : p->q->buffer;
  const size_t bh = (size_t)(d->batch * d->heads_q);
  const size_t bhk = (size_t)(d->batch * d->heads_kv);

  /* 1. delta = rowsum(dO * O) */
  fcl_args a = FCL_ARGS(k_delta);
  FCL_ARG(&a, p->o->buffer); FCL_ARG(&a, p->dout->buffer); FCL_ARG(&a, delta);
  FCL_ARG(&a, cuq_b); FCL_ARG(&a, cuk_b);
  fcl_arg_tensor(&a, p->o); fcl_arg_tensor(&a, p->dout);
  FCL_ARG(&a, sc->stat_sb); FCL_ARG(&a, sc->stat_sh); FCL_ARG(&a, sc->seqlen_q);
  FCL_ARG(&a, sc->seqlen_k); FCL_ARG(&a, sc->heads_q); FCL_ARG(&a, varlen);
  if (a.err != CL_SUCCESS) return fcl_fail_cl(ctx, a.err, "clSetKernelArg");

  /* 2. dQ, 3. dK and dV: the same leading arguments. */
  const size_t wg = (size_t)c->WG_ROWS * c->WG_COLS;
  const int64_t widest = d->head_dim > d->head_dim_v ? d->head_dim : d->head_dim_v;
  cl_int nslice_dq = (cl_int)((d->head_dim + c->BLOCK_K - 1) / c->BLOCK_K);
  cl_int nslice_dkv = (cl_int)((widest + c->BLOCK_K - 1) / c->BLOCK_K);
  cl_kernel kernels[2] = {k_dq, k_dkdv};
  const cl_int nsplit[2] = {split_dq, split_dkv};
  cl_int per[2] = {per_dq_i, per_dkv_i}, nsl[2] = {nslice_dq, nslice_dkv};
  cl_mem parts[2][2] = {{dq_part, dq_part}, {dk_part, dv_part}};
  cl_long nrows[2] = {nrows_q, nrows_k};
  fcl_args ac[2];
  for (int i = 0; i < 2; ++i) {
    ac[i] = (fcl_args)FCL_ARGS(kernels[i]);
    fcl_attention_bwd_args(&ac[i], p, delta, flags | (nsplit[i] > 1 ? FCL_ATTN_SPLIT : 0));
    FCL_ARG(&ac[i], per[i]); FCL_ARG(&ac[i], nsl[i]); FCL_ARG(&ac[i], parts[i][0]);
    FCL_ARG(&ac[i], parts[i][1]); FCL_ARG(&ac[i], nrows[i]);
    if (ac[i].err != CL_SUCCESS) return fcl_fail_cl(ctx, ac[i].err, "clSetKernelArg");
  }
  size_t lw[3] = {wg, 1, 1};

  /* The kernel-specific arguments follow the common ones. */
  fcl_args *adq = &ac[0], *adkv = &ac[1];
  FCL_ARG(adq, p->dq->buffer); fcl_arg_tensor(adq, p->dq);
  FCL_ARG(adkv, p->dk->buffer); fcl_arg_tensor(adkv, p->dk);
  FCL_ARG(adkv, p->dv->buffer); fcl_arg_tensor(adkv, p->dv);
  cl_long kstat_sb = p->varlen ? 0 : d->heads_kv * d->seqlen_k;
  cl_long kstat_sh = p->varlen ? p->total_k : d->seqlen_k;
  FCL_ARG(adkv, kstat_sb); FCL_ARG(adkv, kstat_sh);

  /* The partial sums' final pass, one per split gradient. */
  struct { cl_mem part; const fcl_tensor *t; cl_long row_sh, nrows; cl_int heads, dim, n; }
      sums[3] = {{dq_part, p->dq, sc->stat_sh, nrows_q, sc->heads_q, (cl_int)d->head_dim, split_dq},
                 {dk_part, p->dk, kstat_sh, nrows_k, (cl_int)d->heads_kv, (cl_int)d->head_dim, split_dkv},
                 {dv_part, p->dv, kstat_sh, nrows_k, (cl_int)d->heads_kv, (cl_int)d->head_dim_v, split_dkv}};

  /* All arguments but the sums' are set before the first enqueue. */
  const size_t rows = (size_t)((d->seqlen_q + 63) / 64 * 64);
  size_t g0[3] = {rows, bh, 1}, l0[3] = {64, 1, 1};
  size_t gq[3] = {(size_t)((d->seqlen_q + c->BLOCK_R - 1) / c->BLOCK_R) * wg,
                  (size_t)(nslice_dq * split_dq), bh};
  size_t gk[3] = {(size_t)((d->seqlen_k + c->BLOCK_R - 1) / c->BLOCK_R) * wg,
                  (size_t)(nslice_dkv * split_dkv), bhk};
  if ((s = fcl_launch(ctx, k_delta, &a, g0, l0, "enqueueing backward delta")) ||
      (s = fcl_launch(ctx, k_dq, adq, gq, lw, "enqueueing backward dq")) ||
      (s = fcl_launch(ctx, k_dkdv, adkv, gk, lw, "enqueueing backward dk/dv")))
    return s;
  /* One kernel object serves the three sums: arguments are captured at
   * enqueue, so each sum sets them just before its enqueue. */
  for (int i = 0; i < 3; ++i) {
    if (sums[i].n <= 1) continue;
    fcl_args as = FCL_ARGS(k_sum);
    cl_long off = (cl_long)(sums[i].t->offset / fcl_dtype_size(p->dtype));
    FCL_ARG(&as, sums[i].part); FCL_ARG(&as, sums[i].t->buffer); FCL_ARG(&as, off);
    FCL_ARG(&as, sums[i].t->strides[0]); FCL_ARG(&as, sums[i].t->strides[1]);
    FCL_ARG(&as, sums[i].t->strides[2]); FCL_ARG(&as, sums[i].row_sh);
    FCL_ARG(&as, sums[i].heads); FCL_ARG(&as, sums[i].nrows); FCL_ARG(&as, sums[i].dim);
    FCL_ARG(&as, sums[i].n); FCL_ARG(&as, flags);
    size_t gs[3] = {(size_t)(sums[i].dim + 31) / 32 * 32, (size_t)sums[i].nrows, 1};
    size_t ls[3] = {32, 1, 1};
    if ((s = fcl_launch(ctx, k_sum, &as, gs, ls, "enqueueing backward sums"))) return s;
  }
  return FCL_OK;
}
