/* Context, device selection, status strings, version, application queues
 * and the on-disk program binary cache (including corrupted entries; off
 * by default on drivers that cache compiled kernels themselves, PoCL and
 * rusticl, and on there with FCL_CACHE=1, which the rounds below set). */
#define _POSIX_C_SOURCE 200809L /* setenv, mkdtemp, opendir, truncate */
#include "flashcl.h"
#include "ref_attention.h"
#include "test_util.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int g_checks = 0, g_failed = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    ++g_checks;                                            \
    if (!(cond)) {                                         \
      ++g_failed;                                          \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
    }                                                      \
  } while (0)
#define PASS(...)               \
  do {                          \
    printf("PASS ");            \
    printf(__VA_ARGS__);        \
    printf("\n");               \
    fflush(stdout);             \
  } while (0)

/* ---- OpenCL enumeration, to know what each selector should give ---------- */
#define MAX_PLAT 16
#define MAX_DEV 16
typedef struct {
  cl_platform_id id;
  char           name[256], version[256], vendor[256];
  cl_uint        ndev;
  cl_device_id   dev[MAX_DEV];
  char           dev_name[MAX_DEV][256];
  cl_device_type dev_type[MAX_DEV];
} plat_info;
static plat_info g_plat[MAX_PLAT];
static cl_uint   g_nplat = 0;

static void enumerate(void) {
  cl_platform_id ids[MAX_PLAT];
  if (clGetPlatformIDs(MAX_PLAT, ids, &g_nplat) != CL_SUCCESS) g_nplat = 0;
  if (g_nplat > MAX_PLAT) g_nplat = MAX_PLAT;
  for (cl_uint p = 0; p < g_nplat; ++p) {
    plat_info *pi = &g_plat[p];
    pi->id = ids[p];
    clGetPlatformInfo(ids[p], CL_PLATFORM_NAME, sizeof pi->name, pi->name, NULL);
    clGetPlatformInfo(ids[p], CL_PLATFORM_VERSION, sizeof pi->version, pi->version, NULL);
    clGetPlatformInfo(ids[p], CL_PLATFORM_VENDOR, sizeof pi->vendor, pi->vendor, NULL);
    if (clGetDeviceIDs(ids[p], CL_DEVICE_TYPE_ALL, MAX_DEV, pi->dev, &pi->ndev) != CL_SUCCESS)
      pi->ndev = 0;
    if (pi->ndev > MAX_DEV) pi->ndev = MAX_DEV;
    for (cl_uint d = 0; d < pi->ndev; ++d) {
      clGetDeviceInfo(pi->dev[d], CL_DEVICE_NAME, sizeof pi->dev_name[d], pi->dev_name[d], NULL);
      clGetDeviceInfo(pi->dev[d], CL_DEVICE_TYPE, sizeof pi->dev_type[d], &pi->dev_type[d], NULL);
    }
    printf("platform %u: %s | %s | %u device(s)%s%s\n", p, pi->name, pi->version, pi->ndev,
           pi->ndev ? ": " : "", pi->ndev ? pi->dev_name[0] : "");
  }
}

static int icontains(const char *hay, const char *needle) {
  const size_t n = strlen(needle);
  for (; *hay; ++hay) {
    size_t i = 0;
    while (i < n && hay[i] &&
           tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
      ++i;
    if (i == n) return 1;
  }
  return n == 0;
}

/* The device a substring selector should pick: the first device (in
 * platform order) whose platform name, version, vendor or device name
 * contains it; NULL if none. */
static cl_device_id expected_for_substring(const char *sel) {
  for (cl_uint p = 0; p < g_nplat; ++p) {
    const plat_info *pi = &g_plat[p];
    for (cl_uint d = 0; d < pi->ndev; ++d)
      if (icontains(pi->name, sel) || icontains(pi->version, sel) ||
          icontains(pi->vendor, sel) || icontains(pi->dev_name[d], sel))
        return pi->dev[d];
  }
  return NULL;
}

static cl_device_id expected_default(void) {
  for (int pass = 0; pass < 2; ++pass) {
    const cl_device_type want = pass == 0 ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_CPU;
    for (cl_uint p = 0; p < g_nplat; ++p)
      for (cl_uint d = 0; d < g_plat[p].ndev; ++d)
        if (g_plat[p].dev_type[d] & want) return g_plat[p].dev[d];
  }
  return NULL;
}

static const char *device_label(cl_device_id dev) {
  for (cl_uint p = 0; p < g_nplat; ++p)
    for (cl_uint d = 0; d < g_plat[p].ndev; ++d)
      if (g_plat[p].dev[d] == dev) return g_plat[p].dev_name[d];
  return dev ? "(unknown device)" : "(none)";
}

static cl_device_id ctx_device(const fcl_context *ctx) {
  cl_device_id dev = NULL;
  cl_command_queue q = fcl_context_queue(ctx);
  if (!q || clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL) != CL_SUCCESS)
    return NULL;
  return dev;
}

/* Creates a context with sel and checks it lands on want (NULL: must fail
 * with FCL_ERROR_NO_DEVICE and leave a message). */
static void check_selector(const char *sel_or_null, cl_device_id want) {
  fcl_context *ctx = NULL;
  const fcl_status st = fcl_context_create(sel_or_null, &ctx);
  const char *sel = sel_or_null ? sel_or_null : "(NULL, no $FCL_DEVICE)";
  if (!want) {
    const char *msg = fcl_context_last_error(NULL);
    CHECK(st == FCL_ERROR_NO_DEVICE, "selector \"%s\": status %s, want NO_DEVICE", sel,
          fcl_status_string(st));
    CHECK(msg && *msg, "selector \"%s\": no message from fcl_context_last_error(NULL)", sel);
    if (st == FCL_ERROR_NO_DEVICE)
      PASS("selector \"%s\" -> NO_DEVICE: \"%s\"", sel, msg ? msg : "(NULL)");
    if (st == FCL_OK) fcl_context_destroy(ctx);
    return;
  }
  CHECK(st == FCL_OK, "selector \"%s\": status %s: %s", sel, fcl_status_string(st),
        fcl_context_last_error(NULL));
  if (st != FCL_OK) return;
  const cl_device_id got = ctx_device(ctx);
  const char *name = fcl_context_device_name(ctx);
  CHECK(got == want, "selector \"%s\": got device %s, want %s", sel, device_label(got),
        device_label(want));
  CHECK(name && icontains(name, device_label(want)),
        "selector \"%s\": fcl_context_device_name \"%s\" lacks the device name \"%s\"", sel,
        name ? name : "(NULL)", device_label(want));
  CHECK(fcl_context_cl(ctx) != NULL && fcl_context_queue(ctx) != NULL,
        "selector \"%s\": NULL cl_context or queue", sel);
  if (got == want) PASS("selector \"%s\" -> %s", sel, name);
  fcl_context_destroy(ctx);
}

/* ---- a small forward pass checked against the reference -------------------- */
enum { FB = 1, FSQ = 20, FSK = 33, FHQ = 2, FHK = 1, FD = 16, FDV = 16 };

/* Runs the forward on ctx (buffers in cl, queue of ctx) and compares; 1 = ok. */
static int small_forward(fcl_context *ctx, const char *label) {
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue queue = fcl_context_queue(ctx);
  static double q[FB * FSQ * FHQ * FD], k[FB * FSK * FHK * FD], v[FB * FSK * FHK * FDV];
  static double o_ref[FB * FSQ * FHQ * FDV], o_got[FB * FSQ * FHQ * FDV];
  static double l_ref[FB * FHQ * FSQ], l_got[FB * FHQ * FSQ];
  tu_rng rng;
  tu_rng_seed(&rng, 3);
  tu_fill_uniform(&rng, q, sizeof q / 8, -2, 2);
  tu_fill_uniform(&rng, k, sizeof k / 8, -2, 2);
  tu_fill_uniform(&rng, v, sizeof v / 8, -1, 1);
  tu_round_array(q, sizeof q / 8, FCL_F16);
  tu_round_array(k, sizeof k / 8, FCL_F16);
  tu_round_array(v, sizeof v / 8, FCL_F16);
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = FB; p.seqlen_q = FSQ; p.seqlen_k = FSK; p.heads_q = FHQ; p.heads_kv = FHK;
  p.head_dim = FD; p.head_dim_v = FDV; p.causal = 1;
  p.window_left = p.window_right = -1;
  ref_attention_forward(&p, q, k, v, o_ref, l_ref);

  tu_tensor tq, tk, tv, to;
  int ok = !tu_tensor_create(cl, queue, q, FB, FSQ, FHQ, FD, FCL_F16, TU_BSHD, 0, 0, &tq) &&
           !tu_tensor_create(cl, queue, k, FB, FSK, FHK, FD, FCL_F16, TU_BSHD, 0, 0, &tk) &&
           !tu_tensor_create(cl, queue, v, FB, FSK, FHK, FDV, FCL_F16, TU_BSHD, 0, 0, &tv) &&
           !tu_tensor_create(cl, queue, NULL, FB, FSQ, FHQ, FDV, FCL_F16, TU_BSHD, 0, 0, &to);
  cl_mem lse = tu_buffer_poison(cl, queue, sizeof l_got / 2);
  if (!ok || !lse) {
    printf("FAIL %s: could not create buffers\n", label);
    ++g_failed;
    return 0;
  }
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = FB; d.seqlen_q = FSQ; d.seqlen_k = FSK; d.heads_q = FHQ; d.heads_kv = FHK;
  d.head_dim = FD; d.head_dim_v = FDV; d.causal = 1;
  const fcl_status st = fcl_attention_forward(ctx, &d, &tq.t, &tk.t, &tv.t, &to.t, lse);
  CHECK(st == FCL_OK, "%s: forward status %s: %s", label, fcl_status_string(st),
        fcl_context_last_error(ctx));
  ok = st == FCL_OK && clFinish(queue) == CL_SUCCESS;
  if (ok) {
    ok = tu_tensor_read(queue, &to, o_got, NULL) == 0 &&
         !tu_buffer_read_f32(queue, lse, l_got, FB * FHQ * FSQ, 0, NULL);
    const tu_cmp co = tu_compare(o_got, o_ref, sizeof o_ref / 8, tu_tol_output(FCL_F16), 0);
    const tu_cmp cl_ = tu_compare(l_got, l_ref, sizeof l_ref / 8, tu_tol_lse(), 1);
    if (!co.ok) tu_print_cmp("o", &co, NULL, 0);
    if (!cl_.ok) tu_print_cmp("lse", &cl_, NULL, 0);
    ok = ok && co.ok && cl_.ok;
    CHECK(ok, "%s: results differ from the reference", label);
    if (ok) PASS("%s: forward matches the reference (o err %.2e, lse err %.2e)", label,
                 co.max_err, cl_.max_err);
  }
  tu_tensor_release(&tq); tu_tensor_release(&tk); tu_tensor_release(&tv);
  tu_tensor_release(&to);
  clReleaseMemObject(lse);
  return ok;
}

/* ---- status strings, version ------------------------------------------------- */
static void test_strings(void) {
  const char *s[FCL_ERROR_INTERNAL + 1];
  for (int i = 0; i <= FCL_ERROR_INTERNAL; ++i) {
    s[i] = fcl_status_string((fcl_status)i);
    CHECK(s[i] && *s[i], "fcl_status_string(%d) is NULL or empty", i);
    if (!s[i]) s[i] = "";
    for (int j = 0; j < i; ++j)
      CHECK(strcmp(s[i], s[j]) != 0, "statuses %d and %d share the string \"%s\"", i, j, s[i]);
  }
  const int out_of_range[3] = {FCL_ERROR_INTERNAL + 1, -1, 1000};
  for (int r = 0; r < 3; ++r) {
    const char *x = fcl_status_string((fcl_status)out_of_range[r]);
    CHECK(x && *x, "fcl_status_string(%d) is NULL or empty", out_of_range[r]);
    for (int j = 0; x && j <= FCL_ERROR_INTERNAL; ++j)
      CHECK(strcmp(x, s[j]) != 0, "out-of-range status %d reads like status %d (\"%s\")",
            out_of_range[r], j, x);
  }
  PASS("fcl_status_string: %d distinct strings, out-of-range \"%s\"", FCL_ERROR_INTERNAL + 1,
       fcl_status_string((fcl_status)1000));
  CHECK(fcl_version_number() == FCL_VERSION_NUMBER, "fcl_version_number %u != header %d",
        fcl_version_number(), FCL_VERSION_NUMBER);
  CHECK(fcl_version_string() && strcmp(fcl_version_string(), FCL_VERSION_STRING) == 0,
        "fcl_version_string \"%s\" != header \"%s\"",
        fcl_version_string() ? fcl_version_string() : "(NULL)", FCL_VERSION_STRING);
  PASS("version %s (%u)", fcl_version_string(), fcl_version_number());
  CHECK(fcl_dtype_size(FCL_F32) == 4 && fcl_dtype_size(FCL_F16) == 2 &&
            fcl_dtype_size(FCL_BF16) == 2 && fcl_dtype_size((fcl_dtype)7) == 0,
        "fcl_dtype_size");
  PASS("fcl_dtype_size");
}

/* ---- device selection ------------------------------------------------------------ */
static void test_selection(void) {
  const char *env = getenv("FCL_DEVICE");
  char env_copy[256] = "";
  if (env) snprintf(env_copy, sizeof env_copy, "%s", env);

  /* NULL uses $FCL_DEVICE. */
  if (env) {
    fcl_context *a = NULL, *b = NULL;
    const fcl_status sa = fcl_context_create(NULL, &a), sb = fcl_context_create(env_copy, &b);
    CHECK(sa == FCL_OK && sb == FCL_OK, "create(NULL) %s, create(\"%s\") %s",
          fcl_status_string(sa), env_copy, fcl_status_string(sb));
    if (sa == FCL_OK && sb == FCL_OK) {
      CHECK(ctx_device(a) == ctx_device(b), "create(NULL) picked %s, $FCL_DEVICE=%s picks %s",
            device_label(ctx_device(a)), env_copy, device_label(ctx_device(b)));
      CHECK(ctx_device(a) == expected_for_substring(env_copy) || strchr(env_copy, ':'),
            "$FCL_DEVICE=%s picked %s, expected %s", env_copy, device_label(ctx_device(a)),
            device_label(expected_for_substring(env_copy)));
      PASS("create(NULL) with FCL_DEVICE=%s -> %s", env_copy, fcl_context_device_name(a));
    }
    fcl_context_destroy(a);
    fcl_context_destroy(b);
  }
  /* NULL without $FCL_DEVICE: the first GPU, else the first CPU. */
  unsetenv("FCL_DEVICE");
  check_selector(NULL, expected_default());
  if (env) setenv("FCL_DEVICE", env_copy, 1);

  /* Substrings, case-insensitive. */
  check_selector("pocl", expected_for_substring("pocl"));
  check_selector("PoCL", expected_for_substring("pocl"));
  check_selector("Portable Computing", expected_for_substring("Portable Computing"));
  check_selector("rusticl", expected_for_substring("rusticl"));
  for (cl_uint p = 0; p < g_nplat; ++p)
    if (g_plat[p].ndev) {
      check_selector(g_plat[p].dev_name[0], expected_for_substring(g_plat[p].dev_name[0]));
      break;
    }
  check_selector("no-such-device-xyz", NULL);

  /* "P:D" indices. */
  char sel[32];
  for (cl_uint p = 0; p < g_nplat; ++p) {
    for (cl_uint d = 0; d < g_plat[p].ndev && d < 2; ++d) {
      snprintf(sel, sizeof sel, "%u:%u", p, d);
      check_selector(sel, g_plat[p].dev[d]);
    }
    snprintf(sel, sizeof sel, "%u:%u", p, g_plat[p].ndev); /* one past the last device */
    check_selector(sel, NULL);
  }
  check_selector("99:0", NULL);

  /* Argument errors. */
  CHECK(fcl_context_create("pocl", NULL) == FCL_ERROR_INVALID_ARGUMENT,
        "fcl_context_create(sel, NULL) must be INVALID_ARGUMENT");
  {
    fcl_context *c = NULL;
    CHECK(fcl_context_create_from_queue(NULL, &c) == FCL_ERROR_INVALID_ARGUMENT,
          "fcl_context_create_from_queue(NULL, ..) must be INVALID_ARGUMENT");
    fcl_context_stats st;
    CHECK(fcl_context_get_stats(NULL, &st) == FCL_ERROR_INVALID_ARGUMENT,
          "fcl_context_get_stats(NULL, ..) must be INVALID_ARGUMENT");
  }
  fcl_context_destroy(NULL);
  PASS("fcl_context_destroy(NULL) is a no-op; NULL arguments are rejected");
}

/* ---- application queues --------------------------------------------------------- */
static cl_uint refcount(cl_command_queue q) {
  cl_uint n = 0;
  clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, NULL);
  return n;
}

/* The queue's reference count once it settles back to want: implementations
 * may hold transient references (e.g. PoCL, for events being retired
 * asynchronously), so poll for up to 2 s; a leaked reference stays. */
static cl_uint settled_refcount(cl_command_queue q, cl_uint want) {
  clFinish(q);
  cl_uint n = refcount(q);
  for (int i = 0; i < 200 && n != want; ++i) {
    const struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    n = refcount(q);
  }
  return n;
}

static void test_from_queue(void) {
  fcl_context *probe = NULL;
  if (fcl_context_create(NULL, &probe) != FCL_OK) {
    CHECK(0, "fcl_context_create(NULL): %s", fcl_context_last_error(NULL));
    return;
  }
  cl_device_id dev = ctx_device(probe);
  fcl_context_destroy(probe);
  cl_int err;
  cl_context clctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  if (tu_cl_check(err, "clCreateContext")) {
    CHECK(0, "clCreateContext failed");
    return;
  }
  /* In order. */
  cl_command_queue q = clCreateCommandQueue(clctx, dev, 0, &err);
  CHECK(err == CL_SUCCESS, "clCreateCommandQueue: %d", (int)err);
  const cl_uint rc0 = refcount(q);
  fcl_context *ctx = NULL;
  const fcl_status st = fcl_context_create_from_queue(q, &ctx);
  CHECK(st == FCL_OK, "create_from_queue(in-order): %s: %s", fcl_status_string(st),
        fcl_context_last_error(NULL));
  if (st == FCL_OK) {
    CHECK(fcl_context_queue(ctx) == q, "fcl_context_queue is not the application's queue");
    CHECK(fcl_context_cl(ctx) == clctx, "fcl_context_cl is not the queue's context");
    CHECK(refcount(q) > rc0, "the queue was not retained (refcount %u -> %u)", rc0, refcount(q));
    small_forward(ctx, "create_from_queue(in-order)");
    fcl_context_destroy(ctx);
    const cl_uint rc1 = settled_refcount(q, rc0);
    CHECK(rc1 == rc0, "queue refcount %u after destroy, was %u before create", rc1, rc0);
    PASS("create_from_queue(in-order): queue retained and released");
  }
  clReleaseCommandQueue(q);

  /* Out of order, where the device can make one. */
  cl_command_queue_properties props = 0;
  clGetDeviceInfo(dev, CL_DEVICE_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) {
    q = clCreateCommandQueue(clctx, dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    CHECK(err == CL_SUCCESS, "clCreateCommandQueue(out of order): %d", (int)err);
    if (err == CL_SUCCESS) {
      const cl_uint rc = refcount(q);
      ctx = NULL;
      const fcl_status so = fcl_context_create_from_queue(q, &ctx);
      CHECK(so == FCL_ERROR_UNSUPPORTED || so == FCL_ERROR_INVALID_ARGUMENT,
            "create_from_queue(out-of-order): %s, want UNSUPPORTED or INVALID_ARGUMENT",
            fcl_status_string(so));
      const char *msg = fcl_context_last_error(NULL);
      CHECK(msg && *msg, "create_from_queue(out-of-order): no message");
      CHECK(settled_refcount(q, rc) == rc, "a failed create_from_queue kept a queue reference");
      if (so == FCL_OK) fcl_context_destroy(ctx);
      else PASS("create_from_queue(out-of-order) -> %s: \"%s\"", fcl_status_string(so), msg);
      clReleaseCommandQueue(q);
    }
  } else {
    printf("note: device has no out-of-order queues; that check does not apply\n");
  }
  clReleaseContext(clctx);
}

/* ---- the binary cache ------------------------------------------------------------ */
typedef enum { CORRUPT_FLIP, CORRUPT_TRUNCATE } corruption;

/* Applies fn to every regular file under dir; returns the number of files. */
static int walk_files(const char *dir, corruption how, int apply, int depth) {
  DIR *dp = opendir(dir);
  if (!dp) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(path, &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) {
      if (depth < 8) n += walk_files(path, how, apply, depth + 1);
      continue;
    }
    if (!S_ISREG(sb.st_mode)) continue;
    ++n;
    if (!apply) continue;
    const size_t size = (size_t)sb.st_size;
    if (how == CORRUPT_TRUNCATE) {
      if (truncate(path, (off_t)(size / 2)) != 0) printf("note: could not truncate %s\n", path);
      continue;
    }
    unsigned char *buf = malloc(size ? size : 1);
    FILE *f = fopen(path, "rb");
    const size_t got = f && buf ? fread(buf, 1, size, f) : 0;
    if (f) fclose(f);
    if (got == size && size) {
      /* Flip bytes in the middle and at the end: past any header. */
      for (size_t i = size / 2; i < size / 2 + 16 && i < size; ++i) buf[i] ^= 0x5a;
      buf[size - 1] ^= 0xff;
      f = fopen(path, "wb");
      if (f) {
        fwrite(buf, 1, size, f);
        fclose(f);
      }
    }
    free(buf);
  }
  closedir(dp);
  return n;
}

static void remove_tree(const char *dir, int depth) {
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && depth < 8) remove_tree(path, depth + 1);
    else remove(path);
  }
  closedir(dp);
  rmdir(dir);
}

/* Whether ctx's driver keeps compiled kernels itself, so that flashcl's
 * cache is off there by default: PoCL and Mesa's rusticl. */
static int driver_caches_binaries(fcl_context *ctx) {
  cl_device_id   dev = NULL;
  cl_platform_id plat = NULL;
  char           name[256] = "";
  clGetContextInfo(fcl_context_cl(ctx), CL_CONTEXT_DEVICES, sizeof dev, &dev, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
  clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
  return strstr(name, "Portable Computing Language") || strstr(name, "rusticl");
}

/* One context on the cache: runs the forward, returns its stats (and in
 * *own whether the driver caches compiled kernels itself). */
static fcl_context_stats cache_round(const char *label, int *ok, int *own) {
  fcl_context_stats st = {-1, -1, -1};
  fcl_context *ctx = NULL;
  const fcl_status s = fcl_context_create(NULL, &ctx);
  CHECK(s == FCL_OK, "%s: create: %s", label, fcl_context_last_error(NULL));
  *ok = 0;
  if (s != FCL_OK) return st;
  if (own) *own = driver_caches_binaries(ctx);
  *ok = small_forward(ctx, label);
  CHECK(fcl_context_get_stats(ctx, &st) == FCL_OK, "%s: fcl_context_get_stats failed", label);
  printf("     %s: programs built %d, from cache %d, cache writes %d\n", label,
         st.programs_built, st.programs_from_cache, st.cache_writes);
  fcl_context_destroy(ctx);
  return st;
}

static void test_cache(void) {
  const char *base_env = getenv("FCL_CACHE_DIR");
  char old[1024] = "";
  if (base_env) snprintf(old, sizeof old, "%s", base_env);
  char dir[1100];
  if (base_env && *base_env) {
    /* It and its parents may exist, or not: nothing before this writes
     * there where the driver caches kernels itself. */
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", base_env);
    for (char *p = parent + 1; *p; ++p)
      if (*p == '/') {
        *p = '\0';
        mkdir(parent, 0777);
        *p = '/';
      }
    mkdir(parent, 0777);
    snprintf(dir, sizeof dir, "%s/ctx-test-XXXXXX", base_env);
  } else {
    snprintf(dir, sizeof dir, "/tmp/fcl-ctx-test-XXXXXX");
  }
  if (!mkdtemp(dir)) {
    CHECK(0, "mkdtemp(%s) failed", dir);
    return;
  }
  const char *cache_flag = getenv("FCL_CACHE");
  char old_flag[64] = "";
  if (cache_flag) snprintf(old_flag, sizeof old_flag, "%s", cache_flag);
  int ok, own = 0;

  /* The default: the cache is written unless the driver keeps compiled
   * kernels itself (a directory of its own, removed after). */
  char dir0[1200];
  snprintf(dir0, sizeof dir0, "%s/default", dir);
  setenv("FCL_CACHE_DIR", dir0, 1);
  unsetenv("FCL_CACHE");
  fcl_context_stats s0 = cache_round("cache 0 (default)", &ok, &own);
  const int files0 = walk_files(dir0, CORRUPT_FLIP, 0, 0);
  if (own)
    CHECK(s0.cache_writes == 0 && s0.programs_from_cache == 0 && files0 == 0,
          "cache 0: the driver caches kernels itself: writes %d, from cache %d, files %d, "
          "want none", s0.cache_writes, s0.programs_from_cache, files0);
  else
    CHECK(s0.cache_writes >= 1 && files0 >= 1, "cache 0: writes %d, files %d, want >= 1",
          s0.cache_writes, files0);
  remove_tree(dir0, 0);
  PASS("binary cache by default: %s", own ? "off (the driver caches kernels)" : "on");

  /* FCL_CACHE=1: on, whatever the driver. */
  setenv("FCL_CACHE", "1", 1);
  setenv("FCL_CACHE_DIR", dir, 1);
  printf("binary cache in %s\n", dir);

  fcl_context_stats s1 = cache_round("cache 1 (empty cache)", &ok, NULL);
  CHECK(s1.programs_built >= 1, "cache 1: programs_built %d, want >= 1", s1.programs_built);
  CHECK(s1.cache_writes >= 1, "cache 1: cache_writes %d, want >= 1", s1.cache_writes);
  const int files = walk_files(dir, CORRUPT_FLIP, 0, 0);
  CHECK(files >= 1, "cache 1 left no file in %s", dir);

  fcl_context_stats s2 = cache_round("cache 2 (warm cache)", &ok, NULL);
  CHECK(s2.programs_built == 0, "cache 2: programs_built %d, want 0", s2.programs_built);
  CHECK(s2.programs_from_cache >= 1, "cache 2: programs_from_cache %d, want >= 1",
        s2.programs_from_cache);

  walk_files(dir, CORRUPT_FLIP, 1, 0);
  fcl_context_stats s3 = cache_round("cache 3 (bytes flipped in every file)", &ok, NULL);
  CHECK(s3.programs_built >= 1, "cache 3: programs_built %d, want >= 1 (a broken entry must "
        "be rebuilt)", s3.programs_built);

  walk_files(dir, CORRUPT_TRUNCATE, 1, 0);
  fcl_context_stats s4 = cache_round("cache 4 (every file truncated to half)", &ok, NULL);
  CHECK(s4.programs_built >= 1, "cache 4: programs_built %d, want >= 1", s4.programs_built);

  fcl_context_stats s5 = cache_round("cache 5 (rewritten cache)", &ok, NULL);
  CHECK(s5.programs_built == 0 && s5.programs_from_cache >= 1,
        "cache 5: built %d from cache %d, want 0 and >= 1", s5.programs_built,
        s5.programs_from_cache);
  PASS("binary cache: %d file(s); build, reuse, rebuild after corruption", files);

  fcl_context_stats bad;
  CHECK(fcl_context_get_stats(NULL, &bad) == FCL_ERROR_INVALID_ARGUMENT,
        "fcl_context_get_stats(NULL) must be INVALID_ARGUMENT");
  remove_tree(dir, 0);
  if (base_env) setenv("FCL_CACHE_DIR", old, 1);
  else unsetenv("FCL_CACHE_DIR");
  if (cache_flag) setenv("FCL_CACHE", old_flag, 1);
  else unsetenv("FCL_CACHE");
}

/* ---- device time of an operation, and the configuration queries ----------- */
static void test_timing_and_config(void) {
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    CHECK(0, "fcl_context_create(NULL): %s", fcl_context_last_error(NULL));
    return;
  }
  double ms = -1;
  /* Timing is off until asked for: launches then take no events. */
  fcl_status st = fcl_context_last_op_time(ctx, &ms);
  CHECK(st == FCL_ERROR_UNSUPPORTED && strstr(fcl_context_last_error(ctx), "FCL_OPTION_TIMING"),
        "last_op_time with timing off: %s \"%s\"", fcl_status_string(st),
        fcl_context_last_error(ctx));
  int64_t v = -1;
  CHECK(fcl_context_get_option(ctx, FCL_OPTION_TIMING, &v) == FCL_OK && v == 0,
        "FCL_OPTION_TIMING's default: %lld", (long long)v);
  CHECK(fcl_context_get_option(ctx, FCL_OPTION_PLAN_CACHE, &v) == FCL_OK && v == 256,
        "FCL_OPTION_PLAN_CACHE's default: %lld", (long long)v);
  CHECK(fcl_context_get_option(ctx, FCL_OPTION_RWKV6_ALGORITHM, &v) == FCL_OK &&
            v == (getenv("FCL_RWKV6_ALGORITHM") ? v : FCL_RWKV6_AUTO),
        "FCL_OPTION_RWKV6_ALGORITHM's default: %lld", (long long)v);
  for (int64_t a = FCL_RWKV6_AUTO; a <= FCL_RWKV6_CHUNKED; ++a)
    CHECK(fcl_context_set_option(ctx, FCL_OPTION_RWKV6_ALGORITHM, a) == FCL_OK &&
              fcl_context_get_option(ctx, FCL_OPTION_RWKV6_ALGORITHM, &v) == FCL_OK && v == a,
          "FCL_OPTION_RWKV6_ALGORITHM %lld: read back %lld", (long long)a, (long long)v);
  st = fcl_context_set_option(ctx, FCL_OPTION_RWKV6_ALGORITHM, 3);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "value: is 3"),
        "set_option(RWKV6_ALGORITHM, 3): %s \"%s\"", fcl_status_string(st),
        fcl_context_last_error(ctx));
  { /* the option is what an AUTO descriptor runs */
    fcl_rwkv6_desc rd = FCL_RWKV6_DESC_INIT;
    rd.batch = 1, rd.seqlen = 1024, rd.heads = 2, rd.head_dim_k = rd.head_dim_v = 64;
    const char *want[] = {"rwkv6_recurrent", "rwkv6_chunked"};
    for (int a = 0; a < 2; ++a) {
      fcl_config_info ri;
      fcl_context_set_option(ctx, FCL_OPTION_RWKV6_ALGORITHM, a + 1);
      st = fcl_rwkv6_config(ctx, &rd, FCL_F32, 0, &ri);
      CHECK(st == FCL_OK && !strncmp(ri.kernel, want[a], strlen(want[a])),
            "FCL_OPTION_RWKV6_ALGORITHM %d: the config runs %s (%s)", a + 1,
            st ? "nothing" : ri.kernel, fcl_context_last_error(ctx));
    }
  }
  fcl_context_set_option(ctx, FCL_OPTION_RWKV6_ALGORITHM, FCL_RWKV6_AUTO);
  st = fcl_context_set_option(ctx, FCL_OPTION_LOG, -1);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "value: is -1"),
        "set_option(LOG, -1): %s \"%s\"", fcl_status_string(st), fcl_context_last_error(ctx));
  CHECK(fcl_context_set_option(ctx, FCL_OPTION_LOG, 0) == FCL_OK &&
            fcl_context_get_option(ctx, FCL_OPTION_LOG, &v) == FCL_OK && v == 0,
        "FCL_OPTION_LOG 0: read back %lld", (long long)v);
  st = fcl_context_set_option(ctx, FCL_OPTION_TIMING, 2);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "value: is 2"),
        "set_option(TIMING, 2): %s \"%s\"", fcl_status_string(st), fcl_context_last_error(ctx));
  st = fcl_context_set_option(ctx, FCL_OPTION_PLAN_CACHE, 4097);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "4097"),
        "set_option(PLAN_CACHE, 4097): %s \"%s\"", fcl_status_string(st),
        fcl_context_last_error(ctx));
  st = fcl_context_set_option(ctx, (fcl_option)7, 1);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "option: is 7"),
        "set_option(7): %s \"%s\"", fcl_status_string(st), fcl_context_last_error(ctx));
  CHECK(fcl_context_set_option(NULL, FCL_OPTION_TIMING, 1) == FCL_ERROR_INVALID_ARGUMENT,
        "set_option(NULL ctx) is not INVALID_ARGUMENT");
  st = fcl_context_set_option(ctx, FCL_OPTION_TIMING, 1);
  CHECK(st == FCL_OK, "set_option(TIMING, 1): %s \"%s\"", fcl_status_string(st),
        fcl_context_last_error(ctx));
  st = fcl_context_last_op_time(ctx, &ms);
  CHECK(st == FCL_OK && ms == 0.0, "last_op_time before any operation: %s, %g ms",
        fcl_status_string(st), ms);
  st = fcl_context_last_op_time(ctx, NULL);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "ms"),
        "last_op_time(ms NULL): %s \"%s\"", fcl_status_string(st), fcl_context_last_error(ctx));
  CHECK(fcl_context_last_op_time(NULL, &ms) == FCL_ERROR_INVALID_ARGUMENT,
        "last_op_time(NULL ctx) is not INVALID_ARGUMENT");
  small_forward(ctx, "timed forward");
  st = fcl_context_last_op_time(ctx, &ms);
  CHECK(st == FCL_OK && ms > 0.0 && ms < 60e3, "last_op_time after a forward: %s, %g ms",
        fcl_status_string(st), ms);

  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 2, d.seqlen_q = 300, d.seqlen_k = 500, d.heads_q = 4, d.heads_kv = 2;
  d.head_dim = 40, d.head_dim_v = 24, d.causal = 1;
  fcl_config_info info;
  st = fcl_attention_config(ctx, &d, FCL_F16, 0, &info);
  CHECK(st == FCL_OK && strncmp(info.kernel, "attention_fwd", 13) == 0 &&
            strstr(info.params, "BLOCK_") && *info.source,
        "attention_config (forward): %s %s %s from %s", fcl_status_string(st), info.kernel,
        info.params, info.source);
  st = fcl_attention_config(ctx, &d, FCL_F32, 1, &info);
  CHECK(st == FCL_OK && strncmp(info.kernel, "attention_bwd", 13) == 0 && *info.params,
        "attention_config (backward): %s %s %s", fcl_status_string(st), info.kernel, info.params);
  st = fcl_attention_config(ctx, &d, (fcl_dtype)7, 0, &info);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "dtype"),
        "attention_config(dtype 7): %s \"%s\"", fcl_status_string(st), fcl_context_last_error(ctx));
  st = fcl_attention_config(ctx, &d, FCL_F16, 0, NULL);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "out"),
        "attention_config(out NULL): %s", fcl_status_string(st));
  d.head_dim = 0;
  st = fcl_attention_config(ctx, &d, FCL_F16, 0, &info);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "head_dim"),
        "attention_config(head_dim 0): %s \"%s\"", fcl_status_string(st),
        fcl_context_last_error(ctx));
  CHECK(fcl_attention_config(NULL, &d, FCL_F16, 0, &info) == FCL_ERROR_INVALID_ARGUMENT,
        "attention_config(NULL ctx) is not INVALID_ARGUMENT");

  fcl_rwkv6_desc r = FCL_RWKV6_DESC_INIT;
  r.batch = 1, r.seqlen = 1000, r.heads = 2, r.head_dim_k = 64, r.head_dim_v = 32;
  /* The portable kernel, or where the device has tensor cores (NVIDIA)
   * the mma one (which auto then picks for the backward at this length). */
  const struct { fcl_rwkv6_algorithm a; int bwd; const char *kernel, *mma; } want[] = {
      {FCL_RWKV6_RECURRENT, 0, "rwkv6_recurrent", "rwkv6_recurrent"},
      {FCL_RWKV6_CHUNKED, 0, "rwkv6_chunked", "rwkv6_chunked_mma"},
      {FCL_RWKV6_AUTO, 1, "rwkv6_bwd", "rwkv6_bwd_chunked_mma"},
      {FCL_RWKV6_CHUNKED, 1, "rwkv6_bwd_chunked", "rwkv6_bwd_chunked_mma"}};
  for (int i = 0; i < 4; ++i) {
    r.algorithm = want[i].a;
    st = fcl_rwkv6_config(ctx, &r, FCL_BF16, want[i].bwd, &info);
    CHECK(st == FCL_OK &&
              (strcmp(info.kernel, want[i].kernel) == 0 || strcmp(info.kernel, want[i].mma) == 0) &&
              strstr(info.params, "TC="),
          "rwkv6_config: %s %s %s, want %s or %s", fcl_status_string(st), info.kernel,
          info.params, want[i].kernel, want[i].mma);
  }
  r.head_dim_k = 0;
  st = fcl_rwkv6_config(ctx, &r, FCL_F32, 0, &info);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "head_dim_k"),
        "rwkv6_config(head_dim_k 0): %s \"%s\"", fcl_status_string(st),
        fcl_context_last_error(ctx));

  /* An application queue without profiling: the operation runs, its time
   * is UNSUPPORTED. */
  cl_device_id dev = ctx_device(ctx);
  cl_int err;
  cl_command_queue plain = clCreateCommandQueue(fcl_context_cl(ctx), dev, 0, &err);
  fcl_context *app = NULL;
  if (err == CL_SUCCESS && fcl_context_create_from_queue(plain, &app) == FCL_OK) {
    small_forward(app, "forward on a queue without profiling");
    st = fcl_context_last_op_time(app, &ms);
    CHECK(st == FCL_ERROR_UNSUPPORTED && strstr(fcl_context_last_error(app), "PROFILING"),
          "last_op_time on a queue without profiling: %s", fcl_status_string(st));
    fcl_context_destroy(app);
  } else {
    CHECK(0, "could not wrap a queue without profiling");
  }
  if (plain) clReleaseCommandQueue(plain);
  fcl_context_destroy(ctx);
}

int main(void) {
  const double t0 = tu_now();
  enumerate();
  test_strings();
  test_selection();
  test_from_queue();
  test_cache();
  test_timing_and_config();
  printf("test_context: %d checks, %d failed, %.1f s\n", g_checks, g_failed, tu_now() - t0);
  return g_failed ? 1 : 0;
}
