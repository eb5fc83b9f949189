#include "op_forced.h"
#include "op_harness.h"

#include <stdio.h>

void oh_forced_run(oh_forced *f, const void *rows, size_t n, size_t size,
                   const oh_forced_ops *ops) {
  for (size_t i = 0; i < n; ++i) {
    const void *row = (const char *)rows + i * size;
    oh_forced_row r = {NULL, 0, ""};
    ops->describe(row, &r);
    if (!oh_selected(r.name)) continue;
    for (int t = FCL_F32; t <= FCL_BF16; ++t) {
      if (!(r.dtypes & OH_DT(t))) continue;
      if (!(f->dtypes & OH_DT(t))) { /* the test said why; a failure where guaranteed */
        ++f->skipped;
        continue;
      }
      if (ops->force(f->ctx, row) != FCL_OK) {
        printf("FAIL %s: override %s: %s\n", r.name, r.label, fcl_context_last_error(f->ctx));
        ++f->runs, ++f->failed;
        continue;
      }
      printf("[%s] ", r.label);
      ops->run(f, row, (fcl_dtype)t);
    }
  }
  ops->force(f->ctx, NULL);
}
