/* Bad inputs to fcl_attention_forward: each returns the documented status,
 * fcl_context_last_error() names the argument (and its value where it has
 * one), and nothing is written: the output and lse buffers stay poison.
 * A valid call before and after proves the baseline is valid and that the
 * context is still usable. */
#include "flashcl.h"
#include "ref_attention.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, SQ = 5, SK = 7, HQ = 4, HKV = 2, D = 8, DV = 6 };

static int g_cases = 0, g_failed = 0;

typedef struct {
  fcl_context       *ctx;
  cl_context         cl;
  cl_command_queue   queue;
  cl_mem             bq, bk, bv, bo, lse, alibi, cuq, cuk;
  size_t             bytes_q, bytes_k, bytes_v, bytes_o, bytes_lse;
  fcl_attention_desc d;
  fcl_tensor         q, k, v, o;
  double             hq_[B * SQ * HQ * D], hk_[B * SK * HKV * D], hv_[B * SK * HKV * DV];
} setup;

static size_t count_bad(cl_command_queue queue, cl_mem buf, size_t bytes) {
  size_t first = 0;
  const long bad = tu_buffer_poison_left(queue, buf, 0, bytes, &first);
  return bad < 0 ? (size_t)-1 : (size_t)bad;
}

/* Checks one call's result. words: NULL-terminated, or NULL for no message
 * check (NULL ctx). */
static void expect(setup *s, const char *label, fcl_status got, fcl_status want,
                   const char *const *words) {
  ++g_cases;
  int ok = 1;
  char why[512] = "";
  size_t wp = 0;
  if (got != want) {
    ok = 0;
    wp += (size_t)snprintf(why + wp, sizeof why - wp, " status %s, want %s;",
                           fcl_status_string(got), fcl_status_string(want));
  }
  const char *msg = fcl_context_last_error(s->ctx);
  if (!msg) msg = "(NULL)";
  if (words) {
    char missing[256];
    if (!tu_has_words(msg, words, missing, sizeof missing)) {
      ok = 0;
      wp += (size_t)snprintf(why + wp, sizeof why - wp, " message lacks %s;", missing);
    }
  }
  clFinish(s->queue);
  const size_t bad_o = count_bad(s->queue, s->bo, s->bytes_o);
  const size_t bad_l = count_bad(s->queue, s->lse, s->bytes_lse);
  if (bad_o || bad_l) {
    ok = 0;
    wp += (size_t)snprintf(why + wp, sizeof why - wp, " wrote %zu bytes of o, %zu of lse;",
                           bad_o, bad_l);
  }
  printf("%s %-44s |%s message: \"%s\"\n", ok ? "PASS" : "FAIL", label, why,
         words ? msg : "(not checked: NULL ctx)");
  fflush(stdout);
  if (!ok) {
    ++g_failed;
    /* Restore the poison so the next case is judged on its own. */
    tu_buffer_repoison(s->queue, s->bo, s->bytes_o);
    tu_buffer_repoison(s->queue, s->lse, s->bytes_lse);
  }
}

static void expect_either(setup *s, const char *label, fcl_status got, fcl_status want1,
                          fcl_status want2, const char *const *words) {
  expect(s, label, got, got == want2 ? want2 : want1, words);
}

static fcl_status call(setup *s, const fcl_attention_desc *d, const fcl_tensor *q,
                       const fcl_tensor *k, const fcl_tensor *v, const fcl_tensor *o,
                       cl_mem lse) {
  return fcl_attention_forward(s->ctx, d, q, k, v, o, lse);
}

static int init_setup(setup *s) {
  memset(s, 0, sizeof *s);
  if (fcl_context_create(NULL, &s->ctx) != FCL_OK) {
    printf("FAIL fcl_context_create(NULL): %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  s->cl = fcl_context_cl(s->ctx);
  s->queue = fcl_context_queue(s->ctx);
  tu_rng rng;
  tu_rng_seed(&rng, 99);
  tu_fill_uniform(&rng, s->hq_, sizeof s->hq_ / 8, -2, 2);
  tu_fill_uniform(&rng, s->hk_, sizeof s->hk_ / 8, -2, 2);
  tu_fill_uniform(&rng, s->hv_, sizeof s->hv_ / 8, -1, 1);
  tu_round_array(s->hq_, sizeof s->hq_ / 8, FCL_F32);
  tu_round_array(s->hk_, sizeof s->hk_ / 8, FCL_F32);
  tu_round_array(s->hv_, sizeof s->hv_ / 8, FCL_F32);
  /* Inputs in buffers of twice the size a view needs (so a larger heads_kv
   * alone is not an extent error); o and lse sized exactly. */
  float tmp[2 * B * SK * HQ * 64];
  s->bytes_q = 2u * B * SQ * HQ * D * 4;
  s->bytes_k = 2u * B * SK * HKV * D * 4 * 2; /* room for heads_kv up to 4 */
  s->bytes_v = 2u * B * SK * HKV * DV * 4 * 2;
  s->bytes_o = (size_t)B * SQ * HQ * DV * 4;
  s->bytes_lse = (size_t)B * HQ * SQ * 4;
  memset(tmp, 0, sizeof tmp);
  for (size_t i = 0; i < sizeof s->hq_ / 8; ++i) tmp[i] = (float)s->hq_[i];
  s->bq = tu_buffer_from(s->cl, s->queue, tmp, s->bytes_q);
  memset(tmp, 0, sizeof tmp);
  for (size_t i = 0; i < sizeof s->hk_ / 8; ++i) tmp[i] = (float)s->hk_[i];
  s->bk = tu_buffer_from(s->cl, s->queue, tmp, s->bytes_k);
  memset(tmp, 0, sizeof tmp);
  for (size_t i = 0; i < sizeof s->hv_ / 8; ++i) tmp[i] = (float)s->hv_[i];
  s->bv = tu_buffer_from(s->cl, s->queue, tmp, s->bytes_v);
  s->bo = tu_buffer_poison(s->cl, s->queue, s->bytes_o);
  s->lse = tu_buffer_poison(s->cl, s->queue, s->bytes_lse);
  const float slopes[HQ] = {0.5f, 0.25f, 0.125f, 0.0625f};
  s->alibi = tu_buffer_from(s->cl, s->queue, slopes, sizeof slopes);
  const int32_t cu_q[B + 1] = {0, 2, 5}, cu_k[B + 1] = {0, 3, 7};
  s->cuq = tu_buffer_from(s->cl, s->queue, cu_q, sizeof cu_q);
  s->cuk = tu_buffer_from(s->cl, s->queue, cu_k, sizeof cu_k);
  if (!s->bq || !s->bk || !s->bv || !s->bo || !s->lse || !s->alibi || !s->cuq || !s->cuk)
    return 1;
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = B; d.seqlen_q = SQ; d.seqlen_k = SK; d.heads_q = HQ; d.heads_kv = HKV;
  d.head_dim = D; d.head_dim_v = DV; d.causal = 1;
  s->d = d;
  s->q = tu_dense_view(s->bq, FCL_F32, SQ, HQ, D);
  s->k = tu_dense_view(s->bk, FCL_F32, SK, HKV, D);
  s->v = tu_dense_view(s->bv, FCL_F32, SK, HKV, DV);
  s->o = tu_dense_view(s->bo, FCL_F32, SQ, HQ, DV);
  return 0;
}

/* The valid baseline: returns FCL_OK and matches the reference. */
static int valid_call(setup *s, const char *label) {
  ++g_cases;
  const fcl_status st = call(s, &s->d, &s->q, &s->k, &s->v, &s->o, s->lse);
  int ok = st == FCL_OK && clFinish(s->queue) == CL_SUCCESS;
  double o_ref[B * SQ * HQ * DV], l_ref[B * HQ * SQ], o_got[B * SQ * HQ * DV],
      l_got[B * HQ * SQ];
  ref_attention_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B; p.seqlen_q = SQ; p.seqlen_k = SK; p.heads_q = HQ; p.heads_kv = HKV;
  p.head_dim = D; p.head_dim_v = DV; p.causal = 1; p.window_left = p.window_right = -1;
  ref_attention_forward(&p, s->hq_, s->hk_, s->hv_, o_ref, l_ref);
  tu_cmp co = {0}, cl_ = {0};
  if (ok) {
    ok = !tu_buffer_read_f32(s->queue, s->bo, o_got, B * SQ * HQ * DV, 0, NULL) &&
         !tu_buffer_read_f32(s->queue, s->lse, l_got, B * HQ * SQ, 0, NULL);
    co = tu_compare(o_got, o_ref, B * SQ * HQ * DV, tu_tol_output(FCL_F32), 0);
    cl_ = tu_compare(l_got, l_ref, B * HQ * SQ, tu_tol_lse(), 1);
    ok = ok && co.ok && cl_.ok;
  }
  printf("%s %-44s | status %s; o err %.2e, lse err %.2e%s%s\n", ok ? "PASS" : "FAIL",
         label, fcl_status_string(st), co.max_err, cl_.max_err, st ? ": " : "",
         st ? fcl_context_last_error(s->ctx) : "");
  if (!co.ok) tu_print_cmp("o", &co, NULL, 0);
  if (!cl_.ok) tu_print_cmp("lse", &cl_, NULL, 0);
  if (!ok) ++g_failed;
  tu_buffer_repoison(s->queue, s->bo, s->bytes_o);
  tu_buffer_repoison(s->queue, s->lse, s->bytes_lse);
  return ok;
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})
#define INVALID FCL_ERROR_INVALID_ARGUMENT

/* The offset that makes a view of t end exactly one element past bytes. */
static size_t offset_past_end(const fcl_tensor *t, int64_t b, int64_t s, int64_t h,
                              int64_t d, size_t bytes) {
  const int64_t extent =
      (b - 1) * t->strides[0] + (s - 1) * t->strides[1] + (h - 1) * t->strides[2] + d;
  return bytes - (size_t)extent * 4 + 4;
}

int main(void) {
  const double t0 = tu_now();
  static setup S;
  setup *s = &S;
  if (init_setup(s)) return 1;
  printf("device: %s\n", fcl_context_device_name(s->ctx));
  if (!valid_call(s, "baseline (valid)")) {
    printf("the baseline must be valid for the rest to mean anything\n");
    return 1;
  }
  fcl_attention_desc d;
  fcl_tensor t;
  char label[96], val[32];

  /* NULL pointers. */
  expect(s, "ctx NULL",
         fcl_attention_forward(NULL, &s->d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
         NULL);
  expect(s, "desc NULL", call(s, NULL, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("desc|d|descriptor"));
  expect(s, "q NULL", call(s, &s->d, NULL, &s->k, &s->v, &s->o, s->lse), INVALID, W("q"));
  expect(s, "k NULL", call(s, &s->d, &s->q, NULL, &s->v, &s->o, s->lse), INVALID, W("k"));
  expect(s, "v NULL", call(s, &s->d, &s->q, &s->k, NULL, &s->o, s->lse), INVALID, W("v"));
  expect(s, "o NULL", call(s, &s->d, &s->q, &s->k, &s->v, NULL, s->lse), INVALID, W("o"));

  /* Sizes <= 0. */
  static const char *const size_names[] = {"batch", "seqlen_q", "seqlen_k", "heads_q",
                                           "heads_kv", "head_dim", "head_dim_v"};
  static const int64_t bad_sizes[] = {0, -3};
  for (int f = 0; f < 7; ++f)
    for (int vi = 0; vi < 2; ++vi) {
      d = s->d;
      int64_t *fields[7] = {&d.batch, &d.seqlen_q, &d.seqlen_k, &d.heads_q,
                            &d.heads_kv, &d.head_dim, &d.head_dim_v};
      *fields[f] = bad_sizes[vi];
      snprintf(label, sizeof label, "%s = %lld", size_names[f], (long long)bad_sizes[vi]);
      snprintf(val, sizeof val, "%lld", (long long)bad_sizes[vi]);
      expect(s, label, call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
             W(size_names[f], val));
    }
  /* Head dims above 512. */
  d = s->d; d.head_dim = 513;
  expect(s, "head_dim = 513", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("head_dim", "513"));
  d = s->d; d.head_dim_v = 600;
  expect(s, "head_dim_v = 600", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("head_dim_v", "600"));
  /* heads_q % heads_kv != 0 (k, v buffers are large enough for 3 heads). */
  d = s->d; d.heads_kv = 3;
  {
    fcl_tensor k3 = tu_dense_view(s->bk, FCL_F32, SK, 3, D);
    fcl_tensor v3 = tu_dense_view(s->bv, FCL_F32, SK, 3, DV);
    expect(s, "heads_q 4 % heads_kv 3", call(s, &d, &s->q, &k3, &v3, &s->o, s->lse), INVALID,
           W("heads_kv", "3"));
  }

  /* dtypes. */
  t = s->k; t.dtype = FCL_F16;
  expect(s, "k dtype f16, others f32", call(s, &s->d, &s->q, &t, &s->v, &s->o, s->lse),
         INVALID, W("dtype"));
  t = s->o; t.dtype = FCL_BF16;
  expect(s, "o dtype bf16, others f32", call(s, &s->d, &s->q, &s->k, &s->v, &t, s->lse),
         INVALID, W("dtype"));
  {
    fcl_tensor q7 = s->q, k7 = s->k, v7 = s->v, o7 = s->o;
    q7.dtype = k7.dtype = v7.dtype = o7.dtype = (fcl_dtype)7;
    expect(s, "dtype 7 (unknown) everywhere", call(s, &s->d, &q7, &k7, &v7, &o7, s->lse),
           INVALID, W("dtype", "7"));
  }

  /* strides[3] != 1. */
  t = s->q; t.strides[3] = 2;
  expect(s, "q strides[3] = 2", call(s, &s->d, &t, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("strides[3]", "2", "q"));
  t = s->o; t.strides[3] = 0;
  expect(s, "o strides[3] = 0", call(s, &s->d, &s->q, &s->k, &s->v, &t, s->lse), INVALID,
         W("strides[3]", "0", "o"));

  /* NULL buffer in a tensor. */
  t = s->v; t.buffer = NULL;
  expect(s, "v buffer NULL", call(s, &s->d, &s->q, &s->k, &t, &s->o, s->lse), INVALID, W("v"));
  t = s->o; t.buffer = NULL;
  expect(s, "o buffer NULL", call(s, &s->d, &s->q, &s->k, &s->v, &t, s->lse), INVALID, W("o"));

  /* Offsets that are not a multiple of the element size. */
  t = s->q; t.offset = 2;
  expect(s, "q offset 2 (f32)", call(s, &s->d, &t, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("offset", "q"));
  t = s->o; t.offset = 6;
  expect(s, "o offset 6 (f32)", call(s, &s->d, &s->q, &s->k, &s->v, &t, s->lse), INVALID,
         W("offset", "o"));

  /* Extents one element past the end of the buffer: through the offset and
   * through a stride. */
  {
    const char *names[4] = {"q", "k", "v", "o"};
    const fcl_tensor *base[4] = {&s->q, &s->k, &s->v, &s->o};
    const int64_t seq[4] = {SQ, SK, SK, SQ}, heads[4] = {HQ, HKV, HKV, HQ},
                  dims[4] = {D, D, DV, DV};
    const size_t bytes[4] = {s->bytes_q, s->bytes_k, s->bytes_v, s->bytes_o};
    for (int i = 0; i < 4; ++i) {
      fcl_tensor ts[4] = {s->q, s->k, s->v, s->o};
      ts[i].offset = offset_past_end(base[i], B, seq[i], heads[i], dims[i], bytes[i]);
      snprintf(label, sizeof label, "%s extent past the end (offset %zu)", names[i],
               ts[i].offset);
      expect(s, label, call(s, &s->d, &ts[0], &ts[1], &ts[2], &ts[3], s->lse), INVALID,
             W(names[i]));
      /* Through strides[0]: the last batch ends one element past the buffer. */
      fcl_tensor us[4] = {s->q, s->k, s->v, s->o};
      const int64_t rest = (seq[i] - 1) * us[i].strides[1] + (heads[i] - 1) * us[i].strides[2] + dims[i];
      us[i].strides[0] = ((int64_t)(bytes[i] / 4) - rest + 1) / (B - 1);
      if ((B - 1) * us[i].strides[0] + rest <= (int64_t)(bytes[i] / 4)) us[i].strides[0]++;
      snprintf(label, sizeof label, "%s extent past the end (strides[0] %lld)", names[i],
               (long long)us[i].strides[0]);
      expect(s, label, call(s, &s->d, &us[0], &us[1], &us[2], &us[3], s->lse), INVALID,
             W(names[i]));
    }
  }

  /* lse too small. */
  {
    cl_mem small = tu_buffer_poison(s->cl, s->queue, s->bytes_lse - 4);
    expect(s, "lse buffer one float short", call(s, &s->d, &s->q, &s->k, &s->v, &s->o, small),
           INVALID, W("lse"));
    size_t first = 0;
    if (tu_buffer_poison_left(s->queue, small, 0, s->bytes_lse - 4, &first) != 0) {
      printf("FAIL lse buffer one float short: the short lse buffer was written\n");
      ++g_failed;
    }
    clReleaseMemObject(small);
  }

  /* Windows and softcap. */
  d = s->d; d.window_left = -2;
  expect(s, "window_left = -2", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("window_left", "-2"));
  d = s->d; d.window_right = -5;
  expect(s, "window_right = -5", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("window_right", "-5"));
  d = s->d; d.softcap = -1.5f;
  expect(s, "softcap = -1.5", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("softcap", "-1.5"));

  /* ALiBi slopes buffer too small. */
  {
    const float three[3] = {0.5f, 0.25f, 0.125f};
    cl_mem small = tu_buffer_from(s->cl, s->queue, three, sizeof three);
    d = s->d; d.alibi_slopes = small;
    expect(s, "alibi_slopes 3 floats for 4 heads", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse),
           INVALID, W("alibi_slopes"));
    clReleaseMemObject(small);
  }

  /* Varlen: only one of cu_seqlens_q/k, and buffers too small. */
  d = s->d; d.cu_seqlens_q = s->cuq;
  expect(s, "cu_seqlens_q without cu_seqlens_k", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse),
         INVALID, W("cu_seqlens_k|cu_seqlens_q|cu_seqlens"));
  d = s->d; d.cu_seqlens_k = s->cuk;
  expect(s, "cu_seqlens_k without cu_seqlens_q", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse),
         INVALID, W("cu_seqlens_q|cu_seqlens_k|cu_seqlens"));
  {
    const int32_t two[2] = {0, 2};
    cl_mem small = tu_buffer_from(s->cl, s->queue, two, sizeof two);
    d = s->d; d.cu_seqlens_q = small; d.cu_seqlens_k = s->cuk;
    expect(s, "cu_seqlens_q [batch] instead of [batch+1]",
           call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID, W("cu_seqlens_q"));
    d = s->d; d.cu_seqlens_q = s->cuq; d.cu_seqlens_k = small;
    expect(s, "cu_seqlens_k [batch] instead of [batch+1]",
           call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID, W("cu_seqlens_k"));
    clReleaseMemObject(small);
  }

  /* Non-finite floats. */
  d = s->d; d.softcap = NAN;
  expect(s, "softcap = NaN", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("softcap"));
  d = s->d; d.softmax_scale = NAN;
  expect(s, "softmax_scale = NaN", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
         W("softmax_scale"));

  /* Sizes beyond what the build supports: valid but unsupported, or invalid
   * (the views are too small for them as well). */
  d = s->d; d.seqlen_q = (int64_t)1 << 40;
  expect_either(s, "seqlen_q = 2^40", call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse),
                FCL_ERROR_UNSUPPORTED, INVALID, W("seqlen_q"));

  /* A buffer of another OpenCL context. */
  {
    cl_device_id dev = NULL;
    clGetCommandQueueInfo(s->queue, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL);
    cl_int err;
    cl_context other = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_mem foreign = other ? clCreateBuffer(other, CL_MEM_READ_WRITE, s->bytes_q, NULL, &err)
                           : NULL;
    if (foreign) {
      t = s->q; t.buffer = foreign;
      expect(s, "q buffer of another cl_context", call(s, &s->d, &t, &s->k, &s->v, &s->o, s->lse),
             INVALID, W("q"));
      clReleaseMemObject(foreign);
    } else {
      printf("FAIL could not create a second cl_context (%d)\n", (int)err);
      ++g_failed;
    }
    if (other) clReleaseContext(other);
  }

  /* Varlen: a valid call first, then bad cu_seqlens contents and a short lse. */
  {
    fcl_attention_desc vd = s->d;
    vd.cu_seqlens_q = s->cuq; vd.cu_seqlens_k = s->cuk; /* totals 5 and 7 */
    ++g_cases;
    const fcl_status st = call(s, &vd, &s->q, &s->k, &s->v, &s->o, s->lse);
    clFinish(s->queue);
    printf("%s %-44s | status %s %s\n", st == FCL_OK ? "PASS" : "FAIL", "varlen baseline (valid)",
           fcl_status_string(st), st == FCL_OK ? "" : fcl_context_last_error(s->ctx));
    if (st != FCL_OK) ++g_failed;
    tu_buffer_repoison(s->queue, s->bo, s->bytes_o);
    tu_buffer_repoison(s->queue, s->lse, s->bytes_lse);

    static const int32_t bad_cu[3][B + 1] = {{0, 3, 2}, {0, 6, 6}, {-1, 2, 4}};
    static const char *const what[3] = {"decreasing", "a sequence longer than seqlen_q",
                                        "negative first entry"};
    for (int i = 0; i < 3; ++i) {
      cl_mem cu = tu_buffer_from(s->cl, s->queue, bad_cu[i], sizeof bad_cu[i]);
      d = vd; d.cu_seqlens_q = cu;
      snprintf(label, sizeof label, "cu_seqlens_q %s", what[i]);
      expect(s, label, call(s, &d, &s->q, &s->k, &s->v, &s->o, s->lse), INVALID,
             W("cu_seqlens_q"));
      clReleaseMemObject(cu);
    }
    /* Varlen lse is [heads_q, total_q] = 4 x 5 floats: one short. */
    cl_mem small = tu_buffer_poison(s->cl, s->queue, (size_t)HQ * 5 * 4 - 4);
    expect(s, "varlen lse one float short", call(s, &vd, &s->q, &s->k, &s->v, &s->o, small),
           INVALID, W("lse"));
    clReleaseMemObject(small);
  }

  /* The context still works. */
  valid_call(s, "valid call after all the bad ones");

  clReleaseMemObject(s->bq); clReleaseMemObject(s->bk); clReleaseMemObject(s->bv);
  clReleaseMemObject(s->bo); clReleaseMemObject(s->lse); clReleaseMemObject(s->alibi);
  clReleaseMemObject(s->cuq); clReleaseMemObject(s->cuk);
  fcl_context_destroy(s->ctx);
  printf("test_bad_input: %d cases, %d failed, %.1f s\n", g_cases, g_failed, tu_now() - t0);
  return g_failed ? 1 : 0;
}
