/* Faults on $FCL_DEVICE: a kernel that fails to build (FCL_KERNEL_DIR with a
 * broken or missing .cl file) returns FCL_ERROR_BUILD with the build log in
 * fcl_context_last_error and leaves the outputs untouched, and the context
 * works again once the directory is unset; a problem whose scratch memory
 * the device cannot allocate returns FCL_ERROR_OUT_OF_MEMORY (attention
 * forward with split keys, RWKV6 backward); an unusable cache directory
 * (FCL_CACHE_DIR below a regular file) degrades to no cache, says why with
 * FCL_LOG=1, and the operation still gives the reference's numbers.
 * A KV-cache prefill whose forward cannot build appends nothing.
 *
 * FCL_SOURCE_CL_DIR (compiled in) is the source tree's cl/ directory. */
#define _POSIX_C_SOURCE 200809L
#include "op_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int g_checks = 0, g_failed = 0;

static void expect(int cond, const char *what, const char *detail) {
  ++g_checks;
  if (!cond) ++g_failed;
  printf("%s %s%s%s\n", cond ? "PASS" : "FAIL", what, detail && !cond ? " | " : "",
         detail && !cond ? detail : "");
  fflush(stdout);
}

/* A small attention problem checked against the reference. */
static int small_attention(fcl_context *ctx, char *why, size_t n) {
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 1; p.seqlen_q = 9; p.seqlen_k = 13; p.heads_q = 2; p.heads_kv = 1;
  p.head_dim = p.head_dim_v = 16; p.causal = 1; p.window_left = p.window_right = -1;
  return oh_attention_verify_random(ctx, &p, FCL_F32, 77, why, n);
}

static int copy_file(const char *from, const char *to, const char *append) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  int ok = in && out;
  char buf[4096];
  size_t got;
  while (ok && (got = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, got, out) == got;
  if (ok && append) ok = fputs(append, out) >= 0;
  if (in) fclose(in);
  if (out && fclose(out) != 0) ok = 0;
  return ok;
}

/* A chunked prefill (70 new rows: the forward's kernels) whose forward
 * does not build: the error comes before anything is enqueued, so the
 * append has not written the cache. */
static void kvcache_prefill_build_failure(fcl_context *kctx) {
  enum { N = 70, CAP = 80, D = 16 };
  cl_context cl = fcl_context_cl(kctx);
  cl_command_queue queue = fcl_context_queue(kctx);
  const size_t nb = (size_t)N * D * 4, cb = (size_t)CAP * D * 4;
  float *x = malloc(nb);
  for (size_t i = 0; i < (size_t)N * D; ++i) x[i] = (float)(i % 7) * 0.25f;
  const int zero = 0;
  cl_mem qb = tu_buffer_from(cl, queue, x, nb), nb_k = tu_buffer_from(cl, queue, x, nb);
  cl_mem ob = tu_buffer_poison(cl, queue, nb), kc = tu_buffer_poison(cl, queue, cb);
  cl_mem vc = tu_buffer_poison(cl, queue, cb), lens = tu_buffer_from(cl, queue, &zero, 4);
  const fcl_tensor q = {qb, 0, FCL_F32, {N * D, D, D, 1}}, kn = {nb_k, 0, FCL_F32, {N * D, D, D, 1}};
  const fcl_tensor o = {ob, 0, FCL_F32, {N * D, D, D, 1}};
  const fcl_tensor kt = {kc, 0, FCL_F32, {CAP * D, D, D, 1}}, vt = {vc, 0, FCL_F32, {CAP * D, D, D, 1}};
  fcl_kvcache_desc d = FCL_KVCACHE_DESC_INIT;
  d.batch = 1; d.seqlen_q = N; d.heads_q = d.heads_kv = 1; d.head_dim = d.head_dim_v = D;
  d.cache_capacity = CAP; d.cache_seqlens = lens; d.causal = 1;
  const fcl_status s = fcl_attention_kvcache(kctx, &d, &q, &kt, &vt, &kn, &kn, &o, NULL);
  expect(s == FCL_ERROR_BUILD, "build failure: KV-cache prefill -> FCL_ERROR_BUILD",
         fcl_status_string(s));
  clFinish(queue);
  expect(tu_buffer_poison_left(queue, kc, 0, cb, NULL) == 0 &&
             tu_buffer_poison_left(queue, vc, 0, cb, NULL) == 0 &&
             tu_buffer_poison_left(queue, ob, 0, nb, NULL) == 0,
         "build failure: KV-cache prefill appended nothing, wrote nothing", NULL);
  const cl_mem all[] = {qb, nb_k, ob, kc, vc, lens};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) clReleaseMemObject(all[i]);
  free(x);
}

static void build_failure(fcl_context *ctx, const char *tmp) {
  /* Both forwards broken: the portable one and the CPU one (PoCL's). */
  static const char *const files[] = {"attention/attention_abi.h", "common/dtype.cl",
                                      "attention/attention_common.cl",
                                      "attention/attention_dropout.cl",
                                      "attention/attention_fwd.cl", "attention/attention_fwd_cpu.cl",
                                      "attention/attention_bwd.cl", "common/probe.cl",
                                      "attention/kvcache_common.cl", "attention/kvcache_append.cl",
                                      "attention/kvcache_tile.cl", "attention/kvcache_split_merge.cl",
                                      "attention/kvcache_decode.cl"};
  char dir[512], from[1024], to[1024], why[2048] = "";
  snprintf(dir, sizeof dir, "%s/kernels", tmp);
  if (mkdir(dir, 0755) != 0) expect(0, "build failure: mkdir", dir);
  static const char *const subdirs[] = {"common", "attention"};
  for (size_t i = 0; i < 2; ++i) {
    snprintf(to, sizeof to, "%s/%s", dir, subdirs[i]);
    if (mkdir(to, 0755) != 0) expect(0, "build failure: mkdir", to);
  }
  int ok = 1;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; ++i) {
    snprintf(from, sizeof from, "%s/%s", FCL_SOURCE_CL_DIR, files[i]);
    snprintf(to, sizeof to, "%s/%s", dir, files[i]);
    ok &= copy_file(from, to,
                    strncmp(files[i], "attention/attention_fwd", 23) == 0
                        ? "\n__kernel void broken_on_purpose(void) { this is not C; }\n"
                        : NULL);
  }
  expect(ok, "build failure: copied the kernels", FCL_SOURCE_CL_DIR);

  /* A fresh output buffer; it must stay poison. */
  const size_t bytes = 9 * 2 * 16 * 4;
  cl_mem ob = tu_buffer_poison(fcl_context_cl(ctx), fcl_context_queue(ctx), bytes);
  cl_mem qb = tu_buffer_poison(fcl_context_cl(ctx), fcl_context_queue(ctx), bytes);
  fcl_tensor q = {qb, 0, FCL_F32, {9 * 2 * 16, 2 * 16, 16, 1}}, o = q;
  o.buffer = ob;
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 1; d.seqlen_q = d.seqlen_k = 9; d.heads_q = d.heads_kv = 2;
  d.head_dim = d.head_dim_v = 16;
  /* The environment is read when a context is created: a second context
   * on the same queue (and buffers) reads the kernels from dir. */
  setenv("FCL_KERNEL_DIR", dir, 1);
  fcl_context *kctx = NULL;
  fcl_status s = fcl_context_create_from_queue(fcl_context_queue(ctx), &kctx);
  unsetenv("FCL_KERNEL_DIR");
  expect(s == FCL_OK, "build failure: a context reading FCL_KERNEL_DIR",
         fcl_context_last_error(NULL));
  if (s != FCL_OK) return;
  s = fcl_attention_forward(kctx, &d, &q, &q, &q, &o, NULL);
  const char *msg = fcl_context_last_error(kctx);
  expect(s == FCL_ERROR_BUILD, "build failure: broken .cl -> FCL_ERROR_BUILD", fcl_status_string(s));
  const char *log = strstr(msg, "build log:");
  expect(log != NULL && strstr(log, "error") != NULL,
         "build failure: the message carries the build log", msg);
  clFinish(fcl_context_queue(kctx));
  expect(tu_buffer_poison_left(fcl_context_queue(kctx), ob, 0, bytes, NULL) == 0,
         "build failure: the output is untouched", NULL);
  kvcache_prefill_build_failure(kctx);

  /* A missing file. */
  snprintf(to, sizeof to, "%s/attention/attention_common.cl", dir);
  remove(to);
  s = fcl_attention_forward(kctx, &d, &q, &q, &q, &o, NULL);
  msg = fcl_context_last_error(kctx);
  expect(s == FCL_ERROR_BUILD && strstr(msg, "attention/attention_common.cl") != NULL,
         "build failure: a missing .cl -> FCL_ERROR_BUILD naming it", msg);
  fcl_context_destroy(kctx);

  expect(small_attention(ctx, why, sizeof why), "build failure: the context works afterwards",
         why);
  clReleaseMemObject(ob);
  clReleaseMemObject(qb);
}

/* Views of one element repeated (all strides 0): a problem of any size
 * over tiny buffers, so that only the library's scratch memory is large. */
static void out_of_memory(fcl_context *ctx) {
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue qu = fcl_context_queue(ctx);
  cl_mem in = tu_buffer_poison(cl, qu, 1024), out = tu_buffer_poison(cl, qu, 1024);
  cl_mem u = tu_buffer_poison(cl, qu, 1024), du = tu_buffer_poison(cl, qu, 1024);
  fcl_tensor t = {in, 0, FCL_F32, {0, 0, 0, 1}}, to = t;
  to.buffer = out;

  /* RWKV6 backward: per-token partial sums of 2^30 tokens (2^41 bytes). */
  fcl_rwkv6_desc rd = FCL_RWKV6_DESC_INIT;
  rd.batch = 1; rd.seqlen = 1 << 30; rd.heads = 1; rd.head_dim_k = rd.head_dim_v = 64;
  fcl_status s = fcl_rwkv6_backward(ctx, &rd, &t, &t, &t, &t, u, NULL, &t, NULL, &to, &to,
                                    &to, &to, du, NULL);
  expect(s == FCL_ERROR_OUT_OF_MEMORY, "out of memory: rwkv6 backward, 2^41 bytes of scratch",
         fcl_context_last_error(ctx));
  clFinish(qu);
  expect(tu_buffer_poison_left(qu, out, 0, 1024, NULL) == 0 &&
             tu_buffer_poison_left(qu, du, 0, 1024, NULL) == 0,
         "out of memory: outputs untouched", NULL);

  /* RWKV6 chunked forward whose state checkpoints would take 2^64 bytes:
   * the size must not wrap around to a small buffer. */
  rd = (fcl_rwkv6_desc)FCL_RWKV6_DESC_INIT;
  rd.batch = 1 << 20; rd.seqlen = 1 << 30; rd.heads = 1; rd.head_dim_k = rd.head_dim_v = 256;
  rd.algorithm = FCL_RWKV6_CHUNKED;
  s = fcl_rwkv6_forward(ctx, &rd, &t, &t, &t, &t, u, NULL, &to, NULL);
  expect(s == FCL_ERROR_OUT_OF_MEMORY, "out of memory: rwkv6 chunked forward, 2^64 bytes",
         fcl_context_last_error(ctx));

  /* Attention forward, keys split across work-groups (FCL_LOOP_BUDGET=1 in
   * a new context): partial outputs of 2^20 x 2^20 keys. */
  setenv("FCL_LOOP_BUDGET", "1", 1);
  fcl_context *split = NULL;
  s = fcl_context_create(getenv("FCL_DEVICE"), &split);
  unsetenv("FCL_LOOP_BUDGET");
  expect(s == FCL_OK, "out of memory: a split-keys context", fcl_context_last_error(NULL));
  if (s == FCL_OK) {
    cl_mem in2 = tu_buffer_poison(fcl_context_cl(split), fcl_context_queue(split), 1024);
    cl_mem out2 = tu_buffer_poison(fcl_context_cl(split), fcl_context_queue(split), 1024);
    fcl_tensor a = {in2, 0, FCL_F16, {0, 0, 0, 1}}, ao = a;
    ao.buffer = out2;
    fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
    d.batch = 1; d.seqlen_q = d.seqlen_k = 1 << 20; d.heads_q = d.heads_kv = 1;
    d.head_dim = d.head_dim_v = 64;
    s = fcl_attention_forward(split, &d, &a, &a, &a, &ao, NULL);
    expect(s == FCL_ERROR_OUT_OF_MEMORY, "out of memory: attention forward, split keys",
           fcl_context_last_error(split));
    clFinish(fcl_context_queue(split));
    expect(tu_buffer_poison_left(fcl_context_queue(split), out2, 0, 1024, NULL) == 0,
           "out of memory: output untouched", NULL);
    clReleaseMemObject(in2);
    clReleaseMemObject(out2);
    fcl_context_destroy(split);
  }
  char why[2048] = "";
  expect(small_attention(ctx, why, sizeof why), "out of memory: the context works afterwards", why);
  clReleaseMemObject(in); clReleaseMemObject(out); clReleaseMemObject(u); clReleaseMemObject(du);
}

static void unusable_cache(const char *tmp) {
  char file[512], dir[600], logf[600], why[2048] = "";
  snprintf(file, sizeof file, "%s/not-a-directory", tmp);
  snprintf(dir, sizeof dir, "%s/cache", file);
  snprintf(logf, sizeof logf, "%s/stderr.txt", tmp);
  FILE *f = fopen(file, "w");
  if (f) fclose(f);
  setenv("FCL_CACHE_DIR", dir, 1);
  setenv("FCL_CACHE", "1", 1); /* on where the driver caches kernels itself too */
  setenv("FCL_LOG", "1", 1);
  fflush(stderr);
  const int saved = dup(2);
  FILE *capture = freopen(logf, "w", stderr);
  fcl_context *ctx = NULL;
  fcl_status s = fcl_context_create(getenv("FCL_DEVICE"), &ctx);
  int ok = s == FCL_OK && small_attention(ctx, why, sizeof why);
  fcl_context_stats st = {0, 0, 0};
  if (ctx) fcl_context_get_stats(ctx, &st);
  fcl_context_destroy(ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  unsetenv("FCL_LOG");
  unsetenv("FCL_CACHE");
  expect(capture != NULL, "unusable cache: captured stderr", logf);
  expect(ok, "unusable cache: the operation succeeds", why);
  expect(st.cache_writes == 0 && st.programs_from_cache == 0 && st.programs_built > 0,
         "unusable cache: programs built, none cached", NULL);
  char log[16384] = "";
  f = fopen(logf, "r");
  if (f) {
    log[fread(log, 1, sizeof log - 1, f)] = '\0';
    fclose(f);
  }
  expect(strstr(log, "not caching") != NULL && strstr(log, dir) != NULL,
         "unusable cache: FCL_LOG says why", log);
}

int main(void) {
  const double t0 = tu_now();
  char tmp[] = "/tmp/fcl-faults-XXXXXX";
  if (!mkdtemp(tmp)) {
    printf("FAIL: mkdtemp\n");
    return 1;
  }
  fcl_context *ctx = NULL;
  fcl_status s = fcl_context_create(NULL, &ctx);
  if (s != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  build_failure(ctx, tmp);
  out_of_memory(ctx);
  fcl_context_destroy(ctx);
  unusable_cache(tmp);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
  printf("test_faults: %d checks, %d failed, %.1f s\n", g_checks, g_failed, tu_now() - t0);
  return g_failed || g_checks == 0 ? 1 : 0;
}
