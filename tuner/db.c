/* fa-tune's side of the tuning database: opening for writing (WAL, busy
 * timeout, damaged files kept aside, never overwritten), one transaction
 * per device with bound parameters, and --show. */
#include "tune.h"

#include <errno.h>
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
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    snprintf(why, n, "%s: cannot open for writing: %s", path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return NULL;
  }
  sqlite3_busy_timeout(db, WRITER_BUSY_MS);
  char sql[256];
  snprintf(sql, sizeof sql,
           "INSERT OR IGNORE INTO flashcl_meta(key, value) VALUES('schema_version', '%d');",
           FCL_TUNING_SCHEMA_VERSION);
  if (!exec(db, "PRAGMA journal_mode=WAL;", why, n) ||
      !exec(db, "BEGIN IMMEDIATE;", why, n) || !exec(db, FCL_TUNING_SCHEMA_SQL, why, n) ||
      !exec(db, sql, why, n) || !exec(db, "COMMIT;", why, n)) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", why);
    snprintf(why, n, "%s: %s", path, msg);
    sqlite3_close(db);
    return NULL;
  }
  return db;
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
