/* A 5x8 bitmap font (font.c: 5x7 glyphs, descenders in the last row) for
 * the plot's axis labels and legend. */
#ifndef FCL_BENCH_FONT_H
#define FCL_BENCH_FONT_H

#define FONT_W 5
#define FONT_H 8
#define FONT_ADVANCE 6 /* glyph width plus one column of space */

/* Whether pixel (x, y) of character c is set (0 outside the glyph, and for
 * characters outside printable ASCII). */
int font_pixel(char c, int x, int y);

#endif
