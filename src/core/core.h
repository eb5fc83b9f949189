/* The core of the library, under everything else: contexts, devices and
 * their probes, options, errors and the log, kernel sources, program builds
 * and the binary cache, tensor checks, launches and timing. Nothing here
 * knows an operation or a tuning class (src/README.md: the layers). */
#ifndef FCL_CORE_H
#define FCL_CORE_H

#include "flashcl.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#define FCL_MSG_MAX 8192
#define FCL_COUNT(a) (sizeof(a) / sizeof((a)[0]))
/* A list of a program's top files, for fcl_get_kernel and fcl_variant:
 * FCL_TOPS("attention/attention_fwd.cl"). */
#define FCL_TOPS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define FCL_TRACE_MAX 32 /* kernels of one operation that FCL_TRACE shows */
#define FCL_SCRATCH_SLOTS 7   /* fcl_scratch() slots: 0..5 by the operations, and */
#define FCL_SCRATCH_KV_PARTS 6 /* the decode kernels' split partials */

/* The environment, read once when a context is created (options.c); no
 * other file reads it. */
typedef struct {
  char device[256];          /* FCL_DEVICE: the selector when none is given  */
  bool log;                  /* FCL_LOG set and not "0"                      */
  bool trace;                /* FCL_TRACE: each operation's kernels logged   */
  char kernel_dir[4096];     /* FCL_KERNEL_DIR: "" reads the embedded copies */
  char build_options[1024];  /* FCL_BUILD_OPTIONS, appended to every build   */
  char cache_dir[4096];      /* program cache; "" when FCL_CACHE=0 or no home */
  bool cache_forced;         /* FCL_CACHE=1: the program cache on every driver,
                                those that cache compiled kernels included */
  char tuning_db[4096];      /* tuning database; "" when off or no home      */
  long loop_budget;          /* FCL_LOOP_BUDGET, -1 when unset               */
  long scratch_cap;          /* FCL_SCRATCH_CAP: bytes, -1 when unset        */
  bool f32_tensor_cores;     /* FCL_F32_TENSOR_CORES (default on)            */
  bool cpu_kernel;           /* FCL_CPU_KERNEL (default on)                  */
  bool mma_emulate;          /* FCL_MMA_EMULATE                              */
  bool disable_fastpath;     /* FCL_DISABLE_FASTPATH                         */
  bool wgmma;                /* FCL_WGMMA (default on): Hopper's wgmma kernels */
  int  rwkv6_algorithm;      /* FCL_RWKV6_ALGORITHM: 0 unset, 1 recurrent, 2 chunked */
  int  f32_precision;        /* FCL_F32_PRECISION: an fcl_f32_precision       */
  bool command_buffer;       /* FCL_COMMAND_BUFFER=1: public plans replay
                                from a recorded command buffer            */
} fcl_options;
void fcl_options_read(fcl_options *o);
/* The tuning database's path from the environment ($FCL_TUNING_DB, else
 * $XDG_CACHE_HOME/flashcl/tuning.db, else ~/.cache/flashcl/tuning.db);
 * false when FCL_TUNING_DB is "off" or none can be formed. */
bool fcl_options_tuning_db(char *out, size_t size);

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
  bool     has_command_buffer; /* cl_khr_command_buffer */
  bool     is_nvidia, is_amd, is_intel, is_cpu;
  /* The driver keeps compiled kernels in its own on-disk cache, keyed by
   * source and options (PoCL: $POCL_CACHE_DIR; Mesa's rusticl: Mesa's
   * shader cache), so building a program a second time is a cache hit
   * there. flashcl's program cache then adds nothing but its cost, which
   * on PoCL is a second compile: asking for a program's binary makes PoCL
   * build a generic work-group function of every kernel, on top of the
   * specialised one it runs. program.c leaves its cache alone on such a
   * driver unless FCL_CACHE=1. */
  bool     driver_caches_binaries;
  /* Loop iterations one work-item may run before the implementation ends
   * the kernel early, 0 if unlimited. Mesa's llvmpipe (rusticl on CPU)
   * stops every kernel after 65535 iterations summed over all its loops
   * (LP_MAX_TGSI_LOOP_ITERATIONS); long walks are split across work-groups
   * or launches to stay under it. */
  long     loop_budget;
  bool     is_llvmpipe; /* llvmpipe: wide work-groups stretch the budget */
  /* FCL_MMA_EMULATE: the tensor-core kernels run here with their warp
   * instructions emulated, which takes 1 KiB of local memory a warp. */
  bool     mma_emulate;
  /* NVIDIA's compute capability as 10 * major + minor (cl_nv_device_attribute_query), else 0. */
  int      nv_sm;
} fcl_device_info;

/* One built program, kept for the context's lifetime. */
typedef struct fcl_program_entry {
  unsigned long long        key[2];
  /* The hash of the file names and options it was last asked for: a
   * launch finds its program without reading and hashing the sources
   * again (a context reads each program's sources once). */
  unsigned long long        name_key[2];
  cl_program                program;
  struct fcl_program_kernel *kernels; /* created on first use, by name */
  struct fcl_program_entry *next;
} fcl_program_entry;
typedef struct fcl_program_kernel {
  struct fcl_program_kernel *next;
  cl_kernel                  kernel;
  char                       name[]; /* NUL-terminated */
} fcl_program_kernel;

struct fcl_context {
  cl_platform_id   platform;
  cl_device_id     device;
  cl_context       cl_ctx;
  cl_command_queue queue;
  fcl_device_info  info;
  fcl_program_entry *programs;
  fcl_context_stats stats;
  cl_mem           scratch[FCL_SCRATCH_SLOTS]; /* grown on demand, see fcl_scratch() */
  size_t           scratch_size[FCL_SCRATCH_SLOTS];
  cl_mem           counters;        /* fcl_counters(): zero between launches */
  size_t           counters_size;
  fcl_options      opt; /* the environment when the context was created */
  bool             profiling; /* the queue has CL_QUEUE_PROFILING_ENABLE */
  cl_event         op_first, op_last; /* kernels of the last operation */
  /* FCL_TRACE: the last operation's kernels (up to FCL_TRACE_MAX), printed
   * as a timeline when the next begins or the context goes (timing.c). */
  struct fcl_trace_entry {
    cl_event ev;
    char     name[48];
    size_t   global[3], local[3];
  } trace[FCL_TRACE_MAX];
  int              trace_n, trace_dropped;
  /* While set, fcl_launch and the other enqueues of an operation return
   * without enqueueing: the operation plans, builds its kernels and takes
   * its scratch only, so that a caller with work to enqueue before it
   * learns first that it can run (nothing enqueued on error). */
  bool             dry_run;
  /* The plan being recorded (plan.c), and whether its call enqueues now
   * (a public call) or only records (fcl_*_plan). */
  struct fcl_plan *rec;
  bool             rec_enqueue;
  /* The cache of plans of the public calls, most recently used first. */
  struct fcl_plan *plans;
  int              plans_n;
  struct fcl_buffer_refs *refs; /* the caller's buffers those plans name */
  cl_mem           probe_mem; /* never enqueued: tells which kernel arguments retain */
  long             plans_made, plans_reused; /* for tests */
  /* Context options (fcl_context_set_option). */
  bool             timing;     /* FCL_OPTION_TIMING */
  int              plan_cache; /* FCL_OPTION_PLAN_CACHE: plans kept */
  /* cl_khr_command_buffer (command_buffer.c): 0 not looked for yet, -1
   * not offered (or not usable with this queue), 1 its entry points in
   * cmdbuf. */
  signed char      cmdbuf_state;
  struct fcl_cmdbuf_api *cmdbuf;
  /* The tuning layer's rows and overrides (tuning_choose.c), made on first
   * use and freed by the function it leaves here. */
  struct fcl_tuning_state *tuning;
  void (*tuning_free)(struct fcl_tuning_state *);
  signed char      mma_state[3]; /* per dtype, tensor cores: 0 unprobed, -1 off,
                                    1 or 2 on (mma_probe.c) */
  signed char      wgmma_state[3]; /* per dtype, wgmma: 0 unprobed, -1 off, 1 on */
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

/* device_select.c: selector NULL or "" takes opt->device. */
fcl_status fcl_select_device(const char *selector, const fcl_options *opt,
                             cl_platform_id *platform, cl_device_id *device);
/* opt (NULL: none) adds what the environment says of the device. */
void       fcl_read_device_info(cl_platform_id p, cl_device_id d, const fcl_options *opt,
                                fcl_device_info *info);
bool       fcl_str_icontains(const char *haystack, const char *needle);

/* device_probe.c: fills the facts that need a built kernel, once. */
fcl_status fcl_device_probe(fcl_context *ctx);

/* hash.c: 128-bit non-cryptographic hash of byte strings. */
typedef struct { unsigned long long h[2]; } fcl_hash;
void fcl_hash_init(fcl_hash *hs);
void fcl_hash_bytes(fcl_hash *hs, const void *data, size_t n);
void fcl_hash_str(fcl_hash *hs, const char *s); /* includes the terminator */

/* kernel_source.c: the files of a program, from its top files (tops, NULL
 * ends): each top's closure over `requires:` lines as cmake/embed_cl.cmake
 * resolved it, the tops one after another, each file once, in build order;
 * their texts embedded or from $FCL_KERNEL_DIR. */
typedef struct {
  int          n;
  const char **names;
  char       **texts;
  size_t      *sizes;
} fcl_sources;
fcl_status fcl_sources_read(fcl_context *ctx, const char *const *tops, fcl_sources *out);
void       fcl_sources_free(fcl_sources *src);

/* binary_cache.c: the on-disk program cache. */
bool fcl_cache_load(const fcl_context *ctx, const unsigned long long key[2],
                    unsigned char **binary, size_t *size);
bool fcl_cache_store(const fcl_context *ctx, const unsigned long long key[2],
                     const unsigned char *binary, size_t size);

/* program.c: a built program for top files (FCL_TOPS: their sources,
 * fcl_sources_read) and build options, owned by the context. */
fcl_status fcl_get_program(fcl_context *ctx, const char *const *tops, const char *options,
                           cl_program *out);
/* A kernel of that program, created once and kept with it. */
fcl_status fcl_get_kernel(fcl_context *ctx, const char *const *tops, const char *options,
                          const char *name, cl_kernel *out);
void       fcl_release_programs(fcl_context *ctx);

/* launch.c: device buffer number slot of at least bytes, kept by the
 * context; an operation uses distinct slots for distinct buffers, and the
 * decode kernels' split partials (live within one kernel) have their own
 * (FCL_SCRATCH_KV_PARTS), as they run inside other operations. More
 * than the device can allocate (CL_DEVICE_MAX_MEM_ALLOC_SIZE, global
 * memory) is FCL_ERROR_OUT_OF_MEMORY. */
fcl_status fcl_scratch(fcl_context *ctx, int slot, size_t bytes, cl_mem *out);
/* The product of five non-negative factors, or SIZE_MAX when it does not
 * fit: scratch sizes of huge problems then fail as out of memory instead of
 * wrapping around to a small buffer. */
size_t     fcl_bytes(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e);
/* An int32 buffer of at least n counters, all zero when first handed out,
 * kept by the context (grown on demand, a new buffer zeroed again). A
 * kernel that counts in it (atomic_inc) must leave every counter it used
 * at zero when it ends, so that the next launch finds them zero: the last
 * work-group of a group resets the group's counter. */
fcl_status fcl_counters(fcl_context *ctx, size_t n, cl_mem *out);

/* Kernel arguments set in order, stopping at the first failure. Their
 * values are kept too, for a plan being recorded (plan.c): arguments of up
 * to 8 bytes, and which of them are memory objects, and one struct
 * argument (a kernel's scalars in one: fewer arguments, a cheaper launch). */
#define FCL_MAX_ARGS 128
#define FCL_MAX_STRUCT_ARG 512
typedef struct {
  cl_kernel     k;
  cl_uint       i;
  cl_int        err;
  bool          unrecordable; /* an argument too large, or too many */
  unsigned char size[FCL_MAX_ARGS];
  bool          mem[FCL_MAX_ARGS];
  uint64_t      value[FCL_MAX_ARGS];
  bool          has_struct;
  cl_uint       struct_at;
  size_t        struct_size;
  unsigned char struct_value[FCL_MAX_STRUCT_ARG];
  /* patch_len > 0: bytes [patch_at, patch_at + patch_len) of the struct
   * are per-call values kept out of the plan's key (a dropout's seed and
   * offset), which a cached plan takes from each call (fcl_plan_call_patched) */
  size_t        patch_at, patch_len;
} fcl_args;
#define FCL_ARGS(kernel) {.k = (kernel), .i = 0, .err = CL_SUCCESS}
void fcl_arg_kind(fcl_args *a, size_t size, const void *value, bool mem);
#define fcl_arg(a, size, value) fcl_arg_kind((a), (size), (value), false)
#define FCL_ARG(a, x) \
  fcl_arg_kind((a), sizeof(x), &(x), _Generic(&(x), cl_mem *: true, const cl_mem *: true, default: false))
/* A tensor's view: (offset in elements (block formats: in bytes),
 * strides[0..2]); appended as
 * arguments. */
void fcl_tensor_view(const fcl_tensor *t, cl_long view[4]);
void fcl_arg_tensor(fcl_args *a, const fcl_tensor *t);
/* Appends a struct argument (at most one a kernel is recorded). */
void fcl_arg_struct(fcl_args *a, size_t size, const void *value);
/* Enqueues k over a 3-D range (skipping an empty one) after checking that
 * its arguments (a, may be NULL) were all set; what names it in errors.
 * While a plan records (ctx->rec), the launch is kept in the plan, on the
 * plan's own copy of k, and enqueued only when the plan's call runs now. */
fcl_status fcl_launch(fcl_context *ctx, cl_kernel k, const fcl_args *a,
                      const size_t global[3], const size_t local[3],
                      const char *what);
/* Enqueues the zeroing of the first bytes of buf (a multiple of 4), as
 * fcl_launch enqueues a kernel (dry runs, plans, events). */
fcl_status fcl_enqueue_zero(fcl_context *ctx, cl_mem buf, size_t bytes, const char *what);

/* desc.c: a public descriptor read by flashcl.h's rule (size first):
 * copied into out (kind->known bytes, its size set to that), a shorter
 * one zero-extended, a longer one only where the unknown bytes are zero.
 * in is not NULL. oldest: the end of the last field of the first release
 * whose descriptor had its size (0.2.0). */
typedef struct {
  const char *type, *init; /* "fcl_attention_desc", "FCL_ATTENTION_DESC_INIT" */
  size_t      oldest, known;
} fcl_desc_kind;
fcl_status fcl_desc_read(fcl_context *ctx, const void *in, const fcl_desc_kind *kind,
                         const char *name, void *out);

/* plan.c: plans. A plan is an operation's enqueues recorded once: its
 * kernels (each the plan's own cl_kernel with its arguments set), their
 * ranges, the zeroing of buffers, and the scratch buffers it uses
 * (retained). Running it enqueues the same work again with no validation,
 * no choice and no build: the plan/run split of FlashInfer, on which the
 * public calls stand through a small cache of plans per context. */
typedef fcl_status (*fcl_op_fn)(fcl_context *ctx, const void *args);
/* What a call's plan depends on, as bytes: every descriptor field, every
 * view (buffer, offset, dtype, strides) and every buffer; and the buffers
 * named, which the context holds while the plan is cached
 * (buffer_refs.c). */
#define FCL_KEY_MAX 4096
#define FCL_KEY_MEMS 32
typedef struct {
  size_t        n;
  bool          ok; /* false: too long, or a NULL where a struct was due */
  int           nmem;
  cl_mem        mem[FCL_KEY_MEMS];
  unsigned char b[FCL_KEY_MAX];
} fcl_key;
void fcl_key_init(fcl_key *key, int op);
void fcl_key_bytes(fcl_key *key, const void *p, size_t n);
void fcl_key_i64(fcl_key *key, int64_t v);
void fcl_key_f32(fcl_key *key, float v);
void fcl_key_mem(fcl_key *key, cl_mem m);          /* the handle (NULL allowed) */
void fcl_key_tensor(fcl_key *key, const fcl_tensor *t); /* NULL allowed */
/* A varlen call's host offsets (NULL allowed): the batch + 1 values. */
void fcl_key_host_offsets(fcl_key *key, const int32_t *v, int64_t batch);
/* A public call: its plan from the context's cache when the key was seen,
 * else run (validation, choice, launches) while recording a plan that the
 * cache keeps. */
fcl_status fcl_plan_call(fcl_context *ctx, const fcl_key *key, fcl_op_fn run, const void *args);
/* The same where the call has per-call bytes that the key leaves out
 * (patch, len: what the kernels' fcl_args.patch_* ranges hold this call),
 * so that calls differing only in them share one plan. */
fcl_status fcl_plan_call_patched(fcl_context *ctx, const fcl_key *key, fcl_op_fn run,
                                 const void *args, const void *patch, size_t len);
/* A public *_plan call: run records without enqueueing. */
fcl_status fcl_plan_make(fcl_context *ctx, fcl_op_fn run, const void *args, fcl_plan **out);
/* Hooks of the recording: the launch of kernel k; a zeroing; a buffer
 * the plan must keep alive; a shape that came from a device buffer read on
 * the host (the plan is then not cached: its key does not hold it). */
fcl_status fcl_plan_record_kernel(fcl_context *ctx, cl_kernel k, const fcl_args *a,
                                  const size_t global[3], const size_t local[3],
                                  cl_kernel *copy);
fcl_status fcl_plan_record_zero(fcl_context *ctx, cl_mem buf, size_t bytes);
fcl_status fcl_plan_hold(fcl_context *ctx, cl_mem m);
void       fcl_plan_depends_on_device_data(fcl_context *ctx);
/* Drops every cached plan (a tuning override changed what calls choose). */
void       fcl_plan_cache_clear(fcl_context *ctx);

/* buffer_refs.c: the caller's buffers that cached plans name, each
 * retained once by the context while a cached plan names it. add: a plan
 * names m and holds it in kargs arguments of its kernels (false: out of
 * memory or not retained; the plan is then not cached); drop: that plan
 * went; released: a buffer that only the context and its plans' kernels
 * (those arguments that retain it) still hold, its caller having released
 * it, checking at most budget buffers, or NULL. */
typedef struct fcl_buffer_refs fcl_buffer_refs;
fcl_buffer_refs *fcl_refs_new(void);
bool             fcl_refs_add(fcl_buffer_refs *r, cl_mem m, int kargs);
void             fcl_refs_drop(fcl_buffer_refs *r, cl_mem m, int kargs);
cl_mem           fcl_refs_released(fcl_buffer_refs *r, int budget);
void             fcl_refs_free(fcl_buffer_refs *r); /* releases every buffer; NULL: no-op */

/* timing.c: an operation's first and last kernel events, kept when the
 * queue profiles, for fcl_context_last_op_time(). */
void fcl_op_begin(fcl_context *ctx);
/* Whether launches return profiling events: timing or tracing is on. */
bool fcl_events_wanted(const fcl_context *ctx);
void fcl_op_record(fcl_context *ctx, cl_event ev); /* takes ev */
/* FCL_TRACE: keeps kernel k's launch (retains ev) for the timeline. */
void fcl_op_trace(fcl_context *ctx, cl_kernel k, cl_event ev, const size_t global[3],
                  const size_t local[3]);
void fcl_op_release(fcl_context *ctx);

/* command_buffer.c: whether the device offers cl_khr_command_buffer in a
 * form a plan can use on ctx's queue (looked for once); its entry points
 * are freed with the context (fcl_cmdbuf_free). */
bool fcl_cmdbuf_available(fcl_context *ctx);
void fcl_cmdbuf_free(fcl_context *ctx);

/* tensor.c: validation of strided views. */
typedef struct {
  const char *name;   /* "q", "k", ... for messages */
  int64_t     dims[4];/* extents for (batch, seq, head, dim) */
} fcl_tensor_shape;
/* Whether t is one of the KV-cache formats (not f32, f16 or bf16). */
static inline bool fcl_dtype_cache_format(fcl_dtype t) {
  return t == FCL_Q8_0 || t == FCL_Q4_0 || t == FCL_FP8_E4M3 || t == FCL_FP8_E5M2;
}
/* Its name ("q8_0", ...; "f16" ...) for messages and build logs. */
const char *fcl_dtype_name(fcl_dtype t);
fcl_status fcl_check_tensor(fcl_context *ctx, const fcl_tensor *t,
                            const fcl_tensor_shape *shape);
fcl_status fcl_check_buffer(fcl_context *ctx, cl_mem buf, const char *name,
                            size_t bytes_needed);
/* fcl_check_tensor, ignoring strides[0] for varlen, and requiring the dtype
 * of `like` (named like_name in messages) when like is not NULL. */
fcl_status fcl_check_view(fcl_context *ctx, const fcl_tensor *t,
                          const fcl_tensor_shape *shape, bool varlen,
                          const fcl_tensor *like, const char *like_name);
/* A KV cache's view: fcl_check_view (not varlen), where the dtype may
 * also be a KV-cache format; else it must be like's. */
fcl_status fcl_check_cache_view(fcl_context *ctx, const fcl_tensor *t,
                                const fcl_tensor_shape *shape, const fcl_tensor *like,
                                const char *like_name);
size_t     fcl_buffer_size(cl_mem buf);
/* Whether a view's offset and strides (strides[0] unless varlen) are
 * multiples of n elements of esize bytes. */
bool       fcl_tensor_aligned(const fcl_tensor *t, size_t esize, bool varlen, int64_t n);
/* Checks cu_seqlens (int32 [batch + 1], non-decreasing from >= 0, no
 * sequence longer than max_len) from the caller's host copy, or else read
 * back from buf (blocking; the plan then depends on device data); *total =
 * its last entry. */
fcl_status fcl_check_cu_seqlens(fcl_context *ctx, cl_mem buf, const int32_t *host,
                                const char *name, int64_t batch, int64_t max_len,
                                int64_t *total);
/* mma_probe.c: whether the tensor-core helpers work for dtype t on this
 * device (probed once per context and dtype; FCL_DISABLE_FASTPATH turns
 * them off, FCL_MMA_EMULATE on anywhere), and the build options their
 * kernels need (the asm keyword, or the emulation's). */
fcl_status  fcl_mma_ready(fcl_context *ctx, fcl_dtype t, bool *ready);
const char *fcl_mma_build_options(const fcl_context *ctx, fcl_dtype t);
/* The probes' inputs (mma_probe.c, wgmma_probe.c): small integers, exact
 * in every dtype and in their sums, and their bits in f16 or bf16. */
float       fcl_probe_val_a(int r, int c);
float       fcl_probe_val_b(int kk, int n);
uint16_t    fcl_probe_bits(float x, fcl_dtype t);
/* wgmma_probe.c: whether Hopper's warpgroup products (cl/common/wgmma.cl)
 * work for 16-bit dtype t: an sm_90 NVIDIA device whose driver loads the
 * retargeted PTX and gives the probe's exact products (probed once per
 * context and dtype; FCL_WGMMA=0 turns them off). Their programs are built
 * with fcl_mma_build_options and FCL_SM90A_OPTION. */
fcl_status  fcl_wgmma_ready(fcl_context *ctx, fcl_dtype t, bool *ready);
/* Whether n is an N of cl/common/wgmma_ops.cl (16, 32, 48, 64, 96, 128). */
bool        fcl_wgmma_n(int64_t n);
#define FCL_SM90A_OPTION "-DFCL_SM90A=1"
/* With FCL_SM90A_OPTION, "-DFCL_SM90A_GROUPS=N": ptxas keeps registers for
 * N work-groups per SM (.minnctapersm, ptx_retarget.c). */
#define FCL_SM90A_GROUPS_OPTION "-DFCL_SM90A_GROUPS="
/* ptx_retarget.c: the PTX text of a program built from source with
 * FCL_SM90A_OPTION, rewritten for sm_90a (markers removed, target and
 * version raised, .minnctapersm min_groups where min_groups > 0); NULL when
 * it is not PTX for sm_90 or memory runs out. */
char       *fcl_ptx_sm90a(const char *ptx, size_t size, int min_groups, size_t *out_size);
#endif
