/* Whether Hopper's warpgroup products work here (cl/common/wgmma.cl): per
 * context and 16-bit dtype, the probe kernel (cl/common/wgmma_probe.cl) is
 * built with FCL_SM90A_OPTION, which makes program.c rebuild it from its
 * PTX retargeted to sm_90a, and run once by one warpgroup on small exact
 * values; its products are checked here. Any step that fails (a device
 * that is not sm_90, a driver that refuses the PTX, a wrong product) leaves
 * the mma.sync kernels to run, and says why in the log. FCL_WGMMA=0 turns
 * the probe off; with FCL_MMA_EMULATE=1 the helpers' emulation runs it
 * (and the kernels) on any device. */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Builds, runs and checks the probe: FCL_OK with *ok its verdict. */
static fcl_status run_probe(fcl_context *ctx, fcl_dtype t, bool *ok) {
  char opts[256];
  snprintf(opts, sizeof opts, "-DFCL_DTYPE=%d %s %s", (int)t, fcl_mma_build_options(ctx, t),
           ctx->info.mma_emulate ? "" : FCL_SM90A_OPTION);
  cl_kernel k;
  fcl_status s = fcl_get_kernel(ctx, FCL_TOPS("common/wgmma_probe.cl"), opts, "fcl_wgmma_probe",
                                &k);
  if (s) return s;
  /* On the heap, not static: contexts in two threads may probe at once. */
  struct {
    uint16_t a[64 * 64], bt[16 * 64], bkn[16 * 64];
    float out[64 * 128];
  } *d = malloc(sizeof *d);
  if (!d) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "wgmma probe data");
  uint16_t *a = d->a, *bt = d->bt, *bkn = d->bkn;
  float *out = d->out;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; ++c) a[r * 64 + c] = fcl_probe_bits(fcl_probe_val_a(r, c), t);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 64; ++j) {
      bt[i * 64 + j] = fcl_probe_bits(fcl_probe_val_b(j, i), t);  /* B^T: row n = i, k = j */
      bkn[i * 64 + j] = fcl_probe_bits(fcl_probe_val_b(i, j), t); /* B: row k = i, n = j */
    }
  const void *in[3] = {a, bt, bkn};
  const size_t in_bytes[3] = {sizeof d->a, sizeof d->bt, sizeof d->bkn};
  cl_mem bufs[4] = {NULL, NULL, NULL, NULL};
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < 4 && s == FCL_OK; ++i) {
    bufs[i] = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE | (i < 3 ? CL_MEM_COPY_HOST_PTR : 0),
                             i < 3 ? in_bytes[i] : sizeof d->out, i < 3 ? (void *)in[i] : NULL,
                             &err);
    if (err != CL_SUCCESS) s = fcl_fail_cl(ctx, err, "wgmma probe buffers");
  }
  if (s == FCL_OK) {
    fcl_args args = FCL_ARGS(k);
    for (int i = 0; i < 4; ++i) FCL_ARG(&args, bufs[i]);
    const size_t g[3] = {128, 1, 1}, l[3] = {128, 1, 1};
    s = fcl_launch(ctx, k, &args, g, l, "enqueueing the wgmma probe");
  }
  if (s == FCL_OK && (err = clEnqueueReadBuffer(ctx->queue, bufs[3], CL_TRUE, 0, sizeof d->out, out,
                                                0, NULL, NULL)) != CL_SUCCESS)
    s = fcl_fail_cl(ctx, err, "reading the wgmma probe");
  for (int i = 0; i < 4; ++i)
    if (bufs[i]) clReleaseMemObject(bufs[i]);
  if (s) {
    free(d);
    return s;
  }
  /* Each product's n8 tiles, rows, sum length and name (the layout above). */
  static const struct { int e0, ntiles, klen; const char *what; } prods[5] = {
      {0, 2, 64, "K-major, swizzled"}, {8, 2, 16, "K-major, core matrices"},
      {16, 8, 16, "N-major, swizzled"}, {48, 2, 16, "N-major, core matrices"},
      {56, 2, 16, "A from registers, K-major, swizzled"}};
  *ok = true;
  for (int p = 0; p < 5 && *ok; ++p)
    for (int lid = 0; lid < 128 && *ok; ++lid)
      for (int e = 0; e < 4 * prods[p].ntiles && *ok; ++e) {
        /* element e: n8 tile e / 4, row g or g + 8, column 2 t + e % 2 */
        const int lane = lid & 31, row = (lid >> 5) * 16 + (lane >> 2) + ((e >> 1) & 1) * 8;
        const int col = (e >> 2) * 8 + 2 * (lane & 3) + (e & 1);
        float want = 0.0f;
        for (int kk = 0; kk < prods[p].klen; ++kk) want += fcl_probe_val_a(row, kk) * fcl_probe_val_b(kk, col);
        const float got = out[(prods[p].e0 + e) * 128 + lid];
        if (got != want) {
          fcl_log(ctx, "fast path: wgmma probe (%s) row %d column %d: %g, want %g",
                  prods[p].what, row, col, got, want);
          *ok = false;
        }
      }
  free(d);
  return FCL_OK;
}

bool fcl_wgmma_n(int64_t n) {
  return n == 16 || n == 32 || n == 48 || n == 64 || n == 96 || n == 128;
}

fcl_status fcl_wgmma_ready(fcl_context *ctx, fcl_dtype t, bool *ready) {
  *ready = false;
  if (t != FCL_F16 && t != FCL_BF16) return FCL_OK;
  signed char *state = &ctx->wgmma_state[t];
  if (*state == 0) {
    bool mma = false, ok = false;
    const char *why = NULL;
    fcl_status s = fcl_mma_ready(ctx, t, &mma);
    if (s) return s;
    if (!ctx->opt.wgmma) why = "FCL_WGMMA=0";
    else if (!mma) why = "no mma.sync path";
    else if (ctx->info.nv_sm != 90 && !ctx->info.mma_emulate) why = "not an sm_90 device";
    else {
      const bool dry = ctx->dry_run; /* the probe runs even in a dry run */
      ctx->dry_run = false;
      struct fcl_plan *rec = ctx->rec; /* nor is it part of a plan */
      ctx->rec = NULL;
      s = run_probe(ctx, t, &ok);
      ctx->dry_run = dry;
      ctx->rec = rec;
      if (s) {
        fcl_log(ctx, "fast path: the wgmma probe did not run: %s", ctx->message);
        fcl_clear_error(ctx);
        ok = false;
      }
      if (!ok) why = "the probe failed";
    }
    *state = ok ? 1 : -1;
    fcl_log(ctx, "fast path (wgmma, %s%s): %s%s", t == FCL_F16 ? "f16" : "bf16",
            ctx->info.mma_emulate ? ", emulated" : "", ok ? "on" : "off: ", ok ? "" : why);
  }
  *ready = *state > 0;
  return FCL_OK;
}
