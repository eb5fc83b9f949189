/* The attention forward with parameters forced through the tuning
 * override, against the double reference with the main suites'
 * tolerances (op_verify.c).
 *
 *   test_attention_forced [cpu|mma|wgmma]   (default cpu)
 *
 * cpu: the CPU forward (cl/attention_fwd_cpu.cl). Its defaults fall back to
 * one query block per work-item on small problems, so the edges of the
 * multi-block, chunked walk are met here: chunks of one key block, blocks
 * of one key, key counts no block size divides, output slices with a short
 * last one, head dims that are not multiples of the staging width, rows
 * past the end of a block, work-groups of several work-items, and a NaN in
 * v at a key that masking hides from some rows of a block. Runs where the
 * CPU kernel applies (PoCL).
 * mma: the tensor-core forward (NVIDIA, or FCL_MMA_EMULATE=1) with block
 * sizes its defaults do not take (3 warps, key tiles of 16 and 40, two m16
 * tiles a warp with windows, softcap, ALiBi, varlen and a masked NaN),
 * and the tensor-core backward likewise (two m16 tiles of queries a warp
 * for dQ and of keys for dK/dV, 1 and 3 warps, the next tile loaded during
 * this one, across the query heads of a GQA group too), run on the
 * forward's o and lse with dO as input.
 * wgmma: the Hopper forward (cl/attention/attention_fwd_wgmma.cl) with
 * one and two warpgroups and every key-tile width it takes, and the
 * backward with dQ and dK/dV on wgmma (cl/attention/attention_bwd_wgmma_*.cl):
 * one and two warpgroups of keys or queries, tiles of 16 to 128 in one to
 * three stages, dQ's Q and dO and dK/dV's K in local memory or in registers, GQA,
 * varlen, windows, softcap, ALiBi, a NaN in v, and a NaN in
 * k, whose kv head then runs the mma.sync dQ and dK/dV kernels beside
 * the wgmma ones.
 * Where a mode's kernel does not run (fcl_attention_config names another
 * with the mode's override set) the mode exits 77, which CTest counts as
 * skipped; so does a case whose dtype the kernel does not take here. Where
 * the environment guarantees the kernel, that is a failure instead (a
 * broken probe must not pass): mma and wgmma under FCL_MMA_EMULATE=1
 * (wgmma unless FCL_WGMMA=0), cpu on a CPU device other than llvmpipe
 * with FCL_CPU_KERNEL and FCL_LOOP_BUDGET unset.
 * mma also breaks a copy of the tensor-core forwards' kernels: unforced the
 * next row runs, forced the call fails (forced_build_failure). */
#define _POSIX_C_SOURCE 200809L /* setenv, getpid */
#include "op_harness.h"
#define FCL_STATIC_LINKING_ONLY
#include "flashcl_tuning.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  const char *kernel; /* the variant */
  const char *params;
  fcl_dtype   dt;
  int64_t     b, sq, sk, hq, hkv, d, dv;
  int         causal;
  int64_t     wl, wr;   /* -1: unlimited */
  double      softcap;
  int         alibi;
  int         nseq;     /* > 0: varlen with these lengths */
  int32_t     lens_q[4], lens_k[4];
  int         nan_v;    /* NaN in v (1) or k (2) at key sk/2 of batch 0, kv head 0 */
} forced_case;

#define P1 "ROWS=16,QB=8,BLOCK_N=6,KEY_CHUNK=6,BLOCK_DV=64,WG_SIZE=1"
#define P2 "ROWS=8,QB=3,BLOCK_N=5,KEY_CHUNK=10,BLOCK_DV=23,WG_SIZE=3"
#define P3 "ROWS=4,QB=16,BLOCK_N=1,KEY_CHUNK=3,BLOCK_DV=37,WG_SIZE=1"
#define P4 "ROWS=16,QB=2,BLOCK_N=16,KEY_CHUNK=256,BLOCK_DV=45,WG_SIZE=4"

static const forced_case cpu_cases[] = {
  {"attention_fwd_cpu", P1, FCL_F32, 2, 300, 300, 2, 1, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_cpu", P1, FCL_F32, 1, 200, 333, 2, 2, 64, 64, 0, 40, 9, 0, 1, 0, {0}, {0}, 0},
  {"attention_fwd_cpu", P1, FCL_BF16, 1, 129, 70, 2, 2, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 1},
  {"attention_fwd_cpu", P2, FCL_F32, 1, 257, 199, 4, 2, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_cpu", P2, FCL_F32, 0, 0, 0, 2, 2, 64, 64, 0, 17, 3, 5.0, 1, 4, {100, 0, 61, 3}, {90, 7, 130, 0}, 0},
  {"attention_fwd_cpu", P2, FCL_F32, 1, 90, 40, 2, 2, 64, 64, 0, 5, 5, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_cpu", P2, FCL_F32, 1, 64, 64, 2, 2, 64, 64, 0, 3, 3, 0, 0, 0, {0}, {0}, 1},
  {"attention_fwd_cpu", P3, FCL_F16, 1, 150, 171, 2, 1, 37, 37, 1, -1, -1, 0, 1, 0, {0}, {0}, 0},
  {"attention_fwd_cpu", P3, FCL_F16, 2, 33, 33, 3, 3, 37, 37, 0, -1, -1, 3.0, 0, 0, {0}, {0}, 1},
  {"attention_fwd_cpu", P4, FCL_BF16, 1, 300, 500, 2, 2, 19, 45, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_cpu", P4, FCL_BF16, 0, 0, 0, 2, 1, 19, 45, 1, -1, -1, 0, 1, 3, {1, 40, 77}, {300, 40, 60}, 0},
};

#define M1 "WARPS=3,BLOCK_N=16,MT=1"
#define M2 "WARPS=2,BLOCK_N=40,MT=1"
#define M3 "WARPS=2,BLOCK_N=32,MT=1"
#define M4 "WARPS=2,BLOCK_N=32,MT=2" /* two m16 tiles a warp */
#define M5 "WARPS=3,BLOCK_N=48,MT=2"
/* dQ's shape, then dK/dV's (KV_): each its own work-group and tiles */
#define B1 "WARPS=2,BLOCK_N=32,MT=2,STAGES=2,KV_WARPS=3,KV_BLOCK_N=16,KV_STAGES=2"
#define B2 "WARPS=3,BLOCK_N=48,MT=2,STAGES=2,KV_WARPS=1,KV_BLOCK_N=32,KV_STAGES=1"
#define B3 "WARPS=1,BLOCK_N=16,MT=2,STAGES=2,KV_WARPS=2,KV_BLOCK_N=48,KV_STAGES=1"
#define B4 "WARPS=4,BLOCK_N=64,MT=1,STAGES=2,KV_WARPS=4,KV_BLOCK_N=64,KV_STAGES=2"

static const forced_case mma_cases[] = {
  {"attention_fwd_mma", M1, FCL_F32, 1, 100, 77, 2, 1, 128, 128, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_mma", M1, FCL_F32, 0, 0, 0, 2, 2, 64, 64, 0, 30, 2, 4.0, 1, 3, {40, 0, 70}, {33, 9, 91}, 0},
  {"attention_fwd_mma", M2, FCL_F32, 1, 61, 130, 2, 2, 38, 20, 0, -1, -1, 0, 0, 0, {0}, {0}, 1},
  {"attention_fwd_mma", M3, FCL_F16, 1, 70, 70, 2, 1, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_mma", M4, FCL_F16, 1, 150, 133, 2, 1, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_mma", M4, FCL_BF16, 1, 100, 200, 2, 2, 128, 128, 0, 40, 9, 0, 1, 0, {0}, {0}, 1},
  {"attention_fwd_mma", M5, FCL_F16, 0, 0, 0, 2, 2, 80, 40, 0, 30, 2, 4.0, 1, 3, {40, 0, 97}, {33, 9, 91}, 0},
  {"attention_fwd_mma", M5, FCL_BF16, 1, 129, 129, 2, 1, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 1},
  {"attention_bwd_mma", B1, FCL_F16, 1, 150, 133, 2, 1, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_bwd_mma", B2, FCL_BF16, 0, 0, 0, 2, 2, 80, 40, 0, 30, 2, 4.0, 1, 3, {40, 0, 97}, {33, 9, 91}, 0},
  {"attention_bwd_mma", B3, FCL_BF16, 1, 100, 200, 2, 2, 128, 128, 0, 40, 9, 0, 1, 0, {0}, {0}, 1},
  {"attention_bwd_mma", B4, FCL_F16, 2, 61, 90, 4, 2, 64, 64, 0, -1, -1, 0, 0, 0, {0}, {0}, 1},
};

/* Hopper's wgmma forward (sm_90 only): one and two warpgroups, key tiles
 * of 16 to 96 keys, head dims 32 to 128 and a value head dim apart; every
 * configuration within NVIDIA's 48 KiB of local memory. */
#define W1 "WARPS=4,BLOCK_N=64,LOCAL_OPS=2"
#define W2 "WARPS=4,BLOCK_N=16,LOCAL_OPS=2"
#define W3 "WARPS=8,BLOCK_N=16,LOCAL_OPS=2"
#define W4 "WARPS=4,BLOCK_N=48,LOCAL_OPS=2"
#define W5 "WARPS=8,BLOCK_N=32,LOCAL_OPS=2"
/* The wgmma dK/dV kernel's shape (WK_), then dQ's (WQ_) */
#define G1 "WK_WARPS=4,WK_BLOCK_N=64,WK_STAGES=2,WQ_WARPS=4,WQ_BLOCK_N=64,WQ_STAGES=2,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=2"
#define G2 "WK_WARPS=8,WK_BLOCK_N=16,WK_STAGES=2,WQ_WARPS=8,WQ_BLOCK_N=32,WQ_STAGES=1,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=2"
#define G3 "WK_WARPS=4,WK_BLOCK_N=32,WK_STAGES=1,WQ_WARPS=4,WQ_BLOCK_N=16,WQ_STAGES=2,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=2"
#define G4 "WK_WARPS=4,WK_BLOCK_N=48,WK_STAGES=2,WQ_WARPS=4,WQ_BLOCK_N=96,WQ_STAGES=1,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=2"
#define G5 "WK_WARPS=8,WK_BLOCK_N=96,WK_STAGES=1,WQ_WARPS=8,WQ_BLOCK_N=128,WQ_STAGES=1,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=2"
/* Three stages: one tile's gradient products under the next tile's scores,
 * in both kernels (G6, the D = 64 defaults); G7's general scores (softcap,
 * ALiBi) walk two of the three buffers, its plain ones overlap on two
 * warpgroups. */
#define G6 "WK_WARPS=4,WK_BLOCK_N=32,WK_STAGES=3,WQ_WARPS=4,WQ_BLOCK_N=32,WQ_STAGES=3,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=2"
#define G7 "WK_WARPS=8,WK_BLOCK_N=16,WK_STAGES=3,WQ_WARPS=8,WQ_BLOCK_N=16,WQ_STAGES=3,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=2"
/* Q and dO in registers in the dQ kernel (WQ_LOCAL_OPS=1): G8 the D = 128
 * defaults (three stages of 32 keys), G9 two warpgroups whose general
 * scores walk two stages, G10 one stage with head dims apart. */
#define G8 "WK_WARPS=4,WK_BLOCK_N=32,WK_STAGES=1,WQ_WARPS=4,WQ_BLOCK_N=32,WQ_STAGES=3,WQ_LOCAL_OPS=1,WK_LOCAL_OPS=2"
#define G9 "WK_WARPS=8,WK_BLOCK_N=16,WK_STAGES=2,WQ_WARPS=8,WQ_BLOCK_N=64,WQ_STAGES=2,WQ_LOCAL_OPS=1,WK_LOCAL_OPS=2"
#define G10 "WK_WARPS=4,WK_BLOCK_N=32,WK_STAGES=2,WQ_WARPS=4,WQ_BLOCK_N=48,WQ_STAGES=1,WQ_LOCAL_OPS=1,WK_LOCAL_OPS=2"
/* K in registers in the dK/dV kernel (WK_LOCAL_OPS=1): G11 two stages of
 * 32 (the room it frees at D = 128), G12 two warpgroups in three stages
 * of 16 whose general scores walk two, G13 three stages of 48 with head
 * dims apart. */
#define G11 "WK_WARPS=4,WK_BLOCK_N=32,WK_STAGES=2,WQ_WARPS=4,WQ_BLOCK_N=32,WQ_STAGES=3,WQ_LOCAL_OPS=1,WK_LOCAL_OPS=1"
#define G12 "WK_WARPS=8,WK_BLOCK_N=16,WK_STAGES=3,WQ_WARPS=4,WQ_BLOCK_N=32,WQ_STAGES=2,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=1"
#define G13 "WK_WARPS=4,WK_BLOCK_N=48,WK_STAGES=3,WQ_WARPS=4,WQ_BLOCK_N=32,WQ_STAGES=3,WQ_LOCAL_OPS=2,WK_LOCAL_OPS=1"
#define W6 "WARPS=4,BLOCK_N=96,LOCAL_OPS=2"
#define W7 "WARPS=4,BLOCK_N=32,LOCAL_OPS=2"
/* Q in registers in the wgmma forward (LOCAL_OPS=1): W8 the room it frees
 * at D = 128 (48 keys), W9 two warpgroups with general scores and rows
 * past sq, W10 three warpgroups with head dims apart. */
#define W8 "WARPS=4,BLOCK_N=48,LOCAL_OPS=1"
#define W9 "WARPS=8,BLOCK_N=64,LOCAL_OPS=1"
#define W10 "WARPS=12,BLOCK_N=16,LOCAL_OPS=1"
static const forced_case wgmma_cases[] = {
  {"attention_fwd_wgmma", W1, FCL_F16, 1, 150, 133, 2, 1, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_wgmma", W7, FCL_BF16, 2, 200, 200, 2, 2, 128, 128, 0, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_wgmma", W2, FCL_F16, 1, 100, 77, 2, 2, 64, 64, 0, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_wgmma", W3, FCL_BF16, 1, 100, 200, 2, 2, 128, 128, 0, 40, 9, 0, 1, 0, {0}, {0}, 1},
  {"attention_fwd_wgmma", W4, FCL_F16, 1, 300, 300, 2, 1, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_wgmma", W5, FCL_F16, 0, 0, 0, 2, 2, 80, 48, 0, 30, 2, 4.0, 1, 3, {40, 0, 97}, {33, 9, 91}, 0},
  {"attention_fwd_wgmma", W6, FCL_BF16, 1, 129, 129, 4, 2, 32, 32, 1, -1, -1, 0, 0, 0, {0}, {0}, 1},
  {"attention_fwd_wgmma", W5, FCL_F16, 2, 61, 190, 4, 1, 96, 96, 0, -1, -1, 0, 0, 0, {0}, {0}, 1},
  {"attention_fwd_wgmma", W8, FCL_F16, 2, 200, 170, 4, 2, 128, 128, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_fwd_wgmma", W8, FCL_BF16, 0, 0, 0, 2, 1, 128, 128, 0, -1, -1, 0, 0, 3, {40, 0, 97}, {33, 9, 91}, 1},
  {"attention_fwd_wgmma", W9, FCL_BF16, 1, 150, 133, 2, 2, 64, 64, 0, 30, 2, 4.0, 1, 0, {0}, {0}, 1},
  {"attention_fwd_wgmma", W10, FCL_F16, 1, 100, 200, 2, 2, 80, 48, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_bwd_wgmma", G1, FCL_F16, 1, 150, 133, 2, 1, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_bwd_wgmma", G2, FCL_BF16, 0, 0, 0, 2, 2, 64, 32, 0, 30, 2, 4.0, 1, 3, {40, 0, 97}, {33, 9, 91}, 0},
  {"attention_bwd_wgmma", G3, FCL_BF16, 1, 100, 200, 2, 2, 128, 128, 0, 40, 9, 0, 1, 0, {0}, {0}, 1},
  {"attention_bwd_wgmma", G4, FCL_F16, 2, 61, 90, 4, 2, 64, 64, 0, -1, -1, 0, 0, 0, {0}, {0}, 1},
  {"attention_bwd_wgmma", G4, FCL_BF16, 2, 70, 90, 4, 2, 64, 64, 1, 20, 0, 0, 0, 0, {0}, {0}, 2},
  {"attention_bwd_wgmma", G5, FCL_F16, 2, 200, 200, 2, 1, 32, 32, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_bwd_wgmma", G6, FCL_F16, 2, 150, 133, 4, 2, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_bwd_wgmma", G6, FCL_BF16, 1, 61, 200, 2, 1, 64, 64, 0, 30, 2, 0, 0, 0, {0}, {0}, 2},
  {"attention_bwd_wgmma", G6, FCL_F16, 0, 0, 0, 2, 2, 32, 32, 0, -1, -1, 0, 0, 3, {40, 0, 97}, {33, 9, 91}, 0},
  {"attention_bwd_wgmma", G7, FCL_BF16, 0, 0, 0, 2, 2, 64, 32, 0, 30, 2, 4.0, 1, 3, {40, 0, 97}, {33, 9, 91}, 0},
  {"attention_bwd_wgmma", G7, FCL_BF16, 1, 100, 77, 2, 2, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 1},
  {"attention_bwd_wgmma", G8, FCL_BF16, 2, 150, 133, 4, 2, 128, 128, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_bwd_wgmma", G8, FCL_F16, 1, 61, 200, 2, 1, 128, 128, 0, 30, 2, 0, 0, 0, {0}, {0}, 2},
  {"attention_bwd_wgmma", G9, FCL_F16, 0, 0, 0, 2, 2, 64, 64, 0, 30, 2, 4.0, 1, 3, {40, 0, 97}, {33, 9, 91}, 0},
  {"attention_bwd_wgmma", G10, FCL_F16, 1, 100, 77, 2, 2, 96, 32, 0, -1, -1, 0, 0, 0, {0}, {0}, 1},
  {"attention_bwd_wgmma", G11, FCL_BF16, 2, 150, 133, 4, 2, 128, 128, 1, -1, -1, 0, 0, 0, {0}, {0}, 0},
  {"attention_bwd_wgmma", G11, FCL_F16, 1, 61, 200, 2, 1, 128, 128, 0, 30, 2, 0, 0, 0, {0}, {0}, 1},
  {"attention_bwd_wgmma", G12, FCL_F16, 0, 0, 0, 2, 2, 64, 64, 0, 30, 2, 4.0, 1, 3, {40, 0, 97}, {33, 9, 91}, 0},
  {"attention_bwd_wgmma", G12, FCL_BF16, 1, 100, 77, 4, 2, 64, 64, 1, -1, -1, 0, 0, 0, {0}, {0}, 2},
  {"attention_bwd_wgmma", G13, FCL_F16, 2, 70, 90, 4, 2, 96, 32, 1, 20, 0, 0, 0, 0, {0}, {0}, 0},
};

static int g_failed = 0, g_skipped = 0;
/* Why the environment guarantees the mode's kernel, NULL where it does not. */
static const char *g_guarantee = NULL;

static bool reports(fcl_context *ctx, fcl_dtype dt, int backward, const char *kernel,
                    const char *forced, const forced_case *c, char *params, size_t size);

static int run(fcl_context *ctx, const forced_case *c, int idx) {
  const int bwd = strncmp(c->kernel, "attention_bwd", 13) == 0;
  char names[256] = "";
  if (!reports(ctx, c->dt, bwd, c->kernel, c->params, c, names, sizeof names)) {
    /* Skipped, or where guaranteed failed: the call would test another kernel. */
    printf("%s %-4s %s %s | %s does not run here (%s)%s%s\n", g_guarantee ? "FAIL" : "SKIP",
           tu_dtype_name(c->dt), bwd ? "bwd" : "fwd", c->params, c->kernel, names,
           g_guarantee ? " although " : "", g_guarantee ? g_guarantee : "");
    g_skipped += !g_guarantee;
    return !g_guarantee;
  }
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  int32_t cu_q[5] = {0}, cu_k[5] = {0};
  if (c->nseq) {
    oh_attention_varlen(&p, c->nseq, c->lens_q, c->lens_k, cu_q, cu_k);
  } else {
    p.batch = c->b, p.seqlen_q = c->sq, p.seqlen_k = c->sk;
  }
  p.heads_q = c->hq, p.heads_kv = c->hkv, p.head_dim = c->d, p.head_dim_v = c->dv;
  p.causal = c->causal, p.window_left = c->wl, p.window_right = c->wr;
  p.softcap = c->softcap;
  double slopes[8];
  for (int h = 0; h < c->hq && h < 8; ++h) slopes[h] = (float)pow(2.0, -8.0 * (h + 1) / c->hq);
  p.alibi_slopes = c->alibi ? slopes : NULL;

  const oh_attention_sizes n = oh_attention_count(&p);
  double *q = malloc(8 * n.q), *k = malloc(8 * n.k), *v = malloc(8 * n.v);
  double *dout = bwd ? malloc(8 * n.o) : NULL;
  tu_rng g;
  tu_rng_seed(&g, 1000 + (uint64_t)idx);
  tu_fill_uniform(&g, q, n.q, -2.0, 2.0);
  tu_fill_uniform(&g, k, n.k, -2.0, 2.0);
  tu_fill_uniform(&g, v, n.v, -1.0, 1.0);
  tu_round_array(q, n.q, c->dt);
  tu_round_array(k, n.k, c->dt);
  tu_round_array(v, n.v, c->dt);
  if (dout) {
    tu_fill_uniform(&g, dout, n.o, -1.0, 1.0);
    tu_round_array(dout, n.o, c->dt);
  }
  if (c->nan_v == 1) v[(p.seqlen_k / 2) * c->hkv * c->dv + 3] = NAN;
  if (c->nan_v == 2) k[(p.seqlen_k / 2) * c->hkv * c->d + 3] = NAN;

  char why[2048] = "";
  fcl_status s = fcl_tuning_override(ctx, fcl_variant_find(c->kernel), c->params);
  const int ok = s == FCL_OK && oh_attention_verify(ctx, &p, c->dt, q, k, v, dout, 1, why,
                                                    sizeof why);
  fcl_tuning_override(ctx, fcl_variant_find(c->kernel), NULL);
  printf("%s %-4s %s %s | b%lld sq%lld sk%lld h%lld/%lld d%lld/%lld%s%s%s%s%s |%s\n",
         ok ? "PASS" : "FAIL", tu_dtype_name(c->dt), bwd ? "bwd" : "fwd", c->params, (long long)p.batch,
         (long long)p.seqlen_q, (long long)p.seqlen_k, (long long)c->hq, (long long)c->hkv,
         (long long)c->d, (long long)c->dv, c->causal ? " causal" : "",
         c->wl >= 0 || c->wr >= 0 ? " window" : "", c->softcap > 0 ? " softcap" : "",
         c->alibi ? " alibi" : "", c->nan_v ? (c->nan_v == 1 ? " NaN-in-v" : " NaN-in-k") : "", why);
  fflush(stdout);
  free(q), free(k), free(v), free(dout);
  return ok;
}

/* mma mode, with FCL_SOURCE_CL_DIR: the tensor-core forwards' kernels
 * broken (a copy of the kernels in dir). Unforced, the call runs the next
 * row and gives the reference's numbers; forced, as these cases and fa-tune
 * force a row, it must fail with the build's error rather than test or time
 * another kernel. */
static int forced_build_failure(const char *dir) {
  char cmd[1200], to[1024], why[2048] = "";
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dir, FCL_SOURCE_CL_DIR, dir);
  int ok = system(cmd) == 0, failed = 0;
  static const char *const broken[] = {"attention/attention_fwd_mma.cl",
                                       "attention/attention_fwd_tf32.cl"};
  for (size_t i = 0; i < 2; ++i) {
    snprintf(to, sizeof to, "%s/%s", dir, broken[i]);
    FILE *f = fopen(to, "a");
    ok &= f && fputs("\n__kernel void broken_on_purpose(void) { this is not C; }\n", f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
  }
  setenv("FCL_KERNEL_DIR", dir, 1);
  fcl_context *ctx = NULL;
  ok = ok && fcl_context_create(NULL, &ctx) == FCL_OK;
  unsetenv("FCL_KERNEL_DIR");
  printf("%s broken copy of the kernels in %s\n", ok ? "PASS" : "FAIL", dir);
  if (!ok) return 1;
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 1; p.seqlen_q = 33; p.seqlen_k = 40; p.heads_q = p.heads_kv = 2;
  p.head_dim = p.head_dim_v = 64; p.causal = 1; p.window_left = p.window_right = -1;
  for (int dt = 0; dt < 2; ++dt) {
    const fcl_dtype t = dt ? FCL_F16 : FCL_F32;
    const int next = oh_attention_verify_random(ctx, &p, t, 5, why, sizeof why);
    printf("%s %s unforced, broken: the next row runs | %s\n", next ? "PASS" : "FAIL",
           dt ? "f16" : "f32", next ? "" : why);
    failed += !next;
    const fcl_variant *mma = fcl_variant_find("attention_fwd_mma");
    const fcl_status s = fcl_tuning_override(ctx, mma, dt ? "WARPS=4,BLOCK_N=32,MT=1"
                                                          : "WARPS=2,BLOCK_N=16,MT=1");
    why[0] = '\0';
    const int ran = s == FCL_OK && oh_attention_verify_random(ctx, &p, t, 5, why, sizeof why);
    const int refused = s == FCL_OK && !ran && strstr(why, "build") != NULL;
    printf("%s %s forced, broken: the call fails | %s\n", refused ? "PASS" : "FAIL",
           dt ? "f16" : "f32", s == FCL_OK ? why : fcl_context_last_error(ctx));
    failed += !refused;
    fcl_tuning_override(ctx, mma, NULL);
  }
  fcl_context_destroy(ctx);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
  return failed;
}

/* Whether fcl_attention_config names kernel for a small forward (or
 * backward) in dtype, with the override params of variant kernel set
 * first (NULL: none), its kernel and params in params; the heads, head
 * dims, mask and softcap of c where given (its lengths, varlen and ALiBi
 * not: no buffers). */
static bool reports(fcl_context *ctx, fcl_dtype dt, int backward, const char *kernel,
                    const char *forced, const forced_case *c, char *params, size_t size) {
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 1, d.seqlen_q = d.seqlen_k = 100, d.heads_q = d.heads_kv = 1;
  d.head_dim = d.head_dim_v = 64;
  if (c) {
    d.heads_q = c->hq, d.heads_kv = c->hkv, d.head_dim = c->d, d.head_dim_v = c->dv;
    d.causal = c->causal, d.window_left = c->wl, d.window_right = c->wr;
    d.softcap = (float)c->softcap;
  }
  fcl_config_info info;
  const fcl_variant *v = fcl_variant_find(kernel);
  const bool ok = (!forced || fcl_tuning_override(ctx, v, forced) == FCL_OK) &&
                  fcl_attention_config(ctx, &d, dt, backward, &info) == FCL_OK;
  if (forced) fcl_tuning_override(ctx, v, NULL);
  if (!ok) {
    snprintf(params, size, "fcl_attention_config: %s", fcl_context_last_error(ctx));
    return false;
  }
  snprintf(params, size, "%s %s", info.kernel, info.params);
  return strcmp(info.kernel, kernel) == 0;
}

/* Whether the CPU forward must run here: a CPU device other than llvmpipe
 * (whose loop budget the portable kernel's split keys respect), with
 * FCL_CPU_KERNEL and FCL_LOOP_BUDGET unset. */
static bool cpu_kernel_guaranteed(fcl_context *ctx) {
  cl_device_id dev = NULL;
  cl_device_type type = 0;
  const char *budget = getenv("FCL_LOOP_BUDGET");
  return clGetCommandQueueInfo(fcl_context_queue(ctx), CL_QUEUE_DEVICE, sizeof dev, &dev,
                               NULL) == CL_SUCCESS &&
         clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS &&
         (type & CL_DEVICE_TYPE_CPU) && !strstr(fcl_context_device_name(ctx), "llvmpipe") &&
         oh_env_flag("FCL_CPU_KERNEL", 1) && !(budget && *budget);
}

int main(int argc, char **argv) {
  const double t0 = tu_now();
  const char *mode = argc > 1 ? argv[1] : "cpu";
  const forced_case *cases = cpu_cases;
  int n = (int)(sizeof cpu_cases / sizeof *cpu_cases);
  /* What the forward runs with no override: the mode's kernel, but for
   * emulated wgmma, which runs only where an override names it. */
  const char *unforced = "attention_fwd_cpu", *unforced_bwd = NULL;
  if (strcmp(mode, "cpu") != 0 && strcmp(mode, "mma") != 0 && strcmp(mode, "wgmma") != 0) {
    printf("usage: test_attention_forced [cpu|mma|wgmma]\n");
    return 2;
  }
  if (strcmp(mode, "mma") == 0)
    cases = mma_cases, n = (int)(sizeof mma_cases / sizeof *mma_cases), unforced = "attention_fwd_mma";
  if (strcmp(mode, "wgmma") == 0) {
    const bool emulated = oh_env_flag("FCL_MMA_EMULATE", 0);
    cases = wgmma_cases, n = (int)(sizeof wgmma_cases / sizeof *wgmma_cases);
    unforced = emulated ? "attention_fwd_mma" : "attention_fwd_wgmma";
    unforced_bwd = emulated ? "attention_bwd_mma" : "attention_bwd_wgmma";
  }
  const char *kernel = cases[0].kernel;
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  if (strcmp(mode, "cpu") == 0 && cpu_kernel_guaranteed(ctx))
    g_guarantee = "a CPU device other than llvmpipe, FCL_CPU_KERNEL and FCL_LOOP_BUDGET unset, "
                  "guarantees it";
  else if (strcmp(mode, "mma") == 0 && oh_mma_guaranteed())
    g_guarantee = "FCL_MMA_EMULATE=1 guarantees it: is its probe broken? (FCL_LOG=1 says)";
  else if (strcmp(mode, "wgmma") == 0 && oh_mma_guaranteed() && oh_env_flag("FCL_WGMMA", 1))
    g_guarantee = "FCL_MMA_EMULATE=1 without FCL_WGMMA=0 guarantees it: is its probe broken? "
                  "(FCL_LOG=1 says)";
  char params[512] = "";
  if (!reports(ctx, cases[0].dt, 0, kernel, cases[0].params, NULL, params, sizeof params)) {
    fcl_context_destroy(ctx);
    if (g_guarantee) {
      printf("FAIL %s does not run on this device (%s) although %s\n", kernel, params,
             g_guarantee);
      printf("test_attention_forced %s: 1 case, 1 failed\n", mode);
      return 1;
    }
    printf("SKIP %s does not run on this device (%s): nothing to test\n", kernel, params);
    printf("test_attention_forced %s: skipped\n", mode);
    return OH_SKIP;
  }
  for (int i = 0; i < n; ++i) g_failed += !run(ctx, &cases[i], i);
  /* What fcl_attention_config reports for the forward here now that the
   * override is gone: the unforced kernel with its defaults. */
  const int cfg_ok = reports(ctx, cases[0].dt, 0, unforced, NULL, NULL, params, sizeof params);
  printf("%s fcl_attention_config reports %s\n", cfg_ok ? "PASS" : "FAIL", params);
  g_failed += !cfg_ok;
  if (unforced_bwd) { /* and for the backward */
    const int bwd_ok =
        reports(ctx, cases[0].dt, 1, unforced_bwd, NULL, NULL, params, sizeof params);
    printf("%s fcl_attention_config reports %s (backward)\n", bwd_ok ? "PASS" : "FAIL", params);
    g_failed += !bwd_ok;
    ++n;
  }
  fcl_context_destroy(ctx);
#ifdef FCL_SOURCE_CL_DIR
  if (strcmp(mode, "mma") == 0) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/fcl-forced-%ld", (long)getpid());
    g_failed += forced_build_failure(dir);
    n += 4;
  }
#endif
  printf("test_attention_forced %s: %d cases, %d failed, %d skipped, %.1f s\n", mode, n + 1,
         g_failed, g_skipped, tu_now() - t0);
  return g_failed ? 1 : 0;
}
