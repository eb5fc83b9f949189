/* png-check FILE W H: exits 0 if FILE is a PNG that fa-bench's writer could
 * have made and that readers accept: the signature; chunks with intact
 * CRC-32s, IHDR first (W x H, 8-bit RGB, no interlace), IDAT, IEND last; a
 * zlib stream of stored deflate blocks whose lengths check, holding
 * H scanlines of filter 0 plus 3W bytes, with the right Adler-32; and more
 * than one colour (something was drawn). Used by the --plot CTest. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "png.h"

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int fail(const char *why) {
  fprintf(stderr, "png-check: %s\n", why);
  return 1;
}

int main(int argc, char **argv) {
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (argc != 4) return fail("usage: png-check FILE WIDTH HEIGHT (0: any)");
  const uint32_t want_w = (uint32_t)strtoul(argv[2], NULL, 10);
  const uint32_t want_h = (uint32_t)strtoul(argv[3], NULL, 10);
  FILE *f = fopen(argv[1], "rb");
  if (!f) return fail("cannot open the file");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)size + 1), *z = malloc((size_t)size + 1);
  if (!buf || !z || fread(buf, 1, (size_t)size, f) != (size_t)size) return fail("cannot read");
  fclose(f);
  if (size < 8 || memcmp(buf, sig, 8)) return fail("no PNG signature");

  size_t at = 8, zn = 0;
  uint32_t w = 0, h = 0;
  int chunks = 0, seen_end = 0;
  while (at < (size_t)size && !seen_end) {
    if ((size_t)size - at < 12) return fail("truncated chunk header");
    const uint32_t n = get32(buf + at);
    if (n > (size_t)size - at - 12) return fail("chunk longer than the file");
    const unsigned char *type = buf + at + 4, *data = buf + at + 8;
    if (png_crc32(0, type, n + 4) != get32(data + n)) return fail("bad chunk CRC");
    if (chunks++ == 0) {
      if (memcmp(type, "IHDR", 4) || n != 13) return fail("IHDR is not the first chunk");
      w = get32(data), h = get32(data + 4);
      if (data[8] != 8 || data[9] != 2 || data[10] || data[11] || data[12])
        return fail("IHDR: not 8-bit RGB, deflate, filter 0, no interlace");
      if ((want_w && w != want_w) || (want_h && h != want_h) || !w || !h)
        return fail("IHDR: unexpected size");
    } else if (!memcmp(type, "IDAT", 4)) {
      memcpy(z + zn, data, n), zn += n;
    } else if (!memcmp(type, "IEND", 4)) {
      seen_end = 1;
    }
    at += 12 + n;
  }
  if (!seen_end || at != (size_t)size) return fail("no IEND at the end");

  const size_t row = 1 + 3 * (size_t)w, raw_n = row * h;
  unsigned char *raw = malloc(raw_n + 1);
  size_t rn = 0, zi = 2;
  if (!raw) return fail("out of memory");
  if (zn < 6 || (z[0] & 0x0f) != 8 || ((unsigned)z[0] << 8 | z[1]) % 31)
    return fail("bad zlib header");
  for (int final = 0; !final;) {
    if (zi + 5 > zn) return fail("truncated deflate block");
    final = z[zi] & 1;
    if ((z[zi] >> 1 & 3) != 0) return fail("not a stored deflate block");
    const size_t len = z[zi + 1] | (size_t)z[zi + 2] << 8;
    const size_t nlen = z[zi + 3] | (size_t)z[zi + 4] << 8;
    if ((len ^ 0xffff) != nlen) return fail("stored block LEN/NLEN mismatch");
    zi += 5;
    if (zi + len > zn || rn + len > raw_n) return fail("stored block overruns");
    memcpy(raw + rn, z + zi, len), rn += len, zi += len;
  }
  if (rn != raw_n) return fail("image data size does not match IHDR");
  if (zi + 4 != zn || png_adler32(1, raw, raw_n) != get32(z + zi)) return fail("bad Adler-32");
  int colours = 0;
  for (uint32_t y = 0; y < h; y++) {
    if (raw[y * row]) return fail("a scanline filter is not 0");
    colours |= memcmp(raw + y * row + 1, raw + 1, 3 * (size_t)w) != 0 ||
               memcmp(raw + 1, raw + 4, 3 * (size_t)(w - 1)) != 0;
  }
  if (!colours) return fail("the image is one colour");
  printf("png-check: %s: valid %ux%u RGB PNG, %d chunks\n", argv[1], w, h, chunks);
  free(buf), free(z), free(raw);
  return 0;
}
