/* Minimal PNG writer (see png.h). Layout: signature, IHDR, one IDAT holding
 * a zlib stream (header 78 01, stored deflate blocks of at most 65535 bytes,
 * Adler-32 of the raw scanlines), IEND; each chunk ends with the CRC-32 of
 * its type and data. Each scanline is filter byte 0 then w RGB pixels. */
#include "png.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t png_crc32(uint32_t crc, const unsigned char *p, size_t n) {
  static uint32_t table[256];
  if (!table[1])
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t png_adler32(uint32_t adler, const unsigned char *p, size_t n) {
  uint32_t a = adler & 0xffff, b = adler >> 16;
  for (size_t i = 0; i < n; i++) {
    a = (a + p[i]) % 65521u;
    b = (b + a) % 65521u;
  }
  return b << 16 | a;
}

static void put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* A chunk: length, type, data, CRC of type and data. */
static int write_chunk(FILE *f, const char *type, const unsigned char *data, size_t n) {
  unsigned char head[8], tail[4];
  put32(head, (uint32_t)n);
  memcpy(head + 4, type, 4);
  put32(tail, png_crc32(png_crc32(0, head + 4, 4), data, n));
  return fwrite(head, 1, 8, f) != 8 || (n && fwrite(data, 1, n, f) != n) ||
         fwrite(tail, 1, 4, f) != 4;
}

int png_write_rgb(const char *path, int w, int h, const unsigned char *rgb) {
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  const size_t row = 1 + 3 * (size_t)w, raw_n = row * (size_t)h;
  const size_t blocks = raw_n ? (raw_n + 65534) / 65535 : 1;
  unsigned char *raw = malloc(raw_n + 1), *z = malloc(2 + raw_n + 5 * blocks + 4);
  unsigned char ihdr[13] = {0};
  int rc = -1;
  FILE *f = NULL;
  if (!raw || !z) goto done;
  for (int y = 0; y < h; y++) { /* filter type 0 (none), then the pixels */
    raw[(size_t)y * row] = 0;
    memcpy(raw + (size_t)y * row + 1, rgb + (size_t)y * 3 * (size_t)w, 3 * (size_t)w);
  }
  size_t zn = 0;
  z[zn++] = 0x78, z[zn++] = 0x01; /* deflate, 32K window, no dictionary, check bits */
  for (size_t at = 0, b = 0; b < blocks; b++) {
    const size_t n = raw_n - at < 65535 ? raw_n - at : 65535;
    z[zn++] = b + 1 == blocks; /* BFINAL, BTYPE 00 (stored) */
    z[zn++] = (unsigned char)n, z[zn++] = (unsigned char)(n >> 8);
    z[zn++] = (unsigned char)~n, z[zn++] = (unsigned char)(~n >> 8);
    memcpy(z + zn, raw + at, n);
    zn += n, at += n;
  }
  put32(z + zn, png_adler32(1, raw, raw_n));
  zn += 4;
  put32(ihdr, (uint32_t)w), put32(ihdr + 4, (uint32_t)h);
  ihdr[8] = 8, ihdr[9] = 2; /* 8 bits per sample, RGB; deflate, no filter, no interlace */
  if (!(f = fopen(path, "wb"))) goto done;
  rc = fwrite(sig, 1, 8, f) != 8 || write_chunk(f, "IHDR", ihdr, 13) ||
               write_chunk(f, "IDAT", z, zn) || write_chunk(f, "IEND", NULL, 0)
           ? -1
           : 0;
  if (fclose(f)) rc = -1;
done:
  free(raw), free(z);
  return rc;
}
