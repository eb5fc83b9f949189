/* Descriptors that grow (flashcl.h's rule, size first) on $FCL_DEVICE:
 * for the attention forward, the KV cache and the RWKV6 forward, a
 * descriptor laid out as the 0.2.0 header did (tests/abi/descs_0_2_0.h,
 * frozen), and one of a newer caller (longer, its unknown tail zero),
 * give the same bits as today's; a newer caller's non-zero tail, a size
 * of 0 (not started from the *_INIT macro) and a size below the oldest
 * are refused with FCL_ERROR_INVALID_ARGUMENT and a message naming
 * d->size, with nothing written. Built against the shared library and the
 * public header only, as a caller is. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/descs_0_2_0.h"
#include "flashcl.h"
#include "test_util.h"

/* Every 0.2.0 field where 0.2.0 put it, of the same size: a field moved,
 * retyped or removed fails the build here (CI's abidiff leaves the
 * descriptors to this check, since they may grow at the end). */
#define SAME(T, F, f)                                                              \
  _Static_assert(offsetof(fcl_##T##_desc, f) == offsetof(abi020_##T##_desc, f) &&   \
                     sizeof(((fcl_##T##_desc *)0)->f) == sizeof(((abi020_##T##_desc *)0)->f), \
                 "fcl_" #T "_desc." #f " moved or changed since 0.2.0");
#define ATTENTION_FIELDS(X)                                                        \
  X(attention, A, size) X(attention, A, batch) X(attention, A, seqlen_q)            \
  X(attention, A, seqlen_k) X(attention, A, heads_q) X(attention, A, heads_kv)      \
  X(attention, A, head_dim) X(attention, A, head_dim_v) X(attention, A, softmax_scale) \
  X(attention, A, causal) X(attention, A, window_left) X(attention, A, window_right) \
  X(attention, A, softcap) X(attention, A, alibi_slopes) X(attention, A, cu_seqlens_q) \
  X(attention, A, cu_seqlens_k) X(attention, A, diag_shift)                         \
  X(attention, A, cu_seqlens_q_host) X(attention, A, cu_seqlens_k_host)
#define KVCACHE_FIELDS(X)                                                          \
  X(kvcache, K, size) X(kvcache, K, batch) X(kvcache, K, seqlen_q) X(kvcache, K, heads_q) \
  X(kvcache, K, heads_kv) X(kvcache, K, head_dim) X(kvcache, K, head_dim_v)          \
  X(kvcache, K, cache_capacity) X(kvcache, K, page_size) X(kvcache, K, num_pages)    \
  X(kvcache, K, cache_batch) X(kvcache, K, softmax_scale) X(kvcache, K, causal)      \
  X(kvcache, K, window_left) X(kvcache, K, window_right) X(kvcache, K, softcap)      \
  X(kvcache, K, alibi_slopes) X(kvcache, K, cache_seqlens) X(kvcache, K, cache_batch_idx) \
  X(kvcache, K, block_table) X(kvcache, K, cu_seqlens_q) X(kvcache, K, rotary_cos)   \
  X(kvcache, K, rotary_sin) X(kvcache, K, rotary_dim) X(kvcache, K, rotary_positions) \
  X(kvcache, K, rotary_interleaved) X(kvcache, K, num_splits)
#define RWKV6_FIELDS(X)                                                            \
  X(rwkv6, R, size) X(rwkv6, R, batch) X(rwkv6, R, seqlen) X(rwkv6, R, heads)        \
  X(rwkv6, R, head_dim_k) X(rwkv6, R, head_dim_v) X(rwkv6, R, scale)                \
  X(rwkv6, R, reverse) X(rwkv6, R, cu_seqlens) X(rwkv6, R, algorithm)              \
  X(rwkv6, R, cu_seqlens_host)
ATTENTION_FIELDS(SAME)
KVCACHE_FIELDS(SAME)
RWKV6_FIELDS(SAME)

static int failures;
#define CHECK(cond, ...)                                                           \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                  \
      printf(__VA_ARGS__);                                                         \
      printf("\n");                                                                \
      failures++;                                                                  \
    }                                                                              \
  } while (0)

enum { OUT_BYTES = 256 }; /* every output here is smaller */
#define EXTRA 32          /* a newer caller's fields this library does not know */

/* One operation: run(ctx, desc, out) with desc as the caller passes it. */
typedef fcl_status (*op_run)(fcl_context *ctx, const void *desc, cl_mem out);

typedef struct {
  cl_mem q, k, v, o, seqlens, u, state;
} bufs;
static bufs B;

static fcl_status attention_run(fcl_context *ctx, const void *d, cl_mem out) {
  const fcl_tensor q = tu_dense_view(B.q, FCL_F32, 4, 2, 8), k = tu_dense_view(B.k, FCL_F32, 8, 2, 8);
  const fcl_tensor v = tu_dense_view(B.v, FCL_F32, 8, 2, 8), o = tu_dense_view(out, FCL_F32, 4, 2, 8);
  return fcl_attention_forward(ctx, d, &q, &k, &v, &o, NULL);
}
static fcl_status kvcache_run(fcl_context *ctx, const void *d, cl_mem out) {
  const fcl_tensor q = tu_dense_view(B.q, FCL_F32, 1, 2, 8), k = tu_dense_view(B.k, FCL_F32, 8, 1, 8);
  const fcl_tensor v = tu_dense_view(B.v, FCL_F32, 8, 1, 8), o = tu_dense_view(out, FCL_F32, 1, 2, 8);
  return fcl_attention_kvcache(ctx, d, &q, &k, &v, NULL, NULL, &o, NULL);
}
static fcl_status rwkv6_run(fcl_context *ctx, const void *d, cl_mem out) {
  const fcl_tensor r = tu_dense_view(B.q, FCL_F32, 3, 1, 4), k = tu_dense_view(B.k, FCL_F32, 3, 1, 4);
  const fcl_tensor v = tu_dense_view(B.v, FCL_F32, 3, 1, 4), w = tu_dense_view(B.k, FCL_F32, 3, 1, 4);
  const fcl_tensor o = tu_dense_view(out, FCL_F32, 3, 1, 4);
  return fcl_rwkv6_forward(ctx, d, &r, &k, &v, &w, B.u, B.state, &o, NULL);
}

static int read_out(cl_command_queue q, cl_mem m, unsigned char *dst) {
  return tu_buffer_read(q, m, dst, OUT_BYTES);
}

/* The cases of one operation; today's descriptor `now` (size known), the
 * frozen one `old`. */
static void op_cases(fcl_context *ctx, const char *name, op_run run, const void *now,
                     size_t now_size, const void *old, size_t oldest) {
  cl_context cc = fcl_context_cl(ctx);
  cl_command_queue q = fcl_context_queue(ctx);
  unsigned char want[OUT_BYTES], got[OUT_BYTES], poison[OUT_BYTES];
  cl_mem out = tu_buffer_poison(cc, q, OUT_BYTES);
  fcl_status st = run(ctx, now, out);
  CHECK(st == FCL_OK && read_out(q, out, want) == 0, "%s: today's descriptor: %s", name,
        fcl_context_last_error(ctx));
  /* The 0.2.0 layout. */
  tu_buffer_repoison(q, out, OUT_BYTES);
  st = run(ctx, old, out);
  CHECK(st == FCL_OK && read_out(q, out, got) == 0 && !memcmp(got, want, OUT_BYTES),
        "%s: the 0.2.0 layout: %s", name, st ? fcl_context_last_error(ctx) : "other bits");
  /* A newer caller: EXTRA more bytes, zero. */
  unsigned char *newer = calloc(1, now_size + EXTRA);
  memcpy(newer, now, now_size);
  const size_t longer = now_size + EXTRA;
  memcpy(newer, &longer, sizeof longer);
  tu_buffer_repoison(q, out, OUT_BYTES);
  st = run(ctx, newer, out);
  CHECK(st == FCL_OK && read_out(q, out, got) == 0 && !memcmp(got, want, OUT_BYTES),
        "%s: a newer caller, unknown fields zero: %s", name,
        st ? fcl_context_last_error(ctx) : "other bits");
  /* Refused: nothing written. */
  tu_buffer_repoison(q, out, OUT_BYTES);
  read_out(q, out, poison);
  struct { const char *what, *word; size_t size; int tail; } bad[] = {
      {"a newer caller's field set", "not zero", longer, 1},
      {"size 0", "_INIT", 0, 0},
      {"size below the oldest", "less than", oldest - 8, 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    memset(newer + now_size, 0, EXTRA);
    memcpy(newer, now, now_size);
    memcpy(newer, &bad[i].size, sizeof bad[i].size);
    if (bad[i].tail) newer[now_size + 5] = 1;
    st = run(ctx, newer, out);
    const char *msg = fcl_context_last_error(ctx);
    CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(msg, "d->size") &&
              strstr(msg, bad[i].word),
          "%s, %s: status %d, message '%s'", name, bad[i].what, (int)st, msg);
    CHECK(read_out(q, out, got) == 0 && !memcmp(got, poison, OUT_BYTES),
          "%s, %s: the output was written", name, bad[i].what);
  }
  free(newer);
  clReleaseMemObject(out);
  printf("%s: 0.2.0 layout, newer caller, 3 refusals: %s\n", name, failures ? "FAIL" : "ok");
}

int main(void) {
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  cl_context cc = fcl_context_cl(ctx);
  cl_command_queue queue = fcl_context_queue(ctx);
  float x[256];
  for (int i = 0; i < 256; ++i) x[i] = (float)((i * 37 % 23) - 11) / 16.0f;
  const int32_t seqlens[1] = {6};
  B.q = tu_buffer_from(cc, queue, x, sizeof x);
  B.k = tu_buffer_from(cc, queue, x + 3, sizeof x - 12);
  B.v = tu_buffer_from(cc, queue, x + 7, sizeof x - 28);
  B.seqlens = tu_buffer_from(cc, queue, seqlens, sizeof seqlens);
  B.u = tu_buffer_from(cc, queue, x + 1, 4 * sizeof(float));
  B.state = tu_buffer_from(cc, queue, x + 2, 16 * sizeof(float));

  fcl_attention_desc a = FCL_ATTENTION_DESC_INIT;
  abi020_attention_desc a0 = ABI020_ATTENTION_DESC_INIT;
  a.batch = a0.batch = 1, a.seqlen_q = a0.seqlen_q = 4, a.seqlen_k = a0.seqlen_k = 8;
  a.heads_q = a0.heads_q = a.heads_kv = a0.heads_kv = 2;
  a.head_dim = a0.head_dim = a.head_dim_v = a0.head_dim_v = 8;
  a.causal = a0.causal = 1;
  op_cases(ctx, "attention forward", attention_run, &a, sizeof a, &a0,
           offsetof(fcl_attention_desc, cu_seqlens_k_host) + sizeof(void *));

  fcl_kvcache_desc c = FCL_KVCACHE_DESC_INIT;
  abi020_kvcache_desc c0 = ABI020_KVCACHE_DESC_INIT;
  c.batch = c0.batch = 1, c.seqlen_q = c0.seqlen_q = 1, c.heads_q = c0.heads_q = 2;
  c.heads_kv = c0.heads_kv = 1, c.head_dim = c0.head_dim = c.head_dim_v = c0.head_dim_v = 8;
  c.cache_capacity = c0.cache_capacity = 8, c.causal = c0.causal = 1;
  c.cache_seqlens = c0.cache_seqlens = B.seqlens;
  op_cases(ctx, "kvcache", kvcache_run, &c, sizeof c, &c0,
           offsetof(fcl_kvcache_desc, num_splits) + sizeof(int));

  fcl_rwkv6_desc r = FCL_RWKV6_DESC_INIT;
  abi020_rwkv6_desc r0 = ABI020_RWKV6_DESC_INIT;
  r.batch = r0.batch = 1, r.seqlen = r0.seqlen = 3, r.heads = r0.heads = 1;
  r.head_dim_k = r0.head_dim_k = r.head_dim_v = r0.head_dim_v = 4;
  op_cases(ctx, "rwkv6 forward", rwkv6_run, &r, sizeof r, &r0,
           offsetof(fcl_rwkv6_desc, cu_seqlens_host) + sizeof(void *));

  /* The plan and config forms read the descriptor the same way. */
  fcl_attention_desc z = a;
  z.size = 0;
  fcl_config_info info;
  CHECK(fcl_attention_config(ctx, &z, FCL_F32, 0, &info) == FCL_ERROR_INVALID_ARGUMENT &&
            strstr(fcl_context_last_error(ctx), "FCL_ATTENTION_DESC_INIT"),
        "fcl_attention_config with size 0: '%s'", fcl_context_last_error(ctx));
  fcl_plan *plan = NULL;
  fcl_kvcache_desc cz = c;
  cz.size = 0;
  const fcl_tensor tq = tu_dense_view(B.q, FCL_F32, 1, 2, 8), tk = tu_dense_view(B.k, FCL_F32, 8, 1, 8);
  CHECK(fcl_attention_kvcache_plan(ctx, &cz, &tq, &tk, &tk, NULL, NULL, &tq, NULL, &plan) ==
                FCL_ERROR_INVALID_ARGUMENT && !plan,
        "fcl_attention_kvcache_plan with size 0: '%s'", fcl_context_last_error(ctx));

  cl_mem m[] = {B.q, B.k, B.v, B.seqlens, B.u, B.state};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; ++i) clReleaseMemObject(m[i]);
  fcl_context_destroy(ctx);
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
