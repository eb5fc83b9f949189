/* fa-bench command-line parsing. */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "args.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: fa-bench [options]\n"
    "Runs flashcl operations, checks them against a double-precision reference\n"
    "and reports the median time with TFLOP/s (attention) or GB/s (RWKV6, decode).\n"
    "\n"
    "  --op LIST         fwd, bwd (attention), rwkv6-fwd, rwkv6-bwd, decode\n"
    "                    (attention against a KV cache), rwkv7-fwd, rwkv7-bwd\n"
    "                    (fwd,rwkv6-fwd)\n"
    "  --device SEL      device selector (default: $FCL_DEVICE, else first GPU, else CPU)\n"
    "  --batch N         batch size (1)\n"
    "  --heads N         query heads; RWKV6: heads (8)\n"
    "  --heads-kv N      key/value heads, divides --heads (= --heads); attention only\n"
    "                    (--kv-heads is the same)\n"
    "  --seqlen LIST     sequence lengths for queries and keys; RWKV6: T (1024);\n"
    "                    decode: new query tokens per sequence (1)\n"
    "  --seqlen-q N      query length (overrides --seqlen); RWKV6: T; decode: new tokens\n"
    "  --seqlen-k N      key length (overrides --seqlen); attention only\n"
    "  --varlen LIST     attention: one packed batch of sequences of these lengths\n"
    "                    (cu_seqlens, as FlashAttention's varlen calls), in place of\n"
    "                    --batch and --seqlen; rows show the count and the longest\n"
    "  --head-dim N      q/k head dimension; RWKV6: K (64)\n"
    "  --head-dim-v N    v/o head dimension; RWKV6: V (= --head-dim)\n"
    "  --dtype LIST      f32, f16, bf16 (f32,f16)\n"
    "  --causal LIST     0 and/or 1 (0,1; decode: 1); attention only\n"
    "  --algorithm LIST  recurrent, chunked, auto (auto); RWKV6 only\n"
    "  --context LIST    decode: tokens in each sequence's cache before the call (4096)\n"
    "  --page-size LIST  decode: 0 for a contiguous cache, else a paged one with\n"
    "                    this many tokens a page, pages in shuffled order (0)\n"
    "  --num-splits LIST decode: 0 (the library chooses), or split the keys n ways (0)\n"
    "  --append          decode: the call also writes the new tokens' k and v\n"
    "                    (k_new, v_new) to the cache and attends to them\n"
    "  --cache-dtype LIST decode: the caches' format: same (q's dtype), q8_0, q4_0,\n"
    "                    fp8_e4m3, fp8_e5m2, or K:V for each its own (same); fp8\n"
    "                    caches get a scale of 1/64 a tensor\n"
    "  --iters N         timed iterations (10)\n"
    "  --warmup N        untimed iterations before them (2)\n"
    "  --check 0|1       compare with the reference (1)\n"
    "  --baseline        fwd also runs an unfused attention (S and P materialised\n"
    "                    in f32 device memory), impl 'unfused', with the fusion gain\n"
    "  --peak 0|1        measure the device's f32 FMA rate and copy bandwidth first,\n"
    "                    for the %alu and %bw columns (1)\n"
    "  --peak-gbps X     use X GB/s as the bandwidth of %bw instead of the measured\n"
    "                    copy (e.g. a datasheet's figure)\n"
    "  --params V:P      run kernel variant V (fa-tune --ops names them) with the\n"
    "                    parameters P (NAME=v,... as fa-tune --show prints them)\n"
    "                    wherever it applies: one configuration timed (tuning override)\n"
    "  --layers L        loop mode: decode, rwkv6-fwd and rwkv7-fwd (T = 1 unless\n"
    "                    --seqlen, the state carried from step to step) run as a\n"
    "                    model's decode step:\n"
    "                    L calls back to back, each on its own cache or state, one\n"
    "                    clFinish a step; per-call times in place of the usual rows\n"
    "  --steps N         loop mode: timed steps, after one warm-up step (10)\n"
    "  --kernels-per-call K  loop mode: kernels one call launches, for the library's\n"
    "                    host time beyond its launches (1)\n"
    "  --plans           loop mode: each case a second time (impl flashcl-plan)\n"
    "                    through public plans: each layer's call planned once\n"
    "                    (fcl_attention_kvcache_plan, fcl_rwkv6_forward_plan) and\n"
    "                    run with fcl_plan_run, as an engine that plans once does\n"
    "  --dropout P       fwd, bwd: attention dropout with probability P (a fixed\n"
    "                    seed); the outputs are then not checked (test_attention_dropout\n"
    "                    checks them against the reference)\n"
    "  --f32-precision P highest, high or medium: FCL_OPTION_F32_PRECISION for\n"
    "                    every f32 call (highest); the check takes the level's\n"
    "                    tolerance (flashcl.h)\n"
    "  --csv, --json     machine-readable output instead of the table (bench/py/plot.py\n"
    "                    draws the JSON)\n"
    "LIST is comma-separated; every combination of the lists is run.\n"
    "\n"
    "Columns: ms is the median device time (OpenCL profiling events, first\n"
    "kernel's start to last kernel's end) of --iters calls after --warmup;\n"
    "wall_ms (CSV, JSON) the median wall time of the same calls. TFLOP/s counts\n"
    "4*B*H*Nq*Nk*D (2*B*H*Nq*Nk*(D+Dv)), halved when causal, 2.5x for bwd. GB/s\n"
    "counts each input read and each output written once (unfused: plus S and P\n"
    "written and read, 16*B*H*Nq*Nk bytes). %alu: instructions per second of the\n"
    "Metal FlashAttention port's model ((2D+5)*N^2 per head fwd, (7D+10)*N^2 bwd;\n"
    "causal counts the visible pairs) over the measured FMA rate (an FMA is one\n"
    "instruction); attention only. %bw: GB/s over the measured copy bandwidth.\n"
    "gain: unfused ms / flashcl ms of the same case.\n"
    "\n"
    "decode times fcl_attention_kvcache: B sequences of C cached tokens (--context)\n"
    "and n new query tokens (--seqlen), the queries the last n positions of the\n"
    "keys (bottom-right). Nq = n, Nk = the keys: C, or C + n with --append. Its\n"
    "table gives the time in us; GB/s counts the cache read once,\n"
    "B*Hkv*C*(D+Dv) elements, plus q, o and lse (f32), and with --append k_new and\n"
    "v_new read and written to the cache (B*Hkv*2n*(D+Dv) more); TFLOP/s counts\n"
    "2*(D+Dv) per visible (query, key) pair and head.\n"
    "\n"
    "Checks (column check): fwd compares 64 sampled rows of o and lse. bwd\n"
    "compares dq, dk, dv in full when B*H*Nq*Nk*D <= 2e8 (PASS), else those of\n"
    "the last (batch, kv head) slice (PASS-slice) when that slice is small\n"
    "enough, else only that every gradient is finite (UNCHECKED). rwkv6-fwd/bwd\n"
    "compare o or dr, dk, dv, dw, du in full when B*T*H*K*V <= 5e7 (PASS), else\n"
    "batch 0 of the timed call's outputs, du from a separate batch-1 call on the\n"
    "same data, and every output finite (PASS-b0). rwkv7-fwd/bwd (with h0, and\n"
    "ht or dh0) likewise compare o and ht or dr, dw, dk, dv, da, db and dh0 (PASS,\n"
    "or batch 0 with every output finite, PASS-b0). err(grad) is the largest\n"
    "|got - ref| / max|ref| over the gradient tensors. decode compares 64 sampled\n"
    "rows of o and lse (every head of the first and last sequence's last query\n"
    "among them), and with --append the cache entries written for the first and\n"
    "last sequence, exactly.\n"
    "\n"
    "Loop mode (--layers) reports per call: wall_us, the step's wall time / L\n"
    "(median over the steps); host_us, the time spent inside the L fcl_* calls\n"
    "(clock_gettime around each) / L; dev_us, the mean device time of the calls\n"
    "in one more, untimed step with the library's timing on\n"
    "(fcl_context_last_op_time after each call); b2b_us, a call's device time\n"
    "with a step's L calls run back to back (enqueued behind a spinning kernel,\n"
    "timed from its end to the start of an empty kernel after them, / L; the\n"
    "like of a CUDA graph's replay); launch_us and launch+ev_us, the\n"
    "host time of one clEnqueueNDRangeKernel of an empty 24-argument kernel, 2000\n"
    "in bursts of L with a clFinish after each, without and with an event\n"
    "(measured beside each case); lib_us,\n"
    "host_us - K * the bare launch (the event-less one when the library's timing\n"
    "events were off in the timed steps, column ev); empty_us, that empty kernel's\n"
    "device time by its event, the floor of dev_us. The check compares the last\n"
    "layer's output of that last step (rwkv6-fwd: o and ht, from the h0 read back\n"
    "before it).\n";

static int parse_int(const char *opt, const char *s, int64_t min, int64_t max,
                     int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) {
    fprintf(stderr, "fa-bench: %s: expected an integer from %lld to %lld, got '%s'\n", opt,
            (long long)min, (long long)max, s);
    return -1;
  }
  *out = v;
  return 0;
}

/* Splits a comma list and calls one() on each item; returns the item count or -1. */
static int parse_list(const char *opt, const char *s,
                      int (*one)(const char *opt, const char *item, int idx, void *dst),
                      void *dst) {
  char buf[256];
  if (strlen(s) >= sizeof buf) {
    fprintf(stderr, "fa-bench: %s: list too long\n", opt);
    return -1;
  }
  strcpy(buf, s);
  int n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    if (n == BENCH_MAX_LIST) {
      fprintf(stderr, "fa-bench: %s: at most %d values\n", opt, BENCH_MAX_LIST);
      return -1;
    }
    if (one(opt, tok, n++, dst)) return -1;
  }
  if (n == 0) fprintf(stderr, "fa-bench: %s: empty list\n", opt);
  return n ? n : -1;
}

static int one_dtype(const char *opt, const char *s, int i, void *dst) {
  fcl_dtype *t = (fcl_dtype *)dst + i;
  if (!strcmp(s, "f32") || !strcmp(s, "fp32") || !strcmp(s, "float32")) *t = FCL_F32;
  else if (!strcmp(s, "f16") || !strcmp(s, "fp16") || !strcmp(s, "float16")) *t = FCL_F16;
  else if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16")) *t = FCL_BF16;
  else {
    fprintf(stderr, "fa-bench: %s: unknown dtype '%s' (f32, f16, bf16)\n", opt, s);
    return -1;
  }
  return 0;
}

/* A cache format: same (q's dtype), q8_0, q4_0, fp8_e4m3 (fp8e4m3, e4m3),
 * fp8_e5m2 (fp8e5m2, e5m2); K:V gives K and V their own. */
static int one_format(const char *s, int *f) {
  static const struct { const char *name; int f; } names[] = {
      {"same", -1},          {"q8_0", FCL_Q8_0},    {"q4_0", FCL_Q4_0},
      {"fp8_e4m3", FCL_FP8_E4M3}, {"fp8e4m3", FCL_FP8_E4M3}, {"e4m3", FCL_FP8_E4M3},
      {"fp8_e5m2", FCL_FP8_E5M2}, {"fp8e5m2", FCL_FP8_E5M2}, {"e5m2", FCL_FP8_E5M2}};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (!strcmp(s, names[k].name)) return *f = names[k].f, 0;
  return -1;
}

static int one_cache(const char *opt, const char *s, int i, void *dst) {
  int *kv = (int *)dst; /* cache_k, then cache_v at BENCH_MAX_LIST */
  char k[32];
  const char *colon = strchr(s, ':');
  snprintf(k, sizeof k, "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
  if (one_format(k, &kv[i]) || one_format(colon ? colon + 1 : k, &kv[BENCH_MAX_LIST + i])) {
    fprintf(stderr, "fa-bench: %s: unknown cache format '%s' (same, q8_0, q4_0, fp8_e4m3, "
            "fp8_e5m2, or K:V)\n", opt, s);
    return -1;
  }
  return 0;
}

static int one_causal(const char *opt, const char *s, int i, void *dst) {
  int64_t v;
  if (parse_int(opt, s, 0, 1, &v)) return -1;
  ((int *)dst)[i] = (int)v;
  return 0;
}

static int one_op(const char *opt, const char *s, int i, void *dst) {
  static const bench_op ops[] = {OP_FWD,    OP_BWD,       OP_RWKV6_FWD, OP_RWKV6_BWD,
                                 OP_DECODE, OP_RWKV7_FWD, OP_RWKV7_BWD};
  for (int k = 0; k < 7; k++)
    if (!strcmp(s, bench_op_name(ops[k]))) {
      ((bench_op *)dst)[i] = ops[k];
      return 0;
    }
  fprintf(stderr,
          "fa-bench: %s: unknown op '%s' (fwd, bwd, rwkv6-fwd, rwkv6-bwd, decode, rwkv7-fwd, "
          "rwkv7-bwd)\n",
          opt, s);
  return -1;
}

static int one_algorithm(const char *opt, const char *s, int i, void *dst) {
  static const fcl_rwkv6_algorithm algs[] = {FCL_RWKV6_AUTO, FCL_RWKV6_RECURRENT,
                                             FCL_RWKV6_CHUNKED};
  for (int k = 0; k < 3; k++)
    if (!strcmp(s, bench_algorithm_name(algs[k]))) {
      ((fcl_rwkv6_algorithm *)dst)[i] = algs[k];
      return 0;
    }
  fprintf(stderr, "fa-bench: %s: unknown algorithm '%s' (recurrent, chunked, auto)\n", opt,
          s);
  return -1;
}

const char *bench_op_name(bench_op op) {
  switch (op) {
  case OP_FWD: return "fwd";
  case OP_BWD: return "bwd";
  case OP_RWKV6_FWD: return "rwkv6-fwd";
  case OP_RWKV6_BWD: return "rwkv6-bwd";
  case OP_DECODE: return "decode";
  case OP_RWKV7_FWD: return "rwkv7-fwd";
  case OP_RWKV7_BWD: return "rwkv7-bwd";
  }
  return "?";
}

const char *bench_algorithm_name(fcl_rwkv6_algorithm a) {
  switch (a) {
  case FCL_RWKV6_AUTO: return "auto";
  case FCL_RWKV6_RECURRENT: return "recurrent";
  case FCL_RWKV6_CHUNKED: return "chunked";
  }
  return "?";
}

static int one_len(const char *opt, const char *s, int i, void *dst) {
  return parse_int(opt, s, 1, INT_MAX, (int64_t *)dst + i);
}

static int one_count(const char *opt, const char *s, int i, void *dst) { /* 0 allowed */
  return parse_int(opt, s, 0, INT_MAX, (int64_t *)dst + i);
}

int bench_parse_args(int argc, char **argv, bench_args *a) {
  bench_args d = {NULL, 1, 8, 0, 64, 0, {1024}, {1024}, 1, {FCL_F32, FCL_F16}, 2,
                  {0, 1}, 2, {OP_FWD, OP_RWKV6_FWD}, 2, {FCL_RWKV6_AUTO}, 1, 0, 0, 0,
                  OUT_TABLE, 0, 1, 0.0, 0, 0, {0}, 0, {0}, 0, {0}, 0, 0, {0}, 0, NULL, 0, 0, 0, 0, 0,
                  {0}, {0}, 0, 0.0};
  int64_t sq = 0, sk = 0, iters = 10, warmup = 2, check = 1, peak = 1;
  int64_t layers = 0, steps = 0, kpc = 0;
  const struct { const char *name; int64_t *dst, min, max; } ints[] = {
      {"--batch", &a->batch, 1, INT_MAX},       {"--heads", &a->heads, 1, INT_MAX},
      {"--heads-kv", &a->heads_kv, 1, INT_MAX}, {"--kv-heads", &a->heads_kv, 1, INT_MAX},
      {"--head-dim", &a->head_dim, 1, INT_MAX},
      {"--head-dim-v", &a->head_dim_v, 1, INT_MAX}, {"--seqlen-q", &sq, 1, INT_MAX},
      {"--seqlen-k", &sk, 1, INT_MAX},          {"--iters", &iters, 1, INT_MAX},
      {"--warmup", &warmup, 0, INT_MAX},        {"--check", &check, 0, 1},
      {"--peak", &peak, 0, 1},                  {"--layers", &layers, 1, 100000},
      {"--steps", &steps, 1, INT_MAX},          {"--kernels-per-call", &kpc, 1, 1000}};
  const char *const others[] = {"--device", "--seqlen", "--dtype", "--causal", "--op",
                                "--algorithm", "--context", "--page-size", "--num-splits",
                                "--peak-gbps", "--varlen", "--params", "--f32-precision",
                                "--cache-dtype", "--dropout"};
  const int n_others = (int)(sizeof others / sizeof others[0]);
  *a = d;
  for (int i = 1; i < argc; i++) {
    char name[32];
    const char *arg = argv[i], *val, *eq = strchr(arg, '=');
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      fputs(usage, stdout);
      return 1;
    }
    if (!strcmp(arg, "--csv")) { a->output = OUT_CSV; continue; }
    if (!strcmp(arg, "--json")) { a->output = OUT_JSON; continue; }
    if (!strcmp(arg, "--baseline")) { a->baseline = 1; continue; }
    if (!strcmp(arg, "--append")) { a->append = 1; continue; }
    if (!strcmp(arg, "--plans")) { a->plans = 1; continue; }
    if (eq && (size_t)(eq - arg) < sizeof name) { /* --name=value */
      memcpy(name, arg, (size_t)(eq - arg));
      name[eq - arg] = '\0';
      arg = name;
    }
    int known = -1, n_ints = (int)(sizeof ints / sizeof ints[0]);
    for (int k = 0; k < n_ints + n_others && known < 0; k++)
      if (!strcmp(arg, k < n_ints ? ints[k].name : others[k - n_ints])) known = k;
    if (known < 0) {
      fprintf(stderr, "fa-bench: unknown option '%s' (see --help)\n", argv[i]);
      return -1;
    }
    if (arg == name) val = eq + 1;
    else if (i + 1 < argc) val = argv[++i];
    else {
      fprintf(stderr, "fa-bench: %s needs a value\n", arg);
      return -1;
    }
    int rc = 0;
    if (known < n_ints) {
      rc = parse_int(arg, val, ints[known].min, ints[known].max, ints[known].dst);
    } else if (!strcmp(arg, "--device")) {
      a->device = val;
    } else if (!strcmp(arg, "--params")) {
      a->params = val;
    } else if (!strcmp(arg, "--f32-precision")) {
      a->f32_precision = !strcmp(val, "highest") ? 0 : !strcmp(val, "high") ? 1
                       : !strcmp(val, "medium")  ? 2 : -1;
      if (a->f32_precision < 0) {
        fprintf(stderr, "fa-bench: --f32-precision: highest, high or medium, not '%s'\n", val);
        rc = 1;
      }
    } else if (!strcmp(arg, "--seqlen")) {
      rc = (a->n_seqlen = parse_list(arg, val, one_len, a->seqlen_q)) < 0;
      memcpy(a->seqlen_k, a->seqlen_q, sizeof a->seqlen_k);
      a->seqlen_set = 1;
    } else if (!strcmp(arg, "--varlen")) {
      rc = (a->n_varlen = parse_list(arg, val, one_len, a->varlen)) < 0;
    } else if (!strcmp(arg, "--dtype")) {
      rc = (a->n_dtypes = parse_list(arg, val, one_dtype, a->dtypes)) < 0;
    } else if (!strcmp(arg, "--causal")) {
      rc = (a->n_causal = parse_list(arg, val, one_causal, a->causal)) < 0;
      a->causal_set = 1;
    } else if (!strcmp(arg, "--op")) {
      rc = (a->n_ops = parse_list(arg, val, one_op, a->ops)) < 0;
    } else if (!strcmp(arg, "--context")) {
      rc = (a->n_context = parse_list(arg, val, one_count, a->context)) < 0;
    } else if (!strcmp(arg, "--cache-dtype")) {
      int kv[2 * BENCH_MAX_LIST];
      rc = (a->n_cache = parse_list(arg, val, one_cache, kv)) < 0;
      memcpy(a->cache_k, kv, sizeof a->cache_k);
      memcpy(a->cache_v, kv + BENCH_MAX_LIST, sizeof a->cache_v);
    } else if (!strcmp(arg, "--page-size")) {
      rc = (a->n_page_size = parse_list(arg, val, one_count, a->page_size)) < 0;
    } else if (!strcmp(arg, "--num-splits")) {
      rc = (a->n_num_splits = parse_list(arg, val, one_count, a->num_splits)) < 0;
    } else if (!strcmp(arg, "--dropout")) {
      char *end;
      errno = 0;
      a->dropout = strtod(val, &end);
      if (errno || end == val || *end || !(a->dropout >= 0 && a->dropout < 1)) {
        fprintf(stderr, "fa-bench: --dropout: expected a probability in [0, 1), got '%s'\n",
                val);
        rc = 1;
      }
    } else if (!strcmp(arg, "--peak-gbps")) {
      char *end;
      errno = 0;
      a->peak_gbps = strtod(val, &end);
      if (errno || end == val || *end || !(a->peak_gbps > 0)) {
        fprintf(stderr, "fa-bench: --peak-gbps: expected a positive number, got '%s'\n", val);
        rc = 1;
      }
    } else {
      rc = (a->n_algorithms = parse_list(arg, val, one_algorithm, a->algorithms)) < 0;
    }
    if (rc) return -1;
  }
  for (int i = 0; i < a->n_seqlen; i++) {
    if (sq) a->seqlen_q[i] = sq;
    if (sk) a->seqlen_k[i] = sk;
  }
  if (sq) a->seqlen_set = 1;
  if (!a->n_context) a->context[0] = 4096, a->n_context = 1;
  if (!a->n_page_size) a->page_size[0] = 0, a->n_page_size = 1;
  if (!a->n_cache) a->cache_k[0] = a->cache_v[0] = -1, a->n_cache = 1;
  if (!a->n_num_splits) a->num_splits[0] = 0, a->n_num_splits = 1;
  a->iters = (int)iters, a->warmup = (int)warmup, a->check = (int)check, a->peak = (int)peak;
  if (!layers && (steps || kpc || a->plans)) {
    fprintf(stderr, "fa-bench: --steps, --kernels-per-call and --plans need --layers\n");
    return -1;
  }
  for (int i = 0; layers && i < a->n_ops; i++)
    if (a->ops[i] != OP_DECODE && a->ops[i] != OP_RWKV6_FWD && a->ops[i] != OP_RWKV7_FWD) {
      fprintf(stderr, "fa-bench: --layers: for --op decode, rwkv6-fwd and rwkv7-fwd, not %s\n",
              bench_op_name(a->ops[i]));
      return -1;
    } else if (a->plans && a->ops[i] == OP_RWKV7_FWD) {
      fprintf(stderr, "fa-bench: --plans: not for rwkv7-fwd (RWKV7 has no public plan)\n");
      return -1;
    }
  a->layers = (int)layers, a->steps = steps ? (int)steps : 10;
  a->kernels_per_call = kpc ? (int)kpc : 1;
  if (layers && !a->seqlen_set) /* rwkv6-fwd, rwkv7-fwd: the recurrent step, T = 1 */
    a->seqlen_q[0] = a->seqlen_k[0] = 1, a->n_seqlen = 1;
  if (!a->heads_kv) a->heads_kv = a->heads;
  if (!a->head_dim_v) a->head_dim_v = a->head_dim;
  if (a->heads % a->heads_kv) {
    fprintf(stderr, "fa-bench: --heads %lld is not a multiple of --heads-kv %lld\n",
            (long long)a->heads, (long long)a->heads_kv);
    return -1;
  }
  return 0;
}
