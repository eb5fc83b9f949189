/* fa-tune --replay: the timings of an exhaustive, verbose fa-tune log of
 * one class stand in for measurements, so that the guided search can be
 * judged against the exhaustive best without noise or a device's time
 * (and tested in CI). */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char   params[160];
  double ms; /* INFINITY: rejected */
} entry;

struct tune_replay {
  entry *e;
  int    n;
};

/* "  PARAMS  12.3456 ms" or "  PARAMS  rejected: why": true with the
 * entry filled; other lines (progress, summaries) are not candidates. */
static bool parse_line(const char *line, entry *out) {
  if (line[0] != ' ' || line[1] != ' ') return false;
  const char *p = line + 2;
  const char *end = strchr(p, ' ');
  if (!end || end == p || (size_t)(end - p) >= sizeof out->params || !strchr(p, '=')) return false;
  snprintf(out->params, sizeof out->params, "%.*s", (int)(end - p), p);
  while (*end == ' ') ++end;
  if (strncmp(end, "rejected", 8) == 0) {
    out->ms = INFINITY;
    return true;
  }
  char *num_end;
  out->ms = strtod(end, &num_end);
  return num_end != end && strncmp(num_end, " ms", 3) == 0 && out->ms >= 0;
}

tune_replay *tune_replay_load(const char *path, char *why, size_t why_size) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(why, why_size, "cannot open %s", path);
    return NULL;
  }
  tune_replay *r = calloc(1, sizeof *r);
  int cap = 0;
  char line[1024];
  while (r && fgets(line, sizeof line, f)) {
    entry e;
    if (!parse_line(line, &e)) continue;
    if (r->n == cap) {
      cap = cap ? 2 * cap : 256;
      entry *ne = realloc(r->e, (size_t)cap * sizeof *ne);
      if (!ne) {
        tune_replay_free(r);
        r = NULL;
        break;
      }
      r->e = ne;
    }
    r->e[r->n++] = e;
  }
  fclose(f);
  if (!r) snprintf(why, why_size, "out of memory reading %s", path);
  else if (r->n == 0) {
    snprintf(why, why_size, "%s holds no candidate lines (an fa-tune --verbose log)", path);
    tune_replay_free(r);
    r = NULL;
  }
  return r;
}

void tune_replay_free(tune_replay *r) {
  if (!r) return;
  free(r->e);
  free(r);
}

double tune_replay_ms(const tune_replay *r, const char *params) {
  for (int i = 0; i < r->n; ++i)
    if (strcmp(r->e[i].params, params) == 0) return r->e[i].ms;
  return -1;
}

int tune_replay_count(const tune_replay *r) { return r->n; }
