/* Dropout on the tensor-core kernels, forced through the tuning override,
 * against the same calls on the portable kernels (a second context with
 * FCL_DISABLE_FASTPATH=1 and FCL_CPU_KERNEL=0):
 * the mask is a function of (seed, offset, b, h, i, j) only, so the two
 * must drop the same pairs, and o, lse, dq, dk and dv agree within the
 * forced tests' tolerances (op_verify.c; tolerances relative to the
 * largest value, which a wrong mask bit breaks).
 *
 *   test_attention_dropout_forced [mma|wgmma]   (default mma)
 *
 * Each case forces one forward variant and one backward variant at its
 * tiles: mma, mma.sync in f16 and bf16, 3xTF32 in f32 (the row
 * attention_fwd_mma; the backward's attention_bwd_mma); wgmma, Hopper's
 * attention_fwd_wgmma and attention_bwd_wgmma (f16, bf16; one and two
 * warpgroups, Q or K in registers, backward steps with and without the
 * overlap of the gradient products). fcl_attention_config must name them
 * (and the portable kernels on the reference context) for the case's
 * descriptor, dropout included, so that no case passes by falling back. The backward calls of both contexts
 * take the reference's o and lse, so that they differ by the kernels only.
 * Run under FCL_MMA_EMULATE=1 on PoCL (tests/CMakeLists.txt); on a device
 * whose tensor-core rows do not apply the test is skipped (77). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "op_harness.h"
#define FCL_STATIC_LINKING_ONLY
#include "flashcl_tuning.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *fwd, *fwd_params, *bwd, *bwd_params; /* bwd NULL: forward only */
  fcl_dtype   dt;
  int64_t     b, sq, sk, hq, hkv, d, dv;
  int         causal;
  int64_t     wl, wr;
  float       p;
  int         nan_v; /* a NaN in v at key sk / 2 (1) or dout at query sq / 2 (2), head 0 */
} drop_case;

/* mma.sync: two tile shapes each (forward: warps, key tile, m16 tiles a
 * warp; backward: dQ's, then dK/dV's). */
#define M_A "WARPS=2,BLOCK_N=32,MT=2"
#define M_B "WARPS=3,BLOCK_N=48,MT=1"
#define B_A "WARPS=2,BLOCK_N=32,MT=2,STAGES=2,KV_WARPS=3,KV_BLOCK_N=16,KV_STAGES=2"
#define B_B "WARPS=3,BLOCK_N=48,MT=1,STAGES=1,KV_WARPS=2,KV_BLOCK_N=32,KV_STAGES=1"

static const drop_case mma_cases[] = {
  /* GQA, causal, sk a multiple of 4 (aligned runs) and not */
  {"attention_fwd_mma", M_A, "attention_bwd_mma", B_A, FCL_F16, 1, 100, 128, 2, 1, 64, 64, 1, -1, -1, 0.2f, 0},
  {"attention_fwd_mma", M_B, "attention_bwd_mma", B_B, FCL_BF16, 1, 130, 130, 2, 1, 64, 64, 1, -1, -1, 0.5f, 0},
  /* a window, a head dim of 40 */
  {"attention_fwd_mma", M_B, "attention_bwd_mma", B_A, FCL_F16, 1, 77, 99, 2, 2, 40, 40, 0, 30, 2, 0.5f, 0},
  {"attention_fwd_mma", M_A, "attention_bwd_mma", B_B, FCL_BF16, 1, 64, 71, 2, 1, 80, 80, 0, -1, -1, 0.2f, 0},
  /* a NaN in v: rows that drop its key must not see it */
  {"attention_fwd_mma", M_A, NULL, NULL, FCL_F16, 1, 66, 90, 2, 1, 64, 64, 0, -1, -1, 0.5f, 1},
  /* 3xTF32 (f32; the backward is the portable kernel's), a window, GQA, a NaN in v */
  {"attention_fwd_mma", "WARPS=3,BLOCK_N=16,MT=1", NULL, NULL, FCL_F32, 1, 100, 77, 2, 1, 64, 64, 1, -1, -1, 0.2f, 0},
  {"attention_fwd_mma", "WARPS=2,BLOCK_N=40,MT=1", NULL, NULL, FCL_F32, 1, 61, 130, 2, 2, 40, 40, 0, 30, 2, 0.5f, 0},
  {"attention_fwd_mma", "WARPS=2,BLOCK_N=32,MT=1", NULL, NULL, FCL_F32, 1, 64, 90, 2, 1, 80, 80, 0, -1, -1, 0.5f, 1},
  /* a NaN in dout: dV of the keys its row drops must not see it */
  {"attention_fwd_mma", M_B, "attention_bwd_mma", B_A, FCL_BF16, 1, 70, 90, 2, 1, 64, 64, 1, -1, -1, 0.5f, 2},
};

/* wgmma: the forward with one warpgroup and Q in local memory (W_A) and
 * two with Q in registers (W_B); the backward with both kernels' products
 * overlapped over three stages (G_A), dK/dV's over two with K in registers
 * and dQ's one stage with Q and dO in registers (G_B), and neither
 * overlapped (G_C: one stage of dK/dV, two of dQ on two warpgroups). */
#define W_A "WARPS=4,BLOCK_N=64,LOCAL_OPS=2"
#define W_B "WARPS=8,BLOCK_N=32,LOCAL_OPS=1"
#define G_A "WK_WARPS=4,WK_BLOCK_N=32,WK_STAGES=3,WQ_WARPS=4,WQ_BLOCK_N=32,WQ_STAGES=3,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=2"
#define G_B "WK_WARPS=8,WK_BLOCK_N=16,WK_STAGES=2,WQ_WARPS=4,WQ_BLOCK_N=48,WQ_STAGES=1,WQ_LOCAL_OPS=1,WK_LOCAL_OPS=1"
#define G_C "WK_WARPS=4,WK_BLOCK_N=64,WK_STAGES=1,WQ_WARPS=8,WQ_BLOCK_N=16,WQ_STAGES=2,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=2"

static const drop_case wgmma_cases[] = {
  /* causal, GQA, sk a multiple of 4 (aligned runs) and not */
  {"attention_fwd_wgmma", W_A, "attention_bwd_wgmma", G_A, FCL_F16, 1, 100, 128, 2, 1, 64, 64, 1, -1, -1, 0.2f, 0},
  {"attention_fwd_wgmma", W_B, "attention_bwd_wgmma", G_B, FCL_BF16, 1, 130, 130, 4, 2, 64, 64, 1, -1, -1, 0.5f, 0},
  /* a window and head dims of 32; D = 128 */
  {"attention_fwd_wgmma", W_A, "attention_bwd_wgmma", G_C, FCL_F16, 2, 77, 99, 2, 2, 32, 32, 0, 30, 2, 0.5f, 0},
  {"attention_fwd_wgmma", W_B, "attention_bwd_wgmma", G_B, FCL_BF16, 1, 64, 71, 2, 1, 128, 128, 0, -1, -1, 0.2f, 0},
  /* a NaN in v (forward and backward) and in dout: rows that drop its key
   * must not see it (the flagged kv head of dout runs the mma.sync dQ and
   * dK/dV kernels, the other the wgmma ones) */
  {"attention_fwd_wgmma", W_A, "attention_bwd_wgmma", G_B, FCL_F16, 1, 66, 90, 2, 2, 64, 64, 0, -1, -1, 0.5f, 1},
  {"attention_fwd_wgmma", W_B, "attention_bwd_wgmma", G_C, FCL_BF16, 1, 70, 90, 2, 2, 64, 64, 1, -1, -1, 0.5f, 2},
  {"attention_fwd_wgmma", W_A, "attention_bwd_wgmma", G_A, FCL_F16, 1, 61, 93, 2, 2, 64, 64, 1, -1, -1, 0.5f, 2},
};

static fcl_attention_desc desc_of(const drop_case *c, int idx) {
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = c->b, d.seqlen_q = c->sq, d.seqlen_k = c->sk, d.heads_q = c->hq;
  d.heads_kv = c->hkv, d.head_dim = c->d, d.head_dim_v = c->dv, d.causal = c->causal;
  d.window_left = c->wl, d.window_right = c->wr;
  d.dropout_p = c->p;
  d.dropout_seed = 0x9e3779b97f4a7c15ull + (uint64_t)idx;
  d.dropout_offset = (3ull << 32) | (uint64_t)(17 * idx);
  return d;
}

/* Whether fcl_attention_config names kernel for d (forward or backward),
 * with kernel's override params set first (NULL: none); what it named in got. */
static bool reports(fcl_context *ctx, const fcl_attention_desc *d, fcl_dtype dt, int backward,
                    const char *kernel, const char *forced, char *got, size_t size) {
  fcl_config_info info;
  const fcl_variant *v = fcl_variant_find(kernel);
  const bool ok = v && (!forced || fcl_tuning_override(ctx, v, forced) == FCL_OK) &&
                  fcl_attention_config(ctx, d, dt, backward, &info) == FCL_OK;
  if (forced && v) fcl_tuning_override(ctx, v, NULL);
  if (!ok) {
    snprintf(got, size, "fcl_attention_config: %s", fcl_context_last_error(ctx));
    return false;
  }
  snprintf(got, size, "%s %s", info.kernel, info.params);
  return strcmp(info.kernel, kernel) == 0;
}

/* One forward (o, lse out) or, with dout, one backward given o and lse (dq,
 * dk, dv out) on ctx. Returns 0 or 1 with the reason in why. */
static int call(fcl_context *ctx, const fcl_attention_desc *d, fcl_dtype dt, const double *q,
                const double *k, const double *v, double *o, double *lse, const double *dout,
                double *dq, double *dk, double *dv, char *why, size_t nwhy) {
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue qu = fcl_context_queue(ctx);
  const int64_t b = d->batch, sq = d->seqlen_q, sk = d->seqlen_k, hq = d->heads_q;
  const int64_t hk = d->heads_kv, dd = d->head_dim, dv_ = d->head_dim_v;
  const size_t nl = (size_t)(b * hq * sq);
  tu_tensor t[8];
  memset(t, 0, sizeof t);
  float *lf = calloc(nl + 1, sizeof *lf);
  cl_mem lbuf = NULL;
  int bad = !lf;
  bad = bad || tu_tensor_create(cl, qu, q, b, sq, hq, dd, dt, TU_BSHD, 0, 0, &t[0]) ||
        tu_tensor_create(cl, qu, k, b, sk, hk, dd, dt, TU_BSHD, 0, 0, &t[1]) ||
        tu_tensor_create(cl, qu, v, b, sk, hk, dv_, dt, TU_BSHD, 0, 0, &t[2]) ||
        tu_tensor_create(cl, qu, dout ? o : NULL, b, sq, hq, dv_, dt, TU_BSHD, 0, 0, &t[3]);
  if (!bad && dout) {
    for (size_t i = 0; i < nl; ++i) lf[i] = (float)lse[i];
    lbuf = tu_buffer_from(cl, qu, lf, nl * sizeof *lf);
    bad = !lbuf ||
          tu_tensor_create(cl, qu, dout, b, sq, hq, dv_, dt, TU_BSHD, 0, 0, &t[4]) ||
          tu_tensor_create(cl, qu, NULL, b, sq, hq, dd, dt, TU_BSHD, 0, 0, &t[5]) ||
          tu_tensor_create(cl, qu, NULL, b, sk, hk, dd, dt, TU_BSHD, 0, 0, &t[6]) ||
          tu_tensor_create(cl, qu, NULL, b, sk, hk, dv_, dt, TU_BSHD, 0, 0, &t[7]);
  } else if (!bad) {
    lbuf = tu_buffer_poison(cl, qu, nl * sizeof(float));
    bad = !lbuf;
  }
  if (bad) {
    oh_append(why, nwhy, " could not create the buffers;");
  } else {
    const fcl_status s =
        dout ? fcl_attention_backward(ctx, d, &t[0].t, &t[1].t, &t[2].t, &t[3].t, lbuf,
                                      &t[4].t, &t[5].t, &t[6].t, &t[7].t)
             : fcl_attention_forward(ctx, d, &t[0].t, &t[1].t, &t[2].t, &t[3].t, lbuf);
    if (s != FCL_OK) {
      oh_append(why, nwhy, " %s: %s;", dout ? "backward" : "forward", fcl_context_last_error(ctx));
      bad = 1;
    } else if (dout) {
      bad = tu_tensor_read(qu, &t[5], dq, NULL) != 0 || tu_tensor_read(qu, &t[6], dk, NULL) != 0 ||
            tu_tensor_read(qu, &t[7], dv, NULL) != 0;
    } else {
      long tail = 0;
      bad = tu_tensor_read(qu, &t[3], o, NULL) != 0 ||
            tu_buffer_read_f32(qu, lbuf, lse, nl, 0, &tail) != 0;
    }
    if (bad && s == FCL_OK) oh_append(why, nwhy, " reading the results failed;");
  }
  for (int i = 0; i < 8; ++i)
    if (t[i].buffer) tu_tensor_release(&t[i]);
  if (lbuf) clReleaseMemObject(lbuf);
  free(lf);
  return !bad;
}

static int run(fcl_context *ctx, fcl_context *ref, const drop_case *c, int idx) {
  const fcl_attention_desc d = desc_of(c, idx);
  char got[4][256] = {"", "", "", ""}, why[2048] = "";
  /* The forced rows run here, the portable kernels on ref. */
  int ok = reports(ctx, &d, c->dt, 0, c->fwd, c->fwd_params, got[0], sizeof got[0]) &&
           reports(ref, &d, c->dt, 0, "attention_fwd", NULL, got[1], sizeof got[1]);
  if (c->bwd)
    ok = ok && reports(ctx, &d, c->dt, 1, c->bwd, c->bwd_params, got[2], sizeof got[2]) &&
         reports(ref, &d, c->dt, 1, "attention_bwd", NULL, got[3], sizeof got[3]);
  if (!ok)
    oh_append(why, sizeof why, " not the kernels asked for: %s | %s | %s | %s;", got[0], got[1],
              got[2], got[3]);
  const size_t nq = (size_t)(c->b * c->sq * c->hq * c->d), nk = (size_t)(c->b * c->sk * c->hkv * c->d);
  const size_t nv = (size_t)(c->b * c->sk * c->hkv * c->dv), no = (size_t)(c->b * c->sq * c->hq * c->dv);
  const size_t nl = (size_t)(c->b * c->hq * c->sq);
  double *q = oh_dalloc(nq), *k = oh_dalloc(nk), *v = oh_dalloc(nv), *dout = oh_dalloc(no);
  double *o = oh_dalloc(no), *lse = oh_dalloc(nl), *o_r = oh_dalloc(no), *lse_r = oh_dalloc(nl);
  double *g[3] = {oh_dalloc(nq), oh_dalloc(nk), oh_dalloc(nv)};
  double *g_r[3] = {oh_dalloc(nq), oh_dalloc(nk), oh_dalloc(nv)};
  tu_rng r;
  tu_rng_seed(&r, 7000 + (uint64_t)idx);
  tu_fill_uniform(&r, q, nq, -2.0, 2.0);
  tu_fill_uniform(&r, k, nk, -2.0, 2.0);
  tu_fill_uniform(&r, v, nv, -1.0, 1.0);
  tu_fill_uniform(&r, dout, no, -1.0, 1.0);
  tu_round_array(q, nq, c->dt), tu_round_array(k, nk, c->dt);
  tu_round_array(v, nv, c->dt), tu_round_array(dout, no, c->dt);
  if (c->nan_v == 1) v[(c->sk / 2) * c->hkv * c->dv + 3] = NAN;
  if (c->nan_v == 2) dout[(c->sq / 2) * c->hq * c->dv + 3] = NAN;

  const fcl_variant *fv = fcl_variant_find(c->fwd), *bv = c->bwd ? fcl_variant_find(c->bwd) : NULL;
  ok = ok && call(ref, &d, c->dt, q, k, v, o_r, lse_r, NULL, NULL, NULL, NULL, why, sizeof why);
  ok = ok && fcl_tuning_override(ctx, fv, c->fwd_params) == FCL_OK &&
       call(ctx, &d, c->dt, q, k, v, o, lse, NULL, NULL, NULL, NULL, why, sizeof why);
  fcl_tuning_override(ctx, fv, NULL);
  if (ok) {
    ref_attention_problem p;
    memset(&p, 0, sizeof p);
    p.batch = c->b, p.seqlen_q = c->sq, p.seqlen_k = c->sk, p.heads_q = c->hq;
    p.heads_kv = c->hkv, p.head_dim = c->d, p.head_dim_v = c->dv, p.causal = c->causal;
    p.window_left = c->wl, p.window_right = c->wr;
    const double bound = ref_attention_logit_bound(&p, q, k);
    /* o holds the kept values times 1 / (1 - p) */
    const double vmax = oh_max_abs(v, nv) / (1.0 - (double)c->p);
    const tu_tol tol_o = tu_tol_with_logits(tu_tol_output(c->dt), bound, c->d, vmax);
    const tu_tol tol_l = tu_tol_with_logits(tu_tol_lse(), bound, c->d, 0.0);
    ok &= oh_check("o", o, o_r, no, tol_o, 0, why, sizeof why);
    ok &= oh_check("lse", lse, lse_r, nl, tol_l, 1, why, sizeof why);
  }
  if (ok && c->bwd) {
    ok = call(ref, &d, c->dt, q, k, v, o_r, lse_r, dout, g_r[0], g_r[1], g_r[2], why, sizeof why);
    ok = ok && fcl_tuning_override(ctx, bv, c->bwd_params) == FCL_OK &&
         call(ctx, &d, c->dt, q, k, v, o_r, lse_r, dout, g[0], g[1], g[2], why, sizeof why);
    fcl_tuning_override(ctx, bv, NULL);
    const tu_tol tol_g = {oh_grad_tol(c->dt), 0.0, 0.0};
    static const char *const names[3] = {"dq", "dk", "dv"};
    const size_t ns[3] = {nq, nk, nv};
    for (int i = 0; ok && i < 3; ++i) ok &= oh_check(names[i], g[i], g_r[i], ns[i], tol_g, 0, why, sizeof why);
  }
  printf("%s %-4s p=%.1f %s[%s] %s[%s] | b%lld sq%lld sk%lld h%lld/%lld d%lld/%lld%s%s%s |%s\n",
         ok ? "PASS" : "FAIL", tu_dtype_name(c->dt), (double)c->p, c->fwd, c->fwd_params,
         c->bwd ? c->bwd : "-", c->bwd ? c->bwd_params : "", (long long)c->b, (long long)c->sq,
         (long long)c->sk, (long long)c->hq, (long long)c->hkv, (long long)c->d,
         (long long)c->dv, c->causal ? " causal" : "", c->wl >= 0 || c->wr >= 0 ? " window" : "",
         c->nan_v ? (c->nan_v == 1 ? " NaN-in-v" : " NaN-in-dout") : "", why);
  fflush(stdout);
  free(q), free(k), free(v), free(dout), free(o), free(lse), free(o_r), free(lse_r);
  for (int i = 0; i < 3; ++i) free(g[i]), free(g_r[i]);
  return ok;
}

int main(int argc, char **argv) {
  const double t0 = tu_now();
  const char *mode = argc > 1 ? argv[1] : "mma";
  const int wg = strcmp(mode, "wgmma") == 0;
  if (!wg && strcmp(mode, "mma") != 0) {
    printf("usage: test_attention_dropout_forced [mma|wgmma]\n");
    return 2;
  }
  const drop_case *cases = wg ? wgmma_cases : mma_cases;
  const int n = wg ? (int)(sizeof wgmma_cases / sizeof *wgmma_cases)
                   : (int)(sizeof mma_cases / sizeof *mma_cases);
  fcl_context *ctx = NULL, *ref = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  setenv("FCL_DISABLE_FASTPATH", "1", 1);
  setenv("FCL_CPU_KERNEL", "0", 1);
  const fcl_status s = fcl_context_create(NULL, &ref);
  unsetenv("FCL_DISABLE_FASTPATH");
  unsetenv("FCL_CPU_KERNEL");
  if (s != FCL_OK) {
    printf("FAIL: fcl_context_create (reference): %s\n", fcl_context_last_error(NULL));
    fcl_context_destroy(ctx);
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  /* Where the tensor-core rows cannot run, nothing here is tested: skipped,
   * unless FCL_MMA_EMULATE=1 guarantees them (wgmma's too unless
   * FCL_WGMMA=0; a broken probe must fail). */
  char got[256];
  const fcl_attention_desc d0 = desc_of(&cases[0], 0);
  if (!reports(ctx, &d0, cases[0].dt, 0, cases[0].fwd, cases[0].fwd_params, got, sizeof got)) {
    const int guaranteed = oh_mma_guaranteed() && (!wg || oh_env_flag("FCL_WGMMA", 1));
    printf("%s %s does not run here (%s)%s\n", guaranteed ? "FAIL" : "SKIP", cases[0].fwd, got,
           guaranteed ? " although FCL_MMA_EMULATE=1 guarantees it" : "");
    fcl_context_destroy(ctx), fcl_context_destroy(ref);
    return guaranteed ? 1 : OH_SKIP;
  }
  int failed = 0;
  for (int i = 0; i < n; ++i) failed += !run(ctx, ref, &cases[i], i);
  fcl_context_destroy(ctx);
  fcl_context_destroy(ref);
  printf("test_attention_dropout_forced %s: %d cases, %d failed, %.1f s\n", mode, n, failed,
         tu_now() - t0);
  return failed ? 1 : 0;
}
