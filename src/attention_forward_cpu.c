/* The attention forward on CPUs (cl/attention_fwd_cpu.cl): where it
 * applies, its block sizes and their checks, and its launch. */
#include "attention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Private floats of one work-item: Q transposed and the accumulators of its
 * query blocks, and the staged key chunk. Beyond this the arrays spill out
 * of the L2 cache (and PoCL's work-item stacks grow). */
#define FCL_CPU_PRIVATE_FLOATS 49152

static long private_floats(const fcl_attention_cpu_config *c, int head_dim) {
  return ((long)c->qb * c->rows + c->key_chunk) * (head_dim + c->block_dv);
}

bool fcl_attention_cpu_applies(const fcl_context *ctx) {
  const char *env = getenv("FCL_CPU_KERNEL");
  if (env && strcmp(env, "0") == 0) return false;
  /* fa-tune trying parameters of the portable forward wants it to run. */
  if (fcl_tuning_overridden(ctx, FCL_KERNEL_ATTN_FWD)) return false;
  /* llvmpipe stops work-items after a loop budget, which the portable
   * kernel's split-keys path respects. */
  return ctx->info.is_cpu && !ctx->info.is_llvmpipe && ctx->info.loop_budget <= 0;
}

void fcl_attention_cpu_choose(const fcl_device_info *dev, int head_dim, int head_dim_v,
                              fcl_attention_cpu_config *c) {
  /* Two native vectors of rows per key (one with 512-bit vectors) and
   * BLOCK_N keys: 2 x 6 accumulators leave 4 of AVX2's 16 registers for Q
   * and the broadcast key; AVX-512 has 32 registers. */
  const int width = dev->native_float_width ? (int)dev->native_float_width : 8;
  c->rows = width >= 8 ? 16 : 8;
  c->block_n = width >= 16 ? 8 : 6;
  c->key_chunk = 4 * c->block_n;
  c->block_dv = head_dim_v;
  c->wg_size = 1;
  /* Up to 8 query blocks share each key chunk while it is in the cache. */
  c->qb = 8;
  while (c->qb > 1 && private_floats(c, head_dim) > FCL_CPU_PRIVATE_FLOATS) c->qb /= 2;
}

bool fcl_attention_cpu_valid(const fcl_device_info *dev, int head_dim, int head_dim_v,
                             const fcl_attention_cpu_config *c, char *why,
                             size_t why_size) {
  const char *bad = NULL;
  if (c->rows != 4 && c->rows != 8 && c->rows != 16)
    bad = "ROWS is not 4, 8 or 16";
  else if (c->qb < 1 || c->qb > 16)
    bad = "QB out of 1..16";
  else if (c->block_n < 1 || c->block_n > 16)
    bad = "BLOCK_N out of 1..16";
  else if (c->key_chunk < c->block_n || c->key_chunk % c->block_n || c->key_chunk > 256)
    bad = "KEY_CHUNK not a multiple of BLOCK_N up to 256";
  else if (c->block_dv < 1 || c->block_dv > head_dim_v)
    bad = "BLOCK_DV out of 1..head_dim_v";
  else if (c->wg_size < 1 || (size_t)c->wg_size > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (private_floats(c, head_dim) > 2 * FCL_CPU_PRIVATE_FLOATS)
    bad = "private arrays too large";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

fcl_status fcl_attention_forward_cpu(fcl_context *ctx, const fcl_attention_desc *d,
                                     const fcl_attention_problem *p,
                                     const fcl_tensor *q, const fcl_tensor *k,
                                     const fcl_tensor *v, const fcl_tensor *o,
                                     cl_mem lse, bool *done) {
  *done = false;
  if (!fcl_attention_cpu_applies(ctx)) return FCL_OK;
  *done = true;
  fcl_tuning_class cls;
  fcl_attention_class(d, p->dtype, false, &cls);
  cls.kernel = FCL_KERNEL_ATTN_FWD_CPU;
  fcl_attention_cpu_config c;
  fcl_status s;
  if ((s = fcl_tuning_choose(ctx, &cls, &c, NULL, 0))) return s;
  const fcl_kernel_desc *kd = fcl_kernel_get(cls.kernel);
  char opts[256];
  snprintf(opts, sizeof opts,
           "-DFCL_DTYPE=%d -DHEAD_DIM=%d -DHEAD_DIM_V=%d -DROWS=%d -DQB=%d -DBLOCK_N=%d "
           "-DKEY_CHUNK=%d -DBLOCK_DV=%d -DWG_SIZE=%d -w",
           (int)p->dtype, (int)d->head_dim, (int)d->head_dim_v, c.rows, c.qb, c.block_n,
           c.key_chunk, c.block_dv, c.wg_size);
  cl_kernel kern;
  if ((s = fcl_get_kernel(ctx, kd->files, kd->nfiles, opts, "fcl_attention_fwd_cpu", &kern)))
    return s;

  fcl_attention_scalars sc;
  fcl_attention_scalars_init(d, p, &sc);
  cl_int flags = (lse ? 1 : 0) | (d->alibi_slopes ? 2 : 0) | (p->varlen ? 4 : 0);
  /* Unused pointer arguments get a valid buffer that is never dereferenced. */
  cl_mem lse_b = lse ? lse : q->buffer;
  cl_mem alibi_b = d->alibi_slopes ? d->alibi_slopes : q->buffer;
  cl_mem cuq_b = p->varlen ? d->cu_seqlens_q : q->buffer;
  cl_mem cuk_b = p->varlen ? d->cu_seqlens_k : q->buffer;
  /* Fewer query blocks per work-item where there would be under 8
   * work-items per compute unit, so that every core gets a share (not
   * when fa-tune or a test asks for these parameters). */
  const int64_t blocks = (d->seqlen_q + c.rows - 1) / c.rows;
  const int64_t want = 8 * (int64_t)(ctx->info.compute_units ? ctx->info.compute_units : 1);
  cl_int qbs = c.qb;
  while (qbs > 1 && !fcl_tuning_overridden(ctx, cls.kernel) &&
         d->batch * d->heads_q * ((blocks + qbs - 1) / qbs) < want)
    qbs /= 2;
  const cl_int nitems = (cl_int)((blocks + qbs - 1) / qbs);

  fcl_args a = {kern, 0, CL_SUCCESS};
  FCL_ARG(&a, q->buffer); FCL_ARG(&a, k->buffer); FCL_ARG(&a, v->buffer);
  FCL_ARG(&a, o->buffer); FCL_ARG(&a, lse_b); FCL_ARG(&a, alibi_b);
  FCL_ARG(&a, cuq_b); FCL_ARG(&a, cuk_b);
  fcl_arg_tensor(&a, q); fcl_arg_tensor(&a, k); fcl_arg_tensor(&a, v);
  fcl_arg_tensor(&a, o);
  FCL_ARG(&a, sc.stat_sb); FCL_ARG(&a, sc.stat_sh);
  fcl_arg_scalars(&a, &sc);
  FCL_ARG(&a, flags);
  FCL_ARG(&a, qbs);
  FCL_ARG(&a, nitems);

  const size_t wg = (size_t)c.wg_size;
  const size_t nslice = (size_t)ceil_div((int)d->head_dim_v, c.block_dv);
  size_t global[3] = {((size_t)nitems + wg - 1) / wg * wg, nslice,
                      (size_t)(d->batch * d->heads_q)};
  size_t local[3] = {wg, 1, 1};
  return fcl_launch(ctx, kern, &a, global, local, "enqueueing attention forward (CPU)");
}
