/* Kernel sources: the copies embedded at build time, or with
 * $FCL_KERNEL_DIR set, the .cl files of that directory (for kernel work). */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fcl_embedded_source {
  const char *name;
  const char *text;
  size_t      size;
};
extern const struct fcl_embedded_source fcl_embedded_sources[];

static fcl_status read_file(fcl_context *ctx, const char *path, char **text,
                            size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return fcl_fail(ctx, FCL_ERROR_BUILD, "FCL_KERNEL_DIR: cannot open %s", path);
  char  *buf = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (cap - n < 4096) {
      cap = cap ? cap * 2 : 65536;
      char *nb = realloc(buf, cap + 1);
      if (!nb) {
        free(buf);
        fclose(f);
        return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "reading %s", path);
      }
      buf = nb;
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
  } while (got > 0);
  fclose(f);
  buf[n] = '\0';
  *text = buf;
  *size = n;
  return FCL_OK;
}

fcl_status fcl_kernel_source(fcl_context *ctx, const char *name, char **text,
                             size_t *size) {
  const char *dir = ctx->opt.kernel_dir;
  if (*dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return read_file(ctx, path, text, size);
  }
  for (const struct fcl_embedded_source *e = fcl_embedded_sources; e->name; ++e) {
    if (strcmp(e->name, name) == 0) {
      *text = malloc(e->size + 1);
      if (!*text) return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "kernel %s", name);
      memcpy(*text, e->text, e->size + 1);
      *size = e->size;
      return FCL_OK;
    }
  }
  return fcl_fail(ctx, FCL_ERROR_INTERNAL, "kernel source %s is not embedded", name);
}
