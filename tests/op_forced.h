/* The loop of the tests that force a variant's tuning parameters, case by
 * case (test_rwkv6_step, test_rwkv6_chunked, test_rwkv7_step,
 * test_rwkv7_forced, test_rwkv7_chunked): each dtype of each selected case,
 * its parameters forced, then run. */
#ifndef FCL_TESTS_OP_FORCED_H
#define FCL_TESTS_OP_FORCED_H

#include "flashcl.h"

#include <stddef.h>

/* A forced test's context and tally. */
typedef struct {
  fcl_context *ctx;
  int          verbose; /* FCL_TEST_VERBOSE */
  unsigned     dtypes;  /* OH_DT set this run allows; a case's others count as skipped */
  int          runs, failed, skipped;
  double       t0; /* tu_now() at the start */
} oh_forced;

/* A forced test's start: its context (oh_open_context), the counters at 0,
 * every dtype allowed. 0 where there is no context. */
int oh_forced_open(oh_forced *f);
/* Its end: destroys the context and prints the tally under name. Returns
 * the exit status: 1 where a run failed or none ran. */
int oh_forced_close(oh_forced *f, const char *name);

/* One row of a test's table, as the loop needs it. */
typedef struct {
  const char *name;       /* the case's, for FCL_TEST_FILTER */
  unsigned    dtypes;     /* OH_DT set the case lists */
  char        label[160]; /* the forced parameters, as printed */
  int         twice;      /* ops->rerun after its first run with this label */
} oh_forced_row;

typedef struct {
  void (*describe)(const void *row, oh_forced_row *out);
  /* Forces a row's parameters; row NULL clears them. */
  fcl_status (*force)(fcl_context *ctx, const void *row);
  /* Runs a row in one dtype, counting its runs and failures in f. */
  void (*run)(oh_forced *f, const void *row, fcl_dtype dt);
  /* NULL, or whether a forward run twice gives the same bytes: once a
   * parameter set, after the first row with twice set. */
  int (*rerun)(fcl_context *ctx, const void *row, fcl_dtype dt);
} oh_forced_ops;

/* rows: n rows of size bytes each. Clears the overrides at the end. */
void oh_forced_run(oh_forced *f, const void *rows, size_t n, size_t size,
                   const oh_forced_ops *ops);

#endif
