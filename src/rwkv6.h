/* Internal interface of the RWKV6 operations. */
#ifndef FCL_RWKV6_H
#define FCL_RWKV6_H
#include "internal.h"
#include "tuning.h"

typedef struct {
  bool      varlen;
  int64_t   ntok;   /* tokens: total (varlen) or batch * seqlen */
  fcl_dtype dtype;
  size_t    state_bytes; /* f32 [batch, heads, K, V] */
  size_t    u_bytes;     /* [heads, K] in dtype */
} fcl_rwkv6_problem;

/* Checks the descriptor and r, k, v, w, u, h0 and the output o (or dout for
 * the backward: named by o_name) with its final state buffer. */
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
/* The tuning class of a problem for one of the RWKV6 kernels. */
void fcl_rwkv6_class(const fcl_rwkv6_desc *d, fcl_dtype dtype, fcl_kernel_id kernel,
                     fcl_tuning_class *cls);
/* Chunked or recurrent: the descriptor, $FCL_RWKV6_ALGORITHM, then tuning. */
bool fcl_rwkv6_use_chunked(fcl_context *ctx, const fcl_rwkv6_desc *d, fcl_dtype dtype);

/* Block sizes (cl/rwkv6_*.cl). */
typedef struct {
  int tc;  /* steps per chunk                               */
  int ks;  /* recurrent work-items along K                   */
  int vs;  /* recurrent work-items along V                   */
  int vc;  /* value columns per recurrent work-item          */
  int bvc; /* value columns per chunk-output work-group      */
} fcl_rwkv6_fwd_config;
typedef struct {
  int tc, bvb;
} fcl_rwkv6_bwd_config;
void fcl_rwkv6_fwd_choose(const fcl_device_info *dev, int K, int V, bool chunked,
                          fcl_rwkv6_fwd_config *c);
void fcl_rwkv6_bwd_choose(const fcl_device_info *dev, int K, int V,
                          fcl_rwkv6_bwd_config *c);
bool fcl_rwkv6_fwd_valid(const fcl_device_info *dev, int K, int V, bool chunked,
                         const fcl_rwkv6_fwd_config *c, char *why, size_t why_size);
bool fcl_rwkv6_bwd_valid(const fcl_device_info *dev, int K, int V,
                         const fcl_rwkv6_bwd_config *c, char *why, size_t why_size);
/* Positions one launch may walk within the device's loop budget (a
 * multiple of the chunk), or 0 when unlimited. */
int64_t fcl_rwkv6_fwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv6_fwd_config *c);
int64_t fcl_rwkv6_bwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv6_bwd_config *c);

/* Appends (offset in elements, strides[0..2]) of a tensor; from attention. */
void fcl_arg_tensor(fcl_args *a, const fcl_tensor *t);
#endif
