/* The on-disk cache of built program binaries, one file per key:
 *   "FCLBIN01", key (2 x u64), payload size (u64), payload hash (2 x u64),
 *   payload.
 * Files are written to a temporary name and renamed, so a reader never sees a
 * half-written entry; a short, mismatched or damaged entry is reported as a
 * miss and rebuilt by the caller. $FCL_CACHE=0 disables the cache
 * (options.c reads it and the directory). */
#define _POSIX_C_SOURCE 200809L
#include "core/core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static const char magic[8] = {'F', 'C', 'L', 'B', 'I', 'N', '0', '1'};


static bool make_dirs(char *path) {
  for (char *p = path + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    int r = mkdir(path, 0755);
    *p = '/';
    if (r != 0 && errno != EEXIST) return false;
  }
  return mkdir(path, 0755) == 0 || errno == EEXIST;
}

/* The cache directory (options.c): false when caching is off. */
static bool cache_dir(const fcl_context *ctx, char *out, size_t n) {
  if (!ctx->opt.cache_dir[0]) return false;
  snprintf(out, n, "%s", ctx->opt.cache_dir);
  return true;
}

static bool entry_path(const fcl_context *ctx, const unsigned long long key[2], char *out,
                       size_t n) {
  char dir[4096];
  if (!cache_dir(ctx, dir, sizeof dir)) return false;
  snprintf(out, n, "%s/%016llx%016llx.bin", dir, key[0], key[1]);
  return true;
}

bool fcl_cache_load(const fcl_context *ctx, const unsigned long long key[2],
                    unsigned char **binary, size_t *size) {
  char path[4200];
  if (!entry_path(ctx, key, path, sizeof path)) return false;
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  char               m[8];
  unsigned long long hdr[5]; /* key0 key1 size sum0 sum1 */
  bool ok = fread(m, 1, 8, f) == 8 && memcmp(m, magic, 8) == 0 &&
            fread(hdr, sizeof hdr[0], 5, f) == 5 && hdr[0] == key[0] &&
            hdr[1] == key[1] && hdr[2] > 0 && hdr[2] < (1ULL << 31);
  unsigned char *buf = ok ? malloc((size_t)hdr[2]) : NULL;
  ok = ok && buf && fread(buf, 1, (size_t)hdr[2], f) == hdr[2] && fgetc(f) == EOF;
  fclose(f);
  if (ok) {
    fcl_hash hs;
    fcl_hash_init(&hs);
    fcl_hash_bytes(&hs, buf, (size_t)hdr[2]);
    ok = hs.h[0] == hdr[3] && hs.h[1] == hdr[4];
  }
  if (!ok) {
    fcl_log(ctx, "cache: %s is damaged; rebuilding", path);
    free(buf);
    return false;
  }
  *binary = buf;
  *size = (size_t)hdr[2];
  return true;
}

bool fcl_cache_store(const fcl_context *ctx, const unsigned long long key[2],
                     const unsigned char *binary, size_t size) {
  char dir[4096], path[4200], tmp[4300];
  if (!cache_dir(ctx, dir, sizeof dir) || !entry_path(ctx, key, path, sizeof path))
    return false;
  if (!make_dirs(dir)) {
    fcl_log(ctx, "cache: cannot create %s (%s); not caching", dir, strerror(errno));
    return false;
  }
  static unsigned counter;
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), ++counter);
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    fcl_log(ctx, "cache: cannot write %s (%s); not caching", tmp, strerror(errno));
    return false;
  }
  fcl_hash hs;
  fcl_hash_init(&hs);
  fcl_hash_bytes(&hs, binary, size);
  unsigned long long hdr[5] = {key[0], key[1], size, hs.h[0], hs.h[1]};
  bool ok = fwrite(magic, 1, 8, f) == 8 && fwrite(hdr, sizeof hdr[0], 5, f) == 5 &&
            fwrite(binary, 1, size, f) == size;
  ok = (fclose(f) == 0) && ok;
  if (ok) ok = rename(tmp, path) == 0;
  if (!ok) {
    fcl_log(ctx, "cache: writing %s failed; not caching", path);
    remove(tmp);
  }
  return ok;
}
