/* flashcl: fused attention kernels in OpenCL C.
 *
 * One opaque context per device and in-order queue. Every call validates its
 * input first; a call that returns anything but FCL_OK has enqueued nothing and
 * written nothing, and fcl_context_last_error() says which argument was wrong.
 *
 * Threading: a context is not thread-safe. Use one context per thread (each
 * with its own queue); distinct contexts may be used concurrently.
 */
#ifndef FLASHCL_H
#define FLASHCL_H

#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#ifdef __APPLE__
#include <OpenCL/cl.h>
#else
#include <CL/cl.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* FCL_API marks what the library exports. On Windows the library's own
 * sources are compiled with FCL_BUILDING (dllexport), a program that links
 * the DLL gets dllimport, and one that links the static library defines
 * FCL_STATIC (flashcl::flashcl_static sets it). Elsewhere the library is
 * built with hidden visibility and FCL_API makes these names visible. */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(FCL_STATIC)
#define FCL_API
#elif defined(FCL_BUILDING)
#define FCL_API __declspec(dllexport)
#else
#define FCL_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define FCL_API __attribute__((visibility("default")))
#else
#define FCL_API
#endif

#define FCL_VERSION_MAJOR 0
#define FCL_VERSION_MINOR 2
#define FCL_VERSION_PATCH 0
#define FCL_VERSION_NUMBER \
  (FCL_VERSION_MAJOR * 10000 + FCL_VERSION_MINOR * 100 + FCL_VERSION_PATCH)
#define FCL_VERSION_STRING "0.2.0"

/* The library's run-time version, to compare with the header's. */
FCL_API unsigned    fcl_version_number(void);
FCL_API const char *fcl_version_string(void);

typedef struct fcl_context fcl_context;

typedef enum {
  FCL_OK = 0,
  FCL_ERROR_INVALID_ARGUMENT, /* a NULL, a size, a stride, a dtype is wrong  */
  FCL_ERROR_UNSUPPORTED,      /* valid, but this build or device cannot do it */
  FCL_ERROR_OPENCL,           /* an OpenCL call failed (code in the message)  */
  FCL_ERROR_BUILD,            /* a kernel failed to build (log in message)    */
  FCL_ERROR_OUT_OF_MEMORY,    /* host or device allocation failed             */
  FCL_ERROR_NO_DEVICE,        /* no OpenCL device matched the selector        */
  FCL_ERROR_TUNING_DB,        /* the tuning database could not be used        */
  FCL_ERROR_INTERNAL          /* a bug in flashcl; please report it           */
} fcl_status;

typedef enum {
  FCL_F32 = 0,
  FCL_F16 = 1,
  FCL_BF16 = 2,
  /* KV-cache formats: k_cache and v_cache of fcl_attention_kvcache only
   * (K and V may differ; q, k_new, v_new and o stay f32, f16 or bf16).
   * Block formats hold 32 values a block along the head dim, byte for byte
   * ggml's: */
  FCL_Q8_0 = 3,     /* f16 d, then 32 int8 q (34 bytes): value d * q[i]       */
  FCL_Q4_0 = 4,     /* f16 d, then 16 bytes, byte j: value j in its low nibble,
                       value j + 16 in its high one (18 bytes): d * (nibble - 8) */
  /* One byte a value, times an f32 scale (fcl_kvcache_desc's k_scale, v_scale): */
  FCL_FP8_E4M3 = 5, /* OCP E4M3 "fn": bias 7, max 448, no infinities, 0x7f NaN */
  FCL_FP8_E5M2 = 6  /* OCP E5M2: bias 15, max 57344, infinities                */
} fcl_dtype;
#define FCL_HAS_QUANTIZED_KV 1

/* A strided view of an OpenCL buffer. Strides are in elements (values),
 * for the dimensions (batch, seq, head, dim); strides[3] must be 1. Varlen
 * calls index tensors by token and ignore strides[0]. Block formats: the
 * head dim and strides[0..2] are multiples of 32, and the head vector that
 * starts at value index r starts at byte offset + r / 32 * block bytes. */
typedef struct {
  cl_mem    buffer;
  size_t    offset; /* bytes, a multiple of the element size (block formats: of 2) */
  fcl_dtype dtype;
  int64_t   strides[4];
} fcl_tensor;

/* A fixed English string for each status; never NULL. */
FCL_API const char *fcl_status_string(fcl_status s);
/* Size in bytes of one element of a dtype, or of one block of a block
 * format (FCL_Q8_0: 34, FCL_Q4_0: 18); 0 for an unknown dtype. */
FCL_API size_t      fcl_dtype_size(fcl_dtype t);
/* Values in fcl_dtype_size(t) bytes: 32 for the block formats, 1 for the
 * other dtypes, 0 for an unknown one. */
FCL_API int64_t     fcl_dtype_block(fcl_dtype t);

/* device: NULL -> $FCL_DEVICE, else the first GPU, else the first CPU.
 * Otherwise "P:D" (platform and device indices) or a case-insensitive
 * substring of the platform name, platform version, vendor or device name
 * ("nvidia", "pocl", "rusticl", ...). The context owns an in-order queue. */
FCL_API fcl_status fcl_context_create(const char *device, fcl_context **out);
/* Uses the application's queue (retained); it must be in-order. */
FCL_API fcl_status fcl_context_create_from_queue(cl_command_queue queue,
                                                 fcl_context    **out);
FCL_API void       fcl_context_destroy(fcl_context *ctx); /* NULL: no-op */
/* The message of the last failed call on ctx ("" if none). With ctx NULL,
 * the message of the last failed fcl_context_create* in this thread. */
FCL_API const char      *fcl_context_last_error(const fcl_context *ctx);
FCL_API cl_context       fcl_context_cl(const fcl_context *ctx);
FCL_API cl_command_queue fcl_context_queue(const fcl_context *ctx);
/* "platform / device / driver" of the context, for logs. */
FCL_API const char      *fcl_context_device_name(const fcl_context *ctx);

/* Program-build counters of a context: how many OpenCL programs it compiled
 * from source and how many it loaded from the on-disk binary cache. */
typedef struct {
  int programs_built;
  int programs_from_cache;
  int cache_writes;
} fcl_context_stats;
FCL_API fcl_status fcl_context_get_stats(const fcl_context *ctx,
                                         fcl_context_stats *out);

/* Settings of a context that hold for every later call on it. The numbers
 * have gaps and are never reused; an option this library does not know,
 * or a value out of its range, is FCL_ERROR_INVALID_ARGUMENT. */
typedef enum {
  /* 0 (default) or 1: keep the profiling events of each operation's
   * kernels for fcl_context_last_op_time(). An event costs host time at
   * every launch (about 8 us on NVIDIA's driver), so it is off unless
   * asked for. Needs a profiling queue (fcl_context_create makes one). */
  FCL_OPTION_TIMING = 100,
  /* Plans the calls keep (see Plans below): 0 to 4096, default 256 (a
   * decode step of up to 256 layers, each its own cache, is all hits); 0
   * runs every call from scratch (validation, choice, arguments). */
  FCL_OPTION_PLAN_CACHE = 110,
  /* 0 or 1: the library's log on stderr (kernels chosen, programs built,
   * splits); default 1 where $FCL_LOG is set and not 0. */
  FCL_OPTION_LOG = 120,
  /* An fcl_rwkv6_algorithm: what the RWKV6 calls whose descriptor says
   * FCL_RWKV6_AUTO run; FCL_RWKV6_AUTO (the default unless
   * $FCL_RWKV6_ALGORITHM is "recurrent" or "chunked") chooses by shape and
   * tuning. */
  FCL_OPTION_RWKV6_ALGORITHM = 130,
  /* An fcl_f32_precision: how the products of f32 calls may be computed;
   * FCL_F32_PRECISION_HIGHEST (the default unless $FCL_F32_PRECISION is
   * "high" or "medium"). */
  FCL_OPTION_F32_PRECISION = 140
} fcl_option;

/* The products of f32 operations, as torch.set_float32_matmul_precision:
 * a level permits a faster form; a kernel that has none keeps the level
 * above. Each level's error, measured against a double reference:
 *  HIGHEST  f32 accuracy (products in 3xTF32 or 3xBF16 on tensor cores):
 *           the f32 tolerances of the tests.
 *  HIGH     one TF32 product (10 mantissa bits, as f16) where a kernel
 *           has it: the attention forward on NVIDIA tensor cores, within
 *           the f16 tolerance. The RWKV6 and attention-backward kernels
 *           have no TF32 form and stay at HIGHEST.
 *  MEDIUM   also one bf16 product: RWKV6's chunked kernels on tensor
 *           cores, within the bf16 tolerance; the attention forward as
 *           HIGH.
 * Kernels without tensor cores (the portable and CPU ones, other
 * devices) run f32 arithmetic at every level. */
typedef enum {
  FCL_F32_PRECISION_HIGHEST = 0,
  FCL_F32_PRECISION_HIGH = 1,
  FCL_F32_PRECISION_MEDIUM = 2
} fcl_f32_precision;
#define FCL_HAS_OPTION_TIMING 1
FCL_API fcl_status fcl_context_set_option(fcl_context *ctx, fcl_option option, int64_t value);
FCL_API fcl_status fcl_context_get_option(const fcl_context *ctx, fcl_option option,
                                          int64_t *value);

/* Device time of the last successful operation on ctx, in milliseconds:
 * from the start of its first kernel to the end of its last, read from
 * OpenCL profiling events (waits for them). FCL_ERROR_UNSUPPORTED unless
 * FCL_OPTION_TIMING is on (or FCL_TRACE is set) and the queue profiles (an
 * application queue created without CL_QUEUE_PROFILING_ENABLE does not);
 * 0 for an operation with nothing to do. */
FCL_API fcl_status fcl_context_last_op_time(fcl_context *ctx, double *ms);

/* ------------------------------------------------------------------ */
/* Attention                                                           */

/* Descriptors (fcl_attention_desc, fcl_kvcache_desc, fcl_rwkv6_desc,
 * fcl_rwkv7_desc, fcl_ring_desc) grow across releases without breaking callers built
 * against an older flashcl.h: each begins with its size, which its *_INIT
 * macro sets (start every descriptor from its *_INIT); new fields are
 * only ever appended, and their zero keeps the old behaviour. The library
 * reads the caller's size: a shorter (older) descriptor gets zero, the
 * default, in the fields it lacks; a longer (newer) one is
 * accepted where the fields this library does not know are all zero, and
 * refused otherwise; a size of 0 (never initialised) is
 * FCL_ERROR_INVALID_ARGUMENT.
 *
 * Known holes, kept while the SONAME stays (moving a field would break
 * callers; they go when the structs are next versioned): on LP64, 4 bytes
 * of padding follow fcl_tensor.dtype, the softcap of fcl_attention_desc
 * and fcl_kvcache_desc, and fcl_rwkv6_desc.algorithm. */

typedef struct {
  size_t  size;        /* sizeof(fcl_attention_desc): FCL_ATTENTION_DESC_INIT */
  int64_t batch;       /* varlen: number of sequences                  */
  int64_t seqlen_q;    /* varlen: the longest query sequence           */
  int64_t seqlen_k;    /* varlen: the longest key sequence             */
  int64_t heads_q;
  int64_t heads_kv;    /* heads_q % heads_kv == 0 (GQA/MQA)            */
  int64_t head_dim;    /* 1..512 (q, k)                                */
  int64_t head_dim_v;  /* 1..512 (v, o)                                */
  float   softmax_scale; /* 0: 1/sqrt(head_dim)                        */
  int     causal;        /* bottom-right aligned                       */
  int64_t window_left;   /* -1: unlimited                              */
  int64_t window_right;  /* -1: unlimited                              */
  float   softcap;       /* > 0: s = softcap * tanh(s / softcap)       */
  cl_mem  alibi_slopes;  /* NULL or f32 [heads_q]                      */
  cl_mem  cu_seqlens_q;  /* NULL or int32 [batch + 1]                  */
  cl_mem  cu_seqlens_k;  /* NULL or int32 [batch + 1]                  */
  /* Moves the diagonal: query i sits at key position
   * i + seqlen_k - seqlen_q + diag_shift (0: bottom-right, as without it).
   * Causal, the window and ALiBi follow it. |diag_shift| <= 2^30. Context
   * parallelism (flashcl_mpi.h) sets it to run a slice of the queries
   * against a slice of the keys from elsewhere in the sequence. */
  int64_t diag_shift;
  /* Varlen: NULL, or host copies of cu_seqlens_q and cu_seqlens_k's
   * batch + 1 entries (FlashInfer's plan takes its indptr arrays so). With
   * them the call checks the lengths on the host and never reads the
   * device buffers back, so it does not wait on the queue and its plan is
   * kept like any other (keyed by the copies' values); the device buffers
   * must hold the same values when the work runs. Without them, the call
   * reads cu_seqlens back with a blocking read. */
  const int32_t *cu_seqlens_q_host;
  const int32_t *cu_seqlens_k_host;
  /* Dropout (training): each visible probability is kept with probability
   * 1 - dropout_p and then scaled by 1 / (1 - dropout_p); lse stays that of
   * the softmax before dropout, and the backward pass regenerates the same
   * mask. 0: none; else in (0, 1). The mask is a function of (seed, offset,
   * b, h, i, j) only: for n = ((b * heads_q + h) * seqlen_q + i) * seqlen_k
   * + j (varlen: i, j within the sequence, seqlen_q/k the maxima),
   * Philox-4x32-10 with key (seed lo, seed hi) and counter (n/4 lo, n/4 hi,
   * offset lo, offset hi) gives four words, and word n % 4 = r keeps the
   * element iff r >= (uint32_t)(dropout_p * 2^32). The same on every
   * device, kernel and tuning. Not with fcl_ring's context parallelism. */
  float    dropout_p;
  uint32_t reserved0;      /* 0: keeps the layout free of padding */
  uint64_t dropout_seed;
  uint64_t dropout_offset;
} fcl_attention_desc;

#define FCL_ATTENTION_DESC_INIT \
  { sizeof(fcl_attention_desc), 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, -1, -1, 0.0f, NULL, NULL, NULL, 0, \
    NULL, NULL, 0.0f, 0, 0, 0 }

/* o = softmax(scale * q k^T + bias, masked) v. lse: NULL or an f32 buffer
 * [batch, heads_q, seqlen_q] (varlen: [heads_q, total_q]) receiving the
 * natural log of each row's softmax denominator (-inf for a row that sees
 * no key; its output row is 0). */
FCL_API fcl_status fcl_attention_forward(fcl_context *ctx,
                                         const fcl_attention_desc *d,
                                         const fcl_tensor *q,
                                         const fcl_tensor *k,
                                         const fcl_tensor *v,
                                         const fcl_tensor *o, cl_mem lse);

/* Gradients of fcl_attention_forward: given q, k, v, the forward's o and
 * lse (required) and dout (like o), writes dq (like q), dk (like k) and dv
 * (like v) in the dtype of q. With GQA, dk and dv sum over the query heads of
 * each group. Deterministic: no float atomics, so two runs are bit-identical.
 * Uses an f32 scratch buffer of heads_q * total_q floats kept by the context. */
FCL_API fcl_status fcl_attention_backward(fcl_context *ctx,
                                          const fcl_attention_desc *d,
                                          const fcl_tensor *q,
                                          const fcl_tensor *k,
                                          const fcl_tensor *v,
                                          const fcl_tensor *o, cl_mem lse,
                                          const fcl_tensor *dout,
                                          const fcl_tensor *dq,
                                          const fcl_tensor *dk,
                                          const fcl_tensor *dv);

/* The attention probabilities, for tests and inspection (flash-attn's
 * return_attn_probs): writes f32 [batch, heads_q, seqlen_q, seqlen_k],
 * contiguous, to p (at least that many floats): exp(s - lse) at visible
 * positions and 0 elsewhere (varlen: 0 past a sequence's lengths), lse
 * being the forward's (required, as fcl_attention_forward wrote it). With
 * dropout (d->dropout_p > 0) a dropped position holds -exp(s - lse),
 * flash-attn's sign encoding of the mask; values are not rescaled. An
 * output of more than 2^31 - 1 floats is FCL_ERROR_INVALID_ARGUMENT. */
FCL_API fcl_status fcl_attention_probs(fcl_context *ctx, const fcl_attention_desc *d,
                                       const fcl_tensor *q, const fcl_tensor *k, cl_mem lse,
                                       cl_mem p);

/* ------------------------------------------------------------------ */
/* Attention against a KV cache (inference: decode, chunked prefill)    */

typedef struct {
  size_t  size;           /* sizeof(fcl_kvcache_desc): FCL_KVCACHE_DESC_INIT    */
  int64_t batch;          /* sequences                                          */
  int64_t seqlen_q;       /* new tokens per sequence (1: decode); ragged: the most */
  int64_t heads_q, heads_kv, head_dim, head_dim_v; /* as fcl_attention_desc    */
  int64_t cache_capacity; /* tokens one sequence's cache can hold               */
  int64_t page_size;      /* 0: contiguous cache; > 0: paged, tokens per page   */
  int64_t num_pages;      /* paged: pages in k_cache / v_cache                  */
  int64_t cache_batch;    /* contiguous: rows of k_cache / v_cache (0: batch)   */
  float   softmax_scale;  /* 0: 1/sqrt(head_dim)                                */
  int     causal;         /* bottom-right aligned                               */
  int64_t window_left, window_right; /* -1: unlimited                           */
  float   softcap;        /* > 0: s = softcap * tanh(s / softcap)               */
  cl_mem  alibi_slopes;   /* NULL or f32 [heads_q]                              */
  cl_mem  cache_seqlens;  /* required, int32 [batch]: tokens cached before the call */
  cl_mem  cache_batch_idx;/* contiguous only: NULL (row b) or int32 [batch]     */
  cl_mem  block_table;    /* paged: int32 [batch, cache_capacity / page_size]   */
  cl_mem  cu_seqlens_q;   /* NULL or int32 [batch + 1]: ragged new tokens       */
  cl_mem  rotary_cos, rotary_sin; /* NULL or f32 [rotary_positions, rotary_dim / 2] */
  int64_t rotary_dim, rotary_positions; /* rotary_dim even, <= head_dim         */
  int     rotary_interleaved; /* 1: pairs (2i, 2i+1); 0: pairs (i, i + rotary_dim/2) */
  int     num_splits;     /* 0: the library chooses; n >= 1: keys split n ways  */
  /* fp8 caches (FCL_FP8_E4M3, FCL_FP8_E5M2): NULL (a scale of 1) or an f32
   * buffer of scale_count scales; byte x of the cache holds scale * fp8(x),
   * and the append stores x / scale, rounded to nearest even and saturated
   * to the format's largest finite value. Block formats carry their own
   * scales and take none. */
  cl_mem  k_scale, v_scale;
  int64_t scale_count;    /* 0 or 1: one scale a tensor; heads_kv: one a kv head */
} fcl_kvcache_desc;

#define FCL_KVCACHE_DESC_INIT                                                       \
  { sizeof(fcl_kvcache_desc), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, -1, -1, 0.0f, \
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, NULL, NULL, 0 }

/* Attention of new query tokens against a key/value cache, appending k_new
 * and v_new (both or neither) to the cache first.
 *
 * Cache tensors are strided views of (slot, token, head, dim): a slot is a
 * cache row (contiguous; token < cache_capacity) or a page (paged; token <
 * page_size); head-major caches are the same call with other strides. q,
 * k_new, v_new and o are (batch, token, head, dim), indexed by token when
 * cu_seqlens_q is set. Sequence b has c = cache_seqlens[b] cached tokens and
 * n new ones; new token i goes to position c + i (paged: page
 * block_table[b][pos / page_size], slot pos % page_size; contiguous: row
 * cache_batch_idx[b], or b), and the n queries are the last n of the keys:
 * causal, window, softcap and ALiBi as in fcl_attention_forward with
 * seqlen_q = n, seqlen_k = c + n (c without an append). Rotary (cos and sin
 * both set) rotates q and k_new at position c + i on their first rotary_dim
 * dims; the cache receives the rotated k (in its dtype), and the rotated q
 * may be rounded to the dtype before use (as flash-attn's kernels do; the
 * chunked-prefill path does). cache_seqlens is never changed.
 * lse: NULL or f32 laid out as for fcl_attention_forward.
 *
 * Each cache holds q's dtype or a KV-cache format (FCL_Q8_0, FCL_Q4_0,
 * FCL_FP8_E4M3, FCL_FP8_E5M2; fcl_dtype). The append quantizes each new
 * token's head vector as ggml's reference quantizers do (q8_0, q4_0: a
 * cache written by llama.cpp reads as it is, and the other way round) or
 * divides it by its scale (fp8); attention uses the values the cache then
 * holds, dequantized, the new tokens included; like the rotated q, they may
 * be rounded to q's dtype first (the tensor-core decode and the chunked
 * prefill take them so, as an f16 or bf16 cache would hold them).
 *
 * Device-side indices (cache_seqlens, block_table, cache_batch_idx,
 * cu_seqlens_q) are checked in the kernels: out of range, nothing outside
 * the buffers is read or written (the result is unspecified). Nothing is
 * read back to the host: the call only enqueues. num_splits: any value gives
 * the same result within rounding; a fixed value and shape is bit-identical
 * from run to run. */
FCL_API fcl_status fcl_attention_kvcache(fcl_context *ctx, const fcl_kvcache_desc *d,
                                         const fcl_tensor *q, const fcl_tensor *k_cache,
                                         const fcl_tensor *v_cache,
                                         const fcl_tensor *k_new, const fcl_tensor *v_new,
                                         const fcl_tensor *o, cl_mem lse);

/* Combines n partial results of the same queries over disjoint key sets,
 * each with its lse: lse = log(sum_i exp(lse_i)), o = sum_i exp(lse_i - lse)
 * o_i; a row whose parts are all -inf gets o = 0 and lse = -inf. Shapes come
 * from d (batch, seqlen_q, heads_q, head_dim_v, cu_seqlens_q); lse_parts and
 * lse are laid out as fcl_attention_forward's lse. Parts and o may differ in
 * dtype; o may be o_parts[0] and lse may be lse_parts[0]. */
FCL_API fcl_status fcl_attention_merge(fcl_context *ctx, const fcl_attention_desc *d,
                                       int64_t n, const fcl_tensor *o_parts,
                                       const cl_mem *lse_parts, const fcl_tensor *o,
                                       cl_mem lse);

/* ------------------------------------------------------------------ */
/* RWKV6 linear attention                                              */

typedef enum {
  FCL_RWKV6_AUTO = 0,      /* chosen by shape (and tuning)             */
  FCL_RWKV6_RECURRENT = 1, /* fused recurrent: one pass over time      */
  FCL_RWKV6_CHUNKED = 2    /* chunked: matrix products within chunks   */
} fcl_rwkv6_algorithm;

typedef struct {
  size_t  size;       /* sizeof(fcl_rwkv6_desc): FCL_RWKV6_DESC_INIT   */
  int64_t batch;      /* varlen: number of sequences                   */
  int64_t seqlen;     /* varlen: the longest sequence                  */
  int64_t heads;
  int64_t head_dim_k; /* 1..256 */
  int64_t head_dim_v; /* 1..256 */
  float   scale;      /* 0: 1/sqrt(head_dim_k)                         */
  int     reverse;    /* run from the last step to the first           */
  cl_mem  cu_seqlens; /* NULL or int32 [batch + 1]                     */
  fcl_rwkv6_algorithm algorithm; /* $FCL_RWKV6_ALGORITHM overrides AUTO */
  /* NULL, or a host copy of cu_seqlens' batch + 1 entries: as
   * fcl_attention_desc's cu_seqlens_q_host (no read back, plan kept). */
  const int32_t *cu_seqlens_host;
} fcl_rwkv6_desc;

#define FCL_RWKV6_DESC_INIT \
  { sizeof(fcl_rwkv6_desc), 0, 0, 0, 0, 0, 0.0f, 0, NULL, FCL_RWKV6_AUTO, NULL }

/* Per (batch, head), from S = h0 (or 0), for each step t:
 *   o_t[j] = sum_i scale * r_t[i] * (S[i][j] + u[i] * k_t[i] * v_t[j])
 *   S[i][j] = S[i][j] * exp(w_t[i]) + k_t[i] * v_t[j]
 * r, k, w: [batch, seqlen, heads, head_dim_k]; v, o: [..., head_dim_v]
 * (strided; varlen indexes by token). u: [heads, head_dim_k] in the dtype of
 * r. h0, ht: NULL or f32 [batch, heads, head_dim_k, head_dim_v]. */
FCL_API fcl_status fcl_rwkv6_forward(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                     const fcl_tensor *r, const fcl_tensor *k,
                                     const fcl_tensor *v, const fcl_tensor *w,
                                     cl_mem u, cl_mem h0, const fcl_tensor *o,
                                     cl_mem ht);

/* Gradients: dht NULL means zero; dh0 may be NULL. du (like u) sums over
 * batch and time. dr, dk, dv, dw are laid out like r, k, v, w. */
FCL_API fcl_status fcl_rwkv6_backward(
    fcl_context *ctx, const fcl_rwkv6_desc *d, const fcl_tensor *r,
    const fcl_tensor *k, const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
    cl_mem h0, const fcl_tensor *dout, cl_mem dht, const fcl_tensor *dr,
    const fcl_tensor *dk, const fcl_tensor *dv, const fcl_tensor *dw, cl_mem du,
    cl_mem dh0);

/* ------------------------------------------------------------------ */
/* RWKV7 linear attention                                              */

typedef struct {
  size_t  size;       /* sizeof(fcl_rwkv7_desc): FCL_RWKV7_DESC_INIT   */
  int64_t batch;      /* varlen: number of sequences                   */
  int64_t seqlen;     /* varlen: the longest sequence                  */
  int64_t heads;
  int64_t head_dim_k; /* 1..256 */
  int64_t head_dim_v; /* 1..256 */
  float   scale;      /* 0: 1/sqrt(head_dim_k) (RWKV-7 models pass 1)  */
  int     reverse;    /* run from the last step to the first           */
  cl_mem  cu_seqlens; /* NULL or int32 [batch + 1]                     */
  /* NULL, or a host copy of cu_seqlens' batch + 1 entries: as
   * fcl_rwkv6_desc's cu_seqlens_host (no read back, plan kept). */
  const int32_t *cu_seqlens_host;
  /* 0: unknown; else a promise that every w >= decay_lower_bound (< 0;
   * models: -exp(-0.5) = -0.6065), which lets the library take faster
   * forms that lose precision under stronger decays. With 0 every w <= 0
   * is exact. */
  float    decay_lower_bound;
  uint32_t reserved0; /* 0: keeps the layout free of padding */
} fcl_rwkv7_desc;

#define FCL_RWKV7_DESC_INIT \
  { sizeof(fcl_rwkv7_desc), 0, 0, 0, 0, 0, 0.0f, 0, NULL, NULL, 0.0f, 0 }

/* RWKV-7 time mixing (the generalized delta rule, fla's fused_recurrent_rwkv7
 * and chunk_rwkv7). Per (batch, head), from S = h0 (or 0), for each step t
 * (last to first when reverse):
 *   S'[i][j] = exp(w_t[i]) S[i][j] + b_t[i] sum_m a_t[m] S[m][j] + k_t[i] v_t[j]
 *   o_t[j]   = scale * sum_i r_t[i] S'[i][j]       (S' the state after step t)
 * r, w, k, a, b: [batch, seqlen, heads, head_dim_k]; v, o: [..., head_dim_v]
 * (strided, one dtype; varlen indexes by token). w is the log decay (<= 0).
 * h0, ht: NULL or f32 [batch, heads, head_dim_k, head_dim_v]. */
FCL_API fcl_status fcl_rwkv7_forward(fcl_context *ctx, const fcl_rwkv7_desc *d,
                                     const fcl_tensor *r, const fcl_tensor *w,
                                     const fcl_tensor *k, const fcl_tensor *v,
                                     const fcl_tensor *a, const fcl_tensor *b, cl_mem h0,
                                     const fcl_tensor *o, cl_mem ht);

/* Gradients of r, w, k, v, a, b (laid out like them, in their dtype) and
 * of h0 (f32, NULL: not wanted); dht NULL means zero. Deterministic. */
FCL_API fcl_status fcl_rwkv7_backward(
    fcl_context *ctx, const fcl_rwkv7_desc *d, const fcl_tensor *r, const fcl_tensor *w,
    const fcl_tensor *k, const fcl_tensor *v, const fcl_tensor *a, const fcl_tensor *b,
    cl_mem h0, const fcl_tensor *dout, cl_mem dht, const fcl_tensor *dr,
    const fcl_tensor *dw, const fcl_tensor *dk, const fcl_tensor *dv, const fcl_tensor *da,
    const fcl_tensor *db, cl_mem dh0);

/* ------------------------------------------------------------------ */
/* Plans                                                               */

/* A plan is one call made ready to run again: validated, its kernels and
 * their configuration chosen and built, their arguments set, its scratch
 * memory taken. fcl_plan_run() then only enqueues (one OpenCL launch a
 * kernel, nothing else), which is what an engine wants when it calls the
 * same attention once per layer and token: plan once per step (or once per
 * model) for each layer, run per token. Data that change between runs live
 * in device buffers the plan reads when it runs: cache_seqlens,
 * block_table, the caches, q, o. A plan holds the buffers it was given
 * (retained until fcl_plan_destroy) and reads them as they are at each run;
 * a varlen plan (cu_seqlens set) keeps the lengths it read (or was given
 * in the host copies) when it was made: make a new one when they change.
 *
 * The calls above use plans too: each context keeps the plans of the last
 * FCL_OPTION_PLAN_CACHE distinct calls, keyed by every descriptor field,
 * dtype, view (buffer, offset, strides) and buffer handle, so a call like
 * one before it costs a lookup and its launches. The context holds (retains)
 * the buffers its cached plans name, so a handle cannot come back naming
 * another buffer while a plan uses it. A buffer the caller has released
 * is let go, with its plans, a few calls later: each call checks one held
 * buffer's reference count. To let go of them all at once, set
 * FCL_OPTION_PLAN_CACHE (to any value: the cache is emptied) or release
 * the context. (Varlen calls
 * of fcl_attention_forward, _backward and the RWKV6 calls without the host
 * copies of cu_seqlens read them back and are not kept.)
 *
 * Each *_plan function takes the arguments of its call and validates them
 * as the call does; nothing is enqueued. Destroy plans before their
 * context. With $FCL_COMMAND_BUFFER=1, where the device offers
 * cl_khr_command_buffer, a plan records its launches into a command
 * buffer once and fcl_plan_run enqueues that (one enqueue a run), unless
 * timing or tracing is on or the plan takes per-call values (dropout's
 * seed); it falls back to the launches where the driver refuses it. */
typedef struct fcl_plan fcl_plan;
FCL_API fcl_status fcl_attention_forward_plan(fcl_context *ctx, const fcl_attention_desc *d,
                                              const fcl_tensor *q, const fcl_tensor *k,
                                              const fcl_tensor *v, const fcl_tensor *o,
                                              cl_mem lse, fcl_plan **out);
FCL_API fcl_status fcl_attention_backward_plan(
    fcl_context *ctx, const fcl_attention_desc *d, const fcl_tensor *q, const fcl_tensor *k,
    const fcl_tensor *v, const fcl_tensor *o, cl_mem lse, const fcl_tensor *dout,
    const fcl_tensor *dq, const fcl_tensor *dk, const fcl_tensor *dv, fcl_plan **out);
FCL_API fcl_status fcl_attention_kvcache_plan(fcl_context *ctx, const fcl_kvcache_desc *d,
                                              const fcl_tensor *q, const fcl_tensor *k_cache,
                                              const fcl_tensor *v_cache,
                                              const fcl_tensor *k_new, const fcl_tensor *v_new,
                                              const fcl_tensor *o, cl_mem lse, fcl_plan **out);
FCL_API fcl_status fcl_attention_merge_plan(fcl_context *ctx, const fcl_attention_desc *d,
                                            int64_t n, const fcl_tensor *o_parts,
                                            const cl_mem *lse_parts, const fcl_tensor *o,
                                            cl_mem lse, fcl_plan **out);
FCL_API fcl_status fcl_rwkv6_forward_plan(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                          const fcl_tensor *r, const fcl_tensor *k,
                                          const fcl_tensor *v, const fcl_tensor *w, cl_mem u,
                                          cl_mem h0, const fcl_tensor *o, cl_mem ht,
                                          fcl_plan **out);
FCL_API fcl_status fcl_rwkv6_backward_plan(
    fcl_context *ctx, const fcl_rwkv6_desc *d, const fcl_tensor *r, const fcl_tensor *k,
    const fcl_tensor *v, const fcl_tensor *w, cl_mem u, cl_mem h0, const fcl_tensor *dout,
    cl_mem dht, const fcl_tensor *dr, const fcl_tensor *dk, const fcl_tensor *dv,
    const fcl_tensor *dw, cl_mem du, cl_mem dh0, fcl_plan **out);
/* Enqueues the plan's work on its context's queue, in order; returns once
 * it is enqueued. fcl_context_last_op_time() then times it. */
FCL_API fcl_status fcl_plan_run(fcl_plan *plan);
FCL_API void       fcl_plan_destroy(fcl_plan *plan); /* NULL: no-op */

/* ------------------------------------------------------------------ */
/* Tuning                                                              */

/* The kernel configuration an operation uses for a problem, and where it
 * came from. fa-tune stores measured configurations per device in a SQLite
 * database ($FCL_TUNING_DB, else $XDG_CACHE_HOME/flashcl/tuning.db, else
 * ~/.cache/flashcl/tuning.db; FCL_TUNING_DB=off ignores it), read once per
 * context: rows for this device and driver, then for this device with
 * another driver, else built-in defaults. Rows of a changed kernel source
 * are never used. */
typedef struct {
  /* The kernel variant that runs, by its name in the registry of variants
   * (flashcl_tuning.h: fcl_variant_count, fcl_variant_at, fcl_variant_name;
   * the names fa-tune's --ops takes and its database stores), such as
   * "attention_fwd", "attention_decode_mma" or "rwkv6_bwd_chunked_mma".
   * Every name fits with its terminating zero (test_tuning checks the
   * whole registry against this size). This struct has no size field, so
   * it cannot grow while the SONAME stays: a caller built against this
   * header owns exactly sizeof(fcl_config_info) bytes. */
  char kernel[32];
  char params[160]; /* "BLOCK_M=64,BLOCK_N=32,..."                          */
  char source[512]; /* "tuning database PATH (this driver, ...)",
                       "built-in defaults (reason)" or "override"           */
} fcl_config_info;

/* The configuration fcl_attention_forward (backward != 0: _backward) would
 * use for d (shapes and flags; no buffers are read) with tensors of dtype. */
FCL_API fcl_status fcl_attention_config(fcl_context *ctx,
                                        const fcl_attention_desc *d,
                                        fcl_dtype dtype, int backward,
                                        fcl_config_info *out);
/* Likewise for RWKV6; for the forward pass this includes the algorithm. */
FCL_API fcl_status fcl_rwkv6_config(fcl_context *ctx, const fcl_rwkv6_desc *d,
                                    fcl_dtype dtype, int backward,
                                    fcl_config_info *out);
/* Likewise for RWKV7. */
FCL_API fcl_status fcl_rwkv7_config(fcl_context *ctx, const fcl_rwkv7_desc *d,
                                    fcl_dtype dtype, int backward,
                                    fcl_config_info *out);

#ifdef __cplusplus
}
#endif
#endif /* FLASHCL_H */
