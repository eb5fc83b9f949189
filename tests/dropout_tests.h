/* test_attention_dropout's parts (tests/test_attention_dropout.c runs
 * them): a problem set up on the device (dropout_setup.c), the
 * probabilities and the mask's statistics (dropout_probs.c), reruns and
 * p = 0 (dropout_runs.c), and bad input (dropout_bad_input.c). Each part
 * counts its checks and failures in a dp_tally. */
#ifndef FCL_DROPOUT_TESTS_H
#define FCL_DROPOUT_TESTS_H

#include "op_harness.h"

typedef struct {
  int run, failed;
} dp_tally;

/* Counts a check and prints "PASS what" or "FAIL what". Returns ok. */
int dp_expect(dp_tally *t, int ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* One problem on the device: the shape, masks and dropout of a case (an
 * oh_attention_case: d, dv 0 mean 64, no layouts or offsets), inputs
 * uniform from seed rounded to dt in dense BSHD tensors (varlen: by token),
 * outputs (o, dq, dk, dv) and lse poisoned, and the descriptor, dropout
 * included. */
typedef struct {
  fcl_context          *ctx;
  ref_attention_problem p;
  int32_t               cuq[OH_MAX_SEQS + 1], cuk[OH_MAX_SEQS + 1];
  double                slopes[16];
  fcl_dtype             dt;
  oh_attention_sizes    n;
  double               *q, *k, *v, *dout;
  tu_tensor             tq, tk, tv, to, tdo, tdq, tdk, tdv;
  cl_mem                lse, cuq_m, cuk_m, alibi_m;
  size_t                lse_bytes;
  fcl_attention_desc    desc;
} dp_setup;

/* 0 on success; on failure prints why and leaves nothing to release. */
int  dp_setup_create(dp_setup *s, fcl_context *ctx, const oh_attention_case *c, fcl_dtype dt,
                     uint64_t seed);
void dp_setup_release(dp_setup *s);
/* The forward (o, lse) and the backward (dq, dk, dv) of s with descriptor
 * d (s->desc or a variant of it), finished on the queue. */
fcl_status dp_forward(dp_setup *s, const fcl_attention_desc *d);
fcl_status dp_backward(dp_setup *s, const fcl_attention_desc *d);
/* Bytes of the buffers of o, lse, dq, dk, dv (a tensor's whole buffer), in
 * that order, read back into *out[5] (free them with dp_free_bytes). */
int  dp_read_outputs(dp_setup *s, unsigned char *out[5], size_t bytes[5]);
void dp_free_bytes(unsigned char *b[5]);
/* A buffer of bytes, every one poison (TU_POISON_BYTE). */
cl_mem dp_poison(dp_setup *s, size_t bytes);

void dp_probs_tests(fcl_context *ctx, dp_tally *t);
void dp_stats_tests(fcl_context *ctx, dp_tally *t);
void dp_rerun_tests(fcl_context *ctx, dp_tally *t);
void dp_bad_input_tests(fcl_context *ctx, dp_tally *t);
#endif
