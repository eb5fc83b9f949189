/* libFuzzer target: the library's reader of the tuning database. Each input
 * is written to a file and read as a database for a fixed device identity
 * (the seed corpus in tests/fuzz/corpus_db holds valid databases of that
 * device, so mutations reach the rows); every row read is then parsed and
 * checked as the lookup does. Whatever the bytes, the reader must return
 * (rows or a reason), never crash, hang or touch memory out of bounds
 * (build with -fsanitize=fuzzer,address,undefined). */
#define _POSIX_C_SOURCE 200809L
#include "tuning/tuning.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static fcl_device_info g_dev;
static char g_path[256];

static void setup(void) {
  snprintf(g_dev.platform_name, sizeof g_dev.platform_name, "FuzzPlatform");
  snprintf(g_dev.vendor, sizeof g_dev.vendor, "FuzzVendor");
  snprintf(g_dev.device_name, sizeof g_dev.device_name, "FuzzDevice");
  snprintf(g_dev.driver_version, sizeof g_dev.driver_version, "1.0");
  g_dev.compute_units = 4;
  g_dev.local_mem = 49152;
  g_dev.max_wg = 1024;
  g_dev.preferred_multiple = 32;
  g_dev.is_nvidia = true;
  const char *dir = getenv("TMPDIR");
  snprintf(g_path, sizeof g_path, "%s/fcl-fuzz-db-%ld.db", dir && *dir ? dir : "/tmp",
           (long)getpid());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_path[0]) setup();
  FILE *f = fopen(g_path, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  fcl_tuning_row *rows = NULL;
  int n = 0;
  char why[512];
  if (fcl_tuning_db_read(g_path, &g_dev, &rows, &n, why, sizeof why)) {
    for (int i = 0; i < n; ++i) {
      /* As the lookup does: a row of a known variant and a class in range
       * is parsed over the defaults and checked. */
      fcl_tuning_class cls = rows[i].cls;
      cls.variant = fcl_variant_find(rows[i].kernel);
      if (!cls.variant || !fcl_tuning_class_valid(&cls)) continue;
      fcl_config cfg;
      cls.variant->defaults(&g_dev, &cls, &cfg);
      char pw[160];
      if (fcl_params_parse(cls.variant, rows[i].params, &cfg, pw, sizeof pw))
        (void)cls.variant->valid(&g_dev, &cls, &cfg, pw, sizeof pw);
    }
  }
  free(rows);
  remove(g_path);
  return 0;
}
