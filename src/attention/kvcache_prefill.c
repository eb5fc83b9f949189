/* Chunked prefill: many new query rows against a KV cache run on the
 * forward's kernels (tensor cores on NVIDIA), which read each cache row up
 * to its used length (FCL_ATTN_SEQUSED_K). The decode program appends the
 * new tokens, writes the used lengths and, with rotary, the rotated q; a
 * paged cache, one mapped by cache_batch_idx, or a quantized one is first
 * gathered into contiguous rows of q's dtype (llama.cpp's Vulkan backend
 * dequantizes so for many rows too). Nothing is read back to the host. */
#include "attention/attention.h"

/* Bytes of the contiguous copy in q's dtype that a paged, mapped or
 * quantized cache needs (0: none). */
static size_t gather_bytes(const fcl_kvcache_problem *p) {
  const fcl_kvcache_desc *d = p->d;
  if (!p->paged && !d->cache_batch_idx && p->k_fmt == p->dtype && p->v_fmt == p->dtype)
    return 0;
  return fcl_bytes(d->batch * d->cache_capacity, d->heads_kv, d->head_dim + d->head_dim_v,
                   (int64_t)fcl_dtype_size(p->dtype), 1);
}

/* More rows a kv head than one decode work-group takes, not ragged, and a
 * gathered copy (where one is needed) within a quarter of the device's
 * largest buffer and 1 GiB; the rest stays with the decode kernels. */
fcl_status fcl_kvcache_prefill_applies(fcl_context *ctx, const void *problem, fcl_fit *fit) {
  const fcl_kvcache_problem *p = problem;
  const fcl_kvcache_desc *d = p->d;
  const size_t g = gather_bytes(p);
  const size_t most = ctx->info.max_alloc ? ctx->info.max_alloc / 4 : ((size_t)1 << 30);
  *fit = fcl_fit_if(!p->varlen && p->fixed_len < 0 && d->heads_q / d->heads_kv * d->seqlen_q > 64 &&
                    g <= most && g <= ((size_t)1 << 30));
  return FCL_OK;
}

fcl_status fcl_kvcache_prefill_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                      const void *problem, bool *fallback) {
  const fcl_kvcache_problem *p = problem;
  const fcl_kvcache_desc *d = p->d;
  const fcl_variant *v = pl->cls.variant;
  char options[512];
  fcl_status s;
  (void)fallback;
  if ((s = fcl_kvcache_options(ctx, &pl->cls, &pl->cfg, p, options, sizeof options))) return s;
  const size_t es = fcl_dtype_size(p->dtype), gbytes = gather_bytes(p);
  cl_kernel ka = NULL, kp, kg = NULL;
  cl_mem seqused, q_rot = NULL, gathered = NULL;
  if ((s = fcl_get_kernel(ctx, v->tops, options, "fcl_kv_prefill_prep", &kp)) ||
      (p->append &&
       (s = fcl_get_kernel(ctx, v->tops, options, "fcl_kv_append", &ka))) ||
      (gbytes && (s = fcl_get_kernel(ctx, v->tops, options, "fcl_kv_gather", &kg))) ||
      (s = fcl_scratch(ctx, 2, (size_t)d->batch * sizeof(cl_int), &seqused)) ||
      (p->rotary && (s = fcl_scratch(ctx, 3, fcl_bytes(d->batch * d->seqlen_q, d->heads_q,
                                                       d->head_dim, (int64_t)es, 1),
                                     &q_rot))) ||
      (gbytes && (s = fcl_scratch(ctx, 4, gbytes, &gathered))))
    return s;
  /* q rotated, and the gathered K and V: contiguous (batch, token, head, dim). */
  const fcl_tensor qr = {q_rot, 0, p->dtype,
                         {d->seqlen_q * d->heads_q * d->head_dim, d->heads_q * d->head_dim,
                          d->head_dim, 1}};
  const fcl_tensor kgv = {gathered, 0, p->dtype,
                          {d->cache_capacity * d->heads_kv * d->head_dim,
                           d->heads_kv * d->head_dim, d->head_dim, 1}};
  const fcl_tensor vgv = {gathered, (size_t)(d->batch * d->cache_capacity * d->heads_kv *
                                             d->head_dim) * es, p->dtype,
                          {d->cache_capacity * d->heads_kv * d->head_dim_v,
                           d->heads_kv * d->head_dim_v, d->head_dim_v, 1}};
  const cl_int kv_flags = fcl_kvcache_flags(p);
  const cl_mem any = p->q->buffer;
  const cl_mem bidx = d->cache_batch_idx ? d->cache_batch_idx : any;
  const cl_int cache_batch = (cl_int)(d->cache_batch ? d->cache_batch : d->batch);
  fcl_args ap = FCL_ARGS(kp), ag = FCL_ARGS(kg);
  const cl_mem bufs[] = {p->q->buffer, q_rot ? q_rot : any, seqused, d->cache_seqlens, bidx,
                         d->rotary_cos ? d->rotary_cos : any,
                         d->rotary_sin ? d->rotary_sin : any};
  for (size_t i = 0; i < FCL_COUNT(bufs); ++i) FCL_ARG(&ap, bufs[i]);
  fcl_arg_tensor(&ap, p->q);
  fcl_arg_tensor(&ap, q_rot ? &qr : p->q);
  const cl_int ints[] = {(cl_int)d->head_dim, (cl_int)d->heads_q, (cl_int)d->seqlen_q,
                         (cl_int)d->cache_capacity, cache_batch, (cl_int)d->rotary_dim,
                         (cl_int)d->rotary_positions, kv_flags};
  for (size_t i = 0; i < FCL_COUNT(ints); ++i) FCL_ARG(&ap, ints[i]);
  if (kg) {
    const cl_mem gb[] = {p->k_cache->buffer, p->v_cache->buffer, gathered, gathered,
                         d->cache_seqlens, bidx, d->block_table ? d->block_table : any,
                         d->k_scale, d->v_scale};
    for (size_t i = 0; i < FCL_COUNT(gb); ++i) FCL_ARG(&ag, gb[i]);
    fcl_arg_tensor(&ag, p->k_cache);
    fcl_arg_tensor(&ag, p->v_cache);
    /* The copies' views: V's region of the buffer follows K's. */
    const cl_long k_sb = kgv.strides[0], k_ss = kgv.strides[1], k_sh = kgv.strides[2];
    const cl_long v_off = (cl_long)(vgv.offset / es), v_sb = vgv.strides[0],
                  v_ss = vgv.strides[1], v_sh = vgv.strides[2];
    FCL_ARG(&ag, k_sb); FCL_ARG(&ag, k_ss); FCL_ARG(&ag, k_sh);
    FCL_ARG(&ag, v_off); FCL_ARG(&ag, v_sb); FCL_ARG(&ag, v_ss); FCL_ARG(&ag, v_sh);
    const cl_int gi[] = {(cl_int)d->head_dim, (cl_int)d->head_dim_v, (cl_int)d->heads_kv,
                         (cl_int)d->seqlen_q};
    for (size_t i = 0; i < FCL_COUNT(gi); ++i) FCL_ARG(&ag, gi[i]);
    fcl_kvcache_layout_args(&ag, d);
    const cl_int scale_heads = d->scale_count > 1;
    FCL_ARG(&ag, kv_flags);
    FCL_ARG(&ag, scale_heads);
  }
  if (ap.err || ag.err) return fcl_fail_cl(ctx, ap.err ? ap.err : ag.err, "clSetKernelArg");

  /* The forward over the cache rows (p->attn: seqlen_k is the capacity),
   * each sequence's keys its used length. */
  const fcl_attention_problem fp = {
      .d = &p->attn, .dtype = p->dtype, .total_q = d->batch * d->seqlen_q,
      .total_k = d->batch * d->cache_capacity, .sc = p->sc, .q = q_rot ? &qr : p->q,
      .k = kg ? &kgv : p->k_cache, .v = kg ? &vgv : p->v_cache, .o = p->o, .lse = p->lse,
      .seqused_k = seqused};

  /* The forward's kernels built and its scratch taken before anything is
   * enqueued: on error nothing is (the append writes the caches). */
  ctx->dry_run = true;
  s = fcl_attention_run(ctx, &fp, false);
  ctx->dry_run = false;
  if (s) return s;

  if (ka && (s = fcl_kvcache_append(ctx, ka, p, kv_flags, 0))) return s;
  /* Work-groups of a fixed size, not the driver's choice (PoCL compiles a
   * kernel again for every work-group size it picks, one per shape): WX
   * elements of a row by WY rows (positions), the kernels skipping what
   * lies past the head dim or the rows. With one warp a row (32 x 1) the
   * gather of 8704 rows, 8 kv heads, ran as 278K work-groups, and the
   * H100's q8_0 prefill of 512 tokens took 382 us where it had taken 312
   * with the driver's choice (8 rows a group: 35K). Without rotary the
   * preparation only writes each sequence's used length: one work-item a
   * query head. */
  enum { WX = 32, WY = 8 };
  const size_t l[3] = {WX, WY, 1}, one[3] = {1, 1, 1};
  const size_t g[3] = {p->rotary ? (size_t)(d->head_dim + WX - 1) / WX * WX : 1,
                       p->rotary ? (size_t)(d->seqlen_q + WY - 1) / WY * WY : 1,
                       (size_t)(d->batch * d->heads_q)};
  if ((s = fcl_launch(ctx, kp, &ap, g, p->rotary ? l : one,
                      "enqueueing the KV-cache prefill preparation")))
    return s;
  if (kg) {
    /* The gather: VEC elements a work-item (the program's), a row's
     * work-items (up to 32) by 256 / that many rows a group. */
    const int64_t width = d->head_dim > d->head_dim_v ? d->head_dim : d->head_dim_v;
    const int64_t vec = fcl_kvcache_vector_width(p), items = (width + vec - 1) / vec;
    size_t gx = 1;
    while ((int64_t)gx < items && gx < WX) gx *= 2;
    const size_t gy = 256 / gx, lg[3] = {gx, gy, 1};
    const size_t gg[3] = {(size_t)(items + (int64_t)gx - 1) / gx * gx,
                          (size_t)(d->cache_capacity + (int64_t)gy - 1) / gy * gy,
                          (size_t)(d->batch * d->heads_kv)};
    if ((s = fcl_launch(ctx, kg, &ag, gg, lg, "enqueueing the KV-cache gather"))) return s;
  }
  fcl_log(ctx, "kvcache: %lld new rows a kv head run on the forward's kernels%s",
          (long long)(d->heads_q / d->heads_kv * d->seqlen_q),
          kg ? " (the cache gathered into contiguous rows)" : "");
  return fcl_attention_run(ctx, &fp, false);
}
