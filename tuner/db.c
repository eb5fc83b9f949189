/* fa-tune's side of the tuning database: opening for writing (WAL, busy
 * timeout, damaged files kept aside, never overwritten), one transaction
 * per device with bound parameters, --show, and --export/--import as JSON
 * through SQLite's own JSON functions. */
#include "tune.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define WRITER_BUSY_MS 60000 /* another fa-tune may be writing its device */

static void make_parent_dirs(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  for (char *p = dir + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(dir, 0755); /* an existing directory is fine */
    *p = '/';
  }
}

static const char *txt(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? (const char *)t : "";
}

/* 1: a flashcl database of our schema (or an empty file), 0: damaged or
 * not a database, -1: a database that is not ours or of another version
 * (left alone). why says which. */
static int health(const char *path, char *why, size_t n) {
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    snprintf(why, n, "cannot open: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return 0;
  }
  sqlite3_busy_timeout(db, WRITER_BUSY_MS);
  int verdict = 1;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_BUSY) {
    snprintf(why, n, "locked by another process for over %d s", WRITER_BUSY_MS / 1000);
    verdict = -1;
  } else if (rc != SQLITE_ROW || strcmp(txt(st, 0), "ok") != 0) {
    snprintf(why, n, "damaged (%s)",
             rc == SQLITE_ROW ? txt(st, 0) : sqlite3_errmsg(db));
    verdict = 0;
  }
  sqlite3_finalize(st);
  if (verdict == 1) {
    int tables = 0, ours = 0;
    rc = sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type='table'", -1, &st, NULL);
    while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
      ++tables;
      ours += strcmp(txt(st, 0), "flashcl_meta") == 0;
    }
    sqlite3_finalize(st);
    if (tables > 0 && !ours) {
      snprintf(why, n, "a SQLite database of something else");
      verdict = -1;
    } else if (ours) {
      rc = sqlite3_prepare_v2(db, "SELECT value FROM flashcl_meta WHERE key='schema_version'",
                              -1, &st, NULL);
      if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
          sqlite3_column_int(st, 0) != FCL_TUNING_SCHEMA_VERSION) {
        snprintf(why, n, "schema version %d; this fa-tune writes %d",
                 sqlite3_column_int(st, 0), FCL_TUNING_SCHEMA_VERSION);
        verdict = -1;
      }
      sqlite3_finalize(st);
    }
  }
  sqlite3_close(db);
  return verdict;
}

/* Moves a damaged file (and its WAL files) aside: PATH.corrupt-<time>. */
static bool keep_aside(const char *path, char *why, size_t n) {
  char aside[4200], stamp[32];
  time_t t = time(NULL);
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime(&t));
  snprintf(aside, sizeof aside, "%s.corrupt-%s", path, stamp);
  if (rename(path, aside) != 0) {
    snprintf(why, n, "cannot move the damaged file aside: %s", strerror(errno));
    return false;
  }
  for (int i = 0; i < 2; ++i) {
    char from[4200], to[4300];
    snprintf(from, sizeof from, "%s%s", path, i ? "-shm" : "-wal");
    snprintf(to, sizeof to, "%s%s", aside, i ? "-shm" : "-wal");
    rename(from, to); /* absent is fine */
  }
  fprintf(stderr, "fa-tune: %s was damaged; kept as %s, starting a new database\n", path,
          aside);
  return true;
}

static bool exec(sqlite3 *db, const char *sql, char *why, size_t n) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK) return true;
  snprintf(why, n, "%s", err ? err : sqlite3_errmsg(db));
  sqlite3_free(err);
  return false;
}

sqlite3 *tune_db_open(const char *path, char *why, size_t n) {
  struct stat sb;
  if (stat(path, &sb) == 0) {
    char reason[512];
    int h = health(path, reason, sizeof reason);
    if (h < 0) {
      snprintf(why, n, "%s: %s; not touched", path, reason);
      return NULL;
    }
    if (h == 0) {
      fprintf(stderr, "fa-tune: %s: %s\n", path, reason);
      if (!keep_aside(path, why, n)) return NULL;
    }
  } else {
    make_parent_dirs(path);
  }
  char sql[256];
  snprintf(sql, sizeof sql,
           "INSERT OR IGNORE INTO flashcl_meta(key, value) VALUES('schema_version', '%d');",
           FCL_TUNING_SCHEMA_VERSION);
  /* Two fa-tune processes creating one file at once: switching it to WAL
   * can return SQLITE_BUSY without waiting on the busy handler (SQLite
   * does so where waiting could deadlock), so the whole opening is retried
   * for as long as a writer is waited for. */
  for (int waited_ms = 0;; waited_ms += 50) {
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
      snprintf(why, n, "%s: cannot open for writing: %s", path, sqlite3_errmsg(db));
      sqlite3_close(db);
      return NULL;
    }
    sqlite3_busy_timeout(db, WRITER_BUSY_MS);
    if (exec(db, "PRAGMA journal_mode=WAL;", why, n) &&
        exec(db, "BEGIN IMMEDIATE;", why, n) && exec(db, FCL_TUNING_SCHEMA_SQL, why, n) &&
        exec(db, sql, why, n) && exec(db, "COMMIT;", why, n))
      return db;
    const bool busy = (sqlite3_errcode(db) & 0xff) == SQLITE_BUSY;
    sqlite3_close(db);
    if (!busy || waited_ms >= WRITER_BUSY_MS) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", why);
      snprintf(why, n, "%s: %s", path, msg);
      return NULL;
    }
    sqlite3_sleep(50);
  }
}

void tune_db_close(sqlite3 *db) { sqlite3_close(db); }

bool tune_db_begin(sqlite3 *db, char *why, size_t n) {
  return exec(db, "BEGIN IMMEDIATE;", why, n);
}

bool tune_db_commit(sqlite3 *db, char *why, size_t n) {
  if (exec(db, "COMMIT;", why, n)) return true;
  exec(db, "ROLLBACK;", why + strlen(why), 0);
  return false;
}

bool tune_db_put(sqlite3 *db, fcl_context *ctx, const fcl_tuning_class *cls,
                 const tune_result *r, char *why, size_t n) {
  static const char sql[] =
      "INSERT OR REPLACE INTO tuning(platform, vendor, device, compute_units, driver,"
      " kernel, kernel_hash, dtype, head_dim, head_dim_v, causal, seqlen_bucket, params,"
      " time_ms, throughput, unit, default_params, default_time_ms, lengths, tool_version,"
      " created) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
  char hash[33], lengths[64], created[32];
  fcl_tuning_device d_;
  if (fcl_variant_hash(ctx, cls->variant, hash) != FCL_OK ||
      fcl_tuning_device_info(ctx, &d_) != FCL_OK) {
    snprintf(why, n, "kernel sources: %s", fcl_context_last_error(ctx));
    return false;
  }
  if (tune_is_kvcache(cls->variant)) /* one query token, 4 query heads a KV head */
    snprintf(lengths, sizeof lengths, "cache=%lld seqlen_q=1 batch*heads_kv=%lld",
             (long long)r->seqlen, (long long)r->bh);
  else
    snprintf(lengths, sizeof lengths, "seqlen=%lld batch*heads=%lld", (long long)r->seqlen,
             (long long)r->bh);
  time_t t = time(NULL);
  strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
  const fcl_tuning_device *d = &d_;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK) {
    int i = 1;
    sqlite3_bind_text(st, i++, d->platform, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, i++, d->vendor, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, i++, d->device, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)d->compute_units);
    sqlite3_bind_text(st, i++, d->driver, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, i++, fcl_variant_name(cls->variant), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, i++, hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, i++, fcl_dtype_name(cls->dtype), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, i++, cls->head_dim);
    sqlite3_bind_int(st, i++, cls->head_dim_v);
    sqlite3_bind_int(st, i++, cls->causal);
    sqlite3_bind_int(st, i++, cls->bucket);
    sqlite3_bind_text(st, i++, r->params, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, i++, r->ms);
    sqlite3_bind_double(st, i++, tune_throughput(cls->variant, r->work, r->ms));
    sqlite3_bind_text(st, i++, tune_unit(cls->variant), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, i++, r->default_params, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, i++, r->default_ms);
    sqlite3_bind_text(st, i++, lengths, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, i++, fcl_version_string(), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, i++, created, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    snprintf(why, n, "writing a row: %s", sqlite3_errmsg(db));
    return false;
  }
  return true;
}

bool tune_db_has(sqlite3 *db, fcl_context *ctx, const fcl_tuning_class *cls) {
  static const char sql[] =
      "SELECT 1 FROM tuning WHERE platform=?1 AND vendor=?2 AND device=?3"
      " AND compute_units=?4 AND driver=?5 AND kernel=?6 AND kernel_hash=?7 AND dtype=?8"
      " AND head_dim=?9 AND head_dim_v=?10 AND causal=?11 AND seqlen_bucket=?12";
  char hash[33];
  fcl_tuning_device d_;
  if (fcl_variant_hash(ctx, cls->variant, hash) != FCL_OK ||
      fcl_tuning_device_info(ctx, &d_) != FCL_OK)
    return false;
  const fcl_tuning_device *d = &d_;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return false;
  sqlite3_bind_text(st, 1, d->platform, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, d->vendor, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, d->device, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)d->compute_units);
  sqlite3_bind_text(st, 5, d->driver, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, fcl_variant_name(cls->variant), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 7, hash, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 8, fcl_dtype_name(cls->dtype), -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 9, cls->head_dim);
  sqlite3_bind_int(st, 10, cls->head_dim_v);
  sqlite3_bind_int(st, 11, cls->causal);
  sqlite3_bind_int(st, 12, cls->bucket);
  const bool found = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return found;
}

int tune_db_show(sqlite3 *db, fcl_context *ctx) {
  static const char sql[] =
      "SELECT kernel, dtype, head_dim, head_dim_v, causal, seqlen_bucket, params, time_ms,"
      " throughput, unit, default_time_ms, driver, kernel_hash, created FROM tuning"
      " WHERE platform=?1 AND vendor=?2 AND device=?3 AND compute_units=?4"
      " ORDER BY kernel, dtype, head_dim, head_dim_v, causal, seqlen_bucket, driver";
  fcl_tuning_device d_;
  if (fcl_tuning_device_info(ctx, &d_) != FCL_OK) {
    fprintf(stderr, "fa-tune: --show: %s\n", fcl_context_last_error(ctx));
    return 1;
  }
  const fcl_tuning_device *d = &d_;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    fprintf(stderr, "fa-tune: --show: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  sqlite3_bind_text(st, 1, d->platform, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, d->vendor, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, d->device, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)d->compute_units);
  printf("device: %s (%u compute units)\n", d->label, d->compute_units);
  printf("%-16s %-5s %7s %-6s %-6s %-58s %9s %10s %8s  %s\n", "kernel", "dtype", "d/dv",
         "causal", "bucket", "params", "ms", "throughput", "vs def.", "note");
  int rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *kernel = txt(st, 0);
    const fcl_variant *id = kernel ? fcl_variant_find(kernel) : NULL;
    char hash[33] = "", note[200] = "";
    if (id && fcl_variant_hash(ctx, id, hash) == FCL_OK &&
        strcmp(hash, txt(st, 12)) != 0)
      snprintf(note, sizeof note, "stale: kernel changed since");
    if (strcmp(txt(st, 11), d->driver) != 0)
      snprintf(note + strlen(note), sizeof note - strlen(note), "%sdriver %s", *note ? "; " : "",
               txt(st, 11));
    char dims[24];
    snprintf(dims, sizeof dims, "%d/%d", sqlite3_column_int(st, 2), sqlite3_column_int(st, 3));
    const double ms = sqlite3_column_double(st, 7), def = sqlite3_column_double(st, 10);
    printf("%-16s %-5s %7s %-6s %-6d %-58s %9.4f %6.2f %-4s %7.2fx  %s\n", kernel,
           txt(st, 1), dims, sqlite3_column_int(st, 4) ? "yes" : "no",
           sqlite3_column_int(st, 5), txt(st, 6), ms, sqlite3_column_double(st, 8),
           txt(st, 9), ms > 0 ? def / ms : 0.0, note);
    ++rows;
  }
  sqlite3_finalize(st);
  printf("%d rows\n", rows);
  return 0;
}

/* ---- --export / --import ----------------------------------------------
 * A JSON array of row objects, one per row, keyed by the column names, so
 * a team can share one device's tuning. SQLite writes and reads the JSON
 * (json_object, json_group_array; json_each, json_extract); every row is
 * checked before any is written, in one transaction. */
typedef enum { COL_TEXT, COL_INT, COL_REAL } col_kind;
static const struct {
  const char *name;
  col_kind    kind;
  bool        required; /* NOT NULL in the schema */
} columns[] = {
    {"platform", COL_TEXT, 1},       {"vendor", COL_TEXT, 1},
    {"device", COL_TEXT, 1},         {"compute_units", COL_INT, 1},
    {"driver", COL_TEXT, 1},         {"kernel", COL_TEXT, 1},
    {"kernel_hash", COL_TEXT, 1},    {"dtype", COL_TEXT, 1},
    {"head_dim", COL_INT, 1},        {"head_dim_v", COL_INT, 1},
    {"causal", COL_INT, 1},          {"seqlen_bucket", COL_INT, 1},
    {"params", COL_TEXT, 1},         {"time_ms", COL_REAL, 1},
    {"throughput", COL_REAL, 0},     {"unit", COL_TEXT, 0},
    {"default_params", COL_TEXT, 0}, {"default_time_ms", COL_REAL, 0},
    {"lengths", COL_TEXT, 0},        {"tool_version", COL_TEXT, 1},
    {"created", COL_TEXT, 1}};
enum { NCOL = (int)(sizeof columns / sizeof columns[0]) };
enum { C_UNITS = 3, C_KERNEL = 5, C_HASH = 6, C_DTYPE, C_HD, C_HDV, C_CAUSAL, C_BUCKET,
       C_PARAMS, C_TIME, C_THROUGHPUT, C_UNIT, C_DEFAULT_PARAMS, C_DEFAULT_TIME };

/* Appends to a growing string (sqlite3_str), "COL,COL,..." with each
 * column name formatted through fmt ("%s", "'%s',%s", ...). */
static void each_column(sqlite3_str *s, const char *fmt) {
  for (int i = 0; i < NCOL; ++i) {
    if (i) sqlite3_str_appendchar(s, 1, ',');
    sqlite3_str_appendf(s, fmt, columns[i].name, columns[i].name);
  }
}

static sqlite3_stmt *prepare_built(sqlite3 *db, sqlite3_str *s) {
  char *sql = sqlite3_str_finish(s);
  sqlite3_stmt *st = NULL;
  if (sql && sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) st = NULL;
  sqlite3_free(sql);
  return st;
}

int tune_db_export(sqlite3 *db, fcl_context *ctx, const char *file) {
  fcl_tuning_device d;
  if (fcl_tuning_device_info(ctx, &d) != FCL_OK) {
    fprintf(stderr, "fa-tune: --export: %s\n", fcl_context_last_error(ctx));
    return 1;
  }
  sqlite3_str *s = sqlite3_str_new(db);
  sqlite3_str_appendall(s, "SELECT json_group_array(json_object(");
  each_column(s, "'%s',%s");
  sqlite3_str_appendall(s, ")), count(*) FROM (SELECT * FROM tuning WHERE platform=?1 AND"
                           " vendor=?2 AND device=?3 AND compute_units=?4 ORDER BY kernel,"
                           " dtype, head_dim, head_dim_v, causal, seqlen_bucket, driver)");
  sqlite3_stmt *st = prepare_built(db, s);
  if (!st) {
    fprintf(stderr, "fa-tune: --export: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  sqlite3_bind_text(st, 1, d.platform, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, d.vendor, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, d.device, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)d.compute_units);
  if (sqlite3_step(st) != SQLITE_ROW) {
    fprintf(stderr, "fa-tune: --export: %s\n", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return 1;
  }
  const int rows = sqlite3_column_int(st, 1);
  const bool to_stdout = strcmp(file, "-") == 0;
  FILE *f = to_stdout ? stdout : fopen(file, "w");
  bool ok = f && fprintf(f, "%s\n", txt(st, 0)) > 0;
  if (f && !to_stdout) ok = fclose(f) == 0 && ok;
  else if (f) ok = fflush(f) == 0 && ok;
  sqlite3_finalize(st);
  if (!ok) {
    fprintf(stderr, "fa-tune: --export: cannot write %s: %s\n", file, strerror(errno));
    return 1;
  }
  fprintf(stderr, "fa-tune: exported %d rows of %s\n", rows, d.label);
  return 0;
}

/* The whole file (or stdin for "-"), NUL-terminated; NULL with why. */
static char *read_all(const char *file, size_t *len, char *why, size_t n) {
  FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");
  if (!f) {
    snprintf(why, n, "cannot read: %s", strerror(errno));
    return NULL;
  }
  char *text = NULL;
  size_t cap = 0;
  *len = 0;
  for (;;) {
    if (cap - *len < 65536) {
      char *t = realloc(text, cap = cap * 2 + 65536);
      if (!t) {
        snprintf(why, n, "out of memory");
        break;
      }
      text = t;
    }
    const size_t got = fread(text + *len, 1, cap - *len - 1, f);
    *len += got;
    if (got == 0) break;
  }
  if (text && ferror(f)) snprintf(why, n, "cannot read: %s", strerror(errno));
  else if (text && memchr(text, '\0', *len)) snprintf(why, n, "not a text file");
  else if (text) text[*len] = '\0', *why = '\0';
  if (f != stdin) fclose(f);
  if (*why) free(text), text = NULL;
  return text;
}

/* Appends one reason to a row's list ("; " between them). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void reason(char *out, size_t n, const char *fmt, ...) {
  size_t k = strlen(out);
  if (k + 3 >= n) return;
  if (k) k += (size_t)snprintf(out + k, n - k, "; ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out + k, n - k, fmt, ap);
  va_end(ap);
}

/* Checks one row of the reading statement below: (key, type, then per
 * column its JSON type and value). Empty out when it is fine. */
static void check_row(sqlite3_stmt *st, char *out, size_t n) {
  *out = '\0';
  if (strcmp(txt(st, 1), "object") != 0) {
    reason(out, n, "not an object (%s)", txt(st, 1));
    return;
  }
  bool ok[NCOL]; /* present, of the right type */
  for (int i = 0; i < NCOL; ++i) {
    const char *type = txt(st, 2 + 2 * i);
    const int v = 3 + 2 * i;
    ok[i] = false;
    if (!*type || strcmp(type, "null") == 0) {
      if (columns[i].required) reason(out, n, "\"%s\" is missing", columns[i].name);
      continue;
    }
    const bool number = strcmp(type, "integer") == 0 || strcmp(type, "real") == 0;
    if (columns[i].kind == COL_TEXT) ok[i] = strcmp(type, "text") == 0;
    else if (columns[i].kind == COL_REAL) ok[i] = number && isfinite(sqlite3_column_double(st, v));
    else ok[i] = number && sqlite3_column_double(st, v) == (double)sqlite3_column_int64(st, v);
    if (!ok[i])
      reason(out, n, "\"%s\" is not %s", columns[i].name,
             columns[i].kind == COL_TEXT ? "a string"
             : columns[i].kind == COL_INT ? "an integer" : "a finite number");
  }
#define VAL(c) (3 + 2 * (c))
  const fcl_variant *var = ok[C_KERNEL] ? fcl_variant_find(txt(st, VAL(C_KERNEL))) : NULL;
  if (ok[C_KERNEL] && !var) reason(out, n, "unknown kernel \"%s\"", txt(st, VAL(C_KERNEL)));
  fcl_dtype dt = FCL_F32;
  if (ok[C_DTYPE] && !fcl_dtype_from_name(txt(st, VAL(C_DTYPE)), &dt)) {
    reason(out, n, "unknown dtype \"%s\" (f32, f16, bf16)", txt(st, VAL(C_DTYPE)));
    ok[C_DTYPE] = false;
  }
  if (ok[C_HASH]) {
    const char *h = txt(st, VAL(C_HASH));
    if (strlen(h) != 32 || strspn(h, "0123456789abcdef") != 32)
      reason(out, n, "kernel_hash \"%s\" is not 32 hex digits", h);
  }
  const sqlite3_int64 units = sqlite3_column_int64(st, VAL(C_UNITS));
  if (ok[C_UNITS] && units < 1) reason(out, n, "compute_units %lld is not positive", units);
  fcl_tuning_class cls = {var, dt, (int)sqlite3_column_int64(st, VAL(C_HD)),
                          (int)sqlite3_column_int64(st, VAL(C_HDV)),
                          (int)sqlite3_column_int64(st, VAL(C_CAUSAL)),
                          (int)sqlite3_column_int64(st, VAL(C_BUCKET))};
  bool class_ok = var && ok[C_DTYPE];
  for (int c = C_HD; c <= C_BUCKET; ++c) {
    const sqlite3_int64 x = sqlite3_column_int64(st, VAL(c));
    const sqlite3_int64 lo = c == C_HD || c == C_HDV, hi = c == C_CAUSAL ? 1
                                                      : c == C_BUCKET ? FCL_SEQLEN_BUCKETS - 1
                                                                      : 65536;
    if (ok[c] && (x < lo || x > hi))
      reason(out, n, "%s %lld is not in %lld..%lld", columns[c].name, x, lo, hi);
    class_ok = class_ok && ok[c] && x >= lo && x <= hi;
  }
  if (class_ok && !fcl_tuning_class_valid(&cls))
    reason(out, n, "%s has no class %s d=%d dv=%d causal=%d", fcl_variant_name(var),
           fcl_dtype_name(dt), cls.head_dim, cls.head_dim_v, cls.causal);
  static const int param_cols[] = {C_PARAMS, C_DEFAULT_PARAMS};
  for (int j = 0; var && j < 2; ++j) {
    const int c = param_cols[j];
    fcl_config cfg;
    char why[200];
    if (ok[c] && !fcl_params_parse(var, txt(st, VAL(c)), &cfg, why, sizeof why))
      reason(out, n, "%s \"%s\": %s", columns[c].name, txt(st, VAL(c)), why);
  }
  static const int time_cols[] = {C_TIME, C_THROUGHPUT, C_DEFAULT_TIME};
  for (int j = 0; j < 3; ++j) {
    const int c = time_cols[j];
    const double x = sqlite3_column_double(st, VAL(c));
    if (ok[c] && !(c == C_THROUGHPUT ? x >= 0 : x > 0))
      reason(out, n, "%s %g is not %s", columns[c].name, x,
             c == C_THROUGHPUT ? "a throughput" : "a positive time");
  }
#undef VAL
}

#define MAX_REASONS 10 /* rejected rows reported one by one */

int tune_db_import(sqlite3 *db, const char *file) {
  char why[1024] = "";
  size_t len = 0;
  char *text = read_all(file, &len, why, sizeof why);
  if (!text) {
    fprintf(stderr, "fa-tune: --import %s: %s; nothing imported\n", file, why);
    return 1;
  }
  /* The document: valid JSON, an array. */
  sqlite3_stmt *st = NULL;
  int rows = 0, rejected = 0;
  static const char doc_sql[] =
      "SELECT json_valid(?1), CASE WHEN json_valid(?1) THEN json_type(?1) END,"
      " CASE WHEN json_valid(?1) THEN json_array_length(?1) END";
  if (sqlite3_prepare_v2(db, doc_sql, -1, &st, NULL) != SQLITE_OK) {
    snprintf(why, sizeof why, "%s", sqlite3_errmsg(db));
  } else {
    const int rc = len > INT_MAX ? SQLITE_TOOBIG
                                 : sqlite3_bind_text(st, 1, text, (int)len, SQLITE_STATIC);
    if (rc != SQLITE_OK) snprintf(why, sizeof why, "%s", sqlite3_errstr(rc));
    else if (sqlite3_step(st) != SQLITE_ROW) snprintf(why, sizeof why, "%s", sqlite3_errmsg(db));
    else if (!sqlite3_column_int(st, 0)) snprintf(why, sizeof why, "not valid JSON");
    else if (strcmp(txt(st, 1), "array") != 0)
      snprintf(why, sizeof why, "a JSON %s, not an array of row objects", txt(st, 1));
    else
      rows = sqlite3_column_int(st, 2);
  }
  sqlite3_finalize(st);
  st = NULL;
  bool in_tx = !*why && tune_db_begin(db, why, sizeof why);
  /* Every row checked: each column's JSON type and value. */
  if (in_tx) {
    sqlite3_str *s = sqlite3_str_new(db);
    sqlite3_str_appendall(s, "SELECT key, type,");
    each_column(s, "json_type(o,'$.%s'),json_extract(o,'$.%s')");
    sqlite3_str_appendall(s, " FROM (SELECT key, type, CASE type WHEN 'object' THEN value END"
                             " AS o FROM json_each(?1)) ORDER BY key");
    st = prepare_built(db, s);
    if (!st) snprintf(why, sizeof why, "%s", sqlite3_errmsg(db));
  }
  if (st) {
    sqlite3_bind_text(st, 1, text, (int)len, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      char bad[1024];
      check_row(st, bad, sizeof bad);
      if (*bad && ++rejected <= MAX_REASONS)
        fprintf(stderr, "fa-tune: --import %s: row %d rejected: %s\n", file,
                sqlite3_column_int(st, 0) + 1, bad);
    }
    if (rc != SQLITE_DONE) snprintf(why, sizeof why, "%s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    st = NULL;
    if (rejected > MAX_REASONS)
      fprintf(stderr, "fa-tune: --import %s: %d more rows rejected\n", file,
              rejected - MAX_REASONS);
    if (rejected && !*why)
      snprintf(why, sizeof why, "%d of %d rows rejected", rejected, rows);
  }
  /* Fields that are not columns are left out, and said so. */
  if (in_tx && !*why) {
    sqlite3_str *s = sqlite3_str_new(db);
    sqlite3_str_appendall(s, "SELECT DISTINCT f.key FROM json_each(?1) e, json_each(e.value) f"
                             " WHERE f.key NOT IN (");
    each_column(s, "'%s'");
    sqlite3_str_appendall(s, ") ORDER BY 1");
    st = prepare_built(db, s);
    if (st) sqlite3_bind_text(st, 1, text, (int)len, SQLITE_STATIC);
    while (st && sqlite3_step(st) == SQLITE_ROW)
      fprintf(stderr, "fa-tune: --import %s: field \"%s\" is not a column; left out\n", file,
              txt(st, 0));
    sqlite3_finalize(st);
    st = NULL;
  }
  /* All or nothing: one INSERT of every row, in the transaction. */
  if (in_tx && !*why) {
    sqlite3_str *s = sqlite3_str_new(db);
    sqlite3_str_appendall(s, "INSERT OR REPLACE INTO tuning(");
    each_column(s, "%s");
    sqlite3_str_appendall(s, ") SELECT ");
    each_column(s, "json_extract(value,'$.%s')");
    sqlite3_str_appendall(s, " FROM json_each(?1) ORDER BY key");
    st = prepare_built(db, s);
    if (st) sqlite3_bind_text(st, 1, text, (int)len, SQLITE_STATIC);
    if (!st || sqlite3_step(st) != SQLITE_DONE)
      snprintf(why, sizeof why, "writing rows: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
  }
  if (in_tx && !*why) {
    tune_db_commit(db, why, sizeof why);
  } else if (in_tx) {
    char ignored[8];
    exec(db, "ROLLBACK;", ignored, sizeof ignored);
  }
  free(text);
  if (*why) {
    fprintf(stderr, "fa-tune: --import %s: %s; nothing imported\n", file, why);
    return 1;
  }
  fprintf(stderr, "fa-tune: imported %d rows from %s\n", rows, file);
  return 0;
}
