/* Whether the NVIDIA tensor-core helpers work on this device: per context
 * and dtype, a probe kernel is built and run once by one warp on small
 * exact values and its answers checked here. f16 and bf16 probe the
 * m16n8k16 mma, ldmatrix, cp.async, shuffles and packing
 * (cl/mma_common.cl); f32 probes the m16n8k8 TF32 mma, the 3xTF32 split,
 * cp.async and shuffles (cl/mma_tf32.cl).
 * FCL_DISABLE_FASTPATH=1 turns the fast paths off; FCL_MMA_EMULATE=1 runs
 * them on any device with the helpers emulated in software (to test their
 * logic on CPUs). */
#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Bits of a small integer or half-integer in the storage type. */
uint16_t fcl_probe_bits(float x, fcl_dtype t) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if (t == FCL_BF16) return (uint16_t)(u >> 16);
  if (x == 0.0f) return (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t e = ((u >> 23) & 0xffu) - 127u + 15u;
  return (uint16_t)(((u >> 16) & 0x8000u) | (e << 10) | ((u >> 13) & 0x3ffu));
}

float fcl_probe_val_a(int r, int c) { return (float)((r * 3 + c * 5) % 7 - 3); }
float fcl_probe_val_b(int kk, int n) { return (float)((kk * 2 + n * 3) % 5 - 2); }

/* The inline-assembly keyword: NVIDIA's compiler is documented to take asm;
 * __asm__ is tried next. Indexed by mma_state - 1. */
static const char *const asm_opts[2] = {"-DFCL_MMA_EMULATE=0",
                                        "-DFCL_MMA_EMULATE=0 -DFCL_ASM=__asm__"};

/* Emulated, the programs are built without optimisation: every helper is a
 * pair of work-group barriers there, over which PoCL's optimiser spends
 * minutes a program (the special paths for non-finite values tripled it),
 * while they only ever run the tests' small shapes (slower to run, much
 * faster to build: docs/defaults.md). */
static const char emulate_opts[] = "-DFCL_MMA_EMULATE=1 -cl-opt-disable";

/* Builds the probe of dtype t with the first asm keyword that works; NULL
 * when none does. */
static cl_kernel build_probe(fcl_context *ctx, fcl_dtype t, int *variant) {
  const bool f32 = t == FCL_F32;
  const char *const *tops =
      f32 ? FCL_TOPS("common/mma_tf32_probe.cl") : FCL_TOPS("common/mma_probe.cl");
  for (int i = 0; i < 2; ++i) {
    char opts[128];
    snprintf(opts, sizeof opts, "-DFCL_DTYPE=%d %s", (int)t,
             ctx->info.mma_emulate ? emulate_opts : asm_opts[i]);
    cl_kernel k;
    if (fcl_get_kernel(ctx, tops, opts, f32 ? "fcl_mma_tf32_probe" : "fcl_mma_probe", &k) ==
        FCL_OK) {
      *variant = i;
      return k;
    }
    fcl_log(ctx, "fast path: the mma probe does not build with [%s]: %s", opts, ctx->message);
    fcl_clear_error(ctx);
  }
  return NULL;
}

/* Runs kernel k on one warp with nin input arrays and reads 320 words of
 * output (the kernel's last argument). */
static fcl_status launch_probe(fcl_context *ctx, cl_kernel k, int nin, void *const *in,
                               const size_t *in_bytes, uint32_t out[320]) {
  cl_int err;
  cl_mem bufs[4] = {NULL, NULL, NULL, NULL};
  fcl_status s = FCL_OK;
  memset(out, 0xff, 320 * sizeof *out);
  for (int i = 0; i <= nin && s == FCL_OK; ++i) {
    bufs[i] = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                             i < nin ? in_bytes[i] : 320 * sizeof *out, i < nin ? in[i] : out,
                             &err);
    if (err != CL_SUCCESS) s = fcl_fail_cl(ctx, err, "mma probe buffers");
  }
  if (s == FCL_OK) {
    fcl_args args = FCL_ARGS(k);
    for (int i = 0; i <= nin; ++i) FCL_ARG(&args, bufs[i]);
    size_t g[3] = {32, 1, 1}, l[3] = {32, 1, 1};
    s = fcl_launch(ctx, k, &args, g, l, "enqueueing the mma probe");
  }
  if (s == FCL_OK &&
      (err = clEnqueueReadBuffer(ctx->queue, bufs[nin], CL_TRUE, 0, 320 * sizeof *out, out, 0,
                                 NULL, NULL)) != CL_SUCCESS)
    s = fcl_fail_cl(ctx, err, "reading the mma probe");
  for (int i = 0; i <= nin; ++i)
    if (bufs[i]) clReleaseMemObject(bufs[i]);
  return s;
}

static float word_f(const uint32_t *w) {
  float x;
  memcpy(&x, w, 4);
  return x;
}

/* m16n8k16: 0 when right, else 1 (products) or 2 (shuffle, packing). */
static int check16(fcl_context *ctx, fcl_dtype t, const uint32_t *out) {
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, c = 2 * (lane & 3);
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e >> 1) * 8, col = c + (e & 1);
      float want = 0.0f;
      for (int kk = 0; kk < 16; ++kk) want += fcl_probe_val_a(row, kk) * fcl_probe_val_b(kk, col);
      const float got1 = word_f(&out[lane * 10 + e]), got2 = word_f(&out[lane * 10 + 4 + e]);
      if (got1 != want || got2 != want) {
        fcl_log(ctx, "fast path: mma probe lane %d element %d: %g and %g, want %g", lane, e,
                got1, got2, want);
        return 1;
      }
    }
    const float sh = word_f(&out[lane * 10 + 8]);
    const uint32_t pk = (uint32_t)fcl_probe_bits((float)lane + 0.5f, t) |
                        ((uint32_t)fcl_probe_bits(-(float)lane, t) << 16);
    if (sh != (float)(lane ^ 3) || out[lane * 10 + 9] != pk) {
      fcl_log(ctx, "fast path: mma probe lane %d: shuffle %g, packed %08x (want %08x)", lane,
              sh, (unsigned)out[lane * 10 + 9], (unsigned)pk);
      return 2;
    }
  }
  return 0;
}

/* m16n8k8 TF32: one product exact on integers; 3xTF32 of A (1 + 2^-12)
 * times B (1 + 2^-13) within 2^-21 of the exact sum, where one TF32
 * product would miss it by about 2^-12 of each term. */
static int check32(fcl_context *ctx, const uint32_t *out) {
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, c = 2 * (lane & 3);
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e >> 1) * 8, col = c + (e & 1);
      double want = 0.0, mag = 0.0;
      for (int kk = 0; kk < 8; ++kk) {
        want += fcl_probe_val_a(row, kk) * fcl_probe_val_b(kk, col);
        mag += fabs(fcl_probe_val_a(row, kk) * fcl_probe_val_b(kk, col));
      }
      const double f = (1.0 + 0x1p-12) * (1.0 + 0x1p-13);
      const float got1 = word_f(&out[lane * 10 + e]), got2 = word_f(&out[lane * 10 + 4 + e]);
      if (got1 != (float)want || fabs(got2 - want * f) > mag * 0x1p-21) {
        fcl_log(ctx, "fast path: TF32 probe lane %d element %d: %.9g and %.9g, want %g and %.9g",
                lane, e, got1, got2, want, want * f);
        return 1;
      }
    }
    if (word_f(&out[lane * 10 + 8]) != (float)(lane ^ 3) || out[lane * 10 + 9] != 0) {
      fcl_log(ctx, "fast path: TF32 probe lane %d: shuffle %g, zero fill %08x", lane,
              word_f(&out[lane * 10 + 8]), (unsigned)out[lane * 10 + 9]);
      return 2;
    }
  }
  return 0;
}

/* Builds and runs the probe; FCL_OK with *ok telling whether it was right
 * and *variant which asm_opts entry built. */
static fcl_status run_probe(fcl_context *ctx, fcl_dtype t, bool *ok, int *variant) {
  *ok = false;
  cl_kernel k = build_probe(ctx, t, variant);
  if (!k) return FCL_OK;
  uint32_t out[320];
  fcl_status s;
  int bad;
  if (t == FCL_F32) {
    float a[128], b[64];
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 8; ++c) a[r * 8 + c] = fcl_probe_val_a(r, c);
    for (int kk = 0; kk < 8; ++kk)
      for (int n = 0; n < 8; ++n) b[kk * 8 + n] = fcl_probe_val_b(kk, n);
    void *in[2] = {a, b};
    const size_t bytes[2] = {sizeof a, sizeof b};
    if ((s = launch_probe(ctx, k, 2, in, bytes, out))) return s;
    bad = check32(ctx, out);
  } else {
    uint16_t a[256], bt[128], bkn[128];
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c) a[r * 16 + c] = fcl_probe_bits(fcl_probe_val_a(r, c), t);
    for (int kk = 0; kk < 16; ++kk)
      for (int n = 0; n < 8; ++n) {
        bt[n * 16 + kk] = fcl_probe_bits(fcl_probe_val_b(kk, n), t);
        bkn[kk * 8 + n] = fcl_probe_bits(fcl_probe_val_b(kk, n), t);
      }
    void *in[3] = {a, bt, bkn};
    const size_t bytes[3] = {sizeof a, sizeof bt, sizeof bkn};
    if ((s = launch_probe(ctx, k, 3, in, bytes, out))) return s;
    bad = check16(ctx, t, out);
  }
  if (bad)
    fcl_log(ctx, "fast path: the mma probe gave wrong %s",
            bad == 1 ? "products" : "shuffles or packing");
  *ok = !bad;
  return FCL_OK;
}

fcl_status fcl_mma_ready(fcl_context *ctx, fcl_dtype t, bool *ready) {
  *ready = false;
  if (t != FCL_F32 && t != FCL_F16 && t != FCL_BF16) return FCL_OK;
  signed char *state = &ctx->mma_state[t];
  if (*state == 0) {
    const char *why = NULL;
    if (ctx->opt.disable_fastpath) why = "FCL_DISABLE_FASTPATH is set";
    else if (!ctx->info.is_nvidia && !ctx->info.mma_emulate) why = "not an NVIDIA device";
    bool ok = false;
    int variant = 0;
    if (!why) {
      /* A probe that cannot even run leaves the portable path to try. It
       * runs even within a dry run (its answer is kept). */
      const bool dry = ctx->dry_run;
      ctx->dry_run = false;
      struct fcl_plan *rec = ctx->rec; /* nor is it part of a plan */
      ctx->rec = NULL;
      const fcl_status ps = run_probe(ctx, t, &ok, &variant);
      ctx->dry_run = dry;
      ctx->rec = rec;
      if (ps != FCL_OK) {
        fcl_log(ctx, "fast path: the mma probe did not run: %s", ctx->message);
        fcl_clear_error(ctx);
        ok = false;
      }
      if (!ok) why = "the probe failed";
    }
    *state = ok ? (signed char)(1 + variant) : -1;
    fcl_log(ctx, "fast path (tensor cores, %s%s): %s%s",
            t == FCL_F32 ? "f32 in 3xTF32" : t == FCL_F16 ? "f16" : "bf16",
            ctx->info.mma_emulate ? ", emulated" : "", ok ? "on" : "off: ", ok ? "" : why);
  }
  *ready = *state > 0;
  return FCL_OK;
}

const char *fcl_mma_build_options(const fcl_context *ctx, fcl_dtype t) {
  return ctx->info.mma_emulate ? emulate_opts : asm_opts[ctx->mma_state[t] - 1];
}
