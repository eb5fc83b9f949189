/* fa-tune's search for one problem class: every candidate is checked
 * against the double-precision reference on a small problem, then timed
 * with profiling events (warm-up, median of several runs) on a problem of
 * the class's representative length (or, with --replay, looked up in a
 * recorded log). Exhaustive when the space is small or asked for;
 * otherwise coordinate descent from the built-in defaults (and from the
 * sibling class's best), then descents from random points, within the
 * class's time budget. */
#include "tune.h"

#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXHAUSTIVE_LIMIT 40  /* valid points below which every one is timed */
#define MAX_POINTS 4096      /* valid points kept                         */
#define TARGET_RUN_MS_GPU 20.0
#define TARGET_RUN_MS_CPU 60.0
#define MAX_RUN_MS 2000.0    /* a bucket whose defaults take longer is skipped */
#define FILL_MAX_RUN_MS 400.0 /* longest run sized to fill the device       */
#define MIN_GPU_ATTENTION_BH 32 /* sequences of a GPU attention timing problem */
/* Decode: batch * KV heads of the timing problem, one layer of a GQA model
 * (8 KV heads, 32 query heads) on a GPU, then up to 4 sequences. */
#define MIN_GPU_DECODE_BH 8
#define MAX_DECODE_BH 32
/* A candidate must beat the defaults by this much to replace them: less is
 * within the noise of timings, and of the difference between the timing
 * problem and the user's shapes. */
#define NOISE_MARGIN 0.97
/* A candidate whose run takes this many times the best so far is not run
 * again: it cannot win, and a spilling one took 0.5 s a run on the H100. */
#define CUTOFF_FACTOR 2.0

typedef struct {
  int    idx[FCL_TUNING_MAX_AXES];
  char   params[160];
  double ms; /* < 0: not yet timed; INFINITY: rejected */
} point;

typedef struct {
  fcl_context         *ctx;
  const tune_settings *st;
  tune_space           sp;
  tune_workload       *check, *timing;
  point               *pts;
  int                  npts;
  int                  iters;
  double               deadline;
  double               build_s; /* build and check of the last candidate */
  bool                 cut;     /* its timing stopped at the cutoff       */
  tune_result         *res;
  /* Why the class may end untuned: the defaults too slow to time, and the
   * status of the last failed run (FCL_OK: none). */
  bool                 too_slow;
  fcl_status           status;
} search;

static double now(void) { return tu_now(); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median device time of the timing problem; negative on failure. A run
 * over cutoff_ms ends the timing with that run's time. */
static double time_runs(search *s, int warmup, int iters, double cutoff_ms, char *why,
                        size_t n) {
  double ms[64];
  if (iters > 64) iters = 64;
  s->cut = false;
  for (int i = 0; i < warmup + iters; ++i) {
    fcl_status st = tune_workload_run(s->timing);
    double t = 0;
    if (st == FCL_OK) st = fcl_context_last_op_time(s->ctx, &t);
    if (st != FCL_OK) {
      snprintf(why, n, "%s: %s", fcl_status_string(st), fcl_context_last_error(s->ctx));
      s->status = st;
      return -1;
    }
    if (t > cutoff_ms) {
      s->cut = true;
      return t;
    }
    if (i >= warmup) ms[i - warmup] = t;
  }
  qsort(ms, (size_t)iters, sizeof ms[0], cmp_double);
  return ms[iters / 2];
}

/* A recorded time (--replay) in place of checking and timing. */
static double replayed(search *s, const char *params, char *why, size_t n) {
  double ms = tune_replay_ms(s->st->replay, params);
  if (ms < 0) snprintf(why, n, "not in the recording");
  else if (isinf(ms)) snprintf(why, n, "rejected in the recording");
  if (!(ms >= 0 && isfinite(ms))) ms = -1;
  s->res->tried++;
  if (ms < 0) s->res->rejected++;
  else s->res->timed++;
  return ms;
}

/* Checks and times one parameter set. */
static double evaluate(search *s, const char *params, char *why, size_t n) {
  if (s->st->replay) return replayed(s, params, why, n);
  const fcl_variant *k = s->sp.cls.variant;
  const double t0 = now();
  fcl_status st = fcl_tuning_override(s->ctx, k, params);
  double ms = -1;
  if (st == FCL_OK) st = tune_workload_poison(s->check);
  if (st == FCL_OK) st = tune_workload_run(s->check);
  if (st != FCL_OK) {
    /* The first line of a build log is enough to say why. */
    snprintf(why, n, "%s: %.200s", fcl_status_string(st), fcl_context_last_error(s->ctx));
    s->status = st;
    char *nl = strchr(why, '\n');
    if (nl) *nl = '\0';
  } else if (tune_workload_check(s->check, why, n)) {
    s->build_s = now() - t0;
    ms = time_runs(s, s->st->warmup, s->iters, CUTOFF_FACTOR * s->res->ms, why, n);
  }
  fcl_tuning_override(s->ctx, k, NULL);
  s->res->tried++;
  if (ms < 0) s->res->rejected++;
  else s->res->timed++;
  return ms;
}

/* Enumerates the valid points of the space (in axis order). */
static void enumerate(search *s) {
  int idx[FCL_TUNING_MAX_AXES] = {0};
  s->pts = calloc(MAX_POINTS, sizeof *s->pts);
  if (!s->pts) return;
  for (;;) {
    fcl_config cfg;
    fcl_tuning_defaults(s->ctx, &s->sp.cls, &cfg);
    tune_space_config(&s->sp, idx, &cfg);
    if (s->npts < MAX_POINTS && fcl_tuning_valid(s->ctx, &s->sp.cls, &cfg, NULL, 0) &&
        fcl_tuning_worth_trying(s->ctx, &s->sp.cls, &cfg)) {
      point *p = &s->pts[s->npts];
      memcpy(p->idx, idx, sizeof idx);
      fcl_params_format(s->sp.cls.variant, &cfg, p->params, sizeof p->params);
      p->ms = -1;
      bool dup = false;
      for (int i = 0; i < s->npts && !dup; ++i) dup = strcmp(s->pts[i].params, p->params) == 0;
      if (!dup) s->npts++;
    }
    int a = 0;
    while (a < s->sp.naxes && ++idx[a] == s->sp.axes[a].n) idx[a++] = 0;
    if (a == s->sp.naxes) break;
  }
}

static point *find(search *s, const int *idx) {
  for (int i = 0; i < s->npts; ++i)
    if (memcmp(s->pts[i].idx, idx, sizeof(int) * (size_t)s->sp.naxes) == 0) return &s->pts[i];
  return NULL;
}

static bool out_of_time(const search *s) {
  return tune_interrupted || (!s->st->exhaustive && now() > s->deadline) ||
         (s->st->max_tries > 0 && s->res->tried >= s->st->max_tries);
}

static double time_point(search *s, point *p) {
  if (p->ms >= 0) return p->ms;
  char why[320];
  double ms = evaluate(s, p->params, why, sizeof why);
  p->ms = ms < 0 ? INFINITY : ms;
  if (s->st->verbose && ms < 0) tune_log("  %-66s rejected: %s", p->params, why);
  if (s->st->verbose && ms >= 0)
    tune_log("  %-66s %.4f ms (build and check %.2f s%s)", p->params, ms, s->build_s,
             s->cut ? "; stopped after a run over twice the best" : "");
  if (ms >= 0 && ms < s->res->ms) {
    s->res->ms = ms;
    snprintf(s->res->params, sizeof s->res->params, "%s", p->params);
  }
  return p->ms;
}

/* Coordinate descent: move along one axis at a time while it helps
 * (values invalid here are stepped over). Moving two coupled axes at once
 * and screening restarts were tried against recorded landscapes
 * (--replay) and did worse for the same number of candidates. */
static void descend(search *s, point *start) {
  point *cur = start;
  double best = time_point(s, cur);
  bool improved = true;
  while (improved && !out_of_time(s)) {
    improved = false;
    for (int a = 0; a < s->sp.naxes && !out_of_time(s); ++a) {
      for (int dir = -1; dir <= 1; dir += 2) {
        int idx[FCL_TUNING_MAX_AXES];
        memcpy(idx, cur->idx, sizeof idx);
        for (;;) {
          idx[a] += dir;
          if (idx[a] < 0 || idx[a] >= s->sp.axes[a].n || out_of_time(s)) break;
          point *p = find(s, idx);
          if (!p) continue;
          double ms = time_point(s, p);
          if (!(ms < best)) break;
          best = ms, cur = p, improved = true;
        }
      }
    }
  }
}

/* The grid point nearest to the built-in defaults (by parameter text
 * distance: the number of differing parameters, then the first found). */
static point *nearest_to(search *s, const char *params) {
  point *best = NULL;
  int best_d = 1 << 30;
  for (int i = 0; i < s->npts; ++i) {
    int d = 0;
    const char *a = s->pts[i].params, *b = params;
    while (*a && *b) {
      const char *ea = strchr(a, ','), *eb = strchr(b, ',');
      size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
      d += la != lb || strncmp(a, b, la) != 0;
      a += la + (ea != NULL), b += lb + (eb != NULL);
    }
    if (d < best_d) best_d = d, best = &s->pts[i];
  }
  return best;
}

/* With the time left: descents from random untimed points. */
static void restarts(search *s) {
  tu_rng g;
  tu_rng_seed(&g, 12345);
  while (!out_of_time(s)) {
    point *p = &s->pts[tu_rng_int(&g, 0, s->npts - 1)];
    if (p->ms >= 0) {
      bool all = true;
      for (int i = 0; i < s->npts && all; ++i) all = s->pts[i].ms >= 0;
      if (all) break;
      continue;
    }
    descend(s, p);
  }
}

static int64_t pow2_floor(double x) {
  int64_t p = 1;
  while ((double)(p * 2) <= x) p *= 2;
  return p;
}

/* One sequence at lengths 4x apart below T, each run predicting the next
 * by the growth of the work (T^2 attention, T RWKV6 and decode): where the defaults
 * would take far too long at T (the attention backward at 16384 on a CPU:
 * 15 to 50 s), the class is given up after short runs. */
static bool affordable(search *s, int64_t T, char *why, size_t n) {
  const bool attn = tune_is_attention(s->sp.cls.variant);
  for (int64_t len = 1024; len < T; len *= 4) {
    s->timing = tune_workload_create(s->ctx, &s->sp.cls, len, 1, false, why, n);
    if (!s->timing) return false;
    const double ms = time_runs(s, 0, 1, INFINITY, why, n);
    tune_workload_free(s->timing);
    s->timing = NULL;
    if (ms < 0) return false;
    const int64_t next = len * 4 < T ? len * 4 : T;
    const double grow = (double)next / (double)len;
    const double guess = ms * (attn ? grow * grow : grow);
    if (guess > 2 * MAX_RUN_MS) {
      s->too_slow = true;
      snprintf(why, n, "one run of the defaults would take about %.0f ms at length %lld "
               "(%.0f ms at %lld)", guess, (long long)next, ms, (long long)len);
      return false;
    }
  }
  return true;
}

/* The timing problem: the bucket's length and as many sequences as bring
 * one run of the defaults near the target time and fill the device.
 * Sized from one sequence upwards, so a slow device never runs a huge
 * problem to find out. Filling matters where one sequence is long work
 * but little parallelism (RWKV6 walks its length in order): at the
 * target time alone the H100 timed 1 to 2 sequences at length 4096 and
 * stored an RWKV6 backward that was 1.4x faster there and 2.4x slower
 * with 256 sequences. */
static bool make_timing(search *s, int64_t T, char *why, size_t n) {
  const bool attn = tune_is_attention(s->sp.cls.variant);
  const bool decode = tune_is_kvcache(s->sp.cls.variant);
  int64_t max_bh = decode ? MAX_DECODE_BH : attn ? 128 : 256;
  fcl_tuning_device dev;
  const bool is_cpu = fcl_tuning_device_info(s->ctx, &dev) == FCL_OK && dev.is_cpu;
  const double target = is_cpu ? TARGET_RUN_MS_CPU : TARGET_RUN_MS_GPU;
  if (!affordable(s, T, why, n)) return false;
  /* GPU attention is timed with at least the heads of one model (32
   * sequences) where runs allow: with fewer, the last wave of work-groups
   * weighs more than in real work, and smaller blocks win for that reason
   * alone (the H100 stored a backward tuned on 8 sequences of 4096 that ran
   * 1.04x the defaults there and 0.92x at B=4, H=32). Decode likewise with
   * one layer's KV heads (8, 32 query heads), and at most 4 sequences. */
  int64_t bh = is_cpu ? 1 : attn ? MIN_GPU_ATTENTION_BH : decode ? MIN_GPU_DECODE_BH : 1;
  int64_t prev_bh = 0;
  double prev_ms = 0;
  bool shrunk = false;
  for (int attempt = 0; attempt < 12; ++attempt) {
    s->timing = tune_workload_create(s->ctx, &s->sp.cls, T, bh, false, why, n);
    if (!s->timing && bh > 1) { /* does not fit in memory, say: no more than half */
      max_bh = bh /= 2;
      if (prev_bh >= bh) prev_bh = 0, prev_ms = 0; /* nothing left to grow to */
      continue;
    }
    if (!s->timing) return false;
    double ms = time_runs(s, 1, 1, INFINITY, why, n);
    if (ms < 0) return false;
    if (ms > MAX_RUN_MS && bh > 1 && prev_bh == 0 && !shrunk) { /* the floor is too much */
      tune_workload_free(s->timing);
      s->timing = NULL;
      bh = pow2_floor((double)bh * 0.5 * MAX_RUN_MS / ms); /* once, then size as usual */
      shrunk = true;
      continue;
    }
    if (ms > MAX_RUN_MS) {
      s->too_slow = true;
      snprintf(why, n, "one run of the defaults takes %.0f ms at length %lld", ms,
               (long long)T);
      return false;
    }
    /* Small problems are dominated by fixed costs, so the first estimate
     * is low: grow until a run takes at least half the target. */
    int64_t by_time = pow2_floor(fmax(1.0, (double)bh * target / fmax(ms, 1e-3)));
    if (by_time > max_bh) by_time = max_bh;
    int64_t want = bh;
    if (by_time > bh && ms < 0.5 * target)
      want = by_time;
    /* Then double while more sequences still come nearly free (the device
     * is not full), as long as runs stay short enough to time. */
    else if ((prev_bh == 0 || ms / prev_ms < 0.75 * (double)bh / (double)prev_bh) &&
             2 * bh <= max_bh && 2 * ms <= FILL_MAX_RUN_MS)
      want = 2 * bh;
    if (want == bh) {
      s->res->seqlen = T, s->res->bh = bh;
      s->res->work = tune_workload_work(s->timing);
      /* Enough runs per candidate for a stable median, bounded in time. */
      s->iters = (int)fmin(fmax((double)s->st->iters, 60.0 / fmax(ms, 1e-3)), 25.0);
      return true;
    }
    tune_workload_free(s->timing);
    s->timing = NULL;
    prev_bh = bh, prev_ms = ms;
    bh = want;
  }
  s->too_slow = true;
  snprintf(why, n, "could not size the timing problem");
  return false;
}

bool tune_class(fcl_context *ctx, const fcl_tuning_class *cls, const tune_settings *st,
                tune_result *res, char *why, size_t why_size) {
  memset(res, 0, sizeof *res);
  res->ms = INFINITY;
  search s = {.ctx = ctx, .st = st, .res = res};
  s.deadline = now() + st->budget_s;
  tune_space_init(&s.sp, cls);
  bool ok = false;
  /* The check problem: several tiles, chunks or splits, odd length. */
  if (!st->replay) {
    s.check = tune_workload_create(ctx, cls, tune_check_length(cls->variant), 2, true, why,
                                   why_size);
    if (!s.check || !make_timing(&s, fcl_seqlen_bucket_length(cls->bucket), why, why_size))
      goto done;
  }
  /* The built-in defaults first: the baseline, and the result if nothing
   * beats them. */
  {
    fcl_config cfg;
    fcl_tuning_defaults(ctx, cls, &cfg);
    fcl_params_format(cls->variant, &cfg, res->default_params, sizeof res->default_params);
  }
  s.status = FCL_OK;
  double dms = evaluate(&s, res->default_params, why, why_size);
  if (dms < 0) goto done;
  if (st->verbose) tune_log("  %-66s %.4f ms (the defaults)", res->default_params, dms);
  res->default_ms = res->ms = dms;
  snprintf(res->params, sizeof res->params, "%s", res->default_params);
  enumerate(&s);
  if (!s.pts) {
    snprintf(why, why_size, "out of memory");
    goto done;
  }
  res->points = s.npts;
  /* The defaults' point is timed already: timing it again costs a
   * candidate and makes noise look like a speed-up. */
  for (int i = 0; i < s.npts; ++i)
    if (strcmp(s.pts[i].params, res->default_params) == 0) s.pts[i].ms = dms;
  if (st->replay) { /* the recording may hold points not valid here */
    res->replay_best_ms = INFINITY;
    for (int i = 0; i < s.npts; ++i) {
      const double ms = tune_replay_ms(st->replay, s.pts[i].params);
      if (ms >= 0 && ms < res->replay_best_ms) {
        res->replay_best_ms = ms;
        snprintf(res->replay_best, sizeof res->replay_best, "%s", s.pts[i].params);
      }
    }
  }
  if (st->exhaustive || s.npts <= EXHAUSTIVE_LIMIT) {
    for (int i = 0; i < s.npts && !out_of_time(&s); ++i) time_point(&s, &s.pts[i]);
  } else if (s.npts > 0) {
    if (st->seed) descend(&s, nearest_to(&s, st->seed));
    descend(&s, nearest_to(&s, res->default_params));
    restarts(&s);
  }
  if (strcmp(res->params, res->default_params) != 0 && res->ms > NOISE_MARGIN * res->default_ms) {
    snprintf(res->params, sizeof res->params, "%s", res->default_params);
    res->ms = res->default_ms;
  }
  ok = true;
done:
  /* Given up, not failed: the defaults are too slow to time here, or do
   * not build or are not supported (some classes on some devices). */
  res->given_up = !ok && (s.too_slow || s.status == FCL_ERROR_BUILD ||
                          s.status == FCL_ERROR_UNSUPPORTED);
  free(s.pts);
  tune_workload_free(s.check);
  tune_workload_free(s.timing);
  return ok;
}
