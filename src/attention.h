/* Internal interface of the attention operations. */
#ifndef FCL_ATTENTION_H
#define FCL_ATTENTION_H
#include "internal.h"
#include "tuning.h"

/* Facts derived while validating a problem. */
typedef struct {
  bool      varlen;
  int64_t   total_q, total_k; /* tokens (varlen) or batch * seqlen */
  fcl_dtype dtype;
} fcl_attention_problem;

/* The descriptor alone (shapes, flags, alibi_slopes' size). */
fcl_status fcl_check_attention_desc(fcl_context *ctx, const fcl_attention_desc *d);
fcl_status fcl_check_attention(fcl_context *ctx, const fcl_attention_desc *d,
                               const fcl_tensor *q, const fcl_tensor *k,
                               const fcl_tensor *v, const fcl_tensor *o,
                               fcl_attention_problem *p);

/* Scalar kernel arguments derived from a descriptor, shared by forward and
 * backward. Windows are clamped to >= 0 with causal folded in. */
typedef struct {
  cl_int   seqlen_q, seqlen_k, heads_q, group, window_left, window_right;
  cl_float scale;      /* softmax scale (natural units)                    */
  cl_float qk_scale;   /* scale*log2(e), or scale/softcap with softcap      */
  cl_float softcap_l2; /* softcap*log2(e), 0 without softcap                */
  cl_long  stat_sb, stat_sh; /* lse layout: batch and head strides         */
} fcl_attention_scalars;

void fcl_attention_scalars_init(const fcl_attention_desc *d,
                                const fcl_attention_problem *p,
                                fcl_attention_scalars *sc);
/* Appends (offset in elements, strides[0..2]) of a tensor. */
void fcl_arg_tensor(fcl_args *a, const fcl_tensor *t);
/* Appends seqlen_q .. window_right, then qk_scale and softcap_l2. */
void fcl_arg_scalars(fcl_args *a, const fcl_attention_scalars *sc);

/* The tuning class of a problem (forward or backward kernel). */
void fcl_attention_class(const fcl_attention_desc *d, fcl_dtype dtype, bool backward,
                         fcl_tuning_class *cls);

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
/* Whether cfg (tuned) builds and fits on dev; the reason in why if not. */
bool fcl_attention_fwd_valid(const fcl_device_info *dev, int head_dim,
                             int head_dim_v, const fcl_attention_fwd_config *cfg,
                             char *why, size_t why_size);
/* Keys one work-group may walk within the device's loop budget (a multiple
 * of block_n), or 0 when unlimited. */
int64_t fcl_attention_fwd_keys_per_group(const fcl_device_info *dev,
                                         const fcl_attention_fwd_config *cfg,
                                         int head_dim);
/* Block sizes of the CPU forward (cl/attention_fwd_cpu.cl): query rows per
 * block (vector lanes), query blocks per work-item, keys per block and per
 * chunk, output columns per work-item and work-items per work-group. */
typedef struct {
  int rows, qb, block_n, key_chunk, block_dv, wg_size;
} fcl_attention_cpu_config;
void fcl_attention_cpu_choose(const fcl_device_info *dev, int head_dim, int head_dim_v,
                              fcl_attention_cpu_config *cfg);
bool fcl_attention_cpu_valid(const fcl_device_info *dev, int head_dim, int head_dim_v,
                             const fcl_attention_cpu_config *cfg, char *why,
                             size_t why_size);
/* Whether the CPU forward takes problems on this device: a CPU without a
 * loop budget (not llvmpipe), unless FCL_CPU_KERNEL=0. */
bool fcl_attention_cpu_applies(const fcl_context *ctx);
/* attention_forward_cpu.c: the CPU forward where it applies; *done false
 * means the portable kernel must run. */
fcl_status fcl_attention_forward_cpu(fcl_context *ctx, const fcl_attention_desc *d,
                                     const fcl_attention_problem *p,
                                     const fcl_tensor *q, const fcl_tensor *k,
                                     const fcl_tensor *v, const fcl_tensor *o,
                                     cl_mem lse, bool *done);
/* Block sizes of the backward kernels (cl/attention_bwd.cl). */
typedef struct {
  int block_r, block_c, block_k, wg_rows, wg_cols;
} fcl_attention_bwd_config;
void fcl_attention_bwd_choose(const fcl_device_info *dev, int head_dim,
                              int head_dim_v, fcl_attention_bwd_config *cfg);
bool fcl_attention_bwd_valid(const fcl_device_info *dev, int head_dim,
                             int head_dim_v, const fcl_attention_bwd_config *cfg,
                             char *why, size_t why_size);
/* Columns (keys for dQ, queries for dK/dV over `group` heads) one
 * work-group may walk within the loop budget, or 0 when unlimited. */
int64_t fcl_attention_bwd_cols_per_group(const fcl_device_info *dev,
                                         const fcl_attention_bwd_config *cfg,
                                         int head_dim, int head_dim_v, int group);
/* Block sizes of the tensor-core forward (cl/attention_fwd_mma.cl): warps
 * of 16 query rows each, keys per tile. */
typedef struct {
  int warps, block_n;
} fcl_attention_mma_config;
void fcl_attention_mma_choose(const fcl_device_info *dev, fcl_dtype t, int head_dim,
                              int head_dim_v, fcl_attention_mma_config *cfg);
bool fcl_attention_mma_valid(const fcl_device_info *dev, fcl_dtype t, int head_dim,
                             int head_dim_v, const fcl_attention_mma_config *cfg, char *why,
                             size_t why_size);
/* Whether the tensor-core forward takes this problem (device probed, dtype
 * and head dims it handles): the kernel fcl_attention_config reports. */
fcl_status fcl_attention_fast_applies(fcl_context *ctx, const fcl_attention_desc *d,
                                      fcl_dtype dtype, bool *applies);
/* attention_fastpath.c: the tensor-core forward, where the device and the
 * problem allow it; *done false means the portable kernel must run. */
fcl_status fcl_attention_forward_fast(fcl_context *ctx, const fcl_attention_desc *d,
                                      const fcl_attention_problem *p,
                                      const fcl_tensor *q, const fcl_tensor *k,
                                      const fcl_tensor *v, const fcl_tensor *o,
                                      cl_mem lse, bool *done);
/* attention_backward_mma.c: likewise for the backward; whether it takes a
 * problem, and its block sizes (false: none fits). */
fcl_status fcl_attention_bwd_fast_applies(fcl_context *ctx, const fcl_attention_desc *d,
                                          fcl_dtype dtype, bool *applies);
bool fcl_attention_bwd_mma_blocks(const fcl_context *ctx, int head_dim, int head_dim_v,
                                  int *warps, int *block_n);
fcl_status fcl_attention_backward_fast(fcl_context *ctx, const fcl_attention_desc *d,
                                       const fcl_attention_problem *p,
                                       const fcl_tensor *q, const fcl_tensor *k,
                                       const fcl_tensor *v, const fcl_tensor *o,
                                       cl_mem lse, const fcl_tensor *dout,
                                       const fcl_tensor *dq, const fcl_tensor *dk,
                                       const fcl_tensor *dv, bool *done);
/* Shared by both: whether the tensor-core helpers work for dtype t (probed
 * once per context), the build options they need (the asm keyword, or the
 * emulation's), whether a tensor's offset and strides are multiples of n
 * elements, FCL_MMA_EMULATE, an integer
 * from the environment. */
fcl_status  fcl_mma_ready(fcl_context *ctx, fcl_dtype t, bool *ready);
const char *fcl_mma_asm_option(const fcl_context *ctx, fcl_dtype t);
bool        fcl_mma_aligned(const fcl_tensor *t, size_t esize, bool varlen, int64_t n);
static inline bool fcl_mma_aligned8(const fcl_tensor *t, size_t esize, bool varlen) {
  return fcl_mma_aligned(t, esize, varlen, 8);
}
int         fcl_mma_emulate(void);
int         fcl_env_int(const char *name, int dflt);

/* Per-head inf/NaN flags for the tensor-core kernels (nonfinite_flags.c). */
typedef struct {
  const fcl_tensor *t;
  bool              varlen;
  int64_t           rows, seqlen; /* rows: batch * seqlen, or tokens when varlen */
  int64_t           heads, dim, group; /* head h sets flag h / group */
} fcl_nf_input;
/* The scan kernels for a dtype (scalar, 16-byte loads): built before
 * anything is enqueued. */
fcl_status fcl_nonfinite_kernel(fcl_context *ctx, fcl_dtype dtype, cl_kernel out[2]);
/* Enqueues the flags' zeroing (nflags ints) and one scan per input. */
fcl_status fcl_nonfinite_flags(fcl_context *ctx, const cl_kernel k[2], const fcl_nf_input *in,
                               int nin,
                               int nflags, cl_mem *flags);

#endif
