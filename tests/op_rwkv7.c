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
  desc.decay_lower_bound = opts->decay_lower_bound;
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

/* ---- one case of a table ---------------------------------------------------- */
static int check(const char *name, const double *got, const double *ref, size_t n, tu_tol tol,
                 int verbose, char *why, size_t nwhy, char *errs, size_t nerrs) {
  tu_cmp c;
  const int ok = oh_check_dims(name, got, ref, n, tol, 0, NULL, 0, &c, why, nwhy);
  if (verbose) tu_print_cmp(name, &c, NULL, 0);
  oh_append(errs, nerrs, " %s %.1e", name, c.ref_max > 0 ? c.max_err / c.ref_max : c.max_err);
  return ok;
}

int oh_rwkv7_case_run(fcl_context *ctx, const oh_rwkv7_case *c, fcl_dtype dt, int verbose) {
  const double t0 = tu_now();
  int32_t cu[OH_MAX_SEQS + 1] = {0};
  ref_rwkv7_problem p = {c->b, c->t, c->h, c->dk ? c->dk : 64, c->dv ? c->dv : 64,
                         (double)c->scale, c->reverse, NULL};
  if (c->nseq) {
    p.batch = c->nseq, p.seqlen = 0;
    for (int i = 0; i < c->nseq; ++i) {
      cu[i + 1] = cu[i] + c->lens[i];
      if (c->lens[i] > p.seqlen) p.seqlen = c->lens[i];
    }
    p.seqlen += c->seqlen_extra;
    p.cu_seqlens = cu;
  }
  const int64_t tokens = ref_rwkv7_tokens(&p), H = p.heads, K = p.head_dim_k, V = p.head_dim_v;
  const size_t nk = (size_t)(tokens * H * K), nv = (size_t)(tokens * H * V),
               ns = (size_t)(p.batch * H * K * V);
  double *x[7], *dout = oh_dalloc(nv), *dht = oh_dalloc(ns);
  for (int i = 0; i < 7; ++i) x[i] = oh_dalloc(i == 3 ? nv : i == 6 ? ns : nk);
  tu_rng g;
  tu_rng_seed(&g, oh_case_seed(c->name, dt));
  ref_rwkv7_fill(&g, &p, c->decay, x[0], x[1], x[2], x[3], x[4], x[5]);
  if (c->general) {
    tu_fill_uniform(&g, x[4], nk, -0.6, 0.6);
    tu_fill_uniform(&g, x[5], nk, -0.6, 0.6);
  }
  tu_fill_uniform(&g, x[6], ns, -1, 1);
  tu_fill_uniform(&g, dout, nv, -1, 1);
  tu_fill_uniform(&g, dht, ns, -1, 1);
  for (int i = 0; i < 6; ++i) tu_round_array(x[i], i == 3 ? nv : nk, dt);
  tu_round_array(dout, nv, dt);
  tu_round_array(x[6], ns, FCL_F32);
  tu_round_array(dht, ns, FCL_F32);
  const ref_rwkv7_in rin = {x[0], x[1], x[2], x[3], x[4], x[5], c->no_h0 ? NULL : x[6]};
  /* o, ht, dr, dw, dk, dv, da, db, dh0: reference and device. */
  static const char *const names[9] = {"o", "ht", "dr", "dw", "dk", "dv", "da", "db", "dh0"};
  const size_t cnt[9] = {nv, ns, nk, nk, nk, nv, nk, nk, ns};
  double *ref[9], *got[9];
  for (int i = 0; i < 9; ++i) ref[i] = oh_dalloc(cnt[i]), got[i] = oh_dalloc(cnt[i]);
  ref_rwkv7_forward(&p, &rin, ref[0], ref[1]);
  const ref_rwkv7_grads rg = {ref[2], ref[3], ref[4], ref[5], ref[6], ref[7], ref[8]};
  if (!c->fwd_only && ref_rwkv7_backward(&p, &rin, dout, c->no_dht ? NULL : dht, &rg)) abort();

  oh_rwkv7_opts opts = {c->lin, c->lout, c->off, 0, 24, c->junk_stride0, 2, 1,
                        c->decay_lower_bound};
  /* With no token the library still wants room for one token row. */
  opts.tail = tokens ? 5 : (size_t)(H * (K > V ? K : V)) + 5;
  if (c->exact && tokens) opts.tail = 0, opts.out_tail = 0, opts.bwd_runs = 1;
  const oh_rwkv7_in in = {x[0], x[1], x[2], x[3], x[4], x[5], rin.h0, c->fwd_only ? NULL : dout,
                          c->no_dht ? NULL : dht};
  oh_rwkv7_out out = {got[0], c->no_ht ? NULL : got[1], got[2], got[3], got[4], got[5],
                      got[6], got[7], c->no_dh0 ? NULL : got[8], 0, 0, 0, 0};
  char why[2048] = "", errs[512] = "";
  int ok = oh_rwkv7_run(ctx, &p, dt, &opts, &in, &out, why, sizeof why) == 0;
  const int want[9] = {1, !c->no_ht, 1, 1, 1, 1, 1, 1, !c->no_dh0};
  const tu_tol tol = tu_tol_rwkv6(dt), tol_state = tu_tol_rwkv6_state();
  for (int i = 0; i < 9; ++i)
    if (want[i] && (i < 2 ? out.fwd_read : out.bwd_read))
      ok &= check(names[i], got[i], ref[i], cnt[i], i == 1 || i == 8 ? tol_state : tol, verbose,
                  why, sizeof why, errs, sizeof errs);
  ok &= out.fwd_read && (out.bwd_read || c->fwd_only);
  printf("%s %-4s %s |%s%s | fwd %.2f s bwd %.2f s, %.2f s\n", ok ? "PASS" : "FAIL",
         tu_dtype_name(dt), c->name, why, errs, out.fwd_s, out.bwd_s, tu_now() - t0);
  fflush(stdout);
  for (int i = 0; i < 9; ++i) free(ref[i]), free(got[i]);
  for (int i = 0; i < 7; ++i) free(x[i]);
  free(dout), free(dht);
  return ok;
}

