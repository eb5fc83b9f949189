/* Kernel variants and their tuned parameters: one descriptor per variant
 * (parameters and defaults, search axes, validity, sources), problem
 * classes, the build options of a configuration, and the choice of
 * parameters (an fa-tune override, this device's database rows, or the
 * built-in defaults). Operations describe their variants here; this layer
 * knows none of them by name (src/README.md). */
#ifndef FCL_TUNING_H
#define FCL_TUNING_H
#include "core/core.h"

#define FCL_STATIC_LINKING_ONLY
#include "flashcl_tuning.h" /* the classes, configurations and axes fa-tune sees */

#include <stddef.h>

#define FCL_MAX_PARAMS FCL_TUNING_MAX_PARAMS
#define FCL_MAX_AXES FCL_TUNING_MAX_AXES
/* The largest head dims the entry points accept. */
#define FCL_MAX_HEAD_DIM 512

/* A variant reads its configuration (fcl_config) through a struct of ints
 * made from its parameter list, written once: FCL_PARAM_STRUCT makes the struct the
 * variant's code reads (fields named as the kernel's macros), FCL_PARAM_NAMES
 * the names the descriptor, the database and the build options use.
 *   #define MY_PARAMS(X) X(BLOCK_M) X(BLOCK_N)
 *   FCL_PARAM_STRUCT(my_params, MY_PARAMS);  ->  c->BLOCK_M
 */
#define FCL_PARAM_FIELD_(name) int name;
#define FCL_PARAM_NAME_(name) #name,
#define FCL_PARAM_STRUCT(type, LIST)                                               \
  typedef struct { LIST(FCL_PARAM_FIELD_) } type;                                  \
  _Static_assert(sizeof(type) <= sizeof(fcl_config), #type " has too many params")
#define FCL_PARAM_NAMES(LIST) {LIST(FCL_PARAM_NAME_)}
#define FCL_PARAM_COUNT(LIST) ((int)(sizeof((const char *[])FCL_PARAM_NAMES(LIST)) / sizeof(char *)))
/* The typed view of a configuration. */
#define FCL_PARAMS(type, cfg) ((type *)(void *)(cfg)->v)
#define FCL_CPARAMS(type, cfg) ((const type *)(const void *)(cfg)->v)

/* The descriptor of one kernel variant (the model is CLBlast's per-kernel
 * database entries): the variant's code defines it, fa-tune and the
 * operations read it. */
struct fcl_variant {
  const char        *name;   /* database, fa-tune and config name: "attention_fwd" */
  fcl_tuning_op      op;     /* what it computes (how fa-tune runs it)              */
  /* The top file of its program (FCL_TOPS; kernel_source.c): it and what it
   * requires are the sources whose hash guards its rows. A variant whose
   * launches build more than one program names each one's top. */
  const char *const *tops;
  const char        *dim_macros[2]; /* the class's head dims as build macros */
  int                max_dim;       /* head dims of its classes: 1..max_dim */
  bool               causal_classes; /* classes differ by causal (attention) */
  int                nparams;
  const char        *params[FCL_MAX_PARAMS];
  /* The built-in parameters for a class on a device. */
  void (*defaults)(const fcl_device_info *dev, const fcl_tuning_class *c, fcl_config *cfg);
  /* Whether the kernel builds and runs with cfg on this device: multiples,
   * work-group size, local memory, registers; why gets the reason if not. */
  bool (*valid)(const fcl_device_info *dev, const fcl_tuning_class *c, const fcl_config *cfg,
                char *why, size_t why_size);
  /* fa-tune's search space for a class: fills axes, returns how many. */
  int (*axes)(const fcl_tuning_class *c, fcl_axis *axes);
  /* The parameters at one value per axis, over the defaults in cfg. */
  void (*point)(const fcl_tuning_class *c, const int *values, fcl_config *cfg);
  /* Valid points not worth building on this device (NULL: none). */
  bool (*worth_trying)(const fcl_device_info *dev, const fcl_tuning_class *c,
                       const fcl_config *cfg);
  /* Bit i: params[i] shapes the launches only, so it is no build macro
   * (one program serves every value). */
  unsigned host_params;
};

/* Whether a work-group of wg work-items is whole warps or SIMD groups of
 * the device's preferred multiple (fa-tune skips others). */
bool fcl_whole_warps(const fcl_device_info *dev, size_t wg);

/* A define a launch adds to a configuration's build options. */
typedef struct {
  const char *name;
  int         value;
} fcl_define;
/* The build options of a configuration, the one place they are written:
 * -DFCL_DTYPE, the class's head dims under the variant's macro names, every
 * parameter as -DNAME=value, then extra (n of them) and tail (NULL: none). */
void fcl_build_options(const fcl_tuning_class *c, const fcl_config *cfg, const fcl_define *extra,
                       int n, const char *tail, char *out, size_t size);

/* One row of the database, as the library reads it: the variant by name
 * (rows of variants this library lacks are kept out by the caller). */
typedef struct {
  char             kernel[64];
  fcl_tuning_class cls; /* cls.variant is NULL here */
  char             driver[128];
  char             kernel_hash[40];
  char             params[160];
  char             created[32];
  double           time_ms;
} fcl_tuning_row;

/* Reads the rows of device dev from the database at path (read-only, a
 * short busy timeout). Returns false with the reason in why when the file
 * is missing, locked, corrupt or of another schema. */
bool fcl_tuning_db_read(const char *path, const fcl_device_info *dev,
                        fcl_tuning_row **rows, int *nrows, char *why,
                        size_t why_size);

/* The parameters for cls: an override (fa-tune), else the database row for
 * this device and driver, else for this device with another driver, else
 * the built-in defaults. from (may be NULL) says which. */
fcl_status fcl_tuning_choose(fcl_context *ctx, const fcl_tuning_class *cls, fcl_config *cfg,
                             char *from, size_t from_size);
/* The stored time of cls's best configuration (database rows only), or a
 * negative value when there is none: lets RWKV6's automatic algorithm
 * choice compare the recurrent and chunked kernels. */
double fcl_tuning_stored_time(fcl_context *ctx, const fcl_tuning_class *cls);

/* Whether fa-tune overrides the variant's parameters now
 * (fcl_tuning_override, flashcl_tuning.h). */
bool       fcl_tuning_overridden(const fcl_context *ctx, const fcl_variant *v);
/* A launch whose kernels of variant v did not build (status s, what: the
 * log's name for them): where v is forced (fcl_tuning_override: the tests,
 * fa-tune) s is returned, since the next variant would be tested or timed
 * in its place; else that is logged, the error cleared, *fallback set and
 * FCL_OK returned, and the operation runs its next variant. */
fcl_status fcl_tuning_unbuilt(fcl_context *ctx, const fcl_variant *v, fcl_status s,
                              const char *what, bool *fallback);

/* Parameters and source of a choice, for fcl_attention_config() and
 * fcl_rwkv6_config(). */
void fcl_config_info_fill(fcl_config_info *out, const fcl_tuning_class *cls,
                          const fcl_config *cfg, const char *from);

/* Tables of kernel variants (variant_table.c). An operation has one table
 * a pass, its rows in order of preference, and describes each problem once
 * in a struct of its own, which the table's functions read through an
 * opaque pointer. The choice of a row (fa-tune's override included), its
 * configuration and build options, and the run with its fallbacks are
 * written once, here; fa-tune's registry of variants is made of the tables
 * (src/variant_registry.c). */

/* What a row makes of a problem. */
typedef enum {
  FCL_FIT_NO,     /* it cannot take it here (the device, the shape)              */
  FCL_FIT_YES,    /* it takes it                                                  */
  FCL_FIT_FORCED, /* it can, but takes it only where fa-tune overrides its variant */
  FCL_FIT_BARRED  /* the call asks for another algorithm: no override runs it     */
} fcl_fit;
static inline fcl_fit fcl_fit_if(bool yes) { return yes ? FCL_FIT_YES : FCL_FIT_NO; }

/* What a row adds to a configuration's build options. */
typedef struct {
  fcl_define  defs[4];
  int         ndefs;
  const char *tail; /* NULL: none */
} fcl_build_extra;

typedef struct fcl_variant_plan fcl_variant_plan;
typedef struct {
  const fcl_variant *variant;
  /* What the row makes of the problem (may probe the device once); NULL:
   * FCL_FIT_YES. */
  fcl_status (*applies)(fcl_context *ctx, const void *problem, fcl_fit *fit);
  /* A configuration that is not valid here moves on to the next row (the
   * tensor cores' tiles may not fit); otherwise the build says. */
  bool skip_invalid;
  /* Replaces a configuration this problem cannot take though its class
   * can (NULL: every valid one fits). */
  void (*refit)(fcl_context *ctx, fcl_variant_plan *pl, const void *problem);
  /* Build options after the parameters (NULL: none). */
  void (*options)(const fcl_context *ctx, const void *problem, fcl_build_extra *x);
  /* Enqueues the pass; *fallback when its kernels do not build here and
   * the next row should run instead (nothing was enqueued). */
  fcl_status (*launch)(fcl_context *ctx, const fcl_variant_plan *pl, const void *problem,
                       bool *fallback);
} fcl_variant_row;

/* One pass of an operation: its rows and the class of a problem for a
 * variant (the tuning database's key). */
typedef struct {
  const char            *what; /* "attention forward", for messages */
  const fcl_variant_row *rows;
  int                    nrows;
  void (*class_of)(const void *problem, const fcl_variant *v, fcl_tuning_class *cls);
} fcl_variant_table;

/* What one call runs: the row (index: its place in the table), its class,
 * configuration (and where that came from) and build options. */
struct fcl_variant_plan {
  const fcl_variant_row *row;
  int                    index;
  fcl_tuning_class       cls;
  fcl_config             cfg;
  char                   from[512];
  char                   options[512];
};

/* The plan of a problem from row `first` on: the first row that takes it.
 * While fa-tune overrides a variant of the table (the first row's whose
 * variant is overridden, unless the call bars it), that variant runs
 * wherever it applies: the rows of other variants before its last row are
 * passed over, and its rows take FCL_FIT_FORCED problems too. */
fcl_status fcl_variant_plan_make(fcl_context *ctx, const fcl_variant_table *t,
                                 const void *problem, int first, fcl_variant_plan *pl);
/* Plans and launches a problem, going on to the next row where a launch
 * falls back. */
fcl_status fcl_variant_run(fcl_context *ctx, const fcl_variant_table *t, const void *problem);
#endif
