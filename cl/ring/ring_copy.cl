/* requires: common/dtype.cl */
/* flashcl_mpi's copies (prepend common/dtype.cl, built per FCL_DTYPE):
 * between a strided view (batch, seq, head, dim) of the tensors and dense
 * [batch][seq][head][dim] staging (a piece of it: an offset and the batch
 * stride of the whole), in the dtype or into f32 accumulators. One
 * work-item an element: global (nhd = heads * dim rounded up to the fixed
 * work-group size, seq, batch). A fixed size, not the driver's choice:
 * PoCL compiles a kernel again for every work-group size it picks. */

#define RING_VIEW(n) long n##_off, long n##_sb, long n##_ss, long n##_sh
#define RING_AT(n) (n##_off + (long)get_global_id(2) * n##_sb + \
                    (long)get_global_id(1) * n##_ss + (long)(hd / nd) * n##_sh + hd % nd)
/* Dense staging: batch stride sb, rows of heads * dim elements. */
#define RING_DENSE(off, sb) ((off) + (long)get_global_id(2) * (sb) + \
                             (long)get_global_id(1) * (long)nhd + hd)

/* dst (dense, dtype) = the view src: the bits, unconverted. */
__kernel void fcl_ring_pack(__global fcl_raw *dst, long dst_off, long dst_sb, const __global fcl_raw *src,
                            RING_VIEW(s), int nd, int nhd) {
  const int hd = get_global_id(0);
  if (hd >= nhd) return;
  dst[RING_DENSE(dst_off, dst_sb)] = src[RING_AT(s)];
}

/* acc (dense f32) = (first ? 0 : acc) + the view src. */
__kernel void fcl_ring_add(__global float *acc, long acc_off, long acc_sb, const __global fcl_elem *src,
                           RING_VIEW(s), int nd, int nhd, int first) {
  const int hd = get_global_id(0);
  if (hd >= nhd) return;
  const long a = RING_DENSE(acc_off, acc_sb);
  const float x = FCL_LOAD(src, RING_AT(s));
  acc[a] = first ? x : acc[a] + x;
}

/* The view dst = acc (dense f32), rounded to the dtype. */
__kernel void fcl_ring_store(__global fcl_elem *dst, RING_VIEW(d), const __global float *acc,
                             long acc_off, long acc_sb, int nd, int nhd) {
  const int hd = get_global_id(0);
  if (hd >= nhd) return;
  FCL_STORE(dst, RING_AT(d), acc[RING_DENSE(acc_off, acc_sb)]);
}

/* a += b, f32, n elements. */
__kernel void fcl_ring_sum(__global float *a, const __global float *b, long n) {
  const long i = get_global_id(0);
  if (i < n) a[i] += b[i];
}
