/* fa-bench, decode: the case's shape, its inputs and the call, shared by
 * decode.c (one call timed) and decode_loop.c (loop mode). */
#ifndef FCL_BENCH_DECODE_H
#define FCL_BENCH_DECODE_H

#include "bench.h"

typedef struct {
  int64_t   b, h, hkv, n, c, d, dv; /* n new tokens, c cached tokens per sequence */
  fcl_dtype t;
  fcl_dtype kf, vf;                 /* the caches' formats: t, or a quantized one */
  int       causal, append;
  int64_t   ps, splits;             /* page size (0: contiguous), num_splits */
  int64_t   keys;                   /* c, or c + n with append */
  int64_t   cap;                    /* cache_capacity: tokens a sequence's cache holds */
  int64_t   pps;                    /* paged: pages per sequence (block table width) */
  int64_t   slots, slot_len;        /* pages and page_size, or rows and cap */
} dshape;

typedef struct {
  void    *q, *kc, *vc, *kn, *vn;   /* host copies in the dtype; kc, vc as laid out */
  int32_t *bt;                      /* block table [b][pps] (paged) */
  cl_mem   bq, bkc, bvc, bkn, bvn, bo, blse, bseq, bbt;
  cl_mem   bscale;                  /* fp8 caches: their scale (DECODE_FP8_SCALE) */
} dinputs;

/* The arguments of one fcl_attention_kvcache call. */
typedef struct {
  fcl_kvcache_desc d;
  fcl_tensor       q, kc, vc, kn, vn, o;
  cl_mem           lse;
  int              append;
} decode_call;

/* An fp8 cache's scale, one a tensor: the uniform inputs (|x| < 1.74)
 * span [-111, 111] of the format. */
#define DECODE_FP8_SCALE (1.0f / 64)

/* The case: cache formats kf, vf (-1: t). */
dshape decode_shape(const bench_args *a, int64_t c, int64_t n, fcl_dtype t, int64_t ps,
                    int kf, int vf);
/* Values of the k (dim D) or v (dim Dv) cache, every slot, and its bytes
 * in format f. */
size_t decode_cache_elems(const dshape *s, int64_t dim);
size_t decode_cache_bytes(const dshape *s, int64_t dim, fcl_dtype f);
/* A cache's host bytes in format f: uniform values of variance 1 (seed),
 * quantized by the host reference where f is a KV-cache format; NULL when
 * out of memory. */
void  *decode_cache_values(const dshape *s, int64_t dim, fcl_dtype f, uint64_t seed);
/* Random inputs (fixed seeds) on host and device; 0, or -1 with a message. */
int    decode_inputs_make(fcl_context *ctx, const dshape *s, dinputs *in);
void   decode_inputs_free(dinputs *in);
void       decode_call_make(const dshape *s, const dinputs *in, decode_call *c);
fcl_status decode_call_run(fcl_context *ctx, const decode_call *c);
/* Sets o and lse to NaN; 0 on success. */
int         decode_poison_outputs(fcl_context *ctx, const dshape *s, const dinputs *in);
/* Compares sampled rows of the o and lse now in in's buffers (and with
 * append the entries written to in's cache) with the reference: the verdict,
 * the errors in *res. */
const char *decode_check_outputs(fcl_context *ctx, const dshape *s, const dinputs *in,
                                 bench_row *res);
/* A row with the case's shape and counts, nothing measured. */
bench_row   decode_row(const dshape *s);
/* Runs the call once on outputs set to NaN and compares sampled rows: the
 * verdict, the errors in *res. */
const char *decode_check(fcl_context *ctx, const dshape *s, const dinputs *in, bench_row *res);
/* Times the call (a's warm-up and iterations) into r's ms and wall_ms. */
void        decode_time(fcl_context *ctx, const bench_args *a, const dshape *s,
                        const dinputs *in, bench_row *r);

/* Loop mode on this case (decode_loop.c): times it into *r, checks the
 * last layer (r->check); plans: through public plans (impl flashcl-plan).
 * 1 if a setup step failed, else 0. */
int decode_loop_case(fcl_context *ctx, const bench_args *a, int plans, const dshape *s,
                     const dinputs *in, bench_row *r);

#endif
