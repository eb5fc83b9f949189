/* Kernel sources: a program's files, the closure of its top files that
 * cmake/embed_cl.cmake resolved from their `requires:` lines, as embedded
 * at build time or, with $FCL_KERNEL_DIR set, read from that directory
 * (for kernel work). */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fcl_embedded_source {
  const char *name;
  const char *text;
  size_t      size;
  const char *requires; /* the names of its requires lines, one space apart */
  const int  *closure;  /* indices of its program's files, itself last; -1 ends */
};
extern const struct fcl_embedded_source fcl_embedded_sources[];

static const struct fcl_embedded_source *embedded(const char *name) {
  for (const struct fcl_embedded_source *e = fcl_embedded_sources; e->name; ++e)
    if (strcmp(e->name, name) == 0) return e;
  return NULL;
}

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

/* Whether text's requires lines name the files of want (names one space
 * apart), in order: the closure was resolved at build time, so a copy in
 * $FCL_KERNEL_DIR that requires other files needs a rebuild. */
static bool same_requires(const char *text, const char *want) {
  static const char tag[] = "/* requires:";
  for (const char *line = text; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    if (strncmp(line, tag, sizeof tag - 1) != 0) continue;
    const char *p = line + sizeof tag - 1, *end = strstr(p, "*/");
    if (!end) return false;
    for (p += strspn(p, " \t"); p < end; p += strspn(p, " \t")) {
      const size_t n = strcspn(p, " \t*");
      if (strncmp(p, want, n) != 0 || (want[n] != ' ' && want[n] != '\0')) return false;
      p += n;
      want += n + (want[n] == ' ');
    }
  }
  return *want == '\0';
}

static fcl_status read_one(fcl_context *ctx, const struct fcl_embedded_source *e, char **text,
                           size_t *size) {
  const char *dir = ctx->opt.kernel_dir;
  if (!*dir) {
    if (!(*text = malloc(e->size + 1)))
      return fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "kernel %s", e->name);
    memcpy(*text, e->text, e->size + 1);
    *size = e->size;
    return FCL_OK;
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, e->name);
  fcl_status s = read_file(ctx, path, text, size);
  if (s == FCL_OK && !same_requires(*text, e->requires)) {
    free(*text);
    *text = NULL;
    s = fcl_fail(ctx, FCL_ERROR_BUILD,
                 "FCL_KERNEL_DIR: %s requires other files than the library was built with "
                 "(\"%s\"); rebuild the library after changing a requires line",
                 path, e->requires);
  }
  return s;
}

fcl_status fcl_sources_read(fcl_context *ctx, const char *const *tops, fcl_sources *out) {
  memset(out, 0, sizeof *out);
  int cap = 0;
  for (const char *const *t = tops; *t; ++t) {
    const struct fcl_embedded_source *e = embedded(*t);
    if (!e) return fcl_fail(ctx, FCL_ERROR_INTERNAL, "kernel file %s is not embedded", *t);
    for (const int *i = e->closure; *i >= 0; ++i) ++cap;
  }
  const struct fcl_embedded_source **files = malloc(((size_t)cap + 1) * sizeof *files);
  out->names = malloc(((size_t)cap + 1) * sizeof *out->names);
  out->texts = calloc((size_t)cap + 1, sizeof *out->texts);
  out->sizes = malloc(((size_t)cap + 1) * sizeof *out->sizes);
  fcl_status s = FCL_OK;
  if (!files || !out->names || !out->texts || !out->sizes)
    s = fcl_fail(ctx, FCL_ERROR_OUT_OF_MEMORY, "kernel sources");
  /* The tops' closures one after another, each file once (where it first
   * comes): the depth-first order over all the tops. */
  for (const char *const *t = tops; s == FCL_OK && *t; ++t) {
    for (const int *i = embedded(*t)->closure; *i >= 0; ++i) {
      const struct fcl_embedded_source *e = &fcl_embedded_sources[*i];
      int k = 0;
      while (k < out->n && files[k] != e) ++k;
      if (k == out->n) files[out->n++] = e;
    }
  }
  for (int k = 0; s == FCL_OK && k < out->n; ++k) {
    out->names[k] = files[k]->name;
    s = read_one(ctx, files[k], &out->texts[k], &out->sizes[k]);
  }
  free(files);
  if (s != FCL_OK) fcl_sources_free(out);
  return s;
}

void fcl_sources_free(fcl_sources *src) {
  for (int k = 0; src->texts && k < src->n; ++k) free(src->texts[k]);
  free(src->names);
  free(src->texts);
  free(src->sizes);
  memset(src, 0, sizeof *src);
}
