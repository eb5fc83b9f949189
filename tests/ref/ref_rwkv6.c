#include "ref_rwkv6.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double ref_rwkv6_scale(const ref_rwkv6_problem *p) {
  return p->scale != 0.0 ? p->scale : 1.0 / sqrt((double)p->head_dim_k);
}

int64_t ref_rwkv6_tokens(const ref_rwkv6_problem *p) {
  return p->cu_seqlens ? p->cu_seqlens[p->batch] : p->batch * p->seqlen;
}

/* First token and length of sequence b. */
static void seq_span(const ref_rwkv6_problem *p, int64_t b, int64_t *first, int64_t *len) {
  if (p->cu_seqlens) {
    *first = p->cu_seqlens[b];
    *len = p->cu_seqlens[b + 1] - p->cu_seqlens[b];
  } else {
    *first = b * p->seqlen;
    *len = p->seqlen;
  }
}

/* Token of the n-th step processed (in processing order). */
static int64_t step_token(const ref_rwkv6_problem *p, int64_t first, int64_t len, int64_t n) {
  return first + (p->reverse ? len - 1 - n : n);
}

/* One step from state S (in place); o_row (may be NULL) receives o_t. */
static void step(int64_t K, int64_t V, double scale, const double *r, const double *k,
                 const double *v, const double *w, const double *u, double *S,
                 double *o_row) {
  if (o_row) {
    for (int64_t j = 0; j < V; ++j) o_row[j] = 0.0;
    for (int64_t i = 0; i < K; ++i) {
      const double ri = scale * r[i], uk = u[i] * k[i];
      const double *Si = S + i * V;
      for (int64_t j = 0; j < V; ++j) o_row[j] += ri * (Si[j] + uk * v[j]);
    }
  }
  for (int64_t i = 0; i < K; ++i) {
    const double decay = exp(w[i]);
    double *Si = S + i * V;
    for (int64_t j = 0; j < V; ++j) Si[j] = Si[j] * decay + k[i] * v[j];
  }
}

void ref_rwkv6_forward(const ref_rwkv6_problem *p, const double *r, const double *k,
                       const double *v, const double *w, const double *u,
                       const double *h0, double *o, double *ht) {
  const int64_t H = p->heads, K = p->head_dim_k, V = p->head_dim_v;
  const double scale = ref_rwkv6_scale(p);
  double *S = malloc(sizeof(double) * (size_t)(K * V));
  if (!S) abort();
  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t first, len;
    seq_span(p, b, &first, &len);
    for (int64_t h = 0; h < H; ++h) {
      const size_t st = (size_t)((b * H + h) * K * V);
      if (h0) memcpy(S, h0 + st, sizeof(double) * (size_t)(K * V));
      else memset(S, 0, sizeof(double) * (size_t)(K * V));
      for (int64_t n = 0; n < len; ++n) {
        const int64_t tok = step_token(p, first, len, n);
        const size_t ik = (size_t)((tok * H + h) * K), iv = (size_t)((tok * H + h) * V);
        step(K, V, scale, r + ik, k + ik, v + iv, w + ik, u + h * K, S, o + iv);
      }
      if (ht) memcpy(ht + st, S, sizeof(double) * (size_t)(K * V));
    }
  }
  free(S);
}

int ref_rwkv6_backward(const ref_rwkv6_problem *p, const double *r, const double *k,
                       const double *v, const double *w, const double *u,
                       const double *h0, const double *dout, const double *dht,
                       double *dr, double *dk, double *dv, double *dw, double *du,
                       double *dh0) {
  const int64_t H = p->heads, K = p->head_dim_k, V = p->head_dim_v;
  const size_t KV = (size_t)(K * V);
  const double scale = ref_rwkv6_scale(p);
  int64_t max_len = 0;
  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t first, len;
    seq_span(p, b, &first, &len);
    if (len > max_len) max_len = len;
  }
  /* Checkpoints every `seg` steps; states of one segment recomputed. */
  int64_t seg = 1;
  while (seg * seg < max_len) ++seg;
  const int64_t n_seg = max_len > 0 ? (max_len + seg - 1) / seg : 0;
  double *ckpt = malloc(sizeof(double) * KV * (size_t)(n_seg + 1));
  double *states = malloc(sizeof(double) * KV * (size_t)seg); /* S before each step */
  double *dS = malloc(sizeof(double) * KV);
  double *S = malloc(sizeof(double) * KV);
  if (!ckpt || !states || !dS || !S) {
    free(ckpt); free(states); free(dS); free(S);
    return -1;
  }
  memset(du, 0, sizeof(double) * (size_t)(H * K));
  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t first, len;
    seq_span(p, b, &first, &len);
    for (int64_t h = 0; h < H; ++h) {
      const size_t st = (size_t)(b * H + h) * KV;
      const double *uh = u + h * K;
      /* Forward: the state at the start of every segment. */
      if (h0) memcpy(S, h0 + st, sizeof(double) * KV);
      else memset(S, 0, sizeof(double) * KV);
      for (int64_t n = 0; n < len; ++n) {
        if (n % seg == 0) memcpy(ckpt + (size_t)(n / seg) * KV, S, sizeof(double) * KV);
        const int64_t tok = step_token(p, first, len, n);
        const size_t ik = (size_t)((tok * H + h) * K), iv = (size_t)((tok * H + h) * V);
        step(K, V, scale, r + ik, k + ik, v + iv, w + ik, uh, S, NULL);
      }
      /* Backward, segment by segment from the last. */
      if (dht) memcpy(dS, dht + st, sizeof(double) * KV);
      else memset(dS, 0, sizeof(double) * KV);
      for (int64_t sg = len > 0 ? (len - 1) / seg : -1; sg >= 0; --sg) {
        const int64_t n0 = sg * seg, n1 = n0 + seg < len ? n0 + seg : len;
        memcpy(S, ckpt + (size_t)sg * KV, sizeof(double) * KV);
        for (int64_t n = n0; n < n1; ++n) {
          memcpy(states + (size_t)(n - n0) * KV, S, sizeof(double) * KV);
          const int64_t tok = step_token(p, first, len, n);
          const size_t ik = (size_t)((tok * H + h) * K), iv = (size_t)((tok * H + h) * V);
          step(K, V, scale, r + ik, k + ik, v + iv, w + ik, uh, S, NULL);
        }
        for (int64_t n = n1 - 1; n >= n0; --n) {
          const double *Sp = states + (size_t)(n - n0) * KV; /* state before step n */
          const int64_t tok = step_token(p, first, len, n);
          const size_t ik = (size_t)((tok * H + h) * K), iv = (size_t)((tok * H + h) * V);
          const double *rt = r + ik, *kt = k + ik, *wt = w + ik, *vt = v + iv,
                       *dot = dout + iv;
          double dov = 0.0, ruk = 0.0;
          for (int64_t j = 0; j < V; ++j) dov += dot[j] * vt[j];
          for (int64_t i = 0; i < K; ++i) ruk += rt[i] * uh[i] * kt[i];
          for (int64_t j = 0; j < V; ++j) dv[iv + (size_t)j] = scale * ruk * dot[j];
          for (int64_t i = 0; i < K; ++i) {
            const double *Spi = Sp + i * V, *dSi = dS + i * V;
            double a = 0.0, bsum = 0.0, c = 0.0;
            for (int64_t j = 0; j < V; ++j) {
              a += dot[j] * Spi[j];   /* for dr */
              bsum += dSi[j] * vt[j]; /* for dk */
              c += dSi[j] * Spi[j];   /* for dw */
            }
            dr[ik + (size_t)i] = scale * (a + uh[i] * kt[i] * dov);
            du[h * K + i] += scale * rt[i] * kt[i] * dov;
            dk[ik + (size_t)i] = scale * rt[i] * uh[i] * dov + bsum;
            dw[ik + (size_t)i] = exp(wt[i]) * c;
            for (int64_t j = 0; j < V; ++j) dv[iv + (size_t)j] += dSi[j] * kt[i];
          }
          for (int64_t i = 0; i < K; ++i) {
            const double decay = exp(wt[i]), sr = scale * rt[i];
            double *dSi = dS + i * V;
            for (int64_t j = 0; j < V; ++j) dSi[j] = dSi[j] * decay + sr * dot[j];
          }
        }
      }
      if (dh0) memcpy(dh0 + st, dS, sizeof(double) * KV);
    }
  }
  free(ckpt); free(states); free(dS); free(S);
  return 0;
}
