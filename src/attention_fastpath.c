/* The NVIDIA tensor-core forward of attention: which problems it takes,
 * its block sizes (a tuned kernel, attention_fwd_mma) and its launch.
 * f16 and bf16 run cl/attention_fwd_mma.cl (m16n8k16), f32 runs
 * cl/attention_fwd_tf32.cl (m16n8k8 in 3xTF32). The probes that decide
 * whether the helpers work are in mma_probe.c, the backward in
 * attention_backward_mma.c. */
#include "attention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool fcl_mma_aligned(const fcl_tensor *t, size_t esize, bool varlen, int64_t n) {
  const int64_t off = (int64_t)(t->offset / esize);
  return off % n == 0 && (varlen || t->strides[0] % n == 0) && t->strides[1] % n == 0 &&
         t->strides[2] % n == 0;
}

/* Local memory of the forward. 16-bit: the K tile plus the larger of the
 * Q and V tiles, rows padded by 8 against bank conflicts, and one bit a key
 * of the V tile (non-finite values). f32: K and V tiles, padded as
 * cl/attention_fwd_tf32.cl says. */
static size_t mma_local_bytes(fcl_dtype t, int head_dim, int head_dim_v,
                              const fcl_attention_mma_config *c) {
  const size_t emu = fcl_mma_emulate() ? 1024u * (size_t)c->warps : 0;
  if (t == FCL_F32) {
    const int dp = (head_dim + 7) / 8 * 8, dvp = (head_dim_v + 7) / 8 * 8;
    const int ldk = dp + (dp % 16 ? 16 : 8), ldv = dvp + 4;
    return 4 * (size_t)c->block_n * (size_t)(ldk + ldv) + 8 * (size_t)((c->block_n + 31) / 32) +
           emu;
  }
  const int dp = (head_dim + 15) / 16 * 16, dvp = (head_dim_v + 15) / 16 * 16;
  const int q = 16 * c->warps * (dp + 8), v = c->block_n * (dvp + 8);
  return 2 * (size_t)(c->block_n * (dp + 8) + (q > v ? q : v)) +
         4 * (size_t)((c->block_n + 31) / 32) + emu;
}

void fcl_attention_mma_choose(const fcl_device_info *dev, fcl_dtype t, int head_dim,
                              int head_dim_v, fcl_attention_mma_config *c) {
  /* H100: 4 warps and 64 keys; 8 warps were 10-20% slower, 128 keys the
   * same. f32 tiles are twice the bytes: 64 keys up to head dim 64. */
  c->warps = 4, c->block_n = 64;
  while (mma_local_bytes(t, head_dim, head_dim_v, c) + 256 > dev->local_mem) {
    if (c->block_n > 16) c->block_n /= 2;
    else if (c->warps > 1) c->warps /= 2;
    else break;
  }
}

bool fcl_attention_mma_valid(const fcl_device_info *dev, fcl_dtype t, int head_dim,
                             int head_dim_v, const fcl_attention_mma_config *c, char *why,
                             size_t why_size) {
  const char *bad = NULL;
  if (c->warps < 1 || c->warps > 8 || c->block_n < 16 || c->block_n > 128 ||
      (t != FCL_F32 && c->block_n % 16))
    bad = "WARPS in 1..8 and BLOCK_N a multiple of 16 in 16..128";
  else if ((size_t)c->warps * 32 > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (t == FCL_F32 && c->block_n % 8)
    bad = "BLOCK_N a multiple of 8";
  else if (mma_local_bytes(t, head_dim, head_dim_v, c) + 256 > dev->local_mem)
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

fcl_status fcl_attention_fast_applies(fcl_context *ctx, const fcl_attention_desc *d,
                                      fcl_dtype dtype, bool *applies) {
  *applies = false;
  /* Head dims above 128 would not fit the registers; loop budgets (which
   * split the keys) are the portable kernel's. */
  /* f32 in 3xTF32 unless FCL_F32_TENSOR_CORES=0 (on the H100 1.8x to 1.9x
   * the portable kernel, with its accuracy). */
  if (dtype == FCL_F32 && !fcl_env_int("FCL_F32_TENSOR_CORES", 1)) return FCL_OK;
  if (d->head_dim > 128 || d->head_dim_v > 128 ||
      ctx->info.loop_budget > 0)
    return FCL_OK;
  /* fa-tune timing the portable kernel's candidates. */
  if (fcl_tuning_overridden(ctx, FCL_KERNEL_ATTN_FWD)) return FCL_OK;
  return fcl_mma_ready(ctx, dtype, applies);
}

fcl_status fcl_attention_forward_fast(fcl_context *ctx, const fcl_attention_desc *d,
                                      const fcl_attention_problem *p,
                                      const fcl_tensor *q, const fcl_tensor *k,
                                      const fcl_tensor *v, const fcl_tensor *o,
                                      cl_mem lse, bool *done) {
  *done = false;
  bool applies;
  fcl_status s = fcl_attention_fast_applies(ctx, d, p->dtype, &applies);
  if (s != FCL_OK || !applies) return s;

  fcl_attention_scalars sc;
  fcl_attention_scalars_init(d, p, &sc);
  fcl_tuning_class cls;
  fcl_attention_class(d, p->dtype, false, &cls);
  cls.kernel = FCL_KERNEL_ATTN_FWD_MMA;
  fcl_attention_mma_config mc;
  if ((s = fcl_tuning_choose(ctx, &cls, &mc, NULL, 0))) return s;
  if (!fcl_attention_mma_valid(&ctx->info, p->dtype, (int)d->head_dim, (int)d->head_dim_v, &mc,
                               NULL, 0))
    return FCL_OK; /* no block size fits this device: the portable kernel */
  const int warps = mc.warps, block_n = mc.block_n;
  const size_t es = fcl_dtype_size(p->dtype);
  /* 16-byte copies: 8 elements of 16 bits or 4 of f32 */
  const int64_t vw = p->dtype == FCL_F32 ? 4 : 8;
  const int vec = d->head_dim % vw == 0 && d->head_dim_v % vw == 0 &&
                  fcl_mma_aligned(q, es, p->varlen, vw) &&
                  fcl_mma_aligned(k, es, p->varlen, vw) && fcl_mma_aligned(v, es, p->varlen, vw);
  const int general = d->softcap > 0 || d->alibi_slopes || !(sc.qk_scale > 0);
  char opts[320];
  snprintf(opts, sizeof opts,
           "-DFCL_DTYPE=%d -DHEAD_DIM=%d -DHEAD_DIM_V=%d -DMMA_WARPS=%d -DBLOCK_N=%d "
           "-DMMA_VEC=%d -DMMA_GENERAL=%d -DFCL_MMA_EMULATE=%d%s",
           (int)p->dtype, (int)d->head_dim, (int)d->head_dim_v, warps, block_n, vec, general,
           fcl_mma_emulate(), fcl_mma_asm_option(ctx, p->dtype));
  static const char *const files16[] = {"common/dtype.cl", "attention/attention_common.cl", "common/mma_warp.cl",
                                         "common/mma_common.cl", "attention/attention_fwd_mma.cl"};
  static const char *const files32[] = {"common/dtype.cl", "attention/attention_common.cl", "common/mma_warp.cl",
                                         "common/mma_tf32.cl", "attention/attention_fwd_tf32.cl"};
  const bool f32 = p->dtype == FCL_F32;
  /* Built without and with the handling of inf and NaN in masked products
   * (nonfinite_flags.c), and the scan that chooses between them, before
   * anything is enqueued. */
  cl_kernel kern[2], scan[2];
  for (int nf = 0; nf < 2; ++nf) {
    char nf_opts[360];
    snprintf(nf_opts, sizeof nf_opts, "%s -DFCL_NONFINITE=%d", opts, nf);
    if (fcl_get_kernel(ctx, f32 ? files32 : files16, 5, nf_opts,
                       f32 ? "fcl_attention_fwd_tf32" : "fcl_attention_fwd_mma", &kern[nf]) ||
        (nf == 1 && fcl_nonfinite_kernel(ctx, p->dtype, scan))) {
      /* The portable kernel still works: say why and use it. */
      fcl_log(ctx, "fast path: the forward does not build, using the portable kernel: %s",
              ctx->message);
      fcl_clear_error(ctx);
      return FCL_OK;
    }
  }

  cl_int flags = (lse ? 1 : 0) | (d->alibi_slopes ? 2 : 0) | (p->varlen ? 4 : 0);
  cl_mem lse_b = lse ? lse : q->buffer;
  cl_mem alibi_b = d->alibi_slopes ? d->alibi_slopes : q->buffer;
  cl_mem cuq_b = p->varlen ? d->cu_seqlens_q : q->buffer;
  cl_mem cuk_b = p->varlen ? d->cu_seqlens_k : q->buffer;
  /* V holds the operand of masked products (P V); in 3xTF32 K too, whose
   * split of inf is NaN even where visible. Flags per kv head. */
  const fcl_nf_input nfin[2] = {
      {v, p->varlen, p->total_k, d->seqlen_k, d->heads_kv, d->head_dim_v, 1},
      {k, p->varlen, p->total_k, d->seqlen_k, d->heads_kv, d->head_dim, 1}};
  cl_mem nf_flags;
  if ((s = fcl_nonfinite_flags(ctx, scan, nfin, f32 ? 2 : 1, (int)d->heads_kv, &nf_flags)))
    return s;
  const size_t wg = (size_t)warps * 32, block_m = (size_t)warps * 16;
  const size_t nqb = ((size_t)d->seqlen_q + block_m - 1) / block_m;
  size_t global[3] = {nqb * wg, 1, (size_t)(d->batch * d->heads_q)};
  size_t local[3] = {wg, 1, 1};
  fcl_log(ctx, "attention forward: tensor cores%s, %d warps, %d keys per tile%s%s",
          f32 ? " (3xTF32)" : "", warps, block_n, vec ? ", cp.async" : "", general ? ", general scores" : "");
  for (int nf = 0; nf < 2; ++nf) {
    fcl_args a = {kern[nf], 0, CL_SUCCESS};
    FCL_ARG(&a, q->buffer); FCL_ARG(&a, k->buffer); FCL_ARG(&a, v->buffer);
    FCL_ARG(&a, o->buffer); FCL_ARG(&a, lse_b); FCL_ARG(&a, alibi_b);
    FCL_ARG(&a, cuq_b); FCL_ARG(&a, cuk_b);
    fcl_arg_tensor(&a, q); fcl_arg_tensor(&a, k); fcl_arg_tensor(&a, v);
    fcl_arg_tensor(&a, o);
    FCL_ARG(&a, sc.stat_sb); FCL_ARG(&a, sc.stat_sh);
    fcl_arg_scalars(&a, &sc);
    FCL_ARG(&a, flags);
    FCL_ARG(&a, nf_flags);
    if ((s = fcl_launch(ctx, kern[nf], &a, global, local, "enqueueing attention forward (mma)")))
      return s;
  }
  *done = true;
  return FCL_OK;
}
