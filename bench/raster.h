/* A minimal RGB rasteriser for the plot: rectangles, lines (with a width and
 * an optional dash pattern) and text in a 5x8 font, clipped to the image. */
#ifndef FCL_BENCH_RASTER_H
#define FCL_BENCH_RASTER_H

typedef struct { unsigned char r, g, b; } rgb;

typedef struct {
  int            w, h;
  unsigned char *px; /* 3 * w * h bytes, row-major from the top */
} canvas;

/* A w x h canvas filled with bg; px NULL when out of memory. */
canvas canvas_new(int w, int h, rgb bg);
void   canvas_free(canvas *c);
void   fill_rect(canvas *c, int x0, int y0, int x1, int y1, rgb col); /* inclusive */
/* A line from (x0, y0) to (x1, y1), `width` pixels wide; dash > 0 draws
 * dash pixels on, dash off, along it. */
void   draw_line(canvas *c, double x0, double y0, double x1, double y1, int width, int dash,
                 rgb col);
/* Text with its top-left corner at (x, y), each font pixel scale x scale. */
void   draw_text(canvas *c, int x, int y, const char *s, int scale, rgb col);
/* The same, rotated a quarter turn counter-clockwise (reads bottom to top),
 * its bottom-left corner at (x, y). */
void   draw_text_up(canvas *c, int x, int y, const char *s, int scale, rgb col);
/* Width in pixels of s drawn at scale. */
int    text_width(const char *s, int scale);

#endif
