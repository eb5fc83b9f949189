/* Context lifetimes and threads on $FCL_DEVICE.
 *
 *   test_lifecycle [cycles [rounds]]   (defaults 1000 and 4)
 *
 * 1. `cycles` contexts created and destroyed in a row, every 100th running
 *    attention and RWKV6, forward and backward, checked against the
 *    references. Run under valgrind (CTest: test_lifecycle_valgrind) or
 *    LeakSanitizer (FCL_SANITIZE builds) this shows that nothing of flashcl
 *    leaks. (It also leaves every program in the binary cache before the
 *    threads start, so that they do not each compile it at once: under
 *    valgrind, which runs one thread at a time, that took minutes.)
 * 2. Four threads at once, each with its own context, each running attention
 *    forward and backward and RWKV6 forward and backward against the
 *    references `rounds` times, and each checking that its own errors land
 *    in its own context's message (and its failed creates in its own
 *    thread's message, fcl_context_last_error(NULL)). */
#include "op_harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run_ops(fcl_context *ctx, uint64_t seed, int backward, char *why, size_t n) {
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 2; p.seqlen_q = 11; p.seqlen_k = 14; p.heads_q = 2; p.heads_kv = 1;
  p.head_dim = p.head_dim_v = 16; p.causal = (int)(seed & 1);
  p.window_left = p.window_right = -1;
  const oh_attention_sizes s = oh_attention_count(&p);
  double *q = malloc(8 * s.q), *k = malloc(8 * s.k), *v = malloc(8 * s.v), *dout = malloc(8 * s.o);
  tu_rng g;
  tu_rng_seed(&g, seed);
  tu_fill_uniform(&g, q, s.q, -1, 1);
  tu_fill_uniform(&g, k, s.k, -1, 1);
  tu_fill_uniform(&g, v, s.v, -1, 1);
  tu_fill_uniform(&g, dout, s.o, -1, 1);
  int ok = oh_attention_verify(ctx, &p, FCL_F32, q, k, v, backward ? dout : NULL, 1, why, n);
  free(q); free(k); free(v); free(dout);

  ref_rwkv6_problem r;
  memset(&r, 0, sizeof r);
  r.batch = 1; r.seqlen = 9; r.heads = 2; r.head_dim_k = 8; r.head_dim_v = 8;
  const oh_rwkv6_sizes rs = oh_rwkv6_count(&r);
  double *x[8];
  const size_t nx[8] = {rs.rk, rs.rk, rs.v, rs.rk, rs.u, rs.state, rs.v, rs.state};
  for (int i = 0; i < 8; ++i) {
    x[i] = malloc(8 * nx[i]);
    tu_fill_uniform(&g, x[i], nx[i], i == 3 ? -2.0 : -1.0, i == 3 ? -0.1 : 1.0);
  }
  ok &= oh_rwkv6_verify(ctx, &r, FCL_F32, FCL_RWKV6_AUTO, x[0], x[1], x[2], x[3], x[4], x[5],
                        backward ? x[6] : NULL, backward ? x[7] : NULL, why, n);
  for (int i = 0; i < 8; ++i) free(x[i]);
  return ok;
}

typedef struct {
  int  id, ok, rounds;
  char why[2048];
} worker;

static void *work(void *arg) {
  worker *w = arg;
  w->ok = 1;
  fcl_context *ctx = NULL;
  if (fcl_context_create(getenv("FCL_DEVICE"), &ctx) != FCL_OK) {
    snprintf(w->why, sizeof w->why, "create: %s", fcl_context_last_error(NULL));
    w->ok = 0;
    return NULL;
  }
  char sel[64], want[96];
  snprintf(sel, sizeof sel, "no-such-device-%d", w->id);
  for (int it = 0; it < w->rounds && w->ok; ++it) {
    /* This thread's failed create: its message names its own selector. */
    fcl_context *none = NULL;
    if (fcl_context_create(sel, &none) != FCL_ERROR_NO_DEVICE ||
        !strstr(fcl_context_last_error(NULL), sel)) {
      snprintf(w->why, sizeof w->why, "thread %d: create error message is \"%s\"", w->id,
               fcl_context_last_error(NULL));
      w->ok = 0;
    }
    /* A bad call on this context: its message, untouched by the others. */
    fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
    d.batch = 1; d.seqlen_q = d.seqlen_k = 1; d.heads_q = d.heads_kv = 1;
    d.head_dim = d.head_dim_v = 1000 + w->id;
    snprintf(want, sizeof want, "%d", 1000 + w->id);
    if (fcl_attention_forward(ctx, &d, NULL, NULL, NULL, NULL, NULL) != FCL_ERROR_INVALID_ARGUMENT ||
        !strstr(fcl_context_last_error(ctx), want)) {
      snprintf(w->why, sizeof w->why, "thread %d: context message is \"%s\"", w->id,
               fcl_context_last_error(ctx));
      w->ok = 0;
    }
    if (w->ok) w->ok = run_ops(ctx, (uint64_t)(w->id * 100 + it), 1, w->why, sizeof w->why);
    /* The message of the failed call above survives until the next call on
     * this context: other threads' calls do not touch it. */
  }
  fcl_context_destroy(ctx);
  return NULL;
}

int main(int argc, char **argv) {
  const double t0 = tu_now();
  const int cycles = argc > 1 ? atoi(argv[1]) : 1000;
  const int rounds = argc > 2 ? atoi(argv[2]) : 4;
  int failed = 0;
  char why[2048] = "";
  for (int i = 0; i < cycles; ++i) {
    fcl_context *ctx = NULL;
    if (fcl_context_create(NULL, &ctx) != FCL_OK) {
      printf("FAIL cycle %d: create: %s\n", i, fcl_context_last_error(NULL));
      return 1;
    }
    if (i % 100 == 0 && !run_ops(ctx, (uint64_t)i, 1, why, sizeof why)) {
      printf("FAIL cycle %d:%s\n", i, why);
      ++failed;
    }
    fcl_context_destroy(ctx);
  }
  printf("%s %d create/destroy cycles (%d with operations) | %.1f s\n", failed ? "FAIL" : "PASS",
         cycles, (cycles + 99) / 100, tu_now() - t0);

  enum { NT = 4 };
  pthread_t th[NT];
  worker w[NT];
  memset(w, 0, sizeof w);
  for (int i = 0; i < NT; ++i) {
    w[i].id = i;
    w[i].rounds = rounds;
    if (pthread_create(&th[i], NULL, work, &w[i]) != 0) {
      printf("FAIL: pthread_create\n");
      return 1;
    }
  }
  for (int i = 0; i < NT; ++i) pthread_join(th[i], NULL);
  for (int i = 0; i < NT; ++i) {
    printf("%s thread %d (own context: attention and RWKV6, forward and backward, x%d)%s%s\n",
           w[i].ok ? "PASS" : "FAIL", i, rounds, w[i].ok ? "" : " |", w[i].ok ? "" : w[i].why);
    failed += !w[i].ok;
  }
  printf("test_lifecycle: %d failed, %.1f s\n", failed, tu_now() - t0);
  return failed ? 1 : 0;
}
