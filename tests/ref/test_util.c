#include "test_util.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- RNG ------------------------------------------------------------------ */
void tu_rng_seed(tu_rng *r, uint64_t seed) { r->state = seed ^ 0x853c49e6748fea9bULL; }

uint64_t tu_rng_next(tu_rng *r) {
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double tu_rng_uniform(tu_rng *r) { return (double)(tu_rng_next(r) >> 11) * 0x1.0p-53; }

double tu_rng_range(tu_rng *r, double lo, double hi) {
  return lo + (hi - lo) * tu_rng_uniform(r);
}

int64_t tu_rng_int(tu_rng *r, int64_t lo, int64_t hi) {
  const uint64_t span = (uint64_t)(hi - lo) + 1u;
  return lo + (int64_t)(tu_rng_next(r) % span);
}

double tu_rng_normal(tu_rng *r) {
  double u1 = tu_rng_uniform(r), u2 = tu_rng_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void tu_fill_uniform(tu_rng *r, double *x, size_t n, double lo, double hi) {
  for (size_t i = 0; i < n; ++i) x[i] = tu_rng_range(r, lo, hi);
}

void tu_take_rows(const double *all, double *mine, int pieces, const int64_t *start,
                  const int64_t *len, int64_t length, int64_t b, int64_t n, int64_t hd) {
  for (int64_t bb = 0; bb < b; ++bb) {
    int64_t row = 0;
    for (int p = 0; p < pieces; ++p)
      for (int64_t i = 0; i < len[p]; ++i, ++row)
        memcpy(mine + (bb * length + row) * hd, all + (bb * n + start[p] + i) * hd,
               (size_t)hd * sizeof *mine);
  }
}

/* ---- dtypes --------------------------------------------------------------- */
const char *tu_dtype_name(fcl_dtype t) {
  switch (t) {
  case FCL_F32: return "f32";
  case FCL_F16: return "f16";
  case FCL_BF16: return "bf16";
  case FCL_Q8_0: return "q8_0";
  case FCL_Q4_0: return "q4_0";
  case FCL_FP8_E4M3: return "fp8_e4m3";
  case FCL_FP8_E5M2: return "fp8_e5m2";
  }
  return "?";
}

size_t tu_dtype_size(fcl_dtype t) {
  switch (t) {
  case FCL_F32: return 4;
  case FCL_F16:
  case FCL_BF16: return 2;
  default: break; /* the KV-cache formats have no element size */
  }
  return 0;
}

/* Rounds |x| to a binary format with `mant` explicit fraction bits, minimum
 * normal exponent emin and largest finite value maxv (RNE; overflow -> inf).
 * Scaling by a power of two and rint() are exact in double for these
 * formats, so there is no double rounding. */
static double round_format(double x, int mant, int emin, double maxv) {
  if (isnan(x) || isinf(x) || x == 0.0) return x;
  const double a = fabs(x);
  int e;
  frexp(a, &e);       /* a = f * 2^e, f in [0.5, 1): exponent of a is e-1 */
  int E = e - 1;
  if (E < emin) E = emin; /* subnormal: fixed quantum */
  const double quantum = ldexp(1.0, E - mant);
  double r = rint(a / quantum) * quantum; /* rint: round half to even */
  /* Values at or past max + half an ulp round to infinity. */
  const double half_ulp_max = ldexp(1.0, (int)floor(log2(maxv)) - mant - 1);
  if (r > maxv || a >= maxv + half_ulp_max) r = INFINITY;
  return copysign(r, x);
}

#define F16_MAX 65504.0
#define BF16_MAX 0x1.FEp127

double tu_round(double x, fcl_dtype t) {
  switch (t) {
  case FCL_F32: return (double)(float)x;
  case FCL_F16: return round_format(x, 10, -14, F16_MAX);
  case FCL_BF16: return round_format(x, 7, -126, BF16_MAX);
  default: break;
  }
  return NAN;
}

void tu_round_array(double *x, size_t n, fcl_dtype t) {
  for (size_t i = 0; i < n; ++i) x[i] = tu_round(x[i], t);
}

uint16_t tu_f16_bits(double x) {
  const double r = round_format(x, 10, -14, F16_MAX);
  const uint16_t sign = signbit(r) ? 0x8000u : 0u;
  if (isnan(r)) return 0x7e00u;
  const double a = fabs(r);
  if (isinf(a)) return sign | 0x7c00u;
  if (a == 0.0) return sign;
  if (a < 0x1p-14) return sign | (uint16_t)(a * 0x1p24); /* subnormal */
  int e;
  const double f = frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
  const int E = e - 1;
  const uint16_t m = (uint16_t)((f * 2.0 - 1.0) * 1024.0);
  return sign | (uint16_t)((E + 15) << 10) | m;
}

double tu_f16_value(uint16_t b) {
  const int sign = b >> 15, ex = (b >> 10) & 0x1f, m = b & 0x3ff;
  double v;
  if (ex == 0) v = ldexp((double)m, -24);
  else if (ex == 31) v = m ? NAN : INFINITY;
  else v = ldexp(1.0 + m / 1024.0, ex - 15);
  return sign ? -v : v;
}

uint16_t tu_bf16_bits(double x) {
  const double r = round_format(x, 7, -126, BF16_MAX);
  if (isnan(r)) return 0x7fc0u;
  const float f = (float)r; /* exact: every bf16 value is an f32 value */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

double tu_bf16_value(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return (double)f;
}

void tu_encode(void *dst, double x, fcl_dtype t) {
  if (t == FCL_F32) {
    const float f = (float)x;
    memcpy(dst, &f, 4);
  } else {
    const uint16_t b = t == FCL_F16 ? tu_f16_bits(x) : tu_bf16_bits(x);
    memcpy(dst, &b, 2);
  }
}

double tu_decode(const void *src, fcl_dtype t) {
  if (t == FCL_F32) {
    float f;
    memcpy(&f, src, 4);
    return (double)f;
  }
  uint16_t b;
  memcpy(&b, src, 2);
  return t == FCL_F16 ? tu_f16_value(b) : tu_bf16_value(b);
}

/* ---- tensors -------------------------------------------------------------- */
const char *tu_layout_name(tu_layout l) {
  static const char *names[] = {"bshd", "bhsd", "sbhd", "padded", "padded-bhsd"};
  return (unsigned)l < TU_LAYOUT_COUNT ? names[l] : "?";
}

static void layout_strides(tu_layout l, int64_t b, int64_t s, int64_t h, int64_t d,
                           int64_t st[4]) {
  (void)b;
  st[3] = 1;
  switch (l) {
  case TU_BSHD:
    st[2] = d; st[1] = h * d; st[0] = s * h * d;
    break;
  case TU_BHSD:
    st[1] = d; st[2] = s * d; st[0] = h * s * d;
    break;
  case TU_SBHD:
    st[2] = d; st[0] = h * d; st[1] = b * h * d;
    break;
  case TU_PADDED:
    st[2] = d + 3; st[1] = h * st[2] + 2; st[0] = s * st[1] + 5;
    break;
  default: /* TU_PADDED_BHSD */
    st[1] = d + 2; st[2] = s * st[1] + 3; st[0] = h * st[2] + 1;
    break;
  }
}

static int64_t view_extent(const int64_t st[4], int64_t b, int64_t s, int64_t h,
                           int64_t d) {
  return (b - 1) * st[0] + (s - 1) * st[1] + (h - 1) * st[2] + (d - 1) * st[3] + 1;
}

int tu_cl_check(cl_int err, const char *what) {
  if (err == CL_SUCCESS) return 0;
  fprintf(stderr, "OpenCL error %d in %s\n", (int)err, what);
  return 1;
}

int tu_tensor_create(cl_context ctx, cl_command_queue queue, const double *dense,
                     int64_t b, int64_t s, int64_t h, int64_t d, fcl_dtype dtype,
                     tu_layout layout, size_t offset_elems, size_t tail_elems,
                     tu_tensor *out) {
  memset(out, 0, sizeof *out);
  const size_t es = tu_dtype_size(dtype);
  int64_t st[4];
  layout_strides(layout, b, s, h, d, st);
  const size_t n_elems = offset_elems + (size_t)view_extent(st, b, s, h, d) + tail_elems;
  const size_t bytes = n_elems * es;
  unsigned char *host = malloc(bytes);
  if (!host) return 1;
  memset(host, TU_POISON_BYTE, bytes);
  if (dense) {
    for (int64_t ib = 0; ib < b; ++ib)
      for (int64_t is = 0; is < s; ++is)
        for (int64_t ih = 0; ih < h; ++ih)
          for (int64_t id = 0; id < d; ++id) {
            const size_t e = offset_elems +
                             (size_t)(ib * st[0] + is * st[1] + ih * st[2] + id);
            tu_encode(host + e * es, dense[((ib * s + is) * h + ih) * d + id], dtype);
          }
  }
  cl_int err;
  out->buffer = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes,
                               host, &err);
  free(host);
  if (tu_cl_check(err, "clCreateBuffer(tensor)")) return 1;
  out->bytes = bytes;
  out->t.buffer = out->buffer;
  out->t.offset = offset_elems * es;
  out->t.dtype = dtype;
  memcpy(out->t.strides, st, sizeof st);
  out->b = b; out->s = s; out->h = h; out->d = d;
  out->layout = layout;
  (void)queue;
  return 0;
}

long tu_tensor_read(cl_command_queue queue, const tu_tensor *t, double *dense,
                    size_t *first_bad) {
  const size_t es = tu_dtype_size(t->t.dtype);
  unsigned char *host = malloc(t->bytes);
  unsigned char *covered = calloc(t->bytes, 1);
  long bad = -1;
  if (!host || !covered) goto done;
  if (tu_cl_check(clEnqueueReadBuffer(queue, t->buffer, CL_TRUE, 0, t->bytes, host, 0,
                                      NULL, NULL),
                  "clEnqueueReadBuffer(tensor)"))
    goto done;
  const int64_t *st = t->t.strides;
  for (int64_t ib = 0; ib < t->b; ++ib)
    for (int64_t is = 0; is < t->s; ++is)
      for (int64_t ih = 0; ih < t->h; ++ih)
        for (int64_t id = 0; id < t->d; ++id) {
          const size_t off = t->t.offset +
                             (size_t)(ib * st[0] + is * st[1] + ih * st[2] + id) * es;
          memset(covered + off, 1, es);
          if (dense)
            dense[((ib * t->s + is) * t->h + ih) * t->d + id] = tu_decode(host + off, t->t.dtype);
        }
  bad = 0;
  for (size_t i = 0; i < t->bytes; ++i)
    if (!covered[i] && host[i] != TU_POISON_BYTE) {
      if (bad == 0 && first_bad) *first_bad = i;
      ++bad;
    }
done:
  free(host);
  free(covered);
  return bad;
}

void tu_tensor_release(tu_tensor *t) {
  if (t->buffer) clReleaseMemObject(t->buffer);
  memset(t, 0, sizeof *t);
}

cl_mem tu_buffer_poison(cl_context ctx, cl_command_queue queue, size_t bytes) {
  unsigned char *host = malloc(bytes ? bytes : 1);
  if (!host) return NULL;
  memset(host, TU_POISON_BYTE, bytes ? bytes : 1);
  cl_mem m = tu_buffer_from(ctx, queue, host, bytes);
  free(host);
  return m;
}

cl_mem tu_buffer_from(cl_context ctx, cl_command_queue queue, const void *data,
                      size_t bytes) {
  cl_int err;
  (void)queue;
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes,
                            (void *)data, &err);
  if (tu_cl_check(err, "clCreateBuffer")) return NULL;
  return m;
}

int tu_buffer_read(cl_command_queue queue, cl_mem buf, void *dst, size_t bytes) {
  return tu_cl_check(clEnqueueReadBuffer(queue, buf, CL_TRUE, 0, bytes, dst, 0, NULL, NULL),
                     "clEnqueueReadBuffer");
}

cl_mem tu_buffer_random_f32(cl_context ctx, cl_command_queue queue, tu_rng *g, size_t n,
                            double amp) {
  float *x = malloc(n ? n * 4 : 4);
  if (!x) return NULL;
  for (size_t i = 0; i < n; ++i) x[i] = (float)tu_rng_range(g, -amp, amp);
  cl_mem m = tu_buffer_from(ctx, queue, x, n * 4);
  free(x);
  return m;
}

unsigned char *tu_buffer_snapshot(cl_command_queue queue, cl_mem buf, size_t bytes) {
  unsigned char *h = malloc(bytes ? bytes : 1);
  if (h && tu_buffer_read(queue, buf, h, bytes)) memset(h, 0, bytes);
  return h;
}

int tu_buffer_repoison(cl_command_queue queue, cl_mem buf, size_t bytes) {
  unsigned char *host = malloc(bytes);
  if (!host) return 1;
  memset(host, TU_POISON_BYTE, bytes);
  const int r = tu_cl_check(
      clEnqueueWriteBuffer(queue, buf, CL_TRUE, 0, bytes, host, 0, NULL, NULL),
      "clEnqueueWriteBuffer(poison)");
  free(host);
  return r;
}

long tu_buffer_poison_left(cl_command_queue queue, cl_mem buf, size_t from, size_t to,
                           size_t *first_bad) {
  if (to <= from) return 0;
  unsigned char *host = malloc(to - from);
  if (!host) return -1;
  long bad = -1;
  if (!tu_cl_check(clEnqueueReadBuffer(queue, buf, CL_TRUE, from, to - from, host, 0,
                                       NULL, NULL),
                   "clEnqueueReadBuffer")) {
    bad = 0;
    for (size_t i = 0; i < to - from; ++i)
      if (host[i] != TU_POISON_BYTE) {
        if (bad == 0 && first_bad) *first_bad = from + i;
        ++bad;
      }
  }
  free(host);
  return bad;
}

int tu_buffer_read_f32(cl_command_queue queue, cl_mem buf, double *dst, size_t n,
                       size_t tail_bytes, long *bad_tail) {
  const size_t bytes = n * 4 + tail_bytes;
  unsigned char *host = malloc(bytes ? bytes : 1);
  if (!host) return 1;
  if (tu_buffer_read(queue, buf, host, bytes)) {
    free(host);
    return 1;
  }
  for (size_t i = 0; i < n; ++i) {
    float f;
    memcpy(&f, host + 4 * i, 4);
    dst[i] = f;
  }
  long bad = 0;
  for (size_t i = n * 4; i < bytes; ++i) bad += host[i] != TU_POISON_BYTE;
  if (bad_tail) *bad_tail = bad;
  free(host);
  return 0;
}

/* ---- comparison ----------------------------------------------------------- */
tu_tol tu_tol_output(fcl_dtype t) {
  /* A correct kernel with f32 accumulation errs by ~1e-6 before the final
   * store; the store to f16/bf16 adds up to half an ulp of |o| (2^-11,
   * 2^-8), and a path that rounds P to the dtype before P.V adds at most
   * about as much again times max|v|. These bounds leave ~4x margin. */
  switch (t) {
  case FCL_F32: return (tu_tol){1e-5, 1e-4, 0.0};
  case FCL_F16: return (tu_tol){1e-3, 2e-3, 0.0};
  case FCL_BF16: return (tu_tol){8e-3, 1.6e-2, 0.0};
  default: break;
  }
  return (tu_tol){0, 0, 0};
}

tu_tol tu_tol_lse(void) {
  /* lse is computed and stored in f32 for every dtype, from inputs that are
   * exactly representable: the f32 tolerance applies, absolute. */
  return (tu_tol){1e-5, 1e-4, 0.0};
}

tu_tol tu_tol_grad(fcl_dtype t) {
  /* The stores to f16/bf16 alone err by up to half an ulp (2^-11, 2^-8
   * relative); on top come the forward's o stored in the dtype (it enters
   * delta = rowsum(dO*O)) and f32 accumulation over a few hundred keys. */
  switch (t) {
  case FCL_F32: return (tu_tol){2e-4, 0.0, 0.0};
  case FCL_F16: return (tu_tol){5e-3, 0.0, 0.0};
  case FCL_BF16: return (tu_tol){3e-2, 0.0, 0.0};
  default: break;
  }
  return (tu_tol){0, 0, 0};
}

tu_tol tu_tol_rwkv6(fcl_dtype t) {
  switch (t) {
  case FCL_F32: return (tu_tol){1e-4, 0.0, 0.0};
  case FCL_F16: return (tu_tol){3e-3, 0.0, 0.0};
  case FCL_BF16: return (tu_tol){2e-2, 0.0, 0.0};
  default: break;
  }
  return (tu_tol){0, 0, 0};
}

tu_tol tu_tol_rwkv6_state(void) { return (tu_tol){1e-4, 0.0, 0.0}; }

double tu_logit_error(double logit_bound, int64_t head_dim) {
  (void)head_dim; /* measured: no visible growth with head_dim up to 512 */
  return 8.0 * 0x1p-24 * logit_bound;
}

tu_tol tu_tol_with_logits(tu_tol t, double logit_bound, int64_t head_dim, double vmax) {
  const double e = tu_logit_error(logit_bound, head_dim);
  t.abs += vmax > 0 ? 2.0 * e * vmax : e;
  return t;
}

tu_cmp tu_compare(const double *got, const double *ref, size_t n, tu_tol tol,
                  int lse_style) {
  tu_cmp c;
  memset(&c, 0, sizeof c);
  c.ok = 1;
  for (size_t i = 0; i < n; ++i)
    if (isfinite(ref[i]) && fabs(ref[i]) > c.ref_max) c.ref_max = fabs(ref[i]);
  const double abs_tol = (lse_style ? tol.atol : tol.atol * c.ref_max) + tol.abs;
  double worst_ratio = -1.0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i], r = ref[i];
    double err, allowed, ratio;
    int bad;
    if (isnan(g) || isnan(r)) {
      err = NAN; allowed = 0; bad = 1; ratio = INFINITY;
    } else if (isinf(g) || isinf(r)) {
      bad = g != r;
      err = bad ? INFINITY : 0.0; allowed = 0; ratio = bad ? INFINITY : 0.0;
    } else {
      err = fabs(g - r);
      allowed = abs_tol + tol.rtol * fabs(r);
      bad = !(err <= allowed);
      ratio = allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0.0);
      if (err > c.max_err) c.max_err = err;
    }
    if (bad) {
      c.ok = 0;
      ++c.n_bad;
    }
    /* First NaN/inf mismatch wins ties, else the largest ratio. */
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      c.worst = i; c.worst_got = g; c.worst_ref = r;
      c.worst_err = err; c.worst_allowed = allowed;
    }
  }
  c.worst_ratio = worst_ratio < 0 ? 0.0 : worst_ratio;
  return c;
}

void tu_print_cmp(const char *what, const tu_cmp *c, const int64_t *dims, int ndims) {
  char coords[96] = "";
  if (ndims > 0) {
    int64_t idx[4] = {0, 0, 0, 0};
    size_t rem = c->worst;
    for (int k = ndims - 1; k >= 0; --k) {
      idx[k] = (int64_t)(rem % (size_t)dims[k]);
      rem /= (size_t)dims[k];
    }
    int p = snprintf(coords, sizeof coords, "[");
    for (int k = 0; k < ndims && p < (int)sizeof coords; ++k)
      p += snprintf(coords + p, sizeof coords - (size_t)p, "%s%lld", k ? "," : "",
                    (long long)idx[k]);
    if (p < (int)sizeof coords) snprintf(coords + p, sizeof coords - (size_t)p, "]");
  } else {
    snprintf(coords, sizeof coords, "[%zu]", c->worst);
  }
  printf("    %s: %s, %zu bad; worst %s got %.9g ref %.9g err %.3g allowed %.3g "
         "(max err %.3g, max|ref| %.3g)\n",
         what, c->ok ? "ok" : "MISMATCH", c->n_bad, coords, c->worst_got, c->worst_ref,
         c->worst_err, c->worst_allowed, c->max_err, c->ref_max);
}

double tu_now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Error messages (the bad-input suites). */
static int is_ident(int ch) { return isalnum(ch) || ch == '_'; }

/* word occurs in msg, not as part of a longer identifier or number. A
 * number with a '.' may be printed with trailing zeros ("-1.5" ~ "-1.500"). */
static int has_word(const char *msg, const char *word) {
  const size_t n = strlen(word);
  const int numeric = isdigit((unsigned char)word[0]) || word[0] == '-';
  for (const char *p = strstr(msg, word); p; p = strstr(p + 1, word)) {
    if (p > msg && (is_ident((unsigned char)p[-1]) || (numeric && p[-1] == '.'))) continue;
    const char *e = p + n;
    if (numeric && strchr(word, '.'))
      while (*e == '0') ++e;
    if (is_ident((unsigned char)*e)) continue;
    if (numeric && *e == '.' && isdigit((unsigned char)e[1])) continue;
    return 1;
  }
  return 0;
}

/* Each entry of words must occur; an entry "a|b" accepts either. */
int tu_has_words(const char *msg, const char *const *words, char *missing,
                 size_t missing_len) {
  int all = 1;
  missing[0] = 0;
  for (; words && *words; ++words) {
    char alt[128];
    snprintf(alt, sizeof alt, "%s", *words);
    int found = 0;
    for (char *save = alt, *tok; !found && (tok = strtok(save, "|")); save = NULL)
      found = has_word(msg, tok);
    if (!found) {
      all = 0;
      size_t len = strlen(missing);
      snprintf(missing + len, missing_len - len, "%s\"%s\"", len ? ", " : "", *words);
    }
  }
  return all;
}

fcl_tensor tu_dense_view(cl_mem m, fcl_dtype t, int64_t seq, int64_t heads, int64_t dim) {
  const fcl_tensor v = {m, 0, t, {seq * heads * dim, heads * dim, dim, 1}};
  return v;
}
