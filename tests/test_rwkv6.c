/* fcl_rwkv6_forward and fcl_rwkv6_backward against the double reference
 * (ref_rwkv6.c) on $FCL_DEVICE, for the fused-recurrent and the chunked
 * algorithm and AUTO: T = 1, odd and long T (many chunks), reverse, varlen
 * (with zero-length and length-1 sequences, all sequences empty, seqlen above
 * the longest), every combination of h0 / ht / dht / dh0 being NULL,
 * K != V up to 256, weak (w = -exp(N(-3, 1))), strong (U[-25, -5]), mixed
 * (near 0 and U[-40, -15]), extreme mixed (near 0 and U[-1e4, -1e3]) and zero
 * decays, every dtype, several layouts with offsets, a custom scale. Inputs
 * are rounded to the dtype before the reference sees them. Each run also
 * checks that bytes outside every output view (and past every output
 * buffer's end) stay poison, that two backward runs are bit-identical (for
 * the recurrent and chunked settings; AUTO runs once) and that the inputs
 * are untouched. Then bad inputs: each must return FCL_ERROR_INVALID_ARGUMENT
 * (or UNSUPPORTED where documented), name the argument in
 * fcl_context_last_error() and leave every output buffer untouched.
 *
 * Tolerances: |got - ref| <= tol * max|ref| per tensor, tol = 1e-4 for f32
 * (and for the f32 states ht, dh0 in every dtype), 3e-3 for f16, 2e-2 for
 * bf16; NaN never passes.
 *
 * Environment: FCL_DEVICE (device selector), FCL_TEST_FILTER (run only
 * cases whose name contains it), FCL_TEST_VERBOSE (print every comparison). */
#include "flashcl.h"
#include "ref_rwkv6.h"
#include "test_util.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQS 6

typedef enum { W_WEAK = 0, W_STRONG, W_MIX, W_ZERO, W_EXTREME } wkind;
enum { A_REC = 1, A_CHUNK = 2, A_AUTO = 4, A_ALL = 7 };

typedef struct {
  const char *name;
  fcl_dtype   dtype;
  int64_t     b, t, h, dk, dv; /* dk, dv 0 -> 64 */
  int         nseq;            /* > 0: varlen with these lengths */
  int32_t     lens[MAX_SEQS];
  float       scale;           /* 0: default */
  int         reverse;
  int         no_h0, no_ht, no_dht, no_dh0;
  wkind       decay;
  tu_layout   lin, lout;       /* inputs (r k v w dout), outputs (o dr dk dv dw) */
  size_t      off;             /* > 0: views start off + i elements in */
  int         junk_stride0;    /* varlen: strides[0] is garbage */
  int         seqlen_extra;    /* varlen: desc.seqlen = longest + this */
  int         algos;           /* 0: all */
} rcase;

static int g_run = 0, g_failed = 0;
static int g_verbose = 0;

static int64_t i64max(int64_t a, int64_t b) { return a > b ? a : b; }

static tu_tol tol_for(fcl_dtype t) { return tu_tol_rwkv6(t); }
static tu_tol tol_state(void) { return tu_tol_rwkv6_state(); }

static const char *algo_name(int a) {
  return a == A_REC ? "recurrent" : a == A_CHUNK ? "chunked" : "auto";
}
static fcl_rwkv6_algorithm algo_enum(int a) {
  return a == A_REC ? FCL_RWKV6_RECURRENT : a == A_CHUNK ? FCL_RWKV6_CHUNKED : FCL_RWKV6_AUTO;
}
static const char *decay_name(wkind w) {
  static const char *n[] = {"weak", "strong", "mixed", "zero", "extreme-mixed"};
  return n[w];
}

static void describe(const rcase *c, char *buf, size_t n) {
  int p = snprintf(buf, n, "%-4s %s | ", tu_dtype_name(c->dtype), c->name);
  if (c->nseq) {
    p += snprintf(buf + p, n - (size_t)p, "varlen");
    for (int i = 0; i < c->nseq; ++i)
      p += snprintf(buf + p, n - (size_t)p, "%s%d", i ? "," : " ", c->lens[i]);
  } else {
    p += snprintf(buf + p, n - (size_t)p, "b%lld T%lld", (long long)c->b, (long long)c->t);
  }
  p += snprintf(buf + p, n - (size_t)p, " h%lld K%lld V%lld w:%s", (long long)c->h,
                (long long)c->dk, (long long)c->dv, decay_name(c->decay));
  if (c->reverse) p += snprintf(buf + p, n - (size_t)p, " reverse");
  if (c->scale != 0) p += snprintf(buf + p, n - (size_t)p, " scale%g", c->scale);
  p += snprintf(buf + p, n - (size_t)p, " h0%s ht%s dht%s dh0%s", c->no_h0 ? "-" : "+",
                c->no_ht ? "-" : "+", c->no_dht ? "-" : "+", c->no_dh0 ? "-" : "+");
  if (c->lin || c->lout)
    p += snprintf(buf + p, n - (size_t)p, " %s/%s", tu_layout_name(c->lin),
                  tu_layout_name(c->lout));
  if (c->off) p += snprintf(buf + p, n - (size_t)p, " off%zu", c->off);
  if (c->seqlen_extra) p += snprintf(buf + p, n - (size_t)p, " seqlen+%d", c->seqlen_extra);
  if (c->junk_stride0) snprintf(buf + p, n - (size_t)p, " junk-strides[0]");
}

/* ---- small buffer helpers ------------------------------------------------ */
static cl_mem upload_typed(cl_context cl, cl_command_queue q, const double *x, size_t n,
                           fcl_dtype t) {
  const size_t es = tu_dtype_size(t);
  unsigned char *host = malloc(n * es + 1);
  if (!host) abort();
  for (size_t i = 0; i < n; ++i) tu_encode(host + i * es, x[i], t);
  cl_mem m = tu_buffer_from(cl, q, host, n * es);
  free(host);
  return m;
}

/* Reads n values of dtype t and counts non-poison bytes in the tail. */
static int read_typed(cl_command_queue q, cl_mem buf, size_t n, fcl_dtype t,
                      size_t tail_bytes, double *dst, long *bad_tail) {
  const size_t es = tu_dtype_size(t), bytes = n * es + tail_bytes;
  unsigned char *host = malloc(bytes + 1);
  if (!host) abort();
  if (tu_buffer_read(q, buf, host, bytes)) {
    free(host);
    return 1;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = tu_decode(host + i * es, t);
  long bad = 0;
  for (size_t i = n * es; i < bytes; ++i) bad += host[i] != TU_POISON_BYTE;
  *bad_tail = bad;
  free(host);
  return 0;
}

static unsigned char *read_bytes(cl_command_queue q, cl_mem buf, size_t bytes) {
  unsigned char *host = malloc(bytes + 1);
  if (!host) abort();
  if (tu_buffer_read(q, buf, host, bytes)) {
    free(host);
    return NULL;
  }
  return host;
}

static void fill_w(tu_rng *g, double *w, size_t n, wkind kind) {
  for (size_t i = 0; i < n; ++i) {
    switch (kind) {
    case W_WEAK: w[i] = -exp(-3.0 + tu_rng_normal(g)); break; /* usual RWKV6 range */
    case W_STRONG: w[i] = tu_rng_range(g, -25.0, -5.0); break;
    case W_MIX: w[i] = tu_rng_int(g, 0, 1) ? -exp(-4.0 + tu_rng_normal(g))
                                          : tu_rng_range(g, -40.0, -15.0); break;
    case W_ZERO: w[i] = 0.0; break;
    /* Decays of exactly 0 in f32 (w in [-1e4, -1e3]) between weak ones. */
    case W_EXTREME: w[i] = tu_rng_int(g, 0, 1) ? -exp(-4.0 + tu_rng_normal(g))
                                              : tu_rng_range(g, -1e4, -1e3); break;
    }
  }
}

/* ---- one case --------------------------------------------------------------- */
typedef struct {
  char   *why;
  size_t  cap;
  int     wp;
  int     ok;
  char    errs[512];
  int     ep;
} verdict;

static void fail(verdict *v, const char *fmt, ...) {
  v->ok = 0;
  if (v->wp < (int)v->cap - 1) {
    va_list ap;
    va_start(ap, fmt);
    v->wp += snprintf(v->why + v->wp, v->cap - (size_t)v->wp, " ");
    if (v->wp < (int)v->cap - 1)
      v->wp += vsnprintf(v->why + v->wp, v->cap - (size_t)v->wp, fmt, ap);
    va_end(ap);
  }
}

/* Compares and records "name err/max|ref|". */
static void check_vals(verdict *v, const char *name, const double *got, const double *ref,
                       size_t n, tu_tol tol, const int64_t *dims, int ndims) {
  const tu_cmp c = tu_compare(got, ref, n, tol, 0);
  if (!c.ok) {
    fail(v, "%s mismatch (%zu bad);", name, c.n_bad);
    tu_print_cmp(name, &c, dims, ndims);
  } else if (g_verbose) {
    tu_print_cmp(name, &c, dims, ndims);
  }
  if (v->ep < (int)sizeof v->errs - 1)
    v->ep += snprintf(v->errs + v->ep, sizeof v->errs - (size_t)v->ep, " %s %.1e", name,
                      c.ref_max > 0 ? c.max_err / c.ref_max : c.max_err);
}

static int run_case(fcl_context *ctx, const rcase *c0, uint64_t seed) {
  rcase cc = *c0;
  const rcase *c = &cc;
  if (!cc.dk) cc.dk = 64;
  if (!cc.dv) cc.dv = 64;
  if (!cc.algos) cc.algos = A_ALL;
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue queue = fcl_context_queue(ctx);
  char desc_text[512];
  describe(c, desc_text, sizeof desc_text);

  const int varlen = c->nseq > 0;
  int32_t cu[MAX_SEQS + 1] = {0};
  int64_t B = c->b, T = c->t, tokens;
  if (varlen) {
    B = c->nseq;
    T = 0;
    for (int i = 0; i < c->nseq; ++i) {
      cu[i + 1] = cu[i] + c->lens[i];
      T = i64max(T, c->lens[i]);
    }
    T += c->seqlen_extra;
    tokens = cu[c->nseq];
  } else {
    tokens = B * T;
  }
  const int64_t H = c->h, K = c->dk, V = c->dv;
  const size_t nk = (size_t)(tokens * H * K), nv = (size_t)(tokens * H * V),
               nu = (size_t)(H * K), ns = (size_t)(B * H * K * V);
  const fcl_dtype dt = c->dtype;
  const size_t es = tu_dtype_size(dt);

  /* Inputs, rounded to what the device sees. */
  double *r = malloc(8 * nk + 8), *k = malloc(8 * nk + 8), *w = malloc(8 * nk + 8), *v = malloc(8 * nv + 8),
         *dout = malloc(8 * nv + 8), *u = malloc(8 * nu + 8), *h0 = malloc(8 * ns + 8),
         *dht = malloc(8 * ns + 8);
  double *o_ref = malloc(8 * nv + 8), *ht_ref = malloc(8 * ns + 8), *dr_ref = malloc(8 * nk + 8),
         *dk_ref = malloc(8 * nk + 8), *dw_ref = malloc(8 * nk + 8), *dv_ref = malloc(8 * nv + 8),
         *du_ref = malloc(8 * nu + 8), *dh0_ref = malloc(8 * ns + 8);
  double *got = malloc(8 * (nk > nv ? (nk > ns ? nk : ns) : (nv > ns ? nv : ns)) + 8);
  if (!r || !k || !w || !v || !dout || !u || !h0 || !dht || !o_ref || !ht_ref || !dr_ref ||
      !dk_ref || !dw_ref || !dv_ref || !du_ref || !dh0_ref || !got)
    abort();
  tu_rng g;
  tu_rng_seed(&g, seed);
  tu_fill_uniform(&g, r, nk, -1, 1);
  tu_fill_uniform(&g, k, nk, -1, 1);
  tu_fill_uniform(&g, v, nv, -1, 1);
  fill_w(&g, w, nk, c->decay);
  tu_fill_uniform(&g, u, nu, -1, 1);
  tu_fill_uniform(&g, h0, ns, -1, 1);
  tu_fill_uniform(&g, dout, nv, -1, 1);
  tu_fill_uniform(&g, dht, ns, -1, 1);
  tu_round_array(r, nk, dt); tu_round_array(k, nk, dt); tu_round_array(w, nk, dt);
  tu_round_array(v, nv, dt); tu_round_array(dout, nv, dt); tu_round_array(u, nu, dt);
  tu_round_array(h0, ns, FCL_F32); tu_round_array(dht, ns, FCL_F32);

  ref_rwkv6_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B; p.seqlen = T; p.heads = H; p.head_dim_k = K; p.head_dim_v = V;
  p.scale = (double)c->scale; /* exactly what the float desc holds */
  p.reverse = c->reverse;
  p.cu_seqlens = varlen ? cu : NULL;
  ref_rwkv6_forward(&p, r, k, v, w, u, c->no_h0 ? NULL : h0, o_ref, ht_ref);
  if (ref_rwkv6_backward(&p, r, k, v, w, u, c->no_h0 ? NULL : h0, dout,
                         c->no_dht ? NULL : dht, dr_ref, dk_ref, dv_ref, dw_ref, du_ref,
                         dh0_ref))
    abort();

  /* Device buffers. Views are created as [1][tokens] when varlen. */
  const int64_t bq = varlen ? 1 : B, sq = varlen ? tokens : T;
  /* Spare elements after every view. With no token at all the library
   * still wants room for one token row (its extent treats a 0-length
   * dimension as 1), which this case is not about: give it that room. */
  const size_t tail = tokens ? 5 : (size_t)(H * i64max(K, V)) + 5;
  tu_tensor tr, tk, tv, tw, tdo, to, tdr, tdk, tdv, tdw;
  const size_t o0 = c->off;
  int bad_create =
      tu_tensor_create(cl, queue, r, bq, sq, H, K, dt, c->lin, o0 ? o0 + 0 : 0, tail, &tr) ||
      tu_tensor_create(cl, queue, k, bq, sq, H, K, dt, c->lin, o0 ? o0 + 1 : 0, tail, &tk) ||
      tu_tensor_create(cl, queue, v, bq, sq, H, V, dt, c->lin, o0 ? o0 + 2 : 0, tail, &tv) ||
      tu_tensor_create(cl, queue, w, bq, sq, H, K, dt, c->lin, o0 ? o0 + 3 : 0, tail, &tw) ||
      tu_tensor_create(cl, queue, dout, bq, sq, H, V, dt, c->lin, o0 ? o0 + 4 : 0, tail, &tdo) ||
      tu_tensor_create(cl, queue, NULL, bq, sq, H, V, dt, c->lout, o0 ? o0 + 5 : 0, tail, &to) ||
      tu_tensor_create(cl, queue, NULL, bq, sq, H, K, dt, c->lout, o0 ? o0 + 6 : 0, tail, &tdr) ||
      tu_tensor_create(cl, queue, NULL, bq, sq, H, K, dt, c->lout, o0 ? o0 + 7 : 0, tail, &tdk) ||
      tu_tensor_create(cl, queue, NULL, bq, sq, H, V, dt, c->lout, o0 ? o0 + 8 : 0, tail, &tdv) ||
      tu_tensor_create(cl, queue, NULL, bq, sq, H, K, dt, c->lout, o0 ? o0 + 9 : 0, tail, &tdw);
  const size_t tail_b = 24; /* poison bytes after ht, du, dh0 */
  cl_mem bu = upload_typed(cl, queue, u, nu, dt);
  cl_mem bh0 = c->no_h0 ? NULL : upload_typed(cl, queue, h0, ns, FCL_F32);
  cl_mem bdht = c->no_dht ? NULL : upload_typed(cl, queue, dht, ns, FCL_F32);
  cl_mem bht = c->no_ht ? NULL : tu_buffer_poison(cl, queue, ns * 4 + tail_b);
  cl_mem bdu = tu_buffer_poison(cl, queue, nu * es + tail_b);
  cl_mem bdh0 = c->no_dh0 ? NULL : tu_buffer_poison(cl, queue, ns * 4 + tail_b);
  cl_mem bcu = varlen ? tu_buffer_from(cl, queue, cu, (size_t)(B + 1) * 4) : NULL;
  if (bad_create || !bu || (!c->no_h0 && !bh0) || (!c->no_dht && !bdht) ||
      (!c->no_ht && !bht) || !bdu || (!c->no_dh0 && !bdh0) || (varlen && !bcu)) {
    printf("FAIL %s | could not create buffers\n", desc_text);
    exit(1);
  }
  if (c->junk_stride0) {
    tu_tensor *all[10] = {&tr, &tk, &tv, &tw, &tdo, &to, &tdr, &tdk, &tdv, &tdw};
    for (int i = 0; i < 10; ++i) all[i]->t.strides[0] = ((int64_t)1 << 40) + 12345;
  }

  fcl_rwkv6_desc desc = FCL_RWKV6_DESC_INIT;
  desc.batch = B; desc.seqlen = T; desc.heads = H; desc.head_dim_k = K; desc.head_dim_v = V;
  desc.scale = c->scale; desc.reverse = c->reverse; desc.cu_seqlens = bcu;

  const int64_t kdims[4] = {bq, sq, H, K}, vdims[4] = {bq, sq, H, V},
                sdims[4] = {B, H, K, V}, udims[2] = {H, K};
  const tu_tol tol = tol_for(dt);
  int all_ok = 1;
  for (int a = A_REC; a <= A_AUTO; a <<= 1) {
    if (!(c->algos & a)) continue;
    ++g_run;
    const double t0 = tu_now();
    char why[1024] = "";
    verdict vd;
    memset(&vd, 0, sizeof vd);
    vd.why = why; vd.cap = sizeof why; vd.ok = 1;
    desc.algorithm = algo_enum(a);

    /* Forward. */
    tu_buffer_repoison(queue, to.buffer, to.bytes);
    if (bht) tu_buffer_repoison(queue, bht, ns * 4 + tail_b);
    fcl_status st = fcl_rwkv6_forward(ctx, &desc, &tr.t, &tk.t, &tv.t, &tw.t, bu, bh0,
                                      &to.t, bht);
    if (st != FCL_OK) {
      fail(&vd, "forward: %s;", fcl_status_string(st));
      printf("    forward: %s\n", fcl_context_last_error(ctx));
    } else if (tu_cl_check(clFinish(queue), "clFinish")) {
      fail(&vd, "forward clFinish failed;");
    } else {
      size_t first_bad = 0;
      const long bad = tu_tensor_read(queue, &to, got, &first_bad);
      if (bad) fail(&vd, "o: %ld bytes outside the view written;", bad);
      check_vals(&vd, "o", got, o_ref, nv, tol, vdims, 4);
      if (bht) {
        long bt = 0;
        if (tu_buffer_read_f32(queue, bht, got, ns, tail_b, &bt)) fail(&vd, "ht read failed;");
        if (bt) fail(&vd, "ht: %ld bytes past the end written;", bt);
        check_vals(&vd, "ht", got, ht_ref, ns, tol_state(), sdims, 4);
      }
    }

    /* Backward, twice: bit-identical (once for AUTO, which is one of the two). */
    tu_tensor *gt[4] = {&tdr, &tdk, &tdv, &tdw};
    unsigned char *first_run[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    const size_t du_bytes = nu * es + tail_b, dh0_bytes = ns * 4 + tail_b;
    const int reps = a == A_AUTO ? 1 : 2;
    for (int rep = 0; rep < reps; ++rep) {
      for (int i = 0; i < 4; ++i) tu_buffer_repoison(queue, gt[i]->buffer, gt[i]->bytes);
      tu_buffer_repoison(queue, bdu, du_bytes);
      if (bdh0) tu_buffer_repoison(queue, bdh0, dh0_bytes);
      st = fcl_rwkv6_backward(ctx, &desc, &tr.t, &tk.t, &tv.t, &tw.t, bu, bh0, &tdo.t, bdht,
                              &tdr.t, &tdk.t, &tdv.t, &tdw.t, bdu, bdh0);
      if (st != FCL_OK) {
        fail(&vd, "backward%s: %s;", rep ? " (second run)" : "", fcl_status_string(st));
        printf("    backward: %s\n", fcl_context_last_error(ctx));
        break;
      }
      if (tu_cl_check(clFinish(queue), "clFinish")) {
        fail(&vd, "backward clFinish failed;");
        break;
      }
      if (rep == 0) {
        static const char *const names[4] = {"dr", "dk", "dv", "dw"};
        const double *refs[4] = {dr_ref, dk_ref, dv_ref, dw_ref};
        const size_t ns4[4] = {nk, nk, nv, nk};
        const int64_t *dims4[4] = {kdims, kdims, vdims, kdims};
        for (int i = 0; i < 4; ++i) {
          size_t first_bad = 0;
          const long bad = tu_tensor_read(queue, gt[i], got, &first_bad);
          if (bad) fail(&vd, "%s: %ld bytes outside the view written;", names[i], bad);
          check_vals(&vd, names[i], got, refs[i], ns4[i], tol, dims4[i], 4);
          first_run[i] = read_bytes(queue, gt[i]->buffer, gt[i]->bytes);
        }
        long bt = 0;
        if (read_typed(queue, bdu, nu, dt, tail_b, got, &bt)) fail(&vd, "du read failed;");
        if (bt) fail(&vd, "du: %ld bytes past the end written;", bt);
        check_vals(&vd, "du", got, du_ref, nu, tol, udims, 2);
        first_run[4] = read_bytes(queue, bdu, du_bytes);
        if (bdh0) {
          if (tu_buffer_read_f32(queue, bdh0, got, ns, tail_b, &bt))
            fail(&vd, "dh0 read failed;");
          if (bt) fail(&vd, "dh0: %ld bytes past the end written;", bt);
          check_vals(&vd, "dh0", got, dh0_ref, ns, tol_state(), sdims, 4);
          first_run[5] = read_bytes(queue, bdh0, dh0_bytes);
        }
      } else {
        static const char *const names[6] = {"dr", "dk", "dv", "dw", "du", "dh0"};
        cl_mem bufs[6] = {tdr.buffer, tdk.buffer, tdv.buffer, tdw.buffer, bdu, bdh0};
        const size_t sizes[6] = {tdr.bytes, tdk.bytes, tdv.bytes, tdw.bytes, du_bytes,
                                 dh0_bytes};
        for (int i = 0; i < 6; ++i) {
          if (!bufs[i] || !first_run[i]) continue;
          unsigned char *again = read_bytes(queue, bufs[i], sizes[i]);
          if (!again || memcmp(again, first_run[i], sizes[i]) != 0)
            fail(&vd, "%s differs between two backward runs (not deterministic);", names[i]);
          free(again);
        }
      }
    }
    for (int i = 0; i < 6; ++i) free(first_run[i]);
    printf("%s %-9s %s |%s%s | %.2f s\n", vd.ok ? "PASS" : "FAIL", algo_name(a), desc_text,
           why, vd.errs, tu_now() - t0);
    fflush(stdout);
    if (!vd.ok) {
      ++g_failed;
      all_ok = 0;
    }
  }

  /* Inputs untouched (views and padding). */
  {
    const tu_tensor *ins[5] = {&tr, &tk, &tv, &tw, &tdo};
    const double *vals[5] = {r, k, v, w, dout};
    const size_t cnt[5] = {nk, nk, nv, nk, nv};
    static const char *const names[5] = {"r", "k", "v", "w", "dout"};
    for (int i = 0; i < 5; ++i) {
      size_t first_bad = 0;
      const long bad = tu_tensor_read(queue, ins[i], got, &first_bad);
      int changed = bad != 0;
      for (size_t e = 0; e < cnt[i] && !changed; ++e)
        changed = memcmp(&got[e], &vals[i][e], sizeof(double)) != 0;
      if (changed) {
        printf("FAIL %s | input %s was modified\n", desc_text, names[i]);
        ++g_failed;
        all_ok = 0;
      }
    }
    long bt = 0;
    int changed = read_typed(queue, bu, nu, dt, 0, got, &bt) != 0;
    for (size_t e = 0; e < nu && !changed; ++e) changed = got[e] != u[e];
    if (changed) { printf("FAIL %s | input u was modified\n", desc_text); ++g_failed; all_ok = 0; }
    cl_mem sb[2] = {bh0, bdht};
    const double *sv[2] = {h0, dht};
    for (int i = 0; i < 2; ++i) {
      if (!sb[i]) continue;
      changed = tu_buffer_read_f32(queue, sb[i], got, ns, 0, &bt) != 0;
      for (size_t e = 0; e < ns && !changed; ++e) changed = got[e] != sv[i][e];
      if (changed) {
        printf("FAIL %s | input %s was modified\n", desc_text, i ? "dht" : "h0");
        ++g_failed;
        all_ok = 0;
      }
    }
  }

  tu_tensor *all[10] = {&tr, &tk, &tv, &tw, &tdo, &to, &tdr, &tdk, &tdv, &tdw};
  for (int i = 0; i < 10; ++i) tu_tensor_release(all[i]);
  cl_mem mems[7] = {bu, bh0, bdht, bht, bdu, bdh0, bcu};
  for (int i = 0; i < 7; ++i)
    if (mems[i]) clReleaseMemObject(mems[i]);
  free(r); free(k); free(w); free(v); free(dout); free(u); free(h0); free(dht);
  free(o_ref); free(ht_ref); free(dr_ref); free(dk_ref); free(dw_ref); free(dv_ref);
  free(du_ref); free(dh0_ref); free(got);
  return all_ok;
}

/* ---- the cases ---------------------------------------------------------------- */
#define C(...) {__VA_ARGS__}
/* K = V = 64; every case runs in f32, those marked in dtype_cases in f16/bf16 too. */
static const rcase feature_cases[] = {
  C(.name = "T=1", .b = 2, .t = 1, .h = 2),
  C(.name = "T=7 h0 NULL dh0 NULL", .b = 1, .t = 7, .h = 3, .no_h0 = 1, .no_dh0 = 1),
  C(.name = "T=33 reverse", .b = 2, .t = 33, .h = 2, .reverse = 1),
  C(.name = "T=64", .b = 1, .t = 64, .h = 2, .no_ht = 1),
  C(.name = "T=65 dht NULL", .b = 1, .t = 65, .h = 2, .no_dht = 1),
  C(.name = "T=300", .b = 2, .t = 300, .h = 2),
  C(.name = "T=300 reverse h0 NULL dh0 wanted", .b = 1, .t = 300, .h = 2, .reverse = 1, .no_h0 = 1),
  C(.name = "T=1000", .b = 1, .t = 1000, .h = 2),
  C(.name = "T=4096 (a usual RWKV context)", .b = 1, .t = 4096, .h = 1, .algos = A_REC | A_CHUNK),
  C(.name = "varlen 17,0,1,130,64", .nseq = 5, .lens = {17, 0, 1, 130, 64}, .h = 2),
  C(.name = "varlen reverse 1,0,77,33 h0 NULL", .nseq = 4, .lens = {1, 0, 77, 33}, .h = 2, .reverse = 1, .no_h0 = 1),
  C(.name = "varlen all empty 0,0", .nseq = 2, .lens = {0, 0}, .h = 2, .seqlen_extra = 1, .algos = A_REC | A_CHUNK),
  C(.name = "varlen 0,5,0 ht NULL dht NULL", .nseq = 3, .lens = {0, 5, 0}, .h = 1, .no_ht = 1, .no_dht = 1),
  C(.name = "all optional NULL", .b = 2, .t = 50, .h = 2, .no_h0 = 1, .no_ht = 1, .no_dht = 1, .no_dh0 = 1),
  C(.name = "ht NULL dh0 NULL", .b = 1, .t = 40, .h = 2, .no_ht = 1, .no_dh0 = 1),
  C(.name = "strong decays", .b = 1, .t = 200, .h = 2, .decay = W_STRONG),
  C(.name = "strong decays varlen reverse", .nseq = 4, .lens = {50, 1, 0, 90}, .h = 2, .reverse = 1, .decay = W_STRONG),
  C(.name = "mixed decays", .b = 2, .t = 150, .h = 2, .decay = W_MIX),
  C(.name = "mixed decays reverse", .b = 1, .t = 129, .h = 1, .reverse = 1, .decay = W_MIX, .no_dht = 1),
  C(.name = "extreme mixed decays", .b = 1, .t = 100, .h = 2, .decay = W_EXTREME),
  C(.name = "zero decay (w = 0)", .b = 1, .t = 70, .h = 2, .decay = W_ZERO),
  C(.name = "custom scale", .b = 1, .t = 45, .h = 2, .scale = 0.3f),
  C(.name = "padded layout offset", .b = 2, .t = 40, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 5),
  C(.name = "bhsd in, padded-bhsd out", .b = 2, .t = 37, .h = 3, .lin = TU_BHSD, .lout = TU_PADDED_BHSD, .off = 3),
  C(.name = "sbhd in, bshd out", .b = 3, .t = 20, .h = 2, .lin = TU_SBHD, .lout = TU_BSHD),
  C(.name = "varlen padded junk strides[0]", .nseq = 3, .lens = {9, 31, 1}, .h = 2, .lin = TU_PADDED, .lout = TU_PADDED, .off = 2, .junk_stride0 = 1, .seqlen_extra = 20),
};

/* Feature cases rerun in f16 and bf16 (by name). */
static const char *const dtype_cases[] = {
  "T=1", "T=33 reverse", "T=300", "varlen 17,0,1,130,64", "strong decays",
  "mixed decays", "padded layout offset",
};

/* Head dims: each (dtype, K, V) compiles its own programs, so few. */
static const rcase headdim_cases[] = {
  C(.name = "K32 V48 varlen reverse", .dtype = FCL_F32, .dk = 32, .dv = 48, .nseq = 3, .lens = {40, 1, 66}, .h = 2, .reverse = 1),
  C(.name = "K32 V48 strong decays", .dtype = FCL_F32, .dk = 32, .dv = 48, .b = 2, .t = 100, .h = 2, .decay = W_STRONG),
  C(.name = "K7 V5", .dtype = FCL_F16, .dk = 7, .dv = 5, .b = 2, .t = 33, .h = 3),
  C(.name = "K7 V5 mixed reverse padded", .dtype = FCL_F16, .dk = 7, .dv = 5, .b = 1, .t = 90, .h = 2, .reverse = 1, .decay = W_MIX, .lin = TU_PADDED, .lout = TU_PADDED, .off = 1),
  C(.name = "K128 V128", .dtype = FCL_BF16, .dk = 128, .dv = 128, .b = 1, .t = 100, .h = 2),
  C(.name = "K128 V128 mixed varlen", .dtype = FCL_BF16, .dk = 128, .dv = 128, .nseq = 2, .lens = {70, 3}, .h = 1, .decay = W_MIX),
  C(.name = "K256 V32", .dtype = FCL_F32, .dk = 256, .dv = 32, .b = 1, .t = 65, .h = 2),
  C(.name = "K256 V32 strong reverse", .dtype = FCL_F32, .dk = 256, .dv = 32, .b = 1, .t = 40, .h = 1, .reverse = 1, .decay = W_STRONG, .no_h0 = 1),
};

static int selected(const char *name, const char *filter) {
  return !filter || !*filter || strstr(name, filter) != NULL;
}

/* ======================================================================== */
/* Bad inputs                                                                */

enum { BB = 2, BT = 5, BH = 2, BK = 4, BV = 3 };
#define BNK ((size_t)BB * BT * BH * BK)
#define BNV ((size_t)BB * BT * BH * BV)
#define BNS ((size_t)BB * BH * BK * BV)
#define BNU ((size_t)BH * BK)

typedef struct {
  fcl_context     *ctx;
  cl_context       cl;
  cl_command_queue queue;
  cl_mem           br, bk, bv, bw, bdo, bu, bh0, bdht, bcu;   /* inputs  */
  cl_mem           bo, bht, bdr, bdk, bdv, bdw, bdu, bdh0;    /* outputs */
  fcl_rwkv6_desc   d;
  fcl_tensor       r, k, v, w, dout, o, dr, dk, dv, dw;
  double           hr[BNK], hk[BNK], hv[BNV], hw[BNK], hdo[BNV], hu[BNU], hh0[BNS],
                   hdht[BNS];
} bsetup;

static int bad_cases = 0, bad_failed = 0;

static int is_ident(int ch) { return isalnum(ch) || ch == '_'; }

/* word occurs in msg, not inside a longer identifier or number. */
static int has_word(const char *msg, const char *word) {
  const size_t n = strlen(word);
  for (const char *q = strstr(msg, word); q; q = strstr(q + 1, word)) {
    if (q > msg && is_ident((unsigned char)q[-1])) continue;
    if (is_ident((unsigned char)q[n])) continue;
    if ((isdigit((unsigned char)word[0]) || word[0] == '-') && q[n] == '.' &&
        isdigit((unsigned char)q[n + 1]))
      continue;
    return 1;
  }
  return 0;
}

/* Every entry of words occurs; "a|b" accepts either. */
static int has_words(const char *msg, const char *const *words, char *missing, size_t len) {
  int all = 1;
  missing[0] = 0;
  for (; words && *words; ++words) {
    char alt[128];
    snprintf(alt, sizeof alt, "%s", *words);
    int found = 0;
    for (char *save = alt, *tok; !found && (tok = strtok(save, "|")); save = NULL)
      found = has_word(msg, tok);
    if (!found) {
      all = 0;
      const size_t l = strlen(missing);
      snprintf(missing + l, len - l, "%s\"%s\"", l ? ", " : "", *words);
    }
  }
  return all;
}

static size_t out_bytes(int i) {
  /* o, ht, dr, dk, dv, dw, du, dh0 (all f32 here) */
  static const size_t n[8] = {BNV, BNS, BNK, BNK, BNV, BNK, BNU, BNS};
  return n[i] * 4;
}
static cl_mem *out_buf(bsetup *s, int i) {
  cl_mem *b[8] = {&s->bo, &s->bht, &s->bdr, &s->bdk, &s->bdv, &s->bdw, &s->bdu, &s->bdh0};
  return b[i];
}

static void repoison_outputs(bsetup *s) {
  for (int i = 0; i < 8; ++i) tu_buffer_repoison(s->queue, *out_buf(s, i), out_bytes(i));
}

/* want2: a second accepted status (or want itself). words: NULL-terminated
 * list, or NULL for no message check (NULL ctx). */
static void expect(bsetup *s, const char *label, fcl_status got, fcl_status want,
                   fcl_status want2, const char *const *words) {
  static const char *const names[8] = {"o", "ht", "dr", "dk", "dv", "dw", "du", "dh0"};
  ++bad_cases;
  int ok = 1;
  char why[512] = "";
  size_t wp = 0;
  if (got != want && got != want2) {
    ok = 0;
    wp += (size_t)snprintf(why + wp, sizeof why - wp, " status %s, want %s;",
                           fcl_status_string(got), fcl_status_string(want));
  }
  const char *msg = fcl_context_last_error(s->ctx);
  if (!msg) msg = "(NULL)";
  if (words) {
    char missing[256];
    if (!has_words(msg, words, missing, sizeof missing)) {
      ok = 0;
      wp += (size_t)snprintf(why + wp, sizeof why - wp, " message lacks %s;", missing);
    }
  }
  clFinish(s->queue);
  for (int i = 0; i < 8; ++i) {
    size_t first = 0;
    const long bad = tu_buffer_poison_left(s->queue, *out_buf(s, i), 0, out_bytes(i), &first);
    if (bad != 0 && wp < sizeof why) {
      ok = 0;
      wp += (size_t)snprintf(why + wp, sizeof why - wp, " wrote %ld bytes of %s;", bad,
                             names[i]);
    }
  }
  printf("%s %-52s |%s message: \"%s\"\n", ok ? "PASS" : "FAIL", label, why,
         words ? msg : "(not checked: NULL ctx)");
  fflush(stdout);
  if (!ok) {
    ++bad_failed;
    repoison_outputs(s);
  }
}

static fcl_tensor bshd_f32(cl_mem buf, int64_t t, int64_t h, int64_t d) {
  fcl_tensor x;
  memset(&x, 0, sizeof x);
  x.buffer = buf;
  x.dtype = FCL_F32;
  x.strides[3] = 1;
  x.strides[2] = d;
  x.strides[1] = h * d;
  x.strides[0] = t * h * d;
  return x;
}

static cl_mem upload_f32(bsetup *s, const double *x, size_t n) {
  return upload_typed(s->cl, s->queue, x, n, FCL_F32);
}

static int bsetup_init(bsetup *s, fcl_context *ctx) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->cl = fcl_context_cl(ctx);
  s->queue = fcl_context_queue(ctx);
  tu_rng g;
  tu_rng_seed(&g, 4242);
  tu_fill_uniform(&g, s->hr, BNK, -1, 1);
  tu_fill_uniform(&g, s->hk, BNK, -1, 1);
  tu_fill_uniform(&g, s->hv, BNV, -1, 1);
  fill_w(&g, s->hw, BNK, W_WEAK);
  tu_fill_uniform(&g, s->hdo, BNV, -1, 1);
  tu_fill_uniform(&g, s->hu, BNU, -1, 1);
  tu_fill_uniform(&g, s->hh0, BNS, -1, 1);
  tu_fill_uniform(&g, s->hdht, BNS, -1, 1);
  double *arrs[8] = {s->hr, s->hk, s->hv, s->hw, s->hdo, s->hu, s->hh0, s->hdht};
  const size_t ns[8] = {BNK, BNK, BNV, BNK, BNV, BNU, BNS, BNS};
  for (int i = 0; i < 8; ++i) tu_round_array(arrs[i], ns[i], FCL_F32);
  s->br = upload_f32(s, s->hr, BNK);
  s->bk = upload_f32(s, s->hk, BNK);
  s->bv = upload_f32(s, s->hv, BNV);
  s->bw = upload_f32(s, s->hw, BNK);
  s->bdo = upload_f32(s, s->hdo, BNV);
  s->bu = upload_f32(s, s->hu, BNU);
  s->bh0 = upload_f32(s, s->hh0, BNS);
  s->bdht = upload_f32(s, s->hdht, BNS);
  const int32_t cu[BB + 1] = {0, 3, 7}; /* 7 tokens <= BB*BT rows of the views */
  s->bcu = tu_buffer_from(s->cl, s->queue, cu, sizeof cu);
  for (int i = 0; i < 8; ++i) {
    *out_buf(s, i) = tu_buffer_poison(s->cl, s->queue, out_bytes(i));
    if (!*out_buf(s, i)) return 1;
  }
  if (!s->br || !s->bk || !s->bv || !s->bw || !s->bdo || !s->bu || !s->bh0 || !s->bdht ||
      !s->bcu)
    return 1;
  fcl_rwkv6_desc d = FCL_RWKV6_DESC_INIT;
  d.batch = BB; d.seqlen = BT; d.heads = BH; d.head_dim_k = BK; d.head_dim_v = BV;
  s->d = d;
  s->r = bshd_f32(s->br, BT, BH, BK);
  s->k = bshd_f32(s->bk, BT, BH, BK);
  s->v = bshd_f32(s->bv, BT, BH, BV);
  s->w = bshd_f32(s->bw, BT, BH, BK);
  s->dout = bshd_f32(s->bdo, BT, BH, BV);
  s->o = bshd_f32(s->bo, BT, BH, BV);
  s->dr = bshd_f32(s->bdr, BT, BH, BK);
  s->dk = bshd_f32(s->bdk, BT, BH, BK);
  s->dv = bshd_f32(s->bdv, BT, BH, BV);
  s->dw = bshd_f32(s->bdw, BT, BH, BK);
  return 0;
}

static void bsetup_free(bsetup *s) {
  cl_mem m[9] = {s->br, s->bk, s->bv, s->bw, s->bdo, s->bu, s->bh0, s->bdht, s->bcu};
  for (int i = 0; i < 9; ++i) clReleaseMemObject(m[i]);
  for (int i = 0; i < 8; ++i) clReleaseMemObject(*out_buf(s, i));
}

/* Argument bundles, so each bad case changes one thing. */
typedef struct {
  fcl_context *ctx;
  const fcl_rwkv6_desc *d;
  const fcl_tensor *r, *k, *v, *w, *o, *dout, *dr, *dk, *dv, *dw;
  cl_mem u, h0, ht, dht, du, dh0;
} bargs;

static bargs base_args(bsetup *s) {
  bargs a = {s->ctx, &s->d, &s->r, &s->k, &s->v, &s->w, &s->o, &s->dout, &s->dr, &s->dk,
             &s->dv, &s->dw, s->bu, s->bh0, s->bht, s->bdht, s->bdu, s->bdh0};
  return a;
}
static fcl_status fwd(const bargs *a) {
  return fcl_rwkv6_forward(a->ctx, a->d, a->r, a->k, a->v, a->w, a->u, a->h0, a->o, a->ht);
}
static fcl_status bwd(const bargs *a) {
  return fcl_rwkv6_backward(a->ctx, a->d, a->r, a->k, a->v, a->w, a->u, a->h0, a->dout,
                            a->dht, a->dr, a->dk, a->dv, a->dw, a->du, a->dh0);
}

/* A valid forward and backward (f32, both algorithms) matching the reference. */
static void valid_calls(bsetup *s, const char *label, const fcl_rwkv6_desc *dd,
                        const int32_t *cu) {
  for (int alg = A_REC; alg <= A_CHUNK; alg <<= 1) {
    ++bad_cases;
    fcl_rwkv6_desc d = *dd;
    d.algorithm = algo_enum(alg);
    bargs a = base_args(s);
    a.d = &d;
    const fcl_status sf = fwd(&a);
    const fcl_status sb = sf == FCL_OK ? bwd(&a) : sf;
    int ok = sf == FCL_OK && sb == FCL_OK && clFinish(s->queue) == CL_SUCCESS;
    ref_rwkv6_problem p = {d.batch, d.seqlen, BH, BK, BV, 0.0, d.reverse, cu};
    const int64_t tok = ref_rwkv6_tokens(&p);
    const size_t nk = (size_t)(tok * BH * BK), nv = (size_t)(tok * BH * BV),
                 ns = (size_t)(d.batch * BH * BK * BV);
    double o[BNV], ht[BNS], dr[BNK], dk[BNK], dv[BNV], dw[BNK], du[BNU], dh0[BNS];
    double got[BNV > BNS ? (BNV > BNK ? BNV : BNK) : (BNS > BNK ? BNS : BNK)];
    ref_rwkv6_forward(&p, s->hr, s->hk, s->hv, s->hw, s->hu, s->hh0, o, ht);
    ref_rwkv6_backward(&p, s->hr, s->hk, s->hv, s->hw, s->hu, s->hh0, s->hdo, s->hdht, dr, dk,
                       dv, dw, du, dh0);
    const double *refs[8] = {o, ht, dr, dk, dv, dw, du, dh0};
    const size_t cnt[8] = {nv, ns, nk, nk, nv, nk, BNU, ns};
    static const char *const names[8] = {"o", "ht", "dr", "dk", "dv", "dw", "du", "dh0"};
    char why[256] = "";
    size_t wp = 0;
    for (int i = 0; ok && i < 8; ++i) {
      long bt = 0;
      if (tu_buffer_read_f32(s->queue, *out_buf(s, i), got, cnt[i],
                             out_bytes(i) - cnt[i] * 4, &bt)) {
        ok = 0;
        break;
      }
      const tu_cmp c = tu_compare(got, refs[i], cnt[i], tol_for(FCL_F32), 0);
      if (!c.ok || bt) {
        ok = 0;
        wp += (size_t)snprintf(why + wp, sizeof why - wp, " %s%s", names[i],
                               c.ok ? " wrote past its end" : " mismatch");
        if (!c.ok) tu_print_cmp(names[i], &c, NULL, 0);
      }
    }
    printf("%s %-52s | %s: forward %s, backward %s%s%s\n", ok ? "PASS" : "FAIL", label,
           algo_name(alg), fcl_status_string(sf), fcl_status_string(sb), why,
           sf || sb ? fcl_context_last_error(s->ctx) : "");
    if (!ok) ++bad_failed;
    repoison_outputs(s);
  }
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})
#define INVALID FCL_ERROR_INVALID_ARGUMENT
#define UNSUP FCL_ERROR_UNSUPPORTED

/* An offset that makes the view of x end one element past `bytes`. */
static size_t offset_past_end(const fcl_tensor *x, int64_t b, int64_t t, int64_t h,
                              int64_t d, size_t bytes) {
  const int64_t extent =
      (b - 1) * x->strides[0] + (t - 1) * x->strides[1] + (h - 1) * x->strides[2] + d;
  return bytes - (size_t)extent * 4 + 4;
}

static void bad_inputs(fcl_context *ctx) {
  const double t0 = tu_now();
  static bsetup S;
  bsetup *s = &S;
  if (bsetup_init(s, ctx)) {
    printf("FAIL bad inputs: could not create buffers\n");
    ++bad_failed;
    return;
  }
  const int32_t cu_host[BB + 1] = {0, 3, 7};
  valid_calls(s, "baseline (valid)", &s->d, NULL);
  {
    fcl_rwkv6_desc vd = s->d;
    vd.cu_seqlens = s->bcu;
    vd.seqlen = 4;
    valid_calls(s, "varlen baseline (valid)", &vd, cu_host);
  }
  char label[128], val[32];
  bargs a;
  fcl_rwkv6_desc d;
  fcl_tensor t;

  /* NULL context and descriptor. */
  a = base_args(s); a.ctx = NULL;
  expect(s, "forward: ctx NULL", fwd(&a), INVALID, INVALID, NULL);
  expect(s, "backward: ctx NULL", bwd(&a), INVALID, INVALID, NULL);
  a = base_args(s); a.d = NULL;
  expect(s, "forward: desc NULL", fwd(&a), INVALID, INVALID, W("desc|d|descriptor"));
  expect(s, "backward: desc NULL", bwd(&a), INVALID, INVALID, W("desc|d|descriptor"));

  /* NULL tensors and buffers (forward). */
  {
    static const char *const nm[6] = {"r", "k", "v", "w", "o", "u"};
    for (int i = 0; i < 6; ++i) {
      a = base_args(s);
      switch (i) {
      case 0: a.r = NULL; break;
      case 1: a.k = NULL; break;
      case 2: a.v = NULL; break;
      case 3: a.w = NULL; break;
      case 4: a.o = NULL; break;
      default: a.u = NULL; break;
      }
      snprintf(label, sizeof label, "forward: %s NULL", nm[i]);
      expect(s, label, fwd(&a), INVALID, INVALID, W(nm[i]));
    }
  }
  /* NULL tensors and buffers (backward). */
  {
    static const char *const nm[10] = {"r", "k", "v", "w", "u", "dout|do",
                                       "dr", "dk", "dv", "dw"};
    for (int i = 0; i < 11; ++i) {
      a = base_args(s);
      const char *n = i < 10 ? nm[i] : "du";
      switch (i) {
      case 0: a.r = NULL; break;
      case 1: a.k = NULL; break;
      case 2: a.v = NULL; break;
      case 3: a.w = NULL; break;
      case 4: a.u = NULL; break;
      case 5: a.dout = NULL; break;
      case 6: a.dr = NULL; break;
      case 7: a.dk = NULL; break;
      case 8: a.dv = NULL; break;
      case 9: a.dw = NULL; break;
      default: a.du = NULL; break;
      }
      snprintf(label, sizeof label, "backward: %s NULL", i == 5 ? "dout" : n);
      expect(s, label, bwd(&a), INVALID, INVALID, W(n));
    }
  }
  /* A NULL cl_mem inside a tensor. */
  a = base_args(s); t = s->w; t.buffer = NULL; a.w = &t;
  expect(s, "forward: w.buffer NULL", fwd(&a), INVALID, INVALID, W("w"));
  a = base_args(s); t = s->dv; t.buffer = NULL; a.dv = &t;
  expect(s, "backward: dv.buffer NULL", bwd(&a), INVALID, INVALID, W("dv"));

  /* Sizes <= 0 and head dims > 256. */
  {
    static const char *const fields[5] = {"batch", "seqlen", "heads", "head_dim_k",
                                          "head_dim_v"};
    static const int64_t bad[2] = {0, -1};
    for (int f = 0; f < 5; ++f)
      for (int vi = 0; vi < 2; ++vi)
        for (int dir = 0; dir < 2; ++dir) {
          if (dir == 1 && vi == 0 && f != 3) continue; /* backward: a subset */
          d = s->d;
          int64_t *fp[5] = {&d.batch, &d.seqlen, &d.heads, &d.head_dim_k, &d.head_dim_v};
          *fp[f] = bad[vi];
          a = base_args(s); a.d = &d;
          snprintf(label, sizeof label, "%s: %s = %lld", dir ? "backward" : "forward",
                   fields[f], (long long)bad[vi]);
          snprintf(val, sizeof val, "%lld", (long long)bad[vi]);
          expect(s, label, dir ? bwd(&a) : fwd(&a), INVALID, INVALID, W(fields[f], val));
        }
  }
  d = s->d; d.head_dim_k = 257; a = base_args(s); a.d = &d;
  expect(s, "forward: head_dim_k = 257", fwd(&a), INVALID, UNSUP, W("head_dim_k", "257"));
  expect(s, "backward: head_dim_k = 257", bwd(&a), INVALID, UNSUP, W("head_dim_k", "257"));
  d = s->d; d.head_dim_v = 300; a = base_args(s); a.d = &d;
  expect(s, "forward: head_dim_v = 300", fwd(&a), INVALID, UNSUP, W("head_dim_v", "300"));
  expect(s, "backward: head_dim_v = 300", bwd(&a), INVALID, UNSUP, W("head_dim_v", "300"));

  /* Other descriptor fields. */
  d = s->d; d.scale = NAN; a = base_args(s); a.d = &d;
  expect(s, "forward: scale = NaN", fwd(&a), INVALID, INVALID, W("scale"));
  d = s->d; d.scale = INFINITY; a = base_args(s); a.d = &d;
  expect(s, "backward: scale = inf", bwd(&a), INVALID, INVALID, W("scale"));
  d = s->d; d.algorithm = (fcl_rwkv6_algorithm)7; a = base_args(s); a.d = &d;
  expect(s, "forward: algorithm = 7", fwd(&a), INVALID, INVALID, W("algorithm"));
  expect(s, "backward: algorithm = 7", bwd(&a), INVALID, INVALID, W("algorithm"));

  /* dtype mismatches and an unknown dtype. */
  a = base_args(s); t = s->k; t.dtype = FCL_F16; a.k = &t;
  expect(s, "forward: k f16, others f32", fwd(&a), INVALID, INVALID, W("dtype"));
  a = base_args(s); t = s->w; t.dtype = FCL_BF16; a.w = &t;
  expect(s, "forward: w bf16, others f32", fwd(&a), INVALID, INVALID, W("dtype"));
  a = base_args(s); t = s->o; t.dtype = FCL_BF16; a.o = &t;
  expect(s, "forward: o bf16, others f32", fwd(&a), INVALID, INVALID, W("dtype"));
  a = base_args(s); t = s->dw; t.dtype = FCL_F16; a.dw = &t;
  expect(s, "backward: dw f16, others f32", bwd(&a), INVALID, INVALID, W("dtype"));
  a = base_args(s); t = s->dout; t.dtype = FCL_BF16; a.dout = &t;
  expect(s, "backward: dout bf16, others f32", bwd(&a), INVALID, INVALID, W("dtype"));
  {
    fcl_tensor x[10] = {s->r, s->k, s->v, s->w, s->o, s->dout, s->dr, s->dk, s->dv, s->dw};
    for (int i = 0; i < 10; ++i) x[i].dtype = (fcl_dtype)7;
    bargs b = base_args(s);
    b.r = &x[0]; b.k = &x[1]; b.v = &x[2]; b.w = &x[3]; b.o = &x[4]; b.dout = &x[5];
    b.dr = &x[6]; b.dk = &x[7]; b.dv = &x[8]; b.dw = &x[9];
    expect(s, "forward: dtype 7 everywhere", fwd(&b), INVALID, INVALID, W("dtype", "7"));
    expect(s, "backward: dtype 7 everywhere", bwd(&b), INVALID, INVALID, W("dtype", "7"));
  }

  /* strides[3] != 1. */
  a = base_args(s); t = s->r; t.strides[3] = 2; a.r = &t;
  expect(s, "forward: r strides[3] = 2", fwd(&a), INVALID, INVALID, W("r", "strides[3]|strides"));
  a = base_args(s); t = s->o; t.strides[3] = 0; a.o = &t;
  expect(s, "forward: o strides[3] = 0", fwd(&a), INVALID, INVALID, W("o", "strides[3]|strides"));
  a = base_args(s); t = s->dk; t.strides[3] = 3; a.dk = &t;
  expect(s, "backward: dk strides[3] = 3", bwd(&a), INVALID, INVALID, W("dk", "strides[3]|strides"));
  a = base_args(s); t = s->dout; t.strides[3] = -1; a.dout = &t;
  expect(s, "backward: dout strides[3] = -1", bwd(&a), INVALID, INVALID,
         W("dout|do", "strides[3]|strides"));

  /* Offset not a multiple of the element size. */
  a = base_args(s); t = s->v; t.offset = 2; a.v = &t;
  expect(s, "forward: v offset 2 (f32)", fwd(&a), INVALID, INVALID, W("v", "offset"));

  /* Views one element past the end of their buffer (buffers are exact). */
  {
    static const char *const nm[5] = {"r", "k", "v", "w", "o"};
    const fcl_tensor *base[5] = {&s->r, &s->k, &s->v, &s->w, &s->o};
    const int64_t dims[5] = {BK, BK, BV, BK, BV};
    for (int i = 0; i < 5; ++i) {
      fcl_tensor x = *base[i];
      x.offset = offset_past_end(base[i], BB, BT, BH, dims[i], (size_t)(BB * BT * BH) * dims[i] * 4);
      a = base_args(s);
      const fcl_tensor **slot[5] = {&a.r, &a.k, &a.v, &a.w, &a.o};
      *slot[i] = &x;
      snprintf(label, sizeof label, "forward: %s extent past the end (offset %zu)", nm[i], x.offset);
      expect(s, label, fwd(&a), INVALID, INVALID, W(nm[i]));
    }
    static const char *const bn[5] = {"dout|do", "dr", "dk", "dv", "dw"};
    const fcl_tensor *bbase[5] = {&s->dout, &s->dr, &s->dk, &s->dv, &s->dw};
    const int64_t bdims[5] = {BV, BK, BK, BV, BK};
    for (int i = 0; i < 5; ++i) {
      fcl_tensor x = *bbase[i];
      a = base_args(s);
      const fcl_tensor **slot[5] = {&a.dout, &a.dr, &a.dk, &a.dv, &a.dw};
      *slot[i] = &x;
      if (i % 2 == 0) {
        x.offset = offset_past_end(bbase[i], BB, BT, BH, bdims[i],
                                   (size_t)(BB * BT * BH) * bdims[i] * 4);
        snprintf(label, sizeof label, "backward: %s extent past the end (offset %zu)",
                 i ? bn[i] : "dout", x.offset);
      } else { /* through strides[1]: the last step ends one element past */
        x.strides[1] += 1;
        x.strides[0] = BT * x.strides[1] - 1;
        snprintf(label, sizeof label, "backward: %s extent past the end (strides)", bn[i]);
      }
      expect(s, label, bwd(&a), INVALID, INVALID, W(bn[i]));
    }
  }

  /* Plain buffers one element too small. */
  {
    cl_mem su = tu_buffer_from(s->cl, s->queue, s->hr, BNU * 4 - 4); /* any bytes */
    cl_mem ss_in = tu_buffer_from(s->cl, s->queue, s->hr, BNS * 4 - 4);
    cl_mem ss_out = tu_buffer_poison(s->cl, s->queue, BNS * 4 - 4);
    cl_mem su_out = tu_buffer_poison(s->cl, s->queue, BNU * 4 - 4);
    a = base_args(s); a.u = su;
    expect(s, "forward: u one element short", fwd(&a), INVALID, INVALID, W("u"));
    expect(s, "backward: u one element short", bwd(&a), INVALID, INVALID, W("u"));
    a = base_args(s); a.h0 = ss_in;
    expect(s, "forward: h0 one float short", fwd(&a), INVALID, INVALID, W("h0"));
    expect(s, "backward: h0 one float short", bwd(&a), INVALID, INVALID, W("h0"));
    a = base_args(s); a.ht = ss_out;
    expect(s, "forward: ht one float short", fwd(&a), INVALID, INVALID, W("ht"));
    a = base_args(s); a.dht = ss_in;
    expect(s, "backward: dht one float short", bwd(&a), INVALID, INVALID, W("dht"));
    a = base_args(s); a.du = su_out;
    expect(s, "backward: du one element short", bwd(&a), INVALID, INVALID, W("du"));
    a = base_args(s); a.dh0 = ss_out;
    expect(s, "backward: dh0 one float short", bwd(&a), INVALID, INVALID, W("dh0"));
    size_t first = 0;
    if (tu_buffer_poison_left(s->queue, ss_out, 0, BNS * 4 - 4, &first) != 0 ||
        tu_buffer_poison_left(s->queue, su_out, 0, BNU * 4 - 4, &first) != 0) {
      printf("FAIL the short ht/dh0/du buffers were written\n");
      ++bad_failed;
    }
    clReleaseMemObject(su); clReleaseMemObject(ss_in);
    clReleaseMemObject(ss_out); clReleaseMemObject(su_out);
  }

  /* Varlen: cu_seqlens too small, or with bad contents. */
  {
    fcl_rwkv6_desc vd = s->d;
    vd.cu_seqlens = s->bcu;
    vd.seqlen = 4;
    const int32_t two[BB] = {0, 3};
    cl_mem small = tu_buffer_from(s->cl, s->queue, two, sizeof two);
    d = vd; d.cu_seqlens = small; a = base_args(s); a.d = &d;
    expect(s, "forward: cu_seqlens [batch] not [batch+1]", fwd(&a), INVALID, INVALID,
           W("cu_seqlens"));
    expect(s, "backward: cu_seqlens [batch] not [batch+1]", bwd(&a), INVALID, INVALID,
           W("cu_seqlens"));
    clReleaseMemObject(small);
    static const int32_t bad_cu[4][BB + 1] = {{0, 3, 2}, {0, 1, 6}, {-1, 2, 4}, {0, 4, 11}};
    static const char *const what[4] = {"decreasing", "a sequence longer than seqlen",
                                        "negative first entry",
                                        "more tokens than the views hold"};
    for (int i = 0; i < 4; ++i) {
      cl_mem cu = tu_buffer_from(s->cl, s->queue, bad_cu[i], sizeof bad_cu[i]);
      d = vd; d.cu_seqlens = cu;
      if (i == 3) d.seqlen = 7; /* 11 tokens; views hold BB*BT = 10 rows */
      a = base_args(s); a.d = &d;
      /* Too many tokens: naming cu_seqlens or the first view it overruns. */
      const char *const *words = i == 3 ? W("cu_seqlens|r") : W("cu_seqlens");
      snprintf(label, sizeof label, "forward: cu_seqlens %s", what[i]);
      expect(s, label, fwd(&a), INVALID, INVALID, words);
      snprintf(label, sizeof label, "backward: cu_seqlens %s", what[i]);
      expect(s, label, bwd(&a), INVALID, INVALID, words);
      clReleaseMemObject(cu);
    }
  }

  /* The context still works. */
  valid_calls(s, "valid calls after all the bad ones", &s->d, NULL);
  bsetup_free(s);
  printf("bad inputs: %d cases, %d failed, %.1f s\n", bad_cases, bad_failed, tu_now() - t0);
}

/* ======================================================================== */
int main(void) {
  const double t_start = tu_now();
  g_verbose = getenv("FCL_TEST_VERBOSE") != NULL;
  fcl_context *ctx = NULL;
  const fcl_status st = fcl_context_create(NULL, &ctx);
  if (st != FCL_OK) {
    printf("FAIL: fcl_context_create(NULL) with FCL_DEVICE=%s: %s: %s\n",
           getenv("FCL_DEVICE") ? getenv("FCL_DEVICE") : "(unset)", fcl_status_string(st),
           fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  if (getenv("FCL_RWKV6_ALGORITHM"))
    printf("note: FCL_RWKV6_ALGORITHM=%s steers the AUTO runs\n", getenv("FCL_RWKV6_ALGORITHM"));
  const char *filter = getenv("FCL_TEST_FILTER");
  uint64_t case_seed = 1;

  for (size_t i = 0; i < sizeof feature_cases / sizeof feature_cases[0]; ++i) {
    ++case_seed;
    if (selected(feature_cases[i].name, filter))
      run_case(ctx, &feature_cases[i], case_seed * 7919u);
  }
  for (int dt = 1; dt <= 2; ++dt)
    for (size_t j = 0; j < sizeof dtype_cases / sizeof dtype_cases[0]; ++j)
      for (size_t i = 0; i < sizeof feature_cases / sizeof feature_cases[0]; ++i) {
        if (strcmp(feature_cases[i].name, dtype_cases[j]) != 0) continue;
        rcase c = feature_cases[i];
        c.dtype = (fcl_dtype)dt;
        ++case_seed;
        if (selected(c.name, filter)) run_case(ctx, &c, case_seed * 7919u);
      }
  for (size_t i = 0; i < sizeof headdim_cases / sizeof headdim_cases[0]; ++i) {
    ++case_seed;
    if (selected(headdim_cases[i].name, filter))
      run_case(ctx, &headdim_cases[i], case_seed * 7919u);
  }
  if (selected("bad inputs", filter)) bad_inputs(ctx);

  fcl_context_stats stats = {0, 0, 0};
  fcl_context_get_stats(ctx, &stats);
  printf("programs built %d, from cache %d, cache writes %d\n", stats.programs_built,
         stats.programs_from_cache, stats.cache_writes);
  fcl_context_destroy(ctx);
  printf("test_rwkv6: %d runs, %d failed; bad inputs %d cases, %d failed; %.1f s\n", g_run,
         g_failed, bad_cases, bad_failed, tu_now() - t_start);
  return g_failed || bad_failed || (g_run == 0 && bad_cases == 0) ? 1 : 0;
}
