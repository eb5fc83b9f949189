/* The kernels fa-tune knows: names, parameters, sources, built-in
 * defaults and validity checks, and the text form of their parameters. */
#include "tuning.h"

#include "attention.h"
#include "rwkv6.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const attn_fwd_files[] = {"common/dtype.cl", "attention/attention_common.cl",
                                             "attention/attention_fwd.cl"};
static const char *const attn_bwd_files[] = {"common/dtype.cl", "attention/attention_common.cl",
                                             "attention/attention_bwd.cl"};
static const char *const rwkv6_fwd_files[] = {"common/dtype.cl", "rwkv6/rwkv6_common.cl",
                                              "rwkv6/rwkv6_recurrent.cl", "rwkv6/rwkv6_chunked.cl"};
static const char *const rwkv6_bwd_files[] = {"common/dtype.cl", "rwkv6/rwkv6_common.cl",
                                              "rwkv6/rwkv6_backward.cl"};

/* Both tensor-core forwards (16-bit and f32) guard the rows. */
static const char *const attn_mma_files[] = {"common/dtype.cl", "attention/attention_common.cl",
                                             "common/mma_warp.cl", "common/mma_common.cl",
                                             "attention/attention_fwd_mma.cl",
                                             "common/mma_tf32.cl", "attention/attention_fwd_tf32.cl",
                                             "attention/nonfinite_flags.cl"};
static void mma_defaults(const fcl_device_info *dev, const fcl_tuning_class *c, void *cfg) {
  fcl_attention_mma_choose(dev, c->dtype, c->head_dim, c->head_dim_v, cfg);
}
static bool mma_valid(const fcl_device_info *dev, const fcl_tuning_class *c,
                      const void *cfg, char *why, size_t n) {
  return fcl_attention_mma_valid(dev, c->dtype, c->head_dim, c->head_dim_v, cfg, why, n);
}
static const char *const attn_cpu_files[] = {"common/dtype.cl", "attention/attention_common.cl",
                                             "attention/attention_fwd_cpu.cl"};
static void cpu_defaults(const fcl_device_info *dev, const fcl_tuning_class *c, void *cfg) {
  fcl_attention_cpu_choose(dev, c->head_dim, c->head_dim_v, cfg);
}
static bool cpu_valid(const fcl_device_info *dev, const fcl_tuning_class *c,
                      const void *cfg, char *why, size_t n) {
  return fcl_attention_cpu_valid(dev, c->head_dim, c->head_dim_v, cfg, why, n);
}
static void attn_fwd_defaults(const fcl_device_info *dev, const fcl_tuning_class *c,
                              void *cfg) {
  fcl_attention_fwd_choose(dev, c->head_dim, c->head_dim_v, cfg);
}
static bool attn_fwd_valid(const fcl_device_info *dev, const fcl_tuning_class *c,
                           const void *cfg, char *why, size_t n) {
  return fcl_attention_fwd_valid(dev, c->head_dim, c->head_dim_v, cfg, why, n);
}
static void attn_bwd_defaults(const fcl_device_info *dev, const fcl_tuning_class *c,
                              void *cfg) {
  fcl_attention_bwd_choose(dev, c->head_dim, c->head_dim_v, cfg);
}
static bool attn_bwd_valid(const fcl_device_info *dev, const fcl_tuning_class *c,
                           const void *cfg, char *why, size_t n) {
  return fcl_attention_bwd_valid(dev, c->head_dim, c->head_dim_v, cfg, why, n);
}
static void rec_defaults(const fcl_device_info *dev, const fcl_tuning_class *c, void *cfg) {
  fcl_rwkv6_fwd_choose(dev, c->head_dim, c->head_dim_v, false, cfg);
}
static bool rec_valid(const fcl_device_info *dev, const fcl_tuning_class *c,
                      const void *cfg, char *why, size_t n) {
  return fcl_rwkv6_fwd_valid(dev, c->head_dim, c->head_dim_v, false, cfg, why, n);
}
static void chunk_defaults(const fcl_device_info *dev, const fcl_tuning_class *c, void *cfg) {
  fcl_rwkv6_fwd_choose(dev, c->head_dim, c->head_dim_v, true, cfg);
}
static bool chunk_valid(const fcl_device_info *dev, const fcl_tuning_class *c,
                        const void *cfg, char *why, size_t n) {
  return fcl_rwkv6_fwd_valid(dev, c->head_dim, c->head_dim_v, true, cfg, why, n);
}
static void rbwd_defaults(const fcl_device_info *dev, const fcl_tuning_class *c, void *cfg) {
  fcl_rwkv6_bwd_choose(dev, c->head_dim, c->head_dim_v, cfg);
}
static bool rbwd_valid(const fcl_device_info *dev, const fcl_tuning_class *c,
                       const void *cfg, char *why, size_t n) {
  return fcl_rwkv6_bwd_valid(dev, c->head_dim, c->head_dim_v, cfg, why, n);
}

#define FILES(f) f, (int)FCL_COUNT(f)
#define AF(m) offsetof(fcl_attention_fwd_config, m)
#define AB(m) offsetof(fcl_attention_bwd_config, m)
#define RF(m) offsetof(fcl_rwkv6_fwd_config, m)
#define RB(m) offsetof(fcl_rwkv6_bwd_config, m)
#define AM(m) offsetof(fcl_attention_mma_config, m)
#define AC(m) offsetof(fcl_attention_cpu_config, m)

static const fcl_kernel_desc kernels[FCL_KERNEL_COUNT] = {
    {"attention_fwd", FILES(attn_fwd_files), 6,
     {"BLOCK_M", "BLOCK_N", "BLOCK_D", "BLOCK_DV", "WG_ROWS", "WG_COLS"},
     {AF(block_m), AF(block_n), AF(block_d), AF(block_dv), AF(wg_rows), AF(wg_cols)},
     sizeof(fcl_attention_fwd_config), attn_fwd_defaults, attn_fwd_valid},
    {"attention_bwd", FILES(attn_bwd_files), 5,
     {"BLOCK_R", "BLOCK_C", "BLOCK_K", "WG_ROWS", "WG_COLS"},
     {AB(block_r), AB(block_c), AB(block_k), AB(wg_rows), AB(wg_cols)},
     sizeof(fcl_attention_bwd_config), attn_bwd_defaults, attn_bwd_valid},
    {"rwkv6_recurrent", FILES(rwkv6_fwd_files), 4,
     {"TC", "KS", "VS", "VC"},
     {RF(tc), RF(ks), RF(vs), RF(vc)},
     sizeof(fcl_rwkv6_fwd_config), rec_defaults, rec_valid},
    {"rwkv6_chunked", FILES(rwkv6_fwd_files), 5,
     {"TC", "KS", "VS", "VC", "BVC"},
     {RF(tc), RF(ks), RF(vs), RF(vc), RF(bvc)},
     sizeof(fcl_rwkv6_fwd_config), chunk_defaults, chunk_valid},
    {"rwkv6_bwd", FILES(rwkv6_bwd_files), 2,
     {"TC", "BVB"},
     {RB(tc), RB(bvb)},
     sizeof(fcl_rwkv6_bwd_config), rbwd_defaults, rbwd_valid},
    {"attention_fwd_mma", FILES(attn_mma_files), 2,
     {"WARPS", "BLOCK_N"},
     {AM(warps), AM(block_n)},
     sizeof(fcl_attention_mma_config), mma_defaults, mma_valid},
    {"attention_fwd_cpu", FILES(attn_cpu_files), 6,
     {"ROWS", "QB", "BLOCK_N", "KEY_CHUNK", "BLOCK_DV", "WG_SIZE"},
     {AC(rows), AC(qb), AC(block_n), AC(key_chunk), AC(block_dv), AC(wg_size)},
     sizeof(fcl_attention_cpu_config), cpu_defaults, cpu_valid},
};

const fcl_kernel_desc *fcl_kernel_get(fcl_kernel_id id) {
  return (unsigned)id < FCL_KERNEL_COUNT ? &kernels[id] : NULL;
}

bool fcl_kernel_from_name(const char *name, fcl_kernel_id *id) {
  for (int i = 0; i < FCL_KERNEL_COUNT; ++i)
    if (strcmp(kernels[i].name, name) == 0) {
      *id = (fcl_kernel_id)i;
      return true;
    }
  return false;
}

int fcl_param_get(fcl_kernel_id id, const void *cfg, int i) {
  int v;
  memcpy(&v, (const char *)cfg + kernels[id].param_offsets[i], sizeof v);
  return v;
}

void fcl_param_set(fcl_kernel_id id, void *cfg, int i, int value) {
  memcpy((char *)cfg + kernels[id].param_offsets[i], &value, sizeof value);
}

void fcl_params_format(fcl_kernel_id id, const void *cfg, char *out, size_t size) {
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; i < kernels[id].nparams && n < size; ++i)
    n += (size_t)snprintf(out + n, size - n, "%s%s=%d", i ? "," : "",
                          kernels[id].param_names[i], fcl_param_get(id, cfg, i));
}

bool fcl_params_parse(fcl_kernel_id id, const char *text, void *cfg, char *why,
                      size_t why_size) {
  const fcl_kernel_desc *k = &kernels[id];
  bool seen[FCL_MAX_PARAMS] = {false};
  const char *p = text;
  while (p && *p) {
    const char *eq = strchr(p, '='), *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    if (!eq || eq > end) {
      snprintf(why, why_size, "'%.*s' is not NAME=VALUE", (int)(end - p), p);
      return false;
    }
    int i = 0;
    while (i < k->nparams && (strlen(k->param_names[i]) != (size_t)(eq - p) ||
                              strncmp(k->param_names[i], p, (size_t)(eq - p)) != 0))
      ++i;
    char *stop;
    long v = strtol(eq + 1, &stop, 10);
    if (i == k->nparams || seen[i] || stop != end || stop == eq + 1 || v < 1 ||
        v > 65536) {
      snprintf(why, why_size, "'%.*s' is not a parameter of %s", (int)(end - p), p,
               k->name);
      return false;
    }
    seen[i] = true;
    fcl_param_set(id, cfg, i, (int)v);
    p = *end ? end + 1 : end;
  }
  for (int i = 0; i < k->nparams; ++i)
    if (!seen[i]) {
      snprintf(why, why_size, "%s is missing", k->param_names[i]);
      return false;
    }
  return true;
}

bool fcl_tuning_class_valid(const fcl_tuning_class *cls) {
  const bool attn = fcl_kernel_is_attention(cls->kernel);
  const int max = attn ? FCL_MAX_HEAD_DIM : FCL_RWKV6_MAX_DIM;
  return cls->kernel >= 0 && cls->kernel < FCL_KERNEL_COUNT && cls->head_dim >= 1 &&
         cls->head_dim <= max && cls->head_dim_v >= 1 && cls->head_dim_v <= max &&
         (cls->causal == 0 || (attn && cls->causal == 1)) && cls->bucket >= 0 &&
         cls->bucket < FCL_SEQLEN_BUCKETS;
}

int fcl_seqlen_bucket(int64_t seqlen) {
  if (seqlen <= 256) return 0;
  if (seqlen <= 1024) return 1;
  if (seqlen <= 4096) return 2;
  return 3;
}

int64_t fcl_seqlen_bucket_length(int bucket) {
  static const int64_t len[FCL_SEQLEN_BUCKETS] = {256, 1024, 4096, 16384};
  return len[bucket < 0 ? 0 : bucket >= FCL_SEQLEN_BUCKETS ? FCL_SEQLEN_BUCKETS - 1 : bucket];
}

const char *fcl_dtype_name(fcl_dtype t) {
  return t == FCL_F32 ? "f32" : t == FCL_F16 ? "f16" : t == FCL_BF16 ? "bf16" : "?";
}

bool fcl_dtype_from_name(const char *s, fcl_dtype *t) {
  if (strcmp(s, "f32") == 0) *t = FCL_F32;
  else if (strcmp(s, "f16") == 0) *t = FCL_F16;
  else if (strcmp(s, "bf16") == 0) *t = FCL_BF16;
  else return false;
  return true;
}

fcl_status fcl_kernel_hash(fcl_context *ctx, fcl_kernel_id id, char hex[33]) {
  fcl_hash h;
  fcl_hash_init(&h);
  for (int i = 0; i < kernels[id].nfiles; ++i) {
    char  *text;
    size_t size;
    fcl_status s = fcl_kernel_source(ctx, kernels[id].files[i], &text, &size);
    if (s != FCL_OK) return s;
    fcl_hash_str(&h, kernels[id].files[i]);
    fcl_hash_bytes(&h, text, size);
    free(text);
  }
  snprintf(hex, 33, "%016llx%016llx", h.h[0], h.h[1]);
  return FCL_OK;
}
