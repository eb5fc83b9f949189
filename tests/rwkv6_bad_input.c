/* Bad inputs of fcl_rwkv6_forward and fcl_rwkv6_backward (test_rwkv6.c):
 * each must return FCL_ERROR_INVALID_ARGUMENT (or UNSUPPORTED where
 * documented), name the argument in fcl_context_last_error() and leave
 * every output buffer untouched; valid calls with the same exact-fit
 * buffers, before and after, match the reference (f32, recurrent and
 * chunked). */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rwkv6_bad_inputs(fcl_context *ctx, int *cases, int *failed);

static const char *algo_name(int a) { return a == OH_REC ? "recurrent" : "chunked"; }
static fcl_rwkv6_algorithm algo_enum(int a) {
  return a == OH_REC ? FCL_RWKV6_RECURRENT : FCL_RWKV6_CHUNKED;
}

static cl_mem upload_typed(cl_context cl, cl_command_queue q, const double *x, size_t n,
                           fcl_dtype t) {
  const size_t es = tu_dtype_size(t);
  unsigned char *host = malloc(n * es + 1);
  if (!host) abort();
  for (size_t i = 0; i < n; ++i) tu_encode(host + i * es, x[i], t);
  cl_mem m = tu_buffer_from(cl, q, host, n * es);
  free(host);
  return m;
}


enum { BB = 2, BT = 5, BH = 2, BK = 4, BV = 3 };
#define BNK ((size_t)BB * BT * BH * BK)
#define BNV ((size_t)BB * BT * BH * BV)
#define BNS ((size_t)BB * BH * BK * BV)
#define BNU ((size_t)BH * BK)

typedef struct {
  fcl_context     *ctx;
  cl_context       cl;
  cl_command_queue queue;
  cl_mem           br, bk, bv, bw, bdo, bu, bh0, bdht, bcu;   /* inputs  */
  cl_mem           bo, bht, bdr, bdk, bdv, bdw, bdu, bdh0;    /* outputs */
  fcl_rwkv6_desc   d;
  fcl_tensor       r, k, v, w, dout, o, dr, dk, dv, dw;
  double           hr[BNK], hk[BNK], hv[BNV], hw[BNK], hdo[BNV], hu[BNU], hh0[BNS],
                   hdht[BNS];
} bsetup;

static int bad_cases = 0, bad_failed = 0;

static size_t out_bytes(int i) {
  /* o, ht, dr, dk, dv, dw, du, dh0 (all f32 here) */
  static const size_t n[8] = {BNV, BNS, BNK, BNK, BNV, BNK, BNU, BNS};
  return n[i] * 4;
}
static cl_mem *out_buf(bsetup *s, int i) {
  cl_mem *b[8] = {&s->bo, &s->bht, &s->bdr, &s->bdk, &s->bdv, &s->bdw, &s->bdu, &s->bdh0};
  return b[i];
}

static void repoison_outputs(bsetup *s) {
  for (int i = 0; i < 8; ++i) tu_buffer_repoison(s->queue, *out_buf(s, i), out_bytes(i));
}

/* want2: a second accepted status (or want itself). words: NULL-terminated
 * list, or NULL for no message check (NULL ctx). */
static void expect(bsetup *s, const char *label, fcl_status got, fcl_status want,
                   fcl_status want2, const char *const *words) {
  static const char *const names[8] = {"o", "ht", "dr", "dk", "dv", "dw", "du", "dh0"};
  ++bad_cases;
  int ok = 1;
  char why[512] = "";
  size_t wp = 0;
  if (got != want && got != want2) {
    ok = 0;
    wp += (size_t)snprintf(why + wp, sizeof why - wp, " status %s, want %s;",
                           fcl_status_string(got), fcl_status_string(want));
  }
  const char *msg = fcl_context_last_error(s->ctx);
  if (!msg) msg = "(NULL)";
  if (words) {
    char missing[256];
    if (!tu_has_words(msg, words, missing, sizeof missing)) {
      ok = 0;
      wp += (size_t)snprintf(why + wp, sizeof why - wp, " message lacks %s;", missing);
    }
  }
  clFinish(s->queue);
  for (int i = 0; i < 8; ++i) {
    size_t first = 0;
    const long bad = tu_buffer_poison_left(s->queue, *out_buf(s, i), 0, out_bytes(i), &first);
    if (bad != 0 && wp < sizeof why) {
      ok = 0;
      wp += (size_t)snprintf(why + wp, sizeof why - wp, " wrote %ld bytes of %s;", bad,
                             names[i]);
    }
  }
  printf("%s %-52s |%s message: \"%s\"\n", ok ? "PASS" : "FAIL", label, why,
         words ? msg : "(not checked: NULL ctx)");
  fflush(stdout);
  if (!ok) {
    ++bad_failed;
    repoison_outputs(s);
  }
}

static cl_mem upload_f32(bsetup *s, const double *x, size_t n) {
  return upload_typed(s->cl, s->queue, x, n, FCL_F32);
}

static int bsetup_init(bsetup *s, fcl_context *ctx) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->cl = fcl_context_cl(ctx);
  s->queue = fcl_context_queue(ctx);
  tu_rng g;
  tu_rng_seed(&g, 4242);
  tu_fill_uniform(&g, s->hr, BNK, -1, 1);
  tu_fill_uniform(&g, s->hk, BNK, -1, 1);
  tu_fill_uniform(&g, s->hv, BNV, -1, 1);
  oh_fill_decay(&g, s->hw, BNK, OH_W_WEAK);
  tu_fill_uniform(&g, s->hdo, BNV, -1, 1);
  tu_fill_uniform(&g, s->hu, BNU, -1, 1);
  tu_fill_uniform(&g, s->hh0, BNS, -1, 1);
  tu_fill_uniform(&g, s->hdht, BNS, -1, 1);
  double *arrs[8] = {s->hr, s->hk, s->hv, s->hw, s->hdo, s->hu, s->hh0, s->hdht};
  const size_t ns[8] = {BNK, BNK, BNV, BNK, BNV, BNU, BNS, BNS};
  for (int i = 0; i < 8; ++i) tu_round_array(arrs[i], ns[i], FCL_F32);
  s->br = upload_f32(s, s->hr, BNK);
  s->bk = upload_f32(s, s->hk, BNK);
  s->bv = upload_f32(s, s->hv, BNV);
  s->bw = upload_f32(s, s->hw, BNK);
  s->bdo = upload_f32(s, s->hdo, BNV);
  s->bu = upload_f32(s, s->hu, BNU);
  s->bh0 = upload_f32(s, s->hh0, BNS);
  s->bdht = upload_f32(s, s->hdht, BNS);
  const int32_t cu[BB + 1] = {0, 3, 7}; /* 7 tokens <= BB*BT rows of the views */
  s->bcu = tu_buffer_from(s->cl, s->queue, cu, sizeof cu);
  for (int i = 0; i < 8; ++i) {
    *out_buf(s, i) = tu_buffer_poison(s->cl, s->queue, out_bytes(i));
    if (!*out_buf(s, i)) return 1;
  }
  if (!s->br || !s->bk || !s->bv || !s->bw || !s->bdo || !s->bu || !s->bh0 || !s->bdht ||
      !s->bcu)
    return 1;
  fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
  d.batch = BB; d.seqlen = BT; d.heads = BH; d.head_dim_k = BK; d.head_dim_v = BV;
  s->d = d;
  s->r = tu_dense_view(s->br, FCL_F32, BT, BH, BK);
  s->k = tu_dense_view(s->bk, FCL_F32, BT, BH, BK);
  s->v = tu_dense_view(s->bv, FCL_F32, BT, BH, BV);
  s->w = tu_dense_view(s->bw, FCL_F32, BT, BH, BK);
  s->dout = tu_dense_view(s->bdo, FCL_F32, BT, BH, BV);
  s->o = tu_dense_view(s->bo, FCL_F32, BT, BH, BV);
  s->dr = tu_dense_view(s->bdr, FCL_F32, BT, BH, BK);
  s->dk = tu_dense_view(s->bdk, FCL_F32, BT, BH, BK);
  s->dv = tu_dense_view(s->bdv, FCL_F32, BT, BH, BV);
  s->dw = tu_dense_view(s->bdw, FCL_F32, BT, BH, BK);
  return 0;
}

static void bsetup_free(bsetup *s) {
  cl_mem m[9] = {s->br, s->bk, s->bv, s->bw, s->bdo, s->bu, s->bh0, s->bdht, s->bcu};
  for (int i = 0; i < 9; ++i) clReleaseMemObject(m[i]);
  for (int i = 0; i < 8; ++i) clReleaseMemObject(*out_buf(s, i));
}

/* Argument bundles, so each bad case changes one thing. */
typedef struct {
  fcl_context *ctx;
  const fcl_rwkv6_desc *d;
  const fcl_tensor *r, *k, *v, *w, *o, *dout, *dr, *dk, *dv, *dw;
  cl_mem u, h0, ht, dht, du, dh0;
} bargs;

static bargs base_args(bsetup *s) {
  bargs a = {s->ctx, &s->d, &s->r, &s->k, &s->v, &s->w, &s->o, &s->dout, &s->dr, &s->dk,
             &s->dv, &s->dw, s->bu, s->bh0, s->bht, s->bdht, s->bdu, s->bdh0};
  return a;
}
static fcl_status fwd(const bargs *a) {
  return fcl_rwkv6_forward(a->ctx, a->d, a->r, a->k, a->v, a->w, a->u, a->h0, a->o, a->ht);
}
static fcl_status bwd(const bargs *a) {
  return fcl_rwkv6_backward(a->ctx, a->d, a->r, a->k, a->v, a->w, a->u, a->h0, a->dout,
                            a->dht, a->dr, a->dk, a->dv, a->dw, a->du, a->dh0);
}

/* A valid forward and backward (f32, both algorithms) matching the reference. */
static void valid_calls(bsetup *s, const char *label, const fcl_rwkv6_desc *dd,
                        const int32_t *cu) {
  for (int alg = OH_REC; alg <= OH_CHUNK; alg <<= 1) {
    ++bad_cases;
    fcl_rwkv6_desc d = *dd;
    d.algorithm = algo_enum(alg);
    bargs a = base_args(s);
    a.d = &d;
    const fcl_status sf = fwd(&a);
    const fcl_status sb = sf == FCL_OK ? bwd(&a) : sf;
    int ok = sf == FCL_OK && sb == FCL_OK && clFinish(s->queue) == CL_SUCCESS;
    ref_rwkv6_problem p = {d.batch, d.seqlen, BH, BK, BV, 0.0, d.reverse, cu};
    const int64_t tok = ref_rwkv6_tokens(&p);
    const size_t nk = (size_t)(tok * BH * BK), nv = (size_t)(tok * BH * BV),
                 ns = (size_t)(d.batch * BH * BK * BV);
    double o[BNV], ht[BNS], dr[BNK], dk[BNK], dv[BNV], dw[BNK], du[BNU], dh0[BNS];
    double got[BNV > BNS ? (BNV > BNK ? BNV : BNK) : (BNS > BNK ? BNS : BNK)];
    ref_rwkv6_forward(&p, s->hr, s->hk, s->hv, s->hw, s->hu, s->hh0, o, ht);
    ref_rwkv6_backward(&p, s->hr, s->hk, s->hv, s->hw, s->hu, s->hh0, s->hdo, s->hdht, dr, dk,
                       dv, dw, du, dh0);
    const double *refs[8] = {o, ht, dr, dk, dv, dw, du, dh0};
    const size_t cnt[8] = {nv, ns, nk, nk, nv, nk, BNU, ns};
    static const char *const names[8] = {"o", "ht", "dr", "dk", "dv", "dw", "du", "dh0"};
    char why[256] = "";
    size_t wp = 0;
    for (int i = 0; ok && i < 8; ++i) {
      long bt = 0;
      if (tu_buffer_read_f32(s->queue, *out_buf(s, i), got, cnt[i],
                             out_bytes(i) - cnt[i] * 4, &bt)) {
        ok = 0;
        break;
      }
      const tu_cmp c = tu_compare(got, refs[i], cnt[i], tu_tol_rwkv6(FCL_F32), 0);
      if (!c.ok || bt) {
        ok = 0;
        wp += (size_t)snprintf(why + wp, sizeof why - wp, " %s%s", names[i],
                               c.ok ? " wrote past its end" : " mismatch");
        if (!c.ok) tu_print_cmp(names[i], &c, NULL, 0);
      }
    }
    printf("%s %-52s | %s: forward %s, backward %s%s%s\n", ok ? "PASS" : "FAIL", label,
           algo_name(alg), fcl_status_string(sf), fcl_status_string(sb), why,
           sf || sb ? fcl_context_last_error(s->ctx) : "");
    if (!ok) ++bad_failed;
    repoison_outputs(s);
  }
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})
#define INVALID FCL_ERROR_INVALID_ARGUMENT
#define UNSUP FCL_ERROR_UNSUPPORTED

/* An offset that makes the view of x end one element past `bytes`. */
static size_t offset_past_end(const fcl_tensor *x, int64_t b, int64_t t, int64_t h,
                              int64_t d, size_t bytes) {
  const int64_t extent =
      (b - 1) * x->strides[0] + (t - 1) * x->strides[1] + (h - 1) * x->strides[2] + d;
  return bytes - (size_t)extent * 4 + 4;
}

int rwkv6_bad_inputs(fcl_context *ctx, int *cases, int *failed) {
  const double t0 = tu_now();
  static bsetup S;
  bsetup *s = &S;
  if (bsetup_init(s, ctx)) {
    printf("FAIL bad inputs: could not create buffers\n");
    *cases = bad_cases;
    *failed = ++bad_failed;
    return 0;
  }
  const int32_t cu_host[BB + 1] = {0, 3, 7};
  valid_calls(s, "baseline (valid)", &s->d, NULL);
  {
    fcl_rwkv6_desc vd = s->d;
    vd.cu_seqlens = s->bcu;
    vd.seqlen = 4;
    valid_calls(s, "varlen baseline (valid)", &vd, cu_host);
  }
  char label[128], val[32];
  bargs a;
  fcl_rwkv6_desc d;
  fcl_tensor t;

  /* NULL context and descriptor. */
  a = base_args(s); a.ctx = NULL;
  expect(s, "forward: ctx NULL", fwd(&a), INVALID, INVALID, NULL);
  expect(s, "backward: ctx NULL", bwd(&a), INVALID, INVALID, NULL);
  a = base_args(s); a.d = NULL;
  expect(s, "forward: desc NULL", fwd(&a), INVALID, INVALID, W("desc|d|descriptor"));
  expect(s, "backward: desc NULL", bwd(&a), INVALID, INVALID, W("desc|d|descriptor"));

  /* NULL tensors and buffers (forward). */
  {
    static const char *const nm[6] = {"r", "k", "v", "w", "o", "u"};
    for (int i = 0; i < 6; ++i) {
      a = base_args(s);
      switch (i) {
      case 0: a.r = NULL; break;
      case 1: a.k = NULL; break;
      case 2: a.v = NULL; break;
      case 3: a.w = NULL; break;
      case 4: a.o = NULL; break;
      default: a.u = NULL; break;
      }
      snprintf(label, sizeof label, "forward: %s NULL", nm[i]);
      expect(s, label, fwd(&a), INVALID, INVALID, W(nm[i]));
    }
  }
  /* NULL tensors and buffers (backward). */
  {
    static const char *const nm[10] = {"r", "k", "v", "w", "u", "dout|do",
                                       "dr", "dk", "dv", "dw"};
    for (int i = 0; i < 11; ++i) {
      a = base_args(s);
      const char *n = i < 10 ? nm[i] : "du";
      switch (i) {
      case 0: a.r = NULL; break;
      case 1: a.k = NULL; break;
      case 2: a.v = NULL; break;
      case 3: a.w = NULL; break;
      case 4: a.u = NULL; break;
      case 5: a.dout = NULL; break;
      case 6: a.dr = NULL; break;
      case 7: a.dk = NULL; break;
      case 8: a.dv = NULL; break;
      case 9: a.dw = NULL; break;
      default: a.du = NULL; break;
      }
      snprintf(label, sizeof label, "backward: %s NULL", i == 5 ? "dout" : n);
      expect(s, label, bwd(&a), INVALID, INVALID, W(n));
    }
  }
  /* A NULL cl_mem inside a tensor. */
  a = base_args(s); t = s->w; t.buffer = NULL; a.w = &t;
  expect(s, "forward: w.buffer NULL", fwd(&a), INVALID, INVALID, W("w"));
  a = base_args(s); t = s->dv; t.buffer = NULL; a.dv = &t;
  expect(s, "backward: dv.buffer NULL", bwd(&a), INVALID, INVALID, W("dv"));

  /* Sizes <= 0 and head dims > 256. */
  {
    static const char *const fields[5] = {"batch", "seqlen", "heads", "head_dim_k",
                                          "head_dim_v"};
    static const int64_t bad[2] = {0, -1};
    for (int f = 0; f < 5; ++f)
      for (int vi = 0; vi < 2; ++vi)
        for (int dir = 0; dir < 2; ++dir) {
          if (dir == 1 && vi == 0 && f != 3) continue; /* backward: a subset */
          d = s->d;
          int64_t *fp[5] = {&d.batch, &d.seqlen, &d.heads, &d.head_dim_k, &d.head_dim_v};
          *fp[f] = bad[vi];
          a = base_args(s); a.d = &d;
          snprintf(label, sizeof label, "%s: %s = %lld", dir ? "backward" : "forward",
                   fields[f], (long long)bad[vi]);
          snprintf(val, sizeof val, "%lld", (long long)bad[vi]);
          expect(s, label, dir ? bwd(&a) : fwd(&a), INVALID, INVALID, W(fields[f], val));
        }
  }
  d = s->d; d.head_dim_k = 257; a = base_args(s); a.d = &d;
  expect(s, "forward: head_dim_k = 257", fwd(&a), INVALID, UNSUP, W("head_dim_k", "257"));
  expect(s, "backward: head_dim_k = 257", bwd(&a), INVALID, UNSUP, W("head_dim_k", "257"));
  d = s->d; d.head_dim_v = 300; a = base_args(s); a.d = &d;
  expect(s, "forward: head_dim_v = 300", fwd(&a), INVALID, UNSUP, W("head_dim_v", "300"));
  expect(s, "backward: head_dim_v = 300", bwd(&a), INVALID, UNSUP, W("head_dim_v", "300"));

  /* Other descriptor fields. */
  d = s->d; d.scale = NAN; a = base_args(s); a.d = &d;
  expect(s, "forward: scale = NaN", fwd(&a), INVALID, INVALID, W("scale"));
  d = s->d; d.scale = INFINITY; a = base_args(s); a.d = &d;
  expect(s, "backward: scale = inf", bwd(&a), INVALID, INVALID, W("scale"));
  d = s->d; d.algorithm = (fcl_rwkv6_algorithm)7; a = base_args(s); a.d = &d;
  expect(s, "forward: algorithm = 7", fwd(&a), INVALID, INVALID, W("algorithm"));
  expect(s, "backward: algorithm = 7", bwd(&a), INVALID, INVALID, W("algorithm"));

  /* dtype mismatches and an unknown dtype. */
  a = base_args(s); t = s->k; t.dtype = FCL_F16; a.k = &t;
  expect(s, "forward: k f16, others f32", fwd(&a), INVALID, INVALID, W("dtype"));
  a = base_args(s); t = s->w; t.dtype = FCL_BF16; a.w = &t;
  expect(s, "forward: w bf16, others f32", fwd(&a), INVALID, INVALID, W("dtype"));
  a = base_args(s); t = s->o; t.dtype = FCL_BF16; a.o = &t;
  expect(s, "forward: o bf16, others f32", fwd(&a), INVALID, INVALID, W("dtype"));
  a = base_args(s); t = s->dw; t.dtype = FCL_F16; a.dw = &t;
  expect(s, "backward: dw f16, others f32", bwd(&a), INVALID, INVALID, W("dtype"));
  a = base_args(s); t = s->dout; t.dtype = FCL_BF16; a.dout = &t;
  expect(s, "backward: dout bf16, others f32", bwd(&a), INVALID, INVALID, W("dtype"));
  {
    fcl_tensor x[10] = {s->r, s->k, s->v, s->w, s->o, s->dout, s->dr, s->dk, s->dv, s->dw};
    for (int i = 0; i < 10; ++i) x[i].dtype = (fcl_dtype)7;
    bargs b = base_args(s);
    b.r = &x[0]; b.k = &x[1]; b.v = &x[2]; b.w = &x[3]; b.o = &x[4]; b.dout = &x[5];
    b.dr = &x[6]; b.dk = &x[7]; b.dv = &x[8]; b.dw = &x[9];
    expect(s, "forward: dtype 7 everywhere", fwd(&b), INVALID, INVALID, W("dtype", "7"));
    expect(s, "backward: dtype 7 everywhere", bwd(&b), INVALID, INVALID, W("dtype", "7"));
  }

  /* strides[3] != 1. */
  a = base_args(s); t = s->r; t.strides[3] = 2; a.r = &t;
  expect(s, "forward: r strides[3] = 2", fwd(&a), INVALID, INVALID, W("r", "strides[3]|strides"));
  a = base_args(s); t = s->o; t.strides[3] = 0; a.o = &t;
  expect(s, "forward: o strides[3] = 0", fwd(&a), INVALID, INVALID, W("o", "strides[3]|strides"));
  a = base_args(s); t = s->dk; t.strides[3] = 3; a.dk = &t;
  expect(s, "backward: dk strides[3] = 3", bwd(&a), INVALID, INVALID, W("dk", "strides[3]|strides"));
  a = base_args(s); t = s->dout; t.strides[3] = -1; a.dout = &t;
  expect(s, "backward: dout strides[3] = -1", bwd(&a), INVALID, INVALID,
         W("dout|do", "strides[3]|strides"));

  /* Offset not a multiple of the element size. */
  a = base_args(s); t = s->v; t.offset = 2; a.v = &t;
  expect(s, "forward: v offset 2 (f32)", fwd(&a), INVALID, INVALID, W("v", "offset"));

  /* Views one element past the end of their buffer (buffers are exact). */
  {
    static const char *const nm[5] = {"r", "k", "v", "w", "o"};
    const fcl_tensor *base[5] = {&s->r, &s->k, &s->v, &s->w, &s->o};
    const int64_t dims[5] = {BK, BK, BV, BK, BV};
    for (int i = 0; i < 5; ++i) {
      fcl_tensor x = *base[i];
      x.offset = offset_past_end(base[i], BB, BT, BH, dims[i], (size_t)(BB * BT * BH) * dims[i] * 4);
      a = base_args(s);
      const fcl_tensor **slot[5] = {&a.r, &a.k, &a.v, &a.w, &a.o};
      *slot[i] = &x;
      snprintf(label, sizeof label, "forward: %s extent past the end (offset %zu)", nm[i], x.offset);
      expect(s, label, fwd(&a), INVALID, INVALID, W(nm[i]));
    }
    static const char *const bn[5] = {"dout|do", "dr", "dk", "dv", "dw"};
    const fcl_tensor *bbase[5] = {&s->dout, &s->dr, &s->dk, &s->dv, &s->dw};
    const int64_t bdims[5] = {BV, BK, BK, BV, BK};
    for (int i = 0; i < 5; ++i) {
      fcl_tensor x = *bbase[i];
      a = base_args(s);
      const fcl_tensor **slot[5] = {&a.dout, &a.dr, &a.dk, &a.dv, &a.dw};
      *slot[i] = &x;
      if (i % 2 == 0) {
        x.offset = offset_past_end(bbase[i], BB, BT, BH, bdims[i],
                                   (size_t)(BB * BT * BH) * bdims[i] * 4);
        snprintf(label, sizeof label, "backward: %s extent past the end (offset %zu)",
                 i ? bn[i] : "dout", x.offset);
      } else { /* through strides[1]: the last step ends one element past */
        x.strides[1] += 1;
        x.strides[0] = BT * x.strides[1] - 1;
        snprintf(label, sizeof label, "backward: %s extent past the end (strides)", bn[i]);
      }
      expect(s, label, bwd(&a), INVALID, INVALID, W(bn[i]));
    }
  }

  /* Plain buffers one element too small. */
  {
    cl_mem su = tu_buffer_from(s->cl, s->queue, s->hr, BNU * 4 - 4); /* any bytes */
    cl_mem ss_in = tu_buffer_from(s->cl, s->queue, s->hr, BNS * 4 - 4);
    cl_mem ss_out = tu_buffer_poison(s->cl, s->queue, BNS * 4 - 4);
    cl_mem su_out = tu_buffer_poison(s->cl, s->queue, BNU * 4 - 4);
    a = base_args(s); a.u = su;
    expect(s, "forward: u one element short", fwd(&a), INVALID, INVALID, W("u"));
    expect(s, "backward: u one element short", bwd(&a), INVALID, INVALID, W("u"));
    a = base_args(s); a.h0 = ss_in;
    expect(s, "forward: h0 one float short", fwd(&a), INVALID, INVALID, W("h0"));
    expect(s, "backward: h0 one float short", bwd(&a), INVALID, INVALID, W("h0"));
    a = base_args(s); a.ht = ss_out;
    expect(s, "forward: ht one float short", fwd(&a), INVALID, INVALID, W("ht"));
    a = base_args(s); a.dht = ss_in;
    expect(s, "backward: dht one float short", bwd(&a), INVALID, INVALID, W("dht"));
    a = base_args(s); a.du = su_out;
    expect(s, "backward: du one element short", bwd(&a), INVALID, INVALID, W("du"));
    a = base_args(s); a.dh0 = ss_out;
    expect(s, "backward: dh0 one float short", bwd(&a), INVALID, INVALID, W("dh0"));
    size_t first = 0;
    if (tu_buffer_poison_left(s->queue, ss_out, 0, BNS * 4 - 4, &first) != 0 ||
        tu_buffer_poison_left(s->queue, su_out, 0, BNU * 4 - 4, &first) != 0) {
      printf("FAIL the short ht/dh0/du buffers were written\n");
      ++bad_failed;
    }
    clReleaseMemObject(su); clReleaseMemObject(ss_in);
    clReleaseMemObject(ss_out); clReleaseMemObject(su_out);
  }

  /* Varlen: cu_seqlens too small, or with bad contents. */
  {
    fcl_rwkv6_desc vd = s->d;
    vd.cu_seqlens = s->bcu;
    vd.seqlen = 4;
    const int32_t two[BB] = {0, 3};
    cl_mem small = tu_buffer_from(s->cl, s->queue, two, sizeof two);
    d = vd; d.cu_seqlens = small; a = base_args(s); a.d = &d;
    expect(s, "forward: cu_seqlens [batch] not [batch+1]", fwd(&a), INVALID, INVALID,
           W("cu_seqlens"));
    expect(s, "backward: cu_seqlens [batch] not [batch+1]", bwd(&a), INVALID, INVALID,
           W("cu_seqlens"));
    clReleaseMemObject(small);
    static const int32_t bad_cu[4][BB + 1] = {{0, 3, 2}, {0, 1, 6}, {-1, 2, 4}, {0, 4, 11}};
    static const char *const what[4] = {"decreasing", "a sequence longer than seqlen",
                                        "negative first entry",
                                        "more tokens than the views hold"};
    for (int i = 0; i < 4; ++i) {
      cl_mem cu = tu_buffer_from(s->cl, s->queue, bad_cu[i], sizeof bad_cu[i]);
      d = vd; d.cu_seqlens = cu;
      if (i == 3) d.seqlen = 7; /* 11 tokens; views hold BB*BT = 10 rows */
      a = base_args(s); a.d = &d;
      /* Too many tokens: naming cu_seqlens or the first view it overruns. */
      const char *const *words = i == 3 ? W("cu_seqlens|r") : W("cu_seqlens");
      snprintf(label, sizeof label, "forward: cu_seqlens %s", what[i]);
      expect(s, label, fwd(&a), INVALID, INVALID, words);
      snprintf(label, sizeof label, "backward: cu_seqlens %s", what[i]);
      expect(s, label, bwd(&a), INVALID, INVALID, words);
      clReleaseMemObject(cu);
    }
  }

  /* The context still works. */
  valid_calls(s, "valid calls after all the bad ones", &s->d, NULL);
  bsetup_free(s);
  printf("bad inputs: %d cases, %d failed, %.1f s\n", bad_cases, bad_failed, tu_now() - t0);
  *cases = bad_cases;
  *failed = bad_failed;
  return bad_failed == 0;
}
