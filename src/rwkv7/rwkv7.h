/* The RWKV7 operations: validation, the variants (fused recurrent forward
 * and backward) and the plan that picks one and its configuration. */
#ifndef FCL_RWKV7_H
#define FCL_RWKV7_H
#include "rwkv/rwkv.h"       /* what RWKV6 shares, the kernels' flags among it */
#include "rwkv7/rwkv7_abi.h" /* RWKV7's own flags */

/* A call's tensors and buffers (the backward's NULL in a forward). */
typedef struct {
  const fcl_tensor *r, *w, *k, *v, *a, *b, *o, *dout, *dr, *dw, *dk, *dv, *da, *db;
  cl_mem h0, ht, dht, dh0;
} fcl_rwkv7_args;

/* One call's problem, checked (config queries: d and dtype, ntok =
 * batch * seqlen, no arguments), as the plan and the launches read it. */
typedef struct {
  const fcl_rwkv7_desc *d;
  bool      varlen;
  int64_t   ntok;        /* tokens: total (varlen) or batch * seqlen */
  fcl_dtype dtype;
  size_t    state_bytes; /* f32 [batch, heads, K, V] */
  fcl_rwkv7_args a;
} fcl_rwkv7_problem;

/* rwkv7_check.c: the descriptor read by flashcl.h's rule into *own (*d then
 * points at it; NULL stays NULL, for the checks to report), its fields,
 * and r, w, k, v, a, b, h0 (into p); a view shaped like r (dim K) or like v
 * (dim V). */
fcl_status fcl_rwkv7_desc_in(fcl_context *ctx, const fcl_rwkv7_desc **d, fcl_rwkv7_desc *own);
fcl_status fcl_check_rwkv7_desc(fcl_context *ctx, const fcl_rwkv7_desc *d);
fcl_status fcl_check_rwkv7(fcl_context *ctx, const fcl_rwkv7_desc *d, const fcl_tensor *r,
                           const fcl_tensor *w, const fcl_tensor *k, const fcl_tensor *v,
                           const fcl_tensor *a, const fcl_tensor *b, cl_mem h0,
                           fcl_rwkv7_problem *p);
fcl_status fcl_check_rwkv7_view(fcl_context *ctx, const fcl_rwkv7_problem *p,
                                const fcl_tensor *t, const char *name, bool value_dim,
                                const fcl_tensor *r);

/* rwkv7_forward.c, rwkv7_backward.c: the recurrent rows' launches. */
fcl_status fcl_rwkv7_recurrent_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                       const void *problem, bool *fallback);
fcl_status fcl_rwkv7_recurrent_backward(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback);
/* The forward kernel's launches over positions [0, seqlen) in segments of
 * per_launch (0: one launch), the state carried through scratch slot 5:
 * from h0 (NULL: 0) to ht (NULL: not kept); with ck, the backward's first
 * pass (RW7_CKPT: checkpoints into ck, nchunk chunks, no output). */
/* The arguments every recurrent and step kernel takes first (RW7_INPUTS:
 * r, w, k, v, a, b, cu_seqlens, their views, seqlen, heads, scale, flags
 * and the segment's positions), appended to a. */
void fcl_rwkv7_input_args(fcl_args *a, const fcl_rwkv7_problem *p, cl_int flags,
                          const fcl_rwkv_segment *sg);
fcl_status fcl_rwkv7_forward_launches(fcl_context *ctx, const fcl_rwkv7_problem *p,
                                      cl_kernel kf, int VS, int VC, int KS,
                                      int64_t per_launch, cl_mem h0, cl_mem ht, cl_mem ck,
                                      int nchunk);
/* The backward's segments of time (rwkv7_backward.c): positions a segment
 * of the reverse pass takes, so that its partial gradients stay within
 * FCL_RWKV7_PART_CAP bytes (the context's FCL_SCRATCH_CAP instead, for
 * tests) and its launch within the loop budget (per, 0: none). */
#define FCL_RWKV7_PART_CAP ((size_t)128 << 20)
int64_t fcl_rwkv7_bwd_segment(const fcl_context *ctx, const fcl_rwkv7_desc *d, int TC, int nvb,
                              int64_t per);

/* The variants (rwkv7_variants.c) and their parameters: the forward's
 * are rwkv/rwkv.h's (fcl_rwkv_fwd_params), the backward's steps a chunk of
 * loads, work-items along K and value columns a work-item (the forward's
 * with VS = 1). The step's (rwkv7_step.c) are fcl_rwkv_step_params. */
#define FCL_RWKV7_BWD_PARAMS(X) X(TC) X(KS) X(VC)
FCL_PARAM_STRUCT(fcl_rwkv7_bwd_params, FCL_RWKV7_BWD_PARAMS);
extern const fcl_variant fcl_variant_rwkv7_step;
extern const fcl_variant fcl_variant_rwkv7_recurrent;
extern const fcl_variant fcl_variant_rwkv7_bwd;
/* Positions one launch may walk within the device's loop budget (a
 * multiple of TC), or 0 when unlimited. */
int64_t fcl_rwkv7_fwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv_fwd_params *c);
int64_t fcl_rwkv7_bwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv7_bwd_params *c);

/* rwkv7_step.c: the step kernel's launches (its row's launch), of
 * fcl_rwkv_step_positions(seqlen) = min(seqlen, RW_STEP_MAX_T) positions
 * each (a program built for that many), the state carried between them. */
fcl_status fcl_rwkv7_step_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                  const void *problem, bool *fallback);
/* The chunked forward (rwkv7_chunk_variants.c: its variant; rwkv7_chunked.c:
 * its launches): chunks of TC positions, key tiles of BK, value columns a
 * work-group of the state pass (HV), work-items (WG), value columns a
 * work-group of the portable output (BV). The tensor-core variant's are
 * the first four (FCL_RWKV7_CHUNK_MMA_PARAMS), which the launches read. */
#define FCL_RWKV7_CHUNK_MMA_PARAMS(X) X(TC) X(BK) X(HV) X(WG)
#define FCL_RWKV7_CHUNK_PARAMS(X) FCL_RWKV7_CHUNK_MMA_PARAMS(X) X(BV)
FCL_PARAM_STRUCT(fcl_rwkv7_chunk_params, FCL_RWKV7_CHUNK_PARAMS);
extern const fcl_variant fcl_variant_rwkv7_chunked;
/* The longest chunk decay_lower_bound allows the chunked form (0: none,
 * the recurrent form runs). */
int fcl_rwkv7_chunk_of_bound(float bound);
/* Floats of one chunk's factors (rwkv7_chunk_prep.cl's RW7_XN). */
size_t fcl_rwkv7_chunk_floats(int K, int tc);
/* Chunks a state-pass launch may walk within the loop budget (0: all). */
int64_t fcl_rwkv7_chunk_state_per_launch(const fcl_device_info *dev, int K, int tc, int hv,
                                         int wg);
fcl_status fcl_rwkv7_chunked_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                     const void *problem, bool *fallback);
/* The chunked forward's launches with the output kernel named, in
 * work-groups of out_wg work-items, out_bv value columns each; *fallback
 * (nothing enqueued) where its scratch exceeds one buffer's limit. */
fcl_status fcl_rwkv7_chunk_launches(fcl_context *ctx, const fcl_variant_plan *pl,
                                    const fcl_rwkv7_problem *p, const char *out_kernel,
                                    size_t out_wg, int out_bv, bool *fallback);
/* Why the prep kernel and the state pass with these parameters (and the
 * portable output with bv columns a work-group; 0: not built) do not fit
 * the device at head dim K, or NULL; extra_local: bytes of local memory
 * another kernel of the program takes (rwkv7_chunk_variants.c). */
const char *fcl_rwkv7_chunk_misfit(const fcl_device_info *dev, int K, int tc, int bk, int hv,
                                   int wg, int bv, size_t extra_local);
/* rwkv7_chunk_mma.c: the chunked forward with its output on tensor cores
 * (f16, bf16): its variant (the portable one's parameters; BV = V), the
 * problems it takes (where the portable chunked row would: *fit), and its
 * launches. */
extern const fcl_variant fcl_variant_rwkv7_chunked_mma;
fcl_status fcl_rwkv7_chunk_mma_applies(fcl_context *ctx, const fcl_rwkv7_problem *p,
                                       fcl_fit *fit);
fcl_status fcl_rwkv7_chunk_mma_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                       const void *problem, bool *fallback);

/* rwkv7_plan.c: the tables of the forward and the backward, the plan of a
 * problem and the run of a checked call. */
extern const fcl_variant_table fcl_rwkv7_fwd_table;
extern const fcl_variant_table fcl_rwkv7_bwd_table;
fcl_status fcl_rwkv7_plan_make(fcl_context *ctx, fcl_rwkv7_problem *p, bool backward,
                               fcl_variant_plan *pl);
fcl_status fcl_rwkv7_run(fcl_context *ctx, fcl_rwkv7_problem *p, bool backward);
/* The problem of a config query (or of fa-tune's class): d in dtype. */
void fcl_rwkv7_problem_of(const fcl_rwkv7_desc *d, fcl_dtype dtype, fcl_rwkv7_problem *p);
#endif
