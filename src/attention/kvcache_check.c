/* Validation of fcl_attention_kvcache's arguments: everything the host can
 * check without reading a device buffer (cache_seqlens, block_table,
 * cache_batch_idx and cu_seqlens_q are checked by the kernels). */
#include "attention/attention.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>

#define BAD(...) fcl_fail(ctx, FCL_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

int64_t fcl_view_tokens(const fcl_tensor *t, int64_t heads, int64_t dim) {
  const size_t es = fcl_dtype_size(t->dtype);
  const int64_t elems = (int64_t)(fcl_buffer_size(t->buffer) / es);
  const int64_t first = (int64_t)(t->offset / es);
  /* One token's reach past its start, over heads and dims. */
  int64_t lo = 0, hi = dim - 1;
  if (t->strides[2] > 0) hi += (heads - 1) * t->strides[2];
  else lo += (heads - 1) * t->strides[2];
  const int64_t ss = t->strides[1];
  if (first + lo < 0 || first + hi >= elems) return 0;
  if (ss == 0) return INT32_MAX;
  const int64_t n = ss > 0 ? (elems - 1 - first - hi) / ss + 1 : (first + lo) / -ss + 1;
  return n > INT32_MAX ? INT32_MAX : n;
}

static fcl_status check_desc(fcl_context *ctx, const fcl_kvcache_desc *d) {
  if (!d) return BAD("d: is NULL");
  const struct { const char *name; int64_t v, lo, hi; } ranges[] = {
      {"batch", d->batch, 1, INT32_MAX},
      {"seqlen_q", d->seqlen_q, 1, INT32_MAX},
      {"heads_q", d->heads_q, 1, INT32_MAX},
      {"heads_kv", d->heads_kv, 1, INT32_MAX},
      {"head_dim", d->head_dim, 1, FCL_MAX_HEAD_DIM},
      {"head_dim_v", d->head_dim_v, 1, FCL_MAX_HEAD_DIM},
      {"cache_capacity", d->cache_capacity, 1, INT32_MAX / 2},
      {"page_size", d->page_size, 0, INT32_MAX / 2},
      {"cache_batch", d->cache_batch, 0, INT32_MAX},
      {"window_left", d->window_left, -1, INT64_MAX},
      {"window_right", d->window_right, -1, INT64_MAX},
      {"num_splits", d->num_splits, 0, FCL_KV_MAX_SPLITS},
      {"rotary_dim", d->rotary_dim, 0, d->head_dim},
  };
  for (size_t i = 0; i < FCL_COUNT(ranges); ++i)
    if (ranges[i].v < ranges[i].lo || ranges[i].v > ranges[i].hi)
      return BAD("d->%s: is %" PRId64 ", must be in %" PRId64 "..%" PRId64, ranges[i].name,
                 ranges[i].v, ranges[i].lo, ranges[i].hi);
  if (d->heads_q % d->heads_kv)
    return BAD("d->heads_q: %" PRId64 " is not a multiple of d->heads_kv %" PRId64,
               d->heads_q, d->heads_kv);
  if (d->batch * d->seqlen_q > INT32_MAX || d->seqlen_q * d->heads_q > INT32_MAX)
    return BAD("d->batch * d->seqlen_q * d->heads_q: %" PRId64 " rows are too many",
               d->batch * d->seqlen_q * d->heads_q);
  if (!isfinite(d->softmax_scale))
    return BAD("d->softmax_scale: is %g, must be finite", (double)d->softmax_scale);
  if (!(d->softcap >= 0.0f) || !isfinite(d->softcap))
    return BAD("d->softcap: is %g, must be >= 0 and finite", (double)d->softcap);
  if (d->causal != 0 && d->causal != 1) return BAD("d->causal: is %d, must be 0 or 1", d->causal);
  if (d->page_size > 0) {
    if (d->cache_capacity % d->page_size)
      return BAD("d->cache_capacity: %" PRId64 " is not a multiple of d->page_size %" PRId64,
                 d->cache_capacity, d->page_size);
    if (d->num_pages < 1 || d->num_pages > INT32_MAX)
      return BAD("d->num_pages: is %" PRId64 ", a paged cache needs 1..%d pages",
                 d->num_pages, INT32_MAX);
    if (!d->block_table) return BAD("d->block_table: is NULL, a paged cache needs one");
    if (d->cache_batch_idx)
      return BAD("d->cache_batch_idx: is set, but a paged cache (page_size %" PRId64
                 ") maps sequences through block_table", d->page_size);
  } else {
    if (d->block_table)
      return BAD("d->block_table: is set, but d->page_size is 0 (a contiguous cache)");
    const int64_t rows = d->cache_batch ? d->cache_batch : d->batch;
    if (!d->cache_batch_idx && rows < d->batch)
      return BAD("d->cache_batch: is %" PRId64 ", fewer rows than d->batch %" PRId64
                 " without d->cache_batch_idx", d->cache_batch, d->batch);
  }
  if (!d->cache_seqlens) return BAD("d->cache_seqlens: is NULL, it is required");
  if (!d->rotary_cos != !d->rotary_sin)
    return BAD("d->%s: is NULL but d->%s is set; give both or neither",
               d->rotary_cos ? "rotary_sin" : "rotary_cos",
               d->rotary_cos ? "rotary_cos" : "rotary_sin");
  if (d->rotary_cos) {
    if (d->rotary_dim < 2 || d->rotary_dim % 2)
      return BAD("d->rotary_dim: is %" PRId64 ", must be even, 2..head_dim (%" PRId64 ")",
                 d->rotary_dim, d->head_dim);
    if (d->rotary_positions < 1 || d->rotary_positions > INT32_MAX)
      return BAD("d->rotary_positions: is %" PRId64 ", must be >= 1", d->rotary_positions);
  } else if (d->rotary_dim) {
    return BAD("d->rotary_dim: is %" PRId64 " but d->rotary_cos and d->rotary_sin are NULL",
               d->rotary_dim);
  }
  return FCL_OK;
}

static fcl_status check_buffers(fcl_context *ctx, const fcl_kvcache_desc *d) {
  const size_t rot = (size_t)(d->rotary_positions * (d->rotary_dim / 2)) * 4;
  const struct { cl_mem m; const char *name; size_t bytes; } bufs[] = {
      {d->cache_seqlens, "d->cache_seqlens", (size_t)d->batch * 4},
      {d->cache_batch_idx, "d->cache_batch_idx", (size_t)d->batch * 4},
      {d->block_table, "d->block_table",
       d->page_size ? fcl_bytes(d->batch, d->cache_capacity / d->page_size, 4, 1, 1) : 0},
      {d->cu_seqlens_q, "d->cu_seqlens_q", (size_t)(d->batch + 1) * 4},
      {d->alibi_slopes, "d->alibi_slopes", (size_t)d->heads_q * 4},
      {d->rotary_cos, "d->rotary_cos", rot},
      {d->rotary_sin, "d->rotary_sin", rot},
  };
  fcl_status s;
  for (size_t i = 0; i < FCL_COUNT(bufs); ++i)
    if (bufs[i].m && (s = fcl_check_buffer(ctx, bufs[i].m, bufs[i].name, bufs[i].bytes)))
      return s;
  return FCL_OK;
}

/* The fp8 caches' scales: only for fp8 caches, scale_count floats. */
static fcl_status check_scales(fcl_context *ctx, const fcl_kvcache_desc *d,
                               const fcl_tensor *k_cache, const fcl_tensor *v_cache) {
  const struct { cl_mem m; const fcl_tensor *t; const char *name, *cache; } sc[] = {
      {d->k_scale, k_cache, "d->k_scale", "k_cache"},
      {d->v_scale, v_cache, "d->v_scale", "v_cache"}};
  if (d->scale_count != 0 && d->scale_count != 1 && d->scale_count != d->heads_kv)
    return BAD("d->scale_count: is %" PRId64 ", must be 0 or 1 (one scale a tensor) or "
               "d->heads_kv %" PRId64 " (one a kv head)", d->scale_count, d->heads_kv);
  fcl_status s;
  for (int i = 0; i < 2; ++i) {
    if (!sc[i].m) continue;
    const fcl_dtype f = sc[i].t->dtype;
    if (f != FCL_FP8_E4M3 && f != FCL_FP8_E5M2)
      return BAD("%s: is set, but %s.dtype is %s: only fp8 caches take a scale%s", sc[i].name,
                 sc[i].cache, fcl_dtype_name(f),
                 fcl_dtype_block(f) > 1 ? " (blocks carry their own)" : "");
    const size_t n = (size_t)(d->scale_count > 1 ? d->scale_count : 1);
    if ((s = fcl_check_buffer(ctx, sc[i].m, sc[i].name, n * 4))) return s;
  }
  return FCL_OK;
}

static const fcl_desc_kind kvcache_desc_kind = {
    "fcl_kvcache_desc", "FCL_KVCACHE_DESC_INIT",
    offsetof(fcl_kvcache_desc, num_splits) + sizeof(int), sizeof(fcl_kvcache_desc)};

fcl_status fcl_kvcache_desc_in(fcl_context *ctx, const fcl_kvcache_desc **d,
                               fcl_kvcache_desc *own) {
  if (!*d) return FCL_OK;
  const fcl_status s = fcl_desc_read(ctx, *d, &kvcache_desc_kind, "d", own);
  if (s == FCL_OK) *d = own;
  return s;
}

fcl_status fcl_check_kvcache(fcl_context *ctx, const fcl_kvcache_desc *d, const fcl_tensor *q,
                             const fcl_tensor *k_cache, const fcl_tensor *v_cache,
                             const fcl_tensor *k_new, const fcl_tensor *v_new,
                             const fcl_tensor *o, cl_mem lse, fcl_kvcache_problem *p) {
  fcl_status s;
  if ((s = check_desc(ctx, d)) || (s = check_buffers(ctx, d))) return s;
  if (!k_new != !v_new)
    return BAD("%s: is NULL but %s is set; give both or neither", k_new ? "v_new" : "k_new",
               k_new ? "k_new" : "v_new");
  const bool varlen = d->cu_seqlens_q != NULL, paged = d->page_size > 0;
  /* Token-indexed views are checked for one token when varlen; the
   * kernels bound cu_seqlens_q by what their buffers hold. */
  const int64_t B = varlen ? 1 : d->batch, T = varlen ? 1 : d->seqlen_q;
  const int64_t slots = paged ? d->num_pages : (d->cache_batch ? d->cache_batch : d->batch);
  const int64_t slot_len = paged ? d->page_size : d->cache_capacity;
  const fcl_tensor_shape sq = {"q", {B, T, d->heads_q, d->head_dim}};
  const fcl_tensor_shape so = {"o", {B, T, d->heads_q, d->head_dim_v}};
  const fcl_tensor_shape skc = {"k_cache", {slots, slot_len, d->heads_kv, d->head_dim}};
  const fcl_tensor_shape svc = {"v_cache", {slots, slot_len, d->heads_kv, d->head_dim_v}};
  const fcl_tensor_shape skn = {"k_new", {B, T, d->heads_kv, d->head_dim}};
  const fcl_tensor_shape svn = {"v_new", {B, T, d->heads_kv, d->head_dim_v}};
  if ((s = fcl_check_view(ctx, q, &sq, varlen, NULL, NULL)) ||
      (s = fcl_check_cache_view(ctx, k_cache, &skc, q, "q")) ||
      (s = fcl_check_cache_view(ctx, v_cache, &svc, q, "q")) ||
      (s = check_scales(ctx, d, k_cache, v_cache)) ||
      (s = fcl_check_view(ctx, o, &so, varlen, q, "q")) ||
      (k_new && (s = fcl_check_view(ctx, k_new, &skn, varlen, q, "q"))) ||
      (v_new && (s = fcl_check_view(ctx, v_new, &svn, varlen, q, "q"))))
    return s;
  int64_t tokens = d->batch * d->seqlen_q, lse_len = d->batch * d->heads_q * d->seqlen_q;
  if (varlen) {
    tokens = fcl_view_tokens(q, d->heads_q, d->head_dim);
    const int64_t to = fcl_view_tokens(o, d->heads_q, d->head_dim_v);
    if (to < tokens) tokens = to;
    if (k_new) {
      const int64_t tk = fcl_view_tokens(k_new, d->heads_kv, d->head_dim);
      const int64_t tv = fcl_view_tokens(v_new, d->heads_kv, d->head_dim_v);
      if (tk < tokens) tokens = tk;
      if (tv < tokens) tokens = tv;
    }
    lse_len = lse ? (int64_t)(fcl_buffer_size(lse) / 4) : 0;
  }
  if (lse && (s = fcl_check_buffer(ctx, lse, "lse", (size_t)(varlen ? d->heads_q : lse_len) * 4)))
    return s;
  *p = (fcl_kvcache_problem){.d = d, .dtype = q->dtype, .k_fmt = k_cache->dtype,
                             .v_fmt = v_cache->dtype, .varlen = varlen, .paged = paged,
                             .append = k_new != NULL, .rotary = d->rotary_cos != NULL,
                             .q = q, .k_cache = k_cache, .v_cache = v_cache, .k_new = k_new,
                             .v_new = v_new, .o = o, .lse = lse, .tokens = tokens,
                             .lse_len = lse_len, .fixed_len = -1};
  p->attn = (fcl_attention_desc){.size = sizeof(fcl_attention_desc),
      .batch = d->batch, .seqlen_q = d->seqlen_q, .seqlen_k = d->cache_capacity,
      .heads_q = d->heads_q, .heads_kv = d->heads_kv, .head_dim = d->head_dim,
      .head_dim_v = d->head_dim_v, .softmax_scale = d->softmax_scale, .causal = d->causal,
      .window_left = d->window_left, .window_right = d->window_right, .softcap = d->softcap,
      .alibi_slopes = d->alibi_slopes};
  fcl_attention_scalars_init(&p->attn, varlen, tokens, &p->sc);
  return FCL_OK;
}
