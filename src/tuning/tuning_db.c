/* The library's read-only view of the tuning database: the rows of one
 * device, read once. Every failure is a reason to fall back, never an
 * error of an operation. */
#include "tuning/tuning.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Readers wait this long for a writer's lock before falling back. */
#define FCL_DB_BUSY_MS 250
#define FCL_DB_MAX_ROWS 100000

static void copy_text(char *dst, size_t size, sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  snprintf(dst, size, "%s", t ? (const char *)t : "");
}

/* A read-only connection (uri: a file: URI). */
static sqlite3 *open_read_only(const char *uri, char *why, size_t why_size) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, FCL_DB_BUSY_MS);
    return db;
  }
  snprintf(why, why_size, "cannot open: %s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  sqlite3_close(db);
  return NULL;
}

/* file:PATH with the characters URIs reserve escaped, and a query. */
static bool file_uri(const char *path, const char *query, char *out, size_t size) {
  size_t n = (size_t)snprintf(out, size, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p && n + 4 < size; ++p) {
    if (*p == '%' || *p == '?' || *p == '#' || *p < 0x20)
      n += (size_t)snprintf(out + n, size - n, "%%%02X", *p);
    else
      out[n++] = (char)*p;
  }
  if (n + strlen(query) + 1 >= size) return false;
  snprintf(out + n, size - n, "%s", query);
  return true;
}

static bool schema_ok(sqlite3 *db, char *why, size_t why_size) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, "SELECT value FROM flashcl_meta WHERE key='schema_version'",
                              -1, &st, NULL);
  bool ok = false;
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const unsigned char *v = sqlite3_column_text(st, 0);
    ok = v && atoi((const char *)v) == FCL_TUNING_SCHEMA_VERSION;
    if (!ok)
      snprintf(why, why_size, "schema version %s, this library reads %d",
               v ? (const char *)v : "NULL", FCL_TUNING_SCHEMA_VERSION);
  } else if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
    snprintf(why, why_size, "locked by another process (%s)", sqlite3_errmsg(db));
  } else {
    snprintf(why, why_size, "not a flashcl tuning database (%s)", sqlite3_errmsg(db));
  }
  sqlite3_finalize(st);
  return ok;
}

static bool read_rows(sqlite3 *db, const fcl_device_info *dev, fcl_tuning_row **rows,
                      int *nrows, char *why, size_t why_size) {
  static const char sql[] =
      "SELECT kernel, kernel_hash, dtype, head_dim, head_dim_v, causal, seqlen_bucket,"
      " driver, params, time_ms, created FROM tuning"
      " WHERE platform=?1 AND vendor=?2 AND device=?3 AND compute_units=?4";
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, dev->platform_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, dev->vendor, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, dev->device_name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)dev->compute_units);
  }
  fcl_tuning_row *out = NULL;
  int n = 0, cap = 0;
  while (st && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (n == FCL_DB_MAX_ROWS) break;
    fcl_tuning_row r;
    memset(&r, 0, sizeof r);
    char dtype[16];
    copy_text(r.kernel, sizeof r.kernel, st, 0);
    copy_text(r.kernel_hash, sizeof r.kernel_hash, st, 1);
    copy_text(dtype, sizeof dtype, st, 2);
    r.cls.head_dim = sqlite3_column_int(st, 3);
    r.cls.head_dim_v = sqlite3_column_int(st, 4);
    r.cls.causal = sqlite3_column_int(st, 5);
    r.cls.bucket = sqlite3_column_int(st, 6);
    copy_text(r.driver, sizeof r.driver, st, 7);
    copy_text(r.params, sizeof r.params, st, 8);
    r.time_ms = sqlite3_column_double(st, 9);
    copy_text(r.created, sizeof r.created, st, 10);
    /* Rows of dtypes this library does not know are skipped; a row is
     * matched to a variant (and its class checked) by name when chosen. */
    if (!fcl_dtype_from_name(dtype, &r.cls.dtype)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      fcl_tuning_row *nr = realloc(out, (size_t)cap * sizeof *nr);
      if (!nr) {
        snprintf(why, why_size, "out of memory reading rows");
        rc = SQLITE_NOMEM;
        break;
      }
      out = nr;
    }
    out[n++] = r;
  }
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    if (rc != SQLITE_NOMEM)
      snprintf(why, why_size, "cannot read rows: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    free(out);
    return false;
  }
  sqlite3_finalize(st);
  *rows = out;
  *nrows = n;
  return true;
}

static bool read_uri(const char *uri, const fcl_device_info *dev, fcl_tuning_row **rows,
                     int *nrows, int *rc_out, char *why, size_t why_size) {
  sqlite3 *db = open_read_only(uri, why, why_size);
  if (!db) {
    *rc_out = SQLITE_CANTOPEN;
    return false;
  }
  bool ok = schema_ok(db, why, why_size) && read_rows(db, dev, rows, nrows, why, why_size);
  *rc_out = sqlite3_errcode(db);
  sqlite3_close(db);
  return ok;
}

bool fcl_tuning_db_read(const char *path, const fcl_device_info *dev,
                        fcl_tuning_row **rows, int *nrows, char *why,
                        size_t why_size) {
  *rows = NULL;
  *nrows = 0;
  struct stat sb;
  if (stat(path, &sb) != 0) {
    snprintf(why, why_size, "no file (run fa-tune to create it)");
    return false;
  }
  char uri[8300];
  int rc = SQLITE_OK;
  if (!file_uri(path, "?mode=ro", uri, sizeof uri)) {
    snprintf(why, why_size, "path too long");
    return false;
  }
  if (read_uri(uri, dev, rows, nrows, &rc, why, why_size)) return true;
  /* A WAL database in a directory this process cannot write has no -shm
   * file to share: read it as immutable (no concurrent writer there). */
  if ((rc & 0xff) != SQLITE_CANTOPEN || !file_uri(path, "?immutable=1", uri, sizeof uri))
    return false;
  return read_uri(uri, dev, rows, nrows, &rc, why, why_size);
}
