/* Plans and the context's cache of them (include/flashcl.h, "Plans").
 *
 *  - A token loop: S decode steps of a batch against a contiguous cache,
 *    each appending one token, with everything that changes from step to
 *    step (q, k_new, v_new, cache_seqlens) copied into the same buffers on
 *    the device and no host wait until the end: through the calls (one
 *    plan made, then reused), through one fcl_attention_kvcache_plan run
 *    every step, and with the cache off. Every step's o against the double
 *    reference; the three runs bit-identical.
 *  - Staleness: one call, then the same buffers with one thing changed
 *    (each descriptor field that changes the result, the lse buffer, a
 *    view's offset and strides, the dtype, a buffer of another size):
 *    each takes a new plan and gives the reference's result; the same
 *    call again reuses its plan.
 *  - Released buffers: the context holds the buffers of its cached plans
 *    and lets go of one a few calls after its caller releases it.
 *  - Public plans: bad arguments as the calls report them; a plan keeps
 *    its buffers alive after the caller releases them.
 *  - Dropout: calls differing in seed or offset share a plan (plan_dropout.c).
 * It reads the context's plan counters (core.h), so it links the static
 * library. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/plan.h"
#include "ref_kvcache.h"
#include "test_util.h"

static int failures;
int test_dropout_plans(fcl_context *ctx); /* plan_dropout.c */
#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) {                                             \
      failures++;                                              \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);              \
      printf(__VA_ARGS__);                                     \
      printf("\n");                                            \
    }                                                          \
  } while (0)

enum { B = 2, HQ = 4, HKV = 2, D = 32, CAP = 48, STEPS = 6 };
static const int32_t start_len[B] = {5, 17};

/* The host side of a problem: the cache as the device holds it, dense. */
typedef struct {
  fcl_dtype t;
  size_t    es;
  double   *kc, *vc;          /* [B][CAP][HKV][D] */
  double   *q, *kn, *vn;      /* [STEPS][B][HKV or HQ][D] */
  cl_mem    bkc, bvc, bq_all, bkn_all, bvn_all, blens_all;
  cl_mem    bq, bkn, bvn, bo, blse, blens, bo_all;
} problem;

static void encode_all(const double *x, size_t n, fcl_dtype t, void *out) {
  for (size_t i = 0; i < n; ++i) tu_encode((char *)out + i * tu_dtype_size(t), x[i], t);
}

static cl_mem upload(cl_context c, cl_command_queue q, const double *x, size_t n, fcl_dtype t) {
  void *h = malloc(n * tu_dtype_size(t));
  encode_all(x, n, t, h);
  cl_mem m = tu_buffer_from(c, q, h, n * tu_dtype_size(t));
  free(h);
  return m;
}

static void problem_make(fcl_context *ctx, fcl_dtype t, uint64_t seed, problem *p) {
  cl_context c = fcl_context_cl(ctx);
  cl_command_queue q = fcl_context_queue(ctx);
  tu_rng r;
  tu_rng_seed(&r, seed);
  memset(p, 0, sizeof *p);
  p->t = t, p->es = tu_dtype_size(t);
  const size_t ncache = (size_t)B * CAP * HKV * D, nq = (size_t)STEPS * B * HQ * D,
               nkv = (size_t)STEPS * B * HKV * D;
  p->kc = calloc(ncache, 8), p->vc = calloc(ncache, 8);
  p->q = malloc(nq * 8), p->kn = malloc(nkv * 8), p->vn = malloc(nkv * 8);
  tu_fill_uniform(&r, p->kc, ncache, -1, 1);
  tu_fill_uniform(&r, p->vc, ncache, -1, 1);
  tu_fill_uniform(&r, p->q, nq, -1, 1);
  tu_fill_uniform(&r, p->kn, nkv, -1, 1);
  tu_fill_uniform(&r, p->vn, nkv, -1, 1);
  tu_round_array(p->kc, ncache, t), tu_round_array(p->vc, ncache, t);
  tu_round_array(p->q, nq, t), tu_round_array(p->kn, nkv, t), tu_round_array(p->vn, nkv, t);
  p->bkc = upload(c, q, p->kc, ncache, t), p->bvc = upload(c, q, p->vc, ncache, t);
  p->bq_all = upload(c, q, p->q, nq, t);
  p->bkn_all = upload(c, q, p->kn, nkv, t), p->bvn_all = upload(c, q, p->vn, nkv, t);
  int32_t lens[STEPS][B];
  for (int s = 0; s < STEPS; ++s)
    for (int b = 0; b < B; ++b) lens[s][b] = start_len[b] + s;
  p->blens_all = tu_buffer_from(c, q, lens, sizeof lens);
  p->bq = tu_buffer_poison(c, q, (size_t)B * HQ * D * p->es);
  p->bkn = tu_buffer_poison(c, q, (size_t)B * HKV * D * p->es);
  p->bvn = tu_buffer_poison(c, q, (size_t)B * HKV * D * p->es);
  p->bo = tu_buffer_poison(c, q, (size_t)B * HQ * D * p->es);
  p->blse = tu_buffer_poison(c, q, (size_t)B * HQ * 4);
  p->blens = tu_buffer_from(c, q, lens[0], sizeof lens[0]);
  p->bo_all = tu_buffer_poison(c, q, (size_t)STEPS * B * HQ * D * p->es);
}

static void problem_free(problem *p) {
  cl_mem m[] = {p->bkc, p->bvc, p->bq_all, p->bkn_all, p->bvn_all, p->blens_all,
                p->bq, p->bkn, p->bvn, p->bo, p->blse, p->blens, p->bo_all};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; ++i)
    if (m[i]) clReleaseMemObject(m[i]);
  free(p->kc), free(p->vc), free(p->q), free(p->kn), free(p->vn);
}

static fcl_kvcache_desc desc_of(const problem *p) {
  fcl_kvcache_desc d = FCL_KVCACHE_DESC_INIT;
  d.batch = B, d.seqlen_q = 1, d.heads_q = HQ, d.heads_kv = HKV, d.head_dim = D;
  d.head_dim_v = D, d.cache_capacity = CAP, d.cache_seqlens = p->blens, d.causal = 1;
  return d;
}

static fcl_tensor view(cl_mem m, fcl_dtype t, int64_t seq, int64_t heads) {
  return (fcl_tensor){m, 0, t, {seq * heads * D, heads * D, D, 1}};
}

/* Enqueues step s's inputs into the fixed buffers (device copies only). */
static void stage_step(cl_command_queue q, const problem *p, int s) {
  const size_t nq = (size_t)B * HQ * D * p->es, nkv = (size_t)B * HKV * D * p->es;
  clEnqueueCopyBuffer(q, p->bq_all, p->bq, s * nq, 0, nq, 0, NULL, NULL);
  clEnqueueCopyBuffer(q, p->bkn_all, p->bkn, s * nkv, 0, nkv, 0, NULL, NULL);
  clEnqueueCopyBuffer(q, p->bvn_all, p->bvn, s * nkv, 0, nkv, 0, NULL, NULL);
  clEnqueueCopyBuffer(q, p->blens_all, p->blens, (size_t)s * B * 4, 0, B * 4, 0, NULL, NULL);
}

/* The reference of step s: the cache holds steps 0..s's tokens. o [B][HQ][D]. */
static double step_reference(const problem *p, int s, double *o) {
  int32_t c[B], n[B] = {1, 1};
  int64_t total = 0;
  for (int b = 0; b < B; ++b) c[b] = start_len[b] + s, total += c[b];
  double *kcd = malloc((size_t)total * HKV * D * 8), *vcd = malloc((size_t)total * HKV * D * 8);
  size_t at = 0;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < c[b]; ++j, ++at) {
      const int step = j - start_len[b]; /* >= 0: appended at that step */
      for (int e = 0; e < HKV * D; ++e) {
        const size_t src = ((size_t)b * CAP + j) * HKV * D + e;
        const size_t nsrc = (((size_t)step * B + b) * HKV * D) + e;
        kcd[at * HKV * D + e] = step >= 0 ? p->kn[nsrc] : p->kc[src];
        vcd[at * HKV * D + e] = step >= 0 ? p->vn[nsrc] : p->vc[src];
      }
    }
  const ref_kvcache_problem rp = {.batch = B, .heads_q = HQ, .heads_kv = HKV, .head_dim = D,
                                  .head_dim_v = D, .causal = 1, .window_left = -1,
                                  .window_right = -1, .cache_seqlens = c, .new_lens = n,
                                  .append = 1, .seqlen_q = 1};
  const double *q = p->q + (size_t)s * B * HQ * D, *kn = p->kn + (size_t)s * B * HKV * D,
               *vn = p->vn + (size_t)s * B * HKV * D;
  const double bound = ref_kvcache_forward(&rp, q, kcd, vcd, kn, vn, o, NULL);
  free(kcd), free(vcd);
  return bound;
}

/* LOOP_PLAN runs a public plan from a command buffer where the device
 * offers cl_khr_command_buffer (as FCL_COMMAND_BUFFER=1 asks);
 * LOOP_PLAN_LAUNCHES the same plan's launches one by one (the default). */
typedef enum { LOOP_CALLS, LOOP_PLAN, LOOP_NO_CACHE, LOOP_PLAN_LAUNCHES, LOOP_KINDS } loop_kind;

/* Runs the S steps one way; reads every step's o into out [STEPS][B][HQ][D]. */
static int token_loop(fcl_context *ctx, fcl_dtype t, loop_kind kind, double *out) {
  cl_command_queue q = fcl_context_queue(ctx);
  problem p;
  problem_make(ctx, t, 42, &p);
  fcl_kvcache_desc d = desc_of(&p);
  const fcl_tensor tq = view(p.bq, t, 1, HQ), to = view(p.bo, t, 1, HQ);
  const fcl_tensor tkn = view(p.bkn, t, 1, HKV), tvn = view(p.bvn, t, 1, HKV);
  const fcl_tensor tkc = view(p.bkc, t, CAP, HKV), tvc = view(p.bvc, t, CAP, HKV);
  fcl_context_set_option(ctx, FCL_OPTION_PLAN_CACHE, kind == LOOP_NO_CACHE ? 0 : 256);
  const long made = ctx->plans_made, reused = ctx->plans_reused;
  fcl_plan *plan = NULL;
  fcl_status st = FCL_OK;
  const bool cmdbuf = ctx->opt.command_buffer;
  ctx->opt.command_buffer = kind != LOOP_PLAN_LAUNCHES;
  if (kind == LOOP_PLAN || kind == LOOP_PLAN_LAUNCHES) {
    st = fcl_attention_kvcache_plan(ctx, &d, &tq, &tkc, &tvc, &tkn, &tvn, &to, p.blse, &plan);
    if (st == FCL_OK)
      CHECK(!plan->cb == (kind == LOOP_PLAN_LAUNCHES || !fcl_cmdbuf_available(ctx)),
            "token loop (%d): the plan %s a command buffer", (int)kind,
            plan->cb ? "has" : "has no");
  }
  const size_t no = (size_t)B * HQ * D * p.es;
  for (int s = 0; s < STEPS && st == FCL_OK; ++s) {
    stage_step(q, &p, s);
    st = plan ? fcl_plan_run(plan)
              : fcl_attention_kvcache(ctx, &d, &tq, &tkc, &tvc, &tkn, &tvn, &to, p.blse);
    clEnqueueCopyBuffer(q, p.bo, p.bo_all, 0, s * no, no, 0, NULL, NULL);
  }
  CHECK(st == FCL_OK, "token loop (%d): %s", (int)kind, fcl_context_last_error(ctx));
  if (kind == LOOP_CALLS)
    CHECK(ctx->plans_made == made + 1 && ctx->plans_reused == reused + STEPS - 1,
          "token loop through the calls: %ld plans made, %ld reused; want 1 and %d",
          ctx->plans_made - made, ctx->plans_reused - reused, STEPS - 1);
  const size_t n = (size_t)STEPS * B * HQ * D;
  void *h = malloc(n * p.es);
  int ok = st == FCL_OK && tu_buffer_read(q, p.bo_all, h, n * p.es) == 0;
  for (size_t i = 0; ok && i < n; ++i) out[i] = tu_decode((char *)h + i * p.es, t);
  free(h);
  double ref[B * HQ * D];
  for (int s = 0; ok && s < STEPS; ++s) {
    const double bound = step_reference(&p, s, ref);
    const tu_tol tol = tu_tol_with_logits(tu_tol_output(t), bound, D, 1.0);
    const tu_cmp cmp = tu_compare(out + (size_t)s * B * HQ * D, ref, B * HQ * D, tol, 0);
    CHECK(cmp.ok, "token loop (%d) %s step %d: o off the reference", (int)kind,
          tu_dtype_name(t), s);
    if (!cmp.ok) tu_print_cmp("o", &cmp, NULL, 0);
  }
  fcl_plan_destroy(plan);
  ctx->opt.command_buffer = cmdbuf;
  fcl_context_set_option(ctx, FCL_OPTION_PLAN_CACHE, 256);
  problem_free(&p);
  return ok;
}

static void test_token_loop(fcl_context *ctx) {
  const fcl_dtype types[] = {FCL_F16, FCL_F32};
  for (int i = 0; i < 2; ++i) {
    const size_t n = (size_t)STEPS * B * HQ * D;
    double *o[LOOP_KINDS];
    int ok = 1;
    for (int k = 0; k < LOOP_KINDS; ++k) {
      o[k] = malloc(n * 8);
      ok &= token_loop(ctx, types[i], (loop_kind)k, o[k]);
    }
    for (int k = 1; k < LOOP_KINDS; ++k) ok &= !memcmp(o[0], o[k], n * 8);
    CHECK(ok, "token loop %s: calls, a plan (from a command buffer and launch by launch) and "
              "no cache differ", tu_dtype_name(types[i]));
    printf("token loop %s: %d steps through the calls, a plan (%s, and launch by launch) and "
           "no cache: %s\n",
           tu_dtype_name(types[i]), STEPS,
           fcl_cmdbuf_available(ctx) ? "from a command buffer" : "no command buffers here",
           failures ? "FAIL" : "ok");
    for (int k = 0; k < LOOP_KINDS; ++k) free(o[k]);
  }
}

/* ---- staleness ---------------------------------------------------------- */

/* One call of the staleness cases: its descriptor and views. */
typedef struct {
  const char      *what;
  fcl_kvcache_desc d;
  fcl_tensor       q, kc, vc, o;
  cl_mem           lse;
} stale_case;

/* Writes dense x [rows][heads][D] (rows = slots * tokens) into buf as view
 * v lays it out (tokens a slot), zeros elsewhere. */
static void write_view(cl_command_queue q, cl_mem buf, const fcl_tensor *v, const double *x,
                       int64_t slots, int64_t tokens, int64_t heads) {
  const size_t es = tu_dtype_size(v->dtype), bytes = fcl_buffer_size(buf);
  char *h = calloc(1, bytes);
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t hh = 0; hh < heads; ++hh)
        for (int64_t e = 0; e < D; ++e) {
          const int64_t at = (int64_t)(v->offset / es) + s * v->strides[0] +
                             t * v->strides[1] + hh * v->strides[2] + e;
          tu_encode(h + at * es, x[((s * tokens + t) * heads + hh) * D + e], v->dtype);
        }
  clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, bytes, h, 0, NULL, NULL);
  free(h);
}

/* The reference of a staleness case: no append, step 0's lengths. */
static double stale_reference(const problem *p, const fcl_kvcache_desc *d, const double *alibi,
                              double *o, double *lse) {
  int32_t n[B] = {1, 1};
  int64_t total = 0;
  for (int b = 0; b < B; ++b) total += start_len[b];
  double *kcd = malloc((size_t)total * HKV * D * 8), *vcd = malloc((size_t)total * HKV * D * 8);
  size_t at = 0;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < start_len[b]; ++j, ++at) {
      memcpy(kcd + at * HKV * D, p->kc + ((size_t)b * CAP + j) * HKV * D, HKV * D * 8);
      memcpy(vcd + at * HKV * D, p->vc + ((size_t)b * CAP + j) * HKV * D, HKV * D * 8);
    }
  const ref_kvcache_problem rp = {
      .batch = B, .heads_q = HQ, .heads_kv = HKV, .head_dim = D, .head_dim_v = D,
      .softmax_scale = d->softmax_scale, .causal = d->causal, .window_left = d->window_left,
      .window_right = d->window_right, .softcap = d->softcap,
      .alibi_slopes = d->alibi_slopes ? alibi : NULL, .cache_seqlens = start_len,
      .new_lens = n, .append = 0, .seqlen_q = 1};
  const double bound = ref_kvcache_forward(&rp, p->q, kcd, vcd, NULL, NULL, o, lse);
  free(kcd), free(vcd);
  return bound;
}

/* Runs c twice: the first must make a plan, the second reuse it, both the
 * reference's result, bit-identical. */
static void stale_run(fcl_context *ctx, const problem *p, const stale_case *c,
                      const double *alibi) {
  cl_command_queue q = fcl_context_queue(ctx);
  const fcl_dtype t = p->t;
  write_view(q, c->kc.buffer, &c->kc, p->kc, B, CAP, HKV);
  write_view(q, c->vc.buffer, &c->vc, p->vc, B, CAP, HKV);
  write_view(q, c->q.buffer, &c->q, p->q, B, 1, HQ);
  double ref_o[B * HQ * D], ref_l[B * HQ], got[2][B * HQ * D], got_l[2][B * HQ];
  const double bound = stale_reference(p, &c->d, alibi, ref_o, ref_l);
  const long made = ctx->plans_made, reused = ctx->plans_reused;
  int ok = 1;
  for (int run = 0; run < 2; ++run) {
    const fcl_status st =
        fcl_attention_kvcache(ctx, &c->d, &c->q, &c->kc, &c->vc, NULL, NULL, &c->o, c->lse);
    CHECK(st == FCL_OK, "%s %s: %s", c->what, tu_dtype_name(t), fcl_context_last_error(ctx));
    const size_t es = tu_dtype_size(t), no = (size_t)B * HQ * D;
    char *h = malloc(fcl_buffer_size(c->o.buffer));
    ok &= st == FCL_OK && tu_buffer_read(q, c->o.buffer, h, fcl_buffer_size(c->o.buffer)) == 0;
    for (size_t i = 0; i < no; ++i) got[run][i] = tu_decode(h + c->o.offset + i * es, t);
    free(h);
    if (c->lse) ok &= tu_buffer_read_f32(q, c->lse, got_l[run], B * HQ, 0, NULL) == 0;
  }
  CHECK(ctx->plans_made == made + 1 && ctx->plans_reused == reused + 1,
        "%s %s: %ld plans made, %ld reused; want 1 and 1", c->what, tu_dtype_name(t),
        ctx->plans_made - made, ctx->plans_reused - reused);
  const tu_cmp co = tu_compare(got[0], ref_o, B * HQ * D,
                               tu_tol_with_logits(tu_tol_output(t), bound, D, 1.0), 0);
  CHECK(ok && co.ok, "%s %s: o off the reference", c->what, tu_dtype_name(t));
  if (!co.ok) tu_print_cmp("o", &co, NULL, 0);
  CHECK(!memcmp(got[0], got[1], sizeof got[0]), "%s %s: a reused plan gave other bits",
        c->what, tu_dtype_name(t));
  if (c->lse) {
    const tu_cmp cl = tu_compare(got_l[0], ref_l, B * HQ,
                                 tu_tol_with_logits(tu_tol_lse(), bound, D, 1.0), 1);
    CHECK(cl.ok, "%s %s: lse off the reference", c->what, tu_dtype_name(t));
  }
}

static void test_staleness(fcl_context *ctx, fcl_dtype t) {
  cl_context cc = fcl_context_cl(ctx);
  cl_command_queue q = fcl_context_queue(ctx);
  problem p;
  problem_make(ctx, t, 7, &p);
  const int32_t lens[B] = {start_len[0], start_len[1]};
  clEnqueueWriteBuffer(q, p.blens, CL_TRUE, 0, sizeof lens, lens, 0, NULL, NULL);
  double alibi[HQ] = {0.5, 0.25, 0.125, 0.0625};
  float alibi_f[HQ];
  for (int h = 0; h < HQ; ++h) alibi_f[h] = (float)alibi[h];
  cl_mem balibi = tu_buffer_from(cc, q, alibi_f, sizeof alibi_f);
  /* Room for views with offsets and gaps. */
  const size_t es = p.es;
  cl_mem bq2 = tu_buffer_poison(cc, q, (size_t)(B * HQ * D * 2 + D) * es);
  cl_mem bo2 = tu_buffer_poison(cc, q, (size_t)(B * HQ * D + 64) * es);
  const fcl_kvcache_desc base = desc_of(&p);
  const stale_case c0 = {"base", base, view(p.bq, t, 1, HQ), view(p.bkc, t, CAP, HKV),
                         view(p.bvc, t, CAP, HKV), view(p.bo, t, 1, HQ), p.blse};
  stale_case cs[14];
  int n = 0;
  cs[n++] = c0;
  cs[n] = c0, cs[n].what = "causal 0", cs[n++].d.causal = 0;
  cs[n] = c0, cs[n].what = "window_left 3", cs[n++].d.window_left = 3;
  cs[n] = c0, cs[n].what = "window_right 0, causal 0", cs[n].d.causal = 0,
  cs[n++].d.window_right = 0;
  cs[n] = c0, cs[n].what = "softcap 2", cs[n++].d.softcap = 2.0f;
  cs[n] = c0, cs[n].what = "softmax_scale 0.4", cs[n++].d.softmax_scale = 0.4f;
  cs[n] = c0, cs[n].what = "alibi_slopes", cs[n++].d.alibi_slopes = balibi;
  cs[n] = c0, cs[n].what = "num_splits 3", cs[n++].d.num_splits = 3;
  cs[n] = c0, cs[n].what = "lse NULL", cs[n++].lse = NULL;
  cs[n] = c0, cs[n].what = "q offset", cs[n].q = view(bq2, t, 1, HQ), cs[n++].q.offset = D * es;
  cs[n] = c0, cs[n].what = "q head stride", cs[n].q = view(bq2, t, 1, HQ),
  cs[n].q.strides[2] = 2 * D, cs[n].q.strides[0] = cs[n].q.strides[1] = 2 * HQ * D, n++;
  cs[n] = c0, cs[n].what = "head-major cache";
  cs[n].kc.strides[1] = cs[n].vc.strides[1] = D, cs[n].kc.strides[2] = cs[n].vc.strides[2] = CAP * D,
  n++;
  cs[n] = c0, cs[n].what = "o in a larger buffer", cs[n++].o = view(bo2, t, 1, HQ);
  for (int i = 0; i < n; ++i) stale_run(ctx, &p, &cs[i], alibi);
  /* The first plan is still kept: the base call again reuses it. */
  const long made = ctx->plans_made;
  fcl_attention_kvcache(ctx, &c0.d, &c0.q, &c0.kc, &c0.vc, NULL, NULL, &c0.o, c0.lse);
  CHECK(ctx->plans_made == made, "the base call again made a plan");
  printf("staleness %s: %d cases, each its own plan: %s\n", tu_dtype_name(t), n,
         failures ? "FAIL" : "ok");
  clReleaseMemObject(balibi), clReleaseMemObject(bq2), clReleaseMemObject(bo2);
  problem_free(&p);
}

static void CL_CALLBACK on_destroyed(cl_mem m, void *flag) {
  (void)m;
  atomic_store((atomic_int *)flag, 1);
}

/* Whether flag is set within 3 s: a driver may run a destructor callback
 * some time after the object goes (NVIDIA's does, from its own thread). */
static int destroyed(atomic_int *flag) {
  const struct timespec ms = {0, 1000000};
  for (int i = 0; i < 3000 && !atomic_load(flag); ++i) nanosleep(&ms, NULL);
  return atomic_load(flag);
}

static cl_mem watched_buffer(fcl_context *ctx, size_t bytes, atomic_int *flag) {
  cl_mem m = tu_buffer_poison(fcl_context_cl(ctx), fcl_context_queue(ctx), bytes);
  atomic_init(flag, 0);
  clSetMemObjectDestructorCallback(m, on_destroyed, flag);
  return m;
}

/* A buffer a cached plan names is released and another made: the context
 * holds the first while the plan is cached (so the second cannot come at
 * its address), the call on the second makes its own plan and writes the
 * second, and the first is let go a few calls later. Setting the plan
 * cache option lets go at once. */
static void test_released_buffers(fcl_context *ctx, fcl_dtype t) {
  cl_command_queue q = fcl_context_queue(ctx);
  fcl_context_set_option(ctx, FCL_OPTION_PLAN_CACHE, 256); /* from an empty cache */
  problem p;
  problem_make(ctx, t, 9, &p);
  const int32_t lens[B] = {start_len[0], start_len[1]};
  clEnqueueWriteBuffer(q, p.blens, CL_TRUE, 0, sizeof lens, lens, 0, NULL, NULL);
  const size_t bytes = fcl_buffer_size(p.bo);
  stale_case c = {"o released and made again", desc_of(&p), view(p.bq, t, 1, HQ),
                  view(p.bkc, t, CAP, HKV), view(p.bvc, t, CAP, HKV), view(p.bo, t, 1, HQ),
                  p.blse};
  int calls = 0;
  for (int round = 0; round < 3; ++round) {
    atomic_int gone;
    cl_mem old = watched_buffer(ctx, bytes, &gone);
    c.o = view(old, t, 1, HQ);
    stale_run(ctx, &p, &c, NULL); /* a plan made for old, then reused */
    clFinish(q);
    clReleaseMemObject(old);
    atomic_int fresh_gone;
    cl_mem fresh = watched_buffer(ctx, bytes, &fresh_gone);
    CHECK(fresh != old && !atomic_load(&gone),
          "round %d: the released buffer not held while its plan is cached", round);
    c.o = view(fresh, t, 1, HQ);
    stale_run(ctx, &p, &c, NULL); /* its own plan, the reference's o in fresh */
    for (int i = 0; i < 64 && !atomic_load(&gone); ++i, ++calls) /* a few calls more */
      fcl_attention_kvcache(ctx, &c.d, &c.q, &c.kc, &c.vc, NULL, NULL, &c.o, c.lse);
    clFinish(q);
    CHECK(destroyed(&gone), "round %d: a released buffer still held after 64 calls", round);
    clReleaseMemObject(fresh);
  }
  /* The option lets go at once: a plan on old, then one on fresh (where
   * kernels retain their arguments, the library's own kernel then holds
   * fresh instead of old), the option, the caller's release. */
  atomic_int gone, fresh_gone;
  cl_mem old = watched_buffer(ctx, bytes, &gone), fresh = watched_buffer(ctx, bytes, &fresh_gone);
  c.o = view(old, t, 1, HQ);
  stale_run(ctx, &p, &c, NULL);
  c.o = view(fresh, t, 1, HQ);
  stale_run(ctx, &p, &c, NULL);
  clFinish(q);
  fcl_context_set_option(ctx, FCL_OPTION_PLAN_CACHE, 256);
  clReleaseMemObject(old);
  CHECK(destroyed(&gone), "setting FCL_OPTION_PLAN_CACHE kept a buffer of a cached plan");
  clReleaseMemObject(fresh);
  printf("released buffers %s: 3 rounds, let go after %d calls more: %s\n", tu_dtype_name(t),
         calls, failures ? "FAIL" : "ok");
  problem_free(&p);
}

/* The context's holds: a buffer named by two plans is retained once and
 * released when neither names it; one its caller released is found. */
static void test_buffer_refs(fcl_context *ctx) {
  atomic_int a_gone, b_gone;
  cl_mem a = watched_buffer(ctx, 256, &a_gone), b = watched_buffer(ctx, 256, &b_gone);
  clFinish(fcl_context_queue(ctx));
  fcl_buffer_refs *r = fcl_refs_new();
  CHECK(r && fcl_refs_add(r, a, 0) && fcl_refs_add(r, b, 0) && fcl_refs_add(r, a, 0),
        "holding two buffers");
  CHECK(fcl_refs_released(r, 8) == NULL, "a buffer its caller holds found released");
  clReleaseMemObject(a);
  CHECK(fcl_refs_released(r, 2) == a, "the released buffer not found");
  fcl_refs_drop(r, a, 0);
  CHECK(!atomic_load(&a_gone), "a buffer a plan still names let go");
  fcl_refs_drop(r, a, 0);
  CHECK(destroyed(&a_gone), "a buffer no plan names still held");
  CHECK(fcl_refs_released(r, 8) == NULL, "b found released");
  fcl_refs_free(r);
  CHECK(!atomic_load(&b_gone), "b destroyed under its caller");
  clReleaseMemObject(b);
  CHECK(destroyed(&b_gone), "b held after the holds ended");
  printf("buffer holds: %s\n", failures ? "FAIL" : "ok");
}

/* ---- public plans -------------------------------------------------------- */

static void test_public_plans(fcl_context *ctx) {
  cl_command_queue q = fcl_context_queue(ctx);
  problem p;
  problem_make(ctx, FCL_F16, 9, &p);
  const int32_t lens[B] = {start_len[0], start_len[1]};
  clEnqueueWriteBuffer(q, p.blens, CL_TRUE, 0, sizeof lens, lens, 0, NULL, NULL);
  fcl_kvcache_desc d = desc_of(&p);
  fcl_tensor tq = view(p.bq, FCL_F16, 1, HQ), to = view(p.bo, FCL_F16, 1, HQ);
  fcl_tensor tkc = view(p.bkc, FCL_F16, CAP, HKV), tvc = view(p.bvc, FCL_F16, CAP, HKV);
  write_view(q, p.bq, &tq, p.q, B, 1, HQ);
  fcl_plan *plan = (fcl_plan *)&d; /* must be cleared on error */
  fcl_status st = fcl_attention_kvcache_plan(ctx, NULL, &tq, &tkc, &tvc, NULL, NULL, &to,
                                             NULL, &plan);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && plan == NULL &&
            strstr(fcl_context_last_error(ctx), "d: is NULL"),
        "plan(d NULL): %s \"%s\"", fcl_status_string(st), fcl_context_last_error(ctx));
  d.head_dim = 0;
  st = fcl_attention_kvcache_plan(ctx, &d, &tq, &tkc, &tvc, NULL, NULL, &to, NULL, &plan);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "head_dim"),
        "plan(head_dim 0): %s \"%s\"", fcl_status_string(st), fcl_context_last_error(ctx));
  d.head_dim = D;
  st = fcl_attention_kvcache_plan(ctx, &d, &tq, &tkc, &tvc, NULL, NULL, &to, NULL, NULL);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT && strstr(fcl_context_last_error(ctx), "out"),
        "plan(out NULL): %s \"%s\"", fcl_status_string(st), fcl_context_last_error(ctx));
  CHECK(fcl_attention_kvcache_plan(NULL, &d, &tq, &tkc, &tvc, NULL, NULL, &to, NULL, &plan) ==
            FCL_ERROR_INVALID_ARGUMENT,
        "plan(ctx NULL) is not INVALID_ARGUMENT");
  CHECK(fcl_plan_run(NULL) == FCL_ERROR_INVALID_ARGUMENT, "plan_run(NULL)");
  fcl_plan_destroy(NULL);

  /* Made: nothing enqueued (o still poison). Then the caches released by
   * the caller: the plan keeps them. */
  st = fcl_attention_kvcache_plan(ctx, &d, &tq, &tkc, &tvc, NULL, NULL, &to, NULL, &plan);
  CHECK(st == FCL_OK, "plan: %s", fcl_context_last_error(ctx));
  CHECK(tu_buffer_poison_left(q, p.bo, 0, (size_t)B * HQ * D * p.es, NULL) == 0,
        "making a plan wrote o");
  clReleaseMemObject(p.bkc), clReleaseMemObject(p.bvc);
  p.bkc = p.bvc = NULL;
  double ref[B * HQ * D], got[B * HQ * D];
  const double bound = stale_reference(&p, &d, NULL, ref, NULL);
  for (int run = 0; st == FCL_OK && run < 2; ++run) {
    st = fcl_plan_run(plan);
    CHECK(st == FCL_OK, "plan_run: %s", fcl_context_last_error(ctx));
    uint16_t h[B * HQ * D];
    tu_buffer_read(q, p.bo, h, sizeof h);
    for (int i = 0; i < B * HQ * D; ++i) got[i] = tu_f16_value(h[i]);
    const tu_cmp c = tu_compare(got, ref, B * HQ * D,
                                tu_tol_with_logits(tu_tol_output(FCL_F16), bound, D, 1.0), 0);
    CHECK(c.ok, "plan_run %d with the caches released by the caller: o off the reference",
          run);
  }
  fcl_plan_destroy(plan);
  printf("public plans: bad arguments, nothing enqueued when made, buffers kept: %s\n",
         failures ? "FAIL" : "ok");
  problem_free(&p);
}

/* Varlen with the host copies of cu_seqlens: the same bits as the call
 * that reads them back, and its plan is kept (the read-back one's is not);
 * a copy that breaks the rules, or one without its device buffer, is
 * refused naming it. Attention forward and RWKV6. */
static void test_varlen_host(fcl_context *ctx) {
  cl_context cc = fcl_context_cl(ctx);
  cl_command_queue q = fcl_context_queue(ctx);
  tu_rng r;
  tu_rng_seed(&r, 12);
  enum { N = 14, H = 2, DA = 16, K = 8 };
  const int32_t cu[3] = {0, 5, N}, bad[3] = {0, 9, 5};
  float x[3 * N * H * DA];
  for (size_t i = 0; i < sizeof x / sizeof x[0]; ++i) x[i] = (float)tu_rng_range(&r, -1, 1);
  cl_mem bx = tu_buffer_from(cc, q, x, sizeof x), bcu = tu_buffer_from(cc, q, cu, sizeof cu);
  cl_mem bo = tu_buffer_poison(cc, q, N * H * DA * 4);
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 2, d.seqlen_q = d.seqlen_k = 9, d.heads_q = d.heads_kv = H;
  d.head_dim = d.head_dim_v = DA, d.causal = 1, d.cu_seqlens_q = d.cu_seqlens_k = bcu;
  fcl_tensor tv[4];
  for (int i = 0; i < 4; ++i)
    tv[i] = (fcl_tensor){i < 3 ? bx : bo, i < 3 ? (size_t)i * N * H * DA * 4 : 0, FCL_F32,
                         {0, H * DA, DA, 1}};
  float want[N * H * DA], got[N * H * DA];
  long made = ctx->plans_made;
  fcl_status st = fcl_attention_forward(ctx, &d, &tv[0], &tv[1], &tv[2], &tv[3], NULL);
  st = st ? st : fcl_attention_forward(ctx, &d, &tv[0], &tv[1], &tv[2], &tv[3], NULL);
  tu_buffer_read(q, bo, want, sizeof want);
  CHECK(st == FCL_OK && ctx->plans_made == made + 2,
        "varlen forward read back, twice: %s, %ld plans made (2: not kept)",
        fcl_context_last_error(ctx), ctx->plans_made - made);
  d.cu_seqlens_q_host = d.cu_seqlens_k_host = cu;
  made = ctx->plans_made;
  const long reused = ctx->plans_reused;
  for (int run = 0; run < 2; ++run) {
    tu_buffer_repoison(q, bo, sizeof got);
    st = fcl_attention_forward(ctx, &d, &tv[0], &tv[1], &tv[2], &tv[3], NULL);
    tu_buffer_read(q, bo, got, sizeof got);
    CHECK(st == FCL_OK && !memcmp(got, want, sizeof got),
          "varlen forward with host copies, run %d: %s, or other bits", run,
          fcl_context_last_error(ctx));
  }
  CHECK(ctx->plans_made == made + 1 && ctx->plans_reused == reused + 1,
        "varlen forward with host copies: %ld plans made, %ld reused (want 1, 1)",
        ctx->plans_made - made, ctx->plans_reused - reused);
  d.cu_seqlens_k_host = bad;
  st = fcl_attention_forward(ctx, &d, &tv[0], &tv[1], &tv[2], &tv[3], NULL);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT &&
            strstr(fcl_context_last_error(ctx), "cu_seqlens_k_host"),
        "a decreasing host copy: %s '%s'", fcl_status_string(st), fcl_context_last_error(ctx));
  d.cu_seqlens_k_host = cu, d.cu_seqlens_q = d.cu_seqlens_k = NULL;
  st = fcl_attention_forward(ctx, &d, &tv[0], &tv[1], &tv[2], &tv[3], NULL);
  CHECK(st == FCL_ERROR_INVALID_ARGUMENT &&
            strstr(fcl_context_last_error(ctx), "cu_seqlens_q_host"),
        "a host copy without its buffer: %s '%s'", fcl_status_string(st),
        fcl_context_last_error(ctx));

  /* RWKV6 over the same packed tokens (r, k, w from x; v, o of K). */
  fcl_rwkv6_desc rd = FCL_RWKV6_DESC_INIT;
  rd.batch = 2, rd.seqlen = 9, rd.heads = H, rd.head_dim_k = rd.head_dim_v = K;
  rd.cu_seqlens = bcu;
  float u[H * K];
  for (int i = 0; i < H * K; ++i) u[i] = (float)tu_rng_range(&r, -1, 1);
  cl_mem bu = tu_buffer_from(cc, q, u, sizeof u);
  fcl_tensor rt[5];
  for (int i = 0; i < 5; ++i)
    rt[i] = (fcl_tensor){i < 4 ? bx : bo, i < 4 ? (size_t)i * N * H * K * 4 : 0, FCL_F32,
                         {0, H * K, K, 1}};
  /* w must be negative (log decay): the fourth view reads x in [-1, 1) */
  tu_buffer_repoison(q, bo, sizeof got);
  st = fcl_rwkv6_forward(ctx, &rd, &rt[0], &rt[1], &rt[2], &rt[3], bu, NULL, &rt[4], NULL);
  tu_buffer_read(q, bo, want, N * H * K * 4);
  rd.cu_seqlens_host = cu;
  made = ctx->plans_made;
  for (int run = 0; run < 2; ++run) {
    tu_buffer_repoison(q, bo, sizeof got);
    const fcl_status s2 =
        fcl_rwkv6_forward(ctx, &rd, &rt[0], &rt[1], &rt[2], &rt[3], bu, NULL, &rt[4], NULL);
    tu_buffer_read(q, bo, got, N * H * K * 4);
    CHECK(st == FCL_OK && s2 == FCL_OK && !memcmp(got, want, N * H * K * 4),
          "rwkv6 varlen with the host copy, run %d: %s, or other bits", run,
          fcl_context_last_error(ctx));
  }
  CHECK(ctx->plans_made == made + 1, "rwkv6 varlen with the host copy: %ld plans made",
        ctx->plans_made - made);
  printf("varlen with host copies of cu_seqlens: %s\n", failures ? "FAIL" : "ok");
  cl_mem m[] = {bx, bcu, bo, bu};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; ++i) clReleaseMemObject(m[i]);
}

/* The other calls' plans: run, they give the call's bits; the call twice
 * reuses its plan. */
static void test_other_plans(fcl_context *ctx) {
  cl_context cc = fcl_context_cl(ctx);
  cl_command_queue q = fcl_context_queue(ctx);
  tu_rng r;
  tu_rng_seed(&r, 11);
  enum { N = 40, H = 2, DA = 16, T = 1, K = 16 };
  float x[3 * N * H * DA];
  for (size_t i = 0; i < sizeof x / sizeof x[0]; ++i) x[i] = (float)tu_rng_range(&r, -1, 1);
  cl_mem bqkv = tu_buffer_from(cc, q, x, sizeof x);
  cl_mem bo = tu_buffer_poison(cc, q, N * H * DA * 4), blse = tu_buffer_poison(cc, q, N * H * 4);
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 1, d.seqlen_q = d.seqlen_k = N, d.heads_q = d.heads_kv = H;
  d.head_dim = d.head_dim_v = DA, d.causal = 1;
  fcl_tensor tv[4];
  for (int i = 0; i < 4; ++i)
    tv[i] = (fcl_tensor){i < 3 ? bqkv : bo, i < 3 ? (size_t)i * N * H * DA * 4 : 0, FCL_F32,
                         {N * H * DA, H * DA, DA, 1}};
  float o_call[N * H * DA], o_plan[N * H * DA];
  fcl_plan *plan = NULL;
  const long made = ctx->plans_made;
  fcl_status st = fcl_attention_forward(ctx, &d, &tv[0], &tv[1], &tv[2], &tv[3], blse);
  st = st ? st : fcl_attention_forward(ctx, &d, &tv[0], &tv[1], &tv[2], &tv[3], blse);
  tu_buffer_read(q, bo, o_call, sizeof o_call);
  CHECK(st == FCL_OK && ctx->plans_made == made + 1, "forward twice: %s, %ld plans",
        fcl_context_last_error(ctx), ctx->plans_made - made);
  tu_buffer_repoison(q, bo, sizeof o_call);
  st = fcl_attention_forward_plan(ctx, &d, &tv[0], &tv[1], &tv[2], &tv[3], blse, &plan);
  st = st ? st : fcl_plan_run(plan);
  tu_buffer_read(q, bo, o_plan, sizeof o_plan);
  CHECK(st == FCL_OK && !memcmp(o_call, o_plan, sizeof o_call),
        "forward plan: %s, or other bits than the call", fcl_context_last_error(ctx));
  fcl_plan_destroy(plan);

  /* RWKV6's single step (T = 1) with h0 and ht. */
  float rk[4 * H * K], u[H * K], h0[H * K * K];
  for (size_t i = 0; i < sizeof rk / 4; ++i) rk[i] = (float)tu_rng_range(&r, -1, 1);
  for (size_t i = 0; i < sizeof u / 4; ++i) u[i] = (float)tu_rng_range(&r, -1, 1);
  for (size_t i = 0; i < sizeof h0 / 4; ++i) h0[i] = (float)tu_rng_range(&r, -1, 1);
  for (int i = 0; i < H * K; ++i) rk[3 * H * K + i] = -fabsf(rk[3 * H * K + i]); /* w <= 0 */
  cl_mem brk = tu_buffer_from(cc, q, rk, sizeof rk), bu = tu_buffer_from(cc, q, u, sizeof u);
  cl_mem bh0 = tu_buffer_from(cc, q, h0, sizeof h0), bht = tu_buffer_poison(cc, q, sizeof h0);
  cl_mem bro = tu_buffer_poison(cc, q, H * K * 4);
  fcl_rwkv6_desc rd = FCL_RWKV6_DESC_INIT;
  rd.batch = 1, rd.seqlen = T, rd.heads = H, rd.head_dim_k = rd.head_dim_v = K;
  fcl_tensor rt[5];
  for (int i = 0; i < 5; ++i)
    rt[i] = (fcl_tensor){i < 4 ? brk : bro, i < 4 ? (size_t)i * H * K * 4 : 0, FCL_F32,
                         {T * H * K, H * K, K, 1}};
  float ro_call[H * K + H * K * K], ro_plan[H * K + H * K * K];
  st = fcl_rwkv6_forward(ctx, &rd, &rt[0], &rt[1], &rt[2], &rt[3], bu, bh0, &rt[4], bht);
  tu_buffer_read(q, bro, ro_call, H * K * 4);
  tu_buffer_read(q, bht, ro_call + H * K, sizeof h0);
  tu_buffer_repoison(q, bro, H * K * 4), tu_buffer_repoison(q, bht, sizeof h0);
  st = st ? st
          : fcl_rwkv6_forward_plan(ctx, &rd, &rt[0], &rt[1], &rt[2], &rt[3], bu, bh0, &rt[4],
                                   bht, &plan);
  st = st ? st : fcl_plan_run(plan);
  tu_buffer_read(q, bro, ro_plan, H * K * 4);
  tu_buffer_read(q, bht, ro_plan + H * K, sizeof h0);
  CHECK(st == FCL_OK && !memcmp(ro_call, ro_plan, sizeof ro_call),
        "rwkv6 plan: %s, or other bits than the call", fcl_context_last_error(ctx));
  fcl_plan_destroy(plan);
  printf("forward and rwkv6 plans against their calls: %s\n", failures ? "FAIL" : "ok");
  cl_mem m[] = {bqkv, bo, blse, brk, bu, bh0, bht, bro};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; ++i) clReleaseMemObject(m[i]);
}

int main(void) {
  fcl_context *ctx = NULL;
  if (fcl_context_create(NULL, &ctx) != FCL_OK) {
    printf("FAIL: fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  printf("device: %s\n", fcl_context_device_name(ctx));
  test_token_loop(ctx);
  test_staleness(ctx, FCL_F16);
  test_staleness(ctx, FCL_F32);
  test_buffer_refs(ctx);
  test_released_buffers(ctx, FCL_F16);
  test_released_buffers(ctx, FCL_F32);
  test_public_plans(ctx);
  test_other_plans(ctx);
  test_varlen_host(ctx);
  failures += test_dropout_plans(ctx);
  fcl_context_destroy(ctx);
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
