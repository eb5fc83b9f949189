/* The contract between the RWKV7 kernels and the host code that launches
 * them, included by both (OpenCL C: through rwkv7_common.cl; C:
 * src/rwkv7/). The flags of rwkv6_abi.h (RW_H0, RW_HT, RW_VARLEN,
 * RW_REVERSE, RW_DHT, RW_DH0) mean the same here; these are RWKV7's own. */
#ifndef FCL_RWKV7_ABI_H
#define FCL_RWKV7_ABI_H

/* The forward kernel as the backward's first pass: no output, the state
 * before every chunk stored as a checkpoint. */
#define RW7_CKPT 4096

/* The backward's partial gradients summed over column blocks
 * (fcl_rwkv7_bwd_finish): slices of its scratch buffer, in this order. */
#define RW7_DR 0
#define RW7_DW 1
#define RW7_DK 2
#define RW7_DA 3
#define RW7_DB 4
#define RW7_NPART 5

#endif
