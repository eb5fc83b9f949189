/* fa-tune: measures the kernels of flashcl on a device and keeps the best
 * configuration per problem class in the tuning database that the library
 * reads. See --help. */
#include "tune.h"

#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

typedef struct {
  const char *device, *db, *export_file, *import_file, *replay_file;
  bool        list, show, all_devices, resume;
  /* The variants asked for, and whether by name (not by an alias); a
   * variant's index is its place in the registry (fcl_variant_at). */
  bool        wanted[32], named[32];
  fcl_dtype   dtypes[3];
  int         ndtypes;
  int         dims[8], ndims;
  int         causal[2], ncausal;
  int         buckets[FCL_SEQLEN_BUCKETS], nbuckets;
  double      budget_s;
  tune_settings st;
} options;

static void usage(FILE *f) {
  fprintf(f,
    "usage: fa-tune [options]\n"
    "  --device SEL       device: as FCL_DEVICE (\"nvidia\", \"pocl\", \"P:D\"), or all\n"
    "  --list-devices     list the OpenCL devices and exit\n"
    "  --db PATH          tuning database (default: $FCL_TUNING_DB, else\n"
    "                     $XDG_CACHE_HOME/flashcl/tuning.db or ~/.cache/flashcl/tuning.db)\n"
    "  --ops LIST         attention_fwd,attention_fwd_mma (NVIDIA tensor cores; f32 in\n"
    "                     3xTF32),attention_fwd_wgmma (Hopper's wgmma, ahead of mma\n"
    "                     on sm_90 for f16 and bf16),\n"
    "                     attention_fwd_cpu (CPUs but llvmpipe),attention_bwd,\n"
    "                     attention_bwd_mma (NVIDIA tensor cores),\n"
    "                     attention_decode,attention_decode_mma (NVIDIA tensor cores)\n"
    "                     (fcl_attention_kvcache; also the forward of few query rows\n"
    "                     against many keys),rwkv6_recurrent,rwkv6_chunked,\n"
    "                     rwkv6_chunked_mma,rwkv6_bwd,rwkv6_bwd_chunked,\n"
    "                     rwkv6_bwd_chunked_mma,rwkv7_chunked,rwkv7_chunked_mma,\n"
    "                     rwkv7_recurrent,rwkv7_bwd (aliases\n"
    "                     fwd = the forwards, bwd, decode, rwkv6-fwd = both\n"
    "                     algorithms, rwkv6-bwd, rwkv7-fwd, rwkv7-bwd, all;\n"
    "                     default all). Where attention_fwd_cpu runs, the portable\n"
    "                     attention_fwd (FCL_CPU_KERNEL=0) is tuned only when named,\n"
    "                     and so are attention_fwd and attention_bwd for the classes\n"
    "                     the tensor cores take\n"
    "  --dtypes LIST      f32,f16,bf16 (default all three)\n"
    "  --head-dims LIST   head dims tuned, D = Dv (RWKV6: K = V) (default 64,128)\n"
    "  --causal LIST      attention forward and backward: 0,1 (default both)\n"
    "  --buckets LIST     sequence-length buckets 0..3 (<=256, <=1024, <=4096, longer;\n"
    "                     timed at 256, 1024, 4096, 16384; decode: the cache's\n"
    "                     capacity, full, one query token) (default all)\n"
    "  --budget SECONDS   time per device (default 480)\n"
    "  --exhaustive       time every valid configuration, ignoring the budget\n"
    "  --resume           skip the classes the database already holds for the device\n"
    "                     (same driver and kernel sources): a tune cut short, by the\n"
    "                     budget or Ctrl-C, goes on where it stopped\n"
    "  --iters N          timed runs per candidate, at least (default 5)\n"
    "  --max-tries N      candidates per class at most (default: as the budget allows)\n"
    "  --warmup N         untimed runs first (default 1)\n"
    "  --show             print what the database holds for the device\n"
    "  --export FILE      write the device's rows as a JSON array of row objects, keyed\n"
    "                     by the database's column names (- for stdout)\n"
    "  --import FILE      add the rows of such a file (- for stdin; needs no device);\n"
    "                     every row is checked first, and a bad one imports nothing\n"
    "  --verbose          every candidate and why it was rejected\n"
    "  --replay LOG       judge the search, not the device: take each candidate's time\n"
    "                     from LOG (the --exhaustive --verbose log of one class, which\n"
    "                     the other options must select), store nothing, and report\n"
    "                     how far the search ends from LOG's best (exit 1 if over 3%%)\n"
    "\n"
    "Exit status:\n"
    "  0  finished: every selected class was tuned, or given up and left at the\n"
    "     built-in defaults with the reason in the summary (one run of the defaults\n"
    "     too slow to time at the class's length, or they do not build on the\n"
    "     device); --show, --export, --import: done\n"
    "  1  failure: no such device, the database cannot be opened or written, an\n"
    "     import refused (nothing imported), or a measurement error: the defaults\n"
    "     of a class built but failed to run or gave wrong answers\n"
    "  2  usage: an unknown option, a bad or missing value\n"
    "  3  stopped by --budget or Ctrl-C/SIGTERM with classes not yet tried; what\n"
    "     was measured is stored, and --resume goes on from there\n"
    "  With --device all: the most serious over the devices, 1 over 3 over 0.\n"
    "  With --replay: 0 within 3%% of LOG's best, 1 if not, 2 if the replay\n"
    "  cannot be made (options selecting other than one class, no --max-tries,\n"
    "  an unreadable LOG or one without the defaults).\n");
}

/* Exit statuses (see usage). */
enum { EXIT_DONE = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_STOPPED = 3 };

/* The comma-separated items of a flag's value; -1 (said why) when there
 * are none or more than max. */
static int split(const char *flag, const char *s, char items[][32], int max) {
  int n = 0;
  while (*s) {
    const char *e = strchr(s, ',');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if (n == max) {
      fprintf(stderr, "fa-tune: %s: at most %d values\n", flag, max);
      return -1;
    }
    snprintf(items[n++], 32, "%.*s", (int)(len < 31 ? len : 31), s);
    s += len + (e != NULL);
  }
  if (n == 0) fprintf(stderr, "fa-tune: %s: no value given\n", flag);
  return n ? n : -1;
}

/* Adds every variant of op (all with op < 0). */
static void add_op(options *o, int op) {
  for (int i = 0; i < fcl_variant_count(); ++i)
    if (op < 0 || fcl_variant_op(fcl_variant_at(i)) == (fcl_tuning_op)op) o->wanted[i] = true;
}

static bool parse_ops(options *o, const char *s) {
  char items[16][32];
  int n = split("--ops", s, items, 16);
  if (n < 0) return false;
  for (int i = 0; i < n; ++i) {
    const fcl_variant *v = fcl_variant_find(items[i]);
    if (strcmp(items[i], "all") == 0) {
      add_op(o, -1);
    } else if (strcmp(items[i], "fwd") == 0) {
      add_op(o, FCL_TUNING_ATTENTION_FWD);
    } else if (strcmp(items[i], "bwd") == 0) {
      add_op(o, FCL_TUNING_ATTENTION_BWD);
    } else if (strcmp(items[i], "decode") == 0) {
      add_op(o, FCL_TUNING_ATTENTION_DECODE);
    } else if (strcmp(items[i], "rwkv6-fwd") == 0) {
      add_op(o, FCL_TUNING_RWKV6_RECURRENT);
      add_op(o, FCL_TUNING_RWKV6_CHUNKED);
    } else if (strcmp(items[i], "rwkv6-bwd") == 0) {
      add_op(o, FCL_TUNING_RWKV6_BWD);
      add_op(o, FCL_TUNING_RWKV6_BWD_CHUNKED);
    } else if (strcmp(items[i], "rwkv7-fwd") == 0) {
      add_op(o, FCL_TUNING_RWKV7_RECURRENT);
    } else if (strcmp(items[i], "rwkv7-bwd") == 0) {
      add_op(o, FCL_TUNING_RWKV7_BWD);
    } else if (v) {
      for (int j = 0; j < fcl_variant_count(); ++j)
        if (fcl_variant_at(j) == v) o->wanted[j] = o->named[j] = true;
    } else {
      fprintf(stderr, "fa-tune: --ops: unknown op '%s'\n", items[i]);
      return false;
    }
  }
  return true;
}

static bool parse_ints(const char *flag, const char *s, int *out, int *n, int max, int lo,
                       int hi) {
  char items[16][32];
  *n = split(flag, s, items, max);
  if (*n < 0) return false;
  for (int i = 0; i < *n; ++i) {
    char *end;
    long v = strtol(items[i], &end, 10);
    if (*end || end == items[i] || v < lo || v > hi) {
      fprintf(stderr, "fa-tune: %s: '%s' is not in %d..%d\n", flag, items[i], lo, hi);
      return false;
    }
    out[i] = (int)v;
  }
  return true;
}

/* 0, or EXIT_USAGE (said why). */
static int parse(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  o->budget_s = 480;
  o->st.iters = 5;
  o->st.warmup = 1;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool needs = strcmp(a, "--device") == 0 || strcmp(a, "--db") == 0 ||
                 strcmp(a, "--ops") == 0 || strcmp(a, "--dtypes") == 0 ||
                 strcmp(a, "--head-dims") == 0 || strcmp(a, "--causal") == 0 ||
                 strcmp(a, "--buckets") == 0 || strcmp(a, "--budget") == 0 ||
                 strcmp(a, "--export") == 0 || strcmp(a, "--import") == 0 ||
                 strcmp(a, "--iters") == 0 || strcmp(a, "--warmup") == 0 ||
                 strcmp(a, "--max-tries") == 0 || strcmp(a, "--replay") == 0;
    if (needs && !v) {
      fprintf(stderr, "fa-tune: %s needs a value\n", a);
      return EXIT_USAGE;
    }
    if (needs) ++i;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--device") == 0) {
      o->device = v;
      o->all_devices = strcmp(v, "all") == 0;
    } else if (strcmp(a, "--db") == 0) {
      o->db = v;
    } else if (strcmp(a, "--ops") == 0) {
      if (!parse_ops(o, v)) return EXIT_USAGE;
    } else if (strcmp(a, "--dtypes") == 0) {
      char items[8][32];
      o->ndtypes = split(a, v, items, 3);
      if (o->ndtypes < 0) return EXIT_USAGE;
      for (int j = 0; j < o->ndtypes; ++j)
        if (!fcl_dtype_from_name(items[j], &o->dtypes[j])) {
          fprintf(stderr, "fa-tune: --dtypes: unknown dtype '%s' (f32, f16, bf16)\n", items[j]);
          return EXIT_USAGE;
        }
    } else if (strcmp(a, "--head-dims") == 0) {
      if (!parse_ints(a, v, o->dims, &o->ndims, 8, 1, 512)) return EXIT_USAGE;
    } else if (strcmp(a, "--causal") == 0) {
      if (!parse_ints(a, v, o->causal, &o->ncausal, 2, 0, 1)) return EXIT_USAGE;
    } else if (strcmp(a, "--buckets") == 0) {
      if (!parse_ints(a, v, o->buckets, &o->nbuckets, FCL_SEQLEN_BUCKETS, 0,
                      FCL_SEQLEN_BUCKETS - 1))
        return EXIT_USAGE;
    } else if (strcmp(a, "--budget") == 0) {
      char *end;
      o->budget_s = strtod(v, &end);
      if (end == v || *end || !(o->budget_s > 0) || !isfinite(o->budget_s)) {
        fprintf(stderr, "fa-tune: --budget: '%s' is not a positive number of seconds\n", v);
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--iters") == 0 || strcmp(a, "--warmup") == 0) {
      int x, n;
      if (!parse_ints(a, v, &x, &n, 1, a[2] == 'w' ? 0 : 1, 64)) return EXIT_USAGE;
      *(a[2] == 'w' ? &o->st.warmup : &o->st.iters) = x;
    } else if (strcmp(a, "--max-tries") == 0) {
      int n;
      if (!parse_ints(a, v, &o->st.max_tries, &n, 1, 1, 1 << 20)) return EXIT_USAGE;
    } else if (strcmp(a, "--export") == 0) {
      o->export_file = v;
    } else if (strcmp(a, "--import") == 0) {
      o->import_file = v;
    } else if (strcmp(a, "--replay") == 0) {
      o->replay_file = v;
    } else if (strcmp(a, "--list-devices") == 0) {
      o->list = true;
    } else if (strcmp(a, "--show") == 0) {
      o->show = true;
    } else if (strcmp(a, "--resume") == 0) {
      o->resume = true;
    } else if (strcmp(a, "--exhaustive") == 0) {
      o->st.exhaustive = true;
    } else if (strcmp(a, "--verbose") == 0) {
      o->st.verbose = true;
    } else {
      fprintf(stderr, "fa-tune: unknown option '%s'\n", a);
      usage(stderr);
      return EXIT_USAGE;
    }
  }
  bool any = false;
  for (int i = 0; i < fcl_variant_count(); ++i) any |= o->wanted[i];
  if (!any) parse_ops(o, "all");
  if (!o->ndtypes) {
    o->dtypes[0] = FCL_F32, o->dtypes[1] = FCL_F16, o->dtypes[2] = FCL_BF16;
    o->ndtypes = 3;
  }
  if (!o->ndims) o->dims[0] = 64, o->dims[1] = 128, o->ndims = 2;
  if (!o->ncausal) o->causal[0] = 0, o->causal[1] = 1, o->ncausal = 2;
  if (!o->nbuckets)
    for (int b = 0; b < FCL_SEQLEN_BUCKETS; ++b) o->buckets[o->nbuckets++] = b;
  return 0;
}

/* Every (platform, device) as "P:D" selectors. */
static int list_devices(char sel[][16], int max, bool print) {
  cl_platform_id plats[16];
  cl_uint np = 0;
  if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) np = 0;
  int n = 0;
  for (cl_uint p = 0; p < np; ++p) {
    cl_device_id devs[16];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS) continue;
    char pname[256] = "";
    clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    for (cl_uint d = 0; d < nd; ++d) {
      char dname[256] = "", drv[128] = "";
      clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof dname, dname, NULL);
      clGetDeviceInfo(devs[d], CL_DRIVER_VERSION, sizeof drv, drv, NULL);
      if (print) printf("%u:%u  %s / %s (driver %s)\n", p, d, pname, dname, drv);
      if (n < max) snprintf(sel[n++], 16, "%u:%u", p, d);
    }
  }
  return n;
}

typedef struct {
  fcl_tuning_class cls;
  tune_result      res;
} tuned;

static void describe(const fcl_tuning_class *c, char *out, size_t n) {
  const bool attn = tune_is_attention(c->variant);
  snprintf(out, n, "%s %s d=%d%s %s %lld", fcl_variant_name(c->variant),
           fcl_dtype_name(c->dtype), c->head_dim, attn ? (c->causal ? " causal" : " full") : "",
           tune_is_kvcache(c->variant) ? "cache" : "len",
           (long long)fcl_seqlen_bucket_length(c->bucket));
}

/* Tuning order: the registry's (flashcl_tuning.h), what the library runs
 * most first, so that a budget spent early leaves the less used classes
 * untuned, not the forward. */
static int classes_of(const options *o, fcl_tuning_class *out, int max) {
  int n = 0;
  for (int ki = 0; ki < fcl_variant_count(); ++ki) {
    if (!o->wanted[ki]) continue;
    const fcl_variant *v = fcl_variant_at(ki);
    const bool attn = tune_is_attention(v);
    for (int t = 0; t < o->ndtypes; ++t)
      for (int d = 0; d < o->ndims; ++d)
        for (int c = 0; c < (attn ? o->ncausal : 1); ++c)
          for (int b = 0; b < o->nbuckets && n < max; ++b)
            out[n++] = (fcl_tuning_class){v, o->dtypes[t], o->dims[d], o->dims[d],
                                          attn ? o->causal[c] : 0, o->buckets[b]};
  }
  return n;
}

static int store(const char *path, fcl_context *ctx, const tuned *rows, int n) {
  char why[1024];
  sqlite3 *db = tune_db_open(path, why, sizeof why);
  if (!db) {
    fprintf(stderr, "fa-tune: %s; %d results not stored\n", why, n);
    return 1;
  }
  bool ok = tune_db_begin(db, why, sizeof why);
  for (int i = 0; i < n && ok; ++i) ok = tune_db_put(db, ctx, &rows[i].cls, &rows[i].res, why, sizeof why);
  ok = ok && tune_db_commit(db, why, sizeof why);
  if (!ok) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    fprintf(stderr, "fa-tune: %s: %s; nothing stored\n", path, why);
  } else {
    fprintf(stderr, "fa-tune: stored %d rows in %s\n", n, path);
  }
  tune_db_close(db);
  return ok ? 0 : 1;
}

/* --resume: marks the classes the database holds already as dropped. */
static int drop_tuned(const char *path, fcl_context *ctx, fcl_tuning_class *cls, int n) {
  char why[1024];
  sqlite3 *db = tune_db_open(path, why, sizeof why);
  if (!db) return 0; /* tuning will say why it cannot store */
  int held = 0;
  for (int i = 0; i < n; ++i)
    if (cls[i].variant && tune_db_has(db, ctx, &cls[i])) {
      cls[i].variant = NULL;
      ++held;
    }
  tune_db_close(db);
  return held;
}

/* fa-tune --replay: the guided search of one class run on LOG's timings,
 * judged against LOG's best (within 3%: 0, else 1; 2 for usage). */
static int run_replay(fcl_context *ctx, const fcl_tuning_class *cls, const tune_settings *st,
                    const char *file) {
  char why[512];
  if (st->max_tries <= 0) {
    fprintf(stderr, "fa-tune: --replay needs --max-tries (no time passes in a replay)\n");
    return 2;
  }
  tune_replay *r = tune_replay_load(file, why, sizeof why);
  if (!r) {
    fprintf(stderr, "fa-tune: --replay: %s\n", why);
    return 2;
  }
  tune_settings rs = *st;
  rs.replay = r;
  rs.exhaustive = false;
  tune_result res;
  int rc = 2;
  if (!tune_class(ctx, cls, &rs, &res, why, sizeof why)) {
    fprintf(stderr, "fa-tune: --replay: %s\n", why);
  } else {
    const double best = res.replay_best_ms;
    const double off = res.ms / best - 1.0;
    printf("replay: search ended at %s, %.4f ms, after %d of %d valid points (%d recorded)\n"
           "replay: recorded best    %s, %.4f ms; defaults %.4f ms\n"
           "replay: %.1f%% from the best: %s\n",
           res.params, res.ms, res.tried, res.points, tune_replay_count(r), res.replay_best,
           best, res.default_ms, 100.0 * off, off <= 0.03 ? "within 3%" : "NOT within 3%");
    rc = off <= 0.03 ? 0 : 1;
  }
  tune_replay_free(r);
  return rc;
}

/* A class not tuned, and why. */
typedef struct {
  fcl_tuning_class cls;
  bool             failed; /* a measurement error, not given up */
  char             why[512];
} untuned;

/* EXIT_DONE, EXIT_STOPPED (budget or Ctrl-C with classes left) or
 * EXIT_FAILED; --show/--export and --replay keep their own. */
static int tune_device(const options *o, const char *sel, const char *path) {
  fcl_context *ctx = NULL;
  if (fcl_context_create(sel, &ctx) != FCL_OK) {
    fprintf(stderr, "fa-tune: device '%s': %s\n", sel ? sel : "(default)",
            fcl_context_last_error(NULL));
    return EXIT_FAILED;
  }
  /* Candidates are timed from the kernels' profiling events. */
  if (fcl_context_set_option(ctx, FCL_OPTION_TIMING, 1) != FCL_OK) {
    fprintf(stderr, "fa-tune: device '%s': %s\n", sel ? sel : "(default)",
            fcl_context_last_error(ctx));
    fcl_context_destroy(ctx);
    return EXIT_FAILED;
  }
  int status = EXIT_DONE;
  if (o->show || o->export_file) {
    char why[1024];
    sqlite3 *db = tune_db_open(path, why, sizeof why);
    if (!db) {
      fprintf(stderr, "fa-tune: %s\n", why);
      fcl_context_destroy(ctx);
      return EXIT_FAILED;
    }
    if (o->show && tune_db_show(db, ctx)) status = EXIT_FAILED;
    if (o->export_file && tune_db_export(db, ctx, o->export_file)) status = EXIT_FAILED;
    tune_db_close(db);
    fcl_context_destroy(ctx);
    return status;
  }
  enum { MAXC = 512 };
  static fcl_tuning_class cls[MAXC];
  static tuned done[MAXC];
  int n = classes_of(o, cls, MAXC);
  if (o->replay_file) {
    if (n != 1) {
      fprintf(stderr, "fa-tune: --replay: the options select %d classes; name one (--ops, "
              "--dtypes, --head-dims, --causal, --buckets)\n", n);
      status = EXIT_USAGE;
    } else {
      tune_settings st = o->st;
      st.budget_s = o->budget_s;
      status = run_replay(ctx, &cls[0], &st, o->replay_file);
    }
    fcl_context_destroy(ctx);
    return status;
  }
  /* Each variant only for the classes the library runs it on here (its
   * plan: the tensor cores on NVIDIA, the CPU forward on CPUs), or where it
   * stands in if named in --ops (not by an alias): the portable kernels.
   * Without this the H100's budget went to portable classes that never
   * run (274 of 480 s). */
  for (int i = 0; i < n; ++i) {
    int vi = 0;
    while (fcl_variant_at(vi) != cls[i].variant) ++vi;
    bool runs = false;
    if (fcl_tuning_runs(ctx, &cls[i], o->named[vi], &runs) != FCL_OK) runs = false;
    if (!runs) cls[i].variant = NULL; /* dropped below */
  }
  int held = 0;
  if (o->resume) held = drop_tuned(path, ctx, cls, n);
  int kept = 0;
  for (int i = 0; i < n; ++i)
    if (cls[i].variant) cls[kept++] = cls[i];
  n = kept;
  if (o->resume) fprintf(stderr, "fa-tune: --resume: %d classes tuned already\n", held);
  static untuned skipped[MAXC];
  int ndone = 0, nskipped = 0, nfailed = 0;
  const double t0 = tu_now();
  fprintf(stderr, "fa-tune: %s: %d problem classes, budget %g s\n",
          fcl_context_device_name(ctx), n, o->budget_s);
  tune_progress_start(n, o->budget_s);
  for (int i = 0; i < n && !tune_interrupted; ++i) {
    char what[160], why[512];
    if (tu_now() - t0 > o->budget_s) break; /* said in the summary */
    describe(&cls[i], what, sizeof what);
    tune_progress_update(i, what);
    tune_settings st = o->st;
    st.budget_s = (o->budget_s - (tu_now() - t0)) / (n - i);
    if (st.budget_s < 0.5) st.budget_s = 0.5;
    for (int j = ndone - 1; j >= 0 && !st.seed; --j)
      if (done[j].cls.variant == cls[i].variant && done[j].cls.dtype == cls[i].dtype &&
          done[j].cls.head_dim == cls[i].head_dim)
        st.seed = done[j].res.params;
    tune_result r;
    if (!tune_class(ctx, &cls[i], &st, &r, why, sizeof why)) {
      untuned *u = &skipped[nskipped++];
      u->cls = cls[i];
      u->failed = !r.given_up;
      nfailed += u->failed;
      snprintf(u->why, sizeof u->why, "%s", why);
      tune_log("fa-tune: %s: not tuned, %s: %s", what,
               u->failed ? "failed" : "given up (built-in defaults kept)", why);
      continue;
    }
    done[ndone].cls = cls[i];
    done[ndone++].res = r;
    tune_log("fa-tune: %-44s %s  %.4f ms, %.2fx the defaults (%.3g %s; %d of %d points "
             "tried, %d rejected)",
             what, r.params, r.ms, r.default_ms / r.ms,
             tune_throughput(cls[i].variant, r.work, r.ms), tune_unit(cls[i].variant), r.tried,
             r.points, r.rejected);
  }
  tune_progress_end();
  /* The summary: what was tuned, each class given up or failed and why,
   * and what is left for --resume. */
  const int left = n - ndone - nskipped;
  if (tune_interrupted) fprintf(stderr, "fa-tune: interrupted; keeping %d results\n", ndone);
  fprintf(stderr, "fa-tune: %s: %d of %d classes tuned in %.0f s", fcl_context_device_name(ctx),
          ndone, n, tu_now() - t0);
  if (nskipped - nfailed) fprintf(stderr, "; %d given up", nskipped - nfailed);
  if (nfailed) fprintf(stderr, "; %d failed", nfailed);
  if (left) fprintf(stderr, "; %d not tried", left);
  fprintf(stderr, "\n");
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < nskipped; ++i) {
      if (skipped[i].failed != (pass == 1)) continue;
      char what[160];
      describe(&skipped[i].cls, what, sizeof what);
      fprintf(stderr, "fa-tune:   %s: %s: %s\n", what,
              pass ? "FAILED" : "given up (built-in defaults kept)", skipped[i].why);
    }
  if (left && tune_interrupted)
    fprintf(stderr, "fa-tune: stopped by a signal with %d classes not tried; go on with "
            "--resume\n", left);
  else if (left)
    fprintf(stderr, "fa-tune: stopped: the budget of %g s is spent with %d classes not tried "
            "(go on with --resume, give a larger --budget, or take fewer --ops/--dtypes/"
            "--head-dims/--buckets)\n", o->budget_s, left);
  if (ndone && store(path, ctx, done, ndone)) status = EXIT_FAILED;
  fcl_context_destroy(ctx);
  if (status == EXIT_DONE && nfailed) status = EXIT_FAILED;
  if (status == EXIT_DONE && left) status = EXIT_STOPPED;
  return status;
}

/* The most serious of two statuses: 2 (usage, --replay) over 1 over 3
 * over 0. */
static int worst(int a, int b) {
  static const int rank[4] = {0, 2, 3, 1};
  return rank[a & 3] >= rank[b & 3] ? a : b;
}

/* Ctrl-C (or a SIGTERM from `timeout`): finish the candidate in hand, then
 * store what was measured. A second one ends at once. */
static void on_stop(int sig) {
  tune_interrupted = 1;
  signal(sig, SIG_DFL);
}

int main(int argc, char **argv) {
  options o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc;
  char sel[64][16];
  if (o.list) {
    list_devices(sel, 64, true);
    return EXIT_DONE;
  }
  char path[4096];
  if (o.db) snprintf(path, sizeof path, "%s", o.db);
  else if (!fcl_tuning_db_path(path, sizeof path)) {
    fprintf(stderr, "fa-tune: no database path: give --db (FCL_TUNING_DB is off or HOME unset)\n");
    return EXIT_USAGE;
  }
  /* The database is opened (made if need be) before any device is
   * measured, so that one that cannot be written fails at once, not after
   * the budget is spent; an import needs no device. */
  if (!o.replay_file) {
    char why[1024];
    sqlite3 *db = tune_db_open(path, why, sizeof why);
    if (!db) {
      fprintf(stderr, "fa-tune: %s\n", why);
      return EXIT_FAILED;
    }
    if (o.import_file) rc = tune_db_import(db, o.import_file) ? EXIT_FAILED : EXIT_DONE;
    tune_db_close(db);
    if (o.import_file && (rc || (!o.show && !o.export_file))) return rc;
  }
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  if (!o.all_devices) return tune_device(&o, o.device, path);
  const int n = list_devices(sel, 64, false);
  if (n == 0) {
    fprintf(stderr, "fa-tune: --device all: no OpenCL devices\n");
    return EXIT_FAILED;
  }
  int i = 0;
  for (; i < n && !tune_interrupted; ++i) rc = worst(rc, tune_device(&o, sel[i], path));
  if (i < n) rc = worst(rc, EXIT_STOPPED); /* devices left after Ctrl-C */
  return rc;
}
