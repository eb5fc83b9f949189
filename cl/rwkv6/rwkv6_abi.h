/* The contract between the RWKV6 kernels and the host code that launches
 * them, included by both (OpenCL C: it is the first file of every RWKV6
 * program; C: src/rwkv6/). Change it here, never in one side. */
#ifndef FCL_RWKV6_ABI_H
#define FCL_RWKV6_ABI_H

/* Bits of the kernels' `flags` argument. */
#define RW_H0 1           /* an initial state (or a carried one) is read   */
#define RW_HT 2           /* the final state (or one to carry) is written  */
#define RW_VARLEN 4       /* cu_seqlens gives the sequences                */
#define RW_REVERSE 8      /* time runs from the last step to the first     */
#define RW_DHT 64         /* backward: a final-state gradient is read      */
#define RW_DH0 128        /* backward: the initial-state gradient is written */
#define RW_ACCUMULATE 256 /* add to the du partials of an earlier segment  */
#define RW_STATE_GRAD 512 /* chunked: the pass of the state's gradient (reverse over
                             chunks, from dht) and the products that follow it */
#define RW_ALIGNED 1024   /* chunked: every row of every operand starts at
                             a multiple of 16 bytes (vector loads, cp.async) */
#define RW_SEG_ENDS 2048  /* chunked state pass in segments side by side:
                             each segment's own update and total decay, no
                             checkpoints (the launch after folds them in) */

/* Positions one launch of the step kernel (rwkv6_step.cl) takes at most:
 * it keeps an output row per position in registers. */
#define RW_STEP_MAX_T 4

/* The chunked backward's du kernel (fcl_rwkv6_chunk_du): keys a work-group,
 * and at most this many parts of RW_DU_KEYS work-items each. */
#define RW_DU_KEYS 16
#define RW_DU_PARTS 16

#endif
