/* fcl_attention_merge against the double merge (ref_attention_merge):
 *  - split forwards: a problem's keys cut into n contiguous parts, each part
 *    computed by fcl_attention_forward with its lse (through the harness,
 *    oh_attention_run), merged, and compared with the reference of the
 *    whole problem (the forward suite's tolerance of the coarser of the
 *    parts' and o's dtypes) and with the double merge of the parts as the
 *    device wrote them (o's dtype tolerance); n = 1, 2, 5; parts f32 into
 *    an f16 o; in place; varlen with sequences that some parts give no key;
 *  - made-up parts: random o_i and lse_i with -inf parts, rows whose parts
 *    are all -inf (o exactly 0, lse -inf), parts far apart (lse 100 below),
 *    each part in its own layout; n = 1, 2, 5; every dtype pair; in place;
 *    lse NULL; varlen.
 * Every run checks that nothing is written outside o's view or past lse,
 * and that the parts (but the one merged in place) are unchanged. */
#include "kvcache_tests.h"
#include "op_harness.h"
#include "ref_kvcache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS 5

typedef struct {
  const char *name;
  int         n;
  fcl_dtype   dt_parts, dt_o;
  int         varlen, inplace, no_lse, mixed_layouts;
  int         from_forward; /* parts from fcl_attention_forward, else made up */
} merge_case;

/* The shape of the queries: batch, seqlen_q, heads_q, head_dim_v, and
 * cu_seqlens_q (host) when varlen. */
typedef struct {
  int64_t        batch, sq, hq, dv, tokens;
  const int32_t *cuq;
} merge_shape;

static double *dalloc(size_t n) {
  double *x = calloc(n + 1, sizeof *x);
  if (!x) abort();
  return x;
}

static size_t lse_index(const merge_shape *s, int64_t t, int64_t h) {
  if (s->cuq) return (size_t)(h * s->tokens + t);
  return (size_t)(((t / s->sq) * s->hq + h) * s->sq + t % s->sq);
}

/* Uploads the parts, merges them on the device and reads o (and lse). */
static int device_merge(fcl_context *ctx, const merge_case *m, const merge_shape *s,
                        double *const *parts, double *const *lse_parts, double *o, double *lse,
                        char *why, size_t nwhy) {
  cl_context clc = fcl_context_cl(ctx);
  cl_command_queue queue = fcl_context_queue(ctx);
  const size_t nl = (size_t)(s->tokens * s->hq);
  const int64_t tb = s->cuq ? 1 : s->batch, ts = s->cuq ? s->tokens : s->sq;
  static const tu_layout layouts[3] = {TU_BSHD, TU_BHSD, TU_PADDED};
  tu_tensor tp[MAX_PARTS], to;
  cl_mem lp[MAX_PARTS], lse_out = NULL, cuq = NULL;
  fcl_tensor views[MAX_PARTS];
  unsigned char *then[MAX_PARTS][2];
  memset(tp, 0, sizeof tp);
  memset(&to, 0, sizeof to);
  memset(lp, 0, sizeof lp);
  memset(then, 0, sizeof then);
  int fail = 0;
  const size_t lse_tail = 16;
  float *lf = malloc(nl * 4 + lse_tail);
  if (!lf) abort();
  for (int p = 0; p < m->n; ++p) {
    const tu_layout l = m->mixed_layouts ? layouts[p % 3] : TU_BSHD;
    fail |= tu_tensor_create(clc, queue, parts[p], tb, ts, s->hq, s->dv, m->dt_parts, l,
                             (size_t)p * 3, 5, &tp[p]);
    memset(lf, TU_POISON_BYTE, nl * 4 + lse_tail);
    for (size_t i = 0; i < nl; ++i) lf[i] = (float)lse_parts[p][i];
    lp[p] = tu_buffer_from(clc, queue, lf, nl * 4 + lse_tail);
    fail |= lp[p] == NULL;
    views[p] = tp[p].t;
  }
  free(lf);
  if (!m->inplace) {
    fail |= tu_tensor_create(clc, queue, NULL, tb, ts, s->hq, s->dv, m->dt_o,
                             m->mixed_layouts ? TU_PADDED_BHSD : TU_BSHD, 4,
                             (size_t)(s->hq * s->dv) + 7, &to);
    if (!m->no_lse) {
      lse_out = tu_buffer_poison(clc, queue, nl * 4 + lse_tail);
      fail |= lse_out == NULL;
    }
  }
  if (s->cuq) {
    cuq = tu_buffer_from(clc, queue, s->cuq, (size_t)(s->batch + 1) * 4);
    fail |= cuq == NULL;
  }
  if (fail) {
    oh_append(why, nwhy, " could not create buffers;");
    goto done;
  }
  for (int p = m->inplace ? 1 : 0; p < m->n; ++p) {
    then[p][0] = malloc(tp[p].bytes);
    then[p][1] = malloc(nl * 4 + lse_tail);
    if (!then[p][0] || !then[p][1]) abort();
    tu_buffer_read(queue, tp[p].buffer, then[p][0], tp[p].bytes);
    tu_buffer_read(queue, lp[p], then[p][1], nl * 4 + lse_tail);
  }
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = s->batch; d.seqlen_q = s->sq; d.seqlen_k = s->sq;
  d.heads_q = s->hq; d.heads_kv = s->hq; d.head_dim = s->dv; d.head_dim_v = s->dv;
  d.cu_seqlens_q = cuq;
  const tu_tensor *out = m->inplace ? &tp[0] : &to;
  cl_mem lse_buf = m->inplace ? (m->no_lse ? NULL : lp[0]) : lse_out;
  const fcl_status st = fcl_attention_merge(ctx, &d, m->n, views, lp, &out->t, lse_buf);
  if (st != FCL_OK) {
    oh_append(why, nwhy, " merge: %s: %s;", fcl_status_string(st), fcl_context_last_error(ctx));
    fail = 1;
    goto done;
  }
  if (tu_cl_check(clFinish(queue), "clFinish")) {
    oh_append(why, nwhy, " clFinish failed;");
    fail = 1;
    goto done;
  }
  size_t first = 0;
  const long bad = tu_tensor_read(queue, out, o, &first);
  if (bad) {
    oh_append(why, nwhy, " o: %ld bytes outside the view written (first at byte %zu);", bad, first);
    fail = 1;
  }
  if (lse_buf) {
    long tail_bad = 0;
    if (tu_buffer_read_f32(queue, lse_buf, lse, nl, lse_tail, &tail_bad)) fail = 1;
    if (tail_bad) {
      oh_append(why, nwhy, " lse: %ld bytes past its end written;", tail_bad);
      fail = 1;
    }
  }
  for (int p = m->inplace ? 1 : 0; p < m->n; ++p) {
    unsigned char *a = malloc(tp[p].bytes), *b = malloc(nl * 4 + lse_tail);
    if (!a || !b) abort();
    tu_buffer_read(queue, tp[p].buffer, a, tp[p].bytes);
    tu_buffer_read(queue, lp[p], b, nl * 4 + lse_tail);
    if (memcmp(a, then[p][0], tp[p].bytes) || memcmp(b, then[p][1], nl * 4 + lse_tail)) {
      oh_append(why, nwhy, " part %d modified;", p);
      fail = 1;
    }
    free(a); free(b);
  }
done:
  for (int p = 0; p < m->n; ++p) {
    tu_tensor_release(&tp[p]);
    if (lp[p]) clReleaseMemObject(lp[p]);
    free(then[p][0]); free(then[p][1]);
  }
  tu_tensor_release(&to);
  if (lse_out) clReleaseMemObject(lse_out);
  if (cuq) clReleaseMemObject(cuq);
  return fail;
}

static fcl_dtype coarser(fcl_dtype a, fcl_dtype b) {
  if (a == FCL_BF16 || b == FCL_BF16) return FCL_BF16;
  return a == FCL_F16 || b == FCL_F16 ? FCL_F16 : FCL_F32;
}

static int merge_case_run(fcl_context *ctx, const merge_case *m, uint64_t seed) {
  const double t0 = tu_now();
  char why[1024] = "", notes[256] = "";
  int ok = 1;
  tu_rng g;
  tu_rng_seed(&g, seed);
  /* Shapes: dense b2 sq5 h4 (keys 47, heads_kv 2, d 64 and dv 64 for the
   * forwards: the head dims of test_kvcache's prefill programs; made-up
   * parts dv 40), or varlen. */
  static const int32_t lq[3] = {4, 0, 7}, lk[3] = {30, 9, 3};
  int32_t cuq[4], cuk[4];
  ref_attention_problem a;
  memset(&a, 0, sizeof a);
  if (m->varlen) oh_attention_varlen(&a, 3, lq, lk, cuq, cuk);
  else { a.batch = 2; a.seqlen_q = 5; a.seqlen_k = 47; }
  a.heads_q = 4; a.heads_kv = 2; a.head_dim = 64; a.head_dim_v = m->from_forward ? 64 : 40;
  a.window_left = a.window_right = -1;
  a.softcap = m->from_forward && !m->varlen ? 6.0 : 0.0;
  merge_shape s = {a.batch, a.seqlen_q, a.heads_q, a.head_dim_v, 0, m->varlen ? cuq : NULL};
  s.tokens = m->varlen ? cuq[a.batch] : a.batch * a.seqlen_q;
  const size_t no = (size_t)(s.tokens * s.hq * s.dv), nl = (size_t)(s.tokens * s.hq);
  double *parts[MAX_PARTS], *lses[MAX_PARTS];
  for (int p = 0; p < m->n; ++p) {
    parts[p] = dalloc(no);
    lses[p] = dalloc(nl);
  }
  double *o_whole = NULL, *l_whole = NULL, bound = 0.0, vmax = 0.0;

  if (m->from_forward) {
    const oh_attention_sizes n = oh_attention_count(&a);
    double *q = dalloc(n.q), *k = dalloc(n.k), *v = dalloc(n.v);
    tu_fill_uniform(&g, q, n.q, -2.5, 2.5);
    tu_fill_uniform(&g, k, n.k, -2.5, 2.5);
    tu_fill_uniform(&g, v, n.v, -1.0, 1.0);
    tu_round_array(q, n.q, m->dt_parts);
    tu_round_array(k, n.k, m->dt_parts);
    tu_round_array(v, n.v, m->dt_parts);
    for (size_t i = 0; i < n.v; ++i) vmax = fmax(vmax, fabs(v[i]));
    o_whole = dalloc(n.o);
    l_whole = dalloc(n.lse);
    ref_attention_forward(&a, q, k, v, o_whole, l_whole);
    bound = ref_attention_logit_bound(&a, q, k);
    const int64_t HK = a.heads_kv, D = a.head_dim, DV = a.head_dim_v;
    for (int p = 0; p < m->n && ok; ++p) {
      /* Part p: keys [len * p / n, len * (p + 1) / n) of every sequence. */
      ref_attention_problem pp = a;
      int32_t plk[3], pcuq[4], pcuk[4];
      const int nb = (int)a.batch;
      double *kp = dalloc(n.k), *vp = dalloc(n.v);
      int64_t at = 0;
      for (int b = 0; b < nb; ++b) {
        const int64_t len = m->varlen ? lk[b] : a.seqlen_k;
        const int64_t k0 = m->varlen ? cuk[b] : b * a.seqlen_k;
        const int64_t lo = len * p / m->n, hi = len * (p + 1) / m->n;
        plk[b] = (int32_t)(hi - lo);
        memcpy(kp + at * HK * D, k + (k0 + lo) * HK * D,
               sizeof(double) * (size_t)((hi - lo) * HK * D));
        memcpy(vp + at * HK * DV, v + (k0 + lo) * HK * DV,
               sizeof(double) * (size_t)((hi - lo) * HK * DV));
        at += hi - lo;
      }
      if (m->varlen) oh_attention_varlen(&pp, nb, lq, plk, pcuq, pcuk);
      else pp.seqlen_k = plk[0];
      pp.heads_q = a.heads_q; pp.heads_kv = a.heads_kv;
      pp.head_dim = a.head_dim; pp.head_dim_v = a.head_dim_v;
      const oh_attention_in in = {q, kp, vp, NULL};
      oh_attention_out out = {parts[p], lses[p], NULL, NULL, NULL, 0.0, 0.0, 0, 0};
      if (oh_attention_run(ctx, &pp, m->dt_parts, NULL, &in, &out, why, sizeof why)) {
        oh_append(why, sizeof why, " (the forward of part %d);", p);
        ok = 0;
      }
      free(kp); free(vp);
    }
    free(q); free(k); free(v);
  } else {
    /* Made-up parts: some -inf; row (token 0, head 0) -inf in every part;
     * part 1 of row (token 0, head 1) 100 below part 0. */
    for (int p = 0; p < m->n; ++p) {
      tu_fill_uniform(&g, parts[p], no, -1.0, 1.0);
      tu_round_array(parts[p], no, m->dt_parts);
      for (size_t i = 0; i < nl; ++i) {
        lses[p][i] = (double)(float)tu_rng_range(&g, -5.0, 30.0);
        if (tu_rng_int(&g, 0, 4) == 0) lses[p][i] = -INFINITY;
      }
      lses[p][lse_index(&s, 0, 0)] = -INFINITY;
      if (p == 0) lses[p][lse_index(&s, 0, 1)] = 20.0;
      else lses[p][lse_index(&s, 0, 1)] = 20.0 - 100.0 * p;
    }
    for (size_t i = 0; i < no; ++i)
      for (int p = 0; p < m->n; ++p) vmax = fmax(vmax, fabs(parts[p][i]));
  }

  double *o_ref = dalloc(no), *l_ref = dalloc(nl), *o = dalloc(no), *l = dalloc(nl);
  if (ok) {
    ref_attention_merge(m->n, s.batch, s.sq, s.hq, s.dv, s.cuq, (const double *const *)parts,
                        (const double *const *)lses, o_ref, l_ref);
    ok = device_merge(ctx, m, &s, parts, lses, o, l, why, sizeof why) == 0;
  }
  if (ok) {
    const int with_lse = !m->no_lse;
    const int64_t odims[4] = {m->varlen ? 1 : s.batch, m->varlen ? s.tokens : s.sq, s.hq, s.dv};
    tu_cmp co, cl;
    ok &= oh_check_dims("o (against the merge of the parts)", o, o_ref, no,
                        tu_tol_output(m->dt_o), 0, odims, 4, &co, why, sizeof why);
    oh_append(notes, sizeof notes, " o err %.2e (%.0f%%)", co.max_err, 100.0 * co.worst_ratio);
    if (with_lse) {
      ok &= oh_check("lse (against the merge of the parts)", l, l_ref, nl, tu_tol_lse(), 1, why,
                     sizeof why);
      cl = tu_compare(l, l_ref, nl, tu_tol_lse(), 1);
      oh_append(notes, sizeof notes, " lse err %.2e", cl.max_err);
    }
    if (o_whole) {
      const fcl_dtype dt = coarser(m->dt_parts, m->dt_o);
      const tu_tol tol_o = tu_tol_with_logits(tu_tol_output(dt), bound, a.head_dim, vmax);
      const tu_tol tol_l = tu_tol_with_logits(tu_tol_lse(), bound, a.head_dim, 0.0);
      ok &= oh_check_dims("o (against the whole forward)", o, o_whole, no, tol_o, 0, odims, 4, &co,
                          why, sizeof why);
      if (with_lse)
        ok &= oh_check("lse (against the whole forward)", l, l_whole, nl, tol_l, 1, why,
                       sizeof why);
      oh_append(notes, sizeof notes, " | whole: o err %.2e (%.0f%%)", co.max_err,
                100.0 * co.worst_ratio);
    }
    /* Rows whose parts are all -inf: exactly 0 (lse -inf is compared above). */
    size_t empty = 0, nonzero = 0;
    for (int64_t t = 0; t < s.tokens; ++t)
      for (int64_t h = 0; h < s.hq; ++h) {
        if (l_ref[lse_index(&s, t, h)] != -INFINITY) continue;
        ++empty;
        for (int64_t e = 0; e < s.dv; ++e)
          if (o[(t * s.hq + h) * s.dv + e] != 0.0) {
            ++nonzero;
            break;
          }
      }
    if (nonzero) {
      oh_append(why, sizeof why, " %zu of %zu rows whose parts are all -inf are not 0;", nonzero,
                empty);
      ok = 0;
    }
    oh_append(notes, sizeof notes, " empty rows %zu", empty);
  }
  printf("%s merge %s: n %d, parts %s, o %s%s%s%s%s |%s%s | %.2f s\n", ok ? "PASS" : "FAIL",
         m->name, m->n, tu_dtype_name(m->dt_parts), tu_dtype_name(m->dt_o),
         m->varlen ? ", varlen" : "", m->inplace ? ", in place" : "",
         m->no_lse ? ", lse NULL" : "", m->mixed_layouts ? ", mixed layouts" : "", why, notes,
         tu_now() - t0);
  fflush(stdout);
  for (int p = 0; p < m->n; ++p) {
    free(parts[p]);
    free(lses[p]);
  }
  free(o_whole); free(l_whole); free(o_ref); free(l_ref); free(o); free(l);
  return ok;
}

void kv_merge_tests(fcl_context *ctx, int *run, int *failed) {
  static const merge_case cases[] = {
    /* Split forwards. */
    {"split forward", 1, FCL_F32, FCL_F32, 0, 0, 0, 0, 1},
    {"split forward", 2, FCL_F32, FCL_F32, 0, 0, 0, 0, 1},
    {"split forward", 5, FCL_F32, FCL_F32, 0, 0, 0, 0, 1},
    {"split forward", 2, FCL_F16, FCL_F16, 0, 0, 0, 0, 1},
    {"split forward", 5, FCL_BF16, FCL_BF16, 0, 0, 0, 0, 1},
    {"split forward", 3, FCL_F32, FCL_F16, 0, 0, 0, 0, 1},
    {"split forward", 3, FCL_F32, FCL_F32, 0, 1, 0, 0, 1},
    {"split forward", 2, FCL_F16, FCL_F16, 0, 1, 0, 0, 1},
    {"split forward", 5, FCL_F32, FCL_F32, 1, 0, 0, 0, 1},
    {"split forward", 2, FCL_F16, FCL_BF16, 1, 0, 0, 0, 1},
    /* Made-up parts. */
    {"made-up parts", 1, FCL_F32, FCL_F32, 0, 0, 0, 0, 0},
    {"made-up parts", 2, FCL_F32, FCL_F32, 0, 0, 0, 1, 0},
    {"made-up parts", 5, FCL_F32, FCL_F32, 0, 0, 0, 1, 0},
    {"made-up parts", 2, FCL_F16, FCL_F16, 0, 0, 0, 0, 0},
    {"made-up parts", 5, FCL_BF16, FCL_BF16, 0, 0, 0, 1, 0},
    {"made-up parts", 3, FCL_F32, FCL_F16, 0, 0, 0, 1, 0},
    {"made-up parts", 3, FCL_F32, FCL_BF16, 1, 0, 0, 0, 0},
    {"made-up parts", 2, FCL_BF16, FCL_F32, 0, 0, 0, 0, 0},
    {"made-up parts", 2, FCL_F16, FCL_F32, 1, 0, 1, 0, 0},
    {"made-up parts", 5, FCL_F32, FCL_F32, 0, 1, 0, 1, 0},
    {"made-up parts", 3, FCL_BF16, FCL_BF16, 1, 1, 0, 0, 0},
    {"made-up parts", 2, FCL_F16, FCL_F16, 0, 1, 1, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char name[64];
    snprintf(name, sizeof name, "merge %s", cases[i].name);
    if (!oh_selected(name)) continue;
    ++*run;
    *failed += !merge_case_run(ctx, &cases[i], oh_case_seed(name, cases[i].dt_parts) + i);
  }
}
