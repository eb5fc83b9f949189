/* Per-head inf/NaN flags for the tensor-core kernels (cl/nonfinite_flags.cl
 * says why): each of those kernels is built without (FCL_NONFINITE=0) and
 * with (=1) the handling of non-finite operands of masked products, and
 * both are launched after the flags. In the backward a work-group runs in
 * the build its head's flag chooses; the forwards' build without runs every
 * tile and lists those the other must redo (cl/attention/attention_common.cl,
 * MMA_FWD_WORK): the tiles of flagged heads (3xTF32's scans) and those whose
 * output came out NaN. Flags and list live in scratch slot 5. */
#include "attention/attention.h"

#include <stdio.h>

fcl_status fcl_nonfinite_kernel(fcl_context *ctx, fcl_dtype dtype, cl_kernel out[2]) {
  fcl_status s = FCL_OK;
  for (int vec = 0; vec < 2 && s == FCL_OK; ++vec) {
    char opts[48];
    snprintf(opts, sizeof opts, "-DFCL_DTYPE=%d -DNF_VEC=%d", (int)dtype, vec);
    s = fcl_get_kernel(ctx, FCL_TOPS("attention/nonfinite_flags.cl"), opts,
                       "fcl_nonfinite_flags", &out[vec]);
  }
  return s;
}

/* rows of a tensor given to fcl_nonfinite_flags: padded (batch, seqlen) or
 * varlen tokens (total rows, one "sequence"). */
static fcl_status scan_one(fcl_context *ctx, const cl_kernel kern[2], const fcl_nf_input *in,
                           cl_mem flags) {
  /* 16-byte loads where every row and head starts on 16 bytes */
  const size_t es = fcl_dtype_size(in->t->dtype);
  const int64_t per = 16 / (int64_t)es;
  const int vec = in->dim % per == 0 && fcl_tensor_aligned(in->t, es, in->varlen, per);
  const cl_kernel k = kern[vec];
  const cl_int seqlen = (cl_int)(in->varlen ? in->rows : in->seqlen);
  const cl_int rows = (cl_int)in->rows, heads = (cl_int)in->heads, dim = (cl_int)in->dim;
  const cl_int group = (cl_int)in->group;
  fcl_args a = FCL_ARGS(k);
  FCL_ARG(&a, in->t->buffer);
  fcl_arg_tensor(&a, in->t);
  FCL_ARG(&a, seqlen); FCL_ARG(&a, rows); FCL_ARG(&a, heads); FCL_ARG(&a, dim);
  FCL_ARG(&a, group); FCL_ARG(&a, flags);
  /* Work-groups of whole rows, about 256 work-items (the runtime's own
   * choice was a few work-items a group on NVIDIA, many times slower:
   * docs/defaults.md); rows and
   * chunks share dimension 0, whose work-group size limit is the largest.
   * The kernel skips work-items past the last row. */
  const size_t chunks = (size_t)(vec ? dim / per : dim);
  const size_t cap = ctx->info.max_wg < 256 ? ctx->info.max_wg : 256;
  const size_t nrows = chunks <= cap ? cap / chunks : 1;
  size_t global[3] = {((size_t)rows + nrows - 1) / nrows * nrows * chunks, (size_t)heads, 1};
  size_t local[3] = {nrows * chunks, 1, 1};
  if (chunks > cap) /* a scalar scan of a row of more than cap elements */
    return fcl_launch(ctx, k, &a, global, NULL, "enqueueing the non-finite scan");
  return fcl_launch(ctx, k, &a, global, local, "enqueueing the non-finite scan");
}

fcl_status fcl_nonfinite_flags(fcl_context *ctx, const cl_kernel k[2], const fcl_nf_input *in, int nin,
                               int nflags, size_t list, cl_mem *flags) {
  /* flags, then (forwards) the count of listed tiles and their pairs */
  const size_t zeroed = (size_t)nflags + (list ? 1 : 0);
  fcl_status s = fcl_scratch(ctx, 5, (zeroed + 2 * list) * sizeof(cl_int), flags);
  if (s || (s = fcl_enqueue_zero(ctx, *flags, zeroed * sizeof(cl_int),
                                 "clearing the non-finite flags")))
    return s;
  for (int i = 0; i < nin && s == FCL_OK; ++i) s = scan_one(ctx, k, &in[i], *flags);
  return s;
}

fcl_status fcl_attention_fwd_nf_run(fcl_context *ctx, const fcl_attention_problem *p,
                                    const cl_kernel kern[2], const cl_kernel scan[2],
                                    const fcl_nf_input *in, int nin, const size_t global[3],
                                    const size_t local[3], const char *what) {
  const size_t tiles = global[0] / local[0] * global[2];
  /* The listed tiles are few (inf or NaN in masked products): two
   * work-groups an SM take them in turn. */
  const size_t redo = tiles < 2 * (size_t)ctx->info.compute_units
                          ? tiles
                          : 2 * (size_t)ctx->info.compute_units;
  const size_t global1[3] = {(redo ? redo : 1) * local[0], 1, 1};
  cl_mem work;
  fcl_status s = fcl_nonfinite_flags(ctx, scan, in, nin, (int)p->d->heads_kv, tiles, &work);
  for (int nf = 0; nf < 2 && s == FCL_OK; ++nf) {
    fcl_args a = FCL_ARGS(kern[nf]);
    fcl_attention_fwd_args(&a, p, fcl_attention_flags(p));
    FCL_ARG(&a, work);
    s = fcl_launch(ctx, kern[nf], &a, nf ? global1 : global, local, what);
  }
  return s;
}
