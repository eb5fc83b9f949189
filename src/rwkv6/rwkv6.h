/* The RWKV6 operations: validation, the variants (fused recurrent, chunked,
 * backward) and the plan that picks one and its configuration. */
#ifndef FCL_RWKV6_H
#define FCL_RWKV6_H
#include "rwkv/rwkv.h" /* what RWKV7 shares, the kernels' flags among it */

/* A call's tensors and buffers (the backward's NULL in a forward). */
typedef struct {
  const fcl_tensor *r, *k, *v, *w, *dout, *o, *dr, *dk, *dv, *dw;
  cl_mem u, h0, ht, dht, du, dh0;
} fcl_rwkv6_args;

/* One call's problem, checked (config queries: d and dtype, ntok =
 * batch * seqlen, no arguments), as the plan and the launches read it. */
typedef struct {
  const fcl_rwkv6_desc *d;
  bool      varlen;
  int64_t   ntok;   /* tokens: total (varlen) or batch * seqlen */
  fcl_dtype dtype;
  size_t    state_bytes; /* f32 [batch, heads, K, V] */
  size_t    u_bytes;     /* [heads, K] in dtype */
  fcl_rwkv6_args a;
  /* Set by the plan (rwkv6_plan.c): the algorithm the call asks for (d's,
   * else the context's option; FCL_RWKV6_AUTO: none) and whether the
   * chunked kernels run (the one asked for, else AUTO's choice). */
  fcl_rwkv6_algorithm algorithm;
  bool      chunked;
} fcl_rwkv6_problem;

/* rwkv6_forward.c, rwkv6_backward.c: the calls, checked and run by their
 * pass's table, once their entry (rwkv6_entry.c: the public calls through
 * the context's plans) has read the descriptor; the fused recurrent rows'
 * launches. */
fcl_status fcl_rwkv6_forward_run(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                 const fcl_tensor *r, const fcl_tensor *k,
                                 const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                                 cl_mem h0, const fcl_tensor *o, cl_mem ht);
fcl_status fcl_rwkv6_backward_run(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                  const fcl_tensor *r, const fcl_tensor *k,
                                  const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                                  cl_mem h0, const fcl_tensor *dout, cl_mem dht,
                                  const fcl_tensor *dr, const fcl_tensor *dk,
                                  const fcl_tensor *dv, const fcl_tensor *dw, cl_mem du,
                                  cl_mem dh0);
fcl_status fcl_rwkv6_recurrent_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                       const void *problem, bool *fallback);
fcl_status fcl_rwkv6_recurrent_backward(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback);
/* rwkv6_check.c: the descriptor and r, k, v, w, u, h0 (into p, d too). */
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
/* The caller's descriptor read by flashcl.h's rule into *own, *d then
 * pointing at it (NULL stays NULL, for the checks to report). */
fcl_status fcl_rwkv6_desc_in(fcl_context *ctx, const fcl_rwkv6_desc **d, fcl_rwkv6_desc *own);

/* The variants (rwkv6_variants.c) and their parameters; the recurrent
 * forward's and the step's are rwkv/rwkv.h's (fcl_rwkv_fwd_params,
 * fcl_rwkv_step_params). */
#define FCL_RWKV6_BWD_PARAMS(X) X(TC) X(BVB)
#define FCL_RWKV6_CHUNK_PARAMS(X) X(TC) X(BK) X(BV) X(WG) X(HK) X(HV) X(HC)
/* Recurrent backward: steps per chunk, value columns per work-group. */
FCL_PARAM_STRUCT(fcl_rwkv6_bwd_params, FCL_RWKV6_BWD_PARAMS);
/* Chunked (forward and backward): positions per chunk, key and value
 * columns per tile and work-items of the chunk kernels; rows, columns
 * and columns per work-item of the state pass. */
FCL_PARAM_STRUCT(fcl_rwkv6_chunk_params, FCL_RWKV6_CHUNK_PARAMS);
extern const fcl_variant fcl_variant_rwkv6_recurrent;
extern const fcl_variant fcl_variant_rwkv6_chunked;
extern const fcl_variant fcl_variant_rwkv6_bwd;
extern const fcl_variant fcl_variant_rwkv6_bwd_chunked;
extern const fcl_variant fcl_variant_rwkv6_chunked_mma;
extern const fcl_variant fcl_variant_rwkv6_bwd_chunked_mma;
extern const fcl_variant fcl_variant_rwkv6_step;
/* Positions one launch may walk within the device's loop budget (a
 * multiple of the chunk), or 0 when unlimited. */
int64_t fcl_rwkv6_fwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv_fwd_params *c);
int64_t fcl_rwkv6_bwd_positions_per_launch(const fcl_device_info *dev, int K,
                                           const fcl_rwkv6_bwd_params *c);
/* The state pass: chunk, tile of HK rows by HV columns, work-items a tile,
 * chunks a launch (0: all), bytes of a checkpoint element (4: f32; 2:
 * rounded to the 16-bit data's dtype, on tensor cores) and runs of chunks
 * walked side by side (1: one walk; more: on tensor cores, launches of
 * every chunk only). */
typedef struct {
  int     TC, HK, HV;
  size_t  wg;
  int64_t per_launch;
  size_t  ck_esize;
  int     nseg;
} fcl_rwkv6_chunk_launch;
/* The portable state pass's launch (rwkv6_chunk_variants.c): chunks a
 * launch walks within the device's loop budget, or 0 when unlimited. */
fcl_rwkv6_chunk_launch fcl_rwkv6_chunk_state_launch(const fcl_device_info *dev,
                                                    const fcl_rwkv6_chunk_params *c);

/* rwkv6_plan.c: the tables of the forward and the backward, the plan of a
 * problem (its algorithm and chunked set first: what fcl_rwkv6_config()
 * reports and the calls run), and the run of a checked call. */
extern const fcl_variant_table fcl_rwkv6_fwd_table;
extern const fcl_variant_table fcl_rwkv6_bwd_table;
fcl_status fcl_rwkv6_plan_make(fcl_context *ctx, fcl_rwkv6_problem *p, bool backward,
                               fcl_variant_plan *pl);
fcl_status fcl_rwkv6_run(fcl_context *ctx, fcl_rwkv6_problem *p, bool backward);
/* The problem of a config query (or of fa-tune's class): d in dtype. */
void fcl_rwkv6_problem_of(const fcl_rwkv6_desc *d, fcl_dtype dtype, fcl_rwkv6_problem *p);

/* rwkv6_chunked.c: the chunked forward's and backward's rows' launches. */
fcl_status fcl_rwkv6_chunked_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                     const void *problem, bool *fallback);
fcl_status fcl_rwkv6_chunked_backward(fcl_context *ctx, const fcl_variant_plan *pl,
                                      const void *problem, bool *fallback);
/* What the chunked launches share: the scalar arguments (flags with
 * RW_ALIGNED where every operand's rows start at 16-byte
 * multiples), and the forward state pass (kernel ks) from h0 to ht
 * writing the checkpoints, which it returns in *ck (scratch slot 0). */
typedef struct {
  cl_int   seqlen, heads, nchunk, flags;
  cl_float scale;
  cl_mem   cu;
  size_t   bh;
} fcl_rwkv6_chunk_common;
fcl_rwkv6_chunk_common fcl_rwkv6_chunk_common_of(const fcl_rwkv6_desc *d,
                                                 const fcl_rwkv6_problem *p, int tc,
                                                 const fcl_rwkv6_args *t);
fcl_status fcl_rwkv6_chunk_begin(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                 const fcl_rwkv6_problem *p, const fcl_rwkv6_chunk_launch *lc,
                                 const fcl_rwkv6_args *a, cl_kernel ks, cl_mem *ck);
/* The chunked backward's launches with the kernels given: the two state
 * passes (ks), dv (kout, out_wg work-items a chunk, out_bv value columns),
 * dr dk dw (kdk, WG work-items, BK key columns), du (kdu). */
typedef struct {
  fcl_rwkv6_chunk_launch state;
  int                    BK, WG;
  size_t                 out_wg;
  int                    out_bv;
  cl_kernel              ks, kout, kdk, kdu;
} fcl_rwkv6_chunk_bwd_launch;
fcl_status fcl_rwkv6_chunk_backward_run(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                        const fcl_rwkv6_problem *p, const fcl_rwkv6_args *a,
                                        const fcl_rwkv6_chunk_bwd_launch *lb);
/* Local memory (bytes) of the dr dk dw kernel (rwkv6_chunk_bwd.cl) whose
 * first phase takes p1 floats of its pool (portable: 2 (tc + bk) bv). */
size_t fcl_rwkv6_chunk_dk_bytes(int tc, int bk, size_t p1);

/* rwkv6_step.c: the forward of the step kernel (its row's launch):
 * launches of fcl_rwkv_step_positions(seqlen) = min(seqlen, RW_STEP_MAX_T)
 * positions (its build macro RW_STEPS), the state carried between them. */
fcl_status fcl_rwkv6_step_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                  const void *problem, bool *fallback);

/* rwkv6_chunk_mma.c: the forward with its output on tensor cores. */
/* The tensor cores' operand dtype for data of dtype (f32: split bf16). */
fcl_dtype fcl_rwkv6_mma_operand(fcl_dtype dtype);
fcl_status fcl_rwkv6_chunk_mma_applies(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                       fcl_dtype dtype, bool *yes);
/* Set *fallback (nothing enqueued) when their kernels do not build. */
fcl_status fcl_rwkv6_chunk_mma_forward(fcl_context *ctx, const fcl_variant_plan *pl,
                                       const void *problem, bool *fallback);
fcl_status fcl_rwkv6_chunk_mma_backward(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback);
#endif
