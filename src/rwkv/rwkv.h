/* What the RWKV operations (rwkv6/, rwkv7/) share, written once: the
 * checks of their descriptors' common fields and of their views, the
 * scale and flags their kernels take, launches in segments that carry the
 * state, the limits their variants'
 * parameters answer to, and the step and recurrent forward variants'
 * descriptors but their kernels' costs. Neither operation is named here;
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

/* rwkv_segments.c: a pass over positions (or chunks) [0, n) in launches of
 * per each (0: one launch), the state carried from one to the next
 * through scratch slot 5. The first launch reads `in`, the last writes
 * `out` (NULL: none); a backward pass walks the segments last first. */
typedef struct {
  int64_t n, per, count;
  bool    backward;
  cl_mem  in, out, carry, none; /* none: bound where no state is */
} fcl_rwkv_segments;
/* One launch of them: its positions [begin, end), whether it reads a
 * state and writes one, and their buffers (none where it does not). */
typedef struct {
  cl_int begin, end;
  bool   reads, writes;
  cl_mem in, out;
} fcl_rwkv_segment;
fcl_status fcl_rwkv_segments_of(fcl_context *ctx, int64_t n, int64_t per, size_t state_bytes,
                                cl_mem in, cl_mem out, cl_mem none, bool backward,
                                fcl_rwkv_segments *sg);
/* The i-th launch, i in [0, sg->count). */
fcl_rwkv_segment fcl_rwkv_segment_at(const fcl_rwkv_segments *sg, int64_t i);

/* rwkv_fit.c: the limits every RWKV variant's parameters answer to. */
/* Local memory a kernel may take: the device's, less 512 bytes. */
size_t fcl_rwkv_local_budget(const fcl_device_info *dev);
/* Whether a work-item's loop iterations (counted as llvmpipe counts them:
 * every iteration of every loop) stay within three quarters of the
 * device's loop budget (none: always). */
bool fcl_rwkv_loops_fit(const fcl_device_info *dev, long iterations);
/* Positions one launch may walk: whole chunks of tc positions, per_chunk
 * iterations each, within three quarters of the loop budget (at least one
 * chunk), or 0 when unlimited. */
int64_t fcl_rwkv_positions_per_launch(const fcl_device_info *dev, long per_chunk, int tc);
/* What a kernel of state blocks (a work-group per sequence, head and
 * block of value columns: KS x VS work-items, each ceil(K / KS) rows by VC
 * columns of the state) takes at a configuration, its own: bytes of local
 * memory, loop iterations of a work-item (NULL: no bound) and the floats
 * of state a work-item may keep in registers. The functions are called
 * only once the sizes are in range. */
typedef struct {
  size_t (*local_bytes)(int K, const fcl_config *cfg);
  long (*iterations)(int K, const fcl_config *cfg);
  int max_block;
} fcl_rwkv_block_costs;
/* Why such blocks (KS, VS, VC of cfg) do not fit a head of K x V here,
 * checked in this order: sizes, work-group, value columns, local memory,
 * registers, loops; NULL when they do. */
const char *fcl_rwkv_block_misfit(const fcl_rwkv_block_costs *k, const fcl_device_info *dev,
                                  int K, int V, int KS, int VS, int VC, const fcl_config *cfg);
/* Whether fa-tune tries such blocks: on a GPU the state block stays in
 * registers, and past 64 floats a work-item it spills (minutes to build,
 * far slower than the defaults: docs/defaults.md); warps whole. */
bool fcl_rwkv_block_worth_trying(const fcl_device_info *dev, int K, int KS, int VS, int VC);

/* rwkv_recurrent.c: the fused recurrent forward variants (state blocks as
 * above, TC positions a chunk of loads): their parameters, and the pieces
 * of their descriptors that agree. */
#define FCL_RWKV_FWD_PARAMS(X) X(TC) X(KS) X(VS) X(VC)
FCL_PARAM_STRUCT(fcl_rwkv_fwd_params, FCL_RWKV_FWD_PARAMS);
/* The built-in parameters past a kernel's own KS and VC (already in c):
 * VS halved to the head's columns and the work-group limit, then TC from
 * 16 halved until k's local memory fits. */
void fcl_rwkv_fwd_fit(const fcl_rwkv_block_costs *k, const fcl_device_info *dev, int K, int V,
                      fcl_config *cfg);
bool fcl_rwkv_fwd_valid(const fcl_rwkv_block_costs *k, const fcl_device_info *dev,
                        const fcl_tuning_class *cls, const fcl_config *cfg, char *why,
                        size_t why_size);
void fcl_rwkv_fwd_point(const fcl_tuning_class *c, const int *v, fcl_config *cfg);
bool fcl_rwkv_fwd_worth_trying(const fcl_device_info *dev, const fcl_tuning_class *c,
                               const fcl_config *cfg);

/* rwkv_step.c: the step variants (the forward of at most RW_STEP_MAX_T
 * positions a launch: a work-group per sequence, head and block of value
 * columns, KS x VS work-items of VC-wide state vectors). Their parameters:
 * work-items along K and V, value columns a work-item (1, 2 or 4: the
 * width of its state loads). */
#define FCL_RWKV_STEP_PARAMS(X) X(KS) X(VS) X(VC)
FCL_PARAM_STRUCT(fcl_rwkv_step_params, FCL_RWKV_STEP_PARAMS);
/* A step variant's descriptor: its name, tuning op, top file, built-in
 * parameters (defaults: fcl_rwkv_step_choose with its rows a work-item)
 * and checks (valid: fcl_rwkv_step_valid with its kernel's costs). */
#define FCL_RWKV_STEP_VARIANT(name, op, top, defaults, valid)                              \
  {name, op, FCL_TOPS(top), {"K_DIM", "V_DIM"}, FCL_RWKV_MAX_DIM, false,                  \
   FCL_PARAM_COUNT(FCL_RWKV_STEP_PARAMS), FCL_PARAM_NAMES(FCL_RWKV_STEP_PARAMS),          \
   defaults, valid, fcl_rwkv_step_axes, fcl_rwkv_step_point,                             \
   fcl_rwkv_step_worth_trying, 0}
/* The built-in parameters: on a GPU, rows K rows a work-item (doubled up
 * to 4 where such blocks do not fit, by k's costs), blocks of 16 value
 * columns; on a CPU, consecutive work-items on consecutive columns. */
void fcl_rwkv_step_choose(const fcl_rwkv_block_costs *k, const fcl_device_info *dev,
                          const fcl_tuning_class *c, int rows, fcl_config *cfg);
bool fcl_rwkv_step_valid(const fcl_rwkv_block_costs *k, const fcl_device_info *dev,
                         const fcl_tuning_class *cls, const fcl_config *cfg, char *why,
                         size_t why_size);
int  fcl_rwkv_step_axes(const fcl_tuning_class *c, fcl_axis *a);
void fcl_rwkv_step_point(const fcl_tuning_class *c, const int *v, fcl_config *cfg);
bool fcl_rwkv_step_worth_trying(const fcl_device_info *dev, const fcl_tuning_class *c,
                                const fcl_config *cfg);
/* Positions a launch takes: min(seqlen, RW_STEP_MAX_T), at least 1 (its
 * program's RW_STEPS). */
int  fcl_rwkv_step_positions(int64_t seqlen);
#endif
