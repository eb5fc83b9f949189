/* Plans of calls with dropout (part of test_plan): calls that differ only
 * in the dropout's seed or offset share one cached plan, which takes each
 * call's seed and offset: the forward, the backward and
 * fcl_attention_probs, each with offsets 1, 2, 1 through the cache (one
 * plan made, two reused), give the bits of the same calls with the cache
 * off, and offsets 1 and 2 give other outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan.h"
#include "test_util.h"

int test_dropout_plans(fcl_context *ctx);

enum { NQ = 37, NK = 45, H = 2, D = 16 };

typedef struct {
  cl_mem q, k, v, o, lse, dout, dq, dk, dv, p;
} bufs;

/* Runs pass (0 forward, 1 backward, 2 probs) with offset off; *out gets the
 * bytes of its output (o, dq, p). */
static int run(fcl_context *ctx, const bufs *b, int pass, uint64_t off, float *out,
               size_t n) {
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 1, d.seqlen_q = NQ, d.seqlen_k = NK, d.heads_q = H, d.heads_kv = H;
  d.head_dim = D, d.head_dim_v = D, d.causal = 1;
  d.dropout_p = 0.3f, d.dropout_seed = 0xabcdef0123ull, d.dropout_offset = off;
  const fcl_tensor q = tu_dense_view(b->q, FCL_F32, NQ, H, D);
  const fcl_tensor k = tu_dense_view(b->k, FCL_F32, NK, H, D);
  const fcl_tensor v = tu_dense_view(b->v, FCL_F32, NK, H, D);
  const fcl_tensor o = tu_dense_view(b->o, FCL_F32, NQ, H, D);
  const fcl_tensor dout = tu_dense_view(b->dout, FCL_F32, NQ, H, D);
  const fcl_tensor dq = tu_dense_view(b->dq, FCL_F32, NQ, H, D);
  const fcl_tensor dk = tu_dense_view(b->dk, FCL_F32, NK, H, D);
  const fcl_tensor dv = tu_dense_view(b->dv, FCL_F32, NK, H, D);
  fcl_status s = pass == 0   ? fcl_attention_forward(ctx, &d, &q, &k, &v, &o, b->lse)
                 : pass == 1 ? fcl_attention_backward(ctx, &d, &q, &k, &v, &o, b->lse, &dout,
                                                      &dq, &dk, &dv)
                             : fcl_attention_probs(ctx, &d, &q, &k, b->lse, b->p);
  const cl_mem m = pass == 0 ? b->o : pass == 1 ? b->dq : b->p;
  return s == FCL_OK && tu_buffer_read(fcl_context_queue(ctx), m, out, n * 4) == 0;
}

int test_dropout_plans(fcl_context *ctx) {
  cl_context cc = fcl_context_cl(ctx);
  cl_command_queue cq = fcl_context_queue(ctx);
  tu_rng g;
  tu_rng_seed(&g, 99);
  const size_t nq = (size_t)NQ * H * D, nk = (size_t)NK * H * D, np = (size_t)H * NQ * NK;
  bufs b = {tu_buffer_random_f32(cc, cq, &g, nq, 2), tu_buffer_random_f32(cc, cq, &g, nk, 2),
            tu_buffer_random_f32(cc, cq, &g, nk, 1), tu_buffer_poison(cc, cq, nq * 4),
            tu_buffer_poison(cc, cq, (size_t)H * NQ * 4), tu_buffer_random_f32(cc, cq, &g, nq, 1),
            tu_buffer_poison(cc, cq, nq * 4), tu_buffer_poison(cc, cq, nk * 4),
            tu_buffer_poison(cc, cq, nk * 4), tu_buffer_poison(cc, cq, np * 4)};
  float *got[3], *ref[2];
  for (int i = 0; i < 3; ++i) got[i] = malloc(np * 4);
  for (int i = 0; i < 2; ++i) ref[i] = malloc(np * 4);
  int failures = 0;
  static const char *const names[3] = {"forward", "backward", "probs"};
  static const uint64_t offs[3] = {1, 2, 1};
  for (int pass = 0; pass < 3; ++pass) {
    const size_t n = pass == 2 ? np : nq;
    int ok = 1;
    /* the forward's o and lse for offset 1, which the backward and probs read */
    if (pass) ok &= run(ctx, &b, 0, 1, ref[0], nq);
    fcl_context_set_option(ctx, FCL_OPTION_PLAN_CACHE, 0);
    for (int i = 0; i < 2; ++i) ok &= run(ctx, &b, pass, offs[i], ref[i], n);
    fcl_context_set_option(ctx, FCL_OPTION_PLAN_CACHE, 256);
    const long made = ctx->plans_made, reused = ctx->plans_reused;
    for (int i = 0; i < 3; ++i) ok &= run(ctx, &b, pass, offs[i], got[i], n);
    const long m = ctx->plans_made - made, r = ctx->plans_reused - reused;
    const int same = ok && !memcmp(got[0], ref[0], n * 4) && !memcmp(got[1], ref[1], n * 4) &&
                     !memcmp(got[2], ref[0], n * 4);
    const int differ = ok && memcmp(ref[0], ref[1], n * 4) != 0;
    const int pass_ok = ok && m == 1 && r == 2 && same && differ;
    failures += !pass_ok;
    printf("%s dropout plans, %s: offsets 1, 2, 1: %ld plan made, %ld reused; bits as "
           "uncached: %s; offsets 1 and 2 differ: %s%s\n",
           pass_ok ? "PASS" : "FAIL", names[pass], m, r, same ? "yes" : "no",
           differ ? "yes" : "no", ok ? "" : fcl_context_last_error(ctx));
  }
  for (int i = 0; i < 3; ++i) free(got[i]);
  for (int i = 0; i < 2; ++i) free(ref[i]);
  const cl_mem all[] = {b.q, b.k, b.v, b.o, b.lse, b.dout, b.dq, b.dk, b.dv, b.p};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) clReleaseMemObject(all[i]);
  return failures;
}
