/* Host reference of the KV-cache formats (DESIGN.md, "Quantized KV caches"):
 * ggml's block_q8_0 and block_q4_0, quantized as ggml's C reference does
 * (quantize_row_q8_0_ref, quantize_row_q4_0_ref: f32 arithmetic, x * id
 * and, for q4_0, x * id + 8.5f as two roundings), and OCP fp8 E4M3 ("fn")
 * and E5M2 with an f32 scale. tests/data/quant_golden.h holds the bytes of
 * independent implementations (gguf, torch) that test_quant_reference
 * compares these with. */
#ifndef FCL_REF_QUANT_H
#define FCL_REF_QUANT_H

#include "flashcl.h"

#include <stdint.h>

#define REF_QBLOCK 32      /* values a block */
#define REF_Q8_0_BYTES 34  /* f16 d, 32 x int8 */
#define REF_Q4_0_BYTES 18  /* f16 d, 16 bytes: value j low nibble, j + 16 high */

/* Whether t is one of the four KV-cache formats. */
int     ref_quant_format(fcl_dtype t);
/* Values a unit (32 for the block formats, else 1) and bytes a unit (34,
 * 18, 1; the scalar dtypes' element size), 0 for an unknown dtype. */
int64_t ref_quant_unit_values(fcl_dtype t);
size_t  ref_quant_unit_bytes(fcl_dtype t);

/* One value of a block, given the block's f32 id (1 / d, or 0): q8_0's
 * q = roundf(x * id) and q4_0's nibble min(15, (int8_t)(x * id + 8.5f)),
 * each product and sum rounded to f32 on its own. */
int ref_q8_0_q(float x, float id);
int ref_q4_0_nibble(float x, float id);

void ref_quantize_q8_0(const float x[32], uint8_t out[34]);
void ref_quantize_q4_0(const float x[32], uint8_t out[18]);
void ref_dequantize_q8_0(const uint8_t in[34], float y[32]); /* f32(d * q) */
void ref_dequantize_q4_0(const uint8_t in[18], float y[32]); /* f32(d * (nibble - 8)) */

/* f32(x / scale) rounded to nearest even, saturated to +-max (E4M3 448,
 * E5M2 57344; infinities too); NaN gives a NaN byte (0x7f, sign kept). The
 * sign of a zero or of a value that rounds to zero is kept. */
uint8_t ref_fp8_encode(float x, float scale, fcl_dtype fmt);
float   ref_fp8_decode(uint8_t b, fcl_dtype fmt); /* exact; NaN, +-inf (E5M2) */
float   ref_fp8_max(fcl_dtype fmt);

/* One head vector of n values of format fmt at src: n a multiple of 32 for
 * the block formats (n / 32 blocks one after another), n bytes for fp8,
 * whose values are f32(scale * fp8) (scale ignored by the block formats).
 * ref_quantize_vec writes what the append stores for the f32 values x. */
void ref_dequantize_vec(fcl_dtype fmt, const uint8_t *src, int64_t n, float scale, float *y);
void ref_quantize_vec(fcl_dtype fmt, const float *x, int64_t n, float scale, uint8_t *dst);
#endif
