/* fcl_ring_attention_forward and _backward (flashcl_mpi) against the
 * single-process calls on the whole sequence, under mpirun -np 1, 2, 4 on
 * $FCL_DEVICE: causal and not, GQA, windows, softcap, ALiBi, zig-zag and
 * contiguous layouts, lengths the ranks do not divide, seqlen_q != seqlen_k,
 * strided views, f32/f16/bf16. Every rank builds the same inputs (one
 * seed), runs fcl_attention_forward/backward on the whole sequence, and
 * compares its slice of the ring's results with those rows (the dtype's
 * tolerances: the ring differs by rounding) and o, lse with the double
 * reference; the backward is run twice and must be bit-identical. Then bad
 * input: every rank must return the same error, naming the argument and
 * the rank, with outputs untouched.
 *
 * Environment: FCL_DEVICE, FCL_TEST_FILTER (cases whose name contains it). */
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
};

static int g_rank, g_size, g_failed, g_run;

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

static void run_case(fcl_context *ctx, fcl_ring *ring, const ring_case *c) {
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

  /* This rank's slices, and the ring. */
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
  tu_tensor rq, rk, rv, ro, rdo, rdq, rdk, rdv;
  const tu_layout l = c->view;
  mk(ctx, lq, B, LQ, HQ, D, dt, l, c->off, &rq), mk(ctx, lk, B, LK, HK, D, dt, l, c->off, &rk);
  mk(ctx, lv, B, LK, HK, DV, dt, l, c->off, &rv), mk(ctx, NULL, B, LQ, HQ, DV, dt, l, c->off, &ro);
  mk(ctx, ldo, B, LQ, HQ, DV, dt, l, c->off, &rdo), mk(ctx, NULL, B, LQ, HQ, D, dt, l, c->off, &rdq);
  mk(ctx, NULL, B, LK, HK, D, dt, l, c->off, &rdk), mk(ctx, NULL, B, LK, HK, DV, dt, l, c->off, &rdv);
  cl_mem rl = tu_buffer_poison(cl, queue, ml * 4);
  fcl_status s = fcl_ring_attention_forward(ring, &rd, &rq.t, &rk.t, &rv.t, &ro.t, rl);
  fcl_ring_stats fst = {0};
  fcl_ring_last_stats(ring, &fst);
  fcl_status s2 = s ? s : fcl_ring_attention_backward(ring, &rd, &rq.t, &rk.t, &rv.t, &ro.t, rl,
                                                      &rdo.t, &rdq.t, &rdk.t, &rdv.t);
  if (s || s2) {
    printf("  rank %d: ring call: %s: %s\n", g_rank, fcl_status_string(s ? s : s2),
           fcl_ring_last_error(ring));
    bad = 1;
  }
  double *o2 = dalloc(mo), *l2 = dalloc(ml), *dq2 = dalloc(mq), *dk2 = dalloc(mk_), *dv2 = dalloc(mv);
  long outside = tu_tensor_read(queue, &ro, o2, NULL) + tu_tensor_read(queue, &rdq, dq2, NULL) +
                 tu_tensor_read(queue, &rdk, dk2, NULL) + tu_tensor_read(queue, &rdv, dv2, NULL);
  tu_buffer_read_f32(queue, rl, l2, ml, 0, NULL);
  /* Again: bit-identical. */
  double *dq3 = dalloc(mq), *dk3 = dalloc(mk_), *dv3 = dalloc(mv);
  if (!bad && fcl_ring_attention_backward(ring, &rd, &rq.t, &rk.t, &rv.t, &ro.t, rl, &rdo.t,
                                          &rdq.t, &rdk.t, &rdv.t))
    bad = 1;
  tu_tensor_read(queue, &rdq, dq3, NULL), tu_tensor_read(queue, &rdk, dk3, NULL);
  tu_tensor_read(queue, &rdv, dv3, NULL);
  const int det = !memcmp(dq2, dq3, mq * 8) && !memcmp(dk2, dk3, mk_ * 8) && !memcmp(dv2, dv3, mv * 8);

  /* The single process's rows of this rank, and the reference's. */
  double *xo = dalloc(mo), *xl = dalloc(ml), *xdq = dalloc(mq), *xdk = dalloc(mk_), *xdv = dalloc(mv);
  double *ro_ = dalloc(mo), *rl_ = dalloc(ml);
  take(o1, xo, &qs, B, NQ, HQ * DV), take(l1, xl, &qs, B * HQ, NQ, 1);
  take(dq1, xdq, &qs, B, NQ, HQ * D), take(dk1, xdk, &ks, B, NK, HK * D);
  take(dv1, xdv, &ks, B, NK, HK * DV);
  take(o_ref, ro_, &qs, B, NQ, HQ * DV), take(lse_ref, rl_, &qs, B * HQ, NQ, 1);
  const tu_tol to = tu_tol_with_logits(tu_tol_output(dt), ref_attention_logit_bound(&p, q, k), D, 1.0);
  double w[7] = {
      check("o vs single", o2, xo, mo, tu_tol_output(dt), 0),
      check("lse vs single", l2, xl, ml, tu_tol_lse(), 1),
      check("o vs reference", o2, ro_, mo, to, 0),
      check("lse vs reference", l2, rl_, ml, tu_tol_lse(), 1),
      check("dq vs single", dq2, xdq, mq, tu_tol_grad(dt), 0),
      check("dk vs single", dk2, xdk, mk_, tu_tol_grad(dt), 0),
      check("dv vs single", dv2, xdv, mv, tu_tol_grad(dt), 0)};
  if (outside) printf("  rank %d: %ld bytes outside the output views changed\n", g_rank, outside);
  if (!det) printf("  rank %d: two backward runs differ\n", g_rank);
  int fail = bad || outside || !det;
  for (int i = 0; i < 7; ++i) fail |= !(w[i] <= 1.0);
  double wmax[7];
  int any = 0;
  MPI_Allreduce(w, wmax, 7, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  g_run++;
  g_failed += any;
  if (g_rank == 0)
    printf("%s np=%d %-4s %s | b%lld sq%lld sk%lld h%lld/%lld d%lld/%lld %s | worst/tol: o %.0f%% "
           "(ref %.0f%%) lse %.0f%% dq %.0f%% dk %.0f%% dv %.0f%% | fwd %.1f ms, %d steps\n",
           any ? "FAIL" : "PASS", g_size, tu_dtype_name(dt), c->name, (long long)B,
           (long long)NQ, (long long)NK, (long long)HQ, (long long)HK, (long long)D,
           (long long)DV, c->layout == FCL_RING_ZIGZAG ? "zigzag" : "contiguous",
           100 * wmax[0], 100 * wmax[2], 100 * fmax(wmax[1], wmax[3]), 100 * wmax[4],
           100 * wmax[5], 100 * wmax[6], fst.wall_ms, fst.steps);
  fflush(stdout);

  tu_tensor *all[] = {&Q, &K, &V, &O, &DO, &DQ, &DK, &DV_, &rq, &rk, &rv, &ro, &rdo, &rdq, &rdk, &rdv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tu_tensor_release(all[i]);
  clReleaseMemObject(LSE), clReleaseMemObject(rl);
  if (alibi) clReleaseMemObject(alibi);
  double *fr[] = {q, k, v, dout, o_ref, lse_ref, o1, l1, dq1, dk1, dv1, lq, lk, lv, ldo, o2, l2,
                  dq2, dk2, dv2, dq3, dk3, dv3, xo, xl, xdq, xdk, xdv, ro_, rl_};
  for (size_t i = 0; i < sizeof fr / sizeof fr[0]; ++i) free(fr[i]);
}

void ring_bad_input(fcl_context *ctx, fcl_ring *ring, int rank, int size); /* test_ring_bad.c */
int ring_bad_failed(void);

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const double t0 = MPI_Wtime();
  fcl_context *ctx = NULL;
  fcl_ring *ring = NULL;
  fcl_status s = fcl_context_create(NULL, &ctx);
  if (!s) s = fcl_ring_create(ctx, MPI_COMM_WORLD, &ring);
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
    if (!filter || strstr(cases[i].name, filter)) run_case(ctx, ring, &cases[i]);
  if (!filter || strstr("bad input", filter)) ring_bad_input(ctx, ring, g_rank, g_size);
  g_failed += ring_bad_failed();
  fcl_ring_destroy(ring);
  fcl_context_destroy(ctx);
  if (g_rank == 0)
    printf("test_ring (%d ranks): %d cases, %d failed, %.1f s\n", g_size, g_run, g_failed,
           MPI_Wtime() - t0);
  MPI_Finalize();
  return g_failed || (g_run == 0 && !filter) ? 1 : 0;
}
