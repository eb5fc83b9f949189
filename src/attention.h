/* Internal interface of the attention operations. */
#ifndef FCL_ATTENTION_H
#define FCL_ATTENTION_H
#include "internal.h"

/* Facts derived while validating a problem. */
typedef struct {
  bool      varlen;
  int64_t   total_q, total_k; /* tokens (varlen) or batch * seqlen */
  fcl_dtype dtype;
} fcl_attention_problem;

fcl_status fcl_check_attention(fcl_context *ctx, const fcl_attention_desc *d,
                               const fcl_tensor *q, const fcl_tensor *k,
                               const fcl_tensor *v, const fcl_tensor *o,
                               fcl_attention_problem *p);

/* Block sizes of the forward kernel (cl/attention_fwd.cl). */
typedef struct {
  int block_m, block_n;  /* query rows and keys per tile         */
  int block_d, block_dv; /* contraction chunk, output slice       */
  int wg_rows, wg_cols;  /* work-item grid                        */
} fcl_attention_fwd_config;

void fcl_attention_fwd_choose(const fcl_device_info *dev, int head_dim,
                              int head_dim_v, fcl_attention_fwd_config *cfg);
size_t fcl_attention_fwd_local_bytes(const fcl_attention_fwd_config *cfg,
                                     int head_dim);
#endif
