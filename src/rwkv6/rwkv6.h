/* The RWKV6 operations: validation, the variants (fused recurrent, chunked,
 * backward) and the plan that picks one and its configuration. */
#ifndef FCL_RWKV6_H
#define FCL_RWKV6_H
#include "rwkv6/rwkv6_abi.h" /* flags shared with the kernels */
#include "tuning/tuning.h"

typedef struct {
  bool      varlen;
  int64_t   ntok;   /* tokens: total (varlen) or batch * seqlen */
  fcl_dtype dtype;
  size_t    state_bytes; /* f32 [batch, heads, K, V] */
  size_t    u_bytes;     /* [heads, K] in dtype */
} fcl_rwkv6_problem;

/* rwkv6_check.c: the descriptor and r, k, v, w, u, h0. */
fcl_status fcl_check_rwkv6(fcl_context *ctx, const fcl_rwkv6_desc *d,
                           const fcl_tensor *r, const fcl_tensor *k,
                           const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                           cl_mem h0, fcl_rwkv6_problem *p);
/* A view shaped like r (dim = K) or like v (dim = V). */
fcl_status fcl_check_rwkv6_view(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                const fcl_rwkv6_problem *p, const fcl_tensor *t,
                                const char *name, bool value_dim,
                                const fcl_tensor *r);
fcl_status fcl_check_rwkv6_desc(fcl_context *ctx, const fcl_rwkv6_desc *d);

/* The variants (rwkv6_variants.c) and their parameters. */
#define FCL_RWKV6_FWD_PARAMS(X) X(TC) X(KS) X(VS) X(VC)
#define FCL_RWKV6_CHUNKED_PARAMS(X) X(TC) X(KS) X(VS) X(VC) X(BVC)
#define FCL_RWKV6_BWD_PARAMS(X) X(TC) X(BVB)
/* Steps per chunk, recurrent work-items along K and V, value columns per
 * recurrent work-item, value columns per chunk-output work-group. */
FCL_PARAM_STRUCT(fcl_rwkv6_fwd_params, FCL_RWKV6_CHUNKED_PARAMS);
/* Steps per chunk, value columns per backward work-group. */
FCL_PARAM_STRUCT(fcl_rwkv6_bwd_params, FCL_RWKV6_BWD_PARAMS);
extern const fcl_variant fcl_variant_rwkv6_recurrent;
extern const fcl_variant fcl_variant_rwkv6_chunked;
extern const fcl_variant fcl_variant_rwkv6_bwd;
/* Positions one launch may walk within the device's loop budget (a
 * multiple of the chunk), or 0 when unlimited. */
int64_t fcl_rwkv6_fwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv6_fwd_params *c);
int64_t fcl_rwkv6_bwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv6_bwd_params *c);

/* rwkv6_plan.c: what one call runs: the variant, its class, configuration
 * (and where it came from) and build options. */
typedef struct {
  fcl_tuning_class cls;
  fcl_config       cfg;
  char             from[512];
  char             options[512];
} fcl_rwkv6_plan;
/* The plan of a forward (recurrent or chunked: the descriptor,
 * $FCL_RWKV6_ALGORITHM, then tuning) or backward problem of d in dtype.
 * p (NULL in config queries) bounds the backward's partial sums. */
fcl_status fcl_rwkv6_plan_make(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype,
                               bool backward, const fcl_rwkv6_problem *p, fcl_rwkv6_plan *pl);
#endif
