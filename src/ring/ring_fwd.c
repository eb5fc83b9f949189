/* The ring forward pass. At step s this rank's query pieces attend to the
 * key pieces of rank (rank - s) that they see (fcl_attention_forward with
 * the pair's diag_shift), and each partial result is merged into the
 * piece's running result by its lse (fcl_attention_merge, f32): the first
 * part is copied, the last merge writes o itself. A piece that sees one
 * part only gets it written straight to o. */
#include "ring/ring.h"

#include <math.h>
#include <string.h>

enum { F_PART = 3, F_PART_LSE = 4, F_LSE = 6 /* + piece */, F_ACC = 8 /* + piece */ };

/* Parts each query piece sees over the whole ring. */
static void count_parts(const fcl_ring *r, const fcl_ring_desc *d, const ring_slice *qs,
                        int total[2]) {
  total[0] = total[1] = 0;
  for (int s = 0; s < r->size; ++s) {
    ring_slice ks;
    ring_slice_of(d->layout, d->attn.seqlen_k, r->size, ring_origin(r, s), &ks);
    for (int p = 0; p < qs->n; ++p)
      for (int j = 0; j < ks.n; ++j) {
        fcl_attention_desc pd;
        total[p] += ring_pair(&d->attn, &qs->p[p], &ks.p[j], &pd);
      }
  }
}

typedef struct {
  const ring_call    *c;
  const ring_slice   *qs;
  const ring_kernels *kern;
  int                 total[2], done[2];
  cl_mem              lse[2]; /* each piece's running and final lse */
  fcl_tensor          part;
  cl_mem              part_lse;
} fwd_state;

static fcl_status flashcl_fail(fcl_ring *r, fcl_status s) {
  return ring_fail(r, s, "%s", fcl_context_last_error(r->ctx));
}

/* Query piece p against key piece kp (views k, v of its rows). */
static fcl_status attend(fcl_ring *r, fwd_state *f, int p, const fcl_attention_desc *pd,
                         const fcl_tensor *k, const fcl_tensor *v) {
  const fcl_attention_desc *a = &f->c->d->attn;
  const ring_piece *qp = &f->qs->p[p];
  const fcl_tensor q = ring_rows(f->c->q, qp->local), o = ring_rows(f->c->o, qp->local);
  const fcl_tensor acc = ring_dense(r->dev[F_ACC + p].buf, FCL_F32, 0, qp->len, a->heads_q,
                                    a->head_dim_v);
  const int idx = f->done[p]++;
  const bool last = idx == f->total[p] - 1;
  fcl_status s;
  if (f->total[p] == 1) { /* the only part: straight to o */
    s = fcl_attention_forward(r->ctx, pd, &q, k, v, &o, f->lse[p]);
    return s ? flashcl_fail(r, s) : FCL_OK;
  }
  if ((s = fcl_attention_forward(r->ctx, pd, &q, k, v, &f->part, f->part_lse)))
    return flashcl_fail(r, s);
  fcl_attention_desc md = *pd;
  if (idx == 0)
    s = fcl_attention_merge(r->ctx, &md, 1, &f->part, &f->part_lse, &acc, f->lse[p]);
  else {
    const fcl_tensor parts[2] = {acc, f->part};
    const cl_mem lses[2] = {f->lse[p], f->part_lse};
    s = fcl_attention_merge(r->ctx, &md, 2, parts, lses, last ? &o : &acc, f->lse[p]);
  }
  return s ? flashcl_fail(r, s) : FCL_OK;
}

/* Rows that see no key anywhere: o = 0, lse = -inf. */
static fcl_status unseen(fcl_ring *r, fwd_state *f, int p) {
  const fcl_attention_desc *a = &f->c->d->attn;
  const ring_piece *qp = &f->qs->p[p];
  const float zero = 0.0f, ninf = -INFINITY;
  const int64_t rows = a->batch * qp->len * a->heads_q;
  cl_int err = clEnqueueFillBuffer(r->queue, r->dev[F_ACC + p].buf, &zero, 4, 0,
                                   (size_t)(rows * a->head_dim_v) * 4, 0, NULL, NULL);
  if (!err)
    err = clEnqueueFillBuffer(r->queue, f->lse[p], &ninf, 4, 0, (size_t)rows * 4, 0, NULL, NULL);
  if (err) return ring_fail_cl(r, err, "clearing rows that see no key");
  const fcl_tensor o = ring_rows(f->c->o, qp->local);
  const ring_dense_at acc = {r->dev[F_ACC + p].buf, 0, qp->len * a->heads_q * a->head_dim_v};
  return ring_store(r, f->kern, &o, acc, a->batch, qp->len, a->heads_q, a->head_dim_v);
}

static fcl_status prepare(fcl_ring *r, fwd_state *f, ring_kv *kv) {
  const ring_call *c = f->c;
  const fcl_attention_desc *a = &c->d->attn;
  const fcl_dtype dt = c->q->dtype;
  fcl_status s;
  if ((s = ring_kernels_get(r, dt, &f->kern)) || (s = ring_kv_prepare(r, kv, c->d, dt, f->kern)))
    return s;
  count_parts(r, c->d, f->qs, f->total);
  int64_t most = 1;
  cl_mem m;
  for (int p = 0; p < f->qs->n; ++p) {
    const int64_t len = f->qs->p[p].len, rows = a->batch * len * a->heads_q;
    if (len > most) most = len;
    if (f->total[p] != 1 &&
        (s = ring_dev_get(r, F_ACC + p, (size_t)(rows * a->head_dim_v) * 4, &m)))
      return s;
    f->lse[p] = f->qs->n == 1 && c->lse ? c->lse : NULL;
    if (!f->lse[p]) {
      if ((s = ring_dev_get(r, F_LSE + p, (size_t)rows * 4, &m))) return s;
      f->lse[p] = m;
    }
  }
  if ((s = ring_dev_get(r, F_PART, (size_t)(a->batch * most * a->heads_q * a->head_dim_v) *
                                        fcl_dtype_size(dt), &m)))
    return s;
  f->part = ring_dense(m, dt, 0, most, a->heads_q, a->head_dim_v);
  return ring_dev_get(r, F_PART_LSE, (size_t)(a->batch * a->heads_q * most) * 4, &f->part_lse);
}

fcl_status ring_forward_run(fcl_ring *r, const ring_call *c, const ring_slice *qs,
                            const ring_slice *ks) {
  const fcl_attention_desc *a = &c->d->attn;
  fwd_state f = {.c = c, .qs = qs};
  ring_kv kv;
  fcl_status st = ring_host_commit(r, ring_agree(r, prepare(r, &f, &kv)));
  if (st) return st;
  const double t0 = ring_now_ms();
  r->stats = (fcl_ring_stats){.ranks = r->size, .steps = r->size};
  ring_marks marks = {.n = 0};
  st = ring_kv_begin(r, &kv, c->k, c->v, ks->length);
  for (int step = 0; step < r->size; ++step) {
    fcl_tensor k, v;
    const fcl_status ss = ring_kv_step(r, &kv, step, c->k, c->v, &k, &v);
    if (!st) st = ss;
    ring_slice os;
    ring_slice_of(c->d->layout, a->seqlen_k, r->size, ring_origin(r, step), &os);
    ring_mark(r, &marks);
    for (int p = 0; p < qs->n && !st; ++p)
      for (int j = 0; j < os.n && !st; ++j) {
        fcl_attention_desc pd;
        if (!ring_pair(a, &qs->p[p], &os.p[j], &pd)) continue;
        const fcl_tensor kp = ring_rows(&k, os.p[j].local), vp = ring_rows(&v, os.p[j].local);
        st = attend(r, &f, p, &pd, &kp, &vp);
      }
    ring_mark(r, &marks);
    clFlush(r->queue);
    const fcl_status w = ring_kv_wait(r, &kv);
    if (!st) st = w;
  }
  for (int p = 0; p < qs->n && !st; ++p)
    if (f.total[p] == 0) st = unseen(r, &f, p);
  for (int p = 0; p < qs->n && !st && qs->n > 1 && c->lse; ++p)
    st = ring_lse_copy(r, f.lse[p], qs->p[p].len, 0, c->lse, qs->length, qs->p[p].local,
                       qs->p[p].len, a->batch * a->heads_q);
  const cl_int err = clFinish(r->queue);
  if (!st && err) st = ring_fail_cl(r, err, "clFinish");
  ring_kv_end(r, &kv);
  r->stats.compute_ms = ring_marks_ms(r, &marks);
  ring_marks_release(&marks);
  r->stats.wall_ms = ring_now_ms() - t0;
  return ring_agree(r, st);
}
