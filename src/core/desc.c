/* Reading a caller's descriptor by the rule of flashcl.h: its size comes
 * first. An older caller's shorter descriptor is zero-extended (the fields
 * it lacks take their defaults, which are zero); a newer caller's longer
 * one is accepted when the bytes past what this library knows are zero
 * (the check of Linux's copy_struct_from_user); a size below the oldest
 * published one, 0 above all (a descriptor not started from its *_INIT),
 * is refused. */
#include "core/core.h"

#include <string.h>

fcl_status fcl_desc_read(fcl_context *ctx, const void *in, const fcl_desc_kind *kind,
                         const char *name, void *out) {
  size_t size;
  memcpy(&size, in, sizeof size);
  if (size == 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s->size: is 0; start the descriptor from %s", name, kind->init);
  if (size < kind->oldest)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s->size: is %zu, less than any %s (%zu bytes or more); start it "
                    "from %s", name, size, kind->type, kind->oldest, kind->init);
  const unsigned char *b = in;
  for (size_t i = kind->known; i < size; ++i)
    if (b[i])
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                      "%s->size: is %zu, and byte %zu, past the %zu bytes of %s this "
                      "library knows, is not zero: a field of a newer flashcl.h that "
                      "this library does not have", name, size, i, kind->known, kind->type);
  const size_t n = size < kind->known ? size : kind->known;
  memcpy(out, in, n);
  memset((unsigned char *)out + n, 0, kind->known - n);
  size = kind->known;
  memcpy(out, &size, sizeof size);
  return FCL_OK;
}
