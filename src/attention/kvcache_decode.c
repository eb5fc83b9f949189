/* The decode variant (cl/attention/kvcache_decode.cl): its descriptor
 * (parameters, defaults fitted to the device, checks, search space) and
 * its launch: the append of the new tokens, then the attention over split
 * key ranges with the merge of the splits in the same kernel. Also the
 * forward row that runs few query rows against many keys on the same
 * kernels. */
#include "attention/attention.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Work-group size, work-items a key, keys a work-item, the most query rows
 * a work-group, splits: the work-groups a compute unit runs at once (the
 * automatic choice fills whole waves of them) and the fewest keys it gives
 * a split. */
#define PARAMS(X) X(WG) X(TPK) X(KPW) X(MAX_ROWS) X(WAVES) X(SPLIT_KEYS)
FCL_PARAM_STRUCT(decode_params, PARAMS);
/* Launch-only: MAX_ROWS reaches the kernel as ROWS, the splits not at all,
 * so programs that differ only in them are one. */
#define HOST_PARAMS (1u << 3 | 1u << 4 | 1u << 5) /* MAX_ROWS, WAVES, SPLIT_KEYS */

static bool pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

/* kvcache_decode.cl's out_s, in floats: ROWS x HEAD_DIM_V, or a slice of
 * that for each key group where the slices fit in 16 KiB
 * (KV_GROUP_SLICES); the larger of VEC 4 and 8. */
static size_t out_floats(const decode_params *c, int rows, int dv) {
  size_t most = 0;
  for (int vec = 4; vec <= 8; vec *= 2) {
    const int nvv = (dv + vec - 1) / vec;
    int dvt = 1; /* DVT: the largest of WG, WG / 2, ..., WG / 64 at most nvv */
    for (int k = 0; k <= 6; ++k)
      if (nvv >= c->WG >> k) {
        dvt = c->WG >> k;
        break;
      }
    const size_t out = (size_t)rows * dv, slices = (size_t)(c->WG / dvt) * out;
    const size_t n = slices <= 4096 ? slices : out;
    if (n > most) most = n;
  }
  return most;
}

/* The kernel's local memory: the rows' q, partial dots, p, their m, l and
 * alpha, out and last_s, the paged keys' page ids and slots (three blocks
 * of each), and the split merge's join of its parts (at most WG * (VEC +
 * 2) floats, VEC <= 8: kvcache_split_merge.cl's KV_MERGE_LOCAL). */
static size_t local_bytes(const decode_params *c, int rows, int d, int dv) {
  const int bn = c->WG / c->TPK * c->KPW;
  return 4 * ((size_t)rows * (d + (size_t)bn * (c->TPK + 1) + bn + 3 + 4) + out_floats(c, rows, dv) +
              6 * (size_t)bn + 10 * (size_t)c->WG);
}

static void defaults(const fcl_device_info *dev, const fcl_tuning_class *cls, fcl_config *cfg) {
  decode_params *c = FCL_PARAMS(decode_params, cfg);
  c->WG = dev->is_cpu ? 64 : 128;
  while ((size_t)c->WG > dev->max_wg && c->WG > 1) c->WG /= 2;
  /* GPUs: a key's 16-byte vectors across up to 16 work-items, each with
   * 4 keys of 32 a block (the q slice a work-item keeps in registers stays
   * small: 236 registers at 4 work-items a key and one key, 164 here).
   * CPUs: 4 work-items a key, one key each. */
  const int vec = cls->dtype == FCL_F32 ? 4 : 8;
  const int nvk = (cls->head_dim + vec - 1) / vec;
  c->TPK = dev->is_cpu ? 4 : 16;
  while (c->TPK > 1 && c->TPK > nvk) c->TPK /= 2;
  c->KPW = 1;
  while (!dev->is_cpu && c->WG / c->TPK * c->KPW < 32) c->KPW *= 2;
  c->MAX_ROWS = 16;
  while (c->MAX_ROWS > 1 &&
         local_bytes(c, c->MAX_ROWS, cls->head_dim, cls->head_dim_v) + 512 > dev->local_mem)
    c->MAX_ROWS /= 2;
  c->WAVES = dev->is_cpu ? 1 : 4; /* GPUs: several work-groups a unit hide the loads' latency */
  c->SPLIT_KEYS = 256;
}

static bool valid(const fcl_device_info *dev, const fcl_tuning_class *cls, const fcl_config *cfg,
                  char *why, size_t why_size) {
  const decode_params *c = FCL_CPARAMS(decode_params, cfg);
  const char *bad = NULL;
  if (!pow2(c->WG) || c->WG < 16 || c->WG > 1024 || !pow2(c->TPK) || c->TPK > c->WG ||
      c->KPW < 1 || c->KPW > 16 || c->WG / c->TPK * c->KPW > 512 || c->MAX_ROWS < 1 ||
      c->MAX_ROWS > 64 || c->WAVES < 1 || c->SPLIT_KEYS < 16)
    bad = "a size out of range (WG and TPK powers of two)";
  else if ((size_t)c->WG > dev->max_wg)
    bad = "work-group larger than the device allows";
  else if (c->MAX_ROWS > c->WG)
    bad = "more rows than work-items";
  else if (local_bytes(c, c->MAX_ROWS, cls->head_dim, cls->head_dim_v) + 512 > dev->local_mem)
    bad = "local memory exceeded";
  if (bad && why) snprintf(why, why_size, "%s", bad);
  return bad == NULL;
}

/* MAX_ROWS stays at its default: fa-tune's decode problem (4 query heads a
 * kv head, one new token) runs 4 rows whatever its value. */
static int axes(const fcl_tuning_class *cls, fcl_axis *a) {
  (void)cls;
  a[0] = (fcl_axis){"WG", 3, {64, 128, 256}};
  a[1] = (fcl_axis){"TPK", 4, {2, 4, 8, 16}};
  a[2] = (fcl_axis){"KPW", 4, {1, 2, 4, 8}};
  a[3] = (fcl_axis){"WAVES", 4, {1, 2, 4, 8}};
  a[4] = (fcl_axis){"SPLIT_KEYS", 3, {128, 256, 512}};
  return 5;
}

static void point(const fcl_tuning_class *cls, const int *v, fcl_config *cfg) {
  (void)cls;
  decode_params *c = FCL_PARAMS(decode_params, cfg);
  c->WG = v[0], c->TPK = v[1], c->KPW = v[2], c->WAVES = v[3], c->SPLIT_KEYS = v[4];
}

static bool worth_trying(const fcl_device_info *dev, const fcl_tuning_class *cls,
                         const fcl_config *cfg) {
  (void)cls;
  return fcl_whole_warps(dev, (size_t)FCL_CPARAMS(decode_params, cfg)->WG);
}

/* The program holds the append and the prefill's kernels beside the
 * decode kernel. */
const fcl_variant fcl_variant_attention_decode = {
    "attention_decode", FCL_TUNING_ATTENTION_DECODE, FCL_TOPS("attention/kvcache_decode.cl"),
    {"HEAD_DIM", "HEAD_DIM_V"}, FCL_MAX_HEAD_DIM, false, FCL_PARAM_COUNT(PARAMS),
    FCL_PARAM_NAMES(PARAMS), defaults, valid, axes, point, worth_trying, HOST_PARAMS};

void fcl_kvcache_class(const void *problem, const fcl_variant *v, fcl_tuning_class *cls) {
  const fcl_kvcache_problem *p = problem;
  *cls = (fcl_tuning_class){v, p->dtype, (int)p->d->head_dim,
                            (int)p->d->head_dim_v, 0,
                            fcl_seqlen_bucket(p->fixed_len >= 0 ? p->fixed_len
                                                                : p->d->cache_capacity)};
}

/* Whether a cache's view lets a load take vec values (at most 8 in a
 * quantized format): 16 bytes of q's dtype, or an aligned load of fp8
 * bytes; a block's values are two-byte aligned, whatever vec. */
static bool cache_loads(const fcl_tensor *t, int vec, size_t es) {
  if (fcl_dtype_block(t->dtype) > 1) return vec <= 8;
  if (fcl_dtype_cache_format(t->dtype)) return vec <= 8 && fcl_tensor_aligned(t, 1, false, vec);
  return (size_t)vec * es <= 16 && fcl_tensor_aligned(t, es, false, vec);
}

/* Whether a block-format cache's rows all start at a multiple of 8
 * bytes, with whole 128-value groups of the head dim a lane, so that the
 * tensor-core decode reads them with aligned 8-byte loads: a byte offset
 * of a multiple of 8 and strides of multiples of 128 values (4 blocks of
 * 34 or 18 bytes). */
bool fcl_kvcache_lane_blocks(const fcl_tensor *t, int64_t head_dim) {
  return fcl_dtype_block(t->dtype) > 1 && head_dim % 128 == 0 && t->offset % 8 == 0 &&
         t->strides[0] % 128 == 0 && t->strides[1] % 128 == 0 && t->strides[2] % 128 == 0;
}

/* Values a load: 16 bytes of q's dtype (8 values of a quantized cache)
 * where the head dims and the caches' views allow, else fewer. */
int fcl_kvcache_vector_width(const fcl_kvcache_problem *p) {
  const size_t es = fcl_dtype_size(p->dtype);
  for (int vec = 8; vec > 1; vec /= 2)
    if (p->d->head_dim % vec == 0 && p->d->head_dim_v % vec == 0 &&
        cache_loads(p->k_cache, vec, es) && cache_loads(p->v_cache, vec, es))
      return vec;
  return 1;
}

static int next_pow2(int64_t x) {
  int r = 1;
  while (r < x && r < (1 << 20)) r *= 2;
  return r;
}

/* The arguments the KV-cache kernels share, in their order: the
 * device-side index buffers, rotary tables and fp8 scales (NULL where unused: a buffer
 * argument costs a launch host time, a NULL one almost none;
 * docs/defaults.md) ... */
static void arg_index_buffers(fcl_args *a, const fcl_kvcache_problem *p) {
  const fcl_kvcache_desc *d = p->d;
  const cl_mem bufs[] = {d->cache_seqlens, d->cache_batch_idx, d->block_table,
                         d->cu_seqlens_q,  d->rotary_cos,      d->rotary_sin,
                         d->k_scale,       d->v_scale};
  for (size_t i = 0; i < FCL_COUNT(bufs); ++i) FCL_ARG(a, bufs[i]);
}
/* ... and the cache's layout: capacity, rows, page size, pages, pages a
 * sequence. */
static void cache_layout(const fcl_kvcache_desc *d, cl_int l[5]) {
  l[0] = (cl_int)d->cache_capacity, l[1] = (cl_int)(d->cache_batch ? d->cache_batch : d->batch);
  l[2] = (cl_int)(d->page_size ? d->page_size : 1), l[3] = (cl_int)d->num_pages;
  l[4] = (cl_int)(d->page_size ? d->cache_capacity / d->page_size : 0);
}
void fcl_kvcache_layout_args(fcl_args *a, const fcl_kvcache_desc *d) {
  cl_int l[5];
  cache_layout(d, l);
  for (int i = 0; i < 5; ++i) FCL_ARG(a, l[i]);
}

/* The multiplier and shift that divide 0 <= n < 2^31 by d >= 1 as
 * (mul_hi(n, mul) + n) >> shift (kvcache_common.cl's KV_DIV): shift =
 * ceil(log2 d), mul = floor(2^32 (2^shift - d) / d) + 1, the round-up
 * method of Granlund and Montgomery with the 33rd bit of the sum spared by
 * n < 2^31. d < 1 (min_split_keys 0: unused) gets the identity. */
static void fastdiv(cl_int d, cl_int *mul, cl_int *shift) {
  int s = 0;
  while (s < 31 && ((int64_t)1 << s) < d) ++s;
  const uint64_t m = d >= 1 ? ((uint64_t)1 << 32) * (((uint64_t)1 << s) - (uint64_t)d) /
                                      (uint64_t)d + 1
                            : 1;
  *mul = (cl_int)(uint32_t)m, *shift = d >= 1 ? s : 0;
}

/* The decode kernels' arguments (KV_DECODE_PARAMS): the buffers, then the
 * scalars in one struct (attention_abi.h). */
_Static_assert(sizeof(fcl_kv_decode_scalars) == 26 * 8 + 30 * 4,
               "fcl_kv_decode_scalars: no padding, as the kernels lay it out");
static void decode_args(fcl_args *a, const fcl_kvcache_problem *p, cl_mem counters,
                        cl_mem parts, cl_int ns, cl_int min_split_keys, cl_int kv_flags,
                        cl_int flags) {
  const fcl_kvcache_desc *d = p->d;
  const cl_mem bufs[] = {p->q->buffer, p->k_cache->buffer, p->v_cache->buffer, p->o->buffer,
                         p->lse, counters, parts, d->alibi_slopes};
  for (size_t i = 0; i < FCL_COUNT(bufs); ++i) FCL_ARG(a, bufs[i]);
  arg_index_buffers(a, p);
  /* k_new, v_new: for the fused append (NULL without an append) */
  const cl_mem news[] = {p->append ? p->k_new->buffer : NULL,
                         p->append ? p->v_new->buffer : NULL};
  for (size_t i = 0; i < FCL_COUNT(news); ++i) FCL_ARG(a, news[i]);
  cl_long kn[4] = {0}, vn[4] = {0};
  if (p->append) fcl_tensor_view(p->k_new, kn), fcl_tensor_view(p->v_new, vn);
  cl_int l[5];
  cache_layout(d, l);
  fcl_kv_decode_scalars sc = {
      .kn_off = kn[0], .kn_sb = kn[1], .kn_ss = kn[2], .kn_sh = kn[3],
      .vn_off = vn[0], .vn_sb = vn[1], .vn_ss = vn[2], .vn_sh = vn[3],
      .q_tokens = p->tokens, .lse_len = p->lse_len,
      .batch = (cl_int)d->batch, .seqlen_q = (cl_int)d->seqlen_q, .heads_q = (cl_int)d->heads_q,
      .group = (cl_int)(d->heads_q / d->heads_kv), .heads_kv = (cl_int)d->heads_kv,
      .capacity = l[0], .cache_batch = l[1], .page_size = l[2], .num_pages = l[3],
      .pages_per_seq = l[4],
      .rotary_dim = (cl_int)d->rotary_dim, .rotary_positions = (cl_int)d->rotary_positions,
      .window_left = p->sc.window_left, .window_right = p->sc.window_right,
      .qk_scale = p->sc.qk_scale, .softcap_l2 = p->sc.softcap_l2, .num_splits = ns,
      .min_split_keys = min_split_keys,
      .fixed_len = (cl_int)(p->fixed_len >= 0 ? p->fixed_len : 0), .kv_flags = kv_flags,
      .flags = flags, .scale_heads = d->scale_count > 1};
  fastdiv(sc.group, &sc.group_mul, &sc.group_shift);
  fastdiv(sc.heads_kv, &sc.heads_kv_mul, &sc.heads_kv_shift);
  fastdiv(sc.page_size, &sc.page_size_mul, &sc.page_size_shift);
  fastdiv(sc.min_split_keys, &sc.min_split_keys_mul, &sc.min_split_keys_shift);
  fcl_attention_views(&sc, p->q, p->k_cache, p->v_cache, p->o);
  fcl_arg_struct(a, sizeof sc, &sc);
}

_Static_assert(sizeof(fcl_kv_append_scalars) == 17 * 8 + 14 * 4,
               "fcl_kv_append_scalars: no padding, as the kernel lays it out");
static void append_args(fcl_args *a, const fcl_kvcache_problem *p, cl_int kv_flags,
                        cl_int flags) {
  const fcl_kvcache_desc *d = p->d;
  const cl_mem bufs[] = {p->k_new->buffer, p->v_new->buffer, p->k_cache->buffer,
                         p->v_cache->buffer};
  for (size_t i = 0; i < FCL_COUNT(bufs); ++i) FCL_ARG(a, bufs[i]);
  arg_index_buffers(a, p);
  cl_long v[16];
  fcl_tensor_view(p->k_new, v), fcl_tensor_view(p->v_new, v + 4);
  fcl_tensor_view(p->k_cache, v + 8), fcl_tensor_view(p->v_cache, v + 12);
  cl_int l[5];
  cache_layout(d, l);
  fcl_kv_append_scalars sc = {
      .q_tokens = p->tokens, .head_dim = (cl_int)d->head_dim,
      .head_dim_v = (cl_int)d->head_dim_v, .heads_kv = (cl_int)d->heads_kv,
      .seqlen_q = (cl_int)d->seqlen_q, .capacity = l[0], .cache_batch = l[1],
      .page_size = l[2], .num_pages = l[3], .pages_per_seq = l[4],
      .rotary_dim = (cl_int)d->rotary_dim, .rotary_positions = (cl_int)d->rotary_positions,
      .scale_heads = d->scale_count > 1, .kv_flags = kv_flags, .flags = flags};
  memcpy(&sc, v, sizeof v); /* the four views lead, as FCL_ABI_VIEWS's do */
  fcl_arg_struct(a, sizeof sc, &sc);
}

fcl_status fcl_kvcache_append(fcl_context *ctx, cl_kernel k, const fcl_kvcache_problem *p,
                              cl_int kv_flags, cl_int flags) {
  const fcl_kvcache_desc *d = p->d;
  fcl_args a = FCL_ARGS(k);
  append_args(&a, p, kv_flags, flags);
  const int64_t width = d->head_dim > d->head_dim_v ? d->head_dim : d->head_dim_v;
  const size_t g[3] = {(size_t)(width + 63) / 64 * 64, (size_t)d->seqlen_q,
                       (size_t)(d->batch * d->heads_kv)};
  const size_t l[3] = {64, 1, 1};
  return fcl_launch(ctx, k, &a, g, l, "enqueueing the KV-cache append");
}

cl_int fcl_kvcache_flags(const fcl_kvcache_problem *p) {
  const fcl_kvcache_desc *d = p->d;
  cl_long qv[4];
  fcl_tensor_view(p->q, qv);
  const bool q_vec8 = qv[0] % 8 == 0 && qv[1] % 8 == 0 && qv[2] % 8 == 0 && qv[3] % 8 == 0;
  return (q_vec8 ? FCL_KV_Q_VEC8 : 0) | (p->paged ? FCL_KV_PAGED : 0) | (d->cache_batch_idx ? FCL_KV_BATCH_IDX : 0) |
         (p->rotary ? FCL_KV_ROTARY : 0) | (d->rotary_interleaved ? FCL_KV_INTERLEAVED : 0) |
         (p->append ? FCL_KV_APPEND : 0) | (p->fixed_len >= 0 ? FCL_KV_FIXED_LEN : 0) |
         (d->k_scale ? FCL_KV_K_SCALE : 0) | (d->v_scale ? FCL_KV_V_SCALE : 0);
}

/* Splits of the keys: the caller's, or (flash-attn's rule) the fewest
 * that fill at least 85% of the best wave efficiency found, where a wave
 * is WAVES work-groups a compute unit and a split has at least SPLIT_KEYS
 * keys (the kernel lowers the count for short sequences): a last wave
 * left mostly empty costs as much time as a full one. On devices that
 * bound a work-item's loop (llvmpipe) no split walks more than the bound
 * allows. */
/* How full the waves of slots work-groups are that run n work-groups. */
static double wave_fill(int64_t n, double slots) {
  const double waves = (double)n / slots;
  return waves / ceil(waves);
}

/* The splits a tile of keys keys runs when num_splits is n: the kernel
 * gives each split ceil(blocks / n) whole blocks of bn keys (KV_TILE_KEYS),
 * so 14 asked for 16 blocks run as 8 splits of 2. */
static int64_t splits_run(int64_t n, int64_t keys, int64_t bn) {
  const int64_t blocks = (keys + bn - 1) / bn, per = (blocks + n - 1) / n;
  return per > 0 ? (blocks + per - 1) / per : 1;
}

static cl_int split_count(const fcl_context *ctx, const fcl_kv_shape *sh,
                          const fcl_kvcache_problem *p, int64_t groups, int64_t keys,
                          cl_int *min_split_keys) {
  int64_t ns = 1;
  *min_split_keys = 0;
  if (p->d->num_splits > 0) {
    ns = p->d->num_splits;
  } else {
    /* The fewest splits whose waves are within 85% of the fullest; then,
     * where the splits as they run fit in one wave, the most that still
     * do: each work-group's walk is then shorter, and the walks are the
     * time (B1 at 1024 keys: 16 splits of one block, not 8 of two). */
    const double slots = (double)sh->waves * ctx->info.compute_units;
    int64_t most = (keys + sh->split_keys - 1) / sh->split_keys;
    if (most > FCL_KV_MAX_SPLITS) most = FCL_KV_MAX_SPLITS;
    double best = 0.0;
    for (int64_t n = 1; n <= most; ++n) best = fmax(best, wave_fill(groups * n, slots));
    while (ns < most && wave_fill(groups * ns, slots) < 0.85 * best) ++ns;
    if ((double)(groups * splits_run(ns, keys, sh->bn)) <= slots)
      while (ns < most && (double)(groups * splits_run(ns + 1, keys, sh->bn)) <= slots) ++ns;
    ns = splits_run(ns, keys, sh->bn);
    *min_split_keys = sh->split_keys;
  }
  if (ctx->info.loop_budget > 0) { /* ~40 loop iterations a key for each row */
    const int64_t keys_per_walk =
        ctx->info.loop_budget / 2 / (40 * sh->max_rows) / sh->bn * sh->bn;
    const int64_t need = (keys + keys_per_walk - 1) / (keys_per_walk > 0 ? keys_per_walk : 1);
    if (ns < need) ns = need, *min_split_keys = 0;
  }
  return (cl_int)(ns < 1 ? 1 : ns > FCL_KV_MAX_SPLITS ? FCL_KV_MAX_SPLITS : ns);
}

/* With one tile a kv head (all its rows in one work-group), the decode
 * kernel appends the new tokens itself (KV_FUSED_APPEND): one launch. */
int fcl_kvcache_fused_append(int max_rows, const fcl_kvcache_problem *p) {
  return p->append && p->d->heads_q / p->d->heads_kv * p->d->seqlen_q <=
                          fcl_kvcache_tile_rows(max_rows, p->d);
}

int fcl_kvcache_tile_rows(int max_rows, const fcl_kvcache_desc *d) {
  const int rows = next_pow2(d->heads_q / d->heads_kv * d->seqlen_q);
  return rows > max_rows ? max_rows : rows;
}

fcl_status fcl_kvcache_options(fcl_context *ctx, const fcl_tuning_class *cls,
                               const fcl_config *cfg, const fcl_kvcache_problem *p, char *out,
                               size_t size) {
  /* On NVIDIA, where the tensor-core probe found that inline PTX works
   * (not emulated), f16 converts with it and the splits' partial rows go
   * through plain stores and L2 loads (kvcache_tile.cl). */
  bool ptx;
  fcl_status s;
  if ((s = fcl_kvcache_ptx(ctx, &ptx))) return s;
  const decode_params *c = FCL_CPARAMS(decode_params, cfg);
  const fcl_define extra[] = {{"ROWS", fcl_kvcache_tile_rows(c->MAX_ROWS, p->d)},
                              {"VEC", fcl_kvcache_vector_width(p)},
                              {"FCL_UNROLL_HINTS", !ctx->info.is_cpu},
                              {"KV_PTX_CVT", ptx && p->dtype == FCL_F16},
                              {"KV_PART_PTX", ptx},
                              {"KV_K_FMT", (int)p->k_fmt},
                              {"KV_V_FMT", (int)p->v_fmt},
                              {"KV_APPEND_FUSED", fcl_kvcache_fused_append(c->MAX_ROWS, p)}};
  fcl_build_options(cls, cfg, extra, (int)FCL_COUNT(extra),
                    ptx ? fcl_mma_build_options(ctx, FCL_F16) : NULL, out, size);
  return FCL_OK;
}

fcl_status fcl_kvcache_ptx(fcl_context *ctx, bool *ptx) {
  *ptx = false;
  if (!ctx->info.is_nvidia || ctx->info.mma_emulate) return FCL_OK;
  return fcl_mma_ready(ctx, FCL_F16, ptx);
}

fcl_status fcl_kvcache_run(fcl_context *ctx, const fcl_variant *v, const char *options,
                           const fcl_kv_shape *sh, const fcl_kvcache_problem *p) {
  const fcl_kvcache_desc *d = p->d;
  const int64_t rows_all = d->heads_q / d->heads_kv * d->seqlen_q;
  const int64_t tiles = (rows_all + sh->rows - 1) / sh->rows;
  cl_int min_split_keys;
  const cl_int ns = split_count(ctx, sh, p, d->batch * d->heads_kv * tiles,
                                p->fixed_len >= 0 ? p->fixed_len : d->cache_capacity,
                                &min_split_keys);
  const cl_int flags = (p->lse ? FCL_ATTN_LSE : 0) | (d->alibi_slopes ? FCL_ATTN_ALIBI : 0) |
                       (p->varlen ? FCL_ATTN_VARLEN : 0);
  const bool fused = fcl_kvcache_fused_append(sh->max_rows, p);
  const cl_int kv_flags = fcl_kvcache_flags(p) | (fused ? FCL_KV_APPEND_FUSED : 0);
  fcl_status s;

  /* Every kernel and buffer first: on error nothing is enqueued. Split,
   * the kernel merges the splits itself: the zeroed buffer of
   * fcl_counters holds a count of finished splits a tile (kv head, query
   * tile, sequence), left at zero again, then the splits' partial lse and
   * rows, taken back to zero; or those go to scratch where the kernel
   * reads them with PTX (kvcache_tile.cl, KV_PART_PTX). */
  cl_kernel kd, ka = NULL;
  cl_mem counters = p->q->buffer, parts = p->q->buffer;
  bool ptx;
  if ((s = fcl_get_kernel(ctx, v->tops, options, sh->kernel, &kd)) ||
      (p->append && !fused &&
       (s = fcl_get_kernel(ctx, v->tops, options, "fcl_kv_append", &ka))) ||
      (s = fcl_kvcache_ptx(ctx, &ptx)))
    return s;
  if (ns > 1) {
    const size_t counts = fcl_bytes(d->batch, d->heads_kv, tiles, 1, 1);
    const size_t nparts = fcl_bytes(ns, d->batch, d->seqlen_q, d->heads_q, d->head_dim_v + 1);
    const size_t in_counters = ptx ? 0 : nparts;
    if ((s = fcl_counters(ctx, counts > SIZE_MAX - in_counters ? SIZE_MAX : counts + in_counters,
                          &counters)) ||
        (ptx && (s = fcl_scratch(ctx, FCL_SCRATCH_KV_PARTS, fcl_bytes(nparts, 4, 1, 1, 1),
                                 &parts))))
      return s;
  }
  fcl_log(ctx, "kvcache: %s %s rows %d, %d split(s)%s%s", sh->kernel, options, sh->rows, ns,
          min_split_keys ? " (automatic)" : "", fused ? ", the append fused" : "");
  fcl_args ad = FCL_ARGS(kd);
  decode_args(&ad, p, counters, parts, ns, min_split_keys, kv_flags, flags);
  if (ad.err) return fcl_fail_cl(ctx, ad.err, "clSetKernelArg");

  if (ka && (s = fcl_kvcache_append(ctx, ka, p, kv_flags, flags))) return s;
  const size_t g[3] = {(size_t)(ns * d->heads_kv) * sh->wg, (size_t)tiles, (size_t)d->batch};
  const size_t l[3] = {(size_t)sh->wg, 1, 1};
  return fcl_launch(ctx, kd, &ad, g, l, "enqueueing KV-cache attention");
}

fcl_status fcl_kvcache_decode_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                     const void *problem, bool *fallback) {
  const fcl_kvcache_problem *p = problem;
  const decode_params *c = FCL_CPARAMS(decode_params, &pl->cfg);
  char options[512];
  fcl_status s;
  (void)fallback;
  if ((s = fcl_kvcache_options(ctx, &pl->cls, &pl->cfg, p, options, sizeof options))) return s;
  const fcl_kv_shape sh = {"fcl_kv_decode", c->WG, c->WG / c->TPK * c->KPW,
                           fcl_kvcache_tile_rows(c->MAX_ROWS, p->d), c->MAX_ROWS, c->WAVES,
                           c->SPLIT_KEYS};
  return fcl_kvcache_run(ctx, pl->cls.variant, options, &sh, p);
}

/* The forward of few rows against many keys: a KV-cache call on k and v
 * as a full contiguous cache, without cache_seqlens. Its kernel aligns the
 * rows bottom-right: a shifted diagonal runs on the forward's kernels, and
 * so does dropout (an inference kernel has none). */
fcl_status fcl_attention_fwd_decode_applies(fcl_context *ctx, const void *problem,
                                            fcl_fit *fit) {
  const fcl_attention_desc *d = ((const fcl_attention_problem *)problem)->d;
  const int64_t rows = d->seqlen_q * (d->heads_q / d->heads_kv);
  (void)ctx;
  *fit = fcl_fit_if(!d->cu_seqlens_q && !d->cu_seqlens_k && d->diag_shift == 0 &&
                    d->dropout_p == 0.0f && rows <= 16 &&
                    d->seqlen_k >= 256 && d->seqlen_k >= 16 * d->seqlen_q);
  return FCL_OK;
}

void fcl_kvcache_from_forward(const fcl_attention_problem *p, fcl_kvcache_desc *d,
                              fcl_kvcache_problem *kp) {
  const fcl_attention_desc *a = p->d;
  *d = (fcl_kvcache_desc){
      .size = sizeof(fcl_kvcache_desc), .batch = a->batch, .seqlen_q = a->seqlen_q, .heads_q = a->heads_q,
      .heads_kv = a->heads_kv, .head_dim = a->head_dim, .head_dim_v = a->head_dim_v,
      .cache_capacity = a->seqlen_k, .cache_batch = a->batch,
      .softmax_scale = a->softmax_scale, .causal = a->causal, .window_left = a->window_left,
      .window_right = a->window_right, .softcap = a->softcap, .alibi_slopes = a->alibi_slopes};
  *kp = (fcl_kvcache_problem){.d = d, .dtype = p->dtype, .k_fmt = p->dtype,
                              .v_fmt = p->dtype, .q = p->q, .k_cache = p->k,
                              .v_cache = p->v, .o = p->o, .lse = p->lse,
                              .tokens = p->total_q, .lse_len = a->heads_q * p->total_q,
                              .fixed_len = a->seqlen_k, .attn = *a, .sc = p->sc};
}

fcl_status fcl_attention_fwd_decode_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                           const void *problem, bool *fallback) {
  fcl_kvcache_desc d;
  fcl_kvcache_problem kp;
  fcl_kvcache_from_forward(problem, &d, &kp);
  return fcl_kvcache_decode_launch(ctx, pl, &kp, fallback);
}
