/* The ring backward pass. At step s this rank's query pieces and the key
 * pieces of rank (rank - s) that they see run fcl_attention_backward with
 * the global o and lse (so each pair's P is the whole sequence's); dq sums
 * in f32 here, and the pair's dk, dv in an f32 contribution for that
 * slice. The slice's running dK/dV sums (f32, summed by the ranks before
 * this one in ring order) arrive from the rank before (ring_dkv.c); this
 * rank adds its contribution and passes them on, so after R steps they
 * come home to their rank: every element is summed in the same order on
 * every run, over either transport. */
#include "ring/ring.h"

#include <string.h>

enum { B_DQ_PART = 3, B_DKV_PART = 4, B_DQ_ACC = 5, B_LSE = 6 /* + piece */, B_LOCAL = 10,
       B_INC = 11 };

typedef struct {
  const ring_call    *c;
  const ring_slice   *qs;
  const ring_kernels *kern;
  ring_kv             kv;
  cl_mem              lse[2];
  int64_t             most_q, most_k; /* longest query piece, key slice */
  bool                touched[2];     /* dq of the piece written */
  ring_dkv            dkv;            /* the running dK/dV sums */
} bwd_state;

static int64_t slice_len(const fcl_ring *r, const fcl_ring_desc *d, int origin, ring_slice *s) {
  ring_slice_of(d->layout, d->attn.seqlen_k, r->size, origin, s);
  return s->length;
}

static size_t dkv_bytes(const fcl_attention_desc *a, int64_t len) {
  return (size_t)(a->batch * len * a->heads_kv * (a->head_dim + a->head_dim_v)) * 4;
}

static fcl_status prepare(fcl_ring *r, bwd_state *b) {
  const ring_call *c = b->c;
  const fcl_attention_desc *a = &c->d->attn;
  const fcl_dtype dt = c->q->dtype;
  const size_t es = fcl_dtype_size(dt);
  fcl_status s;
  if ((s = ring_kernels_get(r, dt, &b->kern)) ||
      (s = ring_kv_prepare(r, &b->kv, c->d, dt, b->kern)))
    return s;
  b->most_q = b->most_k = 1;
  for (int o = 0; o < r->size; ++o) {
    ring_slice ks;
    if (slice_len(r, c->d, o, &ks) > b->most_k) b->most_k = ks.length;
  }
  cl_mem m;
  for (int p = 0; p < b->qs->n; ++p) {
    const int64_t len = b->qs->p[p].len;
    if (len > b->most_q) b->most_q = len;
    b->lse[p] = c->lse;
    if (b->qs->n > 1) {
      if ((s = ring_dev_get(r, B_LSE + p, (size_t)(a->batch * a->heads_q * len) * 4, &m)))
        return s;
      b->lse[p] = m;
    }
  }
  const int64_t B = a->batch, kvd = a->heads_kv * (a->head_dim + a->head_dim_v);
  const size_t dkv = dkv_bytes(a, b->most_k);
  if ((s = ring_dev_get(r, B_DQ_PART, (size_t)(B * b->most_q * a->heads_q * a->head_dim) * es, &m)) ||
      (s = ring_dev_get(r, B_DKV_PART, (size_t)(B * b->most_k * kvd) * es, &m)) ||
      (s = ring_dev_get(r, B_DQ_ACC, (size_t)(B * b->qs->length * a->heads_q * a->head_dim) * 4, &m)) ||
      (s = ring_dev_get(r, B_LOCAL, dkv, &m)) || (s = ring_dev_get(r, B_INC, dkv, &m)))
    return s;
  return ring_dkv_prepare(r, dkv);
}

static fcl_status flashcl_fail(fcl_ring *r, fcl_status s) {
  return ring_fail(r, s, "%s", fcl_context_last_error(r->ctx));
}

/* Query piece p against key piece j of the step's slice os (views k, v of
 * the whole slice). */
static fcl_status pair_grads(fcl_ring *r, bwd_state *b, int p, const ring_slice *os, int j,
                             const fcl_attention_desc *pd, const fcl_tensor *k,
                             const fcl_tensor *v) {
  const ring_call *c = b->c;
  const fcl_attention_desc *a = &c->d->attn;
  const ring_piece *qp = &b->qs->p[p], *kp = &os->p[j];
  const int64_t B = a->batch, Hq = a->heads_q, Hk = a->heads_kv, D = a->head_dim,
                Dv = a->head_dim_v;
  const fcl_dtype dt = c->q->dtype;
  const fcl_tensor q = ring_rows(c->q, qp->local), o = ring_rows(c->o, qp->local);
  const fcl_tensor dout = ring_rows(c->dout, qp->local);
  const fcl_tensor kk = ring_rows(k, kp->local), vv = ring_rows(v, kp->local);
  cl_mem part = r->dev[B_DKV_PART].buf;
  const fcl_tensor dq = ring_dense(r->dev[B_DQ_PART].buf, dt, 0, qp->len, Hq, D);
  const fcl_tensor dk = ring_dense(part, dt, 0, kp->len, Hk, D);
  const fcl_tensor dv = ring_dense(part, dt, (size_t)(B * kp->len * Hk * D), kp->len, Hk, Dv);
  fcl_status s = fcl_attention_backward(r->ctx, pd, &q, &kk, &vv, &o, b->lse[p], &dout, &dq,
                                        &dk, &dv);
  if (s) return flashcl_fail(r, s);
  const int64_t L = os->length;
  const ring_dense_at dq_acc = {r->dev[B_DQ_ACC].buf, qp->local * Hq * D, b->qs->length * Hq * D};
  const ring_dense_at dk_acc = {r->dev[B_LOCAL].buf, kp->local * Hk * D, L * Hk * D};
  const ring_dense_at dv_acc = {r->dev[B_LOCAL].buf, B * L * Hk * D + kp->local * Hk * Dv,
                                L * Hk * Dv};
  const bool first = !b->touched[p];
  b->touched[p] = true;
  if ((s = ring_add(r, b->kern, dq_acc, &dq, B, qp->len, Hq, D, first)) ||
      (s = ring_add(r, b->kern, dk_acc, &dk, B, kp->len, Hk, D, false)))
    return s;
  return ring_add(r, b->kern, dv_acc, &dv, B, kp->len, Hk, Dv, false);
}

/* This rank's contribution for the step's slice, in B_LOCAL. */
static fcl_status step_grads(fcl_ring *r, bwd_state *b, const ring_slice *os,
                             const fcl_tensor *k, const fcl_tensor *v) {
  const fcl_attention_desc *a = &b->c->d->attn;
  const float zero = 0.0f;
  const cl_int err = clEnqueueFillBuffer(r->queue, r->dev[B_LOCAL].buf, &zero, 4, 0,
                                         dkv_bytes(a, os->length), 0, NULL, NULL);
  if (err) return ring_fail_cl(r, err, "clearing the dK/dV sums");
  fcl_status s = FCL_OK;
  for (int p = 0; p < b->qs->n && !s; ++p)
    for (int j = 0; j < os->n && !s; ++j) {
      fcl_attention_desc pd;
      if (ring_pair(a, &b->qs->p[p], &os->p[j], &pd)) s = pair_grads(r, b, p, os, j, &pd, k, v);
    }
  return s;
}

/* dK/dV come home (after R steps) and are stored with dq. */
static fcl_status finish(fcl_ring *r, bwd_state *b, const ring_slice *ks) {
  const ring_call *c = b->c;
  const fcl_attention_desc *a = &c->d->attn;
  const int64_t B = a->batch, Hq = a->heads_q, Hk = a->heads_kv, D = a->head_dim,
                Dv = a->head_dim_v, L = ks->length;
  fcl_status s = FCL_OK;
  cl_mem acc = r->dev[B_LOCAL].buf;
  if (r->size > 1) {
    acc = r->dev[B_INC].buf;
    s = ring_dkv_home(r, &b->dkv, dkv_bytes(a, L), acc);
  }
  const float zero = 0.0f;
  for (int p = 0; p < b->qs->n && !s; ++p)
    if (!b->touched[p]) { /* queries that see no key: dq = 0 */
      const ring_piece *qp = &b->qs->p[p];
      for (int64_t bb = 0; bb < B && !s; ++bb) {
        const size_t at = (size_t)((bb * b->qs->length + qp->local) * Hq * D) * 4;
        const cl_int err = clEnqueueFillBuffer(r->queue, r->dev[B_DQ_ACC].buf, &zero, 4, at,
                                               (size_t)(qp->len * Hq * D) * 4, 0, NULL, NULL);
        if (err) s = ring_fail_cl(r, err, "clearing dq");
      }
    }
  const ring_dense_at dq = {r->dev[B_DQ_ACC].buf, 0, b->qs->length * Hq * D};
  const ring_dense_at dk = {acc, 0, L * Hk * D}, dv = {acc, B * L * Hk * D, L * Hk * Dv};
  if (!s) s = ring_store(r, b->kern, c->dq, dq, B, b->qs->length, Hq, D);
  if (!s) s = ring_store(r, b->kern, c->dk, dk, B, L, Hk, D);
  if (!s) s = ring_store(r, b->kern, c->dv, dv, B, L, Hk, Dv);
  return s;
}

fcl_status ring_backward_run(fcl_ring *r, const ring_call *c, const ring_slice *qs,
                             const ring_slice *ks) {
  const fcl_attention_desc *a = &c->d->attn;
  bwd_state b = {.c = c, .qs = qs};
  ring_dkv_init(&b.dkv);
  fcl_status st = ring_host_commit(r, ring_agree(r, prepare(r, &b)));
  if (st) return st;
  const double t0 = ring_now_ms();
  r->stats = (fcl_ring_stats){.ranks = r->size, .steps = r->size};
  ring_marks marks = {.n = 0};
  for (int p = 0; p < qs->n && qs->n > 1 && !st; ++p) /* each piece's lse, dense */
    st = ring_lse_copy(r, c->lse, qs->length, qs->p[p].local, b.lse[p], qs->p[p].len, 0,
                       qs->p[p].len, a->batch * a->heads_q);
  fcl_status w = ring_kv_begin(r, &b.kv, c->k, c->v, ks->length);
  if (!st) st = w;
  for (int step = 0; step < r->size; ++step) {
    fcl_tensor k, v;
    ring_slice os;
    slice_len(r, c->d, ring_origin(r, step), &os);
    if ((w = ring_kv_step(r, &b.kv, step, c->k, c->v, &k, &v)) && !st) st = w;
    if ((w = ring_dkv_receive(r, &b.dkv, step, dkv_bytes(a, os.length))) && !st) st = w;
    ring_mark(r, &marks);
    if (!st) st = step_grads(r, &b, &os, &k, &v);
    ring_mark(r, &marks);
    clFlush(r->queue);
    /* Node-local, both uploads share the second queue: the sums', which
     * runs beside this step's compute, first; the keys' of step + 2 then
     * wait for nothing (ring_kv_wait) and run beside the next step's. */
    if (!r->shm && (w = ring_kv_wait(r, &b.kv)) && !st) st = w;
    if (r->size > 1 &&
        (w = ring_dkv_pass_on(r, &b.dkv, b.kern, step, dkv_bytes(a, os.length),
                              r->dev[B_LOCAL].buf, r->dev[B_INC].buf)) &&
        !st)
      st = w;
    if (r->shm && (w = ring_kv_wait(r, &b.kv)) && !st) st = w;
  }
  if ((w = finish(r, &b, ks)) && !st) st = w;
  const cl_int err = clFinish(r->queue);
  if (!st && err) st = ring_fail_cl(r, err, "clFinish");
  ring_kv_end(r, &b.kv);
  r->stats.compute_ms = ring_marks_ms(r, &marks);
  ring_marks_release(&marks);
  r->stats.wall_ms = ring_now_ms() - t0;
  return ring_agree(r, st);
}
