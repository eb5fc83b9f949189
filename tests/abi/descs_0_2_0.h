/* The public descriptors as flashcl.h 0.2.0 laid them out, frozen: a
 * caller built against that header passes these bytes to every later
 * library of the 0.x line with a 0.2 SONAME. test_abi.c calls the
 * library with them. Never edit this file: a later release adds its own
 * frozen copy beside it. */
#ifndef FCL_TEST_DESCS_0_2_0_H
#define FCL_TEST_DESCS_0_2_0_H

#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  size_t  size;
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, head_dim_v;
  float   softmax_scale;
  int     causal;
  int64_t window_left, window_right;
  float   softcap;
  cl_mem  alibi_slopes, cu_seqlens_q, cu_seqlens_k;
  int64_t diag_shift;
  const int32_t *cu_seqlens_q_host, *cu_seqlens_k_host;
} abi020_attention_desc;
#define ABI020_ATTENTION_DESC_INIT \
  { sizeof(abi020_attention_desc), 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, -1, -1, 0.0f, NULL, NULL, NULL, 0, \
    NULL, NULL }

typedef struct {
  size_t  size;
  int64_t batch, seqlen_q;
  int64_t heads_q, heads_kv, head_dim, head_dim_v;
  int64_t cache_capacity, page_size, num_pages, cache_batch;
  float   softmax_scale;
  int     causal;
  int64_t window_left, window_right;
  float   softcap;
  cl_mem  alibi_slopes, cache_seqlens, cache_batch_idx, block_table, cu_seqlens_q;
  cl_mem  rotary_cos, rotary_sin;
  int64_t rotary_dim, rotary_positions;
  int     rotary_interleaved;
  int     num_splits;
} abi020_kvcache_desc;
#define ABI020_KVCACHE_DESC_INIT                                                      \
  { sizeof(abi020_kvcache_desc), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, -1, -1, 0.0f, \
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0 }

typedef struct {
  size_t  size;
  int64_t batch, seqlen, heads, head_dim_k, head_dim_v;
  float   scale;
  int     reverse;
  cl_mem  cu_seqlens;
  int     algorithm;
  const int32_t *cu_seqlens_host;
} abi020_rwkv6_desc;
#define ABI020_RWKV6_DESC_INIT { sizeof(abi020_rwkv6_desc), 0, 0, 0, 0, 0, 0.0f, 0, NULL, 0, NULL }

#endif
