/* The tuning database's schema, shared by the library's reader and
 * fa-tune's writer. */
#ifndef FCL_TUNING_DB_H
#define FCL_TUNING_DB_H

#define FCL_TUNING_SCHEMA_VERSION 1

/* Statements that create the schema in an empty database. Rows are keyed
 * by device identity (platform, vendor, device, compute units), driver and
 * the hash of the kernel's sources, so a changed driver or kernel is never
 * served another's parameters as its own. */
#define FCL_TUNING_SCHEMA_SQL                                                   \
  "CREATE TABLE IF NOT EXISTS flashcl_meta("                                    \
  " key TEXT PRIMARY KEY, value TEXT NOT NULL);"                                \
  "CREATE TABLE IF NOT EXISTS tuning("                                          \
  " platform TEXT NOT NULL, vendor TEXT NOT NULL, device TEXT NOT NULL,"        \
  " compute_units INTEGER NOT NULL, driver TEXT NOT NULL,"                      \
  " kernel TEXT NOT NULL, kernel_hash TEXT NOT NULL,"                           \
  " dtype TEXT NOT NULL, head_dim INTEGER NOT NULL, head_dim_v INTEGER NOT NULL," \
  " causal INTEGER NOT NULL, seqlen_bucket INTEGER NOT NULL,"                   \
  " params TEXT NOT NULL, time_ms REAL NOT NULL, throughput REAL, unit TEXT,"   \
  " default_params TEXT, default_time_ms REAL, lengths TEXT,"                   \
  " tool_version TEXT NOT NULL, created TEXT NOT NULL,"                         \
  " PRIMARY KEY(platform, vendor, device, compute_units, driver, kernel,"       \
  "  kernel_hash, dtype, head_dim, head_dim_v, causal, seqlen_bucket));"

#endif
