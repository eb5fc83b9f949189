/* Tuned kernel parameters: the kernels fa-tune knows, their parameters by
 * name, problem classes, the database rows of this device and the lookup
 * that prefers them over the built-in defaults. */
#ifndef FCL_TUNING_H
#define FCL_TUNING_H
#include "internal.h"

#include <stddef.h>

typedef enum {
  FCL_KERNEL_ATTN_FWD,
  FCL_KERNEL_ATTN_BWD,
  FCL_KERNEL_RWKV6_RECURRENT,
  FCL_KERNEL_RWKV6_CHUNKED,
  FCL_KERNEL_RWKV6_BWD,
  FCL_KERNEL_ATTN_FWD_MMA, /* NVIDIA tensor cores (attention_fastpath.c)       */
  FCL_KERNEL_ATTN_FWD_CPU, /* CPUs (attention_forward_cpu.c)                  */
  FCL_KERNEL_COUNT
} fcl_kernel_id;

#define FCL_MAX_PARAMS 8
/* The largest head dims the entry points accept. */
#define FCL_MAX_HEAD_DIM 512
#define FCL_RWKV6_MAX_DIM 256

static inline bool fcl_kernel_is_attention(fcl_kernel_id k) {
  return k == FCL_KERNEL_ATTN_FWD || k == FCL_KERNEL_ATTN_BWD || k == FCL_KERNEL_ATTN_FWD_MMA ||
         k == FCL_KERNEL_ATTN_FWD_CPU;
}

/* What a tuned configuration applies to. head_dim_v is head_dim_v of
 * attention or V of RWKV6; causal is 0 for RWKV6. */
typedef struct {
  fcl_kernel_id kernel;
  fcl_dtype     dtype;
  int           head_dim, head_dim_v, causal, bucket;
} fcl_tuning_class;

#define FCL_SEQLEN_BUCKETS 4
/* Whether a class could come from a problem the entry points accept: head
 * dims within the op's limits, causal 0 or 1 (0 for RWKV6), a known bucket.
 * Database rows outside this are skipped before any config is built. */
bool        fcl_tuning_class_valid(const fcl_tuning_class *cls);
/* Sequence-length bucket: <= 256, <= 1024, <= 4096, longer. */
int         fcl_seqlen_bucket(int64_t seqlen);
/* A length fa-tune measures to stand for a bucket. */
int64_t     fcl_seqlen_bucket_length(int bucket);
const char *fcl_dtype_name(fcl_dtype t); /* "f32", "f16", "bf16" */
bool        fcl_dtype_from_name(const char *s, fcl_dtype *t);

/* A kernel's parameters, stored in one of the op's config structs (all
 * int fields) and named as in the database ("BLOCK_M=64,BLOCK_N=32"). */
typedef struct {
  const char *name;     /* database and fa-tune name: "attention_fwd"   */
  const char *const *files; /* the sources whose hash guards its rows */
  int         nfiles;
  int         nparams;
  const char *param_names[FCL_MAX_PARAMS];
  size_t      param_offsets[FCL_MAX_PARAMS];
  size_t      config_size;
  /* The built-in parameters for a class on a device. */
  void (*defaults)(const fcl_device_info *dev, const fcl_tuning_class *cls, void *cfg);
  /* Whether the kernel builds and runs with cfg on this device: multiples,
   * work-group size, local memory, registers. why gets the reason if not. */
  bool (*valid)(const fcl_device_info *dev, const fcl_tuning_class *cls,
                const void *cfg, char *why, size_t why_size);
} fcl_kernel_desc;

const fcl_kernel_desc *fcl_kernel_get(fcl_kernel_id id);
bool  fcl_kernel_from_name(const char *name, fcl_kernel_id *id);
/* "NAME=v,NAME=v" of cfg. */
void  fcl_params_format(fcl_kernel_id id, const void *cfg, char *out, size_t size);
/* Parses every parameter of the kernel (and nothing else) into cfg. */
bool  fcl_params_parse(fcl_kernel_id id, const char *text, void *cfg, char *why,
                       size_t why_size);
int   fcl_param_get(fcl_kernel_id id, const void *cfg, int i);
void  fcl_param_set(fcl_kernel_id id, void *cfg, int i, int value);

/* Hex hash (32 digits) of the kernel's sources as this context reads them
 * (embedded or $FCL_KERNEL_DIR). */
fcl_status fcl_kernel_hash(fcl_context *ctx, fcl_kernel_id id, char hex[33]);

/* The database path: $FCL_TUNING_DB, else $XDG_CACHE_HOME/flashcl/tuning.db,
 * else $HOME/.cache/flashcl/tuning.db. False when none can be formed or
 * FCL_TUNING_DB is "off". */
bool fcl_tuning_db_path(char *out, size_t size);

/* One row of the database, as the library reads it. */
typedef struct {
  fcl_tuning_class cls;
  char   driver[128];
  char   kernel_hash[40];
  char   params[160];
  char   created[32];
  double time_ms;
} fcl_tuning_row;

/* Reads the rows of device dev from the database at path (read-only, a
 * short busy timeout). Returns false with the reason in why when the file
 * is missing, locked, corrupt or of another schema. */
bool fcl_tuning_db_read(const char *path, const fcl_device_info *dev,
                        fcl_tuning_row **rows, int *nrows, char *why,
                        size_t why_size);

/* The parameters for cls: an override (fa-tune), else the database row for
 * this device and driver, else for this device with another driver, else
 * the built-in defaults. from says which ("" is fine to ignore). */
fcl_status fcl_tuning_choose(fcl_context *ctx, const fcl_tuning_class *cls,
                             void *cfg, char *from, size_t from_size);
/* The stored time of cls's best configuration (database rows only), or a
 * negative value when there is none: lets RWKV6's automatic algorithm
 * choice compare the recurrent and chunked kernels. */
double fcl_tuning_stored_time(fcl_context *ctx, const fcl_tuning_class *cls);
void   fcl_tuning_release(fcl_context *ctx);

/* fa-tune: makes every later choice for `kernel` use params (NULL clears).
 * An invalid override makes the operation fail with the reason. */
fcl_status fcl_tuning_override(fcl_context *ctx, fcl_kernel_id kernel,
                               const char *params);

/* Whether fa-tune overrides a kernel's parameters now. */
bool fcl_tuning_overridden(const fcl_context *ctx, fcl_kernel_id kernel);

/* Parameters and source of a choice, for fcl_attention_config() and
 * fcl_rwkv6_config(). */
void fcl_config_info_fill(fcl_config_info *out, fcl_kernel_id id, const void *cfg,
                          const char *from);
#endif
