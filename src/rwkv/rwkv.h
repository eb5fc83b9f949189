/* What the RWKV operations (rwkv6/, rwkv7/) share, written once: the
 * checks of their descriptors' common fields and of their views, and the
 * scale and flags their kernels take. Neither operation is named here;
 * each keeps what is its own. */
#ifndef FCL_RWKV_H
#define FCL_RWKV_H
#include "rwkv6/rwkv6_abi.h" /* the flags every RWKV kernel takes (RW_H0, RW_VARLEN, ...) */
#include "tuning/tuning.h"

/* The largest head dims the RWKV entry points accept. */
#define FCL_RWKV_MAX_DIM 256

/* The fields fcl_rwkv6_desc and fcl_rwkv7_desc share, read from either by
 * FCL_RWKV_DIMS(d) (d not NULL). */
typedef struct {
  int64_t        batch, seqlen, heads, head_dim_k, head_dim_v;
  float          scale;
  int            reverse;
  cl_mem         cu_seqlens;
  const int32_t *cu_seqlens_host;
} fcl_rwkv_dims;
#define FCL_RWKV_DIMS(d)                                                                 \
  ((fcl_rwkv_dims){(d)->batch, (d)->seqlen, (d)->heads, (d)->head_dim_k, (d)->head_dim_v, \
                   (d)->scale, (d)->reverse, (d)->cu_seqlens, (d)->cu_seqlens_host})

/* How a call's tokens lie and the size of its states. */
typedef struct {
  bool    varlen;      /* cu_seqlens gives the sequences */
  int64_t ntok;        /* tokens: total (varlen) or batch * seqlen */
  size_t  state_bytes; /* f32 [batch, heads, K, V] */
} fcl_rwkv_layout;

/* rwkv_check.c. The common fields: sizes, batch * heads, scale. */
fcl_status fcl_check_rwkv_dims(fcl_context *ctx, const fcl_rwkv_dims *d);
/* The sequences (cu_seqlens and its host copy) into *l, with the state's
 * size. */
fcl_status fcl_check_rwkv_layout(fcl_context *ctx, const fcl_rwkv_dims *d, fcl_rwkv_layout *l);
/* A view shaped like r (dim K) or like v (value_dim: dim V), in r's dtype
 * (r NULL: r itself). */
fcl_status fcl_check_rwkv_view(fcl_context *ctx, const fcl_rwkv_dims *d,
                               const fcl_rwkv_layout *l, const fcl_tensor *t, const char *name,
                               bool value_dim, const fcl_tensor *r);
/* The scale the kernels take (0: 1/sqrt(head_dim_k)) and the flags every
 * launch of a call has (RW_VARLEN, RW_REVERSE). */
float fcl_rwkv_scale(float scale, int64_t head_dim_k);
int   fcl_rwkv_flags(bool varlen, int reverse);
#endif
