/* The NVIDIA tensor-core fast path of attention (cl/mma_common.cl,
 * cl/attention_fwd_mma.cl): a probe that builds and runs the mma.sync,
 * ldmatrix, cp.async and shuffle helpers once per context and dtype and
 * checks their answers, and the forward's problems and launch (the
 * backward's are in attention_backward_mma.c).
 * FCL_DISABLE_FASTPATH=1 turns it off; FCL_MMA_EMULATE=1 runs it on any
 * device with the helpers emulated in software (to test its logic on CPUs).
 * The forward's block sizes are a tuned kernel (attention_fwd_mma). */
#include "attention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fcl_env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}
#define env_int fcl_env_int

int fcl_mma_emulate(void) { return env_int("FCL_MMA_EMULATE", 0) != 0; }
#define emulate fcl_mma_emulate

/* Bits of a small integer or half-integer in the storage type. */
static uint16_t to_bits(float x, fcl_dtype t) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if (t == FCL_BF16) return (uint16_t)(u >> 16);
  if (x == 0.0f) return (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t e = ((u >> 23) & 0xffu) - 127u + 15u;
  return (uint16_t)(((u >> 16) & 0x8000u) | (e << 10) | ((u >> 13) & 0x3ffu));
}

static float val_a(int r, int c) { return (float)((r * 3 + c * 5) % 7 - 3); }
static float val_b(int kk, int n) { return (float)((kk * 2 + n * 3) % 5 - 2); }

/* The inline-assembly keyword: NVIDIA's compiler is documented to take asm;
 * __asm__ is tried next. Indexed by mma_state - 1. */
static const char *const asm_opts[2] = {"", " -DFCL_ASM=__asm__"};

/* Emulated, the programs are built without optimisation: every helper is a
 * pair of work-group barriers there, over which PoCL's optimiser spends
 * minutes a program (the special paths for non-finite values tripled it),
 * while they only ever run the tests' small shapes (about 10 times slower,
 * built 10 times faster). */
static const char *emulate_opts(void) { return emulate() ? " -cl-opt-disable" : ""; }

/* Builds and runs the probe; FCL_OK with *ok telling whether it was right
 * and *variant which asm_opts entry built. */
static fcl_status run_probe(fcl_context *ctx, fcl_dtype t, bool *ok, int *variant) {
  static const char *const files[] = {"dtype.cl", "mma_common.cl", "mma_probe.cl"};
  cl_kernel k = NULL;
  *ok = false;
  for (int i = 0; i < 2 && !k; ++i) {
    char opts[128];
    snprintf(opts, sizeof opts, "-DFCL_DTYPE=%d -DFCL_MMA_EMULATE=%d%s%s", (int)t, emulate(),
             asm_opts[i], emulate_opts());
    if (fcl_get_kernel(ctx, files, (int)FCL_COUNT(files), opts, "fcl_mma_probe", &k) != FCL_OK) {
      fcl_log(ctx, "fast path: the mma probe does not build with [%s]: %s", opts, ctx->message);
      fcl_clear_error(ctx);
      k = NULL;
    }
    *variant = i;
  }
  if (!k) return FCL_OK;
  uint16_t a[256], bt[128], bkn[128];
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) a[r * 16 + c] = to_bits(val_a(r, c), t);
  for (int kk = 0; kk < 16; ++kk)
    for (int n = 0; n < 8; ++n) {
      bt[n * 16 + kk] = to_bits(val_b(kk, n), t);
      bkn[kk * 8 + n] = to_bits(val_b(kk, n), t);
    }
  uint32_t out[320];
  memset(out, 0xff, sizeof out);
  cl_int err;
  cl_mem bufs[4] = {NULL, NULL, NULL, NULL};
  const size_t sizes[4] = {sizeof a, sizeof bt, sizeof bkn, sizeof out};
  void *hosts[4] = {a, bt, bkn, out};
  fcl_status s = FCL_OK;
  for (int i = 0; i < 4 && s == FCL_OK; ++i) {
    bufs[i] = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                             sizes[i], hosts[i], &err);
    if (err != CL_SUCCESS) s = fcl_fail_cl(ctx, err, "mma probe buffers");
  }
  if (s == FCL_OK) {
    fcl_args args = {k, 0, CL_SUCCESS};
    for (int i = 0; i < 4; ++i) FCL_ARG(&args, bufs[i]);
    size_t g[3] = {32, 1, 1}, l[3] = {32, 1, 1};
    s = fcl_launch(ctx, k, &args, g, l, "enqueueing the mma probe");
  }
  if (s == FCL_OK &&
      (err = clEnqueueReadBuffer(ctx->queue, bufs[3], CL_TRUE, 0, sizeof out, out, 0,
                                 NULL, NULL)) != CL_SUCCESS)
    s = fcl_fail_cl(ctx, err, "reading the mma probe");
  for (int i = 0; i < 4; ++i)
    if (bufs[i]) clReleaseMemObject(bufs[i]);
  if (s != FCL_OK) return s;

  int bad = 0;
  for (int lane = 0; lane < 32 && !bad; ++lane) {
    const int g = lane >> 2, c = 2 * (lane & 3);
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e >> 1) * 8, col = c + (e & 1);
      float want = 0.0f, got1, got2;
      for (int kk = 0; kk < 16; ++kk) want += val_a(row, kk) * val_b(kk, col);
      memcpy(&got1, &out[lane * 10 + e], 4);
      memcpy(&got2, &out[lane * 10 + 4 + e], 4);
      if (!bad && (got1 != want || got2 != want)) {
        bad = 1;
        fcl_log(ctx, "fast path: mma probe lane %d element %d: %g and %g, want %g", lane, e,
                got1, got2, want);
      }
    }
    float sh;
    memcpy(&sh, &out[lane * 10 + 8], 4);
    const uint32_t pk = (uint32_t)to_bits((float)lane + 0.5f, t) |
                        ((uint32_t)to_bits(-(float)lane, t) << 16);
    if (!bad && (sh != (float)(lane ^ 3) || out[lane * 10 + 9] != pk)) {
      bad = 2;
      fcl_log(ctx, "fast path: mma probe lane %d: shuffle %g, packed %08x (want %08x)", lane,
              sh, (unsigned)out[lane * 10 + 9], (unsigned)pk);
    }
  }
  if (bad)
    fcl_log(ctx, "fast path: the mma probe gave wrong %s", bad == 1 ? "products" : "shuffles or packing");
  *ok = !bad;
  return FCL_OK;
}

fcl_status fcl_mma_ready(fcl_context *ctx, fcl_dtype t, bool *ready) {
  *ready = false;
  if (t != FCL_F16 && t != FCL_BF16) return FCL_OK;
  signed char *state = &ctx->mma_state[t];
  if (*state == 0) {
    const char *why = NULL;
    if (env_int("FCL_DISABLE_FASTPATH", 0)) why = "FCL_DISABLE_FASTPATH is set";
    else if (!ctx->info.is_nvidia && !emulate()) why = "not an NVIDIA device";
    bool ok = false;
    int variant = 0;
    if (!why) {
      /* A probe that cannot even run leaves the portable path to try. */
      if (run_probe(ctx, t, &ok, &variant) != FCL_OK) {
        fcl_log(ctx, "fast path: the mma probe did not run: %s", ctx->message);
        fcl_clear_error(ctx);
        ok = false;
      }
      if (!ok) why = "the probe failed";
    }
    *state = ok ? (signed char)(1 + variant) : -1;
    fcl_log(ctx, "fast path (tensor cores, %s%s): %s%s", t == FCL_F16 ? "f16" : "bf16",
            emulate() ? ", emulated" : "", ok ? "on" : "off: ", ok ? "" : why);
  }
  *ready = *state > 0;
  return FCL_OK;
}

const char *fcl_mma_asm_option(const fcl_context *ctx, fcl_dtype t) {
  return emulate() ? emulate_opts() : asm_opts[ctx->mma_state[t] - 1];
}

bool fcl_mma_aligned8(const fcl_tensor *t, size_t esize, bool varlen) {
  const int64_t off = (int64_t)(t->offset / esize);
  return off % 8 == 0 && (varlen || t->strides[0] % 8 == 0) && t->strides[1] % 8 == 0 &&
         t->strides[2] % 8 == 0;
}

/* Local memory of the forward: the K tile plus the larger of the Q and V
 * tiles, 16-bit, rows padded by 8 against bank conflicts, and one bit a
 * key of the V tile (non-finite values). */
static size_t mma_local_bytes(int head_dim, int head_dim_v, const fcl_attention_mma_config *c) {
  const int dp = (head_dim + 15) / 16 * 16, dvp = (head_dim_v + 15) / 16 * 16;
  const int q = 16 * c->warps * (dp + 8), v = c->block_n * (dvp + 8);
  return 2 * (size_t)(c->block_n * (dp + 8) + (q > v ? q : v)) +
         4 * (size_t)((c->block_n + 31) / 32) + (emulate() ? 1024u * (size_t)c->warps : 0);
}

void fcl_attention_mma_choose(const fcl_device_info *dev, int head_dim, int head_dim_v,
                              fcl_attention_mma_config *c) {
  /* H100: 4 warps and 64 keys; 8 warps were 10-20% slower, 128 keys the same. */
  c->warps = 4, c->block_n = 64;
  while (mma_local_bytes(head_dim, head_dim_v, c) + 256 > dev->local_mem) {
    if (c->block_n > 16) c->block_n /= 2;
    else if (c->warps > 1) c->warps /= 2;
    else break;
  }
}

bool fcl_attention_mma_valid(const fcl_device_info *dev, int head_dim, int head_dim_v,
                             const fcl_attention_mma_config *c, char *why, size_t why_size) {
  const char *bad = NULL;
  if (c->warps < 1 || c->warps > 8 || c->block_n < 16 || c->block_n > 128 || c->block_n % 16)
    bad = "WARPS in 1..8 and BLOCK_N a multiple of 16 in 16..128";
  else if ((size_t)c->warps * 32 > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (mma_local_bytes(head_dim, head_dim_v, c) + 256 > dev->local_mem)
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

fcl_status fcl_attention_fast_applies(fcl_context *ctx, const fcl_attention_desc *d,
                                      fcl_dtype dtype, bool *applies) {
  *applies = false;
  /* Head dims above 128 would not fit the registers; loop budgets (which
   * split the keys) are the portable kernel's. */
  if (dtype == FCL_F32 || d->head_dim > 128 || d->head_dim_v > 128 ||
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
  if (!fcl_attention_mma_valid(&ctx->info, (int)d->head_dim, (int)d->head_dim_v, &mc, NULL, 0))
    return FCL_OK; /* no block size fits this device: the portable kernel */
  const int warps = mc.warps, block_n = mc.block_n;
  const size_t es = fcl_dtype_size(p->dtype);
  const int vec = d->head_dim % 8 == 0 && d->head_dim_v % 8 == 0 &&
                  fcl_mma_aligned8(q, es, p->varlen) && fcl_mma_aligned8(k, es, p->varlen) &&
                  fcl_mma_aligned8(v, es, p->varlen);
  const int general = d->softcap > 0 || d->alibi_slopes || !(sc.qk_scale > 0);
  char opts[320];
  snprintf(opts, sizeof opts,
           "-DFCL_DTYPE=%d -DHEAD_DIM=%d -DHEAD_DIM_V=%d -DMMA_WARPS=%d -DBLOCK_N=%d "
           "-DMMA_VEC=%d -DMMA_GENERAL=%d -DFCL_MMA_EMULATE=%d%s",
           (int)p->dtype, (int)d->head_dim, (int)d->head_dim_v, warps, block_n, vec, general,
           emulate(), fcl_mma_asm_option(ctx, p->dtype));
  const fcl_kernel_desc *kd = fcl_kernel_get(FCL_KERNEL_ATTN_FWD_MMA);
  cl_kernel kern;
  if (fcl_get_kernel(ctx, kd->files, kd->nfiles, opts, "fcl_attention_fwd_mma", &kern)) {
    /* The portable kernel still works: say why and use it. */
    fcl_log(ctx, "fast path: the forward does not build, using the portable kernel: %s",
            ctx->message);
    fcl_clear_error(ctx);
    return FCL_OK;
  }

  cl_int flags = (lse ? 1 : 0) | (d->alibi_slopes ? 2 : 0) | (p->varlen ? 4 : 0);
  cl_mem lse_b = lse ? lse : q->buffer;
  cl_mem alibi_b = d->alibi_slopes ? d->alibi_slopes : q->buffer;
  cl_mem cuq_b = p->varlen ? d->cu_seqlens_q : q->buffer;
  cl_mem cuk_b = p->varlen ? d->cu_seqlens_k : q->buffer;
  fcl_args a = {kern, 0, CL_SUCCESS};
  FCL_ARG(&a, q->buffer); FCL_ARG(&a, k->buffer); FCL_ARG(&a, v->buffer);
  FCL_ARG(&a, o->buffer); FCL_ARG(&a, lse_b); FCL_ARG(&a, alibi_b);
  FCL_ARG(&a, cuq_b); FCL_ARG(&a, cuk_b);
  fcl_arg_tensor(&a, q); fcl_arg_tensor(&a, k); fcl_arg_tensor(&a, v);
  fcl_arg_tensor(&a, o);
  FCL_ARG(&a, sc.stat_sb); FCL_ARG(&a, sc.stat_sh);
  fcl_arg_scalars(&a, &sc);
  FCL_ARG(&a, flags);
  const size_t wg = (size_t)warps * 32, block_m = (size_t)warps * 16;
  const size_t nqb = ((size_t)d->seqlen_q + block_m - 1) / block_m;
  size_t global[3] = {nqb * wg, 1, (size_t)(d->batch * d->heads_q)};
  size_t local[3] = {wg, 1, 1};
  fcl_log(ctx, "attention forward: tensor cores, %d warps, %d keys per tile%s%s", warps,
          block_n, vec ? ", cp.async" : "", general ? ", general scores" : "");
  if ((s = fcl_launch(ctx, kern, &a, global, local, "enqueueing attention forward (mma)")))
    return s;
  *done = true;
  return FCL_OK;
}
