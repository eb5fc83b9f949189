/* Bad host-side inputs to fcl_attention_kvcache with quantized caches
 * (DESIGN.md, "Quantized KV caches"): each returns
 * FCL_ERROR_INVALID_ARGUMENT, fcl_context_last_error() names the argument,
 * and nothing is written (o and lse stay poison, every cache keeps its
 * bytes). Valid calls with quantized caches come before and after. */
#include "kvcache_quant_cache.h"
#include "kvcache_tests.h"
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, SQ = 2, HQ = 4, HKV = 2, D = 64, DV = 64, CAP = 16, NF = 4 };
enum { F = 0, Q8, Q4, E4 }; /* the caches' formats, below */
static const fcl_dtype fmts[NF] = {FCL_F32, FCL_Q8_0, FCL_Q4_0, FCL_FP8_E4M3};

typedef struct {
  fcl_context     *ctx;
  cl_command_queue queue;
  cl_mem           q, kn, vn, o, lse, seq, sc1, sc2;
  cl_mem           c[NF][2];      /* k and v caches of each format */
  size_t           bytes[NF][2];  /* [B][CAP][HKV][D] and one unit to spare */
  unsigned char   *snap[NF][2];   /* their bytes before a bad call */
  size_t           bytes_o, bytes_lse;
  fcl_kvcache_desc d;             /* valid, contiguous, no scales */
  fcl_tensor       tq, tkn, tvn, to, tc[NF][2];
  int              run, failed;
} qsetup;

static unsigned char *snapshot(qsetup *s, cl_mem m, size_t bytes) {
  unsigned char *h = tu_buffer_snapshot(s->queue, m, bytes);
  if (!h) abort();
  return h;
}

static void snapshot_caches(qsetup *s) {
  for (int f = 0; f < NF; ++f)
    for (int kv = 0; kv < 2; ++kv) {
      free(s->snap[f][kv]);
      s->snap[f][kv] = snapshot(s, s->c[f][kv], s->bytes[f][kv]);
    }
}

static cl_mem random_f32(qsetup *s, tu_rng *g, size_t n, double amp) {
  return tu_buffer_random_f32(fcl_context_cl(s->ctx), s->queue, g, n, amp);
}

static cl_mem random_cache(qsetup *s, tu_rng *g, fcl_dtype fmt, size_t *bytes) {
  const int64_t values = (int64_t)B * CAP * HKV * D, uv = ref_quant_unit_values(fmt);
  const size_t ub = ref_quant_unit_bytes(fmt);
  *bytes = (size_t)(values / uv + 1) * ub;
  if (fmt == FCL_F32) return random_f32(s, g, *bytes / 4, 2.0);
  uint8_t *h = malloc(*bytes);
  if (!h) abort();
  kvq_fill_vec(fmt, h, values + uv, 1.0f, 2.0, g);
  cl_mem m = tu_buffer_from(fcl_context_cl(s->ctx), s->queue, h, *bytes);
  free(h);
  return m;
}

static int init(qsetup *s, fcl_context *ctx) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->queue = fcl_context_queue(ctx);
  cl_context clc = fcl_context_cl(ctx);
  tu_rng g;
  tu_rng_seed(&g, 5151);
  s->q = random_f32(s, &g, B * SQ * HQ * D, 2);
  s->kn = random_f32(s, &g, B * SQ * HKV * D, 2);
  s->vn = random_f32(s, &g, B * SQ * HKV * DV, 1);
  s->bytes_o = (size_t)B * SQ * HQ * DV * 4;
  s->bytes_lse = (size_t)B * HQ * SQ * 4;
  s->o = tu_buffer_poison(clc, s->queue, s->bytes_o);
  s->lse = tu_buffer_poison(clc, s->queue, s->bytes_lse);
  const int32_t seq[B] = {5, 3};
  const float sc[HKV] = {0.01f, 0.02f};
  s->seq = tu_buffer_from(clc, s->queue, seq, sizeof seq);
  s->sc1 = tu_buffer_from(clc, s->queue, sc, 4);
  s->sc2 = tu_buffer_from(clc, s->queue, sc, sizeof sc);
  int bad = !s->q || !s->kn || !s->vn || !s->o || !s->lse || !s->seq || !s->sc1 || !s->sc2;
  for (int f = 0; f < NF; ++f)
    for (int kv = 0; kv < 2; ++kv) {
      s->c[f][kv] = random_cache(s, &g, fmts[f], &s->bytes[f][kv]);
      s->tc[f][kv] = tu_dense_view(s->c[f][kv], fmts[f], CAP, HKV, kv ? DV : D);
      bad |= !s->c[f][kv];
    }
  if (bad) return 1;
  s->tq = tu_dense_view(s->q, FCL_F32, SQ, HQ, D);
  s->tkn = tu_dense_view(s->kn, FCL_F32, SQ, HKV, D);
  s->tvn = tu_dense_view(s->vn, FCL_F32, SQ, HKV, DV);
  s->to = tu_dense_view(s->o, FCL_F32, SQ, HQ, DV);
  fcl_kvcache_desc d = FCL_KVCACHE_DESC_INIT;
  d.batch = B; d.seqlen_q = SQ; d.heads_q = HQ; d.heads_kv = HKV; d.head_dim = D;
  d.head_dim_v = DV; d.cache_capacity = CAP; d.causal = 1;
  d.cache_seqlens = s->seq;
  s->d = d;
  snapshot_caches(s);
  return 0;
}

static void release_all(qsetup *s) {
  cl_mem ms[] = {s->q, s->kn, s->vn, s->o, s->lse, s->seq, s->sc1, s->sc2};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; ++i)
    if (ms[i]) clReleaseMemObject(ms[i]);
  for (int f = 0; f < NF; ++f)
    for (int kv = 0; kv < 2; ++kv) {
      if (s->c[f][kv]) clReleaseMemObject(s->c[f][kv]);
      free(s->snap[f][kv]);
    }
}

static size_t caches_changed(qsetup *s) {
  size_t n = 0;
  for (int f = 0; f < NF; ++f)
    for (int kv = 0; kv < 2; ++kv) {
      unsigned char *now = snapshot(s, s->c[f][kv], s->bytes[f][kv]);
      for (size_t i = 0; i < s->bytes[f][kv]; ++i) n += now[i] != s->snap[f][kv][i];
      free(now);
    }
  return n;
}

static void repoison(qsetup *s) {
  tu_buffer_repoison(s->queue, s->o, s->bytes_o);
  tu_buffer_repoison(s->queue, s->lse, s->bytes_lse);
  snapshot_caches(s);
}

/* One bad call: status, message, nothing written. */
static void expect(qsetup *s, const char *label, fcl_status got, const char *const *words) {
  ++s->run;
  char why[512] = "", missing[256];
  int ok = 1;
  if (got != FCL_ERROR_INVALID_ARGUMENT) {
    ok = 0;
    oh_append(why, sizeof why, " status %s, want %s;", fcl_status_string(got),
              fcl_status_string(FCL_ERROR_INVALID_ARGUMENT));
  }
  const char *msg = fcl_context_last_error(s->ctx);
  if (!msg) msg = "(NULL)";
  if (!tu_has_words(msg, words, missing, sizeof missing)) {
    ok = 0;
    oh_append(why, sizeof why, " message lacks %s;", missing);
  }
  clFinish(s->queue);
  const long bo = tu_buffer_poison_left(s->queue, s->o, 0, s->bytes_o, NULL);
  const long bl = tu_buffer_poison_left(s->queue, s->lse, 0, s->bytes_lse, NULL);
  const size_t bc = caches_changed(s);
  if (bo || bl || bc) {
    ok = 0;
    oh_append(why, sizeof why, " wrote %ld bytes of o, %ld of lse, %zu of the caches;", bo, bl,
              bc);
    repoison(s);
  }
  printf("%s bad input: %-58s |%s message: \"%s\"\n", ok ? "PASS" : "FAIL", label, why, msg);
  fflush(stdout);
  s->failed += !ok;
}

/* A valid call: FCL_OK, and every value of o finite (the poison is NaN). */
static void valid(qsetup *s, const char *label, const fcl_kvcache_desc *d, int kf, int vf) {
  ++s->run;
  const fcl_status st = fcl_attention_kvcache(s->ctx, d, &s->tq, &s->tc[kf][0], &s->tc[vf][1],
                                              &s->tkn, &s->tvn, &s->to, s->lse);
  const int fin = clFinish(s->queue) == CL_SUCCESS;
  double o[B * SQ * HQ * DV];
  size_t unwritten = 0;
  if (tu_buffer_read_f32(s->queue, s->o, o, B * SQ * HQ * DV, 0, NULL)) unwritten = 1;
  for (size_t i = 0; i < B * SQ * HQ * DV; ++i) unwritten += !isfinite(o[i]);
  const int ok = st == FCL_OK && fin && unwritten == 0;
  printf("%s bad input: %-58s | status %s%s%s%s\n", ok ? "PASS" : "FAIL", label,
         fcl_status_string(st), st ? ": " : "", st ? fcl_context_last_error(s->ctx) : "",
         ok || st ? "" : " (o not fully written)");
  s->failed += !ok;
  repoison(s);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The call with caches of formats kf (k_cache) and vf (v_cache); k, v
 * NULL: those views. */
static fcl_status kv(qsetup *s, const fcl_kvcache_desc *d, const fcl_tensor *q, int kf, int vf,
                     const fcl_tensor *k, const fcl_tensor *v, const fcl_tensor *kn,
                     const fcl_tensor *vn, const fcl_tensor *o) {
  return fcl_attention_kvcache(s->ctx, d, q, k ? k : &s->tc[kf][0], v ? v : &s->tc[vf][1], kn, vn,
                               o, s->lse);
}

static void cases(qsetup *s) {
  const fcl_kvcache_desc C = s->d;
  fcl_kvcache_desc d;
  fcl_tensor t;
  const fcl_tensor *q = &s->tq, *kn = &s->tkn, *vn = &s->tvn, *o = &s->to;

  /* Quantized where f32, f16 or bf16 is required: with f32 caches (only
   * that tensor is wrong), and with caches of the same format. */
  t = *q; t.dtype = FCL_Q8_0;
  expect(s, "q q8_0, caches f32", kv(s, &C, &t, F, F, NULL, NULL, kn, vn, o), W("q.dtype"));
  t = *q; t.dtype = FCL_FP8_E5M2;
  expect(s, "q fp8_e5m2, caches fp8_e4m3", kv(s, &C, &t, E4, E4, NULL, NULL, kn, vn, o),
         W("q.dtype"));
  t = *kn; t.dtype = FCL_Q8_0;
  expect(s, "k_new q8_0, caches f32", kv(s, &C, q, F, F, NULL, NULL, &t, vn, o), W("k_new.dtype"));
  expect(s, "k_new q8_0, caches q8_0", kv(s, &C, q, Q8, Q8, NULL, NULL, &t, vn, o),
         W("k_new.dtype"));
  t = *vn; t.dtype = FCL_Q4_0;
  expect(s, "v_new q4_0, caches f32", kv(s, &C, q, F, F, NULL, NULL, kn, &t, o), W("v_new.dtype"));
  expect(s, "v_new q4_0, caches q4_0", kv(s, &C, q, Q4, Q4, NULL, NULL, kn, &t, o),
         W("v_new.dtype"));
  t = *o; t.dtype = FCL_FP8_E4M3;
  expect(s, "o fp8_e4m3, caches f32", kv(s, &C, q, F, F, NULL, NULL, kn, vn, &t), W("o.dtype"));
  expect(s, "o fp8_e4m3, caches fp8_e4m3", kv(s, &C, q, E4, E4, NULL, NULL, kn, vn, &t),
         W("o.dtype"));

  /* Block formats: head dims and strides multiples of 32, offsets of 2. */
  d = C; d.head_dim = 48;
  expect(s, "head_dim 48, k_cache q8_0", kv(s, &d, q, Q8, Q8, NULL, NULL, kn, vn, o),
         W("k_cache", "48"));
  d = C; d.head_dim_v = 40;
  expect(s, "head_dim_v 40, v_cache q4_0 (k_cache f32)", kv(s, &d, q, F, Q4, NULL, NULL, kn, vn, o),
         W("v_cache", "40"));
  t = s->tc[Q8][0]; t.strides[2] = 48;
  expect(s, "k_cache q8_0 strides[2] 48", kv(s, &C, q, Q8, Q8, &t, NULL, kn, vn, o),
         W("k_cache.strides[2]"));
  t = s->tc[Q4][1]; t.strides[1] = HKV * DV - 16;
  expect(s, "v_cache q4_0 strides[1] 112", kv(s, &C, q, Q4, Q4, NULL, &t, kn, vn, o),
         W("v_cache.strides[1]"));
  t = s->tc[Q4][0]; t.strides[0] = CAP * HKV * D - 8;
  expect(s, "k_cache q4_0 strides[0] 2040", kv(s, &C, q, Q4, Q4, &t, NULL, kn, vn, o),
         W("k_cache.strides[0]"));
  t = s->tc[Q8][0]; t.offset = 1;
  expect(s, "k_cache q8_0 offset 1 byte", kv(s, &C, q, Q8, Q8, &t, NULL, kn, vn, o),
         W("k_cache.offset"));
  t = s->tc[Q4][1]; t.offset = 19;
  expect(s, "v_cache q4_0 offset 19 bytes", kv(s, &C, q, Q4, Q4, NULL, &t, kn, vn, o),
         W("v_cache.offset"));

  /* Scales: only for fp8, big enough, one a tensor or a kv head. */
  d = C; d.k_scale = s->sc1; d.scale_count = 1;
  expect(s, "k_scale with k_cache q8_0", kv(s, &d, q, Q8, Q8, NULL, NULL, kn, vn, o),
         W("k_scale"));
  d = C; d.v_scale = s->sc1; d.scale_count = 1;
  expect(s, "v_scale with v_cache q4_0 (k_cache fp8_e4m3)",
         kv(s, &d, q, E4, Q4, NULL, NULL, kn, vn, o), W("v_scale"));
  d = C; d.k_scale = s->sc1; d.v_scale = s->sc2; d.scale_count = HKV;
  expect(s, "k_scale 1 float for scale_count 2", kv(s, &d, q, E4, E4, NULL, NULL, kn, vn, o),
         W("k_scale"));
  d = C; d.k_scale = s->sc2; d.v_scale = s->sc1; d.scale_count = HKV;
  expect(s, "v_scale 1 float for scale_count 2", kv(s, &d, q, E4, E4, NULL, NULL, kn, vn, o),
         W("v_scale"));
  const int64_t counts[] = {3, -1, HQ};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; ++i) {
    char label[80];
    snprintf(label, sizeof label, "scale_count %lld (heads_kv %d)", (long long)counts[i], HKV);
    d = C; d.k_scale = d.v_scale = s->sc2; d.scale_count = counts[i];
    expect(s, label, kv(s, &d, q, E4, E4, NULL, NULL, kn, vn, o), W("scale_count"));
  }

  /* Block-format views that end past their buffers. */
  d = C; d.cache_capacity = CAP + 1;
  expect(s, "cache_capacity 17: q4_0 caches hold 16", kv(s, &d, q, Q4, Q4, NULL, NULL, kn, vn, o),
         W("k_cache", "buffer"));
  {
    const size_t bytes = (size_t)B * CAP * HKV * (D / 32) * 34 - 34;
    cl_mem small = tu_buffer_poison(fcl_context_cl(s->ctx), s->queue, bytes);
    t = s->tc[Q8][0]; t.buffer = small;
    expect(s, "k_cache q8_0 buffer one block short", kv(s, &C, q, Q8, Q8, &t, NULL, kn, vn, o),
           W("k_cache", "buffer"));
    t = s->tc[Q8][1]; t.buffer = small; t.offset = 34; /* and shifted by one */
    expect(s, "v_cache q8_0 two blocks short", kv(s, &C, q, Q8, Q8, NULL, &t, kn, vn, o),
           W("v_cache", "buffer"));
    if (small) clReleaseMemObject(small);
  }
}

static void valid_calls(qsetup *s, const char *when) {
  char label[96];
  fcl_kvcache_desc d = s->d;
  snprintf(label, sizeof label, "valid call, q8_0 K q4_0 V (%s)", when);
  valid(s, label, &d, Q8, Q4);
  d.k_scale = d.v_scale = s->sc2; d.scale_count = HKV;
  snprintf(label, sizeof label, "valid call, fp8_e4m3 scales a kv head (%s)", when);
  valid(s, label, &d, E4, E4);
}

void kvq_bad_input_tests(fcl_context *ctx, int *run, int *failed) {
  if (!oh_selected("bad input")) return;
  static qsetup S;
  qsetup *s = &S;
  if (init(s, ctx)) {
    printf("FAIL bad input: could not create buffers\n");
    ++*run;
    ++*failed;
    release_all(s);
    return;
  }
  valid_calls(s, "baseline");
  cases(s);
  valid_calls(s, "after the bad ones");
  release_all(s);
  *run += s->run;
  *failed += s->failed;
}
