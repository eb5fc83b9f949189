/* Every kernel on tiny shapes of every feature, meant to run under Oclgrind
 * (tests/oclgrind_check.cmake runs it as `oclgrind --check-api --data-races
 * --uninitialized --build-options -cl-opt-disable --log FILE test_oclgrind`
 * and fails on any report): attention forward and backward (causal,
 * windows, softcap, ALiBi, GQA/MQA, varlen, empty rows, lse or not, head
 * dims not powers of two, a contraction in chunks, several key tiles, a NaN
 * in v of a key that causal masking hides, dropout), RWKV6 forward and backward with
 * the fused-recurrent and the chunked algorithm and the forward's step
 * kernel (h0/ht, dht/dh0, reverse, varlen with an empty sequence), in f32,
 * f16 and bf16. Run with
 * FCL_LOOP_BUDGET=1 it takes the split paths instead (split keys with the
 * combine kernel, split gradient sums, RWKV6 launches carrying the state);
 * with FCL_CPU_KERNEL=0 the portable forward; with FCL_MMA_EMULATE=1 the
 * tensor-core kernels and the non-finite scan. Results are checked against
 * the double references with the main suites' tolerances.
 *
 * Every view fills its buffer exactly, so any read or write past a view
 * leaves the buffer and Oclgrind reports it. Output buffers start as
 * poison bytes written by the host, so to Oclgrind they hold defined
 * values; what --uninitialized checks is every value a kernel computes
 * from its private and local memory and from flashcl's scratch buffers
 * (partial sums, checkpoints, statistics), which only kernels write.
 * tests/oclgrind/shadow_shim.c, linked in, keeps Oclgrind's record of
 * those exact (see shadow_shim.h) and counts the kernels launched.
 *
 * Environment: FCL_DEVICE (default "oclgrind"); FCL_TEST_FILTER (parts of
 * case names separated by |: the cases whose name has one); FCL_OCLGRIND_OPS
 * (a comma-separated subset of "attention-fwd", "attention", "rwkv6":
 * attention forward only, attention forward and backward, RWKV6; default
 * all; "kvcache", fcl_attention_kvcache with out-of-range device indices,
 * runs only when named); FCL_OCLGRIND_KERNELS (kernels, separated by spaces
 * or semicolons, that must have been launched: the test fails naming any
 * that was not);
 * SHADOW_SHIM=0 (shadow_shim.h). */
#include "kvcache_harness.h"
#include "op_harness.h"
#include "oclgrind/shadow_shim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *name;
  fcl_dtype   dt;
  int64_t     b, sq, sk, hq, hkv, d, dv;
  int         causal;
  int64_t     wl, wr; /* both 0: no window */
  double      softcap, scale;
  int         alibi, no_lse, fwd_only;
  int         nseq;
  int32_t     lq[4], lk[4];
  int         nan_v; /* 1 + a key of sequence 0 whose v[kv head 0][0] is NaN */
  double      dropout; /* dropout_p (0: none) */
} acase;

typedef struct {
  const char *name;
  fcl_dtype   dt;
  fcl_rwkv6_algorithm algo;
  int64_t     b, t, h, k, v;
  int         reverse, h0, dht, nseq;
  int32_t     lens[4];
} rcase;

#define A(...) {__VA_ARGS__}
static const acase att_cases[] = {
  A("plain", FCL_F32, 2, 5, 7, 2, 2, 16, 16, .causal = 0),
  A("causal sq>sk GQA dv", FCL_F16, 1, 9, 6, 4, 2, 24, 8, .causal = 1),
  A("window both, d 7", FCL_BF16, 1, 12, 12, 1, 1, 7, 7, .wl = 3, .wr = 2),
  A("softcap alibi causal scale", FCL_F32, 1, 8, 11, 2, 2, 12, 12, .causal = 1,
    .softcap = 3.0, .scale = 0.4, .alibi = 1),
  A("varlen causal window GQA", FCL_F16, 0, 0, 0, 2, 1, 9, 5, .causal = 1, .wl = 2, .wr = -1,
    .nseq = 3, .lq = {3, 0, 5}, .lk = {4, 2, 6}),
  A("MQA two key tiles, d 33", FCL_BF16, 1, 4, 40, 2, 1, 33, 33, .causal = 0),
  A("window sq>sk empty rows", FCL_F32, 1, 10, 4, 1, 1, 5, 6, .wl = 1, .wr = 1),
  A("lse NULL, d 130 / 70 (chunked q)", FCL_F16, 1, 3, 5, 1, 1, 130, 70, .no_lse = 1,
    .fwd_only = 1),
  A("alibi window right varlen bf16", FCL_BF16, 0, 0, 0, 2, 2, 6, 10, .wl = -1, .wr = 1,
    .alibi = 1, .nseq = 2, .lq = {6, 1}, .lk = {3, 7}),
  /* Rows 0-5 of sequence 0 must not see the NaN (key 6); with
   * FCL_MMA_EMULATE=1 the non-finite scan flags kv head 0 and the
   * tensor-core kernels' non-finite variants run. */
  A("NaN in v of a key causal masking hides, varlen GQA", FCL_F16, 0, 0, 0, 2, 1, 16, 16,
    .causal = 1, .nseq = 2, .lq = {9, 4}, .lk = {9, 6}, .nan_v = 1 + 6),
  A("dropout 0.3 varlen causal GQA", FCL_F16, 0, 0, 0, 4, 2, 12, 10, .causal = 1, .nseq = 2,
    .lq = {7, 3}, .lk = {9, 5}, .dropout = 0.3),
};

#define R(...) {__VA_ARGS__}
static const rcase rwkv_cases[] = {
  R("recurrent h0 dht", FCL_F32, FCL_RWKV6_RECURRENT, 2, 5, 2, 8, 8, .h0 = 1, .dht = 1),
  R("chunked two chunks reverse", FCL_F16, FCL_RWKV6_CHUNKED, 1, 19, 1, 12, 5, .reverse = 1,
    .h0 = 1),
  R("recurrent varlen", FCL_BF16, FCL_RWKV6_RECURRENT, 0, 0, 2, 7, 9, .nseq = 3,
    .lens = {3, 0, 6}, .dht = 1),
  R("chunked varlen h0", FCL_F32, FCL_RWKV6_CHUNKED, 0, 0, 1, 9, 3, .nseq = 2,
    .lens = {17, 2}, .h0 = 1, .dht = 1),
  R("recurrent K 33 V 20", FCL_BF16, FCL_RWKV6_RECURRENT, 1, 3, 1, 33, 20, .reverse = 1),
  /* AUTO at T <= 4: the step kernel's forward. */
  R("step T=1 K 33 V 20", FCL_BF16, FCL_RWKV6_AUTO, 2, 1, 2, 33, 20, .h0 = 1, .dht = 1),
  R("step varlen reverse", FCL_F16, FCL_RWKV6_AUTO, 0, 0, 1, 9, 12, .nseq = 3,
    .lens = {3, 0, 4}, .reverse = 1),
  /* K and V multiples of 16: with FCL_MMA_EMULATE=1 the chunked kernels on
   * tensor cores (state pass, output and dv, dr dk dw), emulated. */
  R("chunked K 16 V 32 varlen reverse", FCL_BF16, FCL_RWKV6_CHUNKED, 0, 0, 1, 16, 32,
    .nseq = 2, .lens = {21, 3}, .reverse = 1, .h0 = 1, .dht = 1),
  /* ... f32, whose operands the tensor-core kernels split into bf16 pairs
   * (the lo twins of every 16-bit tile). */
  R("chunked K 16 V 32 split f32", FCL_F32, FCL_RWKV6_CHUNKED, 1, 37, 1, 16, 32, .h0 = 1,
    .dht = 1),
};

static int g_run = 0, g_failed = 0;

/* Whether name contains one of the |-separated parts of FCL_TEST_FILTER
 * (unset or empty: every name). */
static int selected(const char *name) {
  const char *f = getenv("FCL_TEST_FILTER");
  if (!f || !*f) return 1;
  for (const char *p = f; *p;) {
    const size_t len = strcspn(p, "|");
    char part[128];
    if (len > 0 && len < sizeof part) {
      memcpy(part, p, len);
      part[len] = '\0';
      if (strstr(name, part)) return 1;
    }
    p += len + (p[len] == '|');
  }
  return 0;
}

/* Whether op is in FCL_OCLGRIND_OPS (unset: every op). */
static int op_on(const char *op) {
  const char *e = getenv("FCL_OCLGRIND_OPS");
  if (!e || !*e) return 1;
  const size_t n = strlen(op);
  for (const char *p = e; *p;) {
    const size_t len = strcspn(p, ",");
    if (len == n && strncmp(p, op, n) == 0) return 1;
    p += len + (p[len] == ',');
  }
  return 0;
}

/* Whether op is named in FCL_OCLGRIND_OPS (unset: no): for ops that only
 * their own run covers. */
static int op_named(const char *op) {
  const char *e = getenv("FCL_OCLGRIND_OPS");
  return e && *e && op_on(op);
}

/* The kernels of FCL_OCLGRIND_KERNELS that were not launched, printed;
 * returns their number. */
static int missing_kernels(void) {
  const char *e = getenv("FCL_OCLGRIND_KERNELS");
  int missing = 0;
  for (const char *p = e ? e : ""; *p;) {
    const size_t len = strcspn(p, " ;");
    if (len > 0 && len < 96) {
      char name[96];
      memcpy(name, p, len);
      name[len] = '\0';
      if (shadow_shim_launches(name) == 0) {
        printf("FAIL: kernel %s was not launched (FCL_OCLGRIND_KERNELS)\n", name);
        ++missing;
      }
    }
    p += len + (p[len] != '\0');
  }
  return missing;
}

static double *filled(tu_rng *g, size_t n, double lo, double hi, fcl_dtype dt) {
  double *x = malloc(8 * (n + 1));
  if (!x) abort();
  tu_fill_uniform(g, x, n, lo, hi);
  tu_round_array(x, n, dt);
  return x;
}

static void report(const char *kind, const char *name, fcl_dtype dt, int ok, const char *why,
                   double t0) {
  ++g_run;
  if (!ok) ++g_failed;
  printf("%s %s %-4s %s |%s | %.2f s\n", ok ? "PASS" : "FAIL", kind, tu_dtype_name(dt), name,
         why, tu_now() - t0);
  fflush(stdout);
}

static void run_attention(fcl_context *ctx, const acase *c, int fwd_only, uint64_t seed) {
  const double t0 = tu_now();
  int32_t cuq[5] = {0}, cuk[5] = {0};
  double slopes[8];
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = c->b; p.seqlen_q = c->sq; p.seqlen_k = c->sk;
  p.heads_q = c->hq; p.heads_kv = c->hkv; p.head_dim = c->d; p.head_dim_v = c->dv;
  p.softmax_scale = c->scale; p.causal = c->causal; p.softcap = c->softcap;
  p.window_left = c->wl || c->wr ? c->wl : -1;
  p.window_right = c->wl || c->wr ? c->wr : -1;
  for (int h = 0; h < c->hq && h < 8; ++h) slopes[h] = (double)(float)(0.3 / (h + 1));
  p.alibi_slopes = c->alibi ? slopes : NULL;
  p.dropout_p = c->dropout, p.dropout_seed = 0x1234567890abcdefu, p.dropout_offset = 77;
  if (c->nseq) oh_attention_varlen(&p, c->nseq, c->lq, c->lk, cuq, cuk);
  const oh_attention_sizes n = oh_attention_count(&p);
  tu_rng g;
  tu_rng_seed(&g, seed);
  double *q = filled(&g, n.q, -2, 2, c->dt), *k = filled(&g, n.k, -2, 2, c->dt);
  double *v = filled(&g, n.v, -1, 1, c->dt), *dout = filled(&g, n.o, -1, 1, c->dt);
  /* Dense v is [b][s][hkv][dv], or [tokens][hkv][dv]: sequence 0 first. */
  if (c->nan_v) v[(size_t)(c->nan_v - 1) * (size_t)(c->hkv * c->dv)] = NAN;
  fwd_only |= c->fwd_only;
  char why[2048] = "";
  const int ok = oh_attention_verify(ctx, &p, c->dt, q, k, v, fwd_only ? NULL : dout,
                                     !c->no_lse, why, sizeof why);
  report(fwd_only ? "attention fwd    " : "attention fwd+bwd", c->name, c->dt, ok, why, t0);
  free(q); free(k); free(v); free(dout);
}

static void run_rwkv6(fcl_context *ctx, const rcase *c, uint64_t seed) {
  const double t0 = tu_now();
  int32_t cu[5] = {0};
  ref_rwkv6_problem p;
  memset(&p, 0, sizeof p);
  p.batch = c->b; p.seqlen = c->t; p.heads = c->h; p.head_dim_k = c->k; p.head_dim_v = c->v;
  p.reverse = c->reverse;
  if (c->nseq) {
    p.batch = c->nseq;
    for (int i = 0; i < c->nseq; ++i) {
      cu[i + 1] = cu[i] + c->lens[i];
      if (c->lens[i] > p.seqlen) p.seqlen = c->lens[i];
    }
    p.cu_seqlens = cu;
  }
  const oh_rwkv6_sizes n = oh_rwkv6_count(&p);
  tu_rng g;
  tu_rng_seed(&g, seed);
  double *r = filled(&g, n.rk, -1, 1, c->dt), *k = filled(&g, n.rk, -1, 1, c->dt);
  double *v = filled(&g, n.v, -1, 1, c->dt), *w = filled(&g, n.rk, -3, -0.01, c->dt);
  double *u = filled(&g, n.u, -1, 1, c->dt), *dout = filled(&g, n.v, -1, 1, c->dt);
  double *h0 = filled(&g, n.state, -1, 1, FCL_F32), *dht = filled(&g, n.state, -1, 1, FCL_F32);
  char why[2048] = "";
  const int ok = oh_rwkv6_verify(ctx, &p, c->dt, c->algo, r, k, v, w, u, c->h0 ? h0 : NULL,
                                 dout, c->dht ? dht : NULL, why, sizeof why);
  report("rwkv6 fwd+bwd    ", c->name, c->dt, ok, why, t0);
  free(r); free(k); free(v); free(w); free(u); free(dout); free(h0); free(dht);
}

/* fcl_attention_kvcache (only with "kvcache" in FCL_OCLGRIND_OPS): nine
 * small shapes (contiguous with cache_batch_idx, rotary and 3 splits;
 * paged head-major, ragged, rotary interleaved; more than 64 rows a kv head,
 * which runs the forward's kernels; no append; f16 GQA in pages of 16 with
 * head dims 32 and 64, which FCL_MMA_EMULATE=1 gives the decode kernel on
 * tensor cores; and the splits merged by the decode kernel, portable and
 * on tensor cores: sequences of 3 and 2 splits with keys, one without
 * keys; q8_0 and fp8 caches, appended; more than 64 rows a kv head on a
 * paged q8_0 K and fp8 V cache, which the gather copies into rows for the
 * forward), each valid and checked
 * against the reference, then with out-of-range device indices (FCL_OK,
 * results unspecified). Every buffer fits its view exactly, so an index
 * that escapes reads or writes outside a buffer, which Oclgrind reports. */
#define KV(...) {__VA_ARGS__}
static const kv_case kv_cases[] = {
  KV(.name = "kvcache contiguous idx rotary splits", .dtypes = OH_DT(FCL_F32), .b = 2, .sq = 3,
     .cached = {5, 2}, .hq = 2, .hkv = 1, .d = 16, .dv = 8, .cache_batch = 3, .cbi = 1,
     .rot = KV_ROT_NEOX, .rot_dim = 8, .causal = 1, .splits = 3),
  KV(.name = "kvcache paged head-major ragged", .dtypes = OH_DT(FCL_F16), .b = 2, .ragged = 1,
     .lens = {2, 1}, .cached = {6, 0}, .hq = 2, .hkv = 2, .d = 8, .dv = 8, .page = 4,
     .spare_pages = 1, .head_major = 1, .rot = KV_ROT_INTERLEAVED),
  KV(.name = "kvcache prefill rows", .dtypes = OH_DT(FCL_BF16), .b = 1, .sq = 9, .cached = {4},
     .hq = 8, .hkv = 1, .d = 8, .dv = 8, .rot = KV_ROT_NEOX, .causal = 1),
  KV(.name = "kvcache no append", .dtypes = OH_DT(FCL_F32), .b = 2, .sq = 1, .cached = {6, 3},
     .hq = 2, .hkv = 2, .d = 8, .dv = 8, .cache_batch = 2, .cbi = 1, .no_append = 1),
  KV(.name = "kvcache paged 16 GQA d32/64", .dtypes = OH_DT(FCL_F16), .b = 2, .sq = 1,
     .cached = {20, 5}, .hq = 4, .hkv = 2, .d = 32, .dv = 64, .page = 16, .spare_pages = 1),
  /* Blocks of 32 keys (portable kernel, d 8), 16 (d 32) and 64 (tensor
   * cores): 40 keys make 2 splits and 20 one; 140 keys 3. */
  KV(.name = "kvcache splits merged, a sequence without keys", .dtypes = OH_DT(FCL_F32),
     .b = 3, .sq = 1, .cached = {40, 0, 20}, .hq = 2, .hkv = 1, .d = 8, .dv = 8, .capacity = 64,
     .no_append = 1, .splits = 4),
  KV(.name = "kvcache paged 16 GQA splits merged", .dtypes = OH_DT(FCL_F16), .b = 2, .sq = 1,
     .cached = {140, 0}, .hq = 4, .hkv = 2, .d = 32, .dv = 64, .page = 16, .no_append = 1,
     .splits = 3),
  /* Quantized caches: q8_0 K, fp8 E4M3 V with a scale a kv head, appended
   * (on tensor cores: by the decode kernel itself). */
  KV(.name = "kvcache quantized paged 16 GQA", .dtypes = OH_DT(FCL_F16), .b = 2, .sq = 1,
     .cached = {20, 5}, .hq = 4, .hkv = 2, .d = 32, .dv = 64, .page = 16, .spare_pages = 1,
     .kfmt = KV_Q8_0, .vfmt = KV_E4M3, .scales = KV_SCALE_HEAD),
  KV(.name = "kvcache prefill rows, paged q8_0 K fp8 V", .dtypes = OH_DT(FCL_F32), .b = 2,
     .sq = 9, .cached = {5, 3}, .hq = 8, .hkv = 1, .d = 32, .dv = 20, .page = 4,
     .spare_pages = 1, .kfmt = KV_Q8_0, .vfmt = KV_E5M2, .scales = KV_SCALE_TENSOR,
     .causal = 1),
};
/* Capacities 11, 12 (3 pages a sequence, 4 pages), 16, 10, 32 (2 pages a
 * sequence, 5 pages), 64, 144 (9 pages a sequence, 9 pages) and 20 (5
 * pages a sequence, 11 pages). */
#define KV_NCASES (sizeof kv_cases / sizeof kv_cases[0])
static const kv_corrupt kv_bad[KV_NCASES][6] = {
  {{KV_BAD_SEQLEN, 0, 50}, {KV_BAD_SEQLEN, 1, 9}, {KV_BAD_SEQLEN, 0, -2},
   {KV_BAD_CBI, 1, 3}, {KV_BAD_CBI, 0, -1}},
  {{KV_BAD_BLOCK, 0, 4}, {KV_BAD_BLOCK, 3, -1}, {KV_BAD_SEQLEN, 1, 40},
   {KV_BAD_CUQ, 2, 100}, {KV_BAD_CUQ, 1, 3}, {KV_BAD_CUQ, 0, -1}},
  {{KV_BAD_SEQLEN, 0, 30}, {KV_BAD_SEQLEN, 0, -9}},
  {{KV_BAD_SEQLEN, 0, 100}, {KV_BAD_SEQLEN, 1, -4}, {KV_BAD_CBI, 1, 5}},
  {{KV_BAD_BLOCK, 1, 5}, {KV_BAD_BLOCK, 2, -1}, {KV_BAD_SEQLEN, 0, 90}},
  {{KV_BAD_SEQLEN, 1, 70}, {KV_BAD_SEQLEN, 2, -5}},
  {{KV_BAD_BLOCK, 4, 9}, {KV_BAD_SEQLEN, 1, 200}},
  {{KV_BAD_BLOCK, 1, 5}, {KV_BAD_SEQLEN, 0, 90}},
  {{KV_BAD_BLOCK, 2, 11}, {KV_BAD_BLOCK, 6, -1}, {KV_BAD_SEQLEN, 1, 60}},
};

static void run_kvcache(fcl_context *ctx, uint64_t seed) {
  const kv_opts opts = {0, 1, 0, 1}; /* views fill their buffers; one run, one call */
  kv_stats st = {0, 0, 0, 0};
  for (size_t i = 0; i < KV_NCASES; ++i, ++seed) {
    if (!selected(kv_cases[i].name)) continue;
    const fcl_dtype dt = kv_cases[i].dtypes == OH_DT(FCL_F16)    ? FCL_F16
                         : kv_cases[i].dtypes == OH_DT(FCL_BF16) ? FCL_BF16
                                                                 : FCL_F32;
    kv_case_run(ctx, &kv_cases[i], dt, seed, &opts, NULL, NULL, &st);
    for (int j = 0; j < 6 && kv_bad[i][j].kind != KV_OK; ++j)
      kv_case_run(ctx, &kv_cases[i], dt, seed, &opts, &kv_bad[i][j], NULL, &st);
  }
  g_run += st.run;
  g_failed += st.failed;
}

int main(void) {
  const double t0 = tu_now();
  const char *dev = getenv("FCL_DEVICE");
  fcl_context *ctx = NULL;
  const fcl_status st = fcl_context_create(dev && *dev ? dev : "oclgrind", &ctx);
  if (st != FCL_OK) {
    printf("FAIL: fcl_context_create: %s: %s\n", fcl_status_string(st),
           fcl_context_last_error(NULL));
    return 1;
  }
  const char *budget = getenv("FCL_LOOP_BUDGET");
  printf("device: %s%s%s\n", fcl_context_device_name(ctx), budget ? ", FCL_LOOP_BUDGET=" : "",
         budget ? budget : "");
  uint64_t seed = 1000;
  const int att = op_on("attention"), att_fwd = att || op_on("attention-fwd");
  for (size_t i = 0; i < sizeof att_cases / sizeof att_cases[0]; ++i, ++seed)
    if (att_fwd && selected(att_cases[i].name)) run_attention(ctx, &att_cases[i], !att, seed + 1);
  for (size_t i = 0; i < sizeof rwkv_cases / sizeof rwkv_cases[0]; ++i, ++seed)
    if (op_on("rwkv6") && selected(rwkv_cases[i].name)) run_rwkv6(ctx, &rwkv_cases[i], seed + 1);
  if (op_named("kvcache")) run_kvcache(ctx, seed + 1);
  fcl_context_destroy(ctx);
  shadow_shim_finish();
  printf("kernels launched:\n");
  shadow_shim_print_launches("  ");
  printf("test_oclgrind: %d cases, %d failed, %.1f s\n", g_run, g_failed, tu_now() - t0);
  const int missing = missing_kernels();
  return g_failed || g_run == 0 || shadow_shim_refused() || missing ? 1 : 0;
}
