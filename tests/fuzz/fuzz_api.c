/* libFuzzer target: descriptors, tensor views and buffers decoded from the
 * input drive every public entry point (fcl_attention_forward/backward,
 * fcl_rwkv6_forward/backward, the context functions) on a PoCL context.
 * Every input must return a status (never crash, hang, or touch memory out
 * of bounds: build with -fsanitize=fuzzer,address,undefined). A call that
 * returns FCL_OK is checked by an independent oracle: every view it accepted
 * lies inside its buffer, every side buffer is large enough; otherwise the
 * library would have let a kernel write out of bounds, and the target traps.
 *
 * Valid problems enqueue real kernels, so the decoding caps sizes that are
 * valid but large (batch <= 3, heads <= 9, seqlen <= 80 (RWKV6: 40), valid
 * head dims 64 so that no new program is compiled); out-of-range values are
 * kept to exercise the checks. Buffers are a fixed pool (NULL, one from another
 * OpenCL context, and several sizes), so no input can hand the library a
 * dangling cl_mem, which no OpenCL library can detect.
 *
 * Environment: FCL_FUZZ_DEVICE (default "pocl"). */
#include "flashcl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_decode.h"

static fcl_context *g_ctx, *g_other;
static cl_mem g_pool[FZ_NBUF], g_foreign, g_cu[2];
static const size_t g_pool_bytes[FZ_NBUF] = {1, 16, 256, 4096, 65536, 1 << 20, 4 << 20};

static cl_mem make(cl_context c, size_t bytes) {
  cl_int err;
  cl_mem m = clCreateBuffer(c, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "fuzz_api: clCreateBuffer(%zu) failed: %d\n", bytes, (int)err);
    abort();
  }
  return m;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *dev = getenv("FCL_FUZZ_DEVICE");
  if (!dev || !*dev) dev = "pocl";
  if (fcl_context_create(dev, &g_ctx) != FCL_OK ||
      fcl_context_create(dev, &g_other) != FCL_OK) {
    fprintf(stderr, "fuzz_api: no context on %s: %s\n", dev, fcl_context_last_error(NULL));
    abort();
  }
  for (int i = 0; i < FZ_NBUF; ++i) g_pool[i] = make(fcl_context_cl(g_ctx), g_pool_bytes[i]);
  g_foreign = make(fcl_context_cl(g_other), 1 << 20);
  for (int i = 0; i < 2; ++i) g_cu[i] = make(fcl_context_cl(g_ctx), 4 * (FZ_MAX_CU + 1));
  return 0;
}

/* a * b, or INT64_MAX when it overflows (the oracle's sizes). */
static int64_t mul(int64_t a, int64_t b) {
  int64_t c;
  return __builtin_mul_overflow(a, b, &c) ? INT64_MAX : c;
}

/* The buffer a decoded index names. */
static cl_mem buf(int idx) {
  if (idx == FZ_NULL) return NULL;
  if (idx == FZ_FOREIGN) return g_foreign;
  return g_pool[idx];
}

static size_t size_of(cl_mem m) {
  size_t s = 0;
  if (m) clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof s, &s, NULL);
  return s;
}

/* Oracle: the view reaches only bytes inside its buffer. */
static int view_fits(const fcl_tensor *t, const int64_t dims[4], int varlen) {
  for (int i = 0; i < 4; ++i)
    if (dims[i] == 0) return 1;
  const size_t es = fcl_dtype_size(t->dtype);
  if (!es || !t->buffer) return 0;
  __int128 lo = (__int128)(t->offset / es), hi = lo;
  if (t->offset % es) return 0;
  for (int i = 0; i < 4; ++i) {
    if (varlen && i == 0) continue;
    const __int128 reach = (__int128)t->strides[i] * (dims[i] - 1);
    if (reach < 0) lo += reach;
    else hi += reach;
  }
  return lo >= 0 && (hi + 1) * (__int128)es <= (__int128)size_of(t->buffer);
}

static void check(int cond, const char *what) {
  if (cond) return;
  fprintf(stderr, "fuzz_api: FCL_OK returned but %s\n", what);
  __builtin_trap();
}

static void after_call(fcl_status s) {
  if ((int)s < FCL_OK || (int)s > FCL_ERROR_INTERNAL) {
    fprintf(stderr, "fuzz_api: status %d is not an fcl_status\n", (int)s);
    __builtin_trap();
  }
  if (s == FCL_ERROR_INTERNAL) {
    fprintf(stderr, "fuzz_api: internal error: %s\n", fcl_context_last_error(g_ctx));
    __builtin_trap();
  }
  if (s != FCL_OK && fcl_context_last_error(g_ctx)[0] == '\0') {
    fprintf(stderr, "fuzz_api: status %d without a message\n", (int)s);
    __builtin_trap();
  }
  if (clFinish(fcl_context_queue(g_ctx)) != CL_SUCCESS) {
    fprintf(stderr, "fuzz_api: clFinish failed after status %d\n", (int)s);
    __builtin_trap();
  }
}

static void attention(fz_reader *r, int backward) {
  fz_attention a;
  fz_decode_attention(r, &a, backward);
  fcl_attention_desc d = a.desc;
  d.alibi_slopes = buf(a.alibi);
  fcl_tensor t[8];
  for (int i = 0; i < 8; ++i) {
    t[i] = a.t[i];
    t[i].buffer = buf(a.tbuf[i]);
  }
  int64_t tq = mul(d.batch, d.seqlen_q), tk = mul(d.batch, d.seqlen_k);
  if (a.varlen) {
    d.cu_seqlens_q = a.cu_null[0] ? NULL : g_cu[0];
    d.cu_seqlens_k = a.cu_null[1] ? NULL : g_cu[1];
    clEnqueueWriteBuffer(fcl_context_queue(g_ctx), g_cu[0], CL_TRUE, 0, sizeof a.cu_q,
                         a.cu_q, 0, NULL, NULL);
    clEnqueueWriteBuffer(fcl_context_queue(g_ctx), g_cu[1], CL_TRUE, 0, sizeof a.cu_k,
                         a.cu_k, 0, NULL, NULL);
    if (d.batch >= 0 && d.batch <= FZ_MAX_CU) {
      tq = a.cu_q[d.batch];
      tk = a.cu_k[d.batch];
    }
  }
  cl_mem lse = buf(a.lse);
  fcl_status s;
  if (!backward)
    s = fcl_attention_forward(g_ctx, &d, a.tnull[0] ? NULL : &t[0], a.tnull[1] ? NULL : &t[1],
                              a.tnull[2] ? NULL : &t[2], a.tnull[3] ? NULL : &t[3], lse);
  else
    s = fcl_attention_backward(g_ctx, &d, a.tnull[0] ? NULL : &t[0], a.tnull[1] ? NULL : &t[1],
                               a.tnull[2] ? NULL : &t[2], a.tnull[3] ? NULL : &t[3], lse,
                               a.tnull[4] ? NULL : &t[4], a.tnull[5] ? NULL : &t[5],
                               a.tnull[6] ? NULL : &t[6], a.tnull[7] ? NULL : &t[7]);
  if (s == FCL_OK) {
    const int varlen = a.varlen && d.cu_seqlens_q;
    const int64_t nb = varlen ? 1 : d.batch, nq = varlen ? tq : d.seqlen_q,
                  nk = varlen ? tk : d.seqlen_k;
    const int64_t dq[4] = {nb, nq, d.heads_q, d.head_dim}, dk[4] = {nb, nk, d.heads_kv, d.head_dim},
                  dv[4] = {nb, nk, d.heads_kv, d.head_dim_v}, dov[4] = {nb, nq, d.heads_q, d.head_dim_v};
    const int64_t *dims[8] = {dq, dk, dv, dov, dov, dq, dk, dv};
    for (int i = 0; i < (backward ? 8 : 4); ++i) check(view_fits(&t[i], dims[i], varlen), "a view is out of bounds");
    /* Rows of lse: the cu_seqlens total only when the call was varlen (both
     * cu_seqlens given); the decoded ones are not used otherwise. */
    const int64_t lse_rows = varlen ? tq : mul(d.batch, d.seqlen_q);
    if (lse || backward)
      check(size_of(lse) >= (size_t)mul(d.heads_q, lse_rows) * 4, "lse is too small");
    if (d.alibi_slopes) check(size_of(d.alibi_slopes) >= (size_t)d.heads_q * 4, "alibi is too small");
  }
  after_call(s);
}

static void rwkv6(fz_reader *r, int backward) {
  fz_rwkv6 a;
  fz_decode_rwkv6(r, &a, backward);
  fcl_rwkv6_desc d = a.desc;
  fcl_tensor t[10];
  for (int i = 0; i < 10; ++i) {
    t[i] = a.t[i];
    t[i].buffer = buf(a.tbuf[i]);
  }
  int64_t ntok = mul(d.batch, d.seqlen);
  if (a.varlen) {
    d.cu_seqlens = g_cu[0];
    clEnqueueWriteBuffer(fcl_context_queue(g_ctx), g_cu[0], CL_TRUE, 0, sizeof a.cu, a.cu, 0,
                         NULL, NULL);
    if (d.batch >= 0 && d.batch <= FZ_MAX_CU) ntok = a.cu[d.batch];
  }
  cl_mem side[6];
  for (int i = 0; i < 6; ++i) side[i] = buf(a.side[i]); /* u h0 ht dht du dh0 */
  const fcl_tensor *tp[10];
  for (int i = 0; i < 10; ++i) tp[i] = a.tnull[i] ? NULL : &t[i];
  fcl_status s;
  if (!backward)
    s = fcl_rwkv6_forward(g_ctx, &d, tp[0], tp[1], tp[2], tp[3], side[0], side[1], tp[4], side[2]);
  else
    s = fcl_rwkv6_backward(g_ctx, &d, tp[0], tp[1], tp[2], tp[3], side[0], side[1], tp[4], side[3],
                           tp[5], tp[6], tp[7], tp[8], side[4], side[5]);
  if (s == FCL_OK) {
    const int varlen = a.varlen;
    const int64_t nb = varlen ? 1 : d.batch, nt = varlen ? ntok : d.seqlen;
    const int64_t dk[4] = {nb, nt, d.heads, d.head_dim_k}, dv[4] = {nb, nt, d.heads, d.head_dim_v};
    /* forward: r k v w o; backward: r k v w dout dr dk dv dw */
    const int64_t *dims[9] = {dk, dk, dv, dk, dv, dk, dk, dv, dk};
    for (int i = 0; i < (backward ? 9 : 5); ++i) check(view_fits(&t[i], dims[i], varlen), "a view is out of bounds");
    const size_t es = fcl_dtype_size(t[0].dtype);
    const size_t state = (size_t)(d.batch * d.heads * d.head_dim_k * d.head_dim_v) * 4;
    check(size_of(side[0]) >= (size_t)(d.heads * d.head_dim_k) * es, "u is too small");
    if (side[1]) check(size_of(side[1]) >= state, "h0 is too small");
    if (!backward && side[2]) check(size_of(side[2]) >= state, "ht is too small");
    if (backward) {
      if (side[3]) check(size_of(side[3]) >= state, "dht is too small");
      check(size_of(side[4]) >= (size_t)(d.heads * d.head_dim_k) * es, "du is too small");
      if (side[5]) check(size_of(side[5]) >= state, "dh0 is too small");
    }
  }
  after_call(s);
}

static void context_calls(fz_reader *r) {
  char sel[24];
  fz_string(r, sel, sizeof sel);
  fcl_context *c = NULL;
  const int which = fz_u8(r) % 4;
  fcl_status s;
  if (which == 0) s = fcl_context_create(sel, &c);
  else if (which == 1) s = fcl_context_create(sel, NULL);
  else if (which == 2) s = fcl_context_create_from_queue(fcl_context_queue(g_ctx), &c);
  else s = fcl_context_create_from_queue(NULL, &c);
  if (s != FCL_OK && (c != NULL || fcl_context_last_error(NULL)[0] == '\0')) __builtin_trap();
  if (s == FCL_OK && !c) __builtin_trap();
  fcl_context_stats st;
  (void)fcl_context_get_stats(c, &st);
  (void)fcl_context_get_stats(c, NULL);
  (void)fcl_context_cl(c);
  (void)fcl_context_queue(c);
  if (!fcl_context_device_name(c) || !fcl_context_last_error(c)) __builtin_trap();
  if (!fcl_status_string((fcl_status)(int8_t)fz_u8(r))) __builtin_trap();
  (void)fcl_dtype_size((fcl_dtype)(int8_t)fz_u8(r));
  fcl_context_destroy(c);
  /* Calls with a NULL context. */
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  fcl_rwkv6_desc rd = FCL_RWKV6_DESC_INIT;
  if (fcl_attention_forward(NULL, &d, NULL, NULL, NULL, NULL, NULL) == FCL_OK ||
      fcl_attention_backward(NULL, &d, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) ==
          FCL_OK ||
      fcl_rwkv6_forward(NULL, &rd, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == FCL_OK ||
      fcl_rwkv6_backward(NULL, &rd, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                         NULL, NULL, NULL, NULL) == FCL_OK)
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader r = {data, size};
  switch (fz_u8(&r) % 5) {
  case 0: attention(&r, 0); break;
  case 1: attention(&r, 1); break;
  case 2: rwkv6(&r, 0); break;
  case 3: rwkv6(&r, 1); break;
  default: context_calls(&r); break;
  }
  return 0;
}
