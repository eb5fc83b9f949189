/* fa-bench cost models of attention (see model.h). */
#include "model.h"

#include "test_util.h"

/* A packed batch (s->cu): f summed over its sequences, each a batch of one. */
#define ATTN_PER_SEQ(s, f, ...)                                              \
  if ((s)->cu) {                                                             \
    double sum_ = 0;                                                         \
    for (int64_t b_ = 0; b_ < (s)->b; b_++) {                                \
      attn_shape one_ = *(s);                                                \
      one_.cu = NULL, one_.b = 1;                                            \
      one_.sq = one_.sk = (s)->cu[b_ + 1] - (s)->cu[b_];                     \
      sum_ += f(&one_, __VA_ARGS__);                                         \
    }                                                                        \
    return sum_;                                                             \
  }

double attn_flops(const attn_shape *s, int bwd) {
  ATTN_PER_SEQ(s, attn_flops, bwd)
  double f = 2.0 * (double)s->b * (double)s->h * (double)s->sq * (double)s->sk *
             (double)(s->d + s->dv);
  if (s->causal) f /= 2;
  return bwd ? 2.5 * f : f;
}

double attn_pairs(const attn_shape *s) {
  if (!s->causal) return (double)s->sq * (double)s->sk;
  double n = 0; /* query i sees keys 0 .. i + Nk - Nq */
  for (int64_t i = 0; i < s->sq; i++) {
    int64_t seen = i + s->sk - s->sq + 1;
    n += (double)(seen < 0 ? 0 : seen > s->sk ? s->sk : seen);
  }
  return n;
}

double attn_instrs(const attn_shape *s, int bwd) {
  ATTN_PER_SEQ(s, attn_instrs, bwd)
  const double per = bwd ? (double)(4 * s->d + 3 * s->dv + 10) : (double)(s->d + s->dv + 5);
  return per * attn_pairs(s) * (double)s->b * (double)s->h;
}

double attn_bytes(const attn_shape *s, int bwd, int unfused) {
  ATTN_PER_SEQ(s, attn_bytes, bwd, unfused)
  const double es = (double)tu_dtype_size(s->t), b = (double)s->b;
  const double q = b * (double)(s->sq * s->h * s->d), o = b * (double)(s->sq * s->h * s->dv);
  const double kv = b * (double)(s->sk * s->hkv * (s->d + s->dv));
  const double lse = 4.0 * b * (double)(s->h * s->sq);
  double bytes = bwd ? es * (2 * q + 2 * o + 2 * kv) + lse : es * (q + kv + o) + lse;
  if (unfused) bytes += 16.0 * b * (double)s->h * (double)s->sq * (double)s->sk;
  return bytes;
}
