/* Plans: an operation's enqueues recorded once and replayed (core.h), and
 * the public fcl_*_plan, fcl_plan_run and fcl_plan_destroy. The public
 * calls run through the cache of plans, plan_cache.c. */
#include "core/plan.h"

#include <stdlib.h>
#include <string.h>

fcl_plan *fcl_plan_new(fcl_context *ctx, bool hold_args) {
  fcl_plan *pl = calloc(1, sizeof *pl);
  if (pl) pl->ctx = ctx, pl->hold_args = hold_args;
  return pl;
}

void fcl_plan_free(fcl_plan *pl) {
  if (!pl) return;
  fcl_cmdbuf_release(pl->ctx, pl);
  for (int i = 0; i < pl->ncmd; ++i)
    if (pl->cmd[i].k) clReleaseKernel(pl->cmd[i].k), free(pl->cmd[i].patch_struct);
  for (int i = 0; i < pl->nheld; ++i) clReleaseMemObject(pl->held[i]);
  free(pl->cmd);
  free(pl->held);
  free(pl->arg_mem);
  free(pl->key);
  free(pl->key_mem);
  free(pl);
}

static fcl_plan_cmd *new_cmd(fcl_plan *pl) {
  if (pl->ncmd == pl->cap) {
    const int cap = pl->cap ? 2 * pl->cap : 4;
    fcl_plan_cmd *c = realloc(pl->cmd, (size_t)cap * sizeof *c);
    if (!c) return NULL;
    pl->cmd = c, pl->cap = cap;
  }
  fcl_plan_cmd *c = &pl->cmd[pl->ncmd];
  memset(c, 0, sizeof *c);
  return c;
}

fcl_status fcl_plan_hold(fcl_context *ctx, cl_mem m) {
  fcl_plan *pl = ctx->rec;
  if (!pl || !m) return FCL_OK;
  for (int i = 0; i < pl->nheld; ++i)
    if (pl->held[i] == m) return FCL_OK;
  if (pl->nheld == pl->held_cap) {
    const int cap = pl->held_cap ? 2 * pl->held_cap : 8;
    cl_mem *h = realloc(pl->held, (size_t)cap * sizeof *h);
    if (!h) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "recording a plan");
    pl->held = h, pl->held_cap = cap;
  }
  cl_int err = clRetainMemObject(m);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "clRetainMemObject (a plan's buffer)");
  pl->held[pl->nheld++] = m;
  return FCL_OK;
}

void fcl_plan_depends_on_device_data(fcl_context *ctx) {
  if (ctx->rec) ctx->rec->device_data = true;
}

/* The plan's own kernel: a second cl_kernel of k's program and name, whose
 * arguments no other call changes (OpenCL 1.2 has no clCloneKernel). */
static cl_kernel copy_kernel(cl_kernel k, cl_int *err) {
  char      name[128];
  cl_program prog;
  *err = clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
  if (*err == CL_SUCCESS)
    *err = clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof prog, &prog, NULL);
  return *err == CL_SUCCESS ? clCreateKernel(prog, name, err) : NULL;
}

/* Sets buffer argument i of k to m; *retains: whether argument i holds a
 * reference to its buffer. Some drivers' kernels retain their buffer
 * arguments (rusticl's, and there only the arguments the compiled kernel
 * uses; PoCL's and NVIDIA's none), and the plan cache counts those
 * references when it asks whether only the context still holds a buffer
 * (buffer_refs.c). The question is put to the context's probe buffer, which
 * no command uses, so no command completing meanwhile changes its count. */
static cl_int set_arg_probing(fcl_context *ctx, cl_kernel k, cl_uint i, cl_mem m,
                              bool *retains) {
  cl_int err = CL_SUCCESS;
  if (!ctx->probe_mem)
    ctx->probe_mem = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
  cl_uint count = 0;
  if (err == CL_SUCCESS) err = clSetKernelArg(k, i, sizeof ctx->probe_mem, &ctx->probe_mem);
  if (err == CL_SUCCESS)
    err = clGetMemObjectInfo(ctx->probe_mem, CL_MEM_REFERENCE_COUNT, sizeof count, &count, NULL);
  *retains = count > 1; /* setting m next lets go of the probe buffer */
  return err == CL_SUCCESS ? clSetKernelArg(k, i, sizeof m, &m) : err;
}

static fcl_status add_arg_mem(fcl_context *ctx, fcl_plan *pl, cl_mem m) {
  if (pl->narg_mem == pl->arg_mem_cap) {
    const int cap = pl->arg_mem_cap ? 2 * pl->arg_mem_cap : 16;
    cl_mem *am = realloc(pl->arg_mem, (size_t)cap * sizeof *am);
    if (!am) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "recording a plan");
    pl->arg_mem = am, pl->arg_mem_cap = cap;
  }
  pl->arg_mem[pl->narg_mem++] = m;
  return FCL_OK;
}

fcl_status fcl_plan_record_kernel(fcl_context *ctx, cl_kernel k, const fcl_args *a,
                                  const size_t global[3], const size_t local[3],
                                  cl_kernel *copy) {
  fcl_plan *pl = ctx->rec;
  bool whole = a && !a->unrecordable && a->i <= FCL_MAX_ARGS;
  for (cl_uint i = 0; whole && i < a->i; ++i)
    whole = a->size[i] != 0 || (a->has_struct && i == a->struct_at);
  if (!whole) {
    pl->broken = true; /* the call still runs, on k; the plan is not kept */
    *copy = k;
    return FCL_OK;
  }
  fcl_plan_cmd *c = new_cmd(pl);
  if (!c) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "recording a plan");
  cl_int err;
  c->k = copy_kernel(k, &err);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "clCreateKernel (a plan's kernel)");
  pl->ncmd++; /* owned from here: fcl_plan_free releases it */
  for (cl_uint i = 0; i < a->i && err == CL_SUCCESS; ++i) {
    cl_mem m = NULL;
    if (a->mem[i]) memcpy(&m, &a->value[i], sizeof m);
    bool retains = false;
    if (m) err = set_arg_probing(ctx, c->k, i, m, &retains);
    else if (a->has_struct && i == a->struct_at)
      err = clSetKernelArg(c->k, i, a->struct_size, a->struct_value);
    else err = clSetKernelArg(c->k, i, a->size[i], &a->value[i]);
    if (!m || err != CL_SUCCESS) continue;
    fcl_status hs = retains ? add_arg_mem(ctx, pl, m) : FCL_OK;
    if (!hs && pl->hold_args) hs = fcl_plan_hold(ctx, m);
    if (hs) return hs;
  }
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "clSetKernelArg (a plan's kernel)");
  if (a->has_struct && a->patch_len) {
    c->patch_struct = malloc(a->struct_size);
    if (!c->patch_struct) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "recording a plan");
    memcpy(c->patch_struct, a->struct_value, a->struct_size);
    c->patch_arg = a->struct_at, c->patch_size = a->struct_size;
    c->patch_at = a->patch_at, c->patch_len = a->patch_len;
  }
  for (int d = 0; d < 3; ++d) c->global[d] = global[d], c->local[d] = local ? local[d] : 0;
  c->has_local = local != NULL;
  *copy = c->k;
  return FCL_OK;
}

fcl_status fcl_plan_record_zero(fcl_context *ctx, cl_mem buf, size_t bytes) {
  fcl_plan_cmd *c = new_cmd(ctx->rec);
  if (!c) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "recording a plan");
  c->zero = buf, c->zero_bytes = bytes;
  ctx->rec->ncmd++;
  return fcl_plan_hold(ctx, buf);
}

/* Enqueues the plan's commands. Its kernels keep their arguments: a public
 * plan holds its buffers, the context those of its cached plans
 * (buffer_refs.c). */
fcl_status fcl_plan_replay(fcl_context *ctx, const fcl_plan *pl) {
  return fcl_plan_replay_patched(ctx, pl, NULL, 0);
}

fcl_status fcl_plan_replay_patched(fcl_context *ctx, const fcl_plan *pl, const void *patch,
                                   size_t len) {
  const bool events = fcl_events_wanted(ctx);
  for (int i = 0; i < pl->ncmd; ++i) {
    const fcl_plan_cmd *c = &pl->cmd[i];
    cl_event ev = NULL;
    cl_int   err;
    if (c->k && c->patch_len) { /* this call's bytes into the recorded struct */
      unsigned char s[FCL_MAX_STRUCT_ARG];
      memcpy(s, c->patch_struct, c->patch_size);
      if (patch && len == c->patch_len) memcpy(s + c->patch_at, patch, len);
      err = clSetKernelArg(c->k, c->patch_arg, c->patch_size, s);
      if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "clSetKernelArg (a plan's kernel)");
    }
    if (c->k) {
      err = clEnqueueNDRangeKernel(ctx->queue, c->k, 3, NULL, c->global,
                                   c->has_local ? c->local : NULL, 0, NULL,
                                   events ? &ev : NULL);
      if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "enqueueing a plan's kernel");
      if (ev && ctx->opt.trace) fcl_op_trace(ctx, c->k, ev, c->global, c->local);
    } else {
      const cl_int zero = 0;
      err = clEnqueueFillBuffer(ctx->queue, c->zero, &zero, sizeof zero, 0, c->zero_bytes, 0,
                                NULL, events ? &ev : NULL);
      if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "enqueueing a plan's zeroing");
    }
    if (ev) fcl_op_record(ctx, ev);
  }
  return FCL_OK;
}

/* Runs op while recording into pl (enqueueing as it goes or not). */
fcl_status fcl_plan_record(fcl_context *ctx, fcl_plan *pl, bool enqueue, fcl_op_fn run,
                           const void *args) {
  ctx->rec = pl;
  ctx->rec_enqueue = enqueue;
  fcl_status s = run(ctx, args);
  ctx->rec = NULL;
  ctx->rec_enqueue = false;
  return s;
}

fcl_status fcl_plan_make(fcl_context *ctx, fcl_op_fn run, const void *args, fcl_plan **out) {
  fcl_clear_error(ctx);
  if (!out) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "out: is NULL");
  *out = NULL;
  fcl_plan *pl = fcl_plan_new(ctx, true);
  if (!pl) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "out: cannot allocate a plan");
  fcl_status s = fcl_plan_record(ctx, pl, false, run, args);
  if (s == FCL_OK && pl->broken)
    s = fcl_fail(ctx, FCL_ERROR_INTERNAL, "a launch of this call could not be recorded");
  if (s != FCL_OK) {
    fcl_plan_free(pl);
    return s;
  }
  ctx->plans_made++;
  fcl_cmdbuf_record(ctx, pl);
  *out = pl;
  return FCL_OK;
}

fcl_status fcl_plan_run(fcl_plan *plan) {
  if (!plan) return fcl_fail(NULL, FCL_ERROR_INVALID_ARGUMENT, "plan: is NULL");
  fcl_context *ctx = plan->ctx;
  fcl_clear_error(ctx);
  fcl_op_begin(ctx);
  if (fcl_cmdbuf_enqueue(ctx, plan)) return FCL_OK;
  return fcl_plan_replay(ctx, plan);
}

void fcl_plan_destroy(fcl_plan *plan) { fcl_plan_free(plan); }
