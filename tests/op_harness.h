/* Runs one flashcl operation on dense host arrays and reads the results
 * back, for every device test: inputs are uploaded as strided views
 * (varlen: [1][tokens]) surrounded by poison bytes, and every output buffer
 * is checked for writes outside its view.
 *
 * Three layers:
 *  - oh_attention_run / oh_rwkv6_run (op_harness.c): one call, views and
 *    checks chosen by oh_opts: per-tensor layouts, offsets and guard tails,
 *    repeated backward runs that must be bit-identical, inputs (and the o
 *    and lse the backward is given) that must stay unmodified;
 *    oh_attention / oh_rwkv6 are the same with one layout for every view
 *    (oh_set_layout), for the reliability tests (oclgrind, numerics, faults);
 *  - oh_attention_verify / oh_rwkv6_verify (op_verify.c): a run compared
 *    with the double references;
 *  - oh_attention_case_run / oh_rwkv6_case_run (op_attention_case.c,
 *    op_rwkv6_case.c): one row of a suite's case table (tests/
 *    attention_cases.h, test_rwkv6.c) filled, run, compared and printed as
 *    one line, with the main suites' tolerances and checks.
 *
 * Dense layouts are those of ref_attention.h and ref_rwkv6.h. Inputs must
 * already be rounded to the dtype (the helpers round again, idempotently). */
#ifndef FCL_OP_HARNESS_H
#define FCL_OP_HARNESS_H

#include "flashcl.h"
#include "ref_attention.h"
#include "ref_rwkv6.h"
#include "test_util.h"

/* ---- one call ------------------------------------------------------------ */
/* The view of one tensor: layout, first element, spare elements after it. */
typedef struct {
  tu_layout layout;
  size_t    offset, tail;
} oh_view;

/* Tensor slots of oh_opts.view. */
enum { OH_Q, OH_K, OH_V, OH_O, OH_DOUT, OH_DQ, OH_DK, OH_DV };          /* attention */
enum { OH_R6_R, OH_R6_K, OH_R6_V, OH_R6_W, OH_R6_DOUT, OH_R6_O, OH_R6_DR, OH_R6_DK,
       OH_R6_DV, OH_R6_DW, OH_NVIEWS };                                   /* rwkv6 */

typedef struct {
  oh_view view[OH_NVIEWS];
  size_t  in_tail;      /* poison bytes after plain inputs (alibi, u, h0, dht) */
  size_t  out_tail;     /* poison bytes after plain outputs (lse, ht, du, dh0); checked */
  int     junk_stride0; /* varlen: strides[0] of every view is garbage */
  int     bwd_runs;     /* backward runs (0 or 1: one); a second, into re-poisoned
                           buffers, must give the same bytes */
  int     check_inputs; /* every input buffer (and o, lse for the backward) keeps
                           its bytes, padding included */
} oh_opts;

typedef struct {
  const double *q, *k, *v, *dout; /* dout NULL: forward only */
} oh_attention_in;
typedef struct {
  double *o, *lse, *dq, *dk, *dv; /* lse NULL: none (forward only) */
  double  fwd_s, bwd_s;           /* seconds, set by the run */
  int     fwd_read, bwd_read;     /* set when the call succeeded and its results were read */
} oh_attention_out;
typedef struct {
  const double *r, *k, *v, *w, *u, *h0, *dout, *dht; /* h0, dht may be NULL */
} oh_rwkv6_in;
typedef struct {
  double *o, *ht, *dr, *dk, *dv, *dw, *du, *dh0; /* ht, dh0 may be NULL */
  double  fwd_s, bwd_s;
  int     fwd_read, bwd_read;
} oh_rwkv6_out;

/* Attention forward, then backward when in->dout is set (fed the device's
 * own o and lse). opts NULL: the layout of oh_set_layout for every view.
 * Returns 0 on success; otherwise nonzero with the reason (status and
 * message, OpenCL error, guard bytes overwritten, a second backward that
 * differs, an input modified) appended to why. */
int oh_attention_run(fcl_context *ctx, const ref_attention_problem *p, fcl_dtype dt,
                     const oh_opts *opts, const oh_attention_in *in, oh_attention_out *out,
                     char *why, size_t nwhy);
/* RWKV6 forward (o, and ht unless NULL), then backward when in->dout is set
 * (dr, dk, dv, dw, du, and dh0 unless NULL). */
int oh_rwkv6_run(fcl_context *ctx, const ref_rwkv6_problem *p, fcl_dtype dt,
                 fcl_rwkv6_algorithm algo, const oh_opts *opts, const oh_rwkv6_in *in,
                 oh_rwkv6_out *out, char *why, size_t nwhy);

/* The same, arguments spelled out, with the layout of oh_set_layout. */
int oh_attention(fcl_context *ctx, const ref_attention_problem *p, fcl_dtype dt,
                 const double *q, const double *k, const double *v,
                 const double *dout, double *o, double *lse, double *dq,
                 double *dk, double *dv, char *why, size_t nwhy);
int oh_rwkv6(fcl_context *ctx, const ref_rwkv6_problem *p, fcl_dtype dt,
             fcl_rwkv6_algorithm algo, const double *r, const double *k,
             const double *v, const double *w, const double *u, const double *h0,
             const double *dout, const double *dht, double *o, double *ht,
             double *dr, double *dk, double *dv, double *dw, double *du,
             double *dh0, char *why, size_t nwhy);

/* Layout of the views oh_attention and oh_rwkv6 create (default: TU_BSHD,
 * no offset, no tail: every view fills its buffer exactly, so a read or
 * write past it leaves the buffer, which Oclgrind reports). */
void oh_set_layout(tu_layout layout, size_t offset_elems, size_t tail_elems);

/* Element counts of the dense arrays of a problem. */
typedef struct {
  size_t q, k, v, o, lse;
} oh_attention_sizes;
oh_attention_sizes oh_attention_count(const ref_attention_problem *p);
/* Makes p varlen: n sequences of lq[i] queries and lk[i] keys, their prefix
 * sums written to cuq and cuk (n + 1 each), seqlen_q/k the longest. */
void oh_attention_varlen(ref_attention_problem *p, int n, const int32_t *lq, const int32_t *lk,
                         int32_t *cuq, int32_t *cuk);
typedef struct {
  size_t rk, v, u, state; /* r/k/w/dr/dk/dw, v/o/dout, u/du, h0/ht */
} oh_rwkv6_sizes;
oh_rwkv6_sizes oh_rwkv6_count(const ref_rwkv6_problem *p);

/* ---- comparisons ------------------------------------------------------------ */
/* n + 1 zeroed doubles (aborts when out of memory), and max |x_i| over the
 * finite x_i. */
double *oh_dalloc(size_t n);
double  oh_max_abs(const double *x, size_t n);
/* Tolerances of the main suites (tu_tol_grad, tu_tol_rwkv6). */
double oh_grad_tol(fcl_dtype t);
tu_tol oh_rwkv6_tol(fcl_dtype t);
tu_tol oh_rwkv6_state_tol(void);

/* tu_compare where a NaN reference requires a NaN result at that place (and
 * only there); everything else is compared as usual. Appends
 * "what mismatch;" (and prints the worst element) to why on failure.
 * Returns 1 on pass. oh_check_dims prints the worst element's coordinates
 * (up to 4 dims) and returns the comparison in *cmp (may be NULL). */
int oh_check(const char *what, const double *got, const double *ref, size_t n,
             tu_tol tol, int lse_style, char *why, size_t nwhy);
int oh_check_dims(const char *what, const double *got, const double *ref, size_t n,
                  tu_tol tol, int lse_style, const int64_t *dims, int ndims, tu_cmp *cmp,
                  char *why, size_t nwhy);
/* Query rows (varlen: tokens) x heads_q whose reference lse is -inf (they
 * see no key) in *rows; returns how many of them have a nonzero value among
 * the width values of x ([rows][heads_q][width]): o (head_dim_v) or dq. */
size_t oh_empty_rows_nonzero(const ref_attention_problem *p, const double *lse_ref,
                             const double *x, int64_t width, size_t *rows);

/* op_verify.c: runs the operation (oh_attention, oh_rwkv6) and compares
 * every output with the double reference fed the same inputs, with the main
 * suites' tolerances (attention: the forward's tolerance widened only by
 * the f32 error of the logits, tu_tol_with_logits; a row that sees no key
 * must give exactly 0 and lse -inf; gradients against the reference fed
 * the device's own o). NaN in the reference must be NaN in the result at
 * the same places (oh_check). Returns 1 on pass, else 0 with why set. */
int oh_attention_verify(fcl_context *ctx, const ref_attention_problem *p,
                        fcl_dtype dt, const double *q, const double *k,
                        const double *v, const double *dout, int with_lse,
                        char *why, size_t nwhy);
/* oh_attention_verify of the forward on q, k, v uniform in [-1, 1] from seed. */
int oh_attention_verify_random(fcl_context *ctx, const ref_attention_problem *p, fcl_dtype dt,
                               uint64_t seed, char *why, size_t nwhy);
int oh_rwkv6_verify(fcl_context *ctx, const ref_rwkv6_problem *p, fcl_dtype dt,
                    fcl_rwkv6_algorithm algo, const double *r, const double *k,
                    const double *v, const double *w, const double *u,
                    const double *h0, const double *dout, const double *dht,
                    char *why, size_t nwhy);

/* ---- case tables (the main suites) -------------------------------------------- */
/* Dtype masks: a case runs once in each dtype of its mask. */
#define OH_DT(t) (1u << (t))
#define OH_ALL_DT (OH_DT(FCL_F32) | OH_DT(FCL_F16) | OH_DT(FCL_BF16))

/* Tolerance class: the set of tolerances a case is held to. OH_TOL_DTYPE
 * (every case today) takes the run's dtype's: attention o and lse
 * tu_tol_output/tu_tol_lse widened by the f32 logit error
 * (tu_tol_with_logits), gradients tu_tol_grad plus 8 f32 roundings of
 * their largest terms, RWKV6 tu_tol_rwkv6 and tu_tol_rwkv6_state. The
 * others pin one dtype's set whatever the run's dtype: a way to hold a case
 * to a tighter set than its dtype's, never to a looser one. */
typedef enum { OH_TOL_DTYPE = 0, OH_TOL_F32, OH_TOL_F16, OH_TOL_BF16 } oh_tol_class;
fcl_dtype oh_tol_dtype(oh_tol_class c, fcl_dtype run);

#define OH_MAX_SEQS 8

/* One attention shape; fwd, bwd, split: the dtypes the forward suite, the
 * backward suite and its FCL_LOOP_BUDGET pass run it in (0: not run). */
typedef struct {
  const char  *name;
  unsigned     fwd, bwd, split;
  int64_t      b, sq, sk, hq, hkv, d, dv; /* d, dv 0: 64 */
  float        scale;                     /* 0: default */
  int          causal;
  int          win;                       /* 0: no window (-1, -1); 1: wl, wr */
  int64_t      wl, wr;
  float        softcap;
  int          alibi;
  int          nseq;                      /* > 0: varlen with these lengths */
  int32_t      lens_q[OH_MAX_SEQS], lens_k[OH_MAX_SEQS];
  tu_layout    lq, lk, lv, lo, ldo, ldq, ldk, ldv;
  size_t       off;     /* > 0: q, k, v, o, dout, dq, dk, dv start off, off+1, ... in */
  int          no_lse;  /* forward only: lse NULL */
  double       amp;     /* q, k uniform in [-amp, amp]; 0: 2.5 */
  int          junk_stride0;
  oh_tol_class tol;
  int64_t      shift;   /* diag_shift */
  float        dropout_p;                 /* 0: none */
  uint64_t     dropout_seed, dropout_offset;
} oh_attention_case;

/* Worst err/tol per dtype and gradient, and the largest share of the
 * tolerance due to the forward's stored o, over backward runs. */
typedef struct {
  int    run, failed;
  double worst[3][3], oterm[3];
} oh_attention_stats;

/* Runs c in dtype dt with inputs from seed: the forward (backward 0), or the
 * forward and then the backward twice (backward 1). Checks o and lse
 * against the reference, rows that see no key (o 0, lse -inf, dq 0), keys
 * no query sees (dk, dv 0), gradients against the reference fed the
 * device's o, poison outside every output view, bit-identical backward
 * runs and unmodified inputs. Prints one line; returns 1 on pass. */
int oh_attention_case_run(fcl_context *ctx, const oh_attention_case *c, fcl_dtype dt,
                          int backward, uint64_t seed, oh_attention_stats *st);

typedef enum { OH_W_WEAK = 0, OH_W_STRONG, OH_W_MIX, OH_W_ZERO, OH_W_EXTREME } oh_decay;
/* Log-space decays: weak -exp(N(-3, 1)) (usual RWKV6), strong U[-25, -5],
 * mixed (near 0 and U[-40, -15]), zero, extreme mixed (near 0 and
 * U[-1e4, -1e3]: decays of exactly 0 in f32). */
void oh_fill_decay(tu_rng *g, double *w, size_t n, oh_decay kind);

/* Algorithm masks. */
enum { OH_REC = 1, OH_CHUNK = 2, OH_AUTO = 4, OH_ALL_ALGOS = 7 };

typedef struct {
  const char  *name;
  unsigned     dtypes;         /* dtype mask */
  int          algos;          /* algorithm mask; 0: all */
  int64_t      b, t, h, dk, dv; /* dk, dv 0: 64 */
  int          nseq;           /* > 0: varlen with these lengths */
  int32_t      lens[OH_MAX_SEQS];
  float        scale;          /* 0: default */
  int          reverse;
  int          no_h0, no_ht, no_dht, no_dh0;
  oh_decay     decay;
  tu_layout    lin, lout;      /* inputs (r k v w dout), outputs (o dr dk dv dw) */
  size_t       off;            /* > 0: views start off + i elements in */
  int          junk_stride0;   /* varlen: strides[0] is garbage */
  int          seqlen_extra;   /* varlen: desc.seqlen = longest + this */
  oh_tol_class tol;
} oh_rwkv6_case;

/* Runs c in dtype dt with inputs from seed, once per algorithm of its mask:
 * forward and backward (twice, bit-identical, except AUTO) against the
 * reference, poison outside every output, unmodified inputs. One line per
 * algorithm; counts runs and failures in *runs, *failed. verbose prints
 * every comparison. Returns 1 when every run passed. */
int oh_rwkv6_case_run(fcl_context *ctx, const oh_rwkv6_case *c, fcl_dtype dt, uint64_t seed,
                      int verbose, int *runs, int *failed);

/* A case's seed: from its name and dtype, so that the same shape gets the
 * same inputs in every suite and in any order. */
uint64_t oh_case_seed(const char *name, fcl_dtype dt);
/* FCL_TEST_FILTER: whether name contains it (or it is unset or empty). */
int oh_selected(const char *name);
/* A test's context on FCL_DEVICE's device, its name printed; NULL, the
 * reason printed as a FAIL, when there is none. */
fcl_context *oh_open_context(void);

/* The exit of a test, or of a mode of one, that has nothing to run on this
 * device: CTest's SKIP_RETURN_CODE (tests/CMakeLists.txt), so that the
 * skip shows in its summary instead of passing. */
#define OH_SKIP 77
/* Environment variable name as the library reads a flag: set and not "0";
 * dflt when unset or empty. */
int oh_env_flag(const char *name, int dflt);
/* Whether the environment guarantees the tensor-core (mma.sync) kernels on
 * any device: FCL_MMA_EMULATE on and FCL_DISABLE_FASTPATH off. A test that
 * then finds them off fails (their probe is broken) rather than skip. */
int oh_mma_guaranteed(void);

/* A device buffer's bytes, read to the host (NULL on failure; free it). */
unsigned char *oh_read_all(fcl_context *ctx, cl_mem m, size_t bytes);
/* Inputs remembered before a call to check after it that they stayed. */
typedef struct {
  cl_mem         m;
  size_t         bytes;
  const char    *name;
  unsigned char *then;
} oh_watch;
/* Adds m (NULL: nothing) as w[*nw], ++*nw. */
void oh_watch_add(fcl_context *ctx, oh_watch *w, int *nw, cl_mem m, const char *name);
/* Whether any of the nw buffers changed (or could not be read), noting
 * which in why; frees what oh_watch_add kept. */
int  oh_watch_changed(fcl_context *ctx, oh_watch *w, int nw, char *why, size_t nwhy);

/* Appends printf-style text to why. */
void oh_append(char *why, size_t nwhy, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
#endif
