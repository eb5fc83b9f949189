/* Validation of an attention problem (descriptor, tensors, side buffers),
 * shared by the forward and backward passes. Nothing is written on failure. */
#include "attention/attention.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>

#define FCL_MAX_SEQLEN (1LL << 30)

static fcl_status check_positive(fcl_context *ctx, const char *name, int64_t v,
                                 int64_t max) {
  if (v <= 0 || v > max)
    return fcl_fail(ctx, v <= 0 ? FCL_ERROR_INVALID_ARGUMENT : FCL_ERROR_UNSUPPORTED,
                    "%s: is %" PRId64 ", must be in 1..%" PRId64, name, v, max);
  return FCL_OK;
}

static const fcl_desc_kind attention_desc_kind = {
    "fcl_attention_desc", "FCL_ATTENTION_DESC_INIT",
    offsetof(fcl_attention_desc, cu_seqlens_k_host) + sizeof(void *), sizeof(fcl_attention_desc)};

fcl_status fcl_attention_desc_in(fcl_context *ctx, const fcl_attention_desc **d,
                                 fcl_attention_desc *own) {
  if (!*d) return FCL_OK;
  const fcl_status s = fcl_desc_read(ctx, *d, &attention_desc_kind, "d", own);
  if (s == FCL_OK) *d = own;
  return s;
}

fcl_status fcl_check_attention_desc(fcl_context *ctx, const fcl_attention_desc *d) {
  fcl_status s;
  if (!d) return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "desc: is NULL");
  if ((s = check_positive(ctx, "batch", d->batch, INT32_MAX)) ||
      (s = check_positive(ctx, "seqlen_q", d->seqlen_q, FCL_MAX_SEQLEN)) ||
      (s = check_positive(ctx, "seqlen_k", d->seqlen_k, FCL_MAX_SEQLEN)) ||
      (s = check_positive(ctx, "heads_q", d->heads_q, INT32_MAX)) ||
      (s = check_positive(ctx, "heads_kv", d->heads_kv, INT32_MAX)))
    return s;
  if (d->head_dim <= 0 || d->head_dim > FCL_MAX_HEAD_DIM)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "head_dim: is %" PRId64 ", must be in 1..%d", d->head_dim,
                    FCL_MAX_HEAD_DIM);
  if (d->head_dim_v <= 0 || d->head_dim_v > FCL_MAX_HEAD_DIM)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "head_dim_v: is %" PRId64 ", must be in 1..%d", d->head_dim_v,
                    FCL_MAX_HEAD_DIM);
  if (d->heads_q % d->heads_kv != 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "heads_kv: heads_q (%" PRId64 ") is not a multiple of heads_kv (%"
                    PRId64 ")", d->heads_q, d->heads_kv);
  if (d->batch * d->heads_q > INT32_MAX)
    return fcl_fail(ctx, FCL_ERROR_UNSUPPORTED,
                    "batch: batch * heads_q = %" PRId64 " exceeds 2^31 - 1",
                    d->batch * d->heads_q);
  if (d->window_left < -1)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "window_left: is %" PRId64 ", must be >= -1", d->window_left);
  if (d->window_right < -1)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "window_right: is %" PRId64 ", must be >= -1", d->window_right);
  if (d->diag_shift < -FCL_MAX_SEQLEN || d->diag_shift > FCL_MAX_SEQLEN)
    return fcl_fail(ctx, FCL_ERROR_UNSUPPORTED,
                    "diag_shift: is %" PRId64 ", must be in -%lld..%lld", d->diag_shift,
                    FCL_MAX_SEQLEN, FCL_MAX_SEQLEN);
  if (!(d->softcap >= 0.0f) || isinf(d->softcap))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "softcap: is %g, must be 0 (off) or a positive finite number",
                    (double)d->softcap);
  if (!(d->dropout_p >= 0.0f && d->dropout_p < 1.0f))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "dropout_p: is %g, must be in [0, 1) (0: no dropout)", (double)d->dropout_p);
  if (d->reserved0 != 0)
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, "reserved0: is %" PRIu32 ", must be 0",
                    d->reserved0);
  if (!isfinite(d->softmax_scale))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "softmax_scale: is %g, must be finite", (double)d->softmax_scale);
  if (d->alibi_slopes &&
      (s = fcl_check_buffer(ctx, d->alibi_slopes, "alibi_slopes",
                            (size_t)d->heads_q * sizeof(float))))
    return s;
  return FCL_OK;
}

/* The views of ts[from .. to) of (q, k, v, o) against their shapes:
 * varlen views span tokens 0 .. total-1 along dim 1 (dim 0 unused), and
 * every one shares p->q's dtype. */
static fcl_status check_views(fcl_context *ctx, const fcl_attention_problem *p,
                              const fcl_tensor *const ts[4], int from, int to) {
  const fcl_attention_desc *d = p->d;
  const int64_t nb = p->varlen ? 1 : d->batch;
  const int64_t nq = p->varlen ? p->total_q : d->seqlen_q;
  const int64_t nk = p->varlen ? p->total_k : d->seqlen_k;
  const fcl_tensor_shape shapes[4] = {
      {"q", {nb, nq, d->heads_q, d->head_dim}},
      {"k", {nb, nk, d->heads_kv, d->head_dim}},
      {"v", {nb, nk, d->heads_kv, d->head_dim_v}},
      {"o", {nb, nq, d->heads_q, d->head_dim_v}}};
  fcl_status s;
  for (int i = from; i < to; ++i)
    if ((s = fcl_check_view(ctx, ts[i], &shapes[i], p->varlen, i ? p->q : NULL, "q")))
      return s;
  return FCL_OK;
}

/* The descriptor, the sequences and the views of q and k into p. */
fcl_status fcl_check_attention_qk(fcl_context *ctx, const fcl_attention_desc *d,
                                  const fcl_tensor *q, const fcl_tensor *k,
                                  fcl_attention_problem *p) {
  fcl_status s = fcl_check_attention_desc(ctx, d);
  if (s != FCL_OK) return s;
  *p = (fcl_attention_problem){.d = d, .q = q, .k = k};
  p->varlen = d->cu_seqlens_q || d->cu_seqlens_k;
  if (!p->varlen && (d->cu_seqlens_q_host || d->cu_seqlens_k_host))
    return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                    "%s: is set while cu_seqlens_q and cu_seqlens_k are NULL (not varlen)",
                    d->cu_seqlens_q_host ? "cu_seqlens_q_host" : "cu_seqlens_k_host");
  p->total_q = d->batch * d->seqlen_q;
  p->total_k = d->batch * d->seqlen_k;
  if (p->varlen) {
    if (!d->cu_seqlens_q || !d->cu_seqlens_k)
      return fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT,
                      "%s: is NULL while %s is set; varlen needs both",
                      d->cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q",
                      d->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_k");
    if ((s = fcl_check_cu_seqlens(ctx, d->cu_seqlens_q, d->cu_seqlens_q_host,
                                  d->cu_seqlens_q_host ? "cu_seqlens_q_host" : "cu_seqlens_q",
                                  d->batch, d->seqlen_q, &p->total_q)) ||
        (s = fcl_check_cu_seqlens(ctx, d->cu_seqlens_k, d->cu_seqlens_k_host,
                                  d->cu_seqlens_k_host ? "cu_seqlens_k_host" : "cu_seqlens_k",
                                  d->batch, d->seqlen_k, &p->total_k)))
      return s;
  }
  const fcl_tensor *const ts[4] = {q, k, NULL, NULL};
  if ((s = check_views(ctx, p, ts, 0, 2))) return s;
  p->dtype = q->dtype;
  fcl_attention_scalars_init(d, p->varlen, p->total_q, &p->sc);
  return FCL_OK;
}

fcl_status fcl_check_attention(fcl_context *ctx, const fcl_attention_desc *d,
                               const fcl_tensor *q, const fcl_tensor *k,
                               const fcl_tensor *v, const fcl_tensor *o,
                               fcl_attention_problem *p) {
  const fcl_tensor *const ts[4] = {q, k, v, o};
  fcl_status s = fcl_check_attention_qk(ctx, d, q, k, p);
  if (s == FCL_OK) s = check_views(ctx, p, ts, 2, 4);
  p->v = v, p->o = o;
  return s;
}

fcl_status fcl_check_attention_grads(fcl_context *ctx, fcl_attention_problem *p) {
  const fcl_attention_desc *d = p->d;
  const int64_t nb = p->varlen ? 1 : d->batch;
  const int64_t nq = p->varlen ? p->total_q : d->seqlen_q;
  const int64_t nk = p->varlen ? p->total_k : d->seqlen_k;
  /* The gradients look like the tensors they mirror. */
  const fcl_tensor_shape shapes[4] = {{"dout", {nb, nq, d->heads_q, d->head_dim_v}},
                                      {"dq", {nb, nq, d->heads_q, d->head_dim}},
                                      {"dk", {nb, nk, d->heads_kv, d->head_dim}},
                                      {"dv", {nb, nk, d->heads_kv, d->head_dim_v}}};
  const fcl_tensor *ts[4] = {p->dout, p->dq, p->dk, p->dv};
  fcl_status s = fcl_check_buffer(ctx, p->lse, "lse",
                                  (size_t)(d->heads_q * p->total_q) * sizeof(float));
  for (int i = 0; i < 4 && s == FCL_OK; ++i)
    s = fcl_check_view(ctx, ts[i], &shapes[i], p->varlen, p->q, "q");
  return s;
}
