/* Decoding of fuzz inputs into flashcl descriptors and tensor views
 * (fuzz_api.c). Reads past the end of the input give zeros. */
#ifndef FCL_FUZZ_DECODE_H
#define FCL_FUZZ_DECODE_H

#include "flashcl.h"

#include <stddef.h>
#include <stdint.h>

#define FZ_NBUF 7     /* pool buffers: 1 B .. 4 MiB              */
#define FZ_NULL 100   /* buffer index: NULL                      */
#define FZ_FOREIGN 101 /* buffer index: from another OpenCL context */
#define FZ_MAX_CU 16  /* longest cu_seqlens: batch <= 16 when varlen */

typedef struct {
  const uint8_t *p;
  size_t         n;
} fz_reader;

uint8_t fz_u8(fz_reader *r);
void    fz_string(fz_reader *r, char *out, size_t cap);

typedef struct {
  fcl_attention_desc desc;   /* alibi, cu_seqlens left NULL          */
  fcl_tensor t[8];           /* q k v o dout dq dk dv; buffer NULL    */
  int        tbuf[8];        /* buffer index of each view             */
  int        tnull[8];       /* pass a NULL view                      */
  int        lse, alibi;     /* buffer indices                        */
  int        varlen, cu_null[2];
  int32_t    cu_q[FZ_MAX_CU + 1], cu_k[FZ_MAX_CU + 1];
} fz_attention;

typedef struct {
  fcl_rwkv6_desc desc;       /* cu_seqlens left NULL                  */
  fcl_tensor t[10];          /* forward: r k v w o; backward: r k v w dout dr dk dv dw */
  int        tbuf[10], tnull[10];
  int        side[6];        /* u h0 ht dht du dh0: buffer indices    */
  int        varlen;
  int32_t    cu[FZ_MAX_CU + 1];
} fz_rwkv6;

void fz_decode_attention(fz_reader *r, fz_attention *a, int backward);
void fz_decode_rwkv6(fz_reader *r, fz_rwkv6 *a, int backward);
#endif
