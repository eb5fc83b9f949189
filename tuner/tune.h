/* fa-tune internals shared by its files. fa-tune links the static library
 * and uses its advanced header, flashcl_tuning.h: the kernel variants and
 * their parameters and search spaces, the tuning classes and the override
 * through which it times candidates on the library's own code path. */
#ifndef FCL_TUNE_H
#define FCL_TUNE_H

#define FCL_STATIC_LINKING_ONLY
#include "flashcl_tuning.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- workloads: one problem of a class, with device buffers ---------- */
typedef struct tune_workload tune_workload;
/* A problem of class cls: seqlen tokens (attention: queries and keys;
 * decode: the cache's keys, one query), bh (batch * heads; decode: batch *
 * KV heads) sequences. with_reference computes the double-precision
 * answer for tune_workload_check. NULL with the reason in why. */
tune_workload *tune_workload_create(fcl_context *ctx, const fcl_tuning_class *cls,
                                    int64_t seqlen, int64_t bh, bool with_reference,
                                    char *why, size_t why_size);
fcl_status     tune_workload_run(tune_workload *w);
/* Fills the outputs checked against the reference with NaN. */
fcl_status     tune_workload_poison(tune_workload *w);
/* Whether the outputs of the last run match the reference; why if not. */
bool           tune_workload_check(tune_workload *w, char *why, size_t why_size);
/* Work of one run: FLOPs (attention) or bytes moved (RWKV6, decode). */
double         tune_workload_work(const tune_workload *w);
void           tune_workload_free(tune_workload *w);
/* "TFLOP/s" or "GB/s", for tune_workload_work per second / 1e12 or 1e9. */
const char    *tune_unit(const fcl_variant *v);
double         tune_throughput(const fcl_variant *v, double work, double ms);
/* Whether a variant is attention's (classes by causal, FLOPs as work):
 * the forwards and backwards, not decode. */
bool           tune_is_attention(const fcl_variant *v);
/* Whether a variant is fcl_attention_kvcache's (bytes as work, the time
 * linear in the cache's length). */
bool           tune_is_kvcache(const fcl_variant *v);
/* The length of the check problem (tune_workload_create with the
 * reference): 203 attention queries and keys, 1031 cached keys (decode:
 * several splits), 151 RWKV6 steps. */
int64_t        tune_check_length(const fcl_variant *v);

/* ---- search spaces: the variant's axes (fcl_tuning_axes) ------------- */
typedef struct {
  fcl_tuning_class cls;
  int              naxes;
  fcl_axis         axes[FCL_TUNING_MAX_AXES];
} tune_space;
void tune_space_init(tune_space *sp, const fcl_tuning_class *cls);
/* The configuration at coordinates idx (one value index per axis), over
 * the defaults in cfg. */
void tune_space_config(const tune_space *sp, const int *idx, fcl_config *cfg);
/* Points of the full product (before validity pruning). */
long tune_space_size(const tune_space *sp);

/* ---- replay: recorded timings instead of measurements ----------------- */
typedef struct tune_replay tune_replay;
/* The candidate lines ("  PARAMS  X ms", "  PARAMS  rejected: ...") of an
 * `fa-tune --exhaustive --verbose` log of one class. */
tune_replay *tune_replay_load(const char *path, char *why, size_t why_size);
void         tune_replay_free(tune_replay *r);
/* The recorded time of params: negative when absent, INFINITY if rejected. */
double       tune_replay_ms(const tune_replay *r, const char *params);
int          tune_replay_count(const tune_replay *r);

/* ---- measurement and search ------------------------------------------ */
typedef struct {
  double budget_s;    /* wall time allowed for this class       */
  int    warmup, iters;
  bool   exhaustive;  /* every valid point, ignoring the budget */
  int    max_tries;   /* candidates per class at most (0: no limit) */
  bool   verbose;
  /* The best parameters of a sibling class (same kernel, dtype and head
   * dim): where the descent starts, with its programs already built. */
  const char *seed;
  /* Look timings up here instead of measuring (fa-tune --replay). */
  const tune_replay *replay;
} tune_settings;

typedef struct {
  char   params[160];
  double ms;          /* median device time                      */
  char   default_params[160];
  double default_ms;
  double work;        /* per run of the timing problem           */
  int64_t seqlen, bh; /* the timing problem                      */
  int    points;      /* valid points of the search space        */
  int    tried, rejected, timed;
  /* --replay: the fastest recorded point of those valid on this device */
  char   replay_best[160];
  double replay_best_ms;
  /* tune_class returned false and the class was given up (left at the
   * defaults, not an error): one run of the defaults is too slow to time
   * at the class's length, or they do not build or are not supported
   * there. Otherwise a failure: a run failed or its answers were wrong. */
  bool   given_up;
} tune_result;

/* Finds the fastest valid configuration of cls within settings; false
 * (why) when not even the defaults run correctly. */
bool tune_class(fcl_context *ctx, const fcl_tuning_class *cls, const tune_settings *st,
                tune_result *res, char *why, size_t why_size);

/* ---- database -------------------------------------------------------- */
typedef struct sqlite3 sqlite3;
/* Opens (creating the file and schema) for writing: WAL, busy timeout. A
 * file that is not a healthy flashcl database is left alone: renamed to
 * PATH.corrupt-<time> and reported, then a new one is made. */
sqlite3 *tune_db_open(const char *path, char *why, size_t why_size);
void     tune_db_close(sqlite3 *db);
/* One transaction per device. */
bool     tune_db_begin(sqlite3 *db, char *why, size_t why_size);
bool     tune_db_commit(sqlite3 *db, char *why, size_t why_size);
bool     tune_db_put(sqlite3 *db, fcl_context *ctx, const fcl_tuning_class *cls,
                     const tune_result *r, char *why, size_t why_size);
/* --show: the rows of ctx's device, readable. */
/* Whether the database holds a current row for the class on this device
 * (same driver and kernel sources). */
bool     tune_db_has(sqlite3 *db, fcl_context *ctx, const fcl_tuning_class *cls);
int      tune_db_show(sqlite3 *db, fcl_context *ctx);
/* --export/--import as JSON: an array of row objects keyed by the column
 * names (FILE "-": stdout, stdin). The import checks every row (types,
 * kernel, dtype, class, params, times) and writes all of them or, when
 * any is bad, none: one transaction. 0, or 1 with the reasons printed. */
int      tune_db_export(sqlite3 *db, fcl_context *ctx, const char *file);
int      tune_db_import(sqlite3 *db, const char *file);

/* ---- progress -------------------------------------------------------- */
extern volatile sig_atomic_t tune_interrupted; /* Ctrl-C: stop, keep results */
void tune_progress_start(int total_classes, double budget_s);
void tune_progress_update(int done, const char *what);
void tune_progress_end(void);
void tune_log(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
#endif
