/* Runs one flashcl operation on dense host arrays and reads the results
 * back, for the reliability tests (oclgrind, numerics, faults): inputs are
 * uploaded as contiguous views (varlen: [1][tokens]) followed by a guard of
 * poison bytes, and every output buffer is checked for writes outside its
 * view. Comparison helpers use the tolerances of the main suites.
 *
 * Dense layouts are those of ref_attention.h and ref_rwkv6.h. Inputs must
 * already be rounded to the dtype (the helpers round again, idempotently). */
#ifndef FCL_OP_HARNESS_H
#define FCL_OP_HARNESS_H

#include "flashcl.h"
#include "ref_attention.h"
#include "ref_rwkv6.h"
#include "test_util.h"

/* Attention forward, then backward when dout is not NULL (fed the device's
 * own o and lse). lse may be NULL only for a forward-only run. Returns 0 on
 * success; otherwise nonzero with the reason (status and message, OpenCL
 * error, guard bytes overwritten) in why. */
int oh_attention(fcl_context *ctx, const ref_attention_problem *p, fcl_dtype dt,
                 const double *q, const double *k, const double *v,
                 const double *dout, double *o, double *lse, double *dq,
                 double *dk, double *dv, char *why, size_t nwhy);

/* RWKV6 forward (o, and ht unless NULL), then backward when dout is not NULL
 * (dr, dk, dv, dw, du, and dh0 unless NULL). h0 and dht may be NULL. */
int oh_rwkv6(fcl_context *ctx, const ref_rwkv6_problem *p, fcl_dtype dt,
             fcl_rwkv6_algorithm algo, const double *r, const double *k,
             const double *v, const double *w, const double *u, const double *h0,
             const double *dout, const double *dht, double *o, double *ht,
             double *dr, double *dk, double *dv, double *dw, double *du,
             double *dh0, char *why, size_t nwhy);

/* Layout of the views the next calls create (default: TU_BSHD, no offset,
 * no tail: every view fills its buffer exactly, so a read or write past it
 * leaves the buffer, which Oclgrind reports). */
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

/* Tolerances of the main suites (test_attention_backward.c, test_rwkv6.c). */
double oh_grad_tol(fcl_dtype t);
tu_tol oh_rwkv6_tol(fcl_dtype t);
tu_tol oh_rwkv6_state_tol(void);

/* tu_compare where a NaN reference requires a NaN result at that place (and
 * only there); everything else is compared as usual. Appends
 * "what mismatch;" (and prints the worst element) to why on failure.
 * Returns 1 on pass. */
int oh_check(const char *what, const double *got, const double *ref, size_t n,
             tu_tol tol, int lse_style, char *why, size_t nwhy);
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
int oh_rwkv6_verify(fcl_context *ctx, const ref_rwkv6_problem *p, fcl_dtype dt,
                    fcl_rwkv6_algorithm algo, const double *r, const double *k,
                    const double *v, const double *w, const double *u,
                    const double *h0, const double *dout, const double *dht,
                    char *why, size_t nwhy);

/* Appends printf-style text to why. */
void oh_append(char *why, size_t nwhy, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
#endif
