/* Bad host-side inputs to fcl_attention_kvcache and fcl_attention_merge:
 * each returns FCL_ERROR_INVALID_ARGUMENT, fcl_context_last_error() names
 * the argument, and nothing is written: o and lse stay poison and both
 * caches keep their bytes. A valid call (contiguous and paged, with an
 * append and rotary) comes before and after, so the baseline is known to be
 * valid and the context to still work. */
#include "kvcache_tests.h"
#include "op_harness.h"
#include "ref_kvcache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, SQ = 2, HQ = 4, HKV = 2, D = 64, DV = 64, CAP = 16, PAGE = 4, PAGES = 8, RD = 32,
       POS = 24 };

typedef struct {
  fcl_context     *ctx;
  cl_command_queue queue;
  cl_mem           q, kn, vn, o, lse, kc, vc, kp, vp, seq, bt, cbi, cuq, cos, sin, alibi, lse_m;
  size_t           bytes_o, bytes_lse, bytes_kc, bytes_vc, bytes_kp, bytes_vp;
  unsigned char   *kc0, *vc0, *kp0, *vp0; /* cache bytes before a bad call */
  fcl_kvcache_desc dc, dp;                /* valid: contiguous, paged */
  fcl_tensor       tq, tkn, tvn, to, tkc, tvc, tkp, tvp;
  int              run, failed;
} bsetup;

static cl_mem random_f32(bsetup *s, tu_rng *g, size_t n, double amp) {
  return tu_buffer_random_f32(fcl_context_cl(s->ctx), s->queue, g, n, amp);
}

static unsigned char *snapshot(bsetup *s, cl_mem m, size_t bytes) {
  unsigned char *h = tu_buffer_snapshot(s->queue, m, bytes);
  if (!h) abort();
  return h;
}

static void snapshot_caches(bsetup *s) {
  free(s->kc0); free(s->vc0); free(s->kp0); free(s->vp0);
  s->kc0 = snapshot(s, s->kc, s->bytes_kc);
  s->vc0 = snapshot(s, s->vc, s->bytes_vc);
  s->kp0 = snapshot(s, s->kp, s->bytes_kp);
  s->vp0 = snapshot(s, s->vp, s->bytes_vp);
}

static int init(bsetup *s, fcl_context *ctx) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->queue = fcl_context_queue(ctx);
  cl_context clc = fcl_context_cl(ctx);
  tu_rng g;
  tu_rng_seed(&g, 4242);
  s->q = random_f32(s, &g, B * SQ * HQ * D, 2);
  s->kn = random_f32(s, &g, B * SQ * HKV * D, 2);
  s->vn = random_f32(s, &g, B * SQ * HKV * DV, 1);
  s->bytes_o = (size_t)B * SQ * HQ * DV * 4;
  s->bytes_lse = (size_t)B * HQ * SQ * 4;
  s->o = tu_buffer_poison(clc, s->queue, s->bytes_o);
  s->lse = tu_buffer_poison(clc, s->queue, s->bytes_lse);
  s->lse_m = tu_buffer_poison(clc, s->queue, s->bytes_lse);
  s->bytes_kc = (size_t)B * CAP * HKV * D * 4;
  s->bytes_vc = (size_t)B * CAP * HKV * DV * 4;
  s->bytes_kp = (size_t)PAGES * PAGE * HKV * D * 4;
  s->bytes_vp = (size_t)PAGES * PAGE * HKV * DV * 4;
  s->kc = random_f32(s, &g, s->bytes_kc / 4, 2);
  s->vc = random_f32(s, &g, s->bytes_vc / 4, 1);
  s->kp = random_f32(s, &g, s->bytes_kp / 4, 2);
  s->vp = random_f32(s, &g, s->bytes_vp / 4, 1);
  const int32_t seq[B] = {5, 3}, bt[B * (CAP / PAGE)] = {6, 2, 7, 0, 1, 5, 3, 4},
                cbi[B] = {1, 0}, cuq[B + 1] = {0, 1, 3};
  s->seq = tu_buffer_from(clc, s->queue, seq, sizeof seq);
  s->bt = tu_buffer_from(clc, s->queue, bt, sizeof bt);
  s->cbi = tu_buffer_from(clc, s->queue, cbi, sizeof cbi);
  s->cuq = tu_buffer_from(clc, s->queue, cuq, sizeof cuq);
  float cs[POS * RD / 2], sn[POS * RD / 2];
  for (int p = 0; p < POS; ++p)
    for (int j = 0; j < RD / 2; ++j) {
      cs[p * RD / 2 + j] = (float)cos(p * pow(10000.0, -2.0 * j / RD));
      sn[p * RD / 2 + j] = (float)sin(p * pow(10000.0, -2.0 * j / RD));
    }
  s->cos = tu_buffer_from(clc, s->queue, cs, sizeof cs);
  s->sin = tu_buffer_from(clc, s->queue, sn, sizeof sn);
  const float slopes[HQ] = {0.5f, 0.25f, 0.125f, 0.0625f};
  s->alibi = tu_buffer_from(clc, s->queue, slopes, sizeof slopes);
  if (!s->q || !s->kn || !s->vn || !s->o || !s->lse || !s->lse_m || !s->kc || !s->vc ||
      !s->kp || !s->vp || !s->seq || !s->bt || !s->cbi || !s->cuq || !s->cos || !s->sin ||
      !s->alibi)
    return 1;
  s->tq = tu_dense_view(s->q, FCL_F32, SQ, HQ, D);
  s->tkn = tu_dense_view(s->kn, FCL_F32, SQ, HKV, D);
  s->tvn = tu_dense_view(s->vn, FCL_F32, SQ, HKV, DV);
  s->to = tu_dense_view(s->o, FCL_F32, SQ, HQ, DV);
  s->tkc = tu_dense_view(s->kc, FCL_F32, CAP, HKV, D);
  s->tvc = tu_dense_view(s->vc, FCL_F32, CAP, HKV, DV);
  s->tkp = tu_dense_view(s->kp, FCL_F32, PAGE, HKV, D);
  s->tvp = tu_dense_view(s->vp, FCL_F32, PAGE, HKV, DV);
  fcl_kvcache_desc d = FCL_KVCACHE_DESC_INIT;
  d.batch = B; d.seqlen_q = SQ; d.heads_q = HQ; d.heads_kv = HKV; d.head_dim = D;
  d.head_dim_v = DV; d.cache_capacity = CAP; d.causal = 1;
  d.cache_seqlens = s->seq;
  d.rotary_cos = s->cos; d.rotary_sin = s->sin; d.rotary_dim = RD; d.rotary_positions = POS;
  s->dc = d;
  s->dc.cache_batch_idx = s->cbi;
  s->dp = d;
  s->dp.page_size = PAGE; s->dp.num_pages = PAGES; s->dp.block_table = s->bt;
  return 0;
}

static void release_all(bsetup *s) {
  cl_mem ms[] = {s->q, s->kn, s->vn, s->o, s->lse, s->kc, s->vc, s->kp, s->vp, s->seq, s->bt,
                 s->cbi, s->cuq, s->cos, s->sin, s->alibi, s->lse_m};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; ++i)
    if (ms[i]) clReleaseMemObject(ms[i]);
  free(s->kc0); free(s->vc0); free(s->kp0); free(s->vp0);
}

/* ---- messages ----------------------------------------------------------------- */
static size_t changed(bsetup *s, cl_mem m, const unsigned char *then, size_t bytes) {
  unsigned char *now = snapshot(s, m, bytes);
  size_t n = 0;
  for (size_t i = 0; i < bytes; ++i) n += now[i] != then[i];
  free(now);
  return n;
}

static size_t poison_gone(bsetup *s, cl_mem m, size_t bytes) {
  const long bad = tu_buffer_poison_left(s->queue, m, 0, bytes, NULL);
  return bad < 0 ? (size_t)-1 : (size_t)bad;
}

/* One bad call: status, message, nothing written. */
static void expect(bsetup *s, const char *label, fcl_status got, const char *const *words) {
  ++s->run;
  char why[512] = "";
  int ok = 1;
  if (got != FCL_ERROR_INVALID_ARGUMENT) {
    ok = 0;
    oh_append(why, sizeof why, " status %s, want %s;", fcl_status_string(got),
              fcl_status_string(FCL_ERROR_INVALID_ARGUMENT));
  }
  const char *msg = fcl_context_last_error(s->ctx);
  if (!msg) msg = "(NULL)";
  if (words) {
    char missing[256];
    if (!tu_has_words(msg, words, missing, sizeof missing)) {
      ok = 0;
      oh_append(why, sizeof why, " message lacks %s;", missing);
    }
  }
  clFinish(s->queue);
  const size_t bo = poison_gone(s, s->o, s->bytes_o), bl = poison_gone(s, s->lse, s->bytes_lse),
               bm = poison_gone(s, s->lse_m, s->bytes_lse);
  const size_t bc =
      changed(s, s->kc, s->kc0, s->bytes_kc) + changed(s, s->vc, s->vc0, s->bytes_vc) +
      changed(s, s->kp, s->kp0, s->bytes_kp) + changed(s, s->vp, s->vp0, s->bytes_vp);
  if (bo || bl || bm || bc) {
    ok = 0;
    oh_append(why, sizeof why, " wrote %zu bytes of o, %zu of lse, %zu of the caches;", bo,
              bl + bm, bc);
    tu_buffer_repoison(s->queue, s->o, s->bytes_o);
    tu_buffer_repoison(s->queue, s->lse, s->bytes_lse);
    tu_buffer_repoison(s->queue, s->lse_m, s->bytes_lse);
    snapshot_caches(s);
  }
  printf("%s bad input: %-52s |%s message: \"%s\"\n", ok ? "PASS" : "FAIL", label, why,
         words ? msg : "(not checked: NULL ctx)");
  fflush(stdout);
  s->failed += !ok;
}

/* A valid call: FCL_OK, and every value of o finite (written: the poison
 * is NaN, and every row sees a key). */
static void valid(bsetup *s, const char *label, const fcl_kvcache_desc *d, const fcl_tensor *kc,
                  const fcl_tensor *vc) {
  ++s->run;
  const fcl_status st = fcl_attention_kvcache(s->ctx, d, &s->tq, kc, vc, &s->tkn, &s->tvn,
                                              &s->to, s->lse);
  const int fin = clFinish(s->queue) == CL_SUCCESS;
  double o[B * SQ * HQ * DV];
  size_t unwritten = 0;
  if (tu_buffer_read_f32(s->queue, s->o, o, B * SQ * HQ * DV, 0, NULL)) unwritten = 1;
  for (size_t i = 0; i < B * SQ * HQ * DV; ++i) unwritten += !isfinite(o[i]);
  const int ok = st == FCL_OK && fin && unwritten == 0;
  printf("%s bad input: %-52s | status %s%s%s%s\n", ok ? "PASS" : "FAIL", label,
         fcl_status_string(st), st ? ": " : "", st ? fcl_context_last_error(s->ctx) : "",
         ok || st ? "" : " (o not fully written)");
  s->failed += !ok;
  tu_buffer_repoison(s->queue, s->o, s->bytes_o);
  tu_buffer_repoison(s->queue, s->lse, s->bytes_lse);
  snapshot_caches(s);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

static fcl_status kv(bsetup *s, const fcl_kvcache_desc *d, const fcl_tensor *q,
                     const fcl_tensor *kc, const fcl_tensor *vc, const fcl_tensor *kn,
                     const fcl_tensor *vn, const fcl_tensor *o, cl_mem lse) {
  return fcl_attention_kvcache(s->ctx, d, q, kc, vc, kn, vn, o, lse);
}

static void kvcache_cases(bsetup *s) {
  const fcl_kvcache_desc C = s->dc, P = s->dp;
  fcl_kvcache_desc d;
  fcl_tensor t;
  const fcl_tensor *q = &s->tq, *kc = &s->tkc, *vc = &s->tvc, *kp = &s->tkp, *vp = &s->tvp,
                   *kn = &s->tkn, *vn = &s->tvn, *o = &s->to;
  cl_context clc = fcl_context_cl(s->ctx);

  /* The cases the contract names. */
  expect(s, "k_new without v_new", kv(s, &C, q, kc, vc, kn, NULL, o, s->lse), W("v_new|k_new"));
  expect(s, "v_new without k_new", kv(s, &C, q, kc, vc, NULL, vn, o, s->lse), W("k_new|v_new"));
  d = P; d.cache_batch_idx = s->cbi;
  expect(s, "paged cache with cache_batch_idx", kv(s, &d, q, kp, vp, kn, vn, o, s->lse),
         W("cache_batch_idx"));
  d = P; d.cache_capacity = 14;
  expect(s, "cache_capacity 14 not a multiple of page_size 4",
         kv(s, &d, q, kp, vp, kn, vn, o, s->lse), W("cache_capacity|page_size"));
  d = P; d.block_table = NULL;
  expect(s, "paged without block_table", kv(s, &d, q, kp, vp, kn, vn, o, s->lse),
         W("block_table"));
  d = C; d.rotary_dim = 7;
  expect(s, "rotary_dim 7 (odd)", kv(s, &d, q, kc, vc, kn, vn, o, s->lse), W("rotary_dim"));
  d = C; d.rotary_sin = NULL;
  expect(s, "rotary_cos without rotary_sin", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
         W("rotary_sin|rotary_cos"));
  d = C; d.rotary_cos = NULL;
  expect(s, "rotary_sin without rotary_cos", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
         W("rotary_cos|rotary_sin"));
  d = C; d.cache_seqlens = NULL;
  expect(s, "cache_seqlens NULL", kv(s, &d, q, kc, vc, kn, vn, o, s->lse), W("cache_seqlens"));
  t = *kc; t.dtype = FCL_F16;
  expect(s, "k_cache f16, the rest f32", kv(s, &C, q, &t, vc, kn, vn, o, s->lse), W("dtype"));
  t = *vn; t.dtype = FCL_BF16;
  expect(s, "v_new bf16, the rest f32", kv(s, &C, q, kc, vc, kn, &t, o, s->lse), W("dtype"));
  t = *o; t.dtype = FCL_F16;
  expect(s, "o f16, the rest f32", kv(s, &C, q, kc, vc, kn, vn, &t, s->lse), W("dtype"));
  d = C; d.heads_kv = 3;
  expect(s, "heads_q 4 % heads_kv 3", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
         W("heads_kv|heads_q"));
  expect(s, "q NULL", kv(s, &C, NULL, kc, vc, kn, vn, o, s->lse), W("q"));
  d = C; d.rotary_dim = D + 2;
  expect(s, "rotary_dim 66 > head_dim 64", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
         W("rotary_dim"));

  /* More host-side arguments. */
  expect(s, "ctx NULL", fcl_attention_kvcache(NULL, &C, q, kc, vc, kn, vn, o, s->lse), NULL);
  expect(s, "desc NULL", kv(s, NULL, q, kc, vc, kn, vn, o, s->lse), W("desc|d|descriptor"));
  expect(s, "k_cache NULL", kv(s, &C, q, NULL, vc, kn, vn, o, s->lse), W("k_cache"));
  expect(s, "v_cache NULL", kv(s, &C, q, kc, NULL, kn, vn, o, s->lse), W("v_cache"));
  expect(s, "o NULL", kv(s, &C, q, kc, vc, kn, vn, NULL, s->lse), W("o"));
  d = C; d.batch = 0;
  expect(s, "batch 0", kv(s, &d, q, kc, vc, kn, vn, o, s->lse), W("batch"));
  d = C; d.head_dim = 513;
  expect(s, "head_dim 513", kv(s, &d, q, kc, vc, kn, vn, o, s->lse), W("head_dim"));
  d = C; d.num_splits = -1;
  expect(s, "num_splits -1", kv(s, &d, q, kc, vc, kn, vn, o, s->lse), W("num_splits"));
  d = P; d.page_size = -4;
  expect(s, "page_size -4", kv(s, &d, q, kp, vp, kn, vn, o, s->lse), W("page_size"));
  d = C; d.cache_batch_idx = NULL; d.cache_batch = 1;
  expect(s, "cache_batch 1 < batch 2 without cache_batch_idx",
         kv(s, &d, q, kc, vc, kn, vn, o, s->lse), W("cache_batch"));
  d = C; d.cache_capacity = 2 * CAP;
  expect(s, "cache_capacity 32: caches too small", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
         W("k_cache|v_cache|cache_capacity"));
  d = P; d.num_pages = 2 * PAGES;
  expect(s, "num_pages 16: caches hold 8", kv(s, &d, q, kp, vp, kn, vn, o, s->lse),
         W("k_cache|v_cache|num_pages"));
  t = *kc; t.strides[3] = 2;
  expect(s, "k_cache strides[3] 2", kv(s, &C, q, &t, vc, kn, vn, o, s->lse),
         W("k_cache|strides[3]"));
  d = C; d.softcap = -1.0f;
  expect(s, "softcap -1", kv(s, &d, q, kc, vc, kn, vn, o, s->lse), W("softcap"));
  d = C; d.window_left = -2;
  expect(s, "window_left -2", kv(s, &d, q, kc, vc, kn, vn, o, s->lse), W("window_left"));
  d = C; d.rotary_positions = 0;
  expect(s, "rotary_positions 0 with tables", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
         W("rotary_positions|rotary_cos"));
  d = C; d.rotary_positions = POS + 1;
  expect(s, "rotary tables one position short", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
         W("rotary_cos|rotary_sin|rotary_positions"));
  {
    const int32_t one[1] = {3};
    cl_mem small = tu_buffer_from(clc, s->queue, one, sizeof one);
    d = C; d.cache_seqlens = small;
    expect(s, "cache_seqlens 1 int for batch 2", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
           W("cache_seqlens"));
    d = C; d.cache_batch_idx = small;
    expect(s, "cache_batch_idx 1 int for batch 2", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
           W("cache_batch_idx"));
    d = P; d.block_table = small;
    expect(s, "block_table 1 int for [2, 4]", kv(s, &d, q, kp, vp, kn, vn, o, s->lse),
           W("block_table"));
    d = C; d.cu_seqlens_q = small;
    expect(s, "cu_seqlens_q 1 int for batch 2", kv(s, &d, q, kc, vc, kn, vn, o, s->lse),
           W("cu_seqlens_q"));
    clReleaseMemObject(small);
  }
  {
    cl_mem small = tu_buffer_poison(clc, s->queue, s->bytes_lse - 4);
    expect(s, "lse one float short", kv(s, &C, q, kc, vc, kn, vn, o, small), W("lse"));
    clReleaseMemObject(small);
  }
}

static fcl_status mg(bsetup *s, const fcl_attention_desc *d, int64_t n, const fcl_tensor *parts,
                     const cl_mem *lses, const fcl_tensor *o, cl_mem lse) {
  return fcl_attention_merge(s->ctx, d, n, parts, lses, o, lse);
}

static void merge_cases(bsetup *s) {
  /* Two parts: q's buffer viewed twice as an o of the merge's shape, with
   * poison lse buffers (the calls are refused before anything is read). */
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = B; d.seqlen_q = SQ; d.seqlen_k = SQ; d.heads_q = HQ; d.heads_kv = HQ;
  d.head_dim = DV; d.head_dim_v = DV;
  fcl_tensor parts[2] = {tu_dense_view(s->q, FCL_F32, SQ, HQ, DV),
                         tu_dense_view(s->q, FCL_F32, SQ, HQ, DV)};
  cl_context clc = fcl_context_cl(s->ctx);
  cl_mem l0 = tu_buffer_poison(clc, s->queue, s->bytes_lse);
  cl_mem l1 = tu_buffer_poison(clc, s->queue, s->bytes_lse);
  cl_mem lshort = tu_buffer_poison(clc, s->queue, s->bytes_lse - 4);
  cl_mem lses[2] = {l0, l1};
  const fcl_tensor *o = &s->to;
  expect(s, "merge n 0", mg(s, &d, 0, parts, lses, o, s->lse_m), W("n|parts|n_parts"));
  expect(s, "merge n -1", mg(s, &d, -1, parts, lses, o, s->lse_m), W("n|parts|n_parts"));
  expect(s, "merge ctx NULL", fcl_attention_merge(NULL, &d, 2, parts, lses, o, s->lse_m), NULL);
  expect(s, "merge desc NULL", mg(s, NULL, 2, parts, lses, o, s->lse_m), W("desc|d|descriptor"));
  expect(s, "merge o_parts NULL", mg(s, &d, 2, NULL, lses, o, s->lse_m), W("o_parts"));
  expect(s, "merge lse_parts NULL", mg(s, &d, 2, parts, NULL, o, s->lse_m), W("lse_parts"));
  {
    cl_mem one_null[2] = {l0, NULL};
    expect(s, "merge lse_parts[1] NULL", mg(s, &d, 2, parts, one_null, o, s->lse_m),
           W("lse_parts|lse_parts[1]"));
    cl_mem one_short[2] = {l0, lshort};
    expect(s, "merge lse_parts[1] one float short", mg(s, &d, 2, parts, one_short, o, s->lse_m),
           W("lse_parts|lse_parts[1]"));
  }
  expect(s, "merge o NULL", mg(s, &d, 2, parts, lses, NULL, s->lse_m), W("o"));
  {
    fcl_tensor bad[2] = {parts[0], parts[1]};
    bad[1].dtype = (fcl_dtype)7;
    expect(s, "merge o_parts[1] dtype 7", mg(s, &d, 2, bad, lses, o, s->lse_m),
           W("dtype|o_parts|o_parts[1]"));
    bad[1] = parts[1];
    bad[1].buffer = NULL;
    expect(s, "merge o_parts[1] buffer NULL", mg(s, &d, 2, bad, lses, o, s->lse_m),
           W("o_parts|o_parts[1]"));
  }
  fcl_attention_desc e = d;
  e.head_dim_v = 0;
  expect(s, "merge head_dim_v 0", mg(s, &e, 2, parts, lses, o, s->lse_m), W("head_dim_v"));
  e = d; e.heads_q = 0;
  expect(s, "merge heads_q 0", mg(s, &e, 2, parts, lses, o, s->lse_m), W("heads_q"));
  expect(s, "merge lse one float short", mg(s, &d, 2, parts, lses, o, lshort), W("lse"));
  clReleaseMemObject(l0); clReleaseMemObject(l1); clReleaseMemObject(lshort);
}

void kv_bad_input_tests(fcl_context *ctx, int *run, int *failed) {
  if (!oh_selected("bad input")) return;
  static bsetup S;
  bsetup *s = &S;
  if (init(s, ctx)) {
    printf("FAIL bad input: could not create buffers\n");
    ++*run;
    ++*failed;
    release_all(s);
    return;
  }
  valid(s, "valid call, contiguous (baseline)", &s->dc, &s->tkc, &s->tvc);
  valid(s, "valid call, paged (baseline)", &s->dp, &s->tkp, &s->tvp);
  kvcache_cases(s);
  merge_cases(s);
  valid(s, "valid call, contiguous, after the bad ones", &s->dc, &s->tkc, &s->tvc);
  valid(s, "valid call, paged, after the bad ones", &s->dp, &s->tkp, &s->tvp);
  release_all(s);
  *run += s->run;
  *failed += s->failed;
}
