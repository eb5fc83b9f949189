/* The advanced header against the installed static library: every kernel
 * variant of flashcl with its parameters, and on a device, the variant and
 * parameters an attention forward would use (fcl_config_info.kernel names
 * a variant of this list).
 *
 *   variants_example [DEVICE]     (DEVICE: e.g. "pocl", "nvidia", "0:0")
 *
 * flashcl_tuning.h's names are not exported by libflashcl.so: link
 * flashcl::flashcl_static (or libflashcl.a) and define
 * FCL_STATIC_LINKING_ONLY. They may change between versions. */
#define FCL_STATIC_LINKING_ONLY
#include <flashcl_tuning.h>

#include <stdio.h>

int main(int argc, char **argv) {
  for (int i = 0; i < fcl_variant_count(); ++i) {
    const fcl_variant *v = fcl_variant_at(i);
    printf("%-24s", fcl_variant_name(v));
    for (int p = 0; p < fcl_variant_nparams(v); ++p) printf(" %s", fcl_variant_param(v, p));
    printf("\n");
  }
  if (argc < 2) return 0;

  fcl_context *ctx = NULL;
  fcl_status   s = fcl_context_create(argv[1], &ctx);
  if (s != FCL_OK) {
    fprintf(stderr, "fcl_context_create: %s\n", fcl_context_last_error(NULL));
    return 1;
  }
  fcl_attention_desc d = FCL_ATTENTION_DESC_INIT;
  d.batch = 1, d.seqlen_q = d.seqlen_k = 1024, d.heads_q = d.heads_kv = 8;
  d.head_dim = d.head_dim_v = 64, d.causal = 1;
  fcl_config_info info;
  s = fcl_attention_config(ctx, &d, FCL_F16, 0, &info);
  if (s == FCL_OK)
    printf("%s: forward f16 D64 causal N1024: %s %s (%s)\n", fcl_context_device_name(ctx),
           info.kernel, info.params, info.source);
  else
    fprintf(stderr, "fcl_attention_config: %s\n", fcl_context_last_error(ctx));
  const int known = s == FCL_OK && fcl_variant_find(info.kernel) != NULL;
  fcl_context_destroy(ctx);
  return known ? 0 : 1;
}
