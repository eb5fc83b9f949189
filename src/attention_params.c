/* Kernel arguments shared by the attention kernels. */
#include "attention.h"

#include <math.h>

static cl_int clamp_window(int64_t w, int64_t limit) {
  return (cl_int)(w < 0 || w > limit ? limit : w);
}

void fcl_attention_scalars_init(const fcl_attention_desc *d,
                                const fcl_attention_problem *p,
                                fcl_attention_scalars *sc) {
  const double log2e = 1.4426950408889634;
  const double scale =
      d->softmax_scale != 0.0f ? d->softmax_scale : 1.0 / sqrt((double)d->head_dim);
  const int64_t limit = d->seqlen_q + d->seqlen_k; /* wider is unlimited */
  sc->seqlen_q = (cl_int)d->seqlen_q;
  sc->seqlen_k = (cl_int)d->seqlen_k;
  sc->heads_q = (cl_int)d->heads_q;
  sc->group = (cl_int)(d->heads_q / d->heads_kv);
  sc->window_left = clamp_window(d->window_left, limit);
  sc->window_right = clamp_window(d->window_right, limit);
  if (d->causal && sc->window_right > 0) sc->window_right = 0;
  sc->scale = (cl_float)scale;
  sc->qk_scale = (cl_float)(d->softcap > 0 ? scale / d->softcap : scale * log2e);
  sc->softcap_l2 = (cl_float)(d->softcap > 0 ? d->softcap * log2e : 0.0);
  sc->stat_sb = p->varlen ? 0 : d->heads_q * d->seqlen_q;
  sc->stat_sh = p->varlen ? p->total_q : d->seqlen_q;
}

void fcl_arg_tensor(fcl_args *a, const fcl_tensor *t) {
  cl_long off = (cl_long)(t->offset / fcl_dtype_size(t->dtype));
  FCL_ARG(a, off);
  FCL_ARG(a, t->strides[0]);
  FCL_ARG(a, t->strides[1]);
  FCL_ARG(a, t->strides[2]);
}

void fcl_arg_scalars(fcl_args *a, const fcl_attention_scalars *sc) {
  FCL_ARG(a, sc->seqlen_q);
  FCL_ARG(a, sc->seqlen_k);
  FCL_ARG(a, sc->heads_q);
  FCL_ARG(a, sc->group);
  FCL_ARG(a, sc->window_left);
  FCL_ARG(a, sc->window_right);
  FCL_ARG(a, sc->qk_scale);
  FCL_ARG(a, sc->softcap_l2);
}
