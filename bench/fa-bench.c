/* fa-bench: checks fcl_attention_forward against the double-precision
 * reference on a sample of rows, then times it (median of N runs, each
 * bracketed by clFinish and a monotonic clock) and reports TFLOP/s.
 *
 * Inputs are dense [batch, seq, heads, dim] tensors of random values, uniform
 * with mean 0 and variance 1, from a fixed seed, rounded to the dtype. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "flashcl.h"
#include "ref_attention.h"
#include "test_util.h"

#define CHECK_ROWS 64

/* n random values of dtype t, uniform with mean 0 and variance 1; NULL when
 * out of memory. */
static void *random_data(fcl_dtype t, size_t n, uint64_t seed) {
  size_t es = tu_dtype_size(t);
  unsigned char *p = malloc(n * es);
  const double a = sqrt(3.0);
  tu_rng rng;
  tu_rng_seed(&rng, seed);
  for (size_t i = 0; p && i < n; i++) tu_encode(p + i * es, tu_rng_range(&rng, -a, a), t);
  return p;
}

/* Element i of an array of dtype t. */
static double elem(const void *p, fcl_dtype t, size_t i) {
  return tu_decode((const unsigned char *)p + i * tu_dtype_size(t), t);
}

/* ---- one configuration ------------------------------------------------- */

typedef struct {
  int64_t   b, h, hkv, sq, sk, d, dv;
  fcl_dtype t;
  int       causal;
} shape;

typedef struct {       /* host copies and device buffers of q, k, v, o, lse */
  void  *q, *k, *v;
  cl_mem dq, dk, dv, dout, dlse;
} inputs;

typedef struct {
  double      ms, tflops, err_o, err_lse;
  const char *check; /* PASS, FAIL, SKIP, ERROR */
} result;

static size_t n_q(const shape *s) { return (size_t)(s->b * s->sq * s->h * s->d); }
static size_t n_k(const shape *s) { return (size_t)(s->b * s->sk * s->hkv * s->d); }
static size_t n_v(const shape *s) { return (size_t)(s->b * s->sk * s->hkv * s->dv); }
static size_t n_o(const shape *s) { return (size_t)(s->b * s->sq * s->h * s->dv); }

static void inputs_free(inputs *in) {
  free(in->q), free(in->k), free(in->v);
  cl_mem m[] = {in->dq, in->dk, in->dv, in->dout, in->dlse};
  for (int i = 0; i < 5; i++)
    if (m[i]) clReleaseMemObject(m[i]);
  memset(in, 0, sizeof *in);
}

static cl_mem upload(fcl_context *ctx, const void *host, size_t bytes, cl_int *err) {
  cl_mem m = clCreateBuffer(fcl_context_cl(ctx), CL_MEM_READ_WRITE, bytes, NULL, err);
  if (*err == CL_SUCCESS && host)
    *err = clEnqueueWriteBuffer(fcl_context_queue(ctx), m, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
  return m;
}

static int inputs_make(fcl_context *ctx, const shape *s, inputs *in) {
  size_t es = tu_dtype_size(s->t);
  memset(in, 0, sizeof *in);
  in->q = random_data(s->t, n_q(s), 1);
  in->k = random_data(s->t, n_k(s), 2);
  in->v = random_data(s->t, n_v(s), 3);
  const void *host[5] = {in->q, in->k, in->v, NULL, NULL};
  cl_mem *dev[5] = {&in->dq, &in->dk, &in->dv, &in->dout, &in->dlse};
  size_t bytes[5] = {n_q(s) * es, n_k(s) * es, n_v(s) * es, n_o(s) * es,
                     (size_t)(s->b * s->h * s->sq) * sizeof(float)};
  cl_int err = in->q && in->k && in->v ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  for (int i = 0; i < 5 && err == CL_SUCCESS; i++) *dev[i] = upload(ctx, host[i], bytes[i], &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "fa-bench: could not allocate or upload the inputs (OpenCL error %d)\n",
            err);
    inputs_free(in);
    return -1;
  }
  return 0;
}

static fcl_status forward(fcl_context *ctx, const shape *s, const inputs *in) {
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = s->b, d.seqlen_q = s->sq, d.seqlen_k = s->sk, d.heads_q = s->h;
  d.heads_kv = s->hkv, d.head_dim = s->d, d.head_dim_v = s->dv, d.causal = s->causal;
  fcl_tensor q = {in->dq, 0, s->t, {s->sq * s->h * s->d, s->h * s->d, s->d, 1}};
  fcl_tensor k = {in->dk, 0, s->t, {s->sk * s->hkv * s->d, s->hkv * s->d, s->d, 1}};
  fcl_tensor v = {in->dv, 0, s->t, {s->sk * s->hkv * s->dv, s->hkv * s->dv, s->dv, 1}};
  fcl_tensor o = {in->dout, 0, s->t, {s->sq * s->h * s->dv, s->h * s->dv, s->dv, 1}};
  fcl_status st = fcl_attention_forward(ctx, &d, &q, &k, &v, &o, in->dlse);
  if (st != FCL_OK)
    fprintf(stderr, "fa-bench: fcl_attention_forward: %s\n", fcl_context_last_error(ctx));
  return st;
}

typedef struct { int64_t b, h, i; } row;

static int row_cmp(const void *x, const void *y) { /* by (batch, head, query) */
  const row *a = x, *b = y;
  return a->b != b->b ? (a->b > b->b) - (a->b < b->b)
       : a->h != b->h ? (a->h > b->h) - (a->h < b->h)
                      : (a->i > b->i) - (a->i < b->i);
}

/* Which rows to check: all of them when there are few, else the first, the
 * last, and query positions spread evenly over random (batch, head) pairs. */
static int pick_rows(const shape *s, row *r) {
  int64_t total = s->b * s->h * s->sq;
  int n = total < CHECK_ROWS ? (int)total : CHECK_ROWS;
  tu_rng rng;
  tu_rng_seed(&rng, 4);
  for (int j = 0; j < n; j++) {
    if (n == total) {
      r[j] = (row){j / (s->h * s->sq), j / s->sq % s->h, j % s->sq};
    } else {
      r[j].b = tu_rng_int(&rng, 0, s->b - 1);
      r[j].h = tu_rng_int(&rng, 0, s->h - 1);
      r[j].i = j * (s->sq - 1) / (n - 1);
    }
  }
  if (n < total) {
    r[0] = (row){0, 0, 0};
    r[n - 1] = (row){s->b - 1, s->h - 1, s->sq - 1};
  }
  qsort(r, (size_t)n, sizeof *r, row_cmp);
  return n;
}

/* Runs the forward pass once and compares sampled rows of o and lse with
 * ref_attention_row on a one-head slice of the same (rounded) inputs. */
static const char *check(fcl_context *ctx, const shape *s, const inputs *in, result *res) {
  size_t es = tu_dtype_size(s->t), dv = (size_t)s->dv;
  cl_command_queue queue = fcl_context_queue(ctx);
  row rows[CHECK_ROWS];
  int n = pick_rows(s, rows);
  const char *verdict = "ERROR";

  /* Outputs start as NaN, so a row the kernel never writes fails. */
  if (tu_buffer_repoison(queue, in->dout, n_o(s) * es) ||
      tu_buffer_repoison(queue, in->dlse, (size_t)(s->b * s->h * s->sq) * sizeof(float)) ||
      forward(ctx, s, in) != FCL_OK)
    return verdict;

  ref_attention_problem p = {1, s->sq, s->sk, 1, 1, s->d, s->dv, 0.0, s->causal,
                             -1, -1, 0.0, NULL, NULL, NULL};
  double *q = calloc((size_t)(s->sq * s->d), sizeof *q);
  double *k = malloc((size_t)(s->sk * s->d) * sizeof *k);
  double *v = malloc((size_t)s->sk * dv * sizeof *v);
  double *ref = malloc((size_t)n * (dv + 1) * sizeof *ref), *ref_lse = ref + n * dv;
  double *got = malloc((size_t)n * (dv + 1) * sizeof *got), *got_lse = got + n * dv;
  unsigned char *raw = malloc(dv * es);
  if (!q || !k || !v || !ref || !got || !raw) goto done;

  int64_t group = s->h / s->hkv, kb = -1, kh = -1;
  for (int j = 0; j < n; j++) {
    const row *r = &rows[j];
    if (r->b != kb || r->h / group != kh) { /* rows are sorted: load each kv slice once */
      kb = r->b, kh = r->h / group;
      for (int64_t t = 0; t < s->sk; t++) {
        size_t at = (size_t)((kb * s->sk + t) * s->hkv + kh);
        for (int64_t x = 0; x < s->d; x++) k[t * s->d + x] = elem(in->k, s->t, at * s->d + x);
        for (size_t x = 0; x < dv; x++) v[t * s->dv + x] = elem(in->v, s->t, at * dv + x);
      }
    }
    size_t at = (size_t)((r->b * s->sq + r->i) * s->h + r->h);
    for (int64_t x = 0; x < s->d; x++) q[r->i * s->d + x] = elem(in->q, s->t, at * s->d + x);
    ref_lse[j] = ref_attention_row(&p, q, k, v, 0, 0, r->i, ref + j * dv);

    float lse;
    size_t lse_at = (size_t)((r->b * s->h + r->h) * s->sq + r->i) * sizeof lse;
    if (clEnqueueReadBuffer(queue, in->dout, CL_TRUE, at * dv * es, dv * es, raw, 0, NULL,
                            NULL) ||
        clEnqueueReadBuffer(queue, in->dlse, CL_TRUE, lse_at, sizeof lse, &lse, 0, NULL,
                            NULL)) {
      fprintf(stderr, "fa-bench: reading the outputs failed\n");
      goto done;
    }
    for (size_t x = 0; x < dv; x++) got[j * dv + x] = elem(raw, s->t, x);
    got_lse[j] = lse;
  }
  tu_cmp co = tu_compare(got, ref, (size_t)n * dv, tu_tol_output(s->t), 0);
  tu_cmp cl = tu_compare(got_lse, ref_lse, (size_t)n, tu_tol_lse(), 1);
  /* max_err covers finite pairs only: a NaN or a wrong infinity shows as inf. */
  res->err_o = co.n_bad && !isfinite(co.worst_err) ? INFINITY : co.max_err;
  res->err_lse = cl.n_bad && !isfinite(cl.worst_err) ? INFINITY : cl.max_err;
  verdict = co.ok && cl.ok ? "PASS" : "FAIL";
  if (!co.ok || !cl.ok) { /* the worst element, on stderr: stdout may be CSV or JSON */
    const tu_cmp *c = co.ok ? &cl : &co;
    const row *r = &rows[co.ok ? cl.worst : co.worst / dv];
    fprintf(stderr,
            "fa-bench: Nq=%lld Nk=%lld %s causal=%d: %s of row b=%lld h=%lld i=%lld: "
            "got %.9g, ref %.9g, err %.3g, allowed %.3g; %zu bad\n",
            (long long)s->sq, (long long)s->sk, tu_dtype_name(s->t), s->causal,
            co.ok ? "lse" : "o", (long long)r->b,
            (long long)r->h, (long long)r->i, c->worst_got, c->worst_ref, c->worst_err,
            c->worst_allowed, c->n_bad);
  }
done:
  free(q), free(k), free(v), free(ref), free(got), free(raw);
  return verdict;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Median wall time of one forward call in ms; negative on error. */
static double time_forward(fcl_context *ctx, const shape *s, const inputs *in, int warmup,
                           int iters) {
  cl_command_queue queue = fcl_context_queue(ctx);
  double *t = malloc((size_t)iters * sizeof *t), med = -1;
  if (!t || clFinish(queue)) goto done;
  for (int i = 0; i < warmup; i++)
    if (forward(ctx, s, in) != FCL_OK || clFinish(queue)) goto done;
  for (int i = 0; i < iters; i++) {
    double t0 = now_ms();
    if (forward(ctx, s, in) != FCL_OK || clFinish(queue)) goto done;
    t[i] = now_ms() - t0;
  }
  qsort(t, (size_t)iters, sizeof *t, cmp_double);
  med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
done:
  free(t);
  return med;
}

/* FLOPs of the two matrix products, halved when causal. */
static double flops(const shape *s) {
  double f = 2.0 * (double)s->b * (double)s->h * (double)s->sq * (double)s->sk *
             (double)(s->d + s->dv);
  return s->causal ? f / 2 : f;
}

/* ---- output ------------------------------------------------------------ */

static void json_string(const char *str) {
  putchar('"');
  for (; *str; str++) {
    if (*str == '"' || *str == '\\') printf("\\%c", *str);
    else if ((unsigned char)*str < 0x20) printf("\\u%04x", *str);
    else putchar(*str);
  }
  putchar('"');
}

/* A JSON number, or null for NaN and infinities. */
static void json_number(const char *key, double x) {
  if (isfinite(x)) printf("\"%s\": %.6g, ", key, x);
  else printf("\"%s\": null, ", key);
}

static void print_header(bench_output out, const char *device) {
  if (out == OUT_TABLE) {
    printf("device: %s\n", device);
    printf("%-14s %4s %4s %4s %6s %6s %4s %4s %-5s %6s %10s %9s %9s %9s  %s\n", "impl", "B",
           "H", "Hkv", "Nq", "Nk", "D", "Dv", "dtype", "causal", "ms", "TFLOP/s", "err(o)",
           "err(lse)", "check");
  } else if (out == OUT_CSV) {
    printf("impl,device,batch,heads,heads_kv,seqlen_q,seqlen_k,head_dim,head_dim_v,dtype,"
           "causal,ms,tflops,err_o,err_lse,check\n");
  } else {
    printf("[");
  }
}

static void print_result(bench_output out, const char *device, const shape *s,
                         const result *r, int first) {
  const char *dt = tu_dtype_name(s->t);
  if (out == OUT_TABLE) {
    printf("%-14s %4lld %4lld %4lld %6lld %6lld %4lld %4lld %-5s %6d %10.3f %9.4f ", "flashcl",
           (long long)s->b, (long long)s->h, (long long)s->hkv, (long long)s->sq,
           (long long)s->sk, (long long)s->d, (long long)s->dv, dt, s->causal, r->ms, r->tflops);
    if (r->err_o >= 0) printf("%9.2e %9.2e  %s\n", r->err_o, r->err_lse, r->check);
    else printf("%9s %9s  %s\n", "-", "-", r->check);
  } else if (out == OUT_CSV) {
    printf("flashcl,\"");
    for (const char *c = device; *c; c++) { /* CSV doubles quotes */
      if (*c == '"') putchar('"');
      putchar(*c);
    }
    printf("\",%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,%d,%.6g,%.6g,", (long long)s->b,
           (long long)s->h, (long long)s->hkv, (long long)s->sq, (long long)s->sk,
           (long long)s->d, (long long)s->dv, dt, s->causal, r->ms, r->tflops);
    if (r->err_o >= 0) printf("%.3g,%.3g,%s\n", r->err_o, r->err_lse, r->check);
    else printf(",,%s\n", r->check);
  } else {
    printf("%s\n  {\"impl\": \"flashcl\", \"device\": ", first ? "" : ",");
    json_string(device);
    printf(", \"batch\": %lld, \"heads\": %lld, \"heads_kv\": %lld, \"seqlen_q\": %lld, "
           "\"seqlen_k\": %lld, \"head_dim\": %lld, \"head_dim_v\": %lld, \"dtype\": \"%s\", "
           "\"causal\": %d, ",
           (long long)s->b, (long long)s->h, (long long)s->hkv, (long long)s->sq,
           (long long)s->sk, (long long)s->d, (long long)s->dv, dt, s->causal);
    json_number("ms", r->ms);
    json_number("tflops", r->tflops);
    json_number("err_o", r->err_o >= 0 ? r->err_o : NAN);
    json_number("err_lse", r->err_lse >= 0 ? r->err_lse : NAN);
    printf("\"check\": \"%s\"}", r->check);
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  bench_args a;
  int rc = bench_parse_args(argc, argv, &a);
  if (rc) return rc > 0 ? 0 : 2;

  fcl_context *ctx = NULL;
  fcl_status st = fcl_context_create(a.device, &ctx);
  if (st != FCL_OK) {
    fprintf(stderr, "fa-bench: fcl_context_create(%s): %s\n", a.device ? a.device : "NULL",
            fcl_context_last_error(NULL));
    return 1;
  }
  const char *device = fcl_context_device_name(ctx);
  int failed = 0, first = 1;
  print_header(a.output, device);
  for (int si = 0; si < a.n_seqlen; si++) {
    for (int ti = 0; ti < a.n_dtypes; ti++) {
      shape s = {a.batch, a.heads, a.heads_kv, a.seqlen_q[si], a.seqlen_k[si],
                 a.head_dim, a.head_dim_v, a.dtypes[ti], 0};
      inputs in;
      if (inputs_make(ctx, &s, &in)) {
        failed = 1;
        continue;
      }
      for (int ci = 0; ci < a.n_causal; ci++) {
        s.causal = a.causal[ci];
        result r = {NAN, NAN, -1, -1, "SKIP"};
        if (a.check) r.check = check(ctx, &s, &in, &r);
        if (strcmp(r.check, "ERROR")) {
          r.ms = time_forward(ctx, &s, &in, a.warmup, a.iters);
          if (r.ms < 0) r.ms = NAN, r.check = "ERROR";
          else r.tflops = flops(&s) / (r.ms * 1e9);
        }
        failed |= !strcmp(r.check, "FAIL") || !strcmp(r.check, "ERROR");
        print_result(a.output, device, &s, &r, first);
        first = 0;
      }
      inputs_free(&in);
    }
  }
  if (a.output == OUT_JSON) printf("\n]\n");
  fcl_context_destroy(ctx);
  return failed;
}
