/* The attention operations: a problem described once per call, one table
 * of kernel variants per pass (forward, backward), the plan that picks a
 * row and its configuration, and the rows' launches. */
#ifndef FCL_ATTENTION_H
#define FCL_ATTENTION_H
#include "attention/attention_abi.h" /* flags and tile layouts shared with the kernels */
#include "tuning/tuning.h"

/* Scalar kernel arguments derived from a descriptor, shared by forward and
 * backward. Windows are clamped to >= 0 with causal folded in; diag_shift
 * is the descriptor's (the kernels add it to sk - sq). */
typedef struct {
  cl_int   seqlen_q, seqlen_k, heads_q, group, window_left, window_right, diag_shift;
  cl_float scale;      /* softmax scale (natural units)                    */
  cl_float qk_scale;   /* scale*log2(e), or scale/softcap with softcap      */
  cl_float softcap_l2; /* softcap*log2(e), 0 without softcap                */
  cl_long  stat_sb, stat_sh; /* lse layout: batch and head strides         */
  fcl_attn_dropout_scalars drop; /* all 0 without dropout                   */
} fcl_attention_scalars;

/* One call's problem, validated: the descriptor, the tensors (the
 * backward's four are NULL in a forward), and what follows from them. */
typedef struct {
  const fcl_attention_desc *d;
  fcl_dtype                 dtype;
  bool                      varlen;
  int64_t                   total_q, total_k; /* tokens (varlen) or batch * seqlen */
  fcl_attention_scalars     sc;
  const fcl_tensor         *q, *k, *v, *o;
  cl_mem                    lse; /* forward: NULL or f32; backward: required */
  const fcl_tensor         *dout, *dq, *dk, *dv;
  /* forward, not varlen: NULL, or int32 [batch] keys of each sequence (a
   * KV cache's rows: FCL_ATTN_SEQUSED_K); seqlen_k is then the most */
  cl_mem                    seqused_k;
} fcl_attention_problem;

/* attention_entry.c: the descriptor's part of a call's key (every field). */
void fcl_key_attention_desc(fcl_key *key, const fcl_attention_desc *d);
/* attention_entry.c: with dropout, the call's seed and offset as the four
 * ints of the kernels' drop_seed_lo .. drop_offset_hi, which the key leaves
 * out (a plan takes them from each call); returns their bytes, 0 without
 * dropout. */
size_t fcl_attention_drop_patch(const fcl_attention_desc *d, cl_int patch[4]);
/* attention_entry.c: runs the plan of a validated problem (the next row
 * where a kernel does not build). */
fcl_status fcl_attention_run(fcl_context *ctx, const fcl_attention_problem *p, bool backward);

/* attention_check.c and kvcache_check.c: the caller's descriptor read by
 * flashcl.h's rule into *own, *d then pointing at it (NULL stays NULL, for
 * the checks to report). */
fcl_status fcl_attention_desc_in(fcl_context *ctx, const fcl_attention_desc **d,
                                 fcl_attention_desc *own);
fcl_status fcl_kvcache_desc_in(fcl_context *ctx, const fcl_kvcache_desc **d,
                               fcl_kvcache_desc *own);
/* attention_check.c: the descriptor alone (shapes, flags, alibi_slopes'
 * size), then q, k, v, o and lse (forward) into p. */
fcl_status fcl_check_attention_desc(fcl_context *ctx, const fcl_attention_desc *d);
fcl_status fcl_check_attention(fcl_context *ctx, const fcl_attention_desc *d,
                               const fcl_tensor *q, const fcl_tensor *k,
                               const fcl_tensor *v, const fcl_tensor *o,
                               fcl_attention_problem *p);
/* The same without v and o (fcl_attention_probs). */
fcl_status fcl_check_attention_qk(fcl_context *ctx, const fcl_attention_desc *d,
                                  const fcl_tensor *q, const fcl_tensor *k,
                                  fcl_attention_problem *p);
/* The backward's views (dout, dq, dk, dv) and lse. */
fcl_status fcl_check_attention_grads(fcl_context *ctx, fcl_attention_problem *p);

/* attention_args.c: the kernels' shared arguments, in the order of
 * ATTN_FWD_PARAMS (attention_common.cl) and of the backward passes. */
void fcl_attention_scalars_init(const fcl_attention_desc *d, bool varlen, int64_t total_q,
                                fcl_attention_scalars *sc);
/* q, k, v, o, lse, alibi, cu_q, cu_k, their views, the lse layout, the
 * scalars and flags: every forward kernel's leading arguments. */
void fcl_attention_fwd_args(fcl_args *a, const fcl_attention_problem *p, cl_int flags);
/* The views of q, k, v and o (FCL_ABI_VIEWS) into the first 16 longs of a
 * kernel's scalar struct `sc` (fcl_attn_fwd_scalars, fcl_kv_decode_scalars). */
void fcl_attention_views(void *sc, const fcl_tensor *q, const fcl_tensor *k,
                         const fcl_tensor *v, const fcl_tensor *o);
/* The dQ and dK/dV kernels' leading arguments: q, k, v, dout, lse, delta,
 * alibi, cu_q, cu_k, their views, the lse layout, the scalars, the scale
 * and flags. */
void fcl_attention_bwd_args(fcl_args *a, const fcl_attention_problem *p, cl_mem delta,
                            cl_int flags);
/* The FCL_ATTN_* flags of a problem (lse, alibi, varlen). */
cl_int fcl_attention_flags(const fcl_attention_problem *p);

/* attention_plan.c: the tables of the forward and the backward (their
 * problems: fcl_attention_problem, whose d and dtype alone are set in
 * config queries), the plan of a pass (what fcl_attention_config()
 * reports and the entry points run) and the class of a problem. */
extern const fcl_variant_table fcl_attention_fwd_table;
extern const fcl_variant_table fcl_attention_bwd_table;
fcl_status fcl_attention_plan_make(fcl_context *ctx, const fcl_attention_problem *p,
                                   bool backward, fcl_variant_plan *pl);
void fcl_attention_class(const fcl_attention_desc *d, fcl_dtype dtype, const fcl_variant *v,
                         fcl_tuning_class *cls);

/* The variants (one file each), their rows' predicates and launches. */
extern const fcl_variant fcl_variant_attention_fwd;     /* attention_fwd.c     */
extern const fcl_variant fcl_variant_attention_fwd_cpu; /* attention_fwd_cpu.c */
extern const fcl_variant fcl_variant_attention_fwd_mma; /* attention_fwd_mma.c */
extern const fcl_variant fcl_variant_attention_fwd_wgmma; /* attention_fwd_wgmma.c */
extern const fcl_variant fcl_variant_attention_bwd;     /* attention_bwd.c     */
extern const fcl_variant fcl_variant_attention_bwd_mma; /* attention_bwd_mma.c */
extern const fcl_variant fcl_variant_attention_bwd_wgmma; /* attention_bwd_wgmma.c */
fcl_status fcl_attention_fwd_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                    const void *problem, bool *fallback);
fcl_status fcl_attention_fwd_cpu_applies(fcl_context *ctx, const void *problem, fcl_fit *fit);
void       fcl_attention_fwd_cpu_options(const fcl_context *ctx, const void *problem,
                                         fcl_build_extra *x); /* "-w" */
fcl_status fcl_attention_fwd_cpu_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback);
fcl_status fcl_attention_fwd_mma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit);
fcl_status fcl_attention_fwd_mma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback);
fcl_status fcl_attention_fwd_wgmma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit);
fcl_status fcl_attention_fwd_wgmma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                          const void *problem, bool *fallback);
fcl_status fcl_attention_bwd_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                    const void *problem, bool *fallback);
fcl_status fcl_attention_bwd_mma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit);
fcl_status fcl_attention_bwd_mma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                        const void *problem, bool *fallback);
fcl_status fcl_attention_bwd_wgmma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit);
fcl_status fcl_attention_bwd_wgmma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                          const void *problem, bool *fallback);

/* attention_bwd_mma.c, shared with the wgmma backward, whose kernels for
 * heads with inf or NaN are the mma.sync row's at its defaults: that
 * row's configuration (WARPS BLOCK_N MT STAGES KV_WARPS KV_BLOCK_N
 * KV_STAGES) and what is wrong with one (NULL: nothing), and the runner
 * of delta, dQ and dK/dV. */
void        fcl_attention_bwd_mma_defaults(const fcl_device_info *dev,
                                           const fcl_tuning_class *cls, fcl_config *cfg);
const char *fcl_attention_bwd_mma_bad(const fcl_device_info *dev, const fcl_tuning_class *cls,
                                      const fcl_config *cfg);
/* A dQ or dK/dV kernel: its name, warps, rows (queries or keys) and
 * tiles (keys or queries) per work-group, tiles in flight. */
typedef struct {
  const char *name;
  int         warps, rows, n, stages;
} fcl_attention_bwd_kernel;
/* A backward program: its top files (FCL_TOPS), build options after the row's, a name
 * for the log, whether it takes only 16-byte rows (cp.async; else the next
 * row runs), and the dQ and dK/dV kernels of each build (FCL_NONFINITE
 * 0, 1); delta takes the work-groups of dq[1]. */
typedef struct {
  const char *const       *tops;
  const char              *options;
  const char              *what;
  bool                     needs_cp_async;
  fcl_attention_bwd_kernel dq[2], dkdv[2];
} fcl_attention_bwd_kernels;
fcl_status fcl_attention_bwd_mma_run(fcl_context *ctx, const fcl_variant_plan *pl,
                                     const fcl_attention_problem *p,
                                     const fcl_attention_bwd_kernels *kn, bool *fallback);

/* Shared by the tensor-core rows: whether the problem's shape suits them
 * (head dims up to 128, no loop budget; dropout or not) and the device's
 * helpers work. */
fcl_status fcl_attention_mma_applies(fcl_context *ctx, const fcl_attention_desc *d,
                                     fcl_dtype dtype, bool *yes);

/* Attention against a KV cache (fcl_attention_kvcache), and the forward
 * of few query rows against many keys, which runs the same kernels. */
typedef struct {
  const fcl_kvcache_desc *d;
  fcl_dtype               dtype;        /* q's, k_new's, v_new's and o's */
  fcl_dtype               k_fmt, v_fmt; /* the caches': dtype or a KV-cache format */
  bool                    varlen, paged, append, rotary;
  const fcl_tensor       *q, *k_cache, *v_cache, *k_new, *v_new, *o;
  cl_mem                  lse;
  /* Tokens every token-indexed view (q, o, k_new, v_new) holds: the bound
   * the kernels check cu_seqlens_q against; and floats lse holds. */
  int64_t                 tokens, lse_len;
  /* forward: every sequence caches fixed_len tokens (cache_seqlens unused) */
  int64_t                 fixed_len;
  /* The problem as a forward over the cache rows (seqlen_k the capacity),
   * and its scalars. */
  fcl_attention_desc      attn;
  fcl_attention_scalars   sc;
} fcl_kvcache_problem;

/* kvcache_check.c: the descriptor and every argument into p. */
fcl_status fcl_check_kvcache(fcl_context *ctx, const fcl_kvcache_desc *d, const fcl_tensor *q,
                             const fcl_tensor *k_cache, const fcl_tensor *v_cache,
                             const fcl_tensor *k_new, const fcl_tensor *v_new,
                             const fcl_tensor *o, cl_mem lse, fcl_kvcache_problem *p);
/* Tokens of a token-indexed view of heads x dim that fit its buffer. */
int64_t fcl_view_tokens(const fcl_tensor *t, int64_t heads, int64_t dim);

/* kvcache_decode.c: the decode variant; its class for a problem, and the
 * launch (append, attention with the merge of the splits). The build
 * options of a problem's decode program (which holds the append and
 * prefill kernels). */
/* Whether the decode kernels use inline PTX (NVIDIA, where the
 * tensor-core probe found that it works, not emulated). */
fcl_status fcl_kvcache_ptx(fcl_context *ctx, bool *ptx);
fcl_status fcl_kvcache_options(fcl_context *ctx, const fcl_tuning_class *cls,
                               const fcl_config *cfg, const fcl_kvcache_problem *p, char *out,
                               size_t size);
/* The FCL_KV_* flags of a problem. */
cl_int fcl_kvcache_flags(const fcl_kvcache_problem *p);
/* Enqueues the append of k_new, v_new (kernel k of the decode program). */
fcl_status fcl_kvcache_append(fcl_context *ctx, cl_kernel k, const fcl_kvcache_problem *p,
                              cl_int kv_flags, cl_int flags);
/* The cache layout arguments the KV-cache kernels share: capacity, rows,
 * page size, pages, pages a sequence. */
void fcl_kvcache_layout_args(fcl_args *a, const fcl_kvcache_desc *d);
extern const fcl_variant fcl_variant_attention_decode;
void fcl_kvcache_class(const void *problem, const fcl_variant *v, fcl_tuning_class *cls);
fcl_status fcl_kvcache_decode_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                     const void *problem, bool *fallback);
/* What runs a decode kernel (either variant): its name, work-group, keys
 * a block of the work-group, query rows a tile, the most rows its
 * configuration allows, and the splits' choice (work-groups a compute unit
 * in a wave, fewest keys a split). */
typedef struct {
  const char *kernel;
  int         wg, bn, rows, max_rows, waves, split_keys;
} fcl_kv_shape;
/* Splits the keys, then enqueues the append and the kernel (which merges
 * the splits), both from the variant's program built with options. */
fcl_status fcl_kvcache_run(fcl_context *ctx, const fcl_variant *v, const char *options,
                           const fcl_kv_shape *sh, const fcl_kvcache_problem *p);
/* Query rows a tile: a kv head's rows (its query heads times the new
 * tokens) rounded up to a power of two, at most max_rows. */
int fcl_kvcache_tile_rows(int max_rows, const fcl_kvcache_desc *d);
/* Whether the decode kernel appends the new tokens itself (one tile a kv
 * head of at most max_rows rows). */
int fcl_kvcache_fused_append(int max_rows, const fcl_kvcache_problem *p);
/* Elements of the caches' 16-byte (or narrower) loads. */
int fcl_kvcache_vector_width(const fcl_kvcache_problem *p);
bool fcl_kvcache_lane_blocks(const fcl_tensor *t, int64_t head_dim);
/* The forward of few rows as a KV-cache problem over a full contiguous
 * cache (d holds the descriptor kp points to). */
void fcl_kvcache_from_forward(const fcl_attention_problem *p, fcl_kvcache_desc *d,
                              fcl_kvcache_problem *kp);
/* kvcache_decode_mma.c: the decode kernel on NVIDIA's tensor cores
 * (f16, bf16); the KV-cache row and the forward row. */
extern const fcl_variant fcl_variant_attention_decode_mma;
bool       fcl_kvcache_mma_suits(fcl_context *ctx, fcl_dtype dtype, int64_t head_dim,
                                 int64_t head_dim_v);
fcl_status fcl_kvcache_mma_applies(fcl_context *ctx, const void *problem, fcl_fit *fit);
fcl_status fcl_kvcache_mma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                  const void *problem, bool *fallback);
fcl_status fcl_attention_fwd_decode_mma_applies(fcl_context *ctx, const void *problem,
                                                fcl_fit *fit);
fcl_status fcl_attention_fwd_decode_mma_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                               const void *problem, bool *fallback);
/* kvcache_prefill.c: many new rows run on the forward's kernels (the
 * tensor cores where they apply), over the cache or a contiguous copy. */
fcl_status fcl_kvcache_prefill_applies(fcl_context *ctx, const void *problem, fcl_fit *fit);
fcl_status fcl_kvcache_prefill_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                      const void *problem, bool *fallback);
/* The forward row: few query rows a kv head, many keys, no varlen. */
fcl_status fcl_attention_fwd_decode_applies(fcl_context *ctx, const void *problem,
                                            fcl_fit *fit);
fcl_status fcl_attention_fwd_decode_launch(fcl_context *ctx, const fcl_variant_plan *pl,
                                           const void *problem, bool *fallback);
/* kvcache_entry.c: the table of fcl_attention_kvcache (problems:
 * fcl_kvcache_problem). */
extern const fcl_variant_table fcl_kvcache_table;

/* nonfinite_flags.c: per-head inf/NaN flags for the tensor-core kernels. */
typedef struct {
  const fcl_tensor *t;
  bool              varlen;
  int64_t           rows, seqlen; /* rows: batch * seqlen, or tokens when varlen */
  int64_t           heads, dim, group; /* head h sets flag h / group */
} fcl_nf_input;
/* The scan kernels for a dtype (scalar, 16-byte loads): built before
 * anything is enqueued. */
fcl_status fcl_nonfinite_kernel(fcl_context *ctx, fcl_dtype dtype, cl_kernel out[2]);
/* Enqueues the flags' zeroing (nflags ints) and one scan per input; with
 * list > 0 the buffer holds a forward's work list of that many tiles
 * after them (its count zeroed too). */
fcl_status fcl_nonfinite_flags(fcl_context *ctx, const cl_kernel k[2], const fcl_nf_input *in,
                               int nin, int nflags, size_t list, cl_mem *flags);
/* Runs a tensor-core forward's two builds (kern[0] without FCL_NONFINITE,
 * kern[1] with) over the grid of one query tile a work-group (global,
 * local): the flags of nin scans (scan: fcl_nonfinite_kernel's; unused
 * where nin is 0), kern[0] on the grid, kern[1] on the tiles it listed. */
fcl_status fcl_attention_fwd_nf_run(fcl_context *ctx, const fcl_attention_problem *p,
                                    const cl_kernel kern[2], const cl_kernel scan[2],
                                    const fcl_nf_input *in, int nin, const size_t global[3],
                                    const size_t local[3], const char *what);
#endif
