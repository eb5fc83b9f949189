/* Internal declarations shared by the library's source files. */
#ifndef FCL_INTERNAL_H
#define FCL_INTERNAL_H

#include "flashcl.h"

#include <stdarg.h>
#include <stdbool.h>

#define FCL_MSG_MAX 8192
#define FCL_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* What kernels need to know about the device, read once per context. */
typedef struct {
  char   platform_name[256], platform_version[256];
  char   vendor[256], device_name[256], driver_version[128];
  char   label[900]; /* "platform / device / driver" */
  cl_device_type type;
  cl_ulong local_mem;      /* bytes of local memory per work-group */
  cl_ulong global_mem;
  cl_ulong max_alloc;
  size_t   max_wg;         /* max work-group size                  */
  cl_uint  compute_units;
  cl_uint  native_float_width; /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT */
  size_t   preferred_multiple; /* 0 until fcl_device_probe() has run */
  bool     has_subgroups;  /* cl_khr_subgroups or cl_intel_subgroups */
  bool     is_nvidia, is_amd, is_intel, is_cpu;
  /* Loop iterations one work-item may run before the implementation ends
   * the kernel early, 0 if unlimited. Mesa's llvmpipe (rusticl on CPU)
   * stops every kernel after 65535 iterations summed over all its loops
   * (LP_MAX_TGSI_LOOP_ITERATIONS); long walks are split across work-groups
   * or launches to stay under it. */
  long     loop_budget;
  bool     is_llvmpipe; /* llvmpipe: wide work-groups stretch the budget */
} fcl_device_info;

/* One built program, kept for the context's lifetime. */
typedef struct fcl_program_entry {
  unsigned long long        key[2];
  cl_program                program;
  cl_kernel                 kernels[4]; /* created on first use, by name */
  char                      kernel_names[4][64];
  struct fcl_program_entry *next;
} fcl_program_entry;

struct fcl_context {
  cl_platform_id   platform;
  cl_device_id     device;
  cl_context       cl_ctx;
  cl_command_queue queue;
  fcl_device_info  info;
  fcl_program_entry *programs;
  fcl_context_stats stats;
  cl_mem           scratch[6];      /* grown on demand, see fcl_scratch() */
  size_t           scratch_size[6];
  bool             log; /* FCL_LOG set */
  bool             profiling; /* the queue has CL_QUEUE_PROFILING_ENABLE */
  cl_event         op_first, op_last; /* kernels of the last operation */
  struct fcl_tuning_state *tuning; /* tuning.c: rows and overrides, lazily */
  signed char      mma_state[3]; /* per dtype, tensor cores: 0 unprobed, -1 off,
                                    1 or 2 on (attention_fastpath.c) */
  char             message[FCL_MSG_MAX];
};

/* errors.c: record a failure in ctx (or the thread's create error when ctx is
 * NULL) and return s. */
fcl_status  fcl_fail(fcl_context *ctx, fcl_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
fcl_status  fcl_fail_cl(fcl_context *ctx, cl_int err, const char *what);
const char *fcl_cl_error_name(cl_int err);
void        fcl_clear_error(fcl_context *ctx);

/* log.c: FCL_LOG=1 prints decisions on stderr. */
void fcl_log(const fcl_context *ctx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* device_select.c */
fcl_status fcl_select_device(const char *selector, cl_platform_id *platform,
                             cl_device_id *device);
void       fcl_read_device_info(cl_platform_id p, cl_device_id d,
                                fcl_device_info *info);
bool       fcl_str_icontains(const char *haystack, const char *needle);

/* device_probe.c: fills the facts that need a built kernel, once. */
fcl_status fcl_device_probe(fcl_context *ctx);

/* hash.c: 128-bit non-cryptographic hash of byte strings. */
typedef struct { unsigned long long h[2]; } fcl_hash;
void fcl_hash_init(fcl_hash *hs);
void fcl_hash_bytes(fcl_hash *hs, const void *data, size_t n);
void fcl_hash_str(fcl_hash *hs, const char *s); /* includes the terminator */

/* kernel_source.c: a kernel file's text, embedded or from $FCL_KERNEL_DIR.
 * The caller frees *text. */
fcl_status fcl_kernel_source(fcl_context *ctx, const char *name, char **text,
                             size_t *size);

/* binary_cache.c: the on-disk program cache. */
bool fcl_cache_load(const fcl_context *ctx, const unsigned long long key[2],
                    unsigned char **binary, size_t *size);
bool fcl_cache_store(const fcl_context *ctx, const unsigned long long key[2],
                     const unsigned char *binary, size_t size);

/* program.c: a built program for files (concatenated in order) and build
 * options, owned by the context. */
fcl_status fcl_get_program(fcl_context *ctx, const char *const *files,
                           int nfiles, const char *options, cl_program *out);
/* A kernel of that program, created once and kept with it. */
fcl_status fcl_get_kernel(fcl_context *ctx, const char *const *files,
                          int nfiles, const char *options, const char *name,
                          cl_kernel *out);
void       fcl_release_programs(fcl_context *ctx);

/* launch.c: device buffer number slot (0..5) of at least bytes, kept by
 * the context; an operation uses distinct slots for distinct buffers. More
 * than the device can allocate (CL_DEVICE_MAX_MEM_ALLOC_SIZE, global
 * memory) is FCL_ERROR_OUT_OF_MEMORY. */
fcl_status fcl_scratch(fcl_context *ctx, int slot, size_t bytes, cl_mem *out);
/* The product of five non-negative factors, or SIZE_MAX when it does not
 * fit: scratch sizes of huge problems then fail as out of memory instead of
 * wrapping around to a small buffer. */
size_t     fcl_bytes(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e);

/* Kernel arguments set in order, stopping at the first failure. */
typedef struct {
  cl_kernel k;
  cl_uint   i;
  cl_int    err;
} fcl_args;
void fcl_arg(fcl_args *a, size_t size, const void *value);
#define FCL_ARG(a, x) fcl_arg((a), sizeof(x), &(x))
/* Enqueues k over a 3-D range (skipping an empty one) after checking that
 * its arguments (a, may be NULL) were all set; what names it in errors. */
fcl_status fcl_launch(fcl_context *ctx, cl_kernel k, const fcl_args *a,
                      const size_t global[3], const size_t local[3],
                      const char *what);

/* timing.c: an operation's first and last kernel events, kept when the
 * queue profiles, for fcl_context_last_op_time(). */
void fcl_op_begin(fcl_context *ctx);
void fcl_op_record(fcl_context *ctx, cl_event ev); /* takes ev */
void fcl_op_release(fcl_context *ctx);

/* tensor.c: validation of strided views. */
typedef struct {
  const char *name;   /* "q", "k", ... for messages */
  int64_t     dims[4];/* extents for (batch, seq, head, dim) */
} fcl_tensor_shape;
fcl_status fcl_check_tensor(fcl_context *ctx, const fcl_tensor *t,
                            const fcl_tensor_shape *shape);
fcl_status fcl_check_buffer(fcl_context *ctx, cl_mem buf, const char *name,
                            size_t bytes_needed);
/* fcl_check_tensor, ignoring strides[0] for varlen, and requiring the dtype
 * of `like` (named like_name in messages) when like is not NULL. */
fcl_status fcl_check_view(fcl_context *ctx, const fcl_tensor *t,
                          const fcl_tensor_shape *shape, bool varlen,
                          const fcl_tensor *like, const char *like_name);
size_t     fcl_buffer_size(cl_mem buf);
/* Reads and checks cu_seqlens (int32 [batch + 1], non-decreasing from >= 0,
 * no sequence longer than max_len); *total = its last entry. Blocking. */
fcl_status fcl_check_cu_seqlens(fcl_context *ctx, cl_mem buf, const char *name,
                                int64_t batch, int64_t max_len, int64_t *total);
#endif
