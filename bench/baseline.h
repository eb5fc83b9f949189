/* fa-bench --baseline: unfused attention forward (S = scale QK^T and P =
 * softmax(S) materialised in an f32 device buffer, then O = PV), with the
 * kernels of baseline.cl, for the fusion gain. */
#ifndef FCL_BENCH_BASELINE_H
#define FCL_BENCH_BASELINE_H

#include <stddef.h>

#include "flashcl.h"
#include "model.h"

typedef struct {
  const attn_shape *s;
  cl_mem q, k, v, o, lse; /* dense [B, N, H, dim]; lse f32 [B, H, Nq] */
} unfused_call;

/* Why the baseline cannot run shape s on this device (S does not fit in
 * one allocation or in the device's memory): a message written to buf, or
 * NULL when it can. */
const char *unfused_skip_reason(fcl_context *ctx, const attn_shape *s, char *buf, size_t n);
/* Enqueues the three kernels; FCL_OK, or an error with the reason on
 * stderr. arg is an unfused_call. */
fcl_status unfused_forward(fcl_context *ctx, const void *arg);
/* Device time of the last unfused_forward (first kernel's start to the last
 * one's end); 0 on success. */
int unfused_last_ms(fcl_context *ctx, const void *arg, double *ms);
/* Frees the programs, the S buffer and the events. */
void unfused_release(void);

#endif
