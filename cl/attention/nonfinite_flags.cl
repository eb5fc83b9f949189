/* requires: common/dtype.cl */
/* Which heads hold an inf or NaN, for the tensor-core kernels (prepend
 * dtype.cl). Their masked products multiply exact zeros by the other
 * operand, and 0 * inf is NaN (mma_common.cl, "Non-finite operands"); the
 * handling of that costs the kernels registers, and so work-groups an SM
 * (docs/defaults.md), even where it never runs. So each is built twice
 * (FCL_NONFINITE 0 and 1), both are
 * launched, and each work-group runs in the one that its head's flag
 * chooses; this kernel sets the flags first, reading each tensor once.
 *
 * Work-item (r chunks + c, h) reads chunk c (NF_VEC: 16 bytes, else one
 * element) of row r, head h of a tensor of rows x heads x dim (rows: batch x seq,
 * or tokens when varlen; strides in elements): neighbours read neighbouring
 * bytes. A head h with an inf or NaN sets flags[h / group] to 1 (the buffer
 * is zeroed before). */
#if FCL_DTYPE == 0
#define NF_EXP 0x7f800000u
#define NF_PER 4
typedef uint nf_bits;
typedef uint4 nf_vec;
#define NF_LOAD vload4
#elif FCL_DTYPE == 1
#define NF_EXP 0x7c00u
#define NF_PER 8
typedef ushort nf_bits;
typedef ushort8 nf_vec;
#define NF_LOAD vload8
#else
#define NF_EXP 0x7f80u
#define NF_PER 8
typedef ushort nf_bits;
typedef ushort8 nf_vec;
#define NF_LOAD vload8
#endif
#ifndef NF_VEC
#define NF_VEC 0
#endif

__kernel void fcl_nonfinite_flags(const __global nf_bits *x, long off, long sb, long ss,
                                  long sh, int seqlen, int rows, int heads, int dim,
                                  int group, __global int *flags) {
  const int chunks = NF_VEC ? dim / NF_PER : dim;
  const long id = get_global_id(0), r = id / chunks;
  const int c = (int)(id - r * chunks), h = get_global_id(1);
  if (r >= rows) return;
  const long at = off + (r / seqlen) * sb + (r % seqlen) * ss + (long)h * sh;
#if NF_VEC /* at and dim multiples of NF_PER */
  if (c * NF_PER >= dim) return;
  const nf_vec e = (nf_vec)(NF_EXP);
  if (any((NF_LOAD(0, x + at + c * NF_PER) & e) == e)) flags[h / group] = 1;
#else
  if (c >= dim) return;
  if ((x[at + c] & NF_EXP) == NF_EXP) flags[h / group] = 1;
#endif
}
