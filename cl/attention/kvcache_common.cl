/* requires: attention/attention_common.cl */
/* What the KV-cache kernels share (prepend attention_abi.h, dtype.cl and
 * attention_common.cl): where a sequence's tokens and cache live, with every
 * device-side index checked, the rotary embedding, and vector loads.
 *
 * Device-side indices come from the caller's buffers (cache_seqlens,
 * cache_batch_idx, block_table, cu_seqlens_q). Out of range they are
 * clamped or the position is skipped: nothing outside a buffer is read or
 * written, and what is computed is unspecified (DESIGN.md). */

/* The fields of a kernel's scalar struct argument kv_args_ (attention_abi.h)
 * as constants of their names: a list's L, I and F. */
#define KV_UNPACK_L_(n) const long n = kv_args_.n;
#define KV_UNPACK_I_(n) const int n = kv_args_.n;
#define KV_UNPACK_F_(n) const float n = kv_args_.n;

/* n / d for 0 <= n < 2^31, where d is one of the decode's run-time
 * divisors (group, heads_kv, page_size, min_split_keys), by the
 * multiplier and shift the host found for it (kvcache_decode.c,
 * fastdiv): a multiply-high, an add and a shift. A division by a run-time
 * value is about twenty instructions in one dependent chain, and a decode
 * of a short context runs one warp a scheduler, so the chains are its
 * time. KV_MOD is n % d. */
#define KV_DIV(n, d) ((int)((mul_hi((uint)(n), (uint)d##_mul) + (uint)(n)) >> d##_shift))
#define KV_MOD(n, d) ((n) - KV_DIV(n, d) * (d))
/* Declares t and h, the token and query head of row g of a GQA-packed
 * tile of kv head hk: row g is token g / group of query head
 * hk * group + g % group. */
#define KV_ROW_TOKEN_HEAD(g, t, h) const int t = KV_DIV(g, group), h = hk * group + (g) - t * group

/* One sequence of a KV-cache call. */
typedef struct {
  int  c;    /* cached tokens before the call, in [0, capacity]          */
  int  n;    /* new tokens (queries)                                     */
  int  sk;   /* keys: c + n with an append (at most capacity), else c    */
  int  diag; /* sk - n: query t sits at key position t + diag            */
  long tok0; /* varlen: index of the first new token; else -1            */
  long row;  /* contiguous cache: the cache row; -1 when out of range    */
} kv_seq;

inline kv_seq kv_seq_info(int b, int kv_flags, int flags, const __global int *cache_seqlens,
                          const __global int *batch_idx, const __global int *cu_q,
                          int seqlen_q, int capacity, int cache_batch, int fixed_len,
                          long q_tokens) {
  kv_seq s;
  int c = (kv_flags & FCL_KV_FIXED_LEN) ? fixed_len : cache_seqlens[b];
  s.c = clamp(c, 0, capacity);
  s.n = seqlen_q;
  s.tok0 = -1;
  if (flags & FCL_ATTN_VARLEN) {
    const int t0 = cu_q[b], t1 = cu_q[b + 1];
    const bool ok = t0 >= 0 && t1 >= t0 && (long)t1 <= q_tokens && t1 - t0 <= seqlen_q;
    s.n = ok ? t1 - t0 : 0;
    s.tok0 = ok ? t0 : 0;
  }
  s.row = b;
  if (kv_flags & FCL_KV_BATCH_IDX) s.row = batch_idx[b];
  if (!(kv_flags & FCL_KV_PAGED) && (s.row < 0 || s.row >= cache_batch)) {
    s.row = -1;
    s.c = 0; /* no cache to read, and none to append to */
  }
  s.sk = s.c;
  if ((kv_flags & FCL_KV_APPEND) && s.row >= 0) s.sk = min(s.c + s.n, capacity);
  s.diag = s.sk - s.n;
  return s;
}

/* Element offset of token t's head h in a (batch, token, head, dim) view. */
inline long kv_token_index(const kv_seq *s, int b, int t, int h, long off, long sb, long ss,
                           long sh) {
  return off + (s->tok0 >= 0 ? (s->tok0 + t) * ss : (long)b * sb + (long)t * ss) +
         (long)h * sh;
}

/* Element offset of cache position pos (< capacity) of sequence b, before
 * the head: the page's slot, or the cache row's token; -1 when the page id
 * is out of range. */
inline long kv_cache_index(const kv_seq *s, int b, int pos, int kv_flags,
                           const __global int *block_table, int pages_per_seq, int num_pages,
                           int page_size, long off, long sb, long ss) {
  if (kv_flags & FCL_KV_PAGED) {
    const int page = block_table[(long)b * pages_per_seq + pos / page_size];
    if (page < 0 || page >= num_pages) return -1;
    return off + (long)page * sb + (long)(pos % page_size) * ss;
  }
  return s->row < 0 ? -1 : off + s->row * sb + (long)pos * ss;
}

/* Element offset of cache position pos before the head, given its page id
 * and its slot in that page, pos % page_size (paged; read ahead by the
 * caller, page -1 when out of range), or the cache row (contiguous); -1
 * where there is nothing to read. The decode kernels find the slot once a
 * key (or a 16-key step) rather than once a load: a division by a
 * run-time page size costs tens of instructions, and the portable
 * kernel's f32 loads are as many as its multiply-adds. */
inline long kv_slot_index_at(const kv_seq *s, int pos, int page, int slot, int kv_flags,
                             long off, long sb, long ss) {
  if (kv_flags & FCL_KV_PAGED) return page < 0 ? -1 : off + (long)page * sb + (long)slot * ss;
  return s->row < 0 ? -1 : off + s->row * sb + (long)pos * ss;
}

/* Rotary embedding of element d of a vector x (read through get), at table
 * row pos: the pair (a, b) becomes (a cos - b sin, b cos + a sin). */
inline float kv_rotate(float xd, float partner, int d, int pos, int rotary_dim,
                       int kv_flags, const __global float *rcos, const __global float *rsin) {
  const int half_rd = rotary_dim / 2;
  const bool inter = (kv_flags & FCL_KV_INTERLEAVED) != 0;
  const int j = inter ? d / 2 : (d < half_rd ? d : d - half_rd);
  const bool first = inter ? (d & 1) == 0 : d < half_rd;
  const float cs = rcos[(long)pos * half_rd + j], sn = rsin[(long)pos * half_rd + j];
  return first ? xd * cs - partner * sn : xd * cs + partner * sn;
}
/* The index of d's partner in its rotary pair. */
inline int kv_partner(int d, int rotary_dim, int kv_flags) {
  if (kv_flags & FCL_KV_INTERLEAVED) return d ^ 1;
  const int half_rd = rotary_dim / 2;
  return d < half_rd ? d + half_rd : d - half_rd;
}
/* Whether element d of token position pos is rotated (in range of the
 * table; positions past it are left alone). */
inline bool kv_rotates(int d, int pos, int kv_flags, int rotary_dim, int rotary_positions) {
  return (kv_flags & FCL_KV_ROTARY) && d < rotary_dim && pos < rotary_positions;
}

/* Raw loads of VEC elements from p[i] (i a multiple of VEC; 16-byte
 * aligned when VEC elements are 16 bytes: the host picks VEC from the
 * views' alignment), kept as loaded so that a prefetch does not wait for
 * them, and their conversion to f32 when used. The conversion reads vector
 * components (constants once the loops unroll): taking a raw vector's
 * address instead would put it in stack memory. */
#ifndef VEC
#define VEC 1
#endif
#if FCL_DTYPE == 0
#if VEC == 4
typedef float4 kv_raw;
#define KV_ELEM(r, e) ((e) == 0 ? (r).s0 : (e) == 1 ? (r).s1 : (e) == 2 ? (r).s2 : (r).s3)
#elif VEC == 2
typedef float2 kv_raw;
#define KV_ELEM(r, e) ((e) == 0 ? (r).s0 : (r).s1)
#else
typedef float kv_raw;
#define KV_ELEM(r, e) (r)
#endif
#else /* 16-bit: two elements a 32-bit word */
#if VEC == 8
typedef uint4 kv_raw;
#define KV_WORD(r, w) ((w) == 0 ? (r).s0 : (w) == 1 ? (r).s1 : (w) == 2 ? (r).s2 : (r).s3)
#elif VEC == 4
typedef uint2 kv_raw;
#define KV_WORD(r, w) ((w) == 0 ? (r).s0 : (r).s1)
#elif VEC == 2
typedef uint kv_raw;
#define KV_WORD(r, w) (r)
#else
typedef ushort kv_raw;
#define KV_WORD(r, w) ((uint)(r))
#endif
#define KV_BITS(r, e) ((KV_WORD(r, (e) / 2) >> (16 * ((e) & 1))) & 0xffffu)
#if FCL_DTYPE == 1
#define KV_ELEM(r, e) fcl_f16_bits_to_f32((ushort)KV_BITS(r, e))
#else
#define KV_ELEM(r, e) fcl_bf16_to_f32((ushort)KV_BITS(r, e))
#endif
#endif
#if FCL_DTYPE == 1 && VEC >= 2 && defined(KV_PTX_CVT) && KV_PTX_CVT
/* NVIDIA: the hardware's f16 conversion, two halves of a word at a time
 * (KV_PTX_CVT is set where the tensor-core probe found inline PTX works). */
#ifndef FCL_ASM
#define FCL_ASM asm
#endif
inline float2 kv_f16x2(uint w) {
  float lo, hi;
  FCL_ASM("{.reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h;}"
          : "=f"(lo), "=f"(hi) : "r"(w));
  return (float2)(lo, hi);
}
#define KV_CONVERT(x, r)                                                          \
  do {                                                                            \
    FCL_UNROLL for (int w_ = 0; w_ < VEC / 2; ++w_) {                             \
      const float2 f_ = kv_f16x2(KV_WORD(r, w_));                                 \
      (x)[2 * w_] = f_.s0;                                                        \
      (x)[2 * w_ + 1] = f_.s1;                                                    \
    }                                                                             \
  } while (0)
#else
#define KV_CONVERT(x, r)                                                          \
  do {                                                                            \
    FCL_UNROLL for (int e_ = 0; e_ < VEC; ++e_) (x)[e_] = KV_ELEM(r, e_);         \
  } while (0)
#endif
#define KV_LOAD_RAW(p, i) (*(const __global kv_raw *)((const __global fcl_elem *)(p) + (i)))
