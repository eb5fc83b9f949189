/* --export / --import: the tuning rows of a device as a JSON array of
 * objects, one per row, with the database's column names as keys, so a
 * team can share one device's tuning. The reader accepts exactly that
 * shape (strings, numbers, null) and checks every row before writing. */
#include "tune.h"

#include <ctype.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const columns[] = {
    "platform", "vendor", "device", "compute_units", "driver", "kernel", "kernel_hash",
    "dtype", "head_dim", "head_dim_v", "causal", "seqlen_bucket", "params", "time_ms",
    "throughput", "unit", "default_params", "default_time_ms", "lengths", "tool_version",
    "created"};
#define NCOL ((int)(sizeof columns / sizeof columns[0]))
/* Columns that must be present and non-null in an imported row. */
static const char required[NCOL] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                    0, 0, 0, 0, 0, 1, 1};

static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

int tune_db_export(sqlite3 *db, fcl_context *ctx, const char *file) {
  char sql[1024] = "SELECT ";
  for (int i = 0; i < NCOL; ++i)
    snprintf(sql + strlen(sql), sizeof sql - strlen(sql), "%s%s", i ? "," : "", columns[i]);
  snprintf(sql + strlen(sql), sizeof sql - strlen(sql),
           " FROM tuning WHERE platform=?1 AND vendor=?2 AND device=?3 AND compute_units=?4");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    fprintf(stderr, "fa-tune: --export: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  fcl_tuning_device d_;
  fcl_tuning_device_info(ctx, &d_);
  const fcl_tuning_device *d = &d_;
  sqlite3_bind_text(st, 1, d->platform, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, d->vendor, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, d->device, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)d->compute_units);
  FILE *f = strcmp(file, "-") == 0 ? stdout : fopen(file, "w");
  if (!f) {
    fprintf(stderr, "fa-tune: --export: cannot write %s\n", file);
    sqlite3_finalize(st);
    return 1;
  }
  int rows = 0;
  fputs("[", f);
  while (sqlite3_step(st) == SQLITE_ROW) {
    fputs(rows++ ? ",\n {" : "\n {", f);
    for (int i = 0; i < NCOL; ++i) {
      fprintf(f, "%s\"%s\": ", i ? ", " : "", columns[i]);
      switch (sqlite3_column_type(st, i)) {
      case SQLITE_NULL: fputs("null", f); break;
      case SQLITE_INTEGER: fprintf(f, "%lld", (long long)sqlite3_column_int64(st, i)); break;
      case SQLITE_FLOAT: fprintf(f, "%.17g", sqlite3_column_double(st, i)); break;
      default: put_string(f, (const char *)sqlite3_column_text(st, i));
      }
    }
    fputs("}", f);
  }
  fputs("\n]\n", f);
  sqlite3_finalize(st);
  if (f != stdout) fclose(f);
  fprintf(stderr, "fa-tune: exported %d rows of %s\n", rows, d->label);
  return 0;
}

/* ---- a reader for that shape ------------------------------------------ */
typedef struct {
  const char *begin, *p, *end;
  char        err[700];
} reader;

static void skip_ws(reader *r) {
  while (r->p < r->end && isspace((unsigned char)*r->p)) r->p++;
}

static bool expect(reader *r, char c) {
  skip_ws(r);
  if (r->p < r->end && *r->p == c) {
    r->p++;
    return true;
  }
  snprintf(r->err, sizeof r->err, "expected '%c' at byte %ld", c, (long)(r->p - r->begin));
  return false;
}

/* A string into out (ASCII escapes only; \u beyond 0x7f is refused). */
static bool read_string(reader *r, char *out, size_t n) {
  if (!expect(r, '"')) return false;
  size_t k = 0;
  while (r->p < r->end && *r->p != '"') {
    char c = *r->p++;
    if (c == '\\' && r->p < r->end) {
      char e = *r->p++;
      if (e == 'u' && r->end - r->p >= 4) {
        char hex[5] = {r->p[0], r->p[1], r->p[2], r->p[3], 0};
        long v = strtol(hex, NULL, 16);
        r->p += 4;
        if (v < 0x20 || v > 0x7e) {
          snprintf(r->err, sizeof r->err, "unsupported escape \\u%s", hex);
          return false;
        }
        c = (char)v;
      } else {
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
      }
    }
    if (k + 1 >= n) {
      snprintf(r->err, sizeof r->err, "string too long");
      return false;
    }
    out[k++] = c;
  }
  out[k] = '\0';
  return expect(r, '"');
}

typedef struct {
  bool   present, is_null, is_string;
  char   text[512];
  double number;
} value;

static bool read_row(reader *r, value *vals) {
  memset(vals, 0, sizeof(value) * NCOL);
  if (!expect(r, '{')) return false;
  skip_ws(r);
  if (r->p < r->end && *r->p == '}') return r->p++, true;
  do {
    char key[64];
    if (!read_string(r, key, sizeof key) || !expect(r, ':')) return false;
    int c = 0;
    while (c < NCOL && strcmp(columns[c], key) != 0) ++c;
    value tmp, *v = c < NCOL ? &vals[c] : &tmp;
    memset(v, 0, sizeof *v);
    v->present = true;
    skip_ws(r);
    if (r->p < r->end && *r->p == '"') {
      v->is_string = true;
      if (!read_string(r, v->text, sizeof v->text)) return false;
    } else if (r->end - r->p >= 4 && strncmp(r->p, "null", 4) == 0) {
      v->is_null = true;
      r->p += 4;
    } else {
      char *stop;
      v->number = strtod(r->p, &stop);
      if (stop == r->p || stop > r->end) {
        snprintf(r->err, sizeof r->err, "bad value for \"%s\"", key);
        return false;
      }
      r->p = stop;
    }
    skip_ws(r);
  } while (r->p < r->end && *r->p == ',' && r->p++);
  return expect(r, '}');
}

static int insert(sqlite3 *db, const value *vals, char *why, size_t n) {
  char sql[1024] = "INSERT OR REPLACE INTO tuning(";
  for (int i = 0; i < NCOL; ++i)
    snprintf(sql + strlen(sql), sizeof sql - strlen(sql), "%s%s", i ? "," : "", columns[i]);
  strcat(sql, ") VALUES(");
  for (int i = 0; i < NCOL; ++i) strcat(sql, i ? ",?" : "?");
  strcat(sql, ")");
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  for (int i = 0; rc == SQLITE_OK && i < NCOL; ++i) {
    if (!vals[i].present || vals[i].is_null) sqlite3_bind_null(st, i + 1);
    else if (vals[i].is_string) sqlite3_bind_text(st, i + 1, vals[i].text, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_double(st, i + 1, vals[i].number);
  }
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) snprintf(why, n, "%s", sqlite3_errmsg(db));
  return rc == SQLITE_DONE ? 0 : 1;
}

int tune_db_import(sqlite3 *db, const char *file) {
  FILE *f = fopen(file, "rb");
  if (!f) {
    fprintf(stderr, "fa-tune: --import: cannot read %s\n", file);
    return 1;
  }
  char *text = NULL;
  size_t len = 0, cap = 0, got;
  do {
    if (cap - len < 65536) {
      char *nt = realloc(text, cap = cap * 2 + 65536);
      if (!nt) break;
      text = nt;
    }
    got = fread(text + len, 1, cap - len, f);
    len += got;
  } while (got > 0);
  fclose(f);
  if (!text) return 1;
  reader r = {text, text, text + len, ""};
  value vals[NCOL];
  int rows = 0, status = 0;
  char why[512] = "";
  if (!expect(&r, '[') || !tune_db_begin(db, why, sizeof why)) status = 1;
  skip_ws(&r);
  bool empty = status == 0 && r.p < r.end && *r.p == ']';
  while (status == 0 && !empty) {
    if (!read_row(&r, vals)) {
      status = 1;
      break;
    }
    for (int i = 0; i < NCOL && status == 0; ++i)
      if (required[i] && (!vals[i].present || vals[i].is_null)) {
        snprintf(r.err, sizeof r.err, "row %d: \"%s\" is missing", rows + 1, columns[i]);
        status = 1;
      }
    if (status == 0 && !fcl_variant_find(vals[5].text)) {
      snprintf(r.err, sizeof r.err, "row %d: unknown kernel \"%s\"", rows + 1, vals[5].text);
      status = 1;
    }
    if (status == 0 && insert(db, vals, why, sizeof why)) status = 1;
    if (status) break;
    ++rows;
    skip_ws(&r);
    if (r.p < r.end && *r.p == ',') r.p++;
    else break;
  }
  if (status == 0 && !expect(&r, ']')) status = 1;
  if (status == 0) {
    if (!tune_db_commit(db, why, sizeof why)) status = 1;
  } else {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  }
  free(text);
  if (status)
    fprintf(stderr, "fa-tune: --import %s: %s%s; nothing imported\n", file, r.err, why);
  else
    fprintf(stderr, "fa-tune: imported %d rows from %s\n", rows, file);
  return status;
}
