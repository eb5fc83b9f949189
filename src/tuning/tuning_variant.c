/* What every variant shares: the text form of its parameters, the build
 * options of a configuration, the hash of its sources, and the classes
 * and buckets of problems. */
#include "tuning/tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fcl_params_format(const fcl_variant *v, const fcl_config *cfg, char *out, size_t size) {
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; i < v->nparams && n < size; ++i)
    n += (size_t)snprintf(out + n, size - n, "%s%s=%d", i ? "," : "", v->params[i], cfg->v[i]);
}

bool fcl_params_parse(const fcl_variant *v, const char *text, fcl_config *cfg, char *why,
                      size_t why_size) {
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
    while (i < v->nparams && (strlen(v->params[i]) != (size_t)(eq - p) ||
                              strncmp(v->params[i], p, (size_t)(eq - p)) != 0))
      ++i;
    char *stop;
    long x = strtol(eq + 1, &stop, 10);
    if (i == v->nparams || seen[i] || stop != end || stop == eq + 1 || x < 1 || x > 65536) {
      snprintf(why, why_size, "'%.*s' is not a parameter of %s", (int)(end - p), p, v->name);
      return false;
    }
    seen[i] = true;
    cfg->v[i] = (int)x;
    p = *end ? end + 1 : end;
  }
  for (int i = 0; i < v->nparams; ++i)
    if (!seen[i]) {
      snprintf(why, why_size, "%s is missing", v->params[i]);
      return false;
    }
  return true;
}

void fcl_build_options(const fcl_tuning_class *c, const fcl_config *cfg, const fcl_define *extra,
                       int n, const char *tail, char *out, size_t size) {
  const fcl_variant *v = c->variant;
  size_t k = (size_t)snprintf(out, size, "-DFCL_DTYPE=%d -D%s=%d -D%s=%d", (int)c->dtype,
                              v->dim_macros[0], c->head_dim, v->dim_macros[1], c->head_dim_v);
  for (int i = 0; i < v->nparams && k < size; ++i)
    if (!(v->host_params >> i & 1u))
      k += (size_t)snprintf(out + k, size - k, " -D%s=%d", v->params[i], cfg->v[i]);
  for (int i = 0; i < n && k < size; ++i)
    k += (size_t)snprintf(out + k, size - k, " -D%s=%d", extra[i].name, extra[i].value);
  if (tail && *tail && k < size) snprintf(out + k, size - k, " %s", tail);
}

fcl_status fcl_variant_hash(fcl_context *ctx, const fcl_variant *v, char hex[33]) {
  fcl_hash h;
  fcl_hash_init(&h);
  fcl_sources src;
  fcl_status  s = fcl_sources_read(ctx, v->tops, &src);
  if (s != FCL_OK) return s;
  for (int i = 0; i < src.n; ++i) {
    fcl_hash_str(&h, src.names[i]);
    fcl_hash_bytes(&h, src.texts[i], src.sizes[i]);
  }
  fcl_sources_free(&src);
  snprintf(hex, 33, "%016llx%016llx", h.h[0], h.h[1]);
  return FCL_OK;
}

bool fcl_whole_warps(const fcl_device_info *dev, size_t wg) {
  const size_t pm = dev->preferred_multiple;
  return wg == 0 || pm <= 1 || pm > 64 || wg % pm == 0;
}

bool fcl_tuning_class_valid(const fcl_tuning_class *c) {
  const fcl_variant *v = c->variant;
  return v && c->head_dim >= 1 && c->head_dim <= v->max_dim && c->head_dim_v >= 1 &&
         c->head_dim_v <= v->max_dim && (c->causal == 0 || (v->causal_classes && c->causal == 1)) &&
         c->bucket >= 0 && c->bucket < FCL_SEQLEN_BUCKETS &&
         (c->dtype == FCL_F32 || c->dtype == FCL_F16 || c->dtype == FCL_BF16);
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

bool fcl_dtype_from_name(const char *s, fcl_dtype *t) {
  for (int i = FCL_F32; i <= FCL_FP8_E5M2; ++i)
    if (strcmp(s, fcl_dtype_name((fcl_dtype)i)) == 0) {
      *t = (fcl_dtype)i;
      return true;
    }
  return false;
}

void fcl_config_info_fill(fcl_config_info *out, const fcl_tuning_class *cls,
                          const fcl_config *cfg, const char *from) {
  snprintf(out->kernel, sizeof out->kernel, "%s", cls->variant->name);
  fcl_params_format(cls->variant, cfg, out->params, sizeof out->params);
  snprintf(out->source, sizeof out->source, "%s", from);
}
