/* Bad dropout input: dropout_p outside [0, 1) or NaN and reserved0 != 0
 * refused by the forward, the backward and fcl_attention_probs, and the
 * probabilities' own arguments (p too small, lse NULL or too small, more
 * than 2^31 - 1 floats): FCL_ERROR_INVALID_ARGUMENT, a message naming the
 * argument, and every output byte still poison. */
#include "dropout_tests.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of buf [0, bytes) no longer poison. */
static long written(fcl_context *ctx, cl_mem buf, size_t bytes) {
  return tu_buffer_poison_left(fcl_context_queue(ctx), buf, 0, bytes, NULL);
}

static void expect_invalid(dp_tally *t, fcl_context *ctx, fcl_status st, const char *label,
                           const char *arg, cl_mem const *outs, const size_t *bytes, int nout) {
  const char *msg = fcl_context_last_error(ctx);
  const char *words[2] = {arg, NULL};
  char missing[64] = "";
  const int named = tu_has_words(msg, words, missing, sizeof missing);
  long w = 0;
  for (int i = 0; i < nout; ++i) {
    const long b = written(ctx, outs[i], bytes[i]);
    w += b < 0 ? 1 : b;
  }
  dp_expect(t, st == FCL_ERROR_INVALID_ARGUMENT && named && w == 0,
            "bad input %s: %s, message names %s: %s (\"%s\"), output bytes written %ld", label,
            fcl_status_string(st), arg, named ? "yes" : "no", msg, w);
}

void dp_bad_input_tests(fcl_context *ctx, dp_tally *t) {
  const oh_attention_case c = {.name = "bad input", .b = 1, .sq = 20, .sk = 24, .hq = 2,
                               .hkv = 1, .d = 40, .dv = 40, .causal = 1, .dropout_p = 0.5f,
                               .dropout_seed = 1, .dropout_offset = 2};
  dp_setup s;
  if (dp_setup_create(&s, ctx, &c, FCL_F32, 9)) {
    dp_expect(t, 0, "bad input: setup");
    return;
  }
  cl_command_queue q = fcl_context_queue(ctx);
  const size_t pbytes = (size_t)(2 * 20 * 24) * 4;
  cl_mem pbuf = dp_poison(&s, pbytes), small = dp_poison(&s, pbytes - 4),
         lse_small = dp_poison(&s, s.lse_bytes - 4);
  /* the lse the backward and probs are given: a good forward's */
  if (!pbuf || !small || !lse_small || dp_forward(&s, &s.desc) != FCL_OK) {
    dp_expect(t, 0, "bad input: buffers or the forward failed: %s", fcl_context_last_error(ctx));
    goto done;
  }
  const float bad_p[] = {-0.1f, 1.0f, NAN, INFINITY};
  for (int v = 0; v < 5; ++v) {
    fcl_attention_desc d = s.desc;
    char label[64];
    const char *arg = v < 4 ? "dropout_p" : "reserved0";
    if (v < 4) {
      d.dropout_p = bad_p[v];
      snprintf(label, sizeof label, "dropout_p %g", (double)bad_p[v]);
    } else {
      d.reserved0 = 1;
      snprintf(label, sizeof label, "reserved0 1");
    }
    char l2[96];
    tu_buffer_repoison(q, s.to.buffer, s.to.bytes);
    unsigned char *lse_then = oh_read_all(ctx, s.lse, s.lse_bytes);
    tu_buffer_repoison(q, s.lse, s.lse_bytes);
    cl_mem fo[2] = {s.to.buffer, s.lse};
    size_t fb[2] = {s.to.bytes, s.lse_bytes};
    snprintf(l2, sizeof l2, "forward, %s", label);
    expect_invalid(t, ctx, fcl_attention_forward(ctx, &d, &s.tq.t, &s.tk.t, &s.tv.t, &s.to.t,
                                                 s.lse),
                   l2, arg, fo, fb, 2);
    /* the backward and probs read lse: give it back its values */
    if (lse_then) clEnqueueWriteBuffer(q, s.lse, CL_TRUE, 0, s.lse_bytes, lse_then, 0, NULL, NULL);
    free(lse_then);
    tu_buffer_repoison(q, s.tdq.buffer, s.tdq.bytes);
    tu_buffer_repoison(q, s.tdk.buffer, s.tdk.bytes);
    tu_buffer_repoison(q, s.tdv.buffer, s.tdv.bytes);
    cl_mem bo[3] = {s.tdq.buffer, s.tdk.buffer, s.tdv.buffer};
    size_t bb[3] = {s.tdq.bytes, s.tdk.bytes, s.tdv.bytes};
    snprintf(l2, sizeof l2, "backward, %s", label);
    expect_invalid(t, ctx, fcl_attention_backward(ctx, &d, &s.tq.t, &s.tk.t, &s.tv.t, &s.to.t,
                                                  s.lse, &s.tdo.t, &s.tdq.t, &s.tdk.t,
                                                  &s.tdv.t),
                   l2, arg, bo, bb, 3);
    snprintf(l2, sizeof l2, "probs, %s", label);
    expect_invalid(t, ctx, fcl_attention_probs(ctx, &d, &s.tq.t, &s.tk.t, s.lse, pbuf), l2, arg,
                   &pbuf, &pbytes, 1);
  }
  /* fcl_attention_probs' own arguments. */
  const size_t small_bytes = pbytes - 4;
  expect_invalid(t, ctx, fcl_attention_probs(ctx, &s.desc, &s.tq.t, &s.tk.t, s.lse, small),
                 "probs, p 4 bytes too small", "p", &small, &small_bytes, 1);
  expect_invalid(t, ctx, fcl_attention_probs(ctx, &s.desc, &s.tq.t, &s.tk.t, NULL, pbuf),
                 "probs, lse NULL", "lse", &pbuf, &pbytes, 1);
  expect_invalid(t, ctx, fcl_attention_probs(ctx, &s.desc, &s.tq.t, &s.tk.t, lse_small, pbuf),
                 "probs, lse 4 bytes too small", "lse", &pbuf, &pbytes, 1);
  expect_invalid(t, ctx, fcl_attention_probs(ctx, &s.desc, &s.tq.t, &s.tk.t, s.lse, NULL),
                 "probs, p NULL", "p", &pbuf, &pbytes, 1);
  {
    /* 65536 x 32768 = 2^31 floats: one more than an int32 index reaches */
    tu_tensor bq, bk;
    cl_mem blse = dp_poison(&s, 65536 * 4);
    const int qok = !tu_tensor_create(fcl_context_cl(ctx), q, NULL, 1, 65536, 1, 1, FCL_F32,
                                      TU_BSHD, 0, 0, &bq);
    const int kok = !tu_tensor_create(fcl_context_cl(ctx), q, NULL, 1, 32768, 1, 1, FCL_F32,
                                      TU_BSHD, 0, 0, &bk);
    fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
    d.batch = 1, d.seqlen_q = 65536, d.seqlen_k = 32768, d.heads_q = d.heads_kv = 1;
    d.head_dim = d.head_dim_v = 1;
    d.dropout_p = 0.5f;
    if (qok && kok && blse)
      expect_invalid(t, ctx, fcl_attention_probs(ctx, &d, &bq.t, &bk.t, blse, pbuf),
                     "probs, 1 x 1 x 65536 x 32768 = 2^31 floats", "p", &pbuf, &pbytes, 1);
    else
      dp_expect(t, 0, "bad input: buffers of the 2^31 problem");
    if (qok) tu_tensor_release(&bq);
    if (kok) tu_tensor_release(&bk);
    if (blse) clReleaseMemObject(blse);
  }
done:
  if (pbuf) clReleaseMemObject(pbuf);
  if (small) clReleaseMemObject(small);
  if (lse_small) clReleaseMemObject(lse_small);
  dp_setup_release(&s);
}
