/* A minimal PNG writer: 8-bit RGB, no filtering, zlib "stored" (uncompressed)
 * deflate blocks, so it needs no zlib. */
#ifndef FCL_BENCH_PNG_H
#define FCL_BENCH_PNG_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32 of PNG chunks (ISO 3309), continuing from crc (0 to start). */
uint32_t png_crc32(uint32_t crc, const unsigned char *p, size_t n);
/* Adler-32 of a zlib stream, continuing from adler (1 to start). */
uint32_t png_adler32(uint32_t adler, const unsigned char *p, size_t n);

/* Writes w x h pixels, rgb[3 * (y * w + x) + c], to path; 0 on success, -1
 * (errno set by stdio) on failure. */
int png_write_rgb(const char *path, int w, int h, const unsigned char *rgb);

#endif
