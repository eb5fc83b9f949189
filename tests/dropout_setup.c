/* A dropout problem on the device for test_attention_dropout's parts
 * (dropout_tests.h). */
#include "dropout_tests.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dp_expect(dp_tally *t, int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "PASS" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
  ++t->run;
  t->failed += !ok;
  return ok;
}

cl_mem dp_poison(dp_setup *s, size_t bytes) {
  return tu_buffer_poison(fcl_context_cl(s->ctx), fcl_context_queue(s->ctx), bytes);
}

static int tensor(dp_setup *s, const double *x, int64_t rows, int64_t heads, int64_t dim,
                  tu_tensor *t) {
  const int varlen = s->p.cu_seqlens_q != NULL;
  return tu_tensor_create(fcl_context_cl(s->ctx), fcl_context_queue(s->ctx), x,
                          varlen ? 1 : s->p.batch, rows, heads, dim, s->dt, TU_BSHD, 0, 0, t);
}

int dp_setup_create(dp_setup *s, fcl_context *ctx, const oh_attention_case *c, fcl_dtype dt,
                    uint64_t seed) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->dt = dt;
  ref_attention_problem *p = &s->p;
  if (c->nseq) oh_attention_varlen(p, c->nseq, c->lens_q, c->lens_k, s->cuq, s->cuk);
  else p->batch = c->b, p->seqlen_q = c->sq, p->seqlen_k = c->sk;
  p->heads_q = c->hq, p->heads_kv = c->hkv;
  p->head_dim = c->d ? c->d : 64, p->head_dim_v = c->dv ? c->dv : 64;
  p->softmax_scale = (double)c->scale;
  p->causal = c->causal;
  p->window_left = c->win ? c->wl : -1;
  p->window_right = c->win ? c->wr : -1;
  p->softcap = (double)c->softcap;
  for (int h = 0; h < 16; ++h) s->slopes[h] = (float)pow(2.0, -8.0 * (h + 1) / (double)c->hq);
  p->alibi_slopes = c->alibi ? s->slopes : NULL;
  p->dropout_p = (double)c->dropout_p;
  p->dropout_seed = c->dropout_seed;
  p->dropout_offset = c->dropout_offset;
  s->n = oh_attention_count(p);
  s->q = oh_dalloc(s->n.q), s->k = oh_dalloc(s->n.k), s->v = oh_dalloc(s->n.v);
  s->dout = oh_dalloc(s->n.o);
  tu_rng g;
  tu_rng_seed(&g, seed);
  tu_fill_uniform(&g, s->q, s->n.q, -2.5, 2.5);
  tu_fill_uniform(&g, s->k, s->n.k, -2.5, 2.5);
  tu_fill_uniform(&g, s->v, s->n.v, -1.0, 1.0);
  tu_fill_uniform(&g, s->dout, s->n.o, -1.0, 1.0);
  tu_round_array(s->q, s->n.q, dt);
  tu_round_array(s->k, s->n.k, dt);
  tu_round_array(s->v, s->n.v, dt);
  tu_round_array(s->dout, s->n.o, dt);

  const int varlen = c->nseq > 0;
  const int64_t rq = varlen ? s->cuq[c->nseq] : p->seqlen_q;
  const int64_t rk = varlen ? s->cuk[c->nseq] : p->seqlen_k;
  const int64_t hq = p->heads_q, hk = p->heads_kv, d = p->head_dim, dv = p->head_dim_v;
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue qu = fcl_context_queue(ctx);
  int bad = tensor(s, s->q, rq, hq, d, &s->tq) | tensor(s, s->k, rk, hk, d, &s->tk) |
            tensor(s, s->v, rk, hk, dv, &s->tv) | tensor(s, NULL, rq, hq, dv, &s->to) |
            tensor(s, s->dout, rq, hq, dv, &s->tdo) | tensor(s, NULL, rq, hq, d, &s->tdq) |
            tensor(s, NULL, rk, hk, d, &s->tdk) | tensor(s, NULL, rk, hk, dv, &s->tdv);
  s->lse_bytes = s->n.lse * sizeof(float);
  s->lse = tu_buffer_poison(cl, qu, s->lse_bytes);
  bad |= !s->lse;
  if (varlen) {
    s->cuq_m = tu_buffer_from(cl, qu, s->cuq, sizeof(int32_t) * (size_t)(c->nseq + 1));
    s->cuk_m = tu_buffer_from(cl, qu, s->cuk, sizeof(int32_t) * (size_t)(c->nseq + 1));
    bad |= !s->cuq_m || !s->cuk_m;
  }
  if (c->alibi) {
    float sl[16];
    for (int h = 0; h < 16; ++h) sl[h] = (float)s->slopes[h];
    bad |= !(s->alibi_m = tu_buffer_from(cl, qu, sl, sizeof sl));
  }
  if (bad) {
    printf("FAIL %s: could not create the device buffers\n", c->name);
    dp_setup_release(s);
    return 1;
  }
  fcl_attention_desc desc = FCL_ATTENTION_DESC_INIT;
  desc.batch = p->batch, desc.seqlen_q = p->seqlen_q, desc.seqlen_k = p->seqlen_k;
  desc.heads_q = hq, desc.heads_kv = hk, desc.head_dim = d, desc.head_dim_v = dv;
  desc.softmax_scale = c->scale;
  desc.causal = c->causal;
  desc.window_left = p->window_left, desc.window_right = p->window_right;
  desc.softcap = c->softcap;
  desc.alibi_slopes = s->alibi_m;
  desc.cu_seqlens_q = s->cuq_m, desc.cu_seqlens_k = s->cuk_m;
  desc.dropout_p = c->dropout_p;
  desc.dropout_seed = c->dropout_seed;
  desc.dropout_offset = c->dropout_offset;
  s->desc = desc;
  return 0;
}

void dp_setup_release(dp_setup *s) {
  tu_tensor *ts[8] = {&s->tq, &s->tk, &s->tv, &s->to, &s->tdo, &s->tdq, &s->tdk, &s->tdv};
  for (int i = 0; i < 8; ++i)
    if (ts[i]->buffer) tu_tensor_release(ts[i]);
  cl_mem ms[4] = {s->lse, s->cuq_m, s->cuk_m, s->alibi_m};
  for (int i = 0; i < 4; ++i)
    if (ms[i]) clReleaseMemObject(ms[i]);
  free(s->q), free(s->k), free(s->v), free(s->dout);
  memset(s, 0, sizeof *s);
}

static fcl_status finished(dp_setup *s, fcl_status st) {
  if (st == FCL_OK && clFinish(fcl_context_queue(s->ctx)) != CL_SUCCESS) return FCL_ERROR_OPENCL;
  return st;
}

fcl_status dp_forward(dp_setup *s, const fcl_attention_desc *d) {
  return finished(s, fcl_attention_forward(s->ctx, d, &s->tq.t, &s->tk.t, &s->tv.t, &s->to.t,
                                           s->lse));
}

fcl_status dp_backward(dp_setup *s, const fcl_attention_desc *d) {
  return finished(s, fcl_attention_backward(s->ctx, d, &s->tq.t, &s->tk.t, &s->tv.t, &s->to.t,
                                            s->lse, &s->tdo.t, &s->tdq.t, &s->tdk.t,
                                            &s->tdv.t));
}

int dp_read_outputs(dp_setup *s, unsigned char *out[5], size_t bytes[5]) {
  const cl_mem ms[5] = {s->to.buffer, s->lse, s->tdq.buffer, s->tdk.buffer, s->tdv.buffer};
  const size_t bs[5] = {s->to.bytes, s->lse_bytes, s->tdq.bytes, s->tdk.bytes, s->tdv.bytes};
  int bad = 0;
  for (int i = 0; i < 5; ++i) {
    bytes[i] = bs[i];
    out[i] = oh_read_all(s->ctx, ms[i], bs[i]);
    bad |= !out[i];
  }
  return bad;
}

void dp_free_bytes(unsigned char *b[5]) {
  for (int i = 0; i < 5; ++i) free(b[i]), b[i] = NULL;
}
