/* Programs: built once per (sources, options, device) in a context, and kept
 * in the on-disk binary cache so that a second process does not recompile,
 * except on drivers that keep compiled kernels themselves (PoCL, rusticl:
 * fcl_device_info.driver_caches_binaries), where a second process's build
 * from source is their cache's hit and flashcl's cache would only cost
 * (FCL_CACHE=1 keeps it on there too). A program is named by its top
 * files; its key covers the text of every file they require. */
#define _POSIX_C_SOURCE 200809L
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Monotonic seconds, for the log's build times. */
static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void program_key(const fcl_context *ctx, char *const *texts, int n,
                        const char *options, unsigned long long key[2]) {
  fcl_hash hs;
  fcl_hash_init(&hs);
  fcl_hash_str(&hs, "flashcl program v1");
  for (int i = 0; i < n; ++i) fcl_hash_str(&hs, texts[i]);
  fcl_hash_str(&hs, options);
  fcl_hash_str(&hs, ctx->info.device_name);
  fcl_hash_str(&hs, ctx->info.driver_version);
  fcl_hash_str(&hs, ctx->info.platform_version);
  key[0] = hs.h[0];
  key[1] = hs.h[1];
}

static fcl_status build_failure(fcl_context *ctx, cl_program prog, cl_int err,
                                const char *options) {
  char   log[6000] = "";
  size_t n = 0;
  clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1,
                        log, &n);
  log[sizeof log - 1] = '\0';
  return fcl_fail(ctx, FCL_ERROR_BUILD, "building kernels (%s) with \"%s\": %s\n%s",
                  fcl_cl_error_name(err), options, n > 1 ? "build log:" : "no log",
                  log);
}

/* Whether the program cache is read and written for this context. */
static bool cache_used(const fcl_context *ctx) {
  return ctx->opt.cache_dir[0] &&
         (!ctx->info.driver_caches_binaries || ctx->opt.cache_forced);
}

/* Loads a cached binary; false (and nothing kept) if the driver refuses it. */
static bool from_cache(fcl_context *ctx, const unsigned long long key[2],
                       const char *options, cl_program *out) {
  unsigned char *bin;
  size_t         size;
  if (!cache_used(ctx) || !fcl_cache_load(ctx, key, &bin, &size)) return false;
  cl_int     status = CL_SUCCESS, err;
  const unsigned char *bins[1] = {bin};
  cl_program prog = clCreateProgramWithBinary(ctx->cl_ctx, 1, &ctx->device, &size,
                                              bins, &status, &err);
  free(bin);
  if (err == CL_SUCCESS && status == CL_SUCCESS)
    err = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    fcl_log(ctx, "cache: driver refused a cached binary (%s); rebuilding",
            fcl_cl_error_name(err != CL_SUCCESS ? err : status));
    if (prog) clReleaseProgram(prog);
    return false;
  }
  *out = prog;
  return true;
}

static void to_cache(fcl_context *ctx, cl_program prog,
                     const unsigned long long key[2]) {
  /* Asking for the binary is not free: PoCL then compiles a generic
   * work-group function of every kernel in the program (cache_used). */
  if (!cache_used(ctx)) return;
  size_t size = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) !=
          CL_SUCCESS || size == 0)
    return;
  unsigned char *bin = malloc(size);
  if (!bin) return;
  unsigned char *bins[1] = {bin};
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) ==
          CL_SUCCESS &&
      fcl_cache_store(ctx, key, bin, size))
    ctx->stats.cache_writes++;
  free(bin);
}

/* A program built with FCL_SM90A_OPTION, rebuilt from its PTX retargeted
 * to sm_90a (ptx_retarget.c); takes prog. The cache then keeps the
 * retargeted PTX, which loads as any other binary. */
static fcl_status retarget_sm90a(fcl_context *ctx, cl_program prog, const char *options,
                                 cl_program *out) {
  size_t size = 0, n = 0;
  char  *ptx = NULL, *patched = NULL;
  cl_int err = clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL);
  if (err == CL_SUCCESS && size > 0 && (ptx = malloc(size + 1))) {
    err = clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptx, &ptx, NULL);
    const char *groups = strstr(options, FCL_SM90A_GROUPS_OPTION);
    const int   min_groups = groups ? atoi(groups + strlen(FCL_SM90A_GROUPS_OPTION)) : 0;
    if (err == CL_SUCCESS) patched = fcl_ptx_sm90a(ptx, size, min_groups, &n);
  }
  free(ptx);
  clReleaseProgram(prog);
  if (!patched)
    return fcl_fail(ctx, FCL_ERROR_BUILD, "building kernels with \"%s\": no PTX for sm_90 to "
                    "retarget to sm_90a (%s)", options, fcl_cl_error_name(err));
  const unsigned char *bins[1] = {(const unsigned char *)patched};
  cl_int status = CL_SUCCESS;
  prog = clCreateProgramWithBinary(ctx->cl_ctx, 1, &ctx->device, &n, bins, &status, &err);
  free(patched);
  if (err == CL_SUCCESS && status != CL_SUCCESS) err = status;
  if (err == CL_SUCCESS) err = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
  if (err == CL_SUCCESS) { /* ptxas's notes: a serialized wgmma shows here */
    char log[2048] = "";
    clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    if (log[0] && log[1]) fcl_log(ctx, "sm_90a build log: %s", log);
  }
  if (err != CL_SUCCESS) {
    fcl_status s = prog ? build_failure(ctx, prog, err, "sm_90a PTX")
                        : fcl_fail_cl(ctx, err, "clCreateProgramWithBinary (sm_90a PTX)");
    if (prog) clReleaseProgram(prog);
    return s;
  }
  *out = prog;
  return FCL_OK;
}

static fcl_status from_source(fcl_context *ctx, char *const *texts,
                              const size_t *sizes, int n, const char *options,
                              cl_program *out) {
  cl_int     err;
  cl_program prog = clCreateProgramWithSource(ctx->cl_ctx, (cl_uint)n,
                                              (const char **)texts, sizes, &err);
  if (err != CL_SUCCESS) return fcl_fail_cl(ctx, err, "clCreateProgramWithSource");
  err = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    fcl_status s = build_failure(ctx, prog, err, options);
    clReleaseProgram(prog);
    return s;
  }
  if (strstr(options, FCL_SM90A_OPTION)) return retarget_sm90a(ctx, prog, options, out);
  *out = prog;
  return FCL_OK;
}

static fcl_status get_entry(fcl_context *ctx, const char *const *tops, const char *options,
                            fcl_program_entry **out) {
  /* Asked for before under these names and options: no source is read. */
  fcl_hash nh;
  fcl_hash_init(&nh);
  const char *top = tops[0]; /* the log's name: the last top */
  for (const char *const *t = tops; *t; ++t) fcl_hash_str(&nh, top = *t);
  fcl_hash_str(&nh, options);
  for (fcl_program_entry *e = ctx->programs; e; e = e->next) {
    if (e->name_key[0] == nh.h[0] && e->name_key[1] == nh.h[1]) {
      *out = e;
      return FCL_OK;
    }
  }
  fcl_sources src;
  fcl_status  s = fcl_sources_read(ctx, tops, &src);
  if (s != FCL_OK) return s;

  /* $FCL_BUILD_OPTIONS (kernel work, like $FCL_KERNEL_DIR): appended to
   * every program's options, and so to its cache key. */
  char        with_extra[2048];
  const char *extra = ctx->opt.build_options;
  if (*extra) {
    snprintf(with_extra, sizeof with_extra, "%s %s", options, extra);
    options = with_extra;
  }
  unsigned long long key[2] = {0, 0};
  program_key(ctx, src.texts, src.n, options, key);
  for (fcl_program_entry *e = ctx->programs; e; e = e->next) {
    if (e->key[0] == key[0] && e->key[1] == key[1]) {
      e->name_key[0] = nh.h[0], e->name_key[1] = nh.h[1];
      *out = e;
      goto done;
    }
  }
  double t0 = 0.0;
  fcl_program_entry *e = calloc(1, sizeof *e);
  if (!e) {
    s = fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "program table");
    goto done;
  }
  if (from_cache(ctx, key, options, &e->program)) {
    ctx->stats.programs_from_cache++;
    fcl_log(ctx, "program %s [%s]: loaded from the binary cache", top, options);
  } else if (t0 = now_s(),
             (s = from_source(ctx, src.texts, src.sizes, src.n, options, &e->program)) ==
                 FCL_OK) {
    ctx->stats.programs_built++;
    fcl_log(ctx, "program %s [%s]: built from source in %.0f ms", top, options,
            1e3 * (now_s() - t0));
    to_cache(ctx, e->program, key);
  }
  if (s != FCL_OK) {
    free(e);
    goto done;
  }
  e->key[0] = key[0];
  e->key[1] = key[1];
  e->name_key[0] = nh.h[0], e->name_key[1] = nh.h[1];
  e->next = ctx->programs;
  ctx->programs = e;
  *out = e;
done:
  fcl_sources_free(&src);
  return s;
}

fcl_status fcl_get_program(fcl_context *ctx, const char *const *tops, const char *options,
                           cl_program *out) {
  fcl_program_entry *e;
  fcl_status         s = get_entry(ctx, tops, options, &e);
  if (s == FCL_OK) *out = e->program;
  return s;
}

fcl_status fcl_get_kernel(fcl_context *ctx, const char *const *tops, const char *options,
                          const char *name, cl_kernel *out) {
  fcl_program_entry *e;
  fcl_status         s = get_entry(ctx, tops, options, &e);
  if (s != FCL_OK) return s;
  for (const fcl_program_kernel *k = e->kernels; k; k = k->next) {
    if (strcmp(k->name, name) == 0) {
      *out = k->kernel;
      return FCL_OK;
    }
  }
  const size_t        len = strlen(name) + 1;
  fcl_program_kernel *k = malloc(sizeof *k + len);
  if (!k) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "kernel %s", name);
  cl_int err;
  k->kernel = clCreateKernel(e->program, name, &err);
  if (err != CL_SUCCESS) {
    free(k);
    return fcl_fail_cl(ctx, err, "clCreateKernel");
  }
  memcpy(k->name, name, len);
  k->next = e->kernels;
  e->kernels = k;
  *out = k->kernel;
  return FCL_OK;
}

void fcl_release_programs(fcl_context *ctx) {
  fcl_program_entry *e = ctx->programs;
  while (e) {
    fcl_program_entry *next = e->next;
    while (e->kernels) {
      fcl_program_kernel *k = e->kernels;
      e->kernels = k->next;
      clReleaseKernel(k->kernel);
      free(k);
    }
    clReleaseProgram(e->program);
    free(e);
    e = next;
  }
  ctx->programs = NULL;
}
