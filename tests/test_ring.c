/* fcl_ring_attention_forward and _backward (flashcl_mpi) against the
 * single-process calls on the whole sequence, under mpirun -np 1, 2, 4 on
 * $FCL_DEVICE: causal and not, GQA, windows, softcap, ALiBi, zig-zag and
 * contiguous layouts, lengths the ranks do not divide, seqlen_q != seqlen_k,
 * strided views, f32/f16/bf16. Every rank builds the same inputs (one
 * seed), runs fcl_attention_forward/backward on the whole sequence, and
 * compares its slice of the ring's results with those rows (the dtype's
 * tolerances: the ring differs by rounding) and o, lse with the double
 * reference; the backward is run twice and must be bit-identical. Every
 * case runs over both transports (two rings, made with FCL_RING_TRANSPORT
 * mpi and shm), whose results must be bit-identical too. Then bad input,
 * over each: every rank must return the same error, naming the argument
 * and the rank, with outputs untouched; and FCL_RING_TRANSPORT wrong or
 * different between ranks.
 *
 * Environment: FCL_DEVICE, FCL_TEST_FILTER (cases whose name contains it;
 * "bad input"). FCL_RING_TRANSPORT is set by the test itself. */
#include "flashcl_mpi.h"
#include "ref_attention.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char     *name;
  fcl_dtype       dt;
  fcl_ring_layout layout;
  int64_t         b, sq, sk, hq, hkv, d, dv;
  int             causal;
  int64_t         wl, wr;
  float           softcap;
  int             alibi;
  tu_layout       view; /* of every ring tensor */
  size_t          off;
} ring_case;

static const ring_case cases[] = {
  {"causal zigzag", FCL_F32, FCL_RING_ZIGZAG, 1, 96, 96, 2, 2, 64, 64, 1, -1, -1, 0, 0, TU_BSHD, 0},
  {"GQA non-causal padded views", FCL_F16, FCL_RING_ZIGZAG, 2, 64, 64, 4, 2, 32, 32, 0, -1, -1, 0, 0, TU_PADDED, 3},
  {"causal GQA contiguous bhsd", FCL_F16, FCL_RING_CONTIGUOUS, 1, 80, 80, 4, 1, 64, 64, 1, -1, -1, 0, 0, TU_BHSD, 0},
  {"window causal", FCL_F32, FCL_RING_ZIGZAG, 1, 96, 96, 2, 1, 32, 32, 1, 20, -1, 0, 0, TU_BSHD, 0},
  {"window both softcap", FCL_F16, FCL_RING_CONTIGUOUS, 1, 72, 72, 2, 2, 32, 32, 0, 10, 5, 5.0f, 0, TU_BSHD, 0},
  {"uneven 77 causal alibi", FCL_F32, FCL_RING_ZIGZAG, 1, 77, 77, 2, 2, 40, 24, 1, -1, -1, 0, 1, TU_PADDED_BHSD, 1},
  {"uneven 61 window bf16", FCL_BF16, FCL_RING_ZIGZAG, 1, 61, 61, 2, 1, 32, 32, 1, 9, -1, 0, 0, TU_BSHD, 0},
  {"seqlen_q 48 != seqlen_k 80 causal", FCL_F32, FCL_RING_ZIGZAG, 1, 48, 80, 2, 2, 32, 32, 1, -1, -1, 0, 0, TU_BSHD, 0},
  /* Last and the largest: the host staging grows (collectively, node-local). */
  {"uneven 67 contiguous GQA batch 2", FCL_F32, FCL_RING_CONTIGUOUS, 2, 67, 67, 4, 2, 64, 64, 1, -1, -1, 0, 0, TU_BSHD, 0},
};

static int g_rank, g_size, g_failed, g_run;
/* One ring over each transport (FCL_RING_TRANSPORT when it was made). */
static const char *const g_transports[2] = {"mpi", "shm"};
static fcl_ring *g_rings[2];

/* test_ring_bad.c */
fcl_status ring_create_with(fcl_context *ctx, const char *transport, fcl_ring **out);
void ring_bad_input(fcl_context *ctx, fcl_ring *ring, const char *transport, int rank, int size);
void ring_bad_create(fcl_context *ctx, int rank, int size);
int  ring_bad_failed(void);

static double *dalloc(size_t n) {
  double *x = calloc(n ? n : 1, sizeof *x);
  if (!x) abort();
  return x;
}

/* Rows of this rank's slice of a dense [b][n][h][d] (lse: [b*h][n], d = 1
 * and h folded into b) into a dense [b][len][h][d]. */
static void take(const double *all, double *mine, const fcl_ring_slice_info *s, int64_t b,
                 int64_t n, int64_t hd) {
  tu_take_rows(all, mine, s->pieces, s->start, s->len, s->length, b, n, hd);
}

/* Worst err/allowed over the ranks; prints the rank's failure. */
static double check(const char *what, const double *got, const double *ref, size_t n, tu_tol tol,
                    int lse_style) {
  const tu_cmp c = tu_compare(got, ref, n, tol, lse_style);
  if (!c.ok) {
    printf("  rank %d: ", g_rank);
    tu_print_cmp(what, &c, NULL, 0);
  }
  return c.ok ? c.worst_ratio : INFINITY;
}

static int mk(fcl_context *ctx, const double *x, int64_t b, int64_t s, int64_t h, int64_t d,
              fcl_dtype dt, tu_layout l, size_t off, tu_tensor *t) {
  return tu_tensor_create(fcl_context_cl(ctx), fcl_context_queue(ctx), x, b, s, h, d, dt, l, off,
                          4, t);
}

/* This rank's ring tensors. */
typedef struct {
  tu_tensor q, k, v, o, dout, dq, dk, dv;
  cl_mem    lse;
  size_t    ml;
} ring_io;

/* One transport's results, read back. */
typedef struct {
  double        *o, *l, *dq, *dk, *dv;
  long           outside; /* bytes outside the output views changed */
  int            bad, det;
  fcl_ring_stats fst;
} ring_result;

static void ring_result_free(ring_result *x) {
  free(x->o), free(x->l), free(x->dq), free(x->dk), free(x->dv);
}

static size_t elems(const tu_tensor *t) { return (size_t)(t->b * t->s * t->h * t->d); }

/* The forward, then the backward twice (bit-identical), on outputs
 * poisoned afresh: nothing the other transport wrote is read back. */
static void ring_run(fcl_context *ctx, fcl_ring *ring, const fcl_ring_desc *rd, ring_io *io,
                     ring_result *x) {
  cl_command_queue queue = fcl_context_queue(ctx);
  memset(x, 0, sizeof *x);
  tu_tensor *outs[4] = {&io->o, &io->dq, &io->dk, &io->dv};
  for (int i = 0; i < 4; ++i) tu_buffer_repoison(queue, outs[i]->buffer, outs[i]->bytes);
  tu_buffer_repoison(queue, io->lse, io->ml * 4);
  fcl_status s = fcl_ring_attention_forward(ring, rd, &io->q.t, &io->k.t, &io->v.t, &io->o.t,
                                            io->lse);
  fcl_ring_last_stats(ring, &x->fst);
  fcl_status s2 = s ? s : fcl_ring_attention_backward(ring, rd, &io->q.t, &io->k.t, &io->v.t,
                                                      &io->o.t, io->lse, &io->dout.t,
                                                      &io->dq.t, &io->dk.t, &io->dv.t);
  if (s || s2) {
    printf("  rank %d: ring call: %s: %s\n", g_rank, fcl_status_string(s ? s : s2),
           fcl_ring_last_error(ring));
    x->bad = 1;
  }
  const size_t mq = elems(&io->dq), mk_ = elems(&io->dk), mv = elems(&io->dv);
  x->o = dalloc(elems(&io->o)), x->l = dalloc(io->ml), x->dq = dalloc(mq);
  x->dk = dalloc(mk_), x->dv = dalloc(mv);
  x->outside = tu_tensor_read(queue, &io->o, x->o, NULL) +
               tu_tensor_read(queue, &io->dq, x->dq, NULL) +
               tu_tensor_read(queue, &io->dk, x->dk, NULL) +
               tu_tensor_read(queue, &io->dv, x->dv, NULL);
  tu_buffer_read_f32(queue, io->lse, x->l, io->ml, 0, NULL);
  /* Again: bit-identical. */
  double *dq3 = dalloc(mq), *dk3 = dalloc(mk_), *dv3 = dalloc(mv);
  if (!x->bad && fcl_ring_attention_backward(ring, rd, &io->q.t, &io->k.t, &io->v.t, &io->o.t,
                                             io->lse, &io->dout.t, &io->dq.t, &io->dk.t,
                                             &io->dv.t))
    x->bad = 1;
  tu_tensor_read(queue, &io->dq, dq3, NULL), tu_tensor_read(queue, &io->dk, dk3, NULL);
  tu_tensor_read(queue, &io->dv, dv3, NULL);
  x->det = !memcmp(x->dq, dq3, mq * 8) && !memcmp(x->dk, dk3, mk_ * 8) &&
           !memcmp(x->dv, dv3, mv * 8);
  free(dq3), free(dk3), free(dv3);
}

static void run_case(fcl_context *ctx, const ring_case *c) {
  const int64_t B = c->b, NQ = c->sq, NK = c->sk, HQ = c->hq, HK = c->hkv, D = c->d, DV = c->dv;
  const fcl_dtype dt = c->dt;
  cl_command_queue queue = fcl_context_queue(ctx);
  cl_context cl = fcl_context_cl(ctx);
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B, p.seqlen_q = NQ, p.seqlen_k = NK, p.heads_q = HQ, p.heads_kv = HK;
  p.head_dim = D, p.head_dim_v = DV, p.causal = c->causal;
  p.window_left = c->wl, p.window_right = c->wr, p.softcap = c->softcap;
  double slopes[8];
  for (int h = 0; h < HQ; ++h) slopes[h] = (float)pow(2.0, -8.0 * (h + 1) / (double)HQ);
  p.alibi_slopes = c->alibi ? slopes : NULL;

  /* The same inputs on every rank. */
  const size_t nq = (size_t)(B * NQ * HQ * D), nk = (size_t)(B * NK * HK * D);
  const size_t nv = (size_t)(B * NK * HK * DV), no = (size_t)(B * NQ * HQ * DV);
  const size_t nl = (size_t)(B * HQ * NQ);
  double *q = dalloc(nq), *k = dalloc(nk), *v = dalloc(nv), *dout = dalloc(no);
  tu_rng g;
  tu_rng_seed(&g, 777 + (uint64_t)strlen(c->name) * 31 + (uint64_t)dt);
  tu_fill_uniform(&g, q, nq, -2.0, 2.0);
  tu_fill_uniform(&g, k, nk, -2.0, 2.0);
  tu_fill_uniform(&g, v, nv, -1.0, 1.0);
  tu_fill_uniform(&g, dout, no, -1.0, 1.0);
  tu_round_array(q, nq, dt), tu_round_array(k, nk, dt), tu_round_array(v, nv, dt);
  tu_round_array(dout, no, dt);
  double *o_ref = dalloc(no), *lse_ref = dalloc(nl);
  ref_attention_forward(&p, q, k, v, o_ref, lse_ref);

  cl_mem alibi = NULL;
  if (c->alibi) {
    float s32[8];
    for (int h = 0; h < HQ; ++h) s32[h] = (float)slopes[h];
    alibi = tu_buffer_from(cl, queue, s32, (size_t)HQ * 4);
  }
  fcl_ring_desc rd = FCL_RING_DESC_INIT;
  fcl_attention_desc *a = &rd.attn;
  a->batch = B, a->seqlen_q = NQ, a->seqlen_k = NK, a->heads_q = HQ, a->heads_kv = HK;
  a->head_dim = D, a->head_dim_v = DV, a->causal = c->causal;
  a->window_left = c->wl, a->window_right = c->wr, a->softcap = c->softcap;
  a->alibi_slopes = alibi;
  rd.layout = c->layout;

  /* The single-process calls on the whole sequence. */
  tu_tensor Q, K, V, O, DO, DQ, DK, DV_;
  mk(ctx, q, B, NQ, HQ, D, dt, TU_BSHD, 0, &Q), mk(ctx, k, B, NK, HK, D, dt, TU_BSHD, 0, &K);
  mk(ctx, v, B, NK, HK, DV, dt, TU_BSHD, 0, &V), mk(ctx, NULL, B, NQ, HQ, DV, dt, TU_BSHD, 0, &O);
  mk(ctx, dout, B, NQ, HQ, DV, dt, TU_BSHD, 0, &DO);
  mk(ctx, NULL, B, NQ, HQ, D, dt, TU_BSHD, 0, &DQ), mk(ctx, NULL, B, NK, HK, D, dt, TU_BSHD, 0, &DK);
  mk(ctx, NULL, B, NK, HK, DV, dt, TU_BSHD, 0, &DV_);
  cl_mem LSE = tu_buffer_poison(cl, queue, nl * 4);
  double *o1 = dalloc(no), *l1 = dalloc(nl), *dq1 = dalloc(nq), *dk1 = dalloc(nk), *dv1 = dalloc(nv);
  int bad = fcl_attention_forward(ctx, a, &Q.t, &K.t, &V.t, &O.t, LSE) ||
            fcl_attention_backward(ctx, a, &Q.t, &K.t, &V.t, &O.t, LSE, &DO.t, &DQ.t, &DK.t, &DV_.t);
  if (bad) printf("  rank %d: single-process call: %s\n", g_rank, fcl_context_last_error(ctx));
  tu_tensor_read(queue, &O, o1, NULL), tu_buffer_read_f32(queue, LSE, l1, nl, 0, NULL);
  tu_tensor_read(queue, &DQ, dq1, NULL), tu_tensor_read(queue, &DK, dk1, NULL);
  tu_tensor_read(queue, &DV_, dv1, NULL);

  /* This rank's slices, and the ring over each transport. */
  fcl_ring_slice_info qs, ks;
  fcl_ring_slice(c->layout, NQ, g_size, g_rank, &qs);
  fcl_ring_slice(c->layout, NK, g_size, g_rank, &ks);
  const int64_t LQ = qs.length, LK = ks.length;
  const size_t mq = (size_t)(B * LQ * HQ * D), mk_ = (size_t)(B * LK * HK * D);
  const size_t mv = (size_t)(B * LK * HK * DV), mo = (size_t)(B * LQ * HQ * DV);
  const size_t ml = (size_t)(B * HQ * LQ);
  double *lq = dalloc(mq), *lk = dalloc(mk_), *lv = dalloc(mv), *ldo = dalloc(mo);
  take(q, lq, &qs, B, NQ, HQ * D), take(k, lk, &ks, B, NK, HK * D), take(v, lv, &ks, B, NK, HK * DV);
  take(dout, ldo, &qs, B, NQ, HQ * DV);
  ring_io io = {.ml = ml};
  const tu_layout l = c->view;
  mk(ctx, lq, B, LQ, HQ, D, dt, l, c->off, &io.q), mk(ctx, lk, B, LK, HK, D, dt, l, c->off, &io.k);
  mk(ctx, lv, B, LK, HK, DV, dt, l, c->off, &io.v), mk(ctx, NULL, B, LQ, HQ, DV, dt, l, c->off, &io.o);
  mk(ctx, ldo, B, LQ, HQ, DV, dt, l, c->off, &io.dout), mk(ctx, NULL, B, LQ, HQ, D, dt, l, c->off, &io.dq);
  mk(ctx, NULL, B, LK, HK, D, dt, l, c->off, &io.dk), mk(ctx, NULL, B, LK, HK, DV, dt, l, c->off, &io.dv);
  io.lse = tu_buffer_poison(cl, queue, ml * 4);
  ring_result res[2];
  for (int t = 0; t < 2; ++t) ring_run(ctx, g_rings[t], &rd, &io, &res[t]);

  /* The single process's rows of this rank, and the reference's. */
  double *xo = dalloc(mo), *xl = dalloc(ml), *xdq = dalloc(mq), *xdk = dalloc(mk_), *xdv = dalloc(mv);
  double *ro_ = dalloc(mo), *rl_ = dalloc(ml);
  take(o1, xo, &qs, B, NQ, HQ * DV), take(l1, xl, &qs, B * HQ, NQ, 1);
  take(dq1, xdq, &qs, B, NQ, HQ * D), take(dk1, xdk, &ks, B, NK, HK * D);
  take(dv1, xdv, &ks, B, NK, HK * DV);
  take(o_ref, ro_, &qs, B, NQ, HQ * DV), take(lse_ref, rl_, &qs, B * HQ, NQ, 1);
  const tu_tol to = tu_tol_with_logits(tu_tol_output(dt), ref_attention_logit_bound(&p, q, k), D, 1.0);
  /* Both transports must give the same bits: the same data, summed in the
   * same order. */
  const ring_result *a0 = &res[0], *a1 = &res[1];
  const int same = !a0->bad && !a1->bad && !memcmp(a0->o, a1->o, mo * 8) &&
                   !memcmp(a0->l, a1->l, ml * 8) && !memcmp(a0->dq, a1->dq, mq * 8) &&
                   !memcmp(a0->dk, a1->dk, mk_ * 8) && !memcmp(a0->dv, a1->dv, mv * 8);
  if (!same) printf("  rank %d: the transports' results differ\n", g_rank);
  for (int t = 0; t < 2; ++t) {
    const ring_result *x = &res[t];
    double w[7] = {
        check("o vs single", x->o, xo, mo, tu_tol_output(dt), 0),
        check("lse vs single", x->l, xl, ml, tu_tol_lse(), 1),
        check("o vs reference", x->o, ro_, mo, to, 0),
        check("lse vs reference", x->l, rl_, ml, tu_tol_lse(), 1),
        check("dq vs single", x->dq, xdq, mq, tu_tol_grad(dt), 0),
        check("dk vs single", x->dk, xdk, mk_, tu_tol_grad(dt), 0),
        check("dv vs single", x->dv, xdv, mv, tu_tol_grad(dt), 0)};
    if (x->outside)
      printf("  rank %d: %s: %ld bytes outside the output views changed\n", g_rank,
             g_transports[t], x->outside);
    if (!x->det) printf("  rank %d: %s: two backward runs differ\n", g_rank, g_transports[t]);
    int fail = bad || x->bad || x->outside || !x->det || !same;
    for (int i = 0; i < 7; ++i) fail |= !(w[i] <= 1.0);
    double wmax[7];
    int any = 0;
    MPI_Allreduce(w, wmax, 7, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    g_run++;
    g_failed += any;
    if (g_rank == 0)
      printf("%s np=%d %s %-4s %s | b%lld sq%lld sk%lld h%lld/%lld d%lld/%lld %s | worst/tol: o "
             "%.0f%% (ref %.0f%%) lse %.0f%% dq %.0f%% dk %.0f%% dv %.0f%% | fwd %.1f ms, %d "
             "steps%s\n",
             any ? "FAIL" : "PASS", g_size, g_transports[t], tu_dtype_name(dt), c->name,
             (long long)B, (long long)NQ, (long long)NK, (long long)HQ, (long long)HK,
             (long long)D, (long long)DV, c->layout == FCL_RING_ZIGZAG ? "zigzag" : "contiguous",
             100 * wmax[0], 100 * wmax[2], 100 * fmax(wmax[1], wmax[3]), 100 * wmax[4],
             100 * wmax[5], 100 * wmax[6], x->fst.wall_ms, x->fst.steps,
             t == 0 ? "" : same ? ", bit-identical to mpi" : ", NOT bit-identical to mpi");
    fflush(stdout);
  }

  tu_tensor *all[] = {&Q, &K, &V, &O, &DO, &DQ, &DK, &DV_, &io.q, &io.k, &io.v, &io.o, &io.dout,
                      &io.dq, &io.dk, &io.dv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tu_tensor_release(all[i]);
  clReleaseMemObject(LSE), clReleaseMemObject(io.lse);
  if (alibi) clReleaseMemObject(alibi);
  for (int t = 0; t < 2; ++t) ring_result_free(&res[t]);
  double *fr[] = {q, k, v, dout, o_ref, lse_ref, o1, l1, dq1, dk1, dv1, lq, lk, lv, ldo,
                  xo, xl, xdq, xdk, xdv, ro_, rl_};
  for (size_t i = 0; i < sizeof fr / sizeof fr[0]; ++i) free(fr[i]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const double t0 = MPI_Wtime();
  fcl_context *ctx = NULL;
  fcl_status s = fcl_context_create(NULL, &ctx);
  for (int t = 0; t < 2 && !s; ++t) s = ring_create_with(ctx, g_transports[t], &g_rings[t]);
  int ok = s == FCL_OK, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    printf("FAIL rank %d: set-up: %s %s\n", g_rank, fcl_context_last_error(NULL),
           fcl_ring_last_error(NULL));
    MPI_Finalize();
    return 1;
  }
  if (g_rank == 0) printf("device: %s, %d ranks\n", fcl_context_device_name(ctx), g_size);
  const char *filter = getenv("FCL_TEST_FILTER");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    if (!filter || strstr(cases[i].name, filter)) run_case(ctx, &cases[i]);
  if (!filter || strstr("bad input", filter)) {
    for (int t = 0; t < 2; ++t) ring_bad_input(ctx, g_rings[t], g_transports[t], g_rank, g_size);
    ring_bad_create(ctx, g_rank, g_size);
  }
  g_failed += ring_bad_failed();
  for (int t = 0; t < 2; ++t) fcl_ring_destroy(g_rings[t]);
  fcl_context_destroy(ctx);
  if (g_rank == 0)
    printf("test_ring (%d ranks): %d cases, %d failed, %.1f s\n", g_size, g_run, g_failed,
           MPI_Wtime() - t0);
  MPI_Finalize();
  return g_failed || (g_run == 0 && !filter) ? 1 : 0;
}
