#include "op_forced.h"
#include "op_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int oh_forced_open(oh_forced *f) {
  const double t0 = tu_now();
  *f = (oh_forced){oh_open_context(), getenv("FCL_TEST_VERBOSE") != NULL, OH_ALL_DT, 0, 0, 0, t0};
  return f->ctx != NULL;
}

int oh_forced_close(oh_forced *f, const char *name) {
  fcl_context_destroy(f->ctx);
  printf("%s: %d runs, %d failed, %d skipped; %.1f s\n", name, f->runs, f->failed, f->skipped,
         tu_now() - f->t0);
  return f->failed || f->runs == 0 ? 1 : 0;
}

void oh_forced_run(oh_forced *f, const void *rows, size_t n, size_t size,
                   const oh_forced_ops *ops) {
  char last[160] = ""; /* the label last run twice */
  for (size_t i = 0; i < n; ++i) {
    const void *row = (const char *)rows + i * size;
    oh_forced_row r = {NULL, 0, "", 0};
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
      if (ops->rerun && r.twice && strcmp(last, r.label) != 0) {
        snprintf(last, sizeof last, "%s", r.label);
        ++f->runs;
        f->failed += !ops->rerun(f->ctx, row, (fcl_dtype)t);
      }
    }
  }
  ops->force(f->ctx, NULL);
}
