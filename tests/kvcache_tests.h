/* The parts of test_kvcache in their own files: fcl_attention_merge
 * (kvcache_merge.c) and the bad inputs of fcl_attention_kvcache and
 * fcl_attention_merge (kvcache_bad_input.c); and of test_kvcache_quant,
 * the bad inputs of quantized caches (kvcache_quant_bad_input.c). Each adds
 * its cases to *run and its failures to *failed. */
#ifndef FCL_KVCACHE_TESTS_H
#define FCL_KVCACHE_TESTS_H

#include "flashcl.h"

void kv_merge_tests(fcl_context *ctx, int *run, int *failed);
void kv_bad_input_tests(fcl_context *ctx, int *run, int *failed);
void kvq_bad_input_tests(fcl_context *ctx, int *run, int *failed);
#endif
