#define _POSIX_C_SOURCE 200809L /* fileno, isatty */
/* fa-tune's progress: on a terminal, one redrawn line on stderr with a bar,
 * the current class and an ETA; otherwise plain lines. Ctrl-C asks the
 * search to stop and keep what it measured. */
#include "tune.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

volatile sig_atomic_t tune_interrupted = 0;

static struct {
  bool   tty, drawn;
  int    total;
  double start, budget;
} g;

void tune_progress_start(int total_classes, double budget_s) {
  g.tty = isatty(fileno(stderr)) != 0;
  g.drawn = false;
  g.total = total_classes;
  g.start = tu_now();
  g.budget = budget_s;
}

static void clear_line(void) {
  if (g.tty && g.drawn) fputs("\r\033[K", stderr);
  g.drawn = false;
}

void tune_progress_update(int done, const char *what) {
  const double el = tu_now() - g.start;
  /* The budget bounds the time; a faster finish shows as classes go. */
  double eta = done > 0 ? el / done * (g.total - done) : g.budget;
  if (eta > g.budget - el && g.budget > el) eta = g.budget - el;
  if (!g.tty) {
    fprintf(stderr, "fa-tune: [%d/%d] %s (elapsed %.0f s, about %.0f s left)\n", done + 1,
            g.total, what, el, eta);
    return;
  }
  char bar[31];
  int fill = g.total ? 30 * done / g.total : 0;
  memset(bar, '#', (size_t)fill);
  memset(bar + fill, '.', (size_t)(30 - fill));
  bar[30] = '\0';
  clear_line();
  fprintf(stderr, "[%s] %d/%d %.60s  ETA %02d:%02d", bar, done, g.total, what,
          (int)eta / 60, (int)eta % 60);
  fflush(stderr);
  g.drawn = true;
}

void tune_progress_end(void) { clear_line(); }

void tune_log(const char *fmt, ...) {
  clear_line();
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}
