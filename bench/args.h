/* fa-bench command line: the options and the list of runs they describe. */
#ifndef FCL_BENCH_ARGS_H
#define FCL_BENCH_ARGS_H

#include <stdint.h>

#include "flashcl.h"

#define BENCH_MAX_LIST 16

typedef enum { OUT_TABLE, OUT_CSV, OUT_JSON } bench_output;

/* What is timed: attention forward and backward, RWKV6 forward and backward,
 * attention against a KV cache (decode, chunked prefill), RWKV7 forward and
 * backward. */
typedef enum { OP_FWD, OP_BWD, OP_RWKV6_FWD, OP_RWKV6_BWD, OP_DECODE, OP_RWKV7_FWD,
               OP_RWKV7_BWD } bench_op;

typedef struct {
  const char *device;  /* NULL: the library's default selection */
  int64_t     batch, heads, heads_kv, head_dim, head_dim_v;
  int64_t     seqlen_q[BENCH_MAX_LIST], seqlen_k[BENCH_MAX_LIST];
  int         n_seqlen;
  fcl_dtype   dtypes[BENCH_MAX_LIST];
  int         n_dtypes;
  int         causal[BENCH_MAX_LIST];
  int         n_causal;
  bench_op    ops[BENCH_MAX_LIST];
  int         n_ops;
  fcl_rwkv6_algorithm algorithms[BENCH_MAX_LIST]; /* RWKV6 ops only */
  int         n_algorithms;
  int         iters, warmup, check;
  bench_output output;
  int         baseline;  /* --baseline: also the unfused attention forward */
  int         peak;      /* --peak 0|1: measure the device's peaks (1) */
  double      peak_gbps; /* --peak-gbps: the bandwidth roofline given (0: measured) */
  /* decode (fcl_attention_kvcache): seqlen_q[] are the new tokens per
   * sequence, 1 unless --seqlen or --seqlen-q is given (seqlen_set). */
  int         seqlen_set, causal_set;
  int64_t     context[BENCH_MAX_LIST];      /* --context: cached tokens */
  int         n_context;
  int64_t     page_size[BENCH_MAX_LIST];    /* --page-size: 0 contiguous */
  int         n_page_size;
  int64_t     num_splits[BENCH_MAX_LIST];   /* --num-splits: 0 the library's choice */
  int         n_num_splits;
  int         append;    /* --append: k_new/v_new written to the cache in the call */
  /* --varlen: attention on one packed batch of these sequence lengths
   * (cu_seqlens; queries and keys alike), in place of --batch and --seqlen */
  int64_t     varlen[BENCH_MAX_LIST];
  int         n_varlen;
  /* --params VARIANT:NAME=v,...: that variant with these parameters in every
   * call where it applies (the tuning override), to time one configuration */
  const char *params;
  /* loop mode (--layers L): a model's decode step, L calls back to back (one
   * a layer, each on its own cache or state) and one clFinish, --steps
   * times; decode and rwkv6-fwd (T = 1 unless --seqlen). 0: off. */
  int         layers, steps;
  int         kernels_per_call; /* --kernels-per-call: kernels one call launches (1) */
  int         plans;     /* --plans: each loop case also through public plans */
  int         f32_precision; /* --f32-precision: an fcl_f32_precision (0 highest) */
  /* decode, --cache-dtype: the caches' formats, K's and V's (-1: q's dtype) */
  int         cache_k[BENCH_MAX_LIST], cache_v[BENCH_MAX_LIST];
  int         n_cache;
  double      dropout;   /* --dropout: fwd and bwd's dropout_p (0: none) */
} bench_args;

/* Fills *a from argv. Returns 0 to go on, 1 when --help was printed (exit 0),
 * -1 on a bad option (message already printed to stderr, exit 2). */
int bench_parse_args(int argc, char **argv, bench_args *a);

/* "fwd", "bwd", "rwkv6-fwd", "rwkv6-bwd", "decode", "rwkv7-fwd", "rwkv7-bwd". */
const char *bench_op_name(bench_op op);
/* "auto", "recurrent", "chunked". */
const char *bench_algorithm_name(fcl_rwkv6_algorithm a);

#endif
