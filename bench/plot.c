/* fa-bench --plot (see plot.h). A series is one configuration (op, dtype,
 * head dims, causal, algorithm, impl), its points (sequence length,
 * throughput) joined in length order; x is logarithmic, y linear from 0.
 * A configuration keeps its colour across impls; the unfused baseline is
 * dashed. The legend is to the right of each panel. */
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "png.h"
#include "raster.h"
#include "test_util.h"

#define MAX_SERIES 24
#define MAX_POINTS 64
#define W 1100
#define PANEL_H 440
#define TOP 34           /* the title */
#define LEFT 80          /* y tick labels and title */
#define PLOT_W 640
#define LEGEND_X (LEFT + PLOT_W + 24)

typedef struct {
  char   label[128], config[96]; /* config: the label without the impl */
  int    panel, dashed;         /* panel 0: attention, TFLOP/s; 1: RWKV6, GB/s */
  int    n;
  double x[MAX_POINTS], y[MAX_POINTS];
} series;

static const rgb palette[10] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
                                {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127},
                                {188, 189, 34},  {23, 190, 207}};
static const rgb black = {0, 0, 0}, grey = {225, 225, 225}, white = {255, 255, 255};

static void describe(const bench_row *r, series *s) {
  const char *dt = tu_dtype_name(r->t), *op = bench_op_name(r->op);
  if (r->algorithm >= 0) {
    snprintf(s->config, sizeof s->config, "%s %s K=%lld V=%lld %s", op, dt, (long long)r->d,
             (long long)r->dv, bench_algorithm_name((fcl_rwkv6_algorithm)r->algorithm));
  } else {
    char dv[24] = "";
    if (r->dv != r->d) snprintf(dv, sizeof dv, " Dv=%lld", (long long)r->dv);
    snprintf(s->config, sizeof s->config, "%s %s D=%lld%s%s", op, dt, (long long)r->d, dv,
             r->causal ? " causal" : "");
  }
  snprintf(s->label, sizeof s->label, "%s %s", s->config, r->impl);
  s->panel = r->algorithm >= 0;
  s->dashed = !strcmp(r->impl, "unfused");
}

/* Collects the series of the rows; returns how many. */
static int collect(const bench_row *rows, int n, series *ser) {
  int ns = 0;
  for (int i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    series s;
    if (!(r->ms > 0)) continue;
    memset(&s, 0, sizeof s);
    describe(r, &s);
    const double y = s.panel ? r->bytes / (r->ms * 1e6) : r->flops / (r->ms * 1e9);
    int k = 0;
    while (k < ns && strcmp(ser[k].label, s.label)) k++;
    if (k == ns) {
      if (ns == MAX_SERIES) {
        fprintf(stderr, "fa-bench: --plot: more than %d configurations; the rest are left out\n",
                MAX_SERIES);
        continue;
      }
      ser[ns++] = s;
    }
    if (ser[k].n < MAX_POINTS) ser[k].x[ser[k].n] = (double)r->sq, ser[k].y[ser[k].n++] = y;
  }
  for (int k = 0; k < ns; k++) /* points in length order (insertion sort) */
    for (int i = 1; i < ser[k].n; i++)
      for (int j = i; j > 0 && ser[k].x[j - 1] > ser[k].x[j]; j--) {
        double t = ser[k].x[j]; ser[k].x[j] = ser[k].x[j - 1], ser[k].x[j - 1] = t;
        t = ser[k].y[j]; ser[k].y[j] = ser[k].y[j - 1], ser[k].y[j - 1] = t;
      }
  return ns;
}

/* A configuration's colour: the palette entry of its rank among the
 * distinct configurations, in order of first appearance. */
static rgb colour_of(const series *ser, int k) {
  int first = 0, c = 0;
  while (strcmp(ser[first].config, ser[k].config)) first++;
  for (int j = 0; j < first; j++) {
    int i = 0;
    while (strcmp(ser[i].config, ser[j].config)) i++;
    c += i == j;
  }
  return palette[c % 10];
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about 5 ticks to ymax. */
static double nice_step(double ymax) {
  const double raw = ymax / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static void draw_panel(canvas *c, int top, int panel, const series *ser, int ns) {
  const int x0 = LEFT, x1 = LEFT + PLOT_W, y0 = top + 30, y1 = top + PANEL_H - 60;
  double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
  for (int k = 0; k < ns; k++)
    for (int i = 0; ser[k].panel == panel && i < ser[k].n; i++) {
      xmin = fmin(xmin, ser[k].x[i]), xmax = fmax(xmax, ser[k].x[i]);
      ymax = fmax(ymax, ser[k].y[i]);
    }
  if (xmin == xmax) xmin /= 2, xmax *= 2;
  if (!(ymax > 0)) ymax = 1;
  const double step = nice_step(ymax), ytop = ceil(ymax * 1.05 / step) * step;
  const double lx0 = log2(xmin) - 0.15, lx1 = log2(xmax) + 0.15;
#define PX(x) (x0 + (log2(x) - lx0) / (lx1 - lx0) * (x1 - x0))
#define PY(y) (y1 - (y) / ytop * (y1 - y0))
  const char *title = panel ? "RWKV6: GB/s against sequence length T"
                            : "Attention: TFLOP/s against sequence length N";
  draw_text(c, x0, top + 8, title, 2, black);
  const int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
  for (int i = 0; i * step <= ytop * (1 + 1e-9); i++) { /* y grid and labels */
    char lab[32];
    const int y = (int)lround(PY(i * step));
    draw_line(c, x0, y, x1, y, 1, 0, grey);
    snprintf(lab, sizeof lab, "%.*f", decimals, i * step);
    draw_text(c, x0 - 8 - text_width(lab, 1), y - 3, lab, 1, black);
  }
  double xs[MAX_SERIES * MAX_POINTS];
  int nx = 0;
  for (int k = 0; k < ns; k++) /* the distinct lengths, in order */
    for (int i = 0; ser[k].panel == panel && i < ser[k].n; i++) {
      int j = nx;
      while (j > 0 && xs[j - 1] > ser[k].x[i]) j--;
      if (j > 0 && xs[j - 1] == ser[k].x[i]) continue;
      memmove(xs + j + 1, xs + j, (size_t)(nx - j) * sizeof *xs);
      xs[j] = ser[k].x[i], nx++;
    }
  for (int i = 0, last_right = -1000; i < nx; i++) { /* ticks; labels that fit */
    char lab[32];
    const int x = (int)lround(PX(xs[i]));
    snprintf(lab, sizeof lab, "%.0f", xs[i]);
    const int left = x - text_width(lab, 1) / 2;
    draw_line(c, x, y1, x, y1 + 4, 1, 0, black);
    if (left <= last_right + 6) continue;
    draw_text(c, left, y1 + 8, lab, 1, black);
    last_right = left + text_width(lab, 1);
  }
  draw_line(c, x0, y0, x0, y1, 1, 0, black); /* axes */
  draw_line(c, x0, y1, x1, y1, 1, 0, black);
  const char *xt = panel ? "T (log scale)" : "sequence length (log scale)";
  draw_text(c, (x0 + x1 - text_width(xt, 2)) / 2, y1 + 24, xt, 2, black);
  const char *yt = panel ? "GB/s" : "TFLOP/s";
  draw_text_up(c, 12, (y0 + y1 + text_width(yt, 2)) / 2, yt, 2, black);
  int ly = y0;
  for (int k = 0; k < ns; k++) {
    if (ser[k].panel != panel) continue;
    const rgb col = colour_of(ser, k);
    const int dash = ser[k].dashed ? 6 : 0;
    for (int i = 0; i < ser[k].n; i++) {
      const double px = PX(ser[k].x[i]), py = PY(ser[k].y[i]);
      if (i) draw_line(c, PX(ser[k].x[i - 1]), PY(ser[k].y[i - 1]), px, py, 2, dash, col);
      fill_rect(c, (int)px - 3, (int)py - 3, (int)px + 3, (int)py + 3, col);
    }
    draw_line(c, LEGEND_X, ly + 3, LEGEND_X + 28, ly + 3, 2, ser[k].dashed ? 5 : 0, col);
    draw_text(c, LEGEND_X + 36, ly, ser[k].label, 1, black);
    ly += 16;
  }
#undef PX
#undef PY
}

int plot_write(const char *path, const bench_row *rows, int n, const char *device) {
  series ser[MAX_SERIES];
  const int ns = collect(rows, n, ser);
  int has[2] = {0, 0};
  for (int k = 0; k < ns; k++) has[ser[k].panel] = 1;
  const int panels = has[0] + has[1];
  canvas c = canvas_new(W, TOP + (panels ? panels : 1) * PANEL_H, white);
  if (!c.px) {
    fprintf(stderr, "fa-bench: --plot: out of memory\n");
    return -1;
  }
  char title[160];
  snprintf(title, sizeof title, "fa-bench on %s", device);
  draw_text(&c, 12, 10, title, 2, black);
  if (!panels) draw_text(&c, LEFT, TOP + 40, "no timed rows", 2, black);
  for (int p = 0, top = TOP; p < 2; p++)
    if (has[p]) draw_panel(&c, top, p, ser, ns), top += PANEL_H;
  int rc = png_write_rgb(path, c.w, c.h, c.px);
  if (rc) perror(path);
  canvas_free(&c);
  return rc;
}
