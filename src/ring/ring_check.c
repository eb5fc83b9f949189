/* The checks of a ring call: on this rank (the descriptor through
 * flashcl's own check, the slices' views against their buffers), then
 * agreed by every rank so that all return the same status and none waits
 * for a transfer that will not come. */
#include "ring/ring.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

/* A view of dims [b, s, h, d] of dtype `like` (NULL: any) in r's context,
 * inside its buffer (flashcl's rules: strides[3] = 1, aligned offset). */
static fcl_status check_view(fcl_ring *r, const char *name, const fcl_tensor *t,
                             const int64_t dims[4], const fcl_tensor *like) {
  if (!t) return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "%s: is NULL", name);
  const size_t es = fcl_dtype_size(t->dtype);
  if (es == 0)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "%s.dtype: unknown value %d", name,
                     (int)t->dtype);
  if (like && t->dtype != like->dtype)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT,
                     "%s.dtype: is %d but q.dtype is %d; they must match", name, (int)t->dtype,
                     (int)like->dtype);
  if (!t->buffer) return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "%s.buffer: is NULL", name);
  cl_context c = NULL;
  size_t have = 0;
  if (clGetMemObjectInfo(t->buffer, CL_MEM_CONTEXT, sizeof c, &c, NULL) != CL_SUCCESS ||
      clGetMemObjectInfo(t->buffer, CL_MEM_SIZE, sizeof have, &have, NULL) != CL_SUCCESS)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "%s.buffer: is not a valid cl_mem", name);
  if (c != r->cl)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "%s.buffer: belongs to another OpenCL context",
                     name);
  if (t->strides[3] != 1)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "%s.strides[3]: is %" PRId64 ", must be 1",
                     name, t->strides[3]);
  if (t->offset % es)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT,
                     "%s.offset: %zu is not a multiple of the element size %zu", name, t->offset,
                     es);
  /* The lowest and highest elements reached (strides bounded so that no
   * product overflows: |stride| < 2^40, dims <= 2^31). */
  int64_t lo = (int64_t)(t->offset / es), hi = lo;
  for (int i = 0; i < 4; ++i) {
    if (t->strides[i] <= -(1LL << 40) || t->strides[i] >= (1LL << 40))
      return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "%s.strides[%d]: %" PRId64 " is too large",
                       name, i, t->strides[i]);
    const int64_t reach = t->strides[i] * (dims[i] - 1);
    if (reach < 0) lo += reach;
    else hi += reach;
  }
  if (lo < 0 || (uint64_t)hi >= have / es)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT,
                     "%s: the view (offset %zu bytes, shape [%" PRId64 ",%" PRId64 ",%" PRId64
                     ",%" PRId64 "]) reaches outside its buffer of %zu bytes",
                     name, t->offset, dims[0], dims[1], dims[2], dims[3], have);
  return FCL_OK;
}

static fcl_status check_lse(fcl_ring *r, cl_mem lse, size_t need) {
  cl_context c = NULL;
  size_t have = 0;
  if (clGetMemObjectInfo(lse, CL_MEM_CONTEXT, sizeof c, &c, NULL) != CL_SUCCESS ||
      clGetMemObjectInfo(lse, CL_MEM_SIZE, sizeof have, &have, NULL) != CL_SUCCESS)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "lse: is not a valid cl_mem");
  if (c != r->cl)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "lse: belongs to another OpenCL context");
  if (have < need)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "lse: buffer holds %zu bytes, %zu needed",
                     have, need);
  return FCL_OK;
}

static fcl_status check_local(fcl_ring *r, const ring_call *c, ring_slice *qs, ring_slice *ks) {
  const fcl_ring_desc *rd = c->d;
  if (!rd) return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "d: is NULL");
  const fcl_attention_desc *d = &rd->attn;
  if (rd->layout != FCL_RING_ZIGZAG && rd->layout != FCL_RING_CONTIGUOUS)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "layout: is %d, not a fcl_ring_layout",
                     (int)rd->layout);
  if (d->cu_seqlens_q || d->cu_seqlens_k)
    return ring_fail(r, FCL_ERROR_UNSUPPORTED, "%s: varlen is not supported by ring attention",
                     d->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_k");
  if (!c->q) return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "q: is NULL");
  /* The whole problem, as one device would take it. */
  fcl_config_info info;
  fcl_status s = fcl_attention_config(r->ctx, d, c->q->dtype, c->backward, &info);
  if (s) return ring_fail(r, s, "%s", fcl_context_last_error(r->ctx));
  /* the mask's (i, j) would have to be the whole sequence's on every rank */
  if (d->dropout_p != 0.0f)
    return ring_fail(r, FCL_ERROR_UNSUPPORTED,
                     "attn.dropout_p: is %g; dropout is not supported by ring attention",
                     (double)d->dropout_p);
  const int64_t chunks = rd->layout == FCL_RING_ZIGZAG ? 2 * (int64_t)r->size : r->size;
  if (d->seqlen_q < chunks || d->seqlen_k < chunks)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT,
                     "%s: is %" PRId64 ", less than the %" PRId64 " chunks of %d ranks (%s)",
                     d->seqlen_q < chunks ? "seqlen_q" : "seqlen_k",
                     d->seqlen_q < chunks ? d->seqlen_q : d->seqlen_k, chunks, r->size,
                     rd->layout == FCL_RING_ZIGZAG ? "zig-zag: 2 a rank" : "contiguous");
  ring_slice_of(rd->layout, d->seqlen_q, r->size, r->rank, qs);
  ring_slice_of(rd->layout, d->seqlen_k, r->size, r->rank, ks);
  const int64_t B = d->batch, nq = qs->length, nk = ks->length;
  const int64_t dq_[4] = {B, nq, d->heads_q, d->head_dim}, dk_[4] = {B, nk, d->heads_kv, d->head_dim};
  const int64_t dv_[4] = {B, nk, d->heads_kv, d->head_dim_v};
  const int64_t do_[4] = {B, nq, d->heads_q, d->head_dim_v};
  if ((s = check_view(r, "q", c->q, dq_, NULL)) || (s = check_view(r, "k", c->k, dk_, c->q)) ||
      (s = check_view(r, "v", c->v, dv_, c->q)) || (s = check_view(r, "o", c->o, do_, c->q)))
    return s;
  const size_t lse_bytes = (size_t)(B * d->heads_q * nq) * sizeof(float);
  if (c->backward) {
    if (!c->lse) return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT, "lse: is NULL; the backward needs it");
    if ((s = check_view(r, "dout", c->dout, do_, c->q)) ||
        (s = check_view(r, "dq", c->dq, dq_, c->q)) ||
        (s = check_view(r, "dk", c->dk, dk_, c->q)) || (s = check_view(r, "dv", c->dv, dv_, c->q)))
      return s;
  }
  if (c->lse && (s = check_lse(r, c->lse, lse_bytes))) return s;
  return FCL_OK;
}

/* What every rank must agree on: the whole problem and the pass. */
#define NFP 17
static void fingerprint(const ring_call *c, int64_t fp[NFP]) {
  memset(fp, 0, NFP * sizeof fp[0]);
  if (!c || !c->d || !c->q) return;
  const fcl_attention_desc *d = &c->d->attn;
  uint32_t scale, cap;
  memcpy(&scale, &d->softmax_scale, 4);
  memcpy(&cap, &d->softcap, 4);
  const int64_t v[NFP] = {d->batch, d->seqlen_q, d->seqlen_k, d->heads_q, d->heads_kv,
                          d->head_dim, d->head_dim_v, d->causal, d->window_left,
                          d->window_right, d->diag_shift, c->d->layout, c->q->dtype, scale,
                          cap, d->alibi_slopes != NULL, c->backward};
  memcpy(fp, v, sizeof v);
}
static const char *const fp_names[NFP] = {
    "batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv", "head_dim", "head_dim_v", "causal",
    "window_left", "window_right", "diag_shift", "layout", "q.dtype", "softmax_scale",
    "softcap", "alibi_slopes", "pass"};

/* The ranks' status, then the fingerprint: the first value that differs
 * between ranks is named. */
static fcl_status agree(fcl_ring *r, fcl_status s, const int64_t *fp) {
  int differs = -1;
  int64_t lo = 0, hi = 0;
  const fcl_status a = ring_agree_values(r, s, fp, NFP, &differs, &lo, &hi);
  if (a || differs < 0) return a;
  return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT,
                   "d: %s differs between ranks (from %" PRId64 " to %" PRId64 "); every "
                   "rank must pass the same descriptor",
                   fp_names[differs], lo, hi);
}

/* The ring's descriptor by flashcl.h's rule (its size first; flashcl's
 * own reader is internal to it), its attn read by fcl_attention_config. */
static fcl_status desc_in(fcl_ring *r, ring_call *c) {
  /* oldest: 0.2.0's, whose attn ended with cu_seqlens_k_host */
  const size_t known = sizeof(fcl_ring_desc),
               oldest = offsetof(fcl_ring_desc, attn) +
                        offsetof(fcl_attention_desc, cu_seqlens_k_host) + sizeof(void *);
  size_t size;
  if (!c->d) return FCL_OK;
  memcpy(&size, c->d, sizeof size);
  if (size == 0 || size < oldest)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT,
                     "d->size: is %zu, less than any fcl_ring_desc (%zu bytes); start it from "
                     "FCL_RING_DESC_INIT", size, oldest);
  const unsigned char *b = (const unsigned char *)c->d;
  for (size_t i = known; i < size; ++i)
    if (b[i])
      return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT,
                       "d->size: is %zu, and byte %zu, past the %zu bytes of fcl_ring_desc "
                       "this library knows, is not zero", size, i, known);
  memset(&c->own, 0, sizeof c->own);
  memcpy(&c->own, c->d, size < known ? size : known);
  const size_t attn = size - offsetof(fcl_ring_desc, attn);
  if (c->own.attn.size != attn)
    return ring_fail(r, FCL_ERROR_INVALID_ARGUMENT,
                     "d->attn.size: is %zu, but d->size leaves %zu bytes for it; start d "
                     "from FCL_RING_DESC_INIT", c->own.attn.size, attn);
  c->own.size = known; /* now the library's layout, zero past the caller's */
  c->own.attn.size = sizeof(fcl_attention_desc);
  c->d = &c->own;
  return FCL_OK;
}

fcl_status ring_check(fcl_ring *r, ring_call *c, ring_slice *qs, ring_slice *ks) {
  int64_t fp[NFP];
  const fcl_status s = desc_in(r, c);
  fingerprint(s ? NULL : c, fp);
  return agree(r, s ? s : check_local(r, c, qs, ks), fp);
}

