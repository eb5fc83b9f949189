/* The attention kernels' shared arguments: the one place their order is
 * written on the host (the kernels' side: ATTN_FWD_PARAMS in
 * cl/attention/attention_common.cl and the backward kernels' heads). */
#include "attention/attention.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* A window no row can use up is unlimited: clamped to limit, which keeps
 * the kernels' bounds (i + diag +- window) inside int. */
static cl_int clamp_window(int64_t w, int64_t limit) {
  if (limit < 0) limit = 0;
  return (cl_int)(w < 0 || w > limit ? limit : w);
}

void fcl_attention_scalars_init(const fcl_attention_desc *d, bool varlen, int64_t total_q,
                                fcl_attention_scalars *sc) {
  const double log2e = 1.4426950408889634;
  const double scale =
      d->softmax_scale != 0.0f ? d->softmax_scale : 1.0 / sqrt((double)d->head_dim);
  /* Row i of a sequence of sq <= seqlen_q queries and sk <= seqlen_k keys
   * sits at key position i + sk - sq + shift: a left window of
   * seqlen_k - 1 + shift reaches key 0 from every row, a right window of
   * seqlen_q - 1 - shift the last key. */
  const int64_t shift = d->diag_shift;
  sc->seqlen_q = (cl_int)d->seqlen_q;
  sc->seqlen_k = (cl_int)d->seqlen_k;
  sc->heads_q = (cl_int)d->heads_q;
  sc->group = (cl_int)(d->heads_q / d->heads_kv);
  sc->window_left = clamp_window(d->window_left, d->seqlen_k - 1 + shift);
  sc->window_right = clamp_window(d->window_right, d->seqlen_q - 1 - shift);
  sc->diag_shift = (cl_int)shift;
  if (d->causal && sc->window_right > 0) sc->window_right = 0;
  sc->scale = (cl_float)scale;
  sc->qk_scale = (cl_float)(d->softcap > 0 ? scale / d->softcap : scale * log2e);
  sc->softcap_l2 = (cl_float)(d->softcap > 0 ? d->softcap * log2e : 0.0);
  sc->stat_sb = varlen ? 0 : d->heads_q * d->seqlen_q;
  sc->stat_sh = varlen ? total_q : d->seqlen_q;
  sc->drop = (fcl_attn_dropout_scalars){0};
  if (d->dropout_p > 0.0f) {
    /* p < 1, so p * 2^32 < 2^32; the bits of a uint in an int */
    const uint32_t threshold = (uint32_t)((double)d->dropout_p * 4294967296.0);
    memcpy(&sc->drop.drop_threshold, &threshold, sizeof threshold);
    sc->drop.drop_seed_lo = (cl_int)(uint32_t)d->dropout_seed;
    sc->drop.drop_seed_hi = (cl_int)(uint32_t)(d->dropout_seed >> 32);
    sc->drop.drop_offset_lo = (cl_int)(uint32_t)d->dropout_offset;
    sc->drop.drop_offset_hi = (cl_int)(uint32_t)(d->dropout_offset >> 32);
    sc->drop.drop_scale = (cl_float)(1.0 / (1.0 - (double)d->dropout_p));
  }
}

cl_int fcl_attention_flags(const fcl_attention_problem *p) {
  return (p->lse && !p->dout ? FCL_ATTN_LSE : 0) | (p->d->alibi_slopes ? FCL_ATTN_ALIBI : 0) |
         (p->varlen ? FCL_ATTN_VARLEN : 0) | (p->seqused_k ? FCL_ATTN_SEQUSED_K : 0);
}

static void arg_scalars(fcl_args *a, const fcl_attention_scalars *sc) {
  FCL_ARG(a, sc->stat_sb);
  FCL_ARG(a, sc->stat_sh);
  FCL_ARG(a, sc->seqlen_q);
  FCL_ARG(a, sc->seqlen_k);
  FCL_ARG(a, sc->heads_q);
  FCL_ARG(a, sc->group);
  FCL_ARG(a, sc->window_left);
  FCL_ARG(a, sc->window_right);
  FCL_ARG(a, sc->diag_shift);
  FCL_ARG(a, sc->qk_scale);
  FCL_ARG(a, sc->softcap_l2);
}

/* alibi, cu_q, cu_k; NULL where unused (the kernels' flags say which they
 * read; a NULL argument costs a launch less than a buffer). */
static void arg_side_buffers(fcl_args *a, const fcl_attention_problem *p) {
  cl_mem alibi = p->d->alibi_slopes;
  cl_mem cuq = p->varlen ? p->d->cu_seqlens_q : NULL;
  cl_mem cuk = p->seqused_k ? p->seqused_k : p->varlen ? p->d->cu_seqlens_k : NULL;
  FCL_ARG(a, alibi);
  FCL_ARG(a, cuq);
  FCL_ARG(a, cuk);
}

_Static_assert(offsetof(fcl_attn_dropout_scalars, drop_offset_hi) ==
                   offsetof(fcl_attn_dropout_scalars, drop_seed_lo) + 12 &&
               offsetof(fcl_attn_fwd_scalars, drop_offset_hi) ==
                   offsetof(fcl_attn_fwd_scalars, drop_seed_lo) + 12,
               "the seed and offset: four ints in a row (fcl_attention_drop_patch)");
_Static_assert(sizeof(fcl_attn_fwd_scalars) == 18 * 8 + 16 * 4,
               "fcl_attn_fwd_scalars: no padding, as the kernels lay it out");
_Static_assert(offsetof(fcl_attn_fwd_scalars, o_sh) == 15 * 8 &&
                   offsetof(fcl_kv_decode_scalars, o_sh) == 15 * 8,
               "the scalar structs begin with FCL_ABI_VIEWS");

void fcl_attention_views(void *sc, const fcl_tensor *q, const fcl_tensor *k,
                         const fcl_tensor *v, const fcl_tensor *o) {
  cl_long views[16];
  fcl_tensor_view(q, views), fcl_tensor_view(k, views + 4);
  fcl_tensor_view(v, views + 8), fcl_tensor_view(o, views + 12);
  memcpy(sc, views, sizeof views);
}

void fcl_attention_fwd_args(fcl_args *a, const fcl_attention_problem *p, cl_int flags) {
  FCL_ARG(a, p->q->buffer);
  FCL_ARG(a, p->k->buffer);
  FCL_ARG(a, p->v->buffer);
  FCL_ARG(a, p->o->buffer);
  FCL_ARG(a, p->lse);
  arg_side_buffers(a, p);
  const fcl_attention_scalars *sc = &p->sc;
  fcl_attn_fwd_scalars f = {
      .lse_sb = sc->stat_sb, .lse_sh = sc->stat_sh,
      .seqlen_q = sc->seqlen_q, .seqlen_k = sc->seqlen_k, .heads_q = sc->heads_q,
      .group = sc->group, .window_left = sc->window_left, .window_right = sc->window_right,
      .diag_shift = sc->diag_shift, .qk_scale = sc->qk_scale, .softcap_l2 = sc->softcap_l2,
      .flags = flags};
#define DROP_FIELD_(n) f.n = sc->drop.n;
  FCL_ATTN_DROPOUT_SCALARS(DROP_FIELD_, DROP_FIELD_)
#undef DROP_FIELD_
  fcl_attention_views(&f, p->q, p->k, p->v, p->o);
  fcl_arg_struct(a, sizeof f, &f);
  if (p->d->dropout_p > 0.0f) /* the seed and offset: each call's (fcl_attention_drop_patch) */
    a->patch_at = offsetof(fcl_attn_fwd_scalars, drop_seed_lo), a->patch_len = 16;
}

void fcl_attention_bwd_args(fcl_args *a, const fcl_attention_problem *p, cl_mem delta,
                            cl_int flags) {
  FCL_ARG(a, p->q->buffer);
  FCL_ARG(a, p->k->buffer);
  FCL_ARG(a, p->v->buffer);
  FCL_ARG(a, p->dout->buffer);
  FCL_ARG(a, p->lse);
  FCL_ARG(a, delta);
  arg_side_buffers(a, p);
  fcl_arg_tensor(a, p->q);
  fcl_arg_tensor(a, p->k);
  fcl_arg_tensor(a, p->v);
  fcl_arg_tensor(a, p->dout);
  arg_scalars(a, &p->sc);
  FCL_ARG(a, p->sc.scale);
  FCL_ARG(a, flags);
  fcl_arg_struct(a, sizeof p->sc.drop, &p->sc.drop);
  if (p->d->dropout_p > 0.0f)
    a->patch_at = offsetof(fcl_attn_dropout_scalars, drop_seed_lo), a->patch_len = 16;
}
