/* fa-bench, decode: fcl_attention_kvcache, attention of n new query tokens
 * per sequence against a key/value cache (n = 1: decode; n > 1: chunked
 * prefill), the queries the last n positions of the keys (bottom-right).
 *
 * Inputs are random, uniform with mean 0 and variance 1, from fixed seeds,
 * rounded to the dtype: q [B, n, H, D]; the cache, contiguous [B, cap, Hkv,
 * D] (--page-size 0) or paged [pages, page, Hkv, D] with each sequence's
 * pages in shuffled order through a block table; every sequence holds
 * `--context` C tokens (cache_seqlens). Without --append the keys are the C
 * cached tokens; with it the call first writes k_new, v_new [B, n, Hkv, D]
 * to positions C .. C+n-1 (cache_seqlens is never changed, so every timed
 * call writes the same entries) and the keys are C + n.
 *
 * Check, on one call before the timed ones: 64 sampled rows of o and lse
 * (every head of sequence 0's last query, up to 32, the last head of the
 * last sequence's last query, and rows spread over the rest) against
 * ref_attention_row of the same rounded inputs, read from the cache
 * through the block table, with the tolerances of the fwd op; with
 * --append also the cache entries written for the first and the last
 * sequence, which must equal k_new and v_new bit for bit.
 *
 * Quantized caches (--cache-dtype) hold the same uniform values, quantized
 * by the host reference (tests/ref/ref_quant.h; fp8 with the scale
 * DECODE_FP8_SCALE); the check's keys are the cache's values dequantized,
 * the appended ones quantized from k_new and v_new, whose bytes in the
 * cache must be the reference's.
 *
 * GB/s counts the least traffic: the cache's C tokens read once, q read, o
 * and lse (f32) written, and with --append k_new, v_new read and written to
 * the cache: kb*B*Hkv*(C + n*append)*(D+Dv) + es*(B*Hkv*n*append*(D+Dv) +
 * B*n*H*(D+Dv)) + 4*B*H*n bytes, kb the cache's bytes a value (K's and
 * V's each their own). TFLOP/s counts 2*(D+Dv) FLOPs per visible (query, key) pair and
 * query head.
 *
 * Loop mode (--layers) runs each case as decode_loop.c describes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "decode.h"
#include "model.h"
#include "ref_attention.h"
#include "ref_quant.h"
#include "test_util.h"

#define CHECK_ROWS 64
#define CHECK_HEADS 32 /* heads of sequence 0's last query among the rows */
#define FCL_MAX_HEAD_DIM_BENCH 512 /* flashcl's largest head dim */

static size_t n_q(const dshape *s) { return (size_t)(s->b * s->n * s->h * s->d); }
static size_t n_o(const dshape *s) { return (size_t)(s->b * s->n * s->h * s->dv); }
static size_t n_new(const dshape *s, int64_t dim) { return (size_t)(s->b * s->n * s->hkv * dim); }
size_t decode_cache_elems(const dshape *s, int64_t dim) {
  return (size_t)(s->slots * s->slot_len * s->hkv * dim);
}
static size_t n_lse(const dshape *s) { return (size_t)(s->b * s->h * s->n); }

size_t decode_cache_bytes(const dshape *s, int64_t dim, fcl_dtype f) {
  return decode_cache_elems(s, dim) / (size_t)ref_quant_unit_values(f) * ref_quant_unit_bytes(f);
}

dshape decode_shape(const bench_args *a, int64_t c, int64_t n, fcl_dtype t, int64_t ps,
                    int kf, int vf) {
  dshape s = {a->batch, a->heads, a->heads_kv, n, c, a->head_dim, a->head_dim_v, t,
              kf < 0 ? t : (fcl_dtype)kf, vf < 0 ? t : (fcl_dtype)vf, 1, a->append, ps,
              0, 0, 0, 0, 0, 0};
  s.keys = c + (s.append ? n : 0);
  s.cap = s.keys > 0 ? s.keys : 1;
  if (ps) {
    s.pps = (s.cap + ps - 1) / ps;
    s.cap = s.pps * ps;
    s.slots = s.b * s.pps, s.slot_len = ps;
  } else {
    s.slots = s.b, s.slot_len = s.cap;
  }
  return s;
}

/* Value index of (token pos, kv head kh, dim 0) of sequence b in a cache
 * array whose rows have dim values (its byte offset in format f:
 * cache_byte). */
static size_t cache_at(const dshape *s, const int32_t *bt, int64_t b, int64_t pos, int64_t kh,
                       int64_t dim) {
  const int64_t slot = s->ps ? bt[b * s->pps + pos / s->ps] : b;
  const int64_t tok = s->ps ? pos % s->ps : pos;
  return (size_t)(((slot * s->slot_len + tok) * s->hkv + kh) * dim);
}

static size_t cache_byte(size_t value_index, fcl_dtype f) {
  return value_index / (size_t)ref_quant_unit_values(f) * ref_quant_unit_bytes(f);
}

void *decode_cache_values(const dshape *s, int64_t dim, fcl_dtype f, uint64_t seed) {
  const double a = sqrt(3.0); /* uniform on [-a, a): variance 1 */
  const size_t n = decode_cache_elems(s, dim);
  if (!ref_quant_format(f)) return bench_uniform(f, n, seed, -a, a);
  float *x = bench_uniform(FCL_F32, n, seed, -a, a);
  unsigned char *q = malloc(decode_cache_bytes(s, dim, f) + 1);
  for (size_t i = 0; x && q && i < n; i += (size_t)dim) /* head vector by head vector */
    ref_quantize_vec(f, x + i, dim, DECODE_FP8_SCALE, q + cache_byte(i, f));
  free(x);
  if (!x) free(q), q = NULL;
  return q;
}

void decode_inputs_free(dinputs *in) {
  free(in->q), free(in->kc), free(in->vc), free(in->kn), free(in->vn), free(in->bt);
  cl_mem m[] = {in->bq, in->bkc, in->bvc, in->bkn, in->bvn, in->bo, in->blse, in->bseq, in->bbt,
                in->bscale};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    if (m[i]) clReleaseMemObject(m[i]);
  memset(in, 0, sizeof *in);
}

int decode_inputs_make(fcl_context *ctx, const dshape *s, dinputs *in) {
  const size_t es = tu_dtype_size(s->t);
  const double a = sqrt(3.0); /* uniform on [-a, a): variance 1 */
  memset(in, 0, sizeof *in);
  in->q = bench_uniform(s->t, n_q(s), 1, -a, a);
  in->kc = decode_cache_values(s, s->d, s->kf, 2);
  in->vc = decode_cache_values(s, s->dv, s->vf, 3);
  in->kn = bench_uniform(s->t, n_new(s, s->d), 6, -a, a);
  in->vn = bench_uniform(s->t, n_new(s, s->dv), 7, -a, a);
  int32_t *seqlens = malloc((size_t)s->b * sizeof *seqlens);
  cl_int err = in->q && in->kc && in->vc && in->kn && in->vn && seqlens ? CL_SUCCESS
                                                                      : CL_OUT_OF_HOST_MEMORY;
  for (int64_t b = 0; seqlens && b < s->b; b++) seqlens[b] = (int32_t)s->c;
  if (s->ps && err == CL_SUCCESS) {
    /* Pages in shuffled order: sequence b's page p is block_table[b][p]. */
    if (!(in->bt = malloc((size_t)s->slots * sizeof *in->bt))) err = CL_OUT_OF_HOST_MEMORY;
    tu_rng rng;
    tu_rng_seed(&rng, 8);
    for (int64_t i = 0; in->bt && i < s->slots; i++) in->bt[i] = (int32_t)i;
    for (int64_t i = s->slots - 1; in->bt && i > 0; i--) {
      int64_t j = tu_rng_int(&rng, 0, i);
      int32_t x = in->bt[i];
      in->bt[i] = in->bt[j], in->bt[j] = x;
    }
  }
  const void *host[9] = {in->q, in->kc, in->vc, in->kn, in->vn, NULL, NULL, seqlens, in->bt};
  cl_mem *dev[9] = {&in->bq, &in->bkc, &in->bvc, &in->bkn, &in->bvn, &in->bo, &in->blse,
                    &in->bseq, &in->bbt};
  const size_t bytes[9] = {n_q(s) * es, decode_cache_bytes(s, s->d, s->kf),
                           decode_cache_bytes(s, s->dv, s->vf), n_new(s, s->d) * es,
                           n_new(s, s->dv) * es, n_o(s) * es, n_lse(s) * sizeof(float),
                           (size_t)s->b * sizeof(int32_t), (size_t)s->slots * sizeof(int32_t)};
  for (int i = 0; i < (s->ps ? 9 : 8) && err == CL_SUCCESS; i++)
    *dev[i] = bench_upload(ctx, host[i], bytes[i], &err);
  const float scale = DECODE_FP8_SCALE;
  if (err == CL_SUCCESS && (s->kf == FCL_FP8_E4M3 || s->kf == FCL_FP8_E5M2 ||
                            s->vf == FCL_FP8_E4M3 || s->vf == FCL_FP8_E5M2))
    in->bscale = bench_upload(ctx, &scale, sizeof scale, &err);
  free(seqlens);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "fa-bench: decode: could not allocate or upload the inputs (%.3g GB of "
            "cache; OpenCL error %d)\n", (double)(bytes[1] + bytes[2]) * 1e-9, err);
    decode_inputs_free(in);
    return -1;
  }
  return 0;
}

void decode_call_make(const dshape *s, const dinputs *in, decode_call *c) {
  fcl_kvcache_desc d = FCL_KVCACHE_DESC_INIT;
  d.batch = s->b, d.seqlen_q = s->n, d.heads_q = s->h, d.heads_kv = s->hkv;
  d.head_dim = s->d, d.head_dim_v = s->dv, d.cache_capacity = s->cap, d.page_size = s->ps;
  d.num_pages = s->ps ? s->slots : 0, d.causal = s->causal, d.num_splits = (int)s->splits;
  d.cache_seqlens = in->bseq, d.block_table = s->ps ? in->bbt : NULL;
  /* [batch, token, head, dim]; the cache's slots are rows or pages. */
  const int64_t kvd = s->hkv * s->d, kvdv = s->hkv * s->dv;
  c->d = d;
  c->q = (fcl_tensor){in->bq, 0, s->t, {s->n * s->h * s->d, s->h * s->d, s->d, 1}};
  c->o = (fcl_tensor){in->bo, 0, s->t, {s->n * s->h * s->dv, s->h * s->dv, s->dv, 1}};
  c->kc = (fcl_tensor){in->bkc, 0, s->kf, {s->slot_len * kvd, kvd, s->d, 1}};
  c->vc = (fcl_tensor){in->bvc, 0, s->vf, {s->slot_len * kvdv, kvdv, s->dv, 1}};
  /* fp8: one scale a tensor */
  const int kfp8 = s->kf == FCL_FP8_E4M3 || s->kf == FCL_FP8_E5M2;
  const int vfp8 = s->vf == FCL_FP8_E4M3 || s->vf == FCL_FP8_E5M2;
  c->d.k_scale = kfp8 ? in->bscale : NULL, c->d.v_scale = vfp8 ? in->bscale : NULL;
  c->d.scale_count = kfp8 || vfp8;
  c->kn = (fcl_tensor){in->bkn, 0, s->t, {s->n * kvd, kvd, s->d, 1}};
  c->vn = (fcl_tensor){in->bvn, 0, s->t, {s->n * kvdv, kvdv, s->dv, 1}};
  c->lse = in->blse;
  c->append = s->append;
}

fcl_status decode_call_run(fcl_context *ctx, const decode_call *c) {
  return fcl_attention_kvcache(ctx, &c->d, &c->q, &c->kc, &c->vc, c->append ? &c->kn : NULL,
                               c->append ? &c->vn : NULL, &c->o, c->lse);
}

typedef struct {
  const dshape  *s;
  const dinputs *in;
} call_args;

static fcl_status kvcache_call(fcl_context *ctx, const void *arg) {
  const call_args *ca = arg;
  decode_call c;
  decode_call_make(ca->s, ca->in, &c);
  fcl_status st = decode_call_run(ctx, &c);
  if (st != FCL_OK)
    fprintf(stderr, "fa-bench: fcl_attention_kvcache: %s\n", fcl_context_last_error(ctx));
  return st;
}

/* ---- check -------------------------------------------------------------- */

/* All rows when there are few; else every head (up to CHECK_HEADS, spread)
 * of sequence 0's last query, the last head of the last sequence's last
 * query, and random (batch, head) pairs with queries spread evenly. */
static int pick_rows(const dshape *s, bench_qrow *r) {
  const int64_t total = s->b * s->h * s->n;
  int n = total < CHECK_ROWS ? (int)total : CHECK_ROWS, j = 0;
  if (n == total) {
    for (; j < n; j++) r[j] = (bench_qrow){j / (s->h * s->n), j / s->n % s->h, j % s->n};
  } else {
    const int heads = s->h < CHECK_HEADS ? (int)s->h : CHECK_HEADS;
    for (; j < heads; j++)
      r[j] = (bench_qrow){0, heads == s->h ? j : j * (s->h - 1) / (heads - 1), s->n - 1};
    tu_rng rng;
    tu_rng_seed(&rng, 4);
    const int rest = n - heads;
    for (int k = 0; k < rest - 1; k++, j++)
      r[j] = (bench_qrow){tu_rng_int(&rng, 0, s->b - 1), tu_rng_int(&rng, 0, s->h - 1),
                   rest > 2 ? k * (s->n - 1) / (rest - 2) : 0};
    r[j++] = (bench_qrow){s->b - 1, s->h - 1, s->n - 1};
  }
  qsort(r, (size_t)n, sizeof *r, bench_qrow_cmp);
  return n;
}

/* A new token's head vector (dim values of dtype t at x) as a cache of
 * format f stores it: its bytes into q (f quantized; else a copy). */
static void stored_bytes(const dshape *s, fcl_dtype f, const void *x, int64_t dim,
                         unsigned char *q) {
  const size_t es = tu_dtype_size(s->t);
  if (!ref_quant_format(f)) {
    memcpy(q, x, (size_t)dim * es);
    return;
  }
  float v[FCL_MAX_HEAD_DIM_BENCH];
  for (int64_t e = 0; e < dim; e++) v[e] = (float)bench_elem(x, s->t, (size_t)e);
  ref_quantize_vec(f, v, dim, DECODE_FP8_SCALE, q);
}

/* dim values of a cache of format f at p (bytes), as doubles. */
static void cache_values(const dshape *s, fcl_dtype f, const unsigned char *p, int64_t dim,
                         double *out) {
  if (!ref_quant_format(f)) {
    bench_decode(p, s->t, (size_t)dim, out);
    return;
  }
  float v[FCL_MAX_HEAD_DIM_BENCH];
  ref_dequantize_vec(f, p, dim, DECODE_FP8_SCALE, v);
  for (int64_t e = 0; e < dim; e++) out[e] = v[e];
}

/* The cache entries the call wrote for sequence b (positions c .. c+n-1)
 * must be k_new and v_new exactly, as the cache's format stores them. Returns the count of tokens that
 * differ, or -1 on an OpenCL error. */
static long check_append(fcl_context *ctx, const dshape *s, const dinputs *in, int64_t b) {
  const size_t es = tu_dtype_size(s->t);
  cl_command_queue queue = fcl_context_queue(ctx);
  const int64_t width = s->d > s->dv ? s->d : s->dv;
  unsigned char *raw = malloc((size_t)(s->hkv * width) * es);
  unsigned char *want = malloc((size_t)(s->hkv * width) * es);
  long bad = 0;
  if (!raw || !want) return free(raw), free(want), -1;
  for (int64_t i = 0; i < s->n; i++)
    for (int kv = 0; kv < 2; kv++) {
      const int64_t dim = kv ? s->dv : s->d;
      const fcl_dtype f = kv ? s->vf : s->kf;
      const size_t len = cache_byte((size_t)(s->hkv * dim), f);
      const size_t at = cache_byte(cache_at(s, in->bt, b, s->c + i, 0, dim), f);
      const unsigned char *x = (const unsigned char *)(kv ? in->vn : in->kn) +
                               (size_t)((b * s->n + i) * s->hkv * dim) * es;
      for (int64_t h = 0; h < s->hkv; h++)
        stored_bytes(s, f, x + (size_t)(h * dim) * es, dim, want + cache_byte((size_t)(h * dim), f));
      if (clEnqueueReadBuffer(queue, kv ? in->bvc : in->bkc, CL_TRUE, at, len, raw, 0, NULL,
                              NULL)) {
        fprintf(stderr, "fa-bench: decode: reading the cache failed\n");
        free(raw), free(want);
        return -1;
      }
      if (memcmp(raw, want, len)) {
        if (!bad)
          fprintf(stderr, "fa-bench: decode: the cache's %s at sequence %lld position %lld "
                  "is not the appended %s\n", kv ? "v" : "k", (long long)b,
                  (long long)(s->c + i), kv ? "v_new" : "k_new");
        bad++;
      }
    }
  free(raw), free(want);
  return bad;
}

int decode_poison_outputs(fcl_context *ctx, const dshape *s, const dinputs *in) {
  cl_command_queue queue = fcl_context_queue(ctx);
  return tu_buffer_repoison(queue, in->bo, n_o(s) * tu_dtype_size(s->t)) ||
         tu_buffer_repoison(queue, in->blse, n_lse(s) * sizeof(float));
}

const char *decode_check(fcl_context *ctx, const dshape *s, const dinputs *in,
                         bench_row *res) {
  call_args ca = {s, in};
  if (decode_poison_outputs(ctx, s, in) || kvcache_call(ctx, &ca) != FCL_OK ||
      clFinish(fcl_context_queue(ctx)))
    return "ERROR";
  return decode_check_outputs(ctx, s, in, res);
}

const char *decode_check_outputs(fcl_context *ctx, const dshape *s, const dinputs *in,
                                 bench_row *res) {
  const size_t es = tu_dtype_size(s->t), dv = (size_t)s->dv, d = (size_t)s->d;
  cl_command_queue queue = fcl_context_queue(ctx);
  bench_qrow rows[CHECK_ROWS];
  int n = pick_rows(s, rows);
  const char *verdict = "ERROR";

  const ref_attention_problem p = {1, s->n, s->keys, 1, 1, s->d, s->dv, 0.0, s->causal,
                                   -1, -1, 0.0, NULL, NULL, NULL, 0, 0.0, 0, 0};
  double *q = calloc((size_t)s->n * d, sizeof *q);
  double *k = malloc(((size_t)s->keys * d + 1) * sizeof *k);
  double *v = malloc(((size_t)s->keys * dv + 1) * sizeof *v);
  double *ref = malloc((size_t)n * (dv + 1) * sizeof *ref), *ref_lse = ref + n * dv;
  double *got = malloc((size_t)n * (dv + 1) * sizeof *got), *got_lse = got + n * dv;
  unsigned char *raw = malloc(dv * es);
  if (!q || !k || !v || !ref || !got || !raw) {
    fprintf(stderr, "fa-bench: decode: out of host memory for the check\n");
    goto done;
  }

  const int64_t group = s->h / s->hkv;
  int64_t kb = -1, kh = -1;
  unsigned char kbuf[FCL_MAX_HEAD_DIM_BENCH * 4], vbuf[FCL_MAX_HEAD_DIM_BENCH * 4];
  for (int j = 0; j < n; j++) {
    const bench_qrow *r = &rows[j];
    if (r->b != kb || r->h / group != kh) { /* rows are sorted: each kv slice once */
      kb = r->b, kh = r->h / group;
      for (int64_t t = 0; t < s->keys; t++) {
        const unsigned char *kp, *vp;
        if (t < s->c) {
          kp = (const unsigned char *)in->kc + cache_byte(cache_at(s, in->bt, kb, t, kh, s->d), s->kf);
          vp = (const unsigned char *)in->vc + cache_byte(cache_at(s, in->bt, kb, t, kh, s->dv), s->vf);
        } else { /* appended: k_new, v_new as the cache stores them */
          stored_bytes(s, s->kf, (const unsigned char *)in->kn +
                       (size_t)(((kb * s->n + t - s->c) * s->hkv + kh) * s->d) * es, s->d, kbuf);
          stored_bytes(s, s->vf, (const unsigned char *)in->vn +
                       (size_t)(((kb * s->n + t - s->c) * s->hkv + kh) * s->dv) * es, s->dv, vbuf);
          kp = kbuf, vp = vbuf;
        }
        cache_values(s, s->kf, kp, s->d, k + t * (int64_t)d);
        cache_values(s, s->vf, vp, s->dv, v + t * (int64_t)dv);
      }
    }
    const size_t at = (size_t)((r->b * s->n + r->i) * s->h + r->h);
    bench_decode((const unsigned char *)in->q + at * d * es, s->t, d, q + r->i * (int64_t)d);
    ref_lse[j] = ref_attention_row(&p, q, k, v, 0, 0, r->i, ref + j * dv);

    float lse;
    const size_t lse_at = (size_t)((r->b * s->h + r->h) * s->n + r->i) * sizeof lse;
    if (clEnqueueReadBuffer(queue, in->bo, CL_TRUE, at * dv * es, dv * es, raw, 0, NULL,
                            NULL) ||
        clEnqueueReadBuffer(queue, in->blse, CL_TRUE, lse_at, sizeof lse, &lse, 0, NULL,
                            NULL)) {
      fprintf(stderr, "fa-bench: decode: reading the outputs failed\n");
      goto done;
    }
    bench_decode(raw, s->t, dv, got + j * dv);
    got_lse[j] = lse;
  }
  tu_cmp co = tu_compare(got, ref, (size_t)n * dv, tu_tol_output(s->t), 0);
  tu_cmp cl = tu_compare(got_lse, ref_lse, (size_t)n, tu_tol_lse(), 1);
  res->err_o = co.n_bad && !isfinite(co.worst_err) ? INFINITY : co.max_err;
  res->err_lse = cl.n_bad && !isfinite(cl.worst_err) ? INFINITY : cl.max_err;
  int ok = co.ok && cl.ok;
  if (!ok) { /* the worst element, on stderr: stdout may be CSV or JSON */
    const tu_cmp *c = co.ok ? &cl : &co;
    const bench_qrow *r = &rows[co.ok ? cl.worst : co.worst / dv];
    fprintf(stderr,
            "fa-bench: decode context=%lld new=%lld page=%lld %s causal=%d: %s of row b=%lld "
            "h=%lld i=%lld: got %.9g, ref %.9g, err %.3g, allowed %.3g; %zu bad\n",
            (long long)s->c, (long long)s->n, (long long)s->ps, tu_dtype_name(s->t), s->causal,
            co.ok ? "lse" : "o", (long long)r->b, (long long)r->h, (long long)r->i,
            c->worst_got, c->worst_ref, c->worst_err, c->worst_allowed, c->n_bad);
  }
  for (int64_t b = 0; s->append && b < s->b; b += s->b > 1 ? s->b - 1 : 1) {
    const long bad = check_append(ctx, s, in, b);
    if (bad < 0) goto done;
    if (bad) ok = 0;
  }
  verdict = ok ? "PASS" : "FAIL";
done:
  free(q), free(k), free(v), free(ref), free(got), free(raw);
  return verdict;
}

/* ---- driver ------------------------------------------------------------- */

bench_row decode_row(const dshape *s) {
  bench_row r = bench_row_init(OP_DECODE);
  const double es = (double)tu_dtype_size(s->t);
  const attn_shape as = {s->b, s->h, s->hkv, s->n, s->keys, s->d, s->dv, s->t, s->causal, 0.0,
                         NULL};
  r.b = s->b, r.h = s->h, r.hkv = s->hkv, r.sq = s->n, r.sk = s->keys, r.d = s->d, r.dv = s->dv;
  r.t = s->t, r.causal = s->causal, r.cache_k = s->kf, r.cache_v = s->vf;
  r.context = s->c, r.page_size = s->ps, r.num_splits = s->splits, r.append = s->append;
  r.flops = 2.0 * (double)(s->d + s->dv) * attn_pairs(&as) * (double)s->b * (double)s->h;
  r.instrs = attn_instrs(&as, 0);
  /* the caches' bytes a value in their formats */
  const double kvb = (double)ref_quant_unit_bytes(s->kf) / (double)ref_quant_unit_values(s->kf);
  const double vvb = (double)ref_quant_unit_bytes(s->vf) / (double)ref_quant_unit_values(s->vf);
  r.bytes = (double)(s->b * s->hkv) * (double)s->c * (kvb * (double)s->d + vvb * (double)s->dv) +
            (double)(s->b * s->hkv) * (double)s->n * (double)s->append *
                (es * (double)(s->d + s->dv) + kvb * (double)s->d + vvb * (double)s->dv) +
            es * (double)(s->b * s->n * s->h) * (double)(s->d + s->dv) + 4.0 * (double)n_lse(s);
  return r;
}

void decode_time(fcl_context *ctx, const bench_args *a, const dshape *s, const dinputs *in,
                 bench_row *r) {
  call_args ca = {s, in};
  r->ms = bench_time(ctx, kvcache_call, NULL, &ca, a->warmup, a->iters, &r->wall_ms);
  if (r->ms < 0) r->ms = r->wall_ms = NAN, r->check = "ERROR";
}
