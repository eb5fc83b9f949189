/* One fcl_attention_kvcache case on the device, checked against the double
 * reference; see kvcache_harness.h. */
#include "kvcache_harness.h"
#include "kvcache_quant_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_CANARY 0x5Au /* guard bytes around the cache views */
#define FCL_KV_MAX_DIM 512 /* head dims */

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) abort();
  return p;
}

void kv_result_free(kv_result *r) {
  if (!r) return;
  free(r->o);
  free(r->lse);
  memset(r, 0, sizeof *r);
}

kv_opts kv_default_opts(void) {
  kv_opts o = {1, 2, 0, 1};
  return o;
}

fcl_dtype kv_fmt_dtype(kv_fmt f, fcl_dtype dt) {
  static const fcl_dtype formats[] = {FCL_F32, FCL_Q8_0, FCL_Q4_0, FCL_FP8_E4M3, FCL_FP8_E5M2};
  return f == KV_AS_Q ? dt : formats[f];
}

/* ---- shape of a case ------------------------------------------------------- */
typedef struct {
  int64_t  B, HQ, HK, D, DV, total, sq; /* sq: desc.seqlen_q */
  int32_t  c[KV_MAX_SEQS], n[KV_MAX_SEQS], cuq[KV_MAX_SEQS + 1];
  int      append, ragged;
  int64_t  cap, page, pps, num_pages, rows, slots, T; /* T: tokens per slot */
  int32_t *bt;                                        /* [B][pps] */
  int32_t  cbi[KV_MAX_SEQS];
  int      has_cbi;
  int64_t  rd, positions;
} kv_shape;

/* One cache buffer: a view of (slot, token, head, dim) inside guards. Its
 * values come in units of uv values in ub bytes: 1 element (f32, f16, bf16,
 * fp8) or a block (q8_0, q4_0). */
typedef struct {
  cl_mem         m;
  size_t         bytes, off, gd; /* off (the view's start), gd (each guard): values */
  size_t         shift;          /* bytes before value 0 (quantized: kv_case.cache_skew) */
  size_t         view_end;       /* the byte after the view */
  int64_t        st[4], width;
  fcl_dtype      dt;
  int64_t        uv;
  size_t         ub;
  float         *scale; /* [heads_kv]: fp8 scales, else 1 */
  unsigned char *init, *after, *legal; /* legal: bytes of some element of the view */
} kv_cache;

/* The byte at which the unit holding value index v starts. */
static size_t cache_byte(const kv_cache *cb, int64_t v) {
  return cb->shift + (size_t)(v / cb->uv) * cb->ub;
}

static int64_t cache_at(const kv_shape *s, const kv_cache *cb, int64_t b, int64_t pos, int64_t h,
                        int64_t e) {
  int64_t slot, tok;
  if (s->page) {
    slot = s->bt[b * s->pps + pos / s->page];
    tok = pos % s->page;
  } else {
    slot = s->has_cbi ? s->cbi[b] : b;
    tok = pos;
  }
  return (int64_t)cb->off + slot * cb->st[0] + tok * cb->st[1] + h * cb->st[2] + e;
}

static void cache_strides(const kv_case *c, const kv_shape *s, int64_t width, int blocks,
                          int64_t st[4]) {
  /* Gaps; for block formats whole blocks, so a block never straddles. */
  const int64_t pd = c->pad ? (blocks ? 32 : 3) : 0, pt = c->pad ? (blocks ? 64 : 2) : 0,
                ph = c->pad ? (blocks ? 32 : 5) : 0, ps = c->pad ? (blocks ? 96 : 7) : 0;
  st[3] = 1;
  if (c->head_major) {
    st[1] = width + pd;
    st[2] = s->T * st[1] + ph;
    st[0] = s->HK * st[2] + ps;
  } else {
    st[2] = width + pd;
    st[1] = s->HK * st[2] + pt;
    st[0] = s->T * st[1] + ps;
  }
}

/* A cache buffer of dtype dt filled with random values in [-amp, amp]
 * (quantized: kvq_fill_vec's, at the head's scale[h]), guards of canary
 * bytes before and after the view. */
static int cache_create(fcl_context *ctx, const kv_case *c, const kv_shape *s, int64_t width,
                        fcl_dtype dt, const float *scale, double amp, int guard, tu_rng *g,
                        kv_cache *cb) {
  memset(cb, 0, sizeof *cb);
  cb->width = width;
  cb->dt = dt;
  cb->uv = ref_quant_unit_values(dt);
  cb->ub = ref_quant_unit_bytes(dt);
  const int quant = ref_quant_format(dt);
  cb->scale = xcalloc((size_t)s->HK, sizeof *cb->scale);
  for (int64_t h = 0; h < s->HK; ++h) cb->scale[h] = scale ? scale[h] : 1.0f;
  cache_strides(c, s, width, cb->uv > 1, cb->st);
  const int64_t extent = (s->slots - 1) * cb->st[0] + (s->T - 1) * cb->st[1] +
                         (s->HK - 1) * cb->st[2] + width;
  /* Guards of a row and more, a multiple of 16 elements (of 128 for the
   * block formats, 8-byte aligned as 4 blocks): the views stay as aligned
   * as their strides (the library loads 16 bytes at a time from aligned
   * caches, and block rows 8 bytes at a time where all start 8-byte
   * aligned). */
  const size_t al = cb->uv > 1 ? 128 : 16;
  const size_t gd = guard ? ((size_t)cb->st[0] + 13 + al - 1) / al * al : 0;
  cb->gd = cb->off = gd;
  cb->shift = quant ? (size_t)c->cache_skew : 0;
  const size_t elems = gd + (size_t)extent + gd, view_end = cache_byte(cb, (int64_t)gd + extent);
  cb->view_end = view_end;
  cb->bytes = cache_byte(cb, (int64_t)elems);
  cb->init = xcalloc(cb->bytes, 1);
  cb->legal = xcalloc(cb->bytes, 1);
  if (quant) {
    for (size_t i = 0; i < cb->bytes; ++i) cb->init[i] = (unsigned char)tu_rng_int(g, 0, 255);
  } else {
    const size_t es = cb->ub;
    for (size_t i = 0; i < elems; ++i) tu_encode(cb->init + i * es, tu_rng_range(g, -amp, amp), dt);
  }
  memset(cb->init, KV_CANARY, cache_byte(cb, (int64_t)gd));
  memset(cb->init + view_end, KV_CANARY, cb->bytes - view_end);
  for (int64_t sl = 0; sl < s->slots; ++sl)
    for (int64_t t = 0; t < s->T; ++t)
      for (int64_t h = 0; h < s->HK; ++h) {
        const size_t at = cache_byte(cb, (int64_t)cb->off + sl * cb->st[0] + t * cb->st[1] +
                                             h * cb->st[2]);
        memset(cb->legal + at, 1, cache_byte(cb, width));
        if (quant) kvq_fill_vec(dt, cb->init + at, width, cb->scale[h], amp, g);
      }
  cb->m = tu_buffer_from(fcl_context_cl(ctx), fcl_context_queue(ctx), cb->init, cb->bytes);
  return cb->m == NULL;
}

static void cache_free(kv_cache *cb) {
  if (cb->m) clReleaseMemObject(cb->m);
  free(cb->init); free(cb->after); free(cb->legal); free(cb->scale);
  memset(cb, 0, sizeof *cb);
}

static int shape_of(const kv_case *c, kv_shape *s, tu_rng *g) {
  memset(s, 0, sizeof *s);
  s->B = c->b;
  s->HQ = c->hq ? c->hq : 2; s->HK = c->hkv ? c->hkv : 2;
  s->D = c->d ? c->d : 64; s->DV = c->dv ? c->dv : 64;
  s->append = !c->no_append;
  s->ragged = c->ragged;
  if (s->B < 1 || s->B > KV_MAX_SEQS) return 1;
  int64_t longest = 0;
  for (int64_t b = 0; b < s->B; ++b) {
    s->c[b] = c->cached[b];
    s->n[b] = c->ragged ? c->lens[b] : (int32_t)c->sq;
    s->cuq[b + 1] = s->cuq[b] + s->n[b];
    if (s->n[b] > s->sq) s->sq = s->n[b];
    if (s->c[b] + s->n[b] > longest) longest = s->c[b] + s->n[b];
  }
  s->total = s->cuq[s->B];
  s->page = c->page;
  s->cap = c->capacity ? c->capacity : longest + 3;
  if (s->page) s->cap = (s->cap + s->page - 1) / s->page * s->page;
  s->T = s->page ? s->page : s->cap;
  s->rd = c->rot ? (c->rot_dim ? c->rot_dim : s->D) : 0;
  s->positions = longest + 3;
  if (s->page) {
    s->pps = s->cap / s->page;
    int64_t need[KV_MAX_SEQS], used = 0;
    for (int64_t b = 0; b < s->B; ++b) {
      const int64_t toks = s->c[b] + (s->append ? s->n[b] : 0);
      need[b] = (toks + s->page - 1) / s->page;
      used += need[b];
    }
    s->num_pages = used + c->spare_pages;
    if (s->num_pages < 1) s->num_pages = 1;
    s->slots = s->num_pages;
    int32_t *perm = xcalloc((size_t)s->num_pages, sizeof *perm);
    for (int64_t i = 0; i < s->num_pages; ++i) perm[i] = (int32_t)i;
    for (int64_t i = s->num_pages - 1; i > 0; --i) {
      const int64_t j = tu_rng_int(g, 0, i);
      const int32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    s->bt = xcalloc((size_t)(s->B * s->pps), sizeof *s->bt);
    int64_t next = 0;
    for (int64_t b = 0; b < s->B; ++b)
      for (int64_t p = 0; p < s->pps; ++p) /* unused entries: any valid page */
        s->bt[b * s->pps + p] =
            p < need[b] ? perm[next++] : (int32_t)tu_rng_int(g, 0, s->num_pages - 1);
    free(perm);
  } else {
    s->rows = c->cache_batch ? c->cache_batch : s->B;
    s->slots = s->rows;
    s->has_cbi = c->cbi;
    if (c->cbi) {
      int32_t perm[64];
      if (s->rows > 64) return 1;
      for (int64_t i = 0; i < s->rows; ++i) perm[i] = (int32_t)i;
      for (int64_t i = s->rows - 1; i > 0; --i) {
        const int64_t j = tu_rng_int(g, 0, i);
        const int32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
      }
      for (int64_t b = 0; b < s->B; ++b) s->cbi[b] = perm[b];
    }
  }
  return 0;
}

static void describe(const kv_case *c, const kv_shape *s, fcl_dtype dt, char *buf, size_t n) {
  int p = 0;
#define ADD(...)                                                                  \
  do {                                                                            \
    if (p < (int)n) p += snprintf(buf + p, n - (size_t)p, __VA_ARGS__);           \
  } while (0)
  ADD("%-4s %s | b%lld", tu_dtype_name(dt), c->name, (long long)s->B);
  ADD(" new");
  for (int64_t b = 0; b < s->B; ++b) ADD("%s%d", b ? "," : " ", s->n[b]);
  ADD("%s cached", c->ragged ? " (ragged)" : "");
  for (int64_t b = 0; b < s->B; ++b) ADD("%s%d", b ? "," : " ", s->c[b]);
  ADD(" h%lld/%lld d%lld/%lld cap%lld", (long long)s->HQ, (long long)s->HK, (long long)s->D,
      (long long)s->DV, (long long)s->cap);
  if (s->page) ADD(" paged %lld x%lld", (long long)s->page, (long long)s->num_pages);
  else ADD(" rows %lld%s", (long long)s->rows, s->has_cbi ? " idx" : "");
  if (c->head_major) ADD(" head-major");
  if (c->pad) ADD(" padded");
  if (!s->append) ADD(" no-append");
  if (c->rot) ADD(" rot-%s %lld", c->rot == KV_ROT_NEOX ? "neox" : "inter", (long long)s->rd);
  if (c->causal) ADD(" causal");
  if (c->win) ADD(" win(%lld,%lld)", (long long)c->wl, (long long)c->wr);
  if (c->softcap > 0) ADD(" cap%g", c->softcap);
  if (c->alibi) ADD(" alibi");
  if (c->scale != 0) ADD(" scale%g", c->scale);
  if (c->no_lse) ADD(" lse=NULL");
  ADD(" splits%d", c->splits);
  if (c->lq != TU_BSHD) ADD(" %s", tu_layout_name(c->lq));
  if (c->off) ADD(" off%zu", c->off);
  if (c->junk_stride0) ADD(" junk-strides[0]");
  if (c->kfmt || c->vfmt) {
    static const char *const sc[] = {"", " scale/tensor", " scale/tensor (count 0)", " scale/head"};
    ADD(" | K %s V %s%s", tu_dtype_name(kv_fmt_dtype(c->kfmt, dt)),
        tu_dtype_name(kv_fmt_dtype(c->vfmt, dt)), sc[c->scales]);
    if (c->cache_skew) ADD(" skew %lld", (long long)c->cache_skew);
  }
#undef ADD
}

/* ---- the cache after the call ---------------------------------------------- */
/* Allowed error of a stored rotated key element: one ulp of the dtype at
 * its value plus 4 f32 roundings of its two terms (the rotation in f32). */
static double rot_allowed(fcl_dtype dt, double r, double t1, double t2) {
  const int mant = dt == FCL_F32 ? 23 : dt == FCL_F16 ? 10 : 7;
  const double tiny = dt == FCL_F32 ? 0x1p-149 : dt == FCL_F16 ? 0x1p-24 : 0x1p-133;
  return ldexp(fabs(r), -mant) + 0x1p-22 * (fabs(t1) + fabs(t2)) + tiny;
}

/* Checks cb->after against cb->init: every byte not of the appended
 * tokens (mark[] set, per byte; checked elsewhere) is unchanged (strict), or
 * every byte of no element is (!strict: out-of-range runs). */
static int cache_unchanged_elsewhere(const kv_cache *cb, const unsigned char *mark, int strict,
                                     const char *name, char *why, size_t nwhy) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < cb->bytes; ++i) {
    if (mark && mark[i]) continue;
    if (!strict && cb->legal[i]) continue;
    if (cb->after[i] != cb->init[i]) {
      if (!bad) first = i;
      ++bad;
    }
  }
  if (bad) {
    /* Elements (bytes of the block formats) counted from the buffer's start. */
    const size_t unit = cb->uv == 1 ? cb->ub : 1;
    oh_append(why, nwhy, " %s: %zu bytes changed %s (first at %s %zu%s);", name, bad,
              strict ? "outside the appended tokens" : "outside the cache elements",
              unit == 1 && cb->uv > 1 ? "byte" : "element", first / unit,
              first < cache_byte(cb, (int64_t)cb->off)           ? ", guard before the view"
              : first >= cb->view_end                            ? ", guard after the view"
              : cb->legal[first]                                 ? ""
                                                                 : ", a gap between rows");
  }
  return bad != 0;
}

/* Head vector (b, pos, h) of a cache as the bytes buf (init or after) hold
 * it, dequantized for the KV-cache formats. */
static void cache_read_vec(const kv_shape *s, const kv_cache *cb, const unsigned char *buf,
                           int64_t b, int64_t pos, int64_t h, double *out) {
  const int64_t at = cache_at(s, cb, b, pos, h, 0);
  if (ref_quant_format(cb->dt)) {
    float y[FCL_KV_MAX_DIM];
    ref_dequantize_vec(cb->dt, buf + cache_byte(cb, at), cb->width, cb->scale[h], y);
    for (int64_t e = 0; e < cb->width; ++e) out[e] = y[e];
  } else {
    for (int64_t e = 0; e < cb->width; ++e) out[e] = tu_decode(buf + cache_byte(cb, at + e), cb->dt);
  }
}

/* ---- the run ----------------------------------------------------------------- */
/* o and lse against one reference; returns 1 when both pass. */
static int compare_ref(const double *o, const double *l, const double *o_ref, const double *l_ref,
                       size_t n_o, size_t n_l, tu_tol tol_o, tu_tol tol_l, int with_lse,
                       tu_cmp *co, tu_cmp *cl) {
  *co = tu_compare(o, o_ref, n_o, tol_o, 0);
  memset(cl, 0, sizeof *cl);
  cl->ok = 1;
  if (with_lse) *cl = tu_compare(l, l_ref, n_l, tol_l, 1);
  return co->ok && cl->ok;
}

int kv_case_run(fcl_context *ctx, const kv_case *c, fcl_dtype dt, uint64_t seed,
                const kv_opts *opts_in, const kv_corrupt *corrupt, kv_result *res,
                kv_stats *st) {
  const double t0 = tu_now();
  const kv_opts opts = opts_in ? *opts_in : kv_default_opts();
  const int bad_run = corrupt && corrupt->kind != KV_OK;
  char text[640], why[2048] = "", notes[512] = "";
  tu_rng g;
  tu_rng_seed(&g, seed);
  kv_shape s;
  if (shape_of(c, &s, &g)) {
    printf("FAIL %s: bad case\n", c->name);
    if (st) { ++st->run; ++st->failed; }
    return 0;
  }
  describe(c, &s, dt, text, sizeof text);
  if (bad_run) {
    static const char *const kinds[] = {"", "cache_seqlens", "block_table", "cache_batch_idx",
                                        "cu_seqlens_q"};
    const size_t len = strlen(text);
    snprintf(text + len, sizeof text - len, " | %s[%lld] = %d", kinds[corrupt->kind],
             (long long)corrupt->index, (int)corrupt->value);
  }
  cl_context clc = fcl_context_cl(ctx);
  cl_command_queue queue = fcl_context_queue(ctx);
  const int64_t B = s.B, HQ = s.HQ, HK = s.HK, D = s.D, DV = s.DV, TN = s.total;
  const int with_lse = !c->no_lse;
  int ok = 1;

  /* Host inputs, rounded to the dtype. */
  const size_t nq = (size_t)(TN * HQ * D), nk = (size_t)(TN * HK * D), nv = (size_t)(TN * HK * DV),
               no = (size_t)(TN * HQ * DV);
  const size_t nl = (size_t)(c->ragged ? HQ * TN : B * HQ * s.sq);
  double *q = xcalloc(nq + 1, 8), *kn = xcalloc(nk + 1, 8), *vn = xcalloc(nv + 1, 8);
  tu_fill_uniform(&g, q, nq, -2.5, 2.5);
  tu_fill_uniform(&g, kn, nk, -2.5, 2.5);
  tu_fill_uniform(&g, vn, nv, -1.0, 1.0);
  tu_round_array(q, nq, dt);
  tu_round_array(kn, nk, dt);
  tu_round_array(vn, nv, dt);
  double slopes[64];
  for (int64_t h = 0; h < HQ && h < 64; ++h)
    slopes[h] = (float)pow(2.0, -8.0 * (double)(h + 1) / (double)HQ);
  const int64_t half = s.rd / 2;
  float *cosf_ = NULL, *sinf_ = NULL;
  double *cosd = NULL, *sind = NULL;
  if (c->rot) {
    const size_t nr = (size_t)(s.positions * half);
    cosf_ = xcalloc(nr, 4); sinf_ = xcalloc(nr, 4);
    cosd = xcalloc(nr, 8); sind = xcalloc(nr, 8);
    for (int64_t p = 0; p < s.positions; ++p)
      for (int64_t j = 0; j < half; ++j) {
        const double ang = (double)p * pow(10000.0, -2.0 * (double)j / (double)s.rd);
        cosf_[p * half + j] = (float)cos(ang);
        sinf_[p * half + j] = (float)sin(ang);
        cosd[p * half + j] = cosf_[p * half + j];
        sind[p * half + j] = sinf_[p * half + j];
      }
  }

  /* The caches' formats, and the fp8 scales (one a tensor: every head's). */
  const fcl_dtype kdt = kv_fmt_dtype(c->kfmt, dt), vdt = kv_fmt_dtype(c->vfmt, dt);
  const int kfp8 = kdt == FCL_FP8_E4M3 || kdt == FCL_FP8_E5M2,
            vfp8 = vdt == FCL_FP8_E4M3 || vdt == FCL_FP8_E5M2;
  const int scaled = c->scales != KV_SCALE_NONE && (kfp8 || vfp8);
  const int64_t n_sc = c->scales == KV_SCALE_HEAD ? HK : 1;
  float *ksc = xcalloc((size_t)HK, 4), *vsc = xcalloc((size_t)HK, 4);
  for (int64_t h = 0; h < HK; ++h) {
    ksc[h] = scaled && h < n_sc ? kvq_pick_scale(kdt, 2.5, &g) : scaled ? ksc[0] : 1.0f;
    vsc[h] = scaled && h < n_sc ? kvq_pick_scale(vdt, 1.0, &g) : scaled ? vsc[0] : 1.0f;
  }

  /* Device buffers. */
  kv_cache kc, vc;
  int fail_setup = cache_create(ctx, c, &s, D, kdt, ksc, 2.5, opts.guard, &g, &kc);
  fail_setup |= cache_create(ctx, c, &s, DV, vdt, vsc, 1.0, opts.guard, &g, &vc);
  cl_mem bks = scaled && kfp8 ? tu_buffer_from(clc, queue, ksc, (size_t)n_sc * 4) : NULL;
  cl_mem bvs = scaled && vfp8 ? tu_buffer_from(clc, queue, vsc, (size_t)n_sc * 4) : NULL;
  fail_setup |= (scaled && kfp8 && !bks) || (scaled && vfp8 && !bvs);
  const int64_t tb = c->ragged ? 1 : B, ts = c->ragged ? TN : s.sq;
  const size_t off = c->off;
  const size_t in_tail = opts.guard && (off || (c->lq != TU_BSHD && c->lq != TU_BHSD)) ? 7 : 0;
  tu_tensor tq, tkn, tvn, to;
  cl_mem extra_ob[KV_MAX_CALLS] = {NULL}, extra_lb[KV_MAX_CALLS] = {NULL};
  memset(&tkn, 0, sizeof tkn);
  memset(&tvn, 0, sizeof tvn);
  fail_setup |= tu_tensor_create(clc, queue, q, tb, ts, HQ, D, dt, c->lq, off, in_tail, &tq);
  if (s.append) {
    fail_setup |= tu_tensor_create(clc, queue, kn, tb, ts, HK, D, dt, c->lq, off ? off + 1 : 0,
                                   in_tail, &tkn);
    fail_setup |= tu_tensor_create(clc, queue, vn, tb, ts, HK, DV, dt, c->lq, off ? off + 2 : 0,
                                   in_tail, &tvn);
  }
  fail_setup |= tu_tensor_create(clc, queue, NULL, tb, ts, HQ, DV, dt, c->lq, off ? off + 3 : 0,
                                 opts.guard ? (size_t)(HQ * DV) + 7 : 0, &to);
  const size_t lse_tail = opts.guard ? 16 : 0, lse_bytes = nl * 4 + lse_tail;
  cl_mem lse = with_lse ? tu_buffer_poison(clc, queue, lse_bytes) : NULL;
  int32_t seqlens_dev[KV_MAX_SEQS], cbi_dev[KV_MAX_SEQS], cuq_dev[KV_MAX_SEQS + 1];
  memcpy(seqlens_dev, s.c, sizeof seqlens_dev);
  memcpy(cbi_dev, s.cbi, sizeof cbi_dev);
  memcpy(cuq_dev, s.cuq, sizeof cuq_dev);
  int32_t *bt_dev = s.page ? xcalloc((size_t)(B * s.pps), 4) : NULL;
  if (bt_dev) memcpy(bt_dev, s.bt, (size_t)(B * s.pps) * 4);
  if (bad_run) {
    int32_t *tgt = corrupt->kind == KV_BAD_SEQLEN ? seqlens_dev
                   : corrupt->kind == KV_BAD_BLOCK ? bt_dev
                   : corrupt->kind == KV_BAD_CBI   ? cbi_dev
                                                   : cuq_dev;
    if (tgt) tgt[corrupt->index] = corrupt->value;
  }
  cl_mem bseq = tu_buffer_from(clc, queue, seqlens_dev, (size_t)B * 4);
  cl_mem bbt = s.page ? tu_buffer_from(clc, queue, bt_dev, (size_t)(B * s.pps) * 4) : NULL;
  cl_mem bcbi = s.has_cbi ? tu_buffer_from(clc, queue, cbi_dev, (size_t)B * 4) : NULL;
  cl_mem bcuq = c->ragged ? tu_buffer_from(clc, queue, cuq_dev, (size_t)(B + 1) * 4) : NULL;
  cl_mem bcos = c->rot ? tu_buffer_from(clc, queue, cosf_, (size_t)(s.positions * half) * 4) : NULL;
  cl_mem bsin = c->rot ? tu_buffer_from(clc, queue, sinf_, (size_t)(s.positions * half) * 4) : NULL;
  float slopes_f[64];
  for (int64_t h = 0; h < HQ && h < 64; ++h) slopes_f[h] = (float)slopes[h];
  cl_mem balibi = c->alibi ? tu_buffer_from(clc, queue, slopes_f, (size_t)HQ * 4) : NULL;
  if (fail_setup || (with_lse && !lse) || !bseq || (s.page && !bbt) || (s.has_cbi && !bcbi) ||
      (c->ragged && !bcuq) || (c->rot && (!bcos || !bsin)) || (c->alibi && !balibi)) {
    oh_append(why, sizeof why, " could not create buffers;");
    ok = 0;
    goto done;
  }
  if (c->junk_stride0 && c->ragged) /* indexed by token: strides[0] is not used */
    tq.t.strides[0] = tkn.t.strides[0] = tvn.t.strides[0] = to.t.strides[0] = (int64_t)1 << 30;
  oh_watch w[14];
  int nw = 0;
  oh_watch_add(ctx, w, &nw, tq.buffer, "q");
  oh_watch_add(ctx, w, &nw, tkn.buffer, "k_new");
  oh_watch_add(ctx, w, &nw, tvn.buffer, "v_new");
  oh_watch_add(ctx, w, &nw, bseq, "cache_seqlens");
  oh_watch_add(ctx, w, &nw, bbt, "block_table");
  oh_watch_add(ctx, w, &nw, bcbi, "cache_batch_idx");
  oh_watch_add(ctx, w, &nw, bcuq, "cu_seqlens_q");
  oh_watch_add(ctx, w, &nw, bcos, "rotary_cos");
  oh_watch_add(ctx, w, &nw, bsin, "rotary_sin");
  oh_watch_add(ctx, w, &nw, balibi, "alibi_slopes");
  oh_watch_add(ctx, w, &nw, bks, "k_scale");
  oh_watch_add(ctx, w, &nw, bvs, "v_scale");

  fcl_kvcache_desc kd = FCL_KVCACHE_DESC_INIT;
  kd.batch = B; kd.seqlen_q = s.sq;
  kd.heads_q = HQ; kd.heads_kv = HK; kd.head_dim = D; kd.head_dim_v = DV;
  kd.cache_capacity = s.cap;
  kd.page_size = s.page;
  kd.num_pages = s.page ? s.num_pages : 0;
  kd.cache_batch = s.page ? 0 : c->cache_batch;
  kd.softmax_scale = c->scale;
  kd.causal = c->causal;
  kd.window_left = c->win ? c->wl : -1;
  kd.window_right = c->win ? c->wr : -1;
  kd.softcap = c->softcap;
  kd.alibi_slopes = balibi;
  kd.cache_seqlens = bseq;
  kd.cache_batch_idx = bcbi;
  kd.block_table = bbt;
  kd.cu_seqlens_q = bcuq;
  kd.rotary_cos = bcos; kd.rotary_sin = bsin;
  kd.rotary_dim = s.rd; kd.rotary_positions = c->rot ? s.positions : 0;
  kd.rotary_interleaved = c->rot == KV_ROT_INTERLEAVED;
  kd.num_splits = c->splits;
  kd.k_scale = bks; kd.v_scale = bvs;
  kd.scale_count = scaled && c->scales != KV_SCALE_TENSOR0 ? n_sc : 0;
  fcl_tensor tkc, tvc;
  memset(&tkc, 0, sizeof tkc);
  tkc.buffer = kc.m; tkc.offset = cache_byte(&kc, (int64_t)kc.off); tkc.dtype = kdt;
  memcpy(tkc.strides, kc.st, sizeof kc.st);
  tvc = tkc;
  tvc.buffer = vc.m; tvc.offset = cache_byte(&vc, (int64_t)vc.off); tvc.dtype = vdt;
  memcpy(tvc.strides, vc.st, sizeof vc.st);

  /* The runs. */
  unsigned char *o_first = NULL, *l_first = NULL, *k_first = NULL, *v_first = NULL;
  double *o = xcalloc(no + 1, 8), *l = xcalloc(nl + 1, 8);
  const int runs = bad_run ? 1 : (opts.runs > 1 ? opts.runs : 1);
  /* With calls > 1, the extra calls' o and lse: buffers like to's and
   * lse's, poison outside the views too. */
  const int n_extra = bad_run || opts.calls <= 1          ? 0
                      : opts.calls > KV_MAX_CALLS ? KV_MAX_CALLS - 1
                                                  : opts.calls - 1;
  fcl_tensor extra_o[KV_MAX_CALLS];
  for (int i = 0; i < n_extra && ok; ++i) {
    extra_ob[i] = tu_buffer_poison(clc, queue, to.bytes);
    extra_lb[i] = lse ? tu_buffer_poison(clc, queue, lse_bytes) : NULL;
    extra_o[i] = to.t;
    extra_o[i].buffer = extra_ob[i];
    if (!extra_ob[i] || (lse && !extra_lb[i])) {
      oh_append(why, sizeof why, " could not create buffers;");
      ok = 0;
    }
  }
  for (int run = 0; run < runs && ok; ++run) {
    if (run) {
      tu_buffer_repoison(queue, to.buffer, to.bytes);
      if (lse) tu_buffer_repoison(queue, lse, lse_bytes);
      for (int i = 0; i < n_extra; ++i) {
        tu_buffer_repoison(queue, extra_ob[i], to.bytes);
        if (lse) tu_buffer_repoison(queue, extra_lb[i], lse_bytes);
      }
    }
    /* The extra calls first, the checked one last: no wait between them. */
    fcl_status stt = FCL_OK;
    for (int i = 0; i <= n_extra && stt == FCL_OK; ++i)
      stt = fcl_attention_kvcache(ctx, &kd, &tq.t, &tkc, &tvc, s.append ? &tkn.t : NULL,
                                  s.append ? &tvn.t : NULL, i < n_extra ? &extra_o[i] : &to.t,
                                  i < n_extra ? extra_lb[i] : lse);
    if (stt != FCL_OK) {
      oh_append(why, sizeof why, " run %d: %s: %s;", run + 1, fcl_status_string(stt),
                fcl_context_last_error(ctx));
      ok = 0;
      break;
    }
    if (tu_cl_check(clFinish(queue), "clFinish")) {
      oh_append(why, sizeof why, " run %d: clFinish failed;", run + 1);
      ok = 0;
      break;
    }
    unsigned char *ob = oh_read_all(ctx, to.buffer, to.bytes);
    unsigned char *lb = lse ? oh_read_all(ctx, lse, lse_bytes) : NULL;
    unsigned char *kb = oh_read_all(ctx, kc.m, kc.bytes), *vb = oh_read_all(ctx, vc.m, vc.bytes);
    if (!ob || (lse && !lb) || !kb || !vb) {
      oh_append(why, sizeof why, " reading results failed;");
      ok = 0;
      free(ob); free(lb); free(kb); free(vb);
      break;
    }
    for (int i = 0; i < n_extra && ok; ++i) {
      unsigned char *eo = oh_read_all(ctx, extra_ob[i], to.bytes);
      unsigned char *el = lse ? oh_read_all(ctx, extra_lb[i], lse_bytes) : NULL;
      if (!eo || (lse && !el) || memcmp(eo, ob, to.bytes) || (lse && memcmp(el, lb, lse_bytes))) {
        oh_append(why, sizeof why, " run %d: back-to-back call %d of %d differs from the last;",
                  run + 1, i + 1, n_extra + 1);
        ok = 0;
      }
      free(eo); free(el);
    }
    if (run == 0) {
      o_first = ob; l_first = lb; k_first = kb; v_first = vb;
      size_t first = 0;
      const long bad = tu_tensor_read(queue, &to, o, &first);
      if (bad)
        oh_append(why, sizeof why, " o: %ld bytes outside the view written (first at byte %zu);",
                  bad, first);
      if (bad) ok = 0;
      if (lse) {
        size_t tail_bad = 0;
        for (size_t i = 0; i < nl; ++i) {
          float f;
          memcpy(&f, lb + 4 * i, 4);
          l[i] = f;
        }
        for (size_t i = nl * 4; i < lse_bytes; ++i) tail_bad += lb[i] != TU_POISON_BYTE;
        if (tail_bad) {
          oh_append(why, sizeof why, " lse: %zu bytes past its end written;", tail_bad);
          ok = 0;
        }
      }
      kc.after = xcalloc(kc.bytes, 1);
      vc.after = xcalloc(vc.bytes, 1);
      memcpy(kc.after, kb, kc.bytes);
      memcpy(vc.after, vb, vc.bytes);
    } else {
      const char *diff = memcmp(ob, o_first, to.bytes)                   ? "o"
                         : lse && memcmp(lb, l_first, lse_bytes)          ? "lse"
                         : memcmp(kb, k_first, kc.bytes)                  ? "k_cache"
                         : memcmp(vb, v_first, vc.bytes)                  ? "v_cache"
                                                                          : NULL;
      if (diff) {
        oh_append(why, sizeof why, " %s differs between two runs (not deterministic);", diff);
        ok = 0;
      }
      free(ob); free(lb); free(kb); free(vb);
    }
  }
  free(o_first); free(l_first); free(k_first); free(v_first);
  if (n_extra) oh_append(notes, sizeof notes, " %d calls back to back,", n_extra + 1);
  ok &= !oh_watch_changed(ctx, w, nw, why, sizeof why);

  if (ok && bad_run) {
    ok &= !cache_unchanged_elsewhere(&kc, NULL, 0, "k_cache", why, sizeof why);
    ok &= !cache_unchanged_elsewhere(&vc, NULL, 0, "v_cache", why, sizeof why);
  } else if (ok) {
    /* The appended tokens in the caches (marks: their bytes). */
    unsigned char *kmark = xcalloc(kc.bytes, 1), *vmark = xcalloc(vc.bytes, 1);
    double *k_stored = xcalloc(nk + 1, 8), *v_stored = xcalloc(nv + 1, 8);
    const int kq = ref_quant_format(kdt), vq = ref_quant_format(vdt);
    kvq_stats kst = {0, 0, 0}, vst = {0, 0, 0};
    size_t k_bad = 0, v_bad = 0;
    double k_worst = 0.0;
    ref_kvcache_problem rp;
    memset(&rp, 0, sizeof rp);
    rp.batch = B; rp.heads_q = HQ; rp.heads_kv = HK; rp.head_dim = D; rp.head_dim_v = DV;
    rp.softmax_scale = c->scale; rp.causal = c->causal;
    rp.window_left = c->win ? c->wl : -1;
    rp.window_right = c->win ? c->wr : -1;
    rp.softcap = c->softcap;
    rp.alibi_slopes = c->alibi ? slopes : NULL;
    rp.cache_seqlens = s.c; rp.new_lens = s.n; rp.append = s.append;
    rp.lse_varlen = c->ragged; rp.seqlen_q = s.sq;
    rp.rotary_cos = cosd; rp.rotary_sin = sind;
    rp.rotary_dim = s.rd; rp.rotary_positions = s.positions;
    rp.rotary_interleaved = c->rot == KV_ROT_INTERLEAVED;
    if (s.append) {
      for (int64_t b = 0, t = 0; b < B; ++b)
        for (int64_t i = 0; i < s.n[b]; ++i, ++t)
          for (int64_t h = 0; h < HK; ++h) {
            const double *kr = kn + (t * HK + h) * D;
            const double *cs = cosd ? cosd + (s.c[b] + i) * half : NULL;
            const double *sn = sind ? sind + (s.c[b] + i) * half : NULL;
            const int64_t pos = s.c[b] + i;
            if (kq) { /* the f32 values the append quantized, within err of x */
              double x[FCL_KV_MAX_DIM], err[FCL_KV_MAX_DIM];
              for (int64_t e = 0; e < D; ++e) {
                x[e] = kr[e], err[e] = 0.0;
                if (e >= s.rd) continue;
                int64_t partner, j;
                double sign;
                ref_kvcache_rotary_pair(&rp, e, &partner, &j, &sign);
                const double t1 = kr[e] * cs[j], t2 = sign * kr[partner] * sn[j];
                x[e] = t1 + t2;
                err[e] = 0x1p-22 * (fabs(t1) + fabs(t2)) + 0x1p-149;
              }
              const size_t at = cache_byte(&kc, cache_at(&s, &kc, b, pos, h, 0));
              memset(kmark + at, 1, cache_byte(&kc, D));
              k_bad += kvq_check_vec(kdt, kc.after + at, x, err, D, kc.scale[h], &kst);
              cache_read_vec(&s, &kc, kc.after, b, pos, h, k_stored + (t * HK + h) * D);
            }
            for (int64_t e = 0; e < D && !kq; ++e) {
              const int64_t at = cache_at(&s, &kc, b, pos, h, e);
              const size_t es = kc.ub;
              memset(kmark + cache_byte(&kc, at), 1, es);
              const double got = tu_decode(kc.after + (size_t)at * es, dt);
              k_stored[(t * HK + h) * D + e] = got;
              if (e >= s.rd) {
                unsigned char want[4];
                tu_encode(want, kr[e], dt);
                k_bad += memcmp(want, kc.after + (size_t)at * es, es) != 0;
                continue;
              }
              int64_t partner, j;
              double sign;
              ref_kvcache_rotary_pair(&rp, e, &partner, &j, &sign);
              const double t1 = kr[e] * cs[j], t2 = sign * kr[partner] * sn[j];
              const double err = fabs(got - (t1 + t2)), allowed = rot_allowed(dt, t1 + t2, t1, t2);
              if (!(err <= allowed)) ++k_bad;
              if (err / allowed > k_worst) k_worst = err / allowed;
            }
            if (vq) { /* exactly ref_quant's bytes */
              double x[FCL_KV_MAX_DIM], err[FCL_KV_MAX_DIM];
              for (int64_t e = 0; e < DV; ++e) x[e] = vn[(t * HK + h) * DV + e], err[e] = 0.0;
              const size_t at = cache_byte(&vc, cache_at(&s, &vc, b, pos, h, 0));
              memset(vmark + at, 1, cache_byte(&vc, DV));
              v_bad += kvq_check_vec(vdt, vc.after + at, x, err, DV, vc.scale[h], &vst);
              cache_read_vec(&s, &vc, vc.after, b, pos, h, v_stored + (t * HK + h) * DV);
            }
            for (int64_t e = 0; e < DV && !vq; ++e) {
              const int64_t at = cache_at(&s, &vc, b, pos, h, e);
              const size_t es = vc.ub;
              memset(vmark + cache_byte(&vc, at), 1, es);
              unsigned char want[4];
              tu_encode(want, vn[(t * HK + h) * DV + e], dt);
              v_bad += memcmp(want, vc.after + (size_t)at * es, es) != 0;
              v_stored[(t * HK + h) * DV + e] = vn[(t * HK + h) * DV + e];
            }
          }
      if (k_bad || v_bad) {
        oh_append(why, sizeof why, " appended tokens wrong in the cache: %zu of k, %zu of v%s;",
                  k_bad, v_bad, kq || vq ? " (blocks or fp8 values where quantized)" : "");
        ok = 0;
      }
      if (c->rot && !kq)
        oh_append(notes, sizeof notes, " k rot err %.0f%% of 1 ulp", 100.0 * k_worst);
      if (c->rot && kq)
        oh_append(notes, sizeof notes, " k rot: %zu of %zu units not those of the exact rotation",
                  kst.inexact, kst.units);
    }
    ok &= !cache_unchanged_elsewhere(&kc, kmark, 1, "k_cache", why, sizeof why);
    ok &= !cache_unchanged_elsewhere(&vc, vmark, 1, "v_cache", why, sizeof why);

    /* The reference, from the cache as it was before the call and the
     * appended keys the cache now holds. */
    const int64_t TC = ref_kvcache_total_cached(&rp);
    double *kcd = xcalloc((size_t)(TC * HK * D) + 1, 8);
    double *vcd = xcalloc((size_t)(TC * HK * DV) + 1, 8);
    double vmax = 0.0;
    for (int64_t b = 0, t = 0; b < B; ++b)
      for (int64_t pos = 0; pos < s.c[b]; ++pos, ++t)
        for (int64_t h = 0; h < HK; ++h) {
          cache_read_vec(&s, &kc, kc.init, b, pos, h, kcd + (t * HK + h) * D);
          cache_read_vec(&s, &vc, vc.init, b, pos, h, vcd + (t * HK + h) * DV);
          for (int64_t e = 0; e < DV; ++e) vmax = fmax(vmax, fabs(vcd[(t * HK + h) * DV + e]));
        }
    if (s.append)
      for (size_t i = 0; i < nv; ++i) vmax = fmax(vmax, fabs(v_stored[i]));
    double *qr = xcalloc(nq + 1, 8), *o_ref = xcalloc(no + 1, 8), *l_ref = xcalloc(nl + 1, 8);
    ref_kvcache_rotate_new(&rp, q, HQ, qr);
    double bound = ref_kvcache_forward(&rp, qr, kcd, vcd, k_stored, v_stored, o_ref, l_ref);
    tu_tol tol_o = tu_tol_with_logits(tu_tol_output(dt), bound, D, vmax);
    tu_tol tol_l = tu_tol_with_logits(tu_tol_lse(), bound, D, 0.0);
    tu_cmp co, cl;
    int match = compare_ref(o, l, o_ref, l_ref, no, nl, tol_o, tol_l, with_lse, &co, &cl);
    /* The other readings the contract allows: the rotated q rounded to the
     * dtype (bit 0), a quantized cache's dequantized values rounded to the
     * dtype, as the tensor-core and chunked-prefill paths take them (bit 1).
     * The one that matches, the closest where several do. */
    int which = 0;
    const int readings = (c->rot ? 1 : 0) | (kq || vq ? 2 : 0);
    for (int r = 1; r <= 3; ++r) {
      if ((r & readings) != r) continue;
      double *q2 = xcalloc(nq + 1, 8), *o2 = xcalloc(no + 1, 8), *l2 = xcalloc(nl + 1, 8);
      double *k2 = NULL, *v2 = NULL, *ks2 = NULL, *vs2 = NULL;
      memcpy(q2, qr, sizeof(double) * nq);
      if (r & 1) tu_round_array(q2, nq, dt);
      const double *kk = kcd, *vv = vcd, *kst2 = k_stored, *vst2 = v_stored;
      if (r & 2) {
        const size_t nkc = (size_t)(TC * HK * D), nvc = (size_t)(TC * HK * DV);
        k2 = xcalloc(nkc + 1, 8), v2 = xcalloc(nvc + 1, 8);
        memcpy(k2, kcd, sizeof(double) * nkc), memcpy(v2, vcd, sizeof(double) * nvc);
        tu_round_array(k2, nkc, dt), tu_round_array(v2, nvc, dt);
        kk = k2, vv = v2;
        if (s.append) {
          ks2 = xcalloc(nk + 1, 8), vs2 = xcalloc(nv + 1, 8);
          memcpy(ks2, k_stored, sizeof(double) * nk), memcpy(vs2, v_stored, sizeof(double) * nv);
          tu_round_array(ks2, nk, dt), tu_round_array(vs2, nv, dt);
          kst2 = ks2, vst2 = vs2;
        }
      }
      const double bound2 = ref_kvcache_forward(&rp, q2, kk, vv, kst2, vst2, o2, l2);
      const tu_tol to2 = tu_tol_with_logits(tu_tol_output(dt), bound2, D, vmax);
      const tu_tol tl2 = tu_tol_with_logits(tu_tol_lse(), bound2, D, 0.0);
      tu_cmp co2, cl2;
      const int match2 = compare_ref(o, l, o2, l2, no, nl, to2, tl2, with_lse, &co2, &cl2);
      if (match2 && (!match || fmax(co2.worst_ratio, cl2.worst_ratio) <
                                   fmax(co.worst_ratio, cl.worst_ratio))) {
        match = 1; which = r;
        co = co2; cl = cl2; tol_o = to2; tol_l = tl2; bound = bound2;
        memcpy(o_ref, o2, sizeof(double) * no);
        memcpy(l_ref, l2, sizeof(double) * nl);
      }
      free(q2); free(o2); free(l2); free(k2); free(v2); free(ks2); free(vs2);
    }
    const int64_t odims[4] = {tb, ts, HQ, DV};
    const int64_t ldims[3] = {c->ragged ? 1 : B, HQ, c->ragged ? TN : s.sq};
    if (!co.ok) {
      oh_append(why, sizeof why, " o mismatch;");
      tu_print_cmp("o", &co, odims, 4);
    }
    if (!cl.ok) {
      oh_append(why, sizeof why, " lse mismatch;");
      tu_print_cmp("lse", &cl, ldims, 3);
    }
    ok &= match;
    /* Rows that see no key: exactly 0 (their lse -inf is compared above). */
    size_t empty = 0, nonzero = 0;
    for (int64_t b = 0, t = 0; b < B; ++b)
      for (int64_t i = 0; i < s.n[b]; ++i, ++t)
        for (int64_t h = 0; h < HQ; ++h) {
          const size_t at = c->ragged ? (size_t)(h * TN + t) : (size_t)((b * HQ + h) * s.sq + i);
          if (l_ref[at] != -INFINITY) continue;
          ++empty;
          for (int64_t e = 0; e < DV; ++e)
            if (o[(t * HQ + h) * DV + e] != 0.0) {
              ++nonzero;
              break;
            }
        }
    if (nonzero) {
      oh_append(why, sizeof why, " %zu of %zu rows that see no key are not 0;", nonzero, empty);
      ok = 0;
    }
    oh_append(notes, sizeof notes, " o err %.2e (%.0f%% of tol; |s|<=%.3g)", co.max_err,
              100.0 * co.worst_ratio, bound);
    if (with_lse) oh_append(notes, sizeof notes, " lse err %.2e (%.0f%%)", cl.max_err,
                            100.0 * cl.worst_ratio);
    if (empty) oh_append(notes, sizeof notes, " empty rows %zu", empty);
    if (c->rot && match) {
      oh_append(notes, sizeof notes, " q-rot %s", which & 1 ? "rounded" : "exact");
      if (st && ok) {
        if (which & 1) ++st->q_rounded;
        else ++st->q_exact;
      }
    }
    if ((kq || vq) && match)
      oh_append(notes, sizeof notes, " cache %s", which & 2 ? "rounded to the dtype" : "exact");
    if (res) {
      res->o = xcalloc(no + 1, 8);
      res->lse = xcalloc(nl + 1, 8);
      memcpy(res->o, o, sizeof(double) * no);
      memcpy(res->lse, l, sizeof(double) * nl);
      res->n_o = no; res->n_lse = with_lse ? nl : 0;
      res->tol_o = tol_o; res->tol_l = tol_l;
      res->read = 1;
    }
    free(kmark); free(vmark); free(k_stored); free(v_stored); free(kcd); free(vcd);
    free(qr); free(o_ref); free(l_ref);
  }
  free(o); free(l);

done:
  if (!ok || !opts.quiet)
    printf("%s %s |%s%s | %.2f s\n", ok ? "PASS" : "FAIL", text, why, notes, tu_now() - t0);
  fflush(stdout);
  if (st) {
    ++st->run;
    st->failed += !ok;
  }
  cache_free(&kc); cache_free(&vc);
  tu_tensor_release(&tq); tu_tensor_release(&tkn); tu_tensor_release(&tvn);
  tu_tensor_release(&to);
  for (int i = 0; i < KV_MAX_CALLS; ++i) {
    if (extra_ob[i]) clReleaseMemObject(extra_ob[i]);
    if (extra_lb[i]) clReleaseMemObject(extra_lb[i]);
  }
  cl_mem bufs[] = {lse, bseq, bbt, bcbi, bcuq, bcos, bsin, balibi, bks, bvs};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i)
    if (bufs[i]) clReleaseMemObject(bufs[i]);
  free(q); free(kn); free(vn); free(cosf_); free(sinf_); free(cosd); free(sind);
  free(ksc); free(vsc);
  free(s.bt); free(bt_dev);
  return ok;
}
