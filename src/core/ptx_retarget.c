/* Hopper's sm_90a instructions from OpenCL C (docs/wgmma_route.md): NVIDIA's
 * OpenCL compiler emits PTX for .target sm_90 and refuses wgmma, so kernels
 * write those instructions as inline-assembly comments behind the marker
 * "// FCL90A " (cl/common/wgmma.cl). A program built with -DFCL_SM90A=1 is
 * built from source as usual, then its PTX (the program binary) is
 * rewritten here and loaded back with clCreateProgramWithBinary
 * (program.c): markers removed, .target sm_90 -> sm_90a, and .version at
 * least 8.0 (wgmma's). With min_groups > 0, each entry with a .reqntid
 * also gets .minnctapersm min_groups: ptxas then keeps the registers of a
 * work-item within what that many work-groups per SM leave (OpenCL C has
 * no launch bounds, and NVIDIA's compiler ignores -cl-nv-maxrregcount here:
 * at D=64 a few registers over 128 halved the forward's work-groups per
 * SM, a large part of its time; docs/defaults.md has the figure). */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char marker[] = "// FCL90A ";

static bool line_starts(const char *p, const char *end, const char *s) {
  const size_t n = strlen(s);
  return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

static const char reqntid[] = ".reqntid ";

char *fcl_ptx_sm90a(const char *ptx, size_t size, int min_groups, size_t *out_size) {
  const char *end = ptx + size;
  while (end > ptx && end[-1] == '\0') --end; /* binaries may count a NUL */
  bool target = false;
  size_t entries = 0; /* .reqntid lines, each may gain a line */
  for (const char *p = ptx; (p = memchr(p, '.', (size_t)(end - p))); ++p)
    entries += line_starts(p, end, reqntid);
  char *out = malloc((size_t)(end - ptx) + 16 + entries * 32);
  if (!out) return NULL;
  size_t k = 0;
  for (const char *p = ptx; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl + 1 : end;
    const char *q = p;
    while (q < le && (*q == ' ' || *q == '\t')) ++q;
    if (line_starts(q, le, ".target sm_90") && !line_starts(q, le, ".target sm_90a")) {
      /* ".target sm_90, texmode_independent" keeps what follows */
      memcpy(out + k, p, (size_t)(q - p) + 13), k += (size_t)(q - p) + 13;
      out[k++] = 'a';
      p = q + 13;
      target = true;
    } else if (line_starts(q, le, ".version ")) {
      int major = 0, minor = 0;
      if (sscanf(q + 9, "%d.%d", &major, &minor) == 2 && major < 8) {
        k += (size_t)sprintf(out + k, ".version 8.0\n");
        p = le;
        continue;
      }
    } else if (line_starts(q, le, marker)) {
      memcpy(out + k, p, (size_t)(q - p)), k += (size_t)(q - p);
      p = q + sizeof marker - 1;
    } else if (min_groups > 0 && line_starts(q, le, reqntid)) {
      memcpy(out + k, p, (size_t)(le - p)), k += (size_t)(le - p);
      if (!nl) out[k++] = '\n';
      k += (size_t)sprintf(out + k, ".minnctapersm %d\n", min_groups);
      p = le;
      continue;
    }
    memcpy(out + k, p, (size_t)(le - p)), k += (size_t)(le - p);
    p = le;
  }
  out[k] = '\0';
  if (!target) { /* not PTX for sm_90: nothing to retarget */
    free(out);
    return NULL;
  }
  *out_size = k;
  return out;
}
