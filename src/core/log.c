/* Decision log: with FCL_LOG set (and not "0"), each decision the library
 * makes (device, program cache, launch configuration, errors) goes to stderr. */
#include "core/core.h"

#include <stdio.h>

void fcl_log(const fcl_context *ctx, const char *fmt, ...) {
  if (!ctx || !ctx->opt.log) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("[flashcl] ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}
