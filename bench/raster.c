/* Minimal RGB rasteriser (see raster.h). */
#include "raster.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "font.h"

canvas canvas_new(int w, int h, rgb bg) {
  canvas c = {w, h, malloc(3 * (size_t)w * (size_t)h + 1)};
  if (c.px) fill_rect(&c, 0, 0, w - 1, h - 1, bg);
  return c;
}

void canvas_free(canvas *c) {
  free(c->px);
  c->px = NULL;
}

static void put(canvas *c, int x, int y, rgb col) {
  if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
  unsigned char *p = c->px + 3 * ((size_t)y * (size_t)c->w + (size_t)x);
  p[0] = col.r, p[1] = col.g, p[2] = col.b;
}

void fill_rect(canvas *c, int x0, int y0, int x1, int y1, rgb col) {
  for (int y = y0; y <= y1; y++)
    for (int x = x0; x <= x1; x++) put(c, x, y, col);
}

void draw_line(canvas *c, double x0, double y0, double x1, double y1, int width, int dash,
               rgb col) {
  const double len = hypot(x1 - x0, y1 - y0);
  const int steps = (int)ceil(len) + 1, lo = -(width - 1) / 2, hi = width / 2;
  for (int i = 0; i < steps; i++) { /* one sample per pixel of length */
    if (dash > 0 && (i / dash) % 2) continue;
    const double f = steps > 1 ? (double)i / (steps - 1) : 0;
    const int x = (int)lround(x0 + f * (x1 - x0)), y = (int)lround(y0 + f * (y1 - y0));
    fill_rect(c, x + lo, y + lo, x + hi, y + hi, col);
  }
}

void draw_text(canvas *c, int x, int y, const char *s, int scale, rgb col) {
  for (int i = 0; s[i]; i++)
    for (int gy = 0; gy < FONT_H; gy++)
      for (int gx = 0; gx < FONT_W; gx++)
        if (font_pixel(s[i], gx, gy)) {
          const int px = x + (i * FONT_ADVANCE + gx) * scale, py = y + gy * scale;
          fill_rect(c, px, py, px + scale - 1, py + scale - 1, col);
        }
}

void draw_text_up(canvas *c, int x, int y, const char *s, int scale, rgb col) {
  for (int i = 0; s[i]; i++)
    for (int gy = 0; gy < FONT_H; gy++)
      for (int gx = 0; gx < FONT_W; gx++)
        if (font_pixel(s[i], gx, gy)) { /* glyph column gx goes up, row gy goes right */
          const int px = x + gy * scale, py = y - (i * FONT_ADVANCE + gx + 1) * scale;
          fill_rect(c, px, py, px + scale - 1, py + scale - 1, col);
        }
}

int text_width(const char *s, int scale) {
  const int n = (int)strlen(s);
  return n ? (n * FONT_ADVANCE - 1) * scale : 0;
}
