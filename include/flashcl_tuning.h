/* flashcl_tuning.h: the kernel variants of flashcl, their parameters and
 * search spaces, the tuning override and the database schema: what fa-tune,
 * fa-bench's tuning comparisons and the tests need beyond flashcl.h.
 *
 * Static linking only (as zstd's ZSTD_STATIC_LINKING_ONLY): these symbols
 * are not exported by libflashcl.so, and they may change between versions.
 * Define FCL_STATIC_LINKING_ONLY before including this header and link
 * flashcl::flashcl_static; without the macro the header declares nothing.
 */
#include "flashcl.h"

#if defined(FCL_STATIC_LINKING_ONLY) && !defined(FLASHCL_TUNING_H)
#define FLASHCL_TUNING_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FCL_TUNING_MAX_PARAMS 8
#define FCL_TUNING_MAX_AXES 8
#define FCL_TUNING_MAX_AXIS_VALUES 12
#define FCL_SEQLEN_BUCKETS 4 /* <= 256, <= 1024, <= 4096, longer */

/* A kernel variant (opaque): one row of an operation's table of kernels,
 * with its own parameters, defaults, search space and sources. */
typedef struct fcl_variant fcl_variant;

/* What a variant computes, which is how a tool runs it. */
typedef enum {
  FCL_TUNING_ATTENTION_FWD,
  FCL_TUNING_ATTENTION_BWD,
  FCL_TUNING_RWKV6_RECURRENT,
  FCL_TUNING_RWKV6_CHUNKED,
  FCL_TUNING_RWKV6_BWD,
  FCL_TUNING_ATTENTION_DECODE, /* fcl_attention_kvcache */
  FCL_TUNING_RWKV6_BWD_CHUNKED,
  FCL_TUNING_RWKV7_RECURRENT, /* fcl_rwkv7_forward */
  FCL_TUNING_RWKV7_BWD        /* fcl_rwkv7_backward */
} fcl_tuning_op;

/* Every variant, in tuning order (what the library runs most first). */
int                fcl_variant_count(void);
const fcl_variant *fcl_variant_at(int i);
const fcl_variant *fcl_variant_find(const char *name); /* NULL if none */
const char        *fcl_variant_name(const fcl_variant *v);
fcl_tuning_op      fcl_variant_op(const fcl_variant *v);
int                fcl_variant_nparams(const fcl_variant *v);
const char        *fcl_variant_param(const fcl_variant *v, int i);

/* A configuration: the variant's parameters, in its order. */
typedef struct {
  int v[FCL_TUNING_MAX_PARAMS];
} fcl_config;

/* What a tuned configuration applies to: a variant, a dtype, head dims
 * (attention: head_dim, head_dim_v; RWKV6, RWKV7: K, V), causal (0 for RWKV6) and
 * a sequence-length bucket. */
typedef struct {
  const fcl_variant *variant;
  fcl_dtype          dtype;
  int                head_dim, head_dim_v, causal, bucket;
} fcl_tuning_class;

/* Whether a class could come from a problem the entry points accept. */
bool        fcl_tuning_class_valid(const fcl_tuning_class *c);
int         fcl_seqlen_bucket(int64_t seqlen);
int64_t     fcl_seqlen_bucket_length(int bucket); /* the length fa-tune times */
const char *fcl_dtype_name(fcl_dtype t); /* "f32", "f16", "bf16", "q8_0", "q4_0", "fp8_e4m3", "fp8_e5m2" */
bool        fcl_dtype_from_name(const char *s, fcl_dtype *t);

/* "NAME=v,NAME=v" of cfg, and back (every parameter, nothing else). */
void fcl_params_format(const fcl_variant *v, const fcl_config *cfg, char *out, size_t size);
bool fcl_params_parse(const fcl_variant *v, const char *text, fcl_config *cfg, char *why,
                      size_t why_size);

/* One search axis: candidate values of a quantity the variant maps onto its
 * parameters (a work-item grid, a register tile, a number of slices). */
typedef struct {
  const char *name;
  int         n;
  int         values[FCL_TUNING_MAX_AXIS_VALUES];
} fcl_axis;
/* The search space of a class: fills axes, returns how many. */
int  fcl_tuning_axes(const fcl_tuning_class *c, fcl_axis axes[FCL_TUNING_MAX_AXES]);
/* The configuration at one value per axis, over the defaults in cfg. */
void fcl_tuning_point(const fcl_tuning_class *c, const int *values, fcl_config *cfg);

/* On the context's device: the built-in parameters, whether cfg builds and
 * runs (why if not), and whether a valid point is worth building. */
void fcl_tuning_defaults(fcl_context *ctx, const fcl_tuning_class *c, fcl_config *cfg);
bool fcl_tuning_valid(fcl_context *ctx, const fcl_tuning_class *c, const fcl_config *cfg,
                      char *why, size_t why_size);
bool fcl_tuning_worth_trying(fcl_context *ctx, const fcl_tuning_class *c,
                             const fcl_config *cfg);
/* Whether the library runs variant c->variant for problems of this class on
 * this device: the plan the operations follow, as it stands (forced false)
 * or with the variant overridden by its defaults (forced true: where it can
 * stand in for the preferred one, as the portable kernels can). */
fcl_status fcl_tuning_runs(fcl_context *ctx, const fcl_tuning_class *c, bool forced,
                           bool *runs);

/* Makes every later call on ctx run the variant with params ("NAME=v,...";
 * NULL clears). While set, the variant is chosen wherever it applies, ahead
 * of the others of its operation; an invalid override fails the call, and
 * so do kernels of the variant that do not build here (FCL_ERROR_BUILD with
 * the log), where without the override the next variant would run. */
fcl_status fcl_tuning_override(fcl_context *ctx, const fcl_variant *v, const char *params);

/* Hex hash (32 digits) of the variant's sources as the context reads them:
 * database rows of other sources are never used. */
fcl_status fcl_variant_hash(fcl_context *ctx, const fcl_variant *v, char hex[33]);

/* The device identity that keys database rows, and what tools ask of it
 * (after the library's one-time probe). */
typedef struct {
  char     platform[256], vendor[256], device[256], driver[128];
  char     label[900]; /* "platform / device / driver" */
  unsigned compute_units;
  bool     is_cpu;
  size_t   preferred_multiple;
} fcl_tuning_device;
fcl_status fcl_tuning_device_info(fcl_context *ctx, fcl_tuning_device *out);

/* The database path from the environment ($FCL_TUNING_DB, else
 * $XDG_CACHE_HOME/flashcl/tuning.db, else ~/.cache/flashcl/tuning.db);
 * false when FCL_TUNING_DB is "off" or none can be formed. */
bool fcl_tuning_db_path(char *out, size_t size);

/* The database: a schema version table and one row per (device, driver,
 * variant, source hash, class), written by fa-tune, read by the library. */
#define FCL_TUNING_SCHEMA_VERSION 1
#define FCL_TUNING_SCHEMA_SQL                                                   \
  "CREATE TABLE IF NOT EXISTS flashcl_meta("                                    \
  " key TEXT PRIMARY KEY, value TEXT NOT NULL);"                                \
  "CREATE TABLE IF NOT EXISTS tuning("                                          \
  " platform TEXT NOT NULL, vendor TEXT NOT NULL, device TEXT NOT NULL,"        \
  " compute_units INTEGER NOT NULL, driver TEXT NOT NULL,"                      \
  " kernel TEXT NOT NULL, kernel_hash TEXT NOT NULL,"                           \
  " dtype TEXT NOT NULL, head_dim INTEGER NOT NULL, head_dim_v INTEGER NOT NULL," \
  " causal INTEGER NOT NULL, seqlen_bucket INTEGER NOT NULL,"                   \
  " params TEXT NOT NULL, time_ms REAL NOT NULL, throughput REAL, unit TEXT,"   \
  " default_params TEXT, default_time_ms REAL, lengths TEXT,"                   \
  " tool_version TEXT NOT NULL, created TEXT NOT NULL,"                         \
  " PRIMARY KEY(platform, vendor, device, compute_units, driver, kernel,"       \
  "  kernel_hash, dtype, head_dim, head_dim_v, causal, seqlen_bucket));"

#ifdef __cplusplus
}
#endif
#endif
