/* RWKV7 through the harness (op_pool.h): one fcl_rwkv7_forward, then
 * fcl_rwkv7_backward (repeated, bit-identical), on dense host arrays
 * uploaded as strided views surrounded by poison bytes; every output
 * buffer is checked for writes outside its view, and the inputs for any
 * change. Dense layouts are ref_rwkv7.h's; inputs already rounded. */
#ifndef FCL_OP_RWKV7_H
#define FCL_OP_RWKV7_H
#include "op_harness.h"
#include "ref_rwkv7.h"

typedef struct {
  const double *r, *w, *k, *v, *a, *b, *h0; /* h0 may be NULL           */
  const double *dout, *dht;                 /* dout NULL: forward only; dht may be NULL */
} oh_rwkv7_in;
typedef struct {
  double *o, *ht;                              /* ht may be NULL (not asked for) */
  double *dr, *dw, *dk, *dv, *da, *db, *dh0;   /* dh0 may be NULL                */
  double  fwd_s, bwd_s;
  int     fwd_read, bwd_read;
} oh_rwkv7_out;
typedef struct {
  tu_layout lin, lout;     /* inputs (r w k v a b dout), outputs (o and the gradients) */
  size_t    off;           /* > 0: view i starts off + i elements in                 */
  size_t    tail;          /* spare elements after every view                        */
  size_t    out_tail;      /* poison bytes after ht, dh0 (checked)                   */
  int       junk_stride0;  /* varlen: strides[0] of every view is garbage            */
  int       bwd_runs;      /* backward runs (0 or 1: one; more: bit-identical)       */
  int       check_inputs;  /* every input buffer keeps its bytes                     */
  float     decay_lower_bound; /* the descriptor's                                   */
} oh_rwkv7_opts;

/* Returns 0 on success; otherwise nonzero with the reason appended to why. */
int oh_rwkv7_run(fcl_context *ctx, const ref_rwkv7_problem *p, fcl_dtype dt,
                 const oh_rwkv7_opts *opts, const oh_rwkv7_in *in, oh_rwkv7_out *out,
                 char *why, size_t nwhy);

/* One case of a suite's table (test_rwkv7.c, test_rwkv7_forced.c): inputs
 * as fla makes them (ref_rwkv7_fill) from a seed of the name and dtype,
 * rounded to the dtype; forward and backward (twice, bit-identical)
 * against the reference with test_rwkv6's tolerances (tu_tol_rwkv6 and
 * tu_tol_rwkv6_state), poison outside every output, unmodified inputs.
 * Prints one line; returns 1 on pass. */
typedef struct {
  const char     *name;
  unsigned        dtypes;
  int64_t         b, t, h, dk, dv; /* dk, dv 0: 64 */
  int             nseq;            /* > 0: varlen with these lengths */
  int32_t         lens[OH_MAX_SEQS];
  float           scale;           /* 0: default */
  int             reverse, no_h0, no_ht, no_dht, no_dh0;
  ref_rwkv7_decay decay;
  int             general;         /* a, b uniform, unrelated */
  tu_layout       lin, lout;
  size_t          off;
  int             junk_stride0, seqlen_extra;
  int             fwd_only;        /* no backward (the step kernel's tests) */
  int             exact;           /* views fill their buffers, one backward (Oclgrind) */
  float           decay_lower_bound; /* the descriptor's (0: none) */
} oh_rwkv7_case;

int oh_rwkv7_case_run(fcl_context *ctx, const oh_rwkv7_case *c, fcl_dtype dt, int verbose);
#endif
