/* RWKV7 through the harness; see op_rwkv7.h. */
#include "op_rwkv7.h"
#include "op_pool.h"

typedef struct {
  const fcl_rwkv7_desc *desc;
  tu_tensor *x[7];  /* r w k v a b dout */
  tu_tensor *g[6];  /* dr dw dk dv da db */
  cl_mem h0, dht, dh0;
  size_t ns, out_tail;
  oh_rwkv7_out *out;
} r7_args;

static fcl_status r7_bwd(oh_pool *pl, const void *args) {
  const r7_args *a = args;
  return fcl_rwkv7_backward(pl->ctx, a->desc, &a->x[0]->t, &a->x[1]->t, &a->x[2]->t,
                            &a->x[3]->t, &a->x[4]->t, &a->x[5]->t, a->h0, &a->x[6]->t, a->dht,
                            &a->g[0]->t, &a->g[1]->t, &a->g[2]->t, &a->g[3]->t, &a->g[4]->t,
                            &a->g[5]->t, a->dh0);
}

static int r7_read(oh_pool *pl, const void *args, char *why, size_t nwhy) {
  const r7_args *a = args;
  static const char *const names[6] = {"dr", "dw", "dk", "dv", "da", "db"};
  double *dst[6] = {a->out->dr, a->out->dw, a->out->dk, a->out->dv, a->out->da, a->out->db};
  a->out->bwd_read = 1;
  int fail = 0;
  for (int i = 0; i < 6; ++i) fail |= oh_pool_read_tensor(pl, a->g[i], dst[i], names[i], why, nwhy);
  if (a->dh0)
    fail |= oh_pool_read_buffer(pl, a->dh0, a->out->dh0, a->ns, FCL_F32, a->out_tail, "dh0",
                                why, nwhy);
  return fail;
}

int oh_rwkv7_run(fcl_context *ctx, const ref_rwkv7_problem *p, fcl_dtype dt,
                 const oh_rwkv7_opts *opts, const oh_rwkv7_in *in, oh_rwkv7_out *out,
                 char *why, size_t nwhy) {
  oh_pool pl;
  memset(&pl, 0, sizeof pl);
  pl.ctx = ctx;
  const int varlen = p->cu_seqlens != NULL;
  const int64_t nb = varlen ? 1 : p->batch, nt = varlen ? p->cu_seqlens[p->batch] : p->seqlen;
  const int64_t H = p->heads, K = p->head_dim_k, V = p->head_dim_v;
  const size_t ns = (size_t)(p->batch * H * K * V), st = opts->out_tail;
  r7_args a;
  memset(&a, 0, sizeof a);
  a.ns = ns, a.out_tail = st, a.out = out;
  const double *src[7] = {in->r, in->w, in->k, in->v, in->a, in->b, in->dout};
  int n_in = in->dout ? 7 : 6, bad = 0, slot = 0;
#define VIEW(lay) (&(oh_view){(lay), opts->off ? opts->off + (size_t)slot++ : 0, opts->tail})
  for (int i = 0; i < n_in; ++i) {
    a.x[i] = oh_pool_tensor(&pl, src[i], nb, nt, H, i == 3 || i == 6 ? V : K, dt, VIEW(opts->lin));
    bad |= !a.x[i];
  }
  tu_tensor *to = oh_pool_tensor(&pl, NULL, nb, nt, H, V, dt, VIEW(opts->lout));
  a.h0 = in->h0 ? oh_pool_buffer(&pl, in->h0, ns, FCL_F32, 0) : NULL;
  cl_mem bht = out->ht ? oh_pool_buffer(&pl, NULL, ns, FCL_F32, st) : NULL;
  if (in->dout) {
    for (int i = 0; i < 6; ++i) {
      a.g[i] = oh_pool_tensor(&pl, NULL, nb, nt, H, i == 3 ? V : K, dt, VIEW(opts->lout));
      bad |= !a.g[i];
    }
    a.dht = in->dht ? oh_pool_buffer(&pl, in->dht, ns, FCL_F32, 0) : NULL;
    a.dh0 = out->dh0 ? oh_pool_buffer(&pl, NULL, ns, FCL_F32, st) : NULL;
    bad |= (in->dht && !a.dht) || (out->dh0 && !a.dh0);
  }
#undef VIEW
  cl_mem cu = varlen ? oh_pool_ints(&pl, p->cu_seqlens, p->batch + 1) : NULL;
  if (bad || !to || (in->h0 && !a.h0) || (out->ht && !bht) || (varlen && !cu)) {
    oh_append(why, nwhy, " could not create buffers;");
    oh_pool_release(&pl);
    return 1;
  }
  if (opts->junk_stride0)
    for (int i = 0; i < pl.nt; ++i) pl.t[i].t.strides[0] = ((int64_t)1 << 40) + 12345;
  if (opts->check_inputs) {
    static const char *const names[7] = {"r", "w", "k", "v", "a", "b", "dout"};
    for (int i = 0; i < n_in; ++i) oh_pool_watch(&pl, a.x[i]->buffer, names[i]);
    oh_pool_watch(&pl, a.h0, "h0");
    oh_pool_watch(&pl, a.dht, "dht");
    oh_pool_watch(&pl, cu, "cu_seqlens");
  }
  fcl_rwkv7_desc desc = FCL_RWKV7_DESC_INIT;
  desc.batch = p->batch, desc.seqlen = p->seqlen, desc.heads = H;
  desc.head_dim_k = K, desc.head_dim_v = V;
  desc.scale = (float)p->scale;
  desc.reverse = p->reverse;
  desc.cu_seqlens = cu;
  a.desc = &desc;
  const double t0 = tu_now();
  int fail = oh_pool_finish(&pl, fcl_rwkv7_forward(ctx, &desc, &a.x[0]->t, &a.x[1]->t,
                                                   &a.x[2]->t, &a.x[3]->t, &a.x[4]->t,
                                                   &a.x[5]->t, a.h0, &to->t, bht),
                            "rwkv7 forward", why, nwhy);
  out->fwd_s = tu_now() - t0;
  if (!fail) {
    out->fwd_read = 1;
    fail |= oh_pool_read_tensor(&pl, to, out->o, "o", why, nwhy);
    if (bht) fail |= oh_pool_read_buffer(&pl, bht, out->ht, ns, FCL_F32, st, "ht", why, nwhy);
  }
  if (!fail && in->dout) {
    oh_grads g;
    memset(&g, 0, sizeof g);
    static const char *const names[6] = {"dr", "dw", "dk", "dv", "da", "db"};
    for (int i = 0; i < 6; ++i) oh_grads_add(&g, a.g[i]->buffer, a.g[i]->bytes, names[i]);
    oh_grads_add(&g, a.dh0, ns * 4 + st, "dh0");
    fail = oh_run_backward(&pl, r7_bwd, r7_read, &a, &g, opts->bwd_runs, &out->bwd_s,
                           "rwkv7 backward", why, nwhy);
  }
  if (opts->check_inputs) fail |= oh_watch_changed(pl.ctx, pl.w, pl.nw, why, nwhy);
  oh_pool_release(&pl);
  return fail;
}
