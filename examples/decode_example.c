/* Inference with flashcl: a paged key/value cache, a prompt prefilled in one
 * call, then tokens generated one at a time. Each call appends the new
 * tokens' k and v to the cache and attends to everything cached so far;
 * the application keeps the sequence lengths (cache_seqlens) itself.
 *
 * In a model, q, k and v come from each layer's projections of the tokens;
 * here they are made-up values, and one layer stands for all of them. At the
 * end, the last step's output is checked against a plain computation on the
 * host (in double).
 *
 *   decode_example [DEVICE]     (DEVICE: e.g. "pocl", "nvidia", "0:0")
 */
#include <flashcl.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum {
  B = 2,      /* sequences decoded together                  */
  HQ = 8,     /* query heads                                 */
  HKV = 2,    /* key/value heads (GQA: 4 query heads a group) */
  D = 64,     /* head dim                                     */
  PAGE = 16,  /* tokens a page of the cache                   */
  P = 100,    /* prompt tokens                                */
  T = 20,     /* tokens generated                             */
  CAP = (P + T + PAGE - 1) / PAGE * PAGE, /* tokens a sequence's cache can hold */
  PAGES = CAP / PAGE                      /* pages a sequence                    */
};

/* A made-up value in [-1, 1) for element x of head h of token pos of
 * sequence b, of q (what 0), k (1) or v (2). */
static float value(uint32_t what, uint32_t b, uint32_t pos, uint32_t h, uint32_t x) {
  uint32_t s = what * 0x9E3779B9u ^ b * 0x85EBCA6Bu ^ pos * 0xC2B2AE35u ^ h * 0x27D4EB2Fu ^ x;
  s ^= s >> 16, s *= 0x7FEB352Du, s ^= s >> 15, s *= 0x846CA68Bu, s ^= s >> 16;
  return (float)(s >> 8) / (float)(1u << 23) - 1.0f;
}

static int fail(const fcl_context *ctx, const char *what, fcl_status s) {
  fprintf(stderr, "%s: %s: %s\n", what, fcl_status_string(s), fcl_context_last_error(ctx));
  return 1;
}

static cl_mem buffer(fcl_context *ctx, size_t bytes) {
  cl_int err;
  cl_mem m = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) fprintf(stderr, "clCreateBuffer: %d\n", err);
  return err == CL_SUCCESS ? m : NULL;
}

/* Host copies of every k and v written to the cache, [b][pos][kv head][dim],
 * only for the check at the end. */
static float keys[B][P + T][HKV][D], vals[B][P + T][HKV][D];

int main(int argc, char **argv) {
  fcl_context *ctx = NULL;
  fcl_status s = fcl_context_create(argc > 1 ? argv[1] : NULL, &ctx);
  if (s != FCL_OK) return fail(NULL, "fcl_context_create", s);
  printf("device: %s\n", fcl_context_device_name(ctx));
  cl_command_queue queue = fcl_context_queue(ctx);

  /* The cache: B * PAGES pages of PAGE tokens, [page, token, kv head, dim]. */
  const size_t page_bytes = (size_t)PAGE * HKV * D * sizeof(float);
  cl_mem k_cache = buffer(ctx, B * PAGES * page_bytes), v_cache = buffer(ctx, B * PAGES * page_bytes);
  /* Which pages each sequence owns, in order; an application takes them
   * from its free list. Here sequence b gets pages b, b + B, b + 2B, ... */
  int32_t table[B][PAGES], seqlens[B] = {0}; /* seqlens: the host's mirror */
  for (int b = 0; b < B; b++)
    for (int p = 0; p < PAGES; p++) table[b][p] = p * B + b;
  cl_mem block_table = buffer(ctx, sizeof table), cache_seqlens = buffer(ctx, sizeof seqlens);
  /* New tokens of one call, [batch, token, head, dim]: up to P of them. */
  const size_t q_bytes = (size_t)B * P * HQ * D * sizeof(float);
  const size_t kv_bytes = (size_t)B * P * HKV * D * sizeof(float);
  cl_mem q_buf = buffer(ctx, q_bytes), o_buf = buffer(ctx, q_bytes);
  cl_mem k_buf = buffer(ctx, kv_bytes), v_buf = buffer(ctx, kv_bytes);
  float *q = malloc(q_bytes), *k = malloc(kv_bytes), *v = malloc(kv_bytes);
  if (!k_cache || !v_cache || !block_table || !cache_seqlens || !q_buf || !o_buf || !k_buf ||
      !v_buf || !q || !k || !v)
    return 1;
  if (clEnqueueWriteBuffer(queue, block_table, CL_TRUE, 0, sizeof table, table, 0, NULL, NULL))
    return 1;

  fcl_kvcache_desc d = FCL_KVCACHE_DESC_INIT; /* scale 1/sqrt(D), no window, no rotary */
  d.batch = B, d.heads_q = HQ, d.heads_kv = HKV, d.head_dim = d.head_dim_v = D;
  d.cache_capacity = CAP, d.page_size = PAGE, d.num_pages = B * PAGES;
  d.causal = 1; /* the prompt's tokens see only the tokens before them */
  d.cache_seqlens = cache_seqlens, d.block_table = block_table;
  fcl_tensor k_cache_t = {k_cache, 0, FCL_F32, {PAGE * HKV * D, HKV * D, D, 1}};
  fcl_tensor v_cache_t = {v_cache, 0, FCL_F32, {PAGE * HKV * D, HKV * D, D, 1}};

  /* The prefill (n = P tokens), then T steps of one token each. */
  for (int step = 0, n = P; step <= T; step++, n = 1) {
    for (int b = 0; b < B; b++)
      for (int i = 0; i < n; i++) {
        const int pos = seqlens[b] + i;
        for (int h = 0; h < HQ; h++)
          for (int x = 0; x < D; x++) q[((b * n + i) * HQ + h) * D + x] = value(0, b, pos, h, x);
        for (int h = 0; h < HKV; h++)
          for (int x = 0; x < D; x++) {
            k[((b * n + i) * HKV + h) * D + x] = keys[b][pos][h][x] = value(1, b, pos, h, x);
            v[((b * n + i) * HKV + h) * D + x] = vals[b][pos][h][x] = value(2, b, pos, h, x);
          }
      }
    const size_t nq = (size_t)B * n * HQ * D * sizeof(float);
    const size_t nkv = (size_t)B * n * HKV * D * sizeof(float);
    if (clEnqueueWriteBuffer(queue, q_buf, CL_FALSE, 0, nq, q, 0, NULL, NULL) ||
        clEnqueueWriteBuffer(queue, k_buf, CL_FALSE, 0, nkv, k, 0, NULL, NULL) ||
        clEnqueueWriteBuffer(queue, v_buf, CL_FALSE, 0, nkv, v, 0, NULL, NULL) ||
        clEnqueueWriteBuffer(queue, cache_seqlens, CL_FALSE, 0, sizeof seqlens, seqlens, 0, NULL,
                             NULL))
      return 1;

    d.seqlen_q = n;
    fcl_tensor q_t = {q_buf, 0, FCL_F32, {n * HQ * D, HQ * D, D, 1}};
    fcl_tensor o_t = {o_buf, 0, FCL_F32, {n * HQ * D, HQ * D, D, 1}};
    fcl_tensor k_t = {k_buf, 0, FCL_F32, {n * HKV * D, HKV * D, D, 1}};
    fcl_tensor v_t = {v_buf, 0, FCL_F32, {n * HKV * D, HKV * D, D, 1}};
    s = fcl_attention_kvcache(ctx, &d, &q_t, &k_cache_t, &v_cache_t, &k_t, &v_t, &o_t, NULL);
    if (s != FCL_OK) return fail(ctx, "fcl_attention_kvcache", s);
    /* The host arrays were handed to non-blocking writes: wait before the
     * next step refills them (a model would run its other layers here). */
    if (clFinish(queue)) return 1;
    for (int b = 0; b < B; b++) seqlens[b] += n; /* the call never changes cache_seqlens */
  }

  /* The last step's output, [batch, 1, head, dim], against the host. */
  float *o = malloc((size_t)B * HQ * D * sizeof(float));
  if (!o || clEnqueueReadBuffer(queue, o_buf, CL_TRUE, 0, (size_t)B * HQ * D * sizeof(float), o,
                                0, NULL, NULL))
    return 1;
  double max_err = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < HQ; h++) {
      const int kvh = h / (HQ / HKV), last = P + T - 1;
      double score[P + T], m = -INFINITY, sum = 0, out[D] = {0};
      for (int j = 0; j <= last; j++) { /* the last token sees every key */
        double dot = 0;
        for (int x = 0; x < D; x++) dot += (double)value(0, b, last, h, x) * keys[b][j][kvh][x];
        score[j] = dot / sqrt((double)D);
        m = fmax(m, score[j]);
      }
      for (int j = 0; j <= last; j++) {
        const double p = exp(score[j] - m);
        sum += p;
        for (int x = 0; x < D; x++) out[x] += p * vals[b][j][kvh][x];
      }
      for (int x = 0; x < D; x++)
        max_err = fmax(max_err, fabs(o[(b * HQ + h) * D + x] - out[x] / sum));
    }
  const int ok = max_err < 1e-4;
  printf("%d sequences: a %d-token prompt, then %d tokens generated; %d tokens cached each\n",
         B, P, T, seqlens[0]);
  printf("%s: last step's output against the host, max error %.2e\n", ok ? "OK" : "FAIL",
         max_err);

  cl_mem bufs[] = {k_cache, v_cache, block_table, cache_seqlens, q_buf, o_buf, k_buf, v_buf};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) clReleaseMemObject(bufs[i]);
  fcl_context_destroy(ctx);
  free(q), free(k), free(v), free(o);
  return ok ? 0 : 1;
}
