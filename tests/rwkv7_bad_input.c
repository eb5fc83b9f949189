/* Bad inputs of fcl_rwkv7_forward and fcl_rwkv7_backward (test_rwkv7.c):
 * each must return FCL_ERROR_INVALID_ARGUMENT (UNSUPPORTED where
 * documented), name the argument (and its value) in
 * fcl_context_last_error() and leave every output buffer untouched (all
 * start as poison and are checked after each call). */
#include "op_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rwkv7_bad_inputs(fcl_context *ctx, int *cases, int *failed);

enum { B = 2, T = 5, H = 2, K = 4, V = 3 };
#define NK ((size_t)B * T * H * K)
#define NV ((size_t)B * T * H * V)
#define NS ((size_t)B * H * K * V)

/* Inputs r w k v a b dout h0 dht, outputs o ht dr dw dk dv da db dh0. */
enum { IN_DOUT = 6, IN_H0 = 7, IN_DHT = 8, NIN = 9, NOUT = 9 };
typedef struct {
  fcl_context     *ctx;
  cl_command_queue queue;
  cl_mem           in[NIN], out[NOUT];
  fcl_tensor       t[7], o[7]; /* t: r w k v a b dout; o: o dr dw dk dv da db */
  fcl_rwkv7_desc   d;
  int              cases, failed;
} setup;

static size_t out_bytes(int i) {
  static const size_t n[NOUT] = {NV, NS, NK, NK, NK, NV, NK, NK, NS};
  return n[i] * 4;
}

static fcl_tensor view(cl_mem m, int64_t dim) {
  return (fcl_tensor){m, 0, FCL_F32, {T * H * dim, H * dim, dim, 1}};
}

static int setup_init(setup *s, fcl_context *ctx) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->queue = fcl_context_queue(ctx);
  tu_rng g;
  tu_rng_seed(&g, 777);
  for (int i = 0; i < NIN; ++i) {
    const size_t n = i == 3 || i == IN_DOUT ? NV : i >= IN_H0 ? NS : NK;
    float *h = malloc(n * 4);
    if (!h) abort();
    for (size_t j = 0; j < n; ++j) h[j] = (float)(i == 1 ? -tu_rng_uniform(&g) : tu_rng_range(&g, -1, 1));
    s->in[i] = tu_buffer_from(fcl_context_cl(ctx), s->queue, h, n * 4);
    free(h);
    if (!s->in[i]) return 1;
    if (i < 7) s->t[i] = view(s->in[i], i == 3 || i == IN_DOUT ? V : K);
  }
  for (int i = 0; i < NOUT; ++i) {
    unsigned char *h = malloc(out_bytes(i));
    if (!h) abort();
    memset(h, TU_POISON_BYTE, out_bytes(i));
    s->out[i] = tu_buffer_from(fcl_context_cl(ctx), s->queue, h, out_bytes(i));
    free(h);
    if (!s->out[i]) return 1;
  }
  static const int vdim[7] = {1, 0, 0, 0, 1, 0, 0}; /* o dr dw dk dv da db */
  const int slot[7] = {0, 2, 3, 4, 5, 6, 7};
  for (int i = 0; i < 7; ++i) s->o[i] = view(s->out[slot[i]], vdim[i] ? V : K);
  s->d = (fcl_rwkv7_desc)FCL_RWKV7_DESC_INIT;
  s->d.batch = B, s->d.seqlen = T, s->d.heads = H, s->d.head_dim_k = K, s->d.head_dim_v = V;
  return 0;
}

static void setup_free(setup *s) {
  for (int i = 0; i < NIN; ++i) if (s->in[i]) clReleaseMemObject(s->in[i]);
  for (int i = 0; i < NOUT; ++i) if (s->out[i]) clReleaseMemObject(s->out[i]);
}

/* A call with one thing changed: its status, and words its message must hold. */
static void expect(setup *s, const char *label, fcl_status got, fcl_status want,
                   const char *const *words) {
  static const char *const names[NOUT] = {"o", "ht", "dr", "dw", "dk", "dv", "da", "db", "dh0"};
  char why[512] = "";
  int ok = 1;
  ++s->cases;
  if (got != want) {
    ok = 0;
    oh_append(why, sizeof why, " status %s, want %s;", fcl_status_string(got),
              fcl_status_string(want));
  }
  const char *msg = fcl_context_last_error(s->ctx);
  char missing[256];
  if (!msg || !tu_has_words(msg, words, missing, sizeof missing)) {
    ok = 0;
    oh_append(why, sizeof why, " message lacks %s;", msg ? missing : "(NULL)");
  }
  clFinish(s->queue);
  for (int i = 0; i < NOUT; ++i) {
    size_t first = 0;
    const long bad = tu_buffer_poison_left(s->queue, s->out[i], 0, out_bytes(i), &first);
    if (bad) {
      ok = 0;
      oh_append(why, sizeof why, " wrote %ld bytes of %s;", bad, names[i]);
      tu_buffer_repoison(s->queue, s->out[i], out_bytes(i));
    }
  }
  printf("%s %-44s |%s message: \"%s\"\n", ok ? "PASS" : "FAIL", label, why, msg ? msg : "");
  s->failed += !ok;
}

static fcl_status fwd(setup *s, const fcl_rwkv7_desc *d, const fcl_tensor *t) {
  return fcl_rwkv7_forward(s->ctx, d, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], s->in[IN_H0],
                           &s->o[0], s->out[1]);
}
static fcl_status bwd(setup *s, const fcl_rwkv7_desc *d, const fcl_tensor *t, const fcl_tensor *o,
                      cl_mem dht, cl_mem dh0) {
  return fcl_rwkv7_backward(s->ctx, d, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], s->in[IN_H0],
                            &t[6], dht, &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], dh0);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

int rwkv7_bad_inputs(fcl_context *ctx, int *cases, int *failed) {
  setup s;
  if (setup_init(&s, ctx)) {
    printf("FAIL bad inputs: could not create buffers\n");
    setup_free(&s);
    ++*failed;
    return 1;
  }
  /* Descriptor fields, forward and backward alike. */
  struct { const char *label, *word, *value; int field; int64_t v; } dcases[] = {
      {"batch 0", "batch", "0", 0, 0},         {"seqlen -1", "seqlen", "-1", 1, -1},
      {"heads 0", "heads", "0", 2, 0},         {"head_dim_k 257", "head_dim_k", "257", 3, 257},
      {"head_dim_v 0", "head_dim_v", "0", 4, 0}, {"reserved0 3", "reserved0", "3", 5, 3}};
  for (size_t i = 0; i < sizeof dcases / sizeof dcases[0]; ++i) {
    fcl_rwkv7_desc d = s.d;
    int64_t *f[5] = {&d.batch, &d.seqlen, &d.heads, &d.head_dim_k, &d.head_dim_v};
    if (dcases[i].field < 5) *f[dcases[i].field] = dcases[i].v;
    else d.reserved0 = (uint32_t)dcases[i].v;
    char label[96];
    snprintf(label, sizeof label, "forward %s", dcases[i].label);
    expect(&s, label, fwd(&s, &d, s.t), FCL_ERROR_INVALID_ARGUMENT, W(dcases[i].word, dcases[i].value));
    snprintf(label, sizeof label, "backward %s", dcases[i].label);
    expect(&s, label, bwd(&s, &d, s.t, s.o, s.in[IN_DHT], s.out[8]), FCL_ERROR_INVALID_ARGUMENT,
           W(dcases[i].word, dcases[i].value));
  }
  fcl_rwkv7_desc d = s.d;
  d.scale = 1.0f / 0.0f;
  expect(&s, "scale inf", fwd(&s, &d, s.t), FCL_ERROR_INVALID_ARGUMENT, W("scale", "inf"));
  d = s.d, d.decay_lower_bound = 0.5f;
  expect(&s, "decay_lower_bound 0.5", fwd(&s, &d, s.t), FCL_ERROR_INVALID_ARGUMENT,
         W("decay_lower_bound", "0.5"));
  d = s.d, d.size = 0;
  expect(&s, "size 0", fwd(&s, &d, s.t), FCL_ERROR_INVALID_ARGUMENT, W("size", "FCL_RWKV7_DESC_INIT"));
  d = s.d, d.cu_seqlens_host = (const int32_t[]){0, 5, 10};
  expect(&s, "cu_seqlens_host without cu_seqlens", fwd(&s, &d, s.t), FCL_ERROR_INVALID_ARGUMENT,
         W("cu_seqlens_host"));
  d = s.d, d.cu_seqlens = s.in[0], d.cu_seqlens_host = (const int32_t[]){0, 7, 6};
  expect(&s, "cu_seqlens_host decreasing", fwd(&s, &d, s.t), FCL_ERROR_INVALID_ARGUMENT,
         W("cu_seqlens_host"));
  expect(&s, "forward desc NULL", fcl_rwkv7_forward(ctx, NULL, &s.t[0], &s.t[1], &s.t[2], &s.t[3],
                                                    &s.t[4], &s.t[5], NULL, &s.o[0], NULL),
         FCL_ERROR_INVALID_ARGUMENT, W("desc", "NULL"));

  /* Each tensor in turn: NULL, another dtype, a shape too large for its buffer. */
  static const char *const tn[7] = {"r", "w", "k", "v", "a", "b", "dout"};
  for (int i = 0; i < 7; ++i) {
    fcl_tensor t[7];
    memcpy(t, s.t, sizeof t);
    char label[96];
    t[i].strides[1] *= 3; /* past the end of its buffer */
    snprintf(label, sizeof label, "%s strides past its buffer", tn[i]);
    fcl_status st = i == IN_DOUT ? bwd(&s, &s.d, t, s.o, NULL, NULL) : fwd(&s, &s.d, t);
    expect(&s, label, st, FCL_ERROR_INVALID_ARGUMENT, W(tn[i]));
    memcpy(t, s.t, sizeof t);
    t[i].dtype = FCL_F16;
    snprintf(label, sizeof label, "%s f16 among f32", tn[i]);
    st = i == IN_DOUT ? bwd(&s, &s.d, t, s.o, NULL, NULL) : fwd(&s, &s.d, t);
    expect(&s, label, st, FCL_ERROR_INVALID_ARGUMENT, W(i ? tn[i] : "w"));
    memcpy(t, s.t, sizeof t);
    t[i].strides[3] = 2;
    snprintf(label, sizeof label, "%s strides[3] 2", tn[i]);
    st = i == IN_DOUT ? bwd(&s, &s.d, t, s.o, NULL, NULL) : fwd(&s, &s.d, t);
    expect(&s, label, st, FCL_ERROR_INVALID_ARGUMENT, W(tn[i], "strides[3]"));
  }
  /* Outputs: NULL views, views past their buffers, small state buffers. */
  static const char *const on[7] = {"o", "dr", "dw", "dk", "dv", "da", "db"};
  for (int i = 0; i < 7; ++i) {
    fcl_tensor o[7];
    memcpy(o, s.o, sizeof o);
    o[i].offset = 4;
    char label[96];
    snprintf(label, sizeof label, "%s offset past its buffer", on[i]);
    const fcl_status st = i == 0 ? fcl_rwkv7_forward(ctx, &s.d, &s.t[0], &s.t[1], &s.t[2], &s.t[3],
                                                     &s.t[4], &s.t[5], NULL, &o[0], NULL)
                                 : bwd(&s, &s.d, s.t, o, NULL, NULL);
    expect(&s, label, st, FCL_ERROR_INVALID_ARGUMENT, W(on[i]));
  }
  expect(&s, "o NULL", fcl_rwkv7_forward(ctx, &s.d, &s.t[0], &s.t[1], &s.t[2], &s.t[3], &s.t[4],
                                         &s.t[5], NULL, NULL, NULL),
         FCL_ERROR_INVALID_ARGUMENT, W("o", "NULL"));
  expect(&s, "da NULL", fcl_rwkv7_backward(ctx, &s.d, &s.t[0], &s.t[1], &s.t[2], &s.t[3], &s.t[4],
                                           &s.t[5], NULL, &s.t[6], NULL, &s.o[1], &s.o[2], &s.o[3],
                                           &s.o[4], NULL, &s.o[6], NULL),
         FCL_ERROR_INVALID_ARGUMENT, W("da", "NULL"));
  /* State buffers one float short. */
  unsigned char poison[NS * 4];
  memset(poison, TU_POISON_BYTE, sizeof poison);
  cl_mem small = tu_buffer_from(fcl_context_cl(ctx), s.queue, poison, NS * 4 - 4);
  if (!small) abort();
  expect(&s, "h0 one float short",
         fcl_rwkv7_forward(ctx, &s.d, &s.t[0], &s.t[1], &s.t[2], &s.t[3], &s.t[4], &s.t[5], small,
                           &s.o[0], s.out[1]),
         FCL_ERROR_INVALID_ARGUMENT, W("h0"));
  expect(&s, "ht one float short",
         fcl_rwkv7_forward(ctx, &s.d, &s.t[0], &s.t[1], &s.t[2], &s.t[3], &s.t[4], &s.t[5], NULL,
                           &s.o[0], small),
         FCL_ERROR_INVALID_ARGUMENT, W("ht"));
  expect(&s, "dht one float short", bwd(&s, &s.d, s.t, s.o, small, s.out[8]),
         FCL_ERROR_INVALID_ARGUMENT, W("dht"));
  expect(&s, "dh0 one float short", bwd(&s, &s.d, s.t, s.o, s.in[IN_DHT], small),
         FCL_ERROR_INVALID_ARGUMENT, W("dh0"));
  clReleaseMemObject(small);
  setup_free(&s);
  *cases += s.cases;
  *failed += s.failed;
  return s.failed;
}
