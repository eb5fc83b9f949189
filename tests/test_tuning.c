/* The tuning database end to end on the test device: a tiny-budget fa-tune
 * of every kernel writes rows; a second context picks them up (seen through
 * fcl_attention_config / fcl_rwkv6_config) and its answers match the
 * reference as the defaults' do; missing, corrupt, truncated, locked and
 * read-only databases fall back or read without failing an operation; a
 * changed kernel source or driver string is not served stale rows;
 * fa-tune keeps a damaged file aside; two concurrent fa-tune processes
 * leave a valid database; export and import round-trip, and a malformed
 * file or a bad row imports nothing; fa-tune's exit statuses (0 finished,
 * 1 failure, 2 usage, 3 stopped with classes left); the registry: every
 * variant's name fits fcl_config_info.kernel, and one context keeps an
 * override for each.
 * usage: test_tuning FA_TUNE_PATH CL_SOURCE_DIR WORK_DIR */
#define _POSIX_C_SOURCE 200809L
#include "tune.h"

#include <dirent.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *g_tune, *g_cl, *g_dir;
static int g_failed, g_checks;
/* The last shell command run, printed with a failed check. */
static char g_last_cmd[8192];

/* Only failed checks are printed (with the command before them), so that
 * CI's excerpt of a failed run shows them; FCL_TEST_VERBOSE=1 prints every
 * check and command. */
static bool verbose(void) {
  const char *v = getenv("FCL_TEST_VERBOSE");
  return v && *v && strcmp(v, "0") != 0;
}

static void check(bool ok, const char *fmt, ...) {
  g_checks++;
  g_failed += !ok;
  if (ok && !verbose()) return;
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "PASS" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (!ok && !verbose()) printf("  (the last command: %s)\n", g_last_cmd);
  fflush(stdout);
}

static const char *path(const char *name) {
  static char buf[8][4096];
  static int i;
  char *p = buf[i++ % 8];
  snprintf(p, 4096, "%s/%s", g_dir, name);
  return p;
}

/* OCL_ICD_FILENAMES as this process started. The ICD loader of Ubuntu 24.04
 * (ocl-icd 2.3.2) cuts the variable at its first ':' in place while it
 * loads the platforms, so without this fa-tune, run below, saw only the first
 * of "libpocl.so.2:libnvidia-opencl.so.1" on the H100 machine. */
static char *g_icd_filenames;

static int sh(const char *fmt, ...) {
  if (g_icd_filenames) setenv("OCL_ICD_FILENAMES", g_icd_filenames, 1);
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  snprintf(g_last_cmd, sizeof g_last_cmd, "%s", cmd);
  if (verbose()) {
    printf("$ %s\n", cmd);
    fflush(stdout);
  }
  int rc = system(cmd);
  return rc == -1 ? -1 : (rc >> 8) & 0xff;
}

static long long db_scalar(const char *db_path, const char *sql) {
  sqlite3 *db = NULL;
  long long v = -1;
  sqlite3_stmt *st = NULL;
  if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

static bool db_text(const char *db_path, const char *sql, char *out, size_t n) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  bool ok = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0);
  if (ok) snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return ok;
}

static bool db_exec(const char *db_path, const char *sql) {
  sqlite3 *db = NULL;
  bool ok = sqlite3_open(db_path, &db) == SQLITE_OK &&
            sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

/* The class fa-tune was asked for below: f32, head dim 16, causal
 * (attention forward and backward), bucket 0 (a length of at most 256). */
typedef enum {
  K_ATTN_FWD, K_ATTN_BWD, K_RWKV6_RECURRENT, K_RWKV6_CHUNKED, K_RWKV6_BWD, K_ATTN_FWD_MMA,
  K_ATTN_FWD_CPU, K_ATTN_DECODE, K_COUNT
} kid;
static const char *const knames[K_COUNT] = {
    "attention_fwd", "attention_bwd",     "rwkv6_recurrent",  "rwkv6_chunked",
    "rwkv6_bwd",     "attention_fwd_mma", "attention_fwd_cpu", "attention_decode"};
static bool is_attention(kid k) {
  return k == K_ATTN_FWD || k == K_ATTN_BWD || k == K_ATTN_FWD_MMA || k == K_ATTN_FWD_CPU;
}
static fcl_tuning_class class_of(kid k) {
  return (fcl_tuning_class){fcl_variant_find(knames[k]), FCL_F32, 16, 16, is_attention(k), 0};
}

/* On a CPU the forward is attention_fwd_cpu, on NVIDIA the f32 forward is
 * attention_fwd_mma (3xTF32); FCL_CPU_KERNEL=0 and FCL_F32_TENSOR_CORES=0
 * bring back the portable attention_fwd, whose rows these tests also check. */
static void select_forward(kid k) {
  if (k == K_ATTN_FWD) {
    setenv("FCL_CPU_KERNEL", "0", 1);
    setenv("FCL_F32_TENSOR_CORES", "0", 1);
  } else {
    unsetenv("FCL_CPU_KERNEL");
    unsetenv("FCL_F32_TENSOR_CORES");
  }
}

/* Whether the library runs kernel k for its class above on this device
 * (fa-tune's `all` tunes exactly those; attention_fwd is named besides). */
static bool runs_here(kid k) {
  if (k == K_ATTN_FWD || k == K_ATTN_BWD) return true;
  if (k != K_ATTN_FWD_MMA && k != K_ATTN_FWD_CPU) return true;
  setenv("FCL_TUNING_DB", "off", 1);
  select_forward(k);
  fcl_context *ctx = NULL;
  bool runs = false;
  const fcl_tuning_class c = class_of(k);
  if (fcl_context_create(NULL, &ctx) == FCL_OK && fcl_tuning_runs(ctx, &c, false, &runs) != FCL_OK)
    runs = false;
  fcl_context_destroy(ctx);
  return runs;
}

/* The configuration a fresh context with FCL_TUNING_DB=db chooses for a
 * kernel's class, through the public API. */
static bool config_of(const char *db, kid k, fcl_config_info *info) {
  setenv("FCL_TUNING_DB", db, 1);
  select_forward(k);
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) return false;
  fcl_status s;
  if (k == K_ATTN_DECODE) { /* one query row (4 heads a KV head) against 256 keys */
    fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
    d.batch = 1, d.seqlen_q = 1, d.seqlen_k = 256, d.heads_q = 4, d.heads_kv = 1;
    d.head_dim = d.head_dim_v = 16;
    s = fcl_attention_config(ctx, &d, FCL_F32, 0, info);
  } else if (is_attention(k)) {
    fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
    d.batch = 1, d.seqlen_q = d.seqlen_k = 200, d.heads_q = d.heads_kv = 2;
    d.head_dim = d.head_dim_v = 16, d.causal = 1;
    s = fcl_attention_config(ctx, &d, FCL_F32, k == K_ATTN_BWD, info);
  } else {
    fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
    d.batch = 1, d.seqlen = 200, d.heads = 2, d.head_dim_k = d.head_dim_v = 16;
    d.algorithm = k == K_RWKV6_CHUNKED ? FCL_RWKV6_CHUNKED : FCL_RWKV6_RECURRENT;
    s = fcl_rwkv6_config(ctx, &d, FCL_F32, k == K_RWKV6_BWD, info);
  }
  fcl_context_destroy(ctx);
  select_forward(K_COUNT);
  return s == FCL_OK && strcmp(info->kernel, knames[k]) == 0;
}

/* Runs a kernel's check problem in a fresh context with FCL_TUNING_DB=db
 * and compares with the double-precision reference. */
static bool answers_ok(const char *db, kid k, char *why, size_t n) {
  setenv("FCL_TUNING_DB", db, 1);
  select_forward(k);
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    snprintf(why, n, "context: %s", fcl_context_last_error(NULL));
    select_forward(K_COUNT);
    return false;
  }
  const fcl_tuning_class c = class_of(k);
  tune_workload *w = tune_workload_create(ctx, &c, tune_check_length(c.variant), 2, true,
                                          why, n);
  bool ok = w && tune_workload_poison(w) == FCL_OK && tune_workload_run(w) == FCL_OK &&
            tune_workload_check(w, why, n);
  if (w && !ok && !*why) snprintf(why, n, "%s", fcl_context_last_error(ctx));
  tune_workload_free(w);
  fcl_context_destroy(ctx);
  select_forward(K_COUNT);
  return ok;
}

static bool contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* The first n-1 bytes of a file (a log), "" if none. */
static const char *slurp(const char *file, char *text, size_t n) {
  text[0] = '\0';
  FILE *f = fopen(file, "r");
  if (f) text[fread(text, 1, n - 1, f)] = '\0', fclose(f);
  return text;
}

static void copy_file(const char *from, const char *to) {
  sh("cp '%s' '%s'", from, to);
}

/* The registry against what reports and keeps its variants. */
static void test_registry(void) {
  const int n = fcl_variant_count();
  check(n > 0, "registry: %d variants", n);
  fcl_context *ctx = NULL;
  fcl_status   s = fcl_context_create(NULL, &ctx);
  check(s == FCL_OK, "registry: context (%s)", fcl_context_last_error(NULL));
  for (int i = 0; i < n; ++i) {
    const fcl_variant *v = fcl_variant_at(i);
    const char        *name = fcl_variant_name(v);
    check(strlen(name) < sizeof ((fcl_config_info *)0)->kernel,
          "registry: '%s' fits fcl_config_info.kernel (%zu bytes)", name,
          sizeof ((fcl_config_info *)0)->kernel);
    check(fcl_variant_find(name) == v, "registry: '%s' names one variant", name);
    /* One override slot per variant on one context, every one at once. */
    if (ctx) {
      s = fcl_tuning_override(ctx, v, "");
      check(s == FCL_OK, "registry: override of '%s' kept (%s: %s)", name,
            fcl_status_string(s), fcl_context_last_error(ctx));
    }
  }
  for (int i = 0; ctx && i < n; ++i) fcl_tuning_override(ctx, fcl_variant_at(i), NULL);
  fcl_context_destroy(ctx);
}

static void test_missing(void) {
  fcl_config_info info;
  bool ok = config_of(path("missing.db"), K_ATTN_FWD, &info);
  check(ok && contains(info.source, "built-in defaults") && contains(info.source, "no file"),
        "missing database: defaults (%s)", info.source);
  char why[512] = "";
  check(answers_ok(path("missing.db"), K_ATTN_FWD, why, sizeof why),
        "missing database: attention forward matches the reference %s", why);
}

static void test_tuned(const char *db) {
  /* all: the kernels this device runs; the portable forward only when named. */
  const char *log = path("tuned.log");
  int rc = sh("'%s' --db '%s' --ops all,attention_fwd --dtypes f32 --head-dims 16 --causal 1 "
              "--buckets 0 --budget 600 --max-tries 3 --iters 2 2>'%s'",
              g_tune, db, log);
  char text[8192];
  check(rc == 0, "tiny fa-tune of every kernel exits 0 (got %d)%s%s", rc, rc ? ":\n" : "",
        rc ? slurp(log, text, sizeof text) : "");
  /* Every kernel the device runs: the tensor-core forward on NVIDIA, the
   * CPU forward on CPUs. */
  for (int k = 0; k < K_COUNT; ++k) {
    if (!runs_here((kid)k)) continue;
    const char *name = knames[k];
    char sql[256], stored[160] = "";
    snprintf(sql, sizeof sql, "SELECT params FROM tuning WHERE kernel='%s'", name);
    bool have = db_text(db, sql, stored, sizeof stored);
    check(have, "%s: a row was written (%s)", name, stored);
    fcl_config_info info;
    bool ok = config_of(db, (kid)k, &info);
    check(ok && contains(info.source, "tuning database") && contains(info.source, "this driver") &&
              strcmp(info.params, stored) == 0,
          "%s: a second context uses the stored row (%s from %s)", name, info.params, info.source);
    char why1[512] = "", why2[512] = "";
    bool tuned_ok = answers_ok(db, (kid)k, why1, sizeof why1);
    bool def_ok = answers_ok("off", (kid)k, why2, sizeof why2);
    check(tuned_ok && def_ok, "%s: tuned and default configurations both match the reference %s%s",
          name, why1, why2);
  }
  check(sh("'%s' --db '%s' --show >/dev/null", g_tune, db) == 0, "fa-tune --show");
}

static void test_stale_kernel(const char *db) {
  /* A copy of the kernel sources with attention_fwd.cl changed. */
  const char *dir = path("changed-cl");
  sh("rm -rf '%s' && cp -r '%s' '%s' && echo '/* changed */' >> '%s/attention/attention_fwd.cl'", dir,
     g_cl, dir, dir);
  setenv("FCL_KERNEL_DIR", dir, 1);
  fcl_config_info info;
  bool ok = config_of(db, K_ATTN_FWD, &info);
  check(ok && contains(info.source, "built-in defaults") && contains(info.source, "changed kernel"),
        "changed kernel source: its rows are not used (%s)", info.source);
  ok = config_of(db, K_RWKV6_BWD, &info);
  check(ok && contains(info.source, "tuning database"),
        "changed kernel source: other kernels' rows still are (%s)", info.source);
  char why[512] = "";
  check(answers_ok(db, K_ATTN_FWD, why, sizeof why),
        "changed kernel source: attention forward matches the reference %s", why);
  unsetenv("FCL_KERNEL_DIR");
}

static void test_driver(const char *db) {
  const char *other = path("other-driver.db");
  copy_file(db, other);
  db_exec(other, "UPDATE tuning SET driver='0.0-another-driver'");
  fcl_config_info tuned, info, def;
  config_of(db, K_ATTN_FWD, &tuned);
  bool ok = config_of(other, K_ATTN_FWD, &info);
  check(ok && contains(info.source, "another driver") && strcmp(info.params, tuned.params) == 0,
        "rows of another driver serve as a fallback (%s)", info.source);
  /* With a row for this driver too, that one wins. */
  config_of("off", K_ATTN_FWD, &def);
  char sql[1024];
  snprintf(sql, sizeof sql,
           "INSERT INTO tuning SELECT platform, vendor, device, compute_units, '%s', kernel,"
           " kernel_hash, dtype, head_dim, head_dim_v, causal, seqlen_bucket, '%s', time_ms,"
           " throughput, unit, default_params, default_time_ms, lengths, tool_version, created"
           " FROM tuning WHERE kernel='attention_fwd'",
           "__DRIVER__", def.params);
  /* The driver string of this device, as the library reports it. */
  fcl_context *ctx = NULL;
  fcl_context_create(NULL, &ctx);
  const char *label = fcl_context_device_name(ctx);
  const char *drv = strrchr(label, '/');
  char driver[256];
  snprintf(driver, sizeof driver, "%s", drv ? drv + 2 : "");
  fcl_context_destroy(ctx);
  char *at = strstr(sql, "__DRIVER__");
  char final_sql[1400];
  snprintf(final_sql, sizeof final_sql, "%.*s%s%s", (int)(at - sql), sql, driver,
           at + strlen("__DRIVER__"));
  db_exec(other, final_sql);
  ok = config_of(other, K_ATTN_FWD, &info);
  check(ok && contains(info.source, "this driver") && strcmp(info.params, def.params) == 0,
        "a row of this driver is preferred to another driver's (%s from %s)", info.params,
        info.source);
}

static void test_damaged(const char *db) {
  const char *bad = path("garbage.db");
  FILE *f = fopen(bad, "wb");
  for (int i = 0; f && i < 512; ++i) fputs("this is not a database ", f);
  if (f) fclose(f);
  fcl_config_info info;
  bool ok = config_of(bad, K_ATTN_FWD, &info);
  check(ok && contains(info.source, "built-in defaults"), "garbage file: defaults (%s)",
        info.source);
  char why[512] = "";
  check(answers_ok(bad, K_ATTN_FWD, why, sizeof why),
        "garbage file: attention forward still runs and matches %s", why);
  /* A truncated copy of a real database. */
  const char *cut = path("truncated.db");
  copy_file(db, cut);
  sh("truncate -s 3000 '%s'", cut);
  ok = config_of(cut, K_ATTN_BWD, &info);
  check(ok, "truncated database: the choice does not fail (%s)", info.source);
  check(answers_ok(cut, K_ATTN_BWD, why, sizeof why),
        "truncated database: attention backward runs and matches %s", why);
  /* fa-tune keeps the damaged file aside and starts anew. */
  int rc = sh("'%s' --db '%s' --ops rwkv6_bwd --dtypes f32 --head-dims 16 --buckets 0 "
              "--budget 600 --max-tries 2 --iters 1",
              g_tune, bad);
  int kept = 0;
  DIR *d = opendir(g_dir);
  for (struct dirent *e; d && (e = readdir(d));)
    kept += strncmp(e->d_name, "garbage.db.corrupt-", 19) == 0;
  if (d) closedir(d);
  check(rc == 0 && kept == 1 &&
            db_scalar(bad, "SELECT count(*) FROM tuning WHERE kernel='rwkv6_bwd'") == 1,
        "fa-tune on a damaged file: kept aside (%d copies), new database written (rc %d)", kept,
        rc);
}

static void test_locked(const char *db) {
  const char *locked = path("locked.db");
  copy_file(db, locked);
  sh("rm -f '%s-wal' '%s-shm'", locked, locked);
  /* A rollback-journal database with a writer holding its exclusive lock. */
  sqlite3 *holder = NULL;
  sqlite3_open(locked, &holder);
  sqlite3_exec(holder, "PRAGMA journal_mode=DELETE; BEGIN EXCLUSIVE; "
                       "UPDATE tuning SET time_ms = time_ms;", NULL, NULL, NULL);
  fcl_config_info info;
  bool ok = config_of(locked, K_ATTN_FWD, &info);
  check(ok && contains(info.source, "locked"), "locked database: defaults (%s)",
        info.source);
  char why[512] = "";
  check(answers_ok(locked, K_ATTN_FWD, why, sizeof why),
        "locked database: attention forward runs and matches %s", why);
  sqlite3_exec(holder, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close(holder);
  ok = config_of(locked, K_ATTN_FWD, &info);
  check(ok && contains(info.source, "tuning database"), "unlocked again: rows used (%s)",
        info.source);
}

static void test_read_only(const char *db) {
  const char *dir = path("ro");
  sh("rm -rf '%s' && mkdir -p '%s' && cp '%s' '%s/tuning.db' && chmod 0444 '%s/tuning.db' && "
     "chmod 0555 '%s'",
     dir, dir, db, dir, dir, dir);
  char ro[4200];
  snprintf(ro, sizeof ro, "%s/tuning.db", dir);
  fcl_config_info info;
  bool ok = config_of(ro, K_RWKV6_BWD, &info);
  check(ok && contains(info.source, "tuning database"),
        "read-only database in a read-only directory: rows used (%s)", info.source);
  sh("chmod 0755 '%s'", dir);
}

static void test_concurrent(void) {
  const char *db = path("concurrent.db");
  int rc = sh("('%s' --db '%s' --ops rwkv6_bwd --dtypes f32 --head-dims 16 --buckets 0 "
              "--budget 600 --max-tries 2 --iters 1 & "
              "'%s' --db '%s' --ops rwkv6_recurrent --dtypes f32 --head-dims 16 --buckets 0 "
              "--budget 600 --max-tries 2 --iters 1 & wait %%1; a=$?; wait %%2; b=$?; exit $((a | b)))",
              g_tune, db, g_tune, db);
  char integrity[64] = "";
  db_text(db, "PRAGMA integrity_check", integrity, sizeof integrity);
  check(rc == 0 && strcmp(integrity, "ok") == 0 &&
            db_scalar(db, "SELECT count(*) FROM tuning") == 2,
        "two concurrent fa-tune runs: both stored, integrity %s (rc %d)", integrity, rc);
}

/* --resume goes on where a tune stopped: it tunes only the classes the
 * database does not hold yet (the two of test_concurrent are held). */
static void test_resume(void) {
  const char *db = path("concurrent.db"), *log = path("resume.log");
  db_exec(db, "UPDATE tuning SET created='held'");
  int rc = sh("'%s' --db '%s' --ops rwkv6_bwd,rwkv6_recurrent --dtypes f32 --head-dims 16 "
              "--buckets 0,1 --budget 600 --max-tries 2 --iters 1 --resume 2>'%s'",
              g_tune, db, log);
  char text[8192];
  slurp(log, text, sizeof text);
  check(rc == 0 && contains(text, "2 classes tuned already") &&
            contains(text, "2 of 2 classes tuned") &&
            db_scalar(db, "SELECT count(*) FROM tuning") == 4 &&
            db_scalar(db, "SELECT count(*) FROM tuning WHERE created='held'") == 2,
        "--resume tunes the 2 classes not held and keeps the 2 held (rc %d)", rc);
}

static void test_export_import(const char *db) {
  /* Copies: path() reuses its 8 buffers. */
  char json[4096], copy[4096], fresh[4096], log[4096];
  snprintf(json, sizeof json, "%s", path("rows.json"));
  snprintf(copy, sizeof copy, "%s", path("imported.db"));
  snprintf(fresh, sizeof fresh, "%s", path("fresh.db"));
  snprintf(log, sizeof log, "%s", path("import.log"));
  int rc = sh("'%s' --db '%s' --export '%s' && '%s' --db '%s' --import '%s'", g_tune, db, json,
              g_tune, copy, json);
  const long long a = db_scalar(db, "SELECT count(*) FROM tuning");
  const long long b = db_scalar(copy, "SELECT count(*) FROM tuning");
  check(rc == 0 && a > 0 && a == b, "export then import: %lld rows, %lld imported", a, b);
  fcl_config_info x, y;
  check(config_of(db, K_ATTN_BWD, &x) && config_of(copy, K_ATTN_BWD, &y) &&
            strcmp(x.params, y.params) == 0,
        "imported rows give the same choice (%s)", y.params);
  FILE *f = fopen(path("bad.json"), "w");
  if (f) fputs("[{\"platform\": \"x\"}]", f), fclose(f);
  rc = sh("'%s' --db '%s' --import '%s' 2>/dev/null", g_tune, copy, path("bad.json"));
  check(rc == 1 && db_scalar(copy, "SELECT count(*) FROM tuning") == b,
        "an incomplete JSON row is refused and nothing is imported (rc %d)", rc);
  /* A malformed file (cut short), and a document that is not an array. */
  sh("head -c 300 '%s' > '%s' && echo '{\"rows\": []}' > '%s'", json, path("cut.json"),
     path("object.json"));
  char text[4096];
  rc = sh("'%s' --db '%s' --import '%s' 2>'%s'", g_tune, fresh, path("cut.json"), log);
  check(rc == 1 && contains(slurp(log, text, sizeof text), "not valid JSON") &&
            db_scalar(fresh, "SELECT count(*) FROM tuning") == 0,
        "a malformed JSON file is refused, nothing imported (rc %d): %s", rc, text);
  rc = sh("'%s' --db '%s' --import '%s' 2>'%s'", g_tune, fresh, path("object.json"), log);
  check(rc == 1 && contains(slurp(log, text, sizeof text), "not an array"),
        "a JSON object instead of an array is refused (rc %d): %s", rc, text);
  /* Good rows and one bad field: the file is all or nothing. SQLite's
   * json_set edits the exported file. */
  char *all = NULL;
  {
    FILE *jf = fopen(json, "r");
    static char buf[1 << 20];
    size_t len = jf ? fread(buf, 1, sizeof buf - 1, jf) : 0;
    if (jf) fclose(jf);
    buf[len] = '\0';
    all = buf;
  }
  static const struct {
    const char *name, *edit, *expect;
  } bad[] = {
      {"dtype.json", "json_set(?1, '$[1].dtype', 'f64')", "row 2 rejected: unknown dtype"},
      {"dim.json", "json_set(?1, '$[0].head_dim', 'sixteen')", "\"head_dim\" is not an integer"},
      {"params.json", "json_set(?1, '$[0].params', 'NOPE=1')", "params \"NOPE=1\""},
      {"kernel.json", "json_set(?1, '$[0].kernel', 'attention_fwd_nope')", "unknown kernel"},
      {"missing.json", "json_remove(?1, '$[1].kernel_hash')", "\"kernel_hash\" is missing"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    sqlite3 *mem = NULL;
    sqlite3_stmt *st = NULL;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s", bad[i].edit);
    FILE *out = fopen(path(bad[i].name), "w");
    if (sqlite3_open(":memory:", &mem) == SQLITE_OK &&
        sqlite3_prepare_v2(mem, sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_bind_text(st, 1, all, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && out)
      fputs((const char *)sqlite3_column_text(st, 0), out);
    if (out) fclose(out);
    sqlite3_finalize(st);
    sqlite3_close(mem);
    rc = sh("'%s' --db '%s' --import '%s' 2>'%s'", g_tune, fresh, path(bad[i].name), log);
    check(rc == 1 && contains(slurp(log, text, sizeof text), bad[i].expect) &&
              contains(text, "nothing imported") &&
              db_scalar(fresh, "SELECT count(*) FROM tuning") == 0,
          "a row with a bad field (%s) is rejected with its reason, nothing imported (rc %d): %s",
          bad[i].name, rc, text);
  }
  rc = sh("'%s' --db '%s' --import - < '%s' 2>/dev/null", g_tune, fresh, json);
  check(rc == 0 && db_scalar(fresh, "SELECT count(*) FROM tuning") == a,
        "the unedited file imports from stdin (rc %d)", rc);
}

/* fa-tune's exit statuses: 0 finished (classes given up included), 3
 * stopped by --budget or a signal with classes left (--resume goes on),
 * 2 usage, 1 failure (no device, no database, a measurement error). */
static void test_exit_status(void) {
  char db[4096], log[4096];
  snprintf(db, sizeof db, "%s", path("status.db"));
  snprintf(log, sizeof log, "%s", path("status.log"));
  const char *tiny = "--ops rwkv6_bwd --dtypes f32 --head-dims 16 --max-tries 1 --iters 1";
  char text[16384];
  int rc = sh("'%s' --db '%s' %s --buckets 0 2>/dev/null", g_tune, db, tiny);
  check(rc == 0, "exit 0: a complete tiny run (rc %d)", rc);
  /* On a CPU the attention backward at 16384 is given up (one run of the
   * defaults takes seconds); elsewhere it is tuned: finished either way. */
  rc = sh("'%s' --db '%s' --ops attention_bwd --dtypes f32 --head-dims 16 --causal 0 "
          "--buckets 3 --max-tries 1 --iters 1 2>'%s'", g_tune, db, log);
  slurp(log, text, sizeof text);
  const bool given_up = contains(text, "given up (built-in defaults kept)");
  check(rc == 0 && (given_up || contains(text, "1 of 1 classes tuned")),
        "exit 0: a class given up is finished, its reason in the summary (rc %d, %s)", rc,
        given_up ? "given up here" : "tuned here");
  /* A budget spent after the first of four classes, then --resume. */
  sh("rm -f '%s'", db);
  rc = sh("'%s' --db '%s' %s --buckets 0,1,2,3 --budget 0.001 2>'%s'", g_tune, db, tiny, log);
  check(rc == 3 && contains(slurp(log, text, sizeof text), "3 classes not tried") &&
            db_scalar(db, "SELECT count(*) FROM tuning") == 1,
        "exit 3: stopped by the budget with 3 classes left, 1 stored (rc %d)", rc);
  rc = sh("'%s' --db '%s' %s --buckets 0,1,2,3 --resume 2>/dev/null", g_tune, db, tiny);
  check(rc == 0 && db_scalar(db, "SELECT count(*) FROM tuning") == 4,
        "exit 0: --resume finishes the 3 left (rc %d)", rc);
  /* SIGTERM once the first class is under way: it is finished and stored. */
  sh("rm -f '%s'", db);
  rc = sh("'%s' --db '%s' %s --dtypes f32,f16 --buckets 0,1,2,3 2>'%s' & pid=$!; "
          "for i in $(seq 400); do grep -qF '[1/' '%s' && break; sleep 0.05; done; "
          "kill -TERM $pid; wait $pid",
          g_tune, db, tiny, log, log);
  check(rc == 3 && contains(slurp(log, text, sizeof text), "stopped by a signal"),
        "exit 3: stopped by SIGTERM with classes left (rc %d)%s%s", rc, rc == 3 ? "" : ":\n",
        rc == 3 ? "" : text);
  rc = sh("'%s' --no-such-flag 2>/dev/null", g_tune);
  check(rc == 2, "exit 2: an unknown flag (rc %d)", rc);
  rc = sh("'%s' --db '%s' --budget soon 2>/dev/null", g_tune, db);
  check(rc == 2, "exit 2: a bad value (rc %d)", rc);
  rc = sh("'%s' --db '%s' --head-dims 16,0 2>/dev/null", g_tune, db);
  check(rc == 2, "exit 2: a value out of range (rc %d)", rc);
  rc = sh("'%s' --db 2>/dev/null", g_tune);
  check(rc == 2, "exit 2: a missing value (rc %d)", rc);
  rc = sh("'%s' --db '%s' --device no-such-device %s --buckets 0 2>/dev/null", g_tune, db, tiny);
  check(rc == 1, "exit 1: no such device (rc %d)", rc);
  rc = sh("'%s' --db /dev/null/tuning.db %s --buckets 0 2>/dev/null", g_tune, tiny);
  check(rc == 1, "exit 1: a database that cannot be written (rc %d)", rc);
  /* A measurement error: the defaults build but answer wrong (a kernel
   * source whose exp is not exp). */
  const char *dir = path("wrong-cl");
  sh("rm -rf '%s' && cp -r '%s' '%s' && sed -i '1i #define exp(x) ((x) * 0.5f)' "
     "'%s/rwkv6/rwkv6_recurrent.cl'", dir, g_cl, dir, dir);
  rc = sh("FCL_KERNEL_DIR='%s' '%s' --db '%s' --ops rwkv6_recurrent --dtypes f32 --head-dims 16 "
          "--buckets 0 --max-tries 1 --iters 1 2>'%s'", dir, g_tune, db, log);
  check(rc == 1 && contains(slurp(log, text, sizeof text), "FAILED"),
        "exit 1: a measurement error (wrong answers from the defaults) (rc %d)", rc);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_tuning FA_TUNE CL_SOURCE_DIR WORK_DIR\n");
    return 2;
  }
  g_tune = argv[1], g_cl = argv[2], g_dir = argv[3];
  const char *icd = getenv("OCL_ICD_FILENAMES");
  if (icd) g_icd_filenames = strdup(icd);
  sh("rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
  char db[4096];
  snprintf(db, sizeof db, "%s", path("tuned.db"));
  test_registry();
  test_missing();
  test_tuned(db);
  test_stale_kernel(db);
  test_driver(db);
  test_damaged(db);
  test_locked(db);
  test_read_only(db);
  test_concurrent();
  test_resume();
  test_export_import(db);
  test_exit_status();
  printf("%d of %d checks failed\n", g_failed, g_checks);
  free(g_icd_filenames);
  return g_failed ? 1 : 0;
}
