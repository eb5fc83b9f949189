/* The inside of a plan (plan.c) and its cache (plan_cache.c); core.h
 * declares what the rest of the library uses. */
#ifndef FCL_PLAN_H
#define FCL_PLAN_H
#include "core/core.h"

/* One enqueue: a kernel (k set) or the zeroing of a buffer. */
typedef struct {
  cl_kernel k; /* the plan's own, arguments set */
  size_t    global[3], local[3];
  bool      has_local;
  cl_mem    zero;
  size_t    zero_bytes;
  /* a struct argument with per-call bytes (fcl_args.patch_*): its index,
   * its recorded bytes (malloc'd) and where the per-call ones lie */
  cl_uint        patch_arg;
  size_t         patch_size, patch_at, patch_len;
  unsigned char *patch_struct;
} fcl_plan_cmd;

struct fcl_plan {
  fcl_context  *ctx;
  fcl_plan_cmd *cmd;
  int           ncmd, cap;
  cl_mem       *held; /* retained: scratch, and every buffer when hold_args */
  int           nheld, held_cap;
  cl_mem       *arg_mem; /* its kernels' buffer arguments that retain, repeats kept */
  int           narg_mem, arg_mem_cap;
  bool          hold_args;   /* a public plan keeps the caller's buffers alive */
  bool          device_data; /* shaped by device data read on the host */
  bool          broken;      /* a launch could not be recorded */
  void         *cb;          /* a public plan's launches as a recorded
                                cl_command_buffer_khr, or NULL */
  /* In the cache: the key, its hash, the buffers it names, the next plan
   * (less recently used). */
  unsigned char *key;
  size_t         key_n;
  cl_mem        *key_mem;
  int            key_nmem;
  uint64_t       hash;
  struct fcl_plan *next;
};

fcl_plan  *fcl_plan_new(fcl_context *ctx, bool hold_args);
void       fcl_plan_free(fcl_plan *pl);
fcl_status fcl_plan_replay(fcl_context *ctx, const fcl_plan *pl);
/* The same with this call's per-call bytes (patch, len) in each kernel's
 * struct argument that has them (fcl_args.patch_*). */
fcl_status fcl_plan_replay_patched(fcl_context *ctx, const fcl_plan *pl, const void *patch,
                                   size_t len);
/* Runs op while recording into pl, enqueueing as it goes or not. */
fcl_status fcl_plan_record(fcl_context *ctx, fcl_plan *pl, bool enqueue, fcl_op_fn run,
                           const void *args);
/* command_buffer.c: records a public plan's launches into a command
 * buffer where the device offers one and every command of the plan can
 * be recorded (leaves pl->cb NULL otherwise: the plan replays as usual);
 * enqueues it (false: not enqueued, replay the plan's launches instead);
 * releases it. */
void fcl_cmdbuf_record(fcl_context *ctx, fcl_plan *pl);
bool fcl_cmdbuf_enqueue(fcl_context *ctx, const fcl_plan *pl);
void fcl_cmdbuf_release(fcl_context *ctx, fcl_plan *pl);
/* plan_cache.c: the plan of a key seen before (moved to the front), or
 * NULL; put takes pl (false: not kept, the caller frees it). Both first
 * drop the plans of a buffer the caller released, if they find one. */
const fcl_plan *fcl_plan_cache_find(fcl_context *ctx, const fcl_key *key);
bool            fcl_plan_cache_put(fcl_context *ctx, const fcl_key *key, fcl_plan *pl);
#endif
