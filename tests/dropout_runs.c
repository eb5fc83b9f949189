/* Reruns with dropout are bit-identical (forward and backward), another
 * seed gives another o, and dropout_p = 0 is bit-identical to a descriptor
 * without dropout: FCL_ATTENTION_DESC_INIT as it is, and one of the size
 * before the dropout fields (whatever follows it). */
#include "dropout_tests.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const out_names[5] = {"o", "lse", "dq", "dk", "dv"};

static void repoison(dp_setup *s) {
  cl_command_queue q = fcl_context_queue(s->ctx);
  tu_buffer_repoison(q, s->to.buffer, s->to.bytes);
  tu_buffer_repoison(q, s->lse, s->lse_bytes);
  tu_buffer_repoison(q, s->tdq.buffer, s->tdq.bytes);
  tu_buffer_repoison(q, s->tdk.buffer, s->tdk.bytes);
  tu_buffer_repoison(q, s->tdv.buffer, s->tdv.bytes);
}

/* Forward and backward of d into re-poisoned outputs; their bytes in out. */
static int run_both(dp_setup *s, const fcl_attention_desc *d, unsigned char *out[5],
                    size_t bytes[5]) {
  repoison(s);
  fcl_status st = dp_forward(s, d);
  if (st == FCL_OK) st = dp_backward(s, d);
  if (st != FCL_OK) {
    printf("  call failed: %s: %s\n", fcl_status_string(st), fcl_context_last_error(s->ctx));
    memset(out, 0, 5 * sizeof *out);
    return 1;
  }
  return dp_read_outputs(s, out, bytes);
}

/* Which of the five outputs differ, as text in why; returns how many. */
static int differ(unsigned char *a[5], unsigned char *b[5], const size_t bytes[5], char *why,
                  size_t n) {
  int k = 0;
  why[0] = 0;
  for (int i = 0; i < 5; ++i)
    if (memcmp(a[i], b[i], bytes[i])) oh_append(why, n, " %s", out_names[i]), ++k;
  return k;
}

static void rerun(fcl_context *ctx, dp_tally *t, fcl_dtype dt) {
  const oh_attention_case c = {.name = "rerun varlen causal GQA", .nseq = 3,
                               .lens_q = {50, 1, 77}, .lens_k = {64, 30, 70}, .hq = 4, .hkv = 2,
                               .d = 40, .dv = 40, .causal = 1, .dropout_p = 0.5f,
                               .dropout_seed = 42, .dropout_offset = 0x700000000u};
  dp_setup s;
  if (dp_setup_create(&s, ctx, &c, dt, 5)) {
    dp_expect(t, 0, "rerun: setup");
    return;
  }
  unsigned char *a[5] = {0}, *b[5] = {0}, *o2[5] = {0};
  size_t bytes[5];
  char why[128];
  int ok = !run_both(&s, &s.desc, a, bytes) && !run_both(&s, &s.desc, b, bytes);
  dp_expect(t, ok && !differ(a, b, bytes, why, sizeof why),
            "%-4s %s p=0.5: forward and backward twice, bit-identical (differ:%s)",
            tu_dtype_name(dt), c.name, ok ? why : " calls failed");
  fcl_attention_desc d = s.desc;
  d.dropout_seed += 1;
  ok = !run_both(&s, &d, o2, bytes);
  dp_expect(t, ok && memcmp(a[0], o2[0], bytes[0]) && !memcmp(a[1], o2[1], bytes[1]),
            "%-4s %s: another seed changes o and keeps lse (the softmax's before dropout)",
            tu_dtype_name(dt), c.name);
  dp_free_bytes(a), dp_free_bytes(b), dp_free_bytes(o2);
  dp_setup_release(&s);
}

/* p = 0 against FCL_ATTENTION_DESC_INIT's fields: the probabilities too. */
static void p_zero(fcl_context *ctx, dp_tally *t) {
  const oh_attention_case c = {.name = "p=0 causal GQA sq<sk", .b = 2, .sq = 45, .sk = 70,
                               .hq = 4, .hkv = 2, .d = 40, .dv = 40, .causal = 1};
  dp_setup s;
  if (dp_setup_create(&s, ctx, &c, FCL_F32, 6)) {
    dp_expect(t, 0, "p=0: setup");
    return;
  }
  const size_t pbytes = (size_t)(2 * 4 * 45 * 70) * 4;
  fcl_attention_desc v[3] = {s.desc, s.desc, s.desc};
  /* v[0]: INIT's dropout fields; v[1]: p = 0 with a seed and an offset;
   * v[2]: a caller built before dropout: its size ends before dropout_p,
   * and what follows (here garbage) is not its. */
  v[1].dropout_p = 0.0f, v[1].dropout_seed = 0xdeadbeefcafef00du, v[1].dropout_offset = 99;
  v[2].size = offsetof(fcl_attention_desc, dropout_p);
  v[2].dropout_p = 0.7f, v[2].reserved0 = 3, v[2].dropout_seed = 1, v[2].dropout_offset = 2;
  const char *const label[3] = {"FCL_ATTENTION_DESC_INIT", "dropout_p 0 with seed and offset",
                                "size before the dropout fields, garbage after"};
  unsigned char *r[3][5] = {{0}}, *pr[3] = {0};
  size_t bytes[5];
  int fail[3];
  for (int i = 0; i < 3; ++i) {
    fail[i] = run_both(&s, &v[i], r[i], bytes);
    cl_mem m = dp_poison(&s, pbytes);
    if (!fail[i] && m &&
        fcl_attention_probs(ctx, &v[i], &s.tq.t, &s.tk.t, s.lse, m) == FCL_OK)
      pr[i] = oh_read_all(ctx, m, pbytes);
    fail[i] |= !pr[i];
    if (m) clReleaseMemObject(m);
  }
  for (int i = 1; i < 3; ++i) {
    char why[128] = "";
    const int ok = !fail[0] && !fail[i] && !differ(r[0], r[i], bytes, why, sizeof why) &&
                   !memcmp(pr[0], pr[i], pbytes);
    if (!fail[0] && !fail[i] && memcmp(pr[0], pr[i], pbytes)) oh_append(why, sizeof why, " p");
    dp_expect(t, ok, "f32  %s: %s gives the bytes of %s (differ:%s)", c.name, label[i],
              label[0], fail[0] || fail[i] ? " calls failed" : why);
  }
  for (int i = 0; i < 3; ++i) dp_free_bytes(r[i]), free(pr[i]);
  dp_setup_release(&s);
}

void dp_rerun_tests(fcl_context *ctx, dp_tally *t) {
  rerun(ctx, t, FCL_F32);
  rerun(ctx, t, FCL_BF16);
  p_zero(ctx, t);
}
