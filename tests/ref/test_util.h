/* Helpers shared by flashcl's tests (and fa-bench's correctness check):
 * a deterministic RNG, exact f16/bf16 rounding, strided device tensors in
 * several layouts surrounded by a poison pattern, and tolerance checks.
 *
 * Dense host arrays are double, ordered [b][s][h][d] (varlen: [tokens][h][d],
 * which is b = 1, s = tokens). This file uses only types and macros of
 * flashcl.h, never its functions, so it links without the library. */
#ifndef FCL_TEST_UTIL_H
#define FCL_TEST_UTIL_H

#include "flashcl.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- checks of the device-free tests ------------------------------------ */
/* A false cond: its place and the printf-style message, ++failures. */
#define TU_CHECK(failures, cond, ...)                \
  do {                                               \
    if (!(cond)) {                                   \
      printf("  FAIL %s:%d: ", __FILE__, __LINE__);  \
      printf(__VA_ARGS__);                           \
      printf("\n");                                  \
      ++(failures);                                  \
    }                                                \
  } while (0)

/* ---- deterministic RNG (splitmix64) ------------------------------------ */
typedef struct {
  uint64_t state;
} tu_rng;

void     tu_rng_seed(tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(tu_rng *r);
double   tu_rng_uniform(tu_rng *r);                     /* [0, 1)        */
double   tu_rng_range(tu_rng *r, double lo, double hi); /* [lo, hi)      */
int64_t  tu_rng_int(tu_rng *r, int64_t lo, int64_t hi); /* [lo, hi]      */
double   tu_rng_normal(tu_rng *r);                      /* N(0, 1)       */
void     tu_fill_uniform(tu_rng *r, double *x, size_t n, double lo, double hi);

/* Pieces of the rows of b dense blocks [n][hd]: rows [start[p], start[p] +
 * len[p]) of each block, the pieces one after the other, into dense
 * [b][length][hd] (length: the pieces' sum; a ring rank's slice). */
void tu_take_rows(const double *all, double *mine, int pieces, const int64_t *start,
                  const int64_t *len, int64_t length, int64_t b, int64_t n, int64_t hd);

/* ---- dtypes ------------------------------------------------------------ */
const char *tu_dtype_name(fcl_dtype t);
/* A dense [batch, seq, heads, dim] view of m (offset 0). */
fcl_tensor tu_dense_view(cl_mem m, fcl_dtype t, int64_t seq, int64_t heads, int64_t dim);
/* Whether every entry of words (NULL-terminated) occurs in msg as a whole
 * word: not inside a longer identifier or number (a number with a '.' may
 * be printed with trailing zeros); an entry "a|b" accepts either. missing
 * receives the entries not found. */
int tu_has_words(const char *msg, const char *const *words, char *missing,
                 size_t missing_len);
size_t      tu_dtype_size(fcl_dtype t); /* 0 for an unknown dtype */

/* Exact round-to-nearest-even of a double to the dtype's value set
 * (overflow -> +-inf, NaN stays NaN). */
double   tu_round(double x, fcl_dtype t);
void     tu_round_array(double *x, size_t n, fcl_dtype t);
uint16_t tu_f16_bits(double x);  /* rounds (RNE) and encodes              */
double   tu_f16_value(uint16_t bits);
uint16_t tu_bf16_bits(double x); /* rounds (RNE) and encodes              */
double   tu_bf16_value(uint16_t bits);
void     tu_encode(void *dst, double x, fcl_dtype t); /* rounds, stores    */
double   tu_decode(const void *src, fcl_dtype t);

/* ---- device tensors ---------------------------------------------------- */
typedef enum {
  TU_BSHD = 0,    /* contiguous [b][s][h][d]                              */
  TU_BHSD,        /* strides[1] = d, strides[2] = s*d                     */
  TU_SBHD,        /* sequence-major: strides[0] = h*d, strides[1] = b*h*d */
  TU_PADDED,      /* BSHD order with gaps after every dim                 */
  TU_PADDED_BHSD, /* BHSD order with gaps after every dim                 */
  TU_LAYOUT_COUNT
} tu_layout;
const char *tu_layout_name(tu_layout l);

#define TU_POISON_BYTE 0xFFu /* a NaN in f32, f16 and bf16 */

typedef struct {
  cl_mem     buffer; /* owned */
  size_t     bytes;  /* size of the whole buffer */
  fcl_tensor t;      /* the view handed to flashcl */
  int64_t    b, s, h, d;
  tu_layout  layout;
} tu_tensor;

/* Creates a buffer holding the dense array (may be NULL: view left poison)
 * in the given layout, starting offset_elems elements into the buffer and
 * followed by tail_elems spare elements; every byte not in the view is
 * TU_POISON_BYTE. Values are rounded to dtype. Returns 0 on success. */
int  tu_tensor_create(cl_context ctx, cl_command_queue queue, const double *dense,
                      int64_t b, int64_t s, int64_t h, int64_t d, fcl_dtype dtype,
                      tu_layout layout, size_t offset_elems, size_t tail_elems,
                      tu_tensor *out);
/* Reads the view back into dense (may be NULL) and counts bytes outside the
 * view that are no longer poison (first one reported in *first_bad, which
 * may be NULL). Returns -1 on an OpenCL error, else the count. */
long tu_tensor_read(cl_command_queue queue, const tu_tensor *t, double *dense,
                    size_t *first_bad);
void tu_tensor_release(tu_tensor *t);

/* Plain buffers. */
cl_mem tu_buffer_poison(cl_context ctx, cl_command_queue queue, size_t bytes);
cl_mem tu_buffer_from(cl_context ctx, cl_command_queue queue, const void *data,
                      size_t bytes);
int    tu_buffer_read(cl_command_queue queue, cl_mem buf, void *dst, size_t bytes);
/* n f32 values uniform in [-amp, amp] from g (NULL on failure). */
cl_mem tu_buffer_random_f32(cl_context ctx, cl_command_queue queue, tu_rng *g, size_t n,
                            double amp);
/* A malloc'd copy of the first bytes of buf (zeros where the read fails);
 * NULL only when out of memory. */
unsigned char *tu_buffer_snapshot(cl_command_queue queue, cl_mem buf, size_t bytes);
int    tu_buffer_repoison(cl_command_queue queue, cl_mem buf, size_t bytes);
/* Number of bytes in [from, to) that are not poison; -1 on error. */
long   tu_buffer_poison_left(cl_command_queue queue, cl_mem buf, size_t from,
                             size_t to, size_t *first_bad);
/* Reads an f32 buffer of n values into doubles, and reports in *bad_tail how
 * many of the tail bytes after them (tail_bytes) are no longer poison. */
int    tu_buffer_read_f32(cl_command_queue queue, cl_mem buf, double *dst, size_t n,
                          size_t tail_bytes, long *bad_tail);

/* ---- comparison -------------------------------------------------------- */
typedef struct {
  double atol; /* times max|ref| (lse: absolute) */
  double rtol; /* times |ref_i|                  */
  double abs;  /* absolute, added to both        */
} tu_tol;
tu_tol tu_tol_output(fcl_dtype t); /* for o in dtype t                 */
tu_tol tu_tol_lse(void);           /* lse is f32 for every dtype       */
/* The f32 error of the logits themselves grows with their magnitude: a
 * correct kernel computes s with an absolute error of a few units of
 * 2^-24 * logit_bound, where logit_bound bounds scale * sum|q_c k_c| +
 * |alibi bias| (ref_attention_logit_bound). We allow 8 units (PoCL's
 * kernel measures at most 1.5 for o and 3.5 for lse over 1,600 random
 * cases). That error moves o by up to twice it times max|v|, and lse by it.
 * These add the term to a tolerance; they never loosen the dtype terms. */
/* Attention gradients, relative to max|ref| of each gradient tensor. */
tu_tol tu_tol_grad(fcl_dtype t);
/* RWKV6 outputs and gradients in dtype t, relative to max|ref|; and the
 * f32 states (ht, dh0). */
tu_tol tu_tol_rwkv6(fcl_dtype t);
tu_tol tu_tol_rwkv6_state(void);
double tu_logit_error(double logit_bound, int64_t head_dim);
tu_tol tu_tol_with_logits(tu_tol t, double logit_bound, int64_t head_dim, double vmax);

typedef struct {
  int    ok;
  size_t n_bad;
  size_t worst;      /* index of the element with the worst err/allowed */
  double worst_got, worst_ref, worst_err, worst_allowed;
  double max_err;    /* max |got - ref| over finite pairs              */
  double ref_max;    /* max |ref| over finite refs                      */
  double worst_ratio; /* worst err / allowed (<= 1 passes; inf for NaN) */
} tu_cmp;

/* Compares element-wise: |got - ref| <= atol*max|ref| + rtol*|ref|; NaN
 * never passes; infinities must match exactly. lse_style uses absolute
 * atol (not scaled by max|ref|). */
tu_cmp tu_compare(const double *got, const double *ref, size_t n, tu_tol tol,
                  int lse_style);
/* Prints "what: worst [coords] got .. ref .. err .. allowed .." for a failed
 * (or, with verbose, any) comparison. dims: up to 4 extents (row-major) for
 * coordinates; ndims 0 prints the flat index. */
void   tu_print_cmp(const char *what, const tu_cmp *c, const int64_t *dims, int ndims);

/* Seconds from a monotonic clock. */
double tu_now(void);
/* Prints the OpenCL error and returns nonzero if err != CL_SUCCESS. */
int    tu_cl_check(cl_int err, const char *what);

#endif
