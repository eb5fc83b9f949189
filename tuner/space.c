/* Search spaces of fa-tune: per kernel, a few axes of candidate values
 * (work-group grid, register tile per work-item, chunking), mapped to the
 * kernel's parameters. Points the device cannot run are pruned by the
 * library's own validity check before anything is built. */
#include "tune.h"

#include "attention.h"
#include "rwkv6.h"

#include <stdarg.h>
#include <string.h>

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int round_up(int a, int b) { return ceil_div(a, b) * b; }

static void axis(tune_space *sp, const char *name, int n, ...) {
  tune_axis *a = &sp->axes[sp->naxes++];
  a->name = name;
  a->n = 0;
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; ++i) {
    int v = va_arg(ap, int);
    bool dup = false;
    for (int j = 0; j < a->n; ++j) dup |= a->values[j] == v;
    if (!dup && v > 0) a->values[a->n++] = v;
  }
  va_end(ap);
}

void tune_space_init(tune_space *sp, const fcl_device_info *dev,
                     const fcl_tuning_class *cls) {
  memset(sp, 0, sizeof *sp);
  sp->kernel = cls->kernel;
  sp->cls = *cls;
  const int D = cls->head_dim;
  (void)dev;
  switch (cls->kernel) {
  case FCL_KERNEL_ATTN_FWD:
    axis(sp, "WG_ROWS", 6, 1, 2, 4, 8, 16, 32);
    axis(sp, "WG_COLS", 6, 1, 2, 4, 8, 16, 32);
    axis(sp, "ROWS_PER_ITEM", 4, 1, 2, 4, 8);
    axis(sp, "COLS_PER_ITEM", 4, 1, 2, 4, 8);
    axis(sp, "BLOCK_D", 4, D, D > 64 ? 64 : 0, D > 32 ? 32 : 0, D > 16 ? 16 : 0);
    axis(sp, "V_SLICES", 3, 1, 2, 4);
    break;
  case FCL_KERNEL_ATTN_BWD:
    axis(sp, "WG_ROWS", 6, 1, 2, 4, 8, 16, 32);
    axis(sp, "WG_COLS", 6, 1, 2, 4, 8, 16, 32);
    axis(sp, "ROWS_PER_ITEM", 4, 1, 2, 4, 8);
    axis(sp, "COLS_PER_ITEM", 4, 1, 2, 4, 8);
    axis(sp, "K_SLICES", 3, 1, 2, 4);
    break;
  case FCL_KERNEL_RWKV6_RECURRENT:
  case FCL_KERNEL_RWKV6_CHUNKED:
    axis(sp, "TC", 5, 4, 8, 16, 32, 64);
    axis(sp, "K_ROWS_PER_ITEM", 7, 1, 2, 4, 8, 16, 32, 64);
    axis(sp, "VS", 7, 1, 2, 4, 8, 16, 32, 64);
    axis(sp, "VC", 5, 1, 2, 4, 8, 16);
    if (cls->kernel == FCL_KERNEL_RWKV6_CHUNKED) axis(sp, "BVC", 5, 4, 8, 16, 32, 64);
    break;
  case FCL_KERNEL_ATTN_FWD_MMA:
    axis(sp, "WARPS", 4, 1, 2, 4, 8);
    axis(sp, "BLOCK_N", 8, 16, 32, 48, 64, 80, 96, 112, 128);
    break;
  case FCL_KERNEL_ATTN_FWD_CPU:
    axis(sp, "ROWS", 3, 4, 8, 16);
    axis(sp, "QB", 5, 1, 2, 4, 8, 16);
    axis(sp, "BLOCK_N", 5, 4, 6, 8, 12, 16);
    axis(sp, "BLOCKS_PER_CHUNK", 3, 2, 4, 8);
    axis(sp, "V_SLICES", 2, 1, 2);
    break;
  case FCL_KERNEL_RWKV6_BWD:
    axis(sp, "TC", 6, 1, 2, 4, 8, 16, 32);
    axis(sp, "BVB", 6, 1, 2, 4, 8, 16, 32);
    break;
  default:
    break;
  }
}

long tune_space_size(const tune_space *sp) {
  long n = 1;
  for (int i = 0; i < sp->naxes; ++i) n *= sp->axes[i].n;
  return n;
}

void tune_space_config(const tune_space *sp, const int *idx, void *cfg) {
  int v[TUNE_MAX_AXES];
  for (int i = 0; i < sp->naxes; ++i) v[i] = sp->axes[i].values[idx[i]];
  const fcl_tuning_class *c = &sp->cls;
  switch (sp->kernel) {
  case FCL_KERNEL_ATTN_FWD: {
    fcl_attention_fwd_config *f = cfg;
    f->wg_rows = v[0], f->wg_cols = v[1];
    f->block_m = v[0] * v[2], f->block_n = v[1] * v[3];
    f->block_d = v[4];
    f->block_dv = round_up(ceil_div(c->head_dim_v, v[5]), v[1]);
    break;
  }
  case FCL_KERNEL_ATTN_BWD: {
    fcl_attention_bwd_config *b = cfg;
    const int widest = c->head_dim > c->head_dim_v ? c->head_dim : c->head_dim_v;
    b->wg_rows = v[0], b->wg_cols = v[1];
    b->block_r = v[0] * v[2], b->block_c = v[1] * v[3];
    b->block_k = round_up(ceil_div(widest, v[4]), v[1]);
    break;
  }
  case FCL_KERNEL_RWKV6_RECURRENT:
  case FCL_KERNEL_RWKV6_CHUNKED: {
    fcl_rwkv6_fwd_config *r = cfg;
    r->tc = v[0];
    r->ks = ceil_div(c->head_dim, v[1]);
    r->vs = v[2], r->vc = v[3];
    r->bvc = sp->kernel == FCL_KERNEL_RWKV6_CHUNKED ? v[4]
             : (c->head_dim_v < 16 ? c->head_dim_v : 16);
    break;
  }
  case FCL_KERNEL_ATTN_FWD_MMA: {
    fcl_attention_mma_config *m = cfg;
    m->warps = v[0], m->block_n = v[1];
    break;
  }
  case FCL_KERNEL_ATTN_FWD_CPU: {
    fcl_attention_cpu_config *f = cfg;
    f->rows = v[0], f->qb = v[1], f->block_n = v[2];
    f->key_chunk = v[2] * v[3];
    f->block_dv = ceil_div(c->head_dim_v, v[4]);
    f->wg_size = 1;
    break;
  }
  case FCL_KERNEL_RWKV6_BWD: {
    fcl_rwkv6_bwd_config *b = cfg;
    b->tc = v[0], b->bvb = v[1];
    break;
  }
  default:
    break;
  }
}
