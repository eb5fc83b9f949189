#include "ref_rwkv7.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double ref_rwkv7_scale(const ref_rwkv7_problem *p) {
  return p->scale != 0.0 ? p->scale : 1.0 / sqrt((double)p->head_dim_k);
}

int64_t ref_rwkv7_tokens(const ref_rwkv7_problem *p) {
  return p->cu_seqlens ? p->cu_seqlens[p->batch] : p->batch * p->seqlen;
}

/* First token and length of sequence n. */
static void seq_span(const ref_rwkv7_problem *p, int64_t n, int64_t *first, int64_t *len) {
  if (p->cu_seqlens) {
    *first = p->cu_seqlens[n];
    *len = p->cu_seqlens[n + 1] - p->cu_seqlens[n];
  } else {
    *first = n * p->seqlen;
    *len = p->seqlen;
  }
}

/* Token of the q-th step processed (in processing order). */
static int64_t step_token(const ref_rwkv7_problem *p, int64_t first, int64_t len, int64_t q) {
  return first + (p->reverse ? len - 1 - q : q);
}

/* Rows of token tok, head h: x (dim K) and y (dim V). */
typedef struct {
  const double *r, *w, *k, *v, *a, *b;
} rows;
static rows rows_at(const ref_rwkv7_problem *p, const ref_rwkv7_in *in, int64_t tok, int64_t h) {
  const size_t xk = (size_t)((tok * p->heads + h) * p->head_dim_k);
  const size_t xv = (size_t)((tok * p->heads + h) * p->head_dim_v);
  return (rows){in->r + xk, in->w + xk, in->k + xk, in->v + xv, in->a + xk, in->b + xk};
}

/* sa[j] = sum_m a[m] S[m][j]. */
static void a_dot(int64_t K, int64_t V, const double *a, const double *S, double *sa) {
  for (int64_t j = 0; j < V; ++j) sa[j] = 0.0;
  for (int64_t m = 0; m < K; ++m)
    for (int64_t j = 0; j < V; ++j) sa[j] += a[m] * S[m * V + j];
}

/* One step from state S (in place); sa is scratch of V values. */
static void step(int64_t K, int64_t V, const rows *x, double *S, double *sa) {
  a_dot(K, V, x->a, S, sa);
  for (int64_t i = 0; i < K; ++i) {
    const double e = exp(x->w[i]);
    for (int64_t j = 0; j < V; ++j)
      S[i * V + j] = e * S[i * V + j] + x->b[i] * sa[j] + x->k[i] * x->v[j];
  }
}

void ref_rwkv7_forward(const ref_rwkv7_problem *p, const ref_rwkv7_in *in, double *o,
                       double *ht) {
  const int64_t H = p->heads, K = p->head_dim_k, V = p->head_dim_v;
  const double scale = ref_rwkv7_scale(p);
  double *S = malloc(sizeof(double) * (size_t)(K * V)), *sa = malloc(sizeof(double) * (size_t)V);
  if (!S || !sa) abort();
  for (int64_t n = 0; n < p->batch; ++n) {
    int64_t first, len;
    seq_span(p, n, &first, &len);
    for (int64_t h = 0; h < H; ++h) {
      const size_t st = (size_t)((n * H + h) * K * V);
      for (int64_t e = 0; e < K * V; ++e) S[e] = in->h0 ? in->h0[st + (size_t)e] : 0.0;
      for (int64_t q = 0; q < len; ++q) {
        const int64_t tok = step_token(p, first, len, q);
        const rows x = rows_at(p, in, tok, h);
        step(K, V, &x, S, sa);
        double *orow = o + (tok * H + h) * V;
        for (int64_t j = 0; j < V; ++j) {
          double acc = 0.0;
          for (int64_t i = 0; i < K; ++i) acc += x.r[i] * S[i * V + j];
          orow[j] = scale * acc;
        }
      }
      if (ht) memcpy(ht + st, S, sizeof(double) * (size_t)(K * V));
    }
  }
  free(S);
  free(sa);
}

int ref_rwkv7_backward(const ref_rwkv7_problem *p, const ref_rwkv7_in *in, const double *dout,
                       const double *dht, const ref_rwkv7_grads *gr) {
  const int64_t H = p->heads, K = p->head_dim_k, V = p->head_dim_v, KV = K * V;
  const double scale = ref_rwkv7_scale(p);
  int64_t maxlen = 0;
  for (int64_t n = 0; n < p->batch; ++n) {
    int64_t first, len;
    seq_span(p, n, &first, &len);
    if (len > maxlen) maxlen = len;
  }
  int64_t C = 1;
  while (C * C < maxlen) ++C; /* steps a checkpoint segment */
  const int64_t nck = maxlen / C + 1;
  double *ck = malloc(sizeof(double) * (size_t)(nck * KV));
  double *st = malloc(sizeof(double) * (size_t)((C + 1) * KV)); /* a segment's states */
  double *g = malloc(sizeof(double) * (size_t)KV);
  double *sa = malloc(sizeof(double) * (size_t)V), *gb = malloc(sizeof(double) * (size_t)V);
  if (!ck || !st || !g || !sa || !gb) {
    free(ck); free(st); free(g); free(sa); free(gb);
    return -1;
  }
  for (int64_t n = 0; n < p->batch; ++n) {
    int64_t first, len;
    seq_span(p, n, &first, &len);
    for (int64_t h = 0; h < H; ++h) {
      const size_t so = (size_t)((n * H + h) * KV);
      /* Checkpoint c: the state before step c * C. */
      double *S = st;
      for (int64_t e = 0; e < KV; ++e) S[e] = in->h0 ? in->h0[so + (size_t)e] : 0.0;
      for (int64_t q = 0; q < len; ++q) {
        if (q % C == 0) memcpy(ck + (q / C) * KV, S, sizeof(double) * (size_t)KV);
        const rows x = rows_at(p, in, step_token(p, first, len, q), h);
        step(K, V, &x, S, sa);
      }
      for (int64_t e = 0; e < KV; ++e) g[e] = dht ? dht[so + (size_t)e] : 0.0;
      for (int64_t c = (len - 1) / C; c >= 0 && len > 0; --c) {
        const int64_t q0 = c * C, q1 = q0 + C < len ? q0 + C : len;
        memcpy(st, ck + c * KV, sizeof(double) * (size_t)KV);
        for (int64_t q = q0; q < q1; ++q) { /* st[q - q0]: the state before step q */
          const rows x = rows_at(p, in, step_token(p, first, len, q), h);
          memcpy(st + (q - q0 + 1) * KV, st + (q - q0) * KV, sizeof(double) * (size_t)KV);
          step(K, V, &x, st + (q - q0 + 1) * KV, sa);
        }
        for (int64_t q = q1 - 1; q >= q0; --q) {
          const int64_t tok = step_token(p, first, len, q);
          const rows x = rows_at(p, in, tok, h);
          const double *prev = st + (q - q0) * KV, *cur = prev + KV;
          const double *d = dout + (tok * H + h) * V;
          const size_t xk = (size_t)((tok * H + h) * K), xv = (size_t)((tok * H + h) * V);
          for (int64_t i = 0; i < K; ++i) {
            double dr = 0.0;
            for (int64_t j = 0; j < V; ++j) {
              g[i * V + j] += scale * x.r[i] * d[j];
              dr += d[j] * cur[i * V + j];
            }
            gr->dr[xk + (size_t)i] = scale * dr;
          }
          a_dot(K, V, x.a, prev, sa);
          a_dot(K, V, x.b, g, gb);
          for (int64_t j = 0; j < V; ++j) {
            double dv = 0.0;
            for (int64_t i = 0; i < K; ++i) dv += x.k[i] * g[i * V + j];
            gr->dv[xv + (size_t)j] = dv;
          }
          for (int64_t i = 0; i < K; ++i) {
            const double e = exp(x.w[i]);
            double dk = 0.0, dw = 0.0, da = 0.0, db = 0.0;
            for (int64_t j = 0; j < V; ++j) {
              const double gij = g[i * V + j], pij = prev[i * V + j];
              dk += gij * x.v[j];
              dw += gij * pij;
              db += gij * sa[j];
              da += pij * gb[j];
              g[i * V + j] = e * gij + x.a[i] * gb[j];
            }
            gr->dk[xk + (size_t)i] = dk;
            gr->dw[xk + (size_t)i] = e * dw;
            gr->da[xk + (size_t)i] = da;
            gr->db[xk + (size_t)i] = db;
          }
        }
      }
      if (gr->dh0) memcpy(gr->dh0 + so, g, sizeof(double) * (size_t)KV);
    }
  }
  free(ck); free(st); free(g); free(sa); free(gb);
  return 0;
}

void ref_rwkv7_fill(tu_rng *g, const ref_rwkv7_problem *p, ref_rwkv7_decay kind, double *r,
                    double *w, double *k, double *v, double *a, double *b) {
  const int64_t K = p->head_dim_k, nrow = ref_rwkv7_tokens(p) * p->heads;
  tu_fill_uniform(g, r, (size_t)(nrow * K), -1, 1);
  tu_fill_uniform(g, k, (size_t)(nrow * K), -1, 1);
  tu_fill_uniform(g, v, (size_t)(nrow * p->head_dim_v), -1, 1);
  for (int64_t x = 0; x < nrow * K; ++x)
    w[x] = kind == REF_RWKV7_W_STRONG ? tu_rng_range(g, -8.0, -6.0)
           : kind == REF_RWKV7_W_MODEL ? -exp(-0.5) * tu_rng_uniform(g)
                                        : 0.0;
  for (int64_t row = 0; row < nrow; ++row) {
    double *kk = a + row * K, norm = 0.0;
    tu_fill_uniform(g, kk, (size_t)K, -1, 1);
    for (int64_t i = 0; i < K; ++i) norm += kk[i] * kk[i];
    norm = sqrt(norm) > 1e-12 ? sqrt(norm) : 1e-12;
    for (int64_t i = 0; i < K; ++i) {
      kk[i] /= norm;
      b[row * K + i] = kk[i] * tu_rng_range(g, 0.0, 0.1);
      kk[i] = -kk[i];
    }
  }
}
