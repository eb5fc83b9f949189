/* Which tokens each rank holds (zig-zag or contiguous), and the problem of
 * one piece of queries against one piece of keys: its lengths and the
 * diagonal shift that puts both where they sit in the whole sequence. */
#include "ring/ring.h"

#include <inttypes.h>

static int64_t chunk_start(int64_t seqlen, int64_t chunks, int64_t c) {
  return c * seqlen / chunks; /* seqlen <= 2^30, chunks <= 2^31: no overflow */
}

void ring_slice_of(fcl_ring_layout layout, int64_t seqlen, int ranks, int rank, ring_slice *s) {
  const int64_t chunks = layout == FCL_RING_ZIGZAG ? 2 * (int64_t)ranks : ranks;
  const int64_t c[2] = {rank, chunks - 1 - rank};
  s->n = 0;
  s->length = 0;
  for (int i = 0; i < (layout == FCL_RING_ZIGZAG ? 2 : 1); ++i) {
    const int64_t a = chunk_start(seqlen, chunks, c[i]);
    const int64_t len = chunk_start(seqlen, chunks, c[i] + 1) - a;
    if (s->n > 0 && s->p[s->n - 1].start + s->p[s->n - 1].len == a) {
      s->p[s->n - 1].len += len; /* chunks R-1 and R touch: one piece */
    } else {
      s->p[s->n] = (ring_piece){a, len, s->length};
      s->n++;
    }
    s->length += len;
  }
}

fcl_status fcl_ring_slice(fcl_ring_layout layout, int64_t seqlen, int ranks, int rank,
                          fcl_ring_slice_info *out) {
  if (!out) return FCL_ERROR_INVALID_ARGUMENT;
  if (layout != FCL_RING_ZIGZAG && layout != FCL_RING_CONTIGUOUS) return FCL_ERROR_INVALID_ARGUMENT;
  if (ranks < 1 || rank < 0 || rank >= ranks) return FCL_ERROR_INVALID_ARGUMENT;
  const int64_t chunks = layout == FCL_RING_ZIGZAG ? 2 * (int64_t)ranks : ranks;
  if (seqlen < chunks || seqlen > (1LL << 30)) return FCL_ERROR_INVALID_ARGUMENT;
  ring_slice s;
  ring_slice_of(layout, seqlen, ranks, rank, &s);
  *out = (fcl_ring_slice_info){.pieces = s.n, .length = s.length};
  for (int i = 0; i < s.n; ++i) out->start[i] = s.p[i].start, out->len[i] = s.p[i].len;
  return FCL_OK;
}

bool ring_pair(const fcl_attention_desc *d, const ring_piece *qp, const ring_piece *kp,
               fcl_attention_desc *out) {
  const int64_t INF = INT64_MAX / 4;
  /* Query g of the whole sequence sits at key position g + diag. */
  const int64_t diag = d->seqlen_k - d->seqlen_q + d->diag_shift;
  /* Local query 0 of qp sits at key c of kp. */
  const int64_t c = qp->start + diag - kp->start;
  const int64_t wl = d->window_left < 0 ? INF : d->window_left;
  int64_t wr = d->window_right < 0 ? INF : d->window_right;
  if (d->causal && wr > 0) wr = 0;
  /* The rows see keys [i + c - wl, i + c + wr]: together [c - wl, c + lq - 1 + wr]. */
  if (c - wl > kp->len - 1 || c + qp->len - 1 + wr < 0) return false;
  *out = *d;
  out->seqlen_q = qp->len;
  out->seqlen_k = kp->len;
  out->diag_shift = c - (kp->len - qp->len);
  return true;
}
