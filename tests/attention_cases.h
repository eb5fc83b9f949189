/* The attention shapes of the forward suite (test_attention_forward.c) and
 * the backward suite (test_attention_backward.c), written once. Columns
 * .fwd and .bwd are the dtypes each suite runs a shape in (0: that suite
 * does not run it); the backward suite runs the forward first and checks
 * it as the forward suite does (op_attention_case.c). Layouts of dout, dq,
 * dk and dv matter to the backward only; lse=NULL (.no_lse) to the forward
 * only. d = dv = 64 unless given. Every case uses its dtype's tolerances
 * (.tol = OH_TOL_DTYPE). */
#ifndef FCL_ATTENTION_CASES_H
#define FCL_ATTENTION_CASES_H

#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DT_ALL OH_ALL_DT
#define DT_F32 OH_DT(FCL_F32)
#define DT_F16 OH_DT(FCL_F16)
#define DT_BF16 OH_DT(FCL_BF16)
#define ALL_VIEWS(l) .lq = l, .lk = l, .lv = l, .lo = l, .ldo = l, .ldq = l, .ldk = l, .ldv = l
#define BOTH .fwd = DT_ALL, .bwd = DT_ALL
#define FWD .fwd = DT_ALL
#define BWD .bwd = DT_ALL
#define F(...) {__VA_ARGS__}

/* Features, in every dtype. */
static const oh_attention_case attention_feature_cases[] = {
  F(.name = "seqlen 1", BOTH, .b = 1, .sq = 1, .sk = 1, .hq = 1, .hkv = 1),
  F(.name = "decode sq1 causal", BOTH, .b = 2, .sq = 1, .sk = 17, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "odd 3x3", FWD, .b = 2, .sq = 3, .sk = 3, .hq = 3, .hkv = 3),
  F(.name = "odd 3x5", BWD, .b = 2, .sq = 3, .sk = 5, .hq = 3, .hkv = 3),
  F(.name = "odd 17 causal", BOTH, .b = 1, .sq = 17, .sk = 17, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "sq<sk 63x65", BOTH, .b = 1, .sq = 63, .sk = 65, .hq = 2, .hkv = 2),
  F(.name = "sq>sk causal 65x63", BOTH, .b = 1, .sq = 65, .sk = 63, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "sq>sk causal 150x70 empty rows", BWD, .b = 2, .sq = 150, .sk = 70, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "sq<sk causal 100x230", BWD, .b = 1, .sq = 100, .sk = 230, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "127 batch 2", BOTH, .b = 2, .sq = 127, .sk = 127, .hq = 2, .hkv = 2),
  F(.name = "sq<sk causal 200x333", FWD, .b = 1, .sq = 200, .sk = 333, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "sq>sk causal 333x200", FWD, .b = 1, .sq = 333, .sk = 200, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "333 non-causal", FWD, .b = 1, .sq = 333, .sk = 333, .hq = 1, .hkv = 1),
  F(.name = "window left", FWD, .b = 1, .sq = 200, .sk = 200, .hq = 1, .hkv = 1, .win = 1, .wl = 17, .wr = -1),
  F(.name = "window left 17 causal", BWD, .b = 1, .sq = 200, .sk = 200, .hq = 1, .hkv = 1, .causal = 1, .win = 1, .wl = 17, .wr = -1),
  F(.name = "window right", BOTH, .b = 1, .sq = 127, .sk = 127, .hq = 2, .hkv = 2, .win = 1, .wl = -1, .wr = 5),
  F(.name = "window both sq<sk", BOTH, .b = 1, .sq = 150, .sk = 170, .hq = 1, .hkv = 1, .win = 1, .wl = 32, .wr = 7),
  F(.name = "window left 40 causal", FWD, .b = 1, .sq = 200, .sk = 200, .hq = 1, .hkv = 1, .causal = 1, .win = 1, .wl = 40, .wr = -1),
  F(.name = "window both causal", FWD, .b = 2, .sq = 100, .sk = 130, .hq = 1, .hkv = 1, .causal = 1, .win = 1, .wl = 9, .wr = 3),
  F(.name = "window right causal", FWD, .b = 1, .sq = 65, .sk = 65, .hq = 2, .hkv = 2, .causal = 1, .win = 1, .wl = -1, .wr = 10),
  F(.name = "window diagonal only", BOTH, .b = 1, .sq = 65, .sk = 65, .hq = 2, .hkv = 2, .win = 1, .wl = 0, .wr = 0),
  F(.name = "window sq>sk empty rows", BOTH, .b = 1, .sq = 90, .sk = 40, .hq = 2, .hkv = 2, .win = 1, .wl = 5, .wr = 5),
  F(.name = "window causal unseen keys", BWD, .b = 1, .sq = 40, .sk = 150, .hq = 2, .hkv = 1, .causal = 1, .win = 1, .wl = 20, .wr = -1),
  F(.name = "negative scale softcap", BWD, .b = 1, .sq = 40, .sk = 50, .hq = 2, .hkv = 1, .scale = -0.3f, .softcap = 2.0f),
  F(.name = "softcap", BOTH, .b = 1, .sq = 70, .sk = 90, .hq = 2, .hkv = 2, .softcap = 2.0f),
  F(.name = "softcap scale causal", BOTH, .b = 1, .sq = 100, .sk = 100, .hq = 1, .hkv = 1, .softcap = 5.0f, .scale = 0.5f, .causal = 1),
  F(.name = "alibi", BOTH, .b = 1, .sq = 97, .sk = 97, .hq = 4, .hkv = 4, .alibi = 1),
  F(.name = "alibi causal sq<sk GQA", BOTH, .b = 1, .sq = 70, .sk = 150, .hq = 4, .hkv = 2, .alibi = 1, .causal = 1),
  F(.name = "alibi sq>sk", FWD, .b = 1, .sq = 90, .sk = 31, .hq = 2, .hkv = 2, .alibi = 1),
  F(.name = "alibi softcap window", BOTH, .b = 1, .sq = 80, .sk = 120, .hq = 2, .hkv = 2, .alibi = 1, .softcap = 3.0f, .win = 1, .wl = 20, .wr = 10),
  F(.name = "GQA 6/2", BOTH, .b = 1, .sq = 50, .sk = 77, .hq = 6, .hkv = 2),
  F(.name = "GQA 8/4 causal", BOTH, .b = 1, .sq = 65, .sk = 65, .hq = 8, .hkv = 4, .causal = 1),
  F(.name = "MQA 5/1", BOTH, .b = 2, .sq = 33, .sk = 129, .hq = 5, .hkv = 1),
  F(.name = "varlen empty seqs", BOTH, .nseq = 4, .lens_q = {17, 0, 65, 3}, .lens_k = {17, 5, 100, 0}, .hq = 2, .hkv = 2),
  F(.name = "varlen causal", FWD, .nseq = 4, .lens_q = {1, 40, 0, 70}, .lens_k = {30, 40, 12, 64}, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "varlen causal GQA", BWD, .nseq = 4, .lens_q = {1, 40, 0, 70}, .lens_k = {30, 40, 12, 64}, .hq = 4, .hkv = 2, .causal = 1),
  F(.name = "varlen GQA window alibi", BOTH, .nseq = 3, .lens_q = {33, 64, 1}, .lens_k = {40, 64, 129}, .hq = 4, .hkv = 2, .win = 1, .wl = 16, .wr = 4, .alibi = 1),
  F(.name = "varlen layouts offset", BOTH, .nseq = 3, .lens_q = {20, 67, 5}, .lens_k = {0, 70, 9}, .hq = 2, .hkv = 1, .causal = 1, .lq = TU_BHSD, .lk = TU_PADDED, .lv = TU_PADDED_BHSD, .lo = TU_PADDED, .ldo = TU_PADDED_BHSD, .ldq = TU_PADDED_BHSD, .ldk = TU_BHSD, .ldv = TU_PADDED, .off = 5),
  F(.name = "varlen strides[0] ignored", FWD, .nseq = 2, .lens_q = {10, 30}, .lens_k = {25, 30}, .hq = 2, .hkv = 2, .junk_stride0 = 1),
  F(.name = "bhsd", BOTH, .b = 2, .sq = 70, .sk = 90, .hq = 3, .hkv = 3, ALL_VIEWS(TU_BHSD)),
  F(.name = "sbhd", FWD, .b = 3, .sq = 20, .sk = 45, .hq = 2, .hkv = 1, .causal = 1, .lq = TU_SBHD, .lk = TU_SBHD, .lv = TU_SBHD, .lo = TU_SBHD),
  F(.name = "padded offset", BOTH, .b = 2, .sq = 45, .sk = 60, .hq = 2, .hkv = 2, ALL_VIEWS(TU_PADDED), .off = 7),
  F(.name = "mixed layouts offset", BOTH, .b = 2, .sq = 33, .sk = 66, .hq = 4, .hkv = 2, .causal = 1, .lq = TU_BSHD, .lk = TU_BHSD, .lv = TU_PADDED, .lo = TU_PADDED_BHSD, .ldo = TU_BHSD, .ldq = TU_PADDED, .ldk = TU_PADDED_BHSD, .ldv = TU_SBHD, .off = 3),
  F(.name = "explicit scale", FWD, .b = 1, .sq = 40, .sk = 50, .hq = 2, .hkv = 2, .scale = 0.2f),
  F(.name = "large logits", BOTH, .b = 1, .sq = 65, .sk = 65, .hq = 1, .hkv = 1, .amp = 4.0, .scale = 0.5f),
  F(.name = "lse NULL causal sq>sk", FWD, .b = 1, .sq = 70, .sk = 40, .hq = 2, .hkv = 2, .causal = 1, .no_lse = 1),
  /* Long ranges: on llvmpipe a work-group may not walk ~2800 keys (d 64),
   * so these take the split paths without any FCL_LOOP_BUDGET (the
   * forward's split keys with its combine kernel; dQ over 3001 keys, dK/dV
   * over 2 x 1600 queries). */
  F(.name = "long keys decode causal", BOTH, .b = 1, .sq = 3, .sk = 3001, .hq = 2, .hkv = 1, .causal = 1),
  F(.name = "long keys varlen window", FWD, .nseq = 3, .lens_q = {2, 5, 0}, .lens_k = {2900, 40, 7}, .hq = 2, .hkv = 2, .win = 1, .wl = 2000, .wr = 1),
  F(.name = "long queries GQA", BWD, .b = 1, .sq = 1600, .sk = 20, .hq = 2, .hkv = 1),
  F(.name = "lse NULL varlen", FWD, .nseq = 2, .lens_q = {12, 0}, .lens_k = {7, 3}, .hq = 2, .hkv = 1, .no_lse = 1),
  /* A shifted diagonal (diag_shift: a slice of queries against keys from
   * elsewhere in the sequence, as ring attention runs them). */
  F(.name = "shift causal keys before", BOTH, .b = 1, .sq = 70, .sk = 90, .hq = 2, .hkv = 2, .causal = 1, .shift = 40),
  F(.name = "shift causal keys after, empty rows", BOTH, .b = 2, .sq = 64, .sk = 64, .hq = 2, .hkv = 1, .causal = 1, .shift = -30),
  F(.name = "shift window both GQA", BOTH, .b = 1, .sq = 80, .sk = 100, .hq = 4, .hkv = 2, .win = 1, .wl = 20, .wr = 5, .shift = 37),
  F(.name = "shift window left causal sq>sk", BOTH, .b = 1, .sq = 100, .sk = 45, .hq = 2, .hkv = 2, .causal = 1, .win = 1, .wl = 30, .wr = -1, .shift = 30),
  F(.name = "shift alibi softcap", BOTH, .b = 1, .sq = 50, .sk = 60, .hq = 2, .hkv = 2, .alibi = 1, .softcap = 3.0f, .shift = -15),
  F(.name = "shift window past every key", FWD, .b = 1, .sq = 40, .sk = 50, .hq = 2, .hkv = 2, .win = 1, .wl = 30, .wr = 4, .shift = 200),
  F(.name = "shift varlen causal", BOTH, .nseq = 3, .lens_q = {20, 0, 45}, .lens_k = {33, 9, 40}, .hq = 2, .hkv = 1, .causal = 1, .shift = 12),
  F(.name = "shift 2^29 causal window", FWD, .b = 1, .sq = 33, .sk = 40, .hq = 1, .hkv = 1, .causal = 1, .win = 1, .wl = (1 << 29) + 10, .wr = -1, .shift = 1 << 29),
  F(.name = "shift long keys decode", FWD, .b = 1, .sq = 2, .sk = 700, .hq = 2, .hkv = 1, .causal = 1, .shift = -300),
};

/* Head dims, each in one dtype per suite with some feature: every (dtype,
 * d, dv) compiles programs, so the list is short. The random batches draw
 * their (dtype, d, dv) from here, in this order (attention_triples). */
static const oh_attention_case attention_headdim_cases[] = {
  F(.name = "head dim 1", .fwd = DT_F32, .bwd = DT_F32, .d = 1, .dv = 1, .b = 1, .sq = 37, .sk = 45, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "head dim 7 window", .fwd = DT_F16, .d = 7, .dv = 7, .b = 1, .sq = 50, .sk = 50, .hq = 2, .hkv = 1, .win = 1, .wl = 8, .wr = 2),
  F(.name = "head dims 7/40 window GQA", .bwd = DT_F16, .d = 7, .dv = 40, .b = 1, .sq = 50, .sk = 50, .hq = 2, .hkv = 1, .win = 1, .wl = 8, .wr = 2),
  F(.name = "head dim 32 GQA", .fwd = DT_BF16, .d = 32, .dv = 32, .b = 2, .sq = 65, .sk = 33, .hq = 4, .hkv = 2),
  F(.name = "head dim 40 softcap", .fwd = DT_F32, .bwd = DT_BF16, .d = 40, .dv = 40, .b = 1, .sq = 63, .sk = 80, .hq = 2, .hkv = 2, .softcap = 4.0f),
  F(.name = "head dim 80 alibi causal", .fwd = DT_F16, .bwd = DT_F32, .d = 80, .dv = 80, .b = 1, .sq = 66, .sk = 66, .hq = 3, .hkv = 3, .alibi = 1, .causal = 1),
  F(.name = "head dim 96 varlen", .fwd = DT_BF16, .d = 96, .dv = 96, .nseq = 3, .lens_q = {30, 1, 70}, .lens_k = {30, 0, 65}, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "head dim 128 sq>sk causal", .fwd = DT_F32, .bwd = DT_F16, .d = 128, .dv = 128, .b = 1, .sq = 70, .sk = 50, .hq = 2, .hkv = 1, .causal = 1),
  F(.name = "head dim 160", .fwd = DT_F16, .d = 160, .dv = 160, .b = 1, .sq = 45, .sk = 77, .hq = 2, .hkv = 2),
  F(.name = "head dim 256 bhsd", .fwd = DT_BF16, .bwd = DT_BF16, .d = 256, .dv = 256, .b = 1, .sq = 40, .sk = 65, .hq = 2, .hkv = 2, ALL_VIEWS(TU_BHSD)),
  F(.name = "head dims 128/64 padded GQA", .bwd = DT_BF16, .d = 128, .dv = 64, .b = 1, .sq = 45, .sk = 65, .hq = 4, .hkv = 2, ALL_VIEWS(TU_PADDED), .off = 2),
  F(.name = "head dims 80/256 softcap varlen", .bwd = DT_F32, .d = 80, .dv = 256, .nseq = 3, .lens_q = {30, 1, 0}, .lens_k = {70, 0, 20}, .hq = 2, .hkv = 2, .causal = 1, .softcap = 3.0f),
  F(.name = "head dim 512 long keys", .fwd = DT_F32, .d = 512, .dv = 512, .b = 1, .sq = 2, .sk = 700, .hq = 1, .hkv = 1, .alibi = 1),
  F(.name = "head dim 512", .fwd = DT_F32, .bwd = DT_F32, .d = 512, .dv = 512, .b = 1, .sq = 33, .sk = 70, .hq = 1, .hkv = 1, .causal = 1),
  F(.name = "head dims 32/80", .fwd = DT_F16, .d = 32, .dv = 80, .b = 1, .sq = 64, .sk = 64, .hq = 2, .hkv = 2, .causal = 1),
  F(.name = "head dims 160/7 window", .fwd = DT_BF16, .d = 160, .dv = 7, .b = 1, .sq = 40, .sk = 70, .hq = 2, .hkv = 2, .win = 1, .wl = 10, .wr = 10),
  F(.name = "head dims 7/40 varlen MQA", .fwd = DT_F32, .bwd = DT_F16, .d = 7, .dv = 40, .nseq = 2, .lens_q = {5, 60}, .lens_k = {9, 61}, .hq = 3, .hkv = 1),
  F(.name = "head dims 512/64 padded", .fwd = DT_F16, .d = 512, .dv = 64, .b = 1, .sq = 20, .sk = 65, .hq = 2, .hkv = 2, .lq = TU_PADDED, .lk = TU_PADDED, .lv = TU_PADDED, .lo = TU_PADDED, .off = 2),
  F(.name = "head dims 1/256 alibi", .fwd = DT_BF16, .d = 1, .dv = 256, .b = 1, .sq = 30, .sk = 40, .hq = 2, .hkv = 2, .alibi = 1),
  /* More of the backward's (dtype, d, dv): nothing new to compile. */
  F(.name = "head dim 256 alibi sq>sk", .bwd = DT_BF16, .d = 256, .dv = 256, .b = 2, .sq = 50, .sk = 40, .hq = 2, .hkv = 1, .alibi = 1, .causal = 1),
  F(.name = "head dim 1 window varlen", .bwd = DT_F32, .d = 1, .dv = 1, .nseq = 3, .lens_q = {40, 0, 7}, .lens_k = {33, 9, 70}, .hq = 2, .hkv = 1, .win = 1, .wl = 3, .wr = 9),
  F(.name = "head dim 512 window sq<sk", .bwd = DT_F32, .d = 512, .dv = 512, .b = 1, .sq = 20, .sk = 200, .hq = 2, .hkv = 1, .win = 1, .wl = 100, .wr = 0),
};

#define ATTENTION_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The dtype of a single-dtype mask. */
static inline fcl_dtype attention_mask_dtype(unsigned m) {
  return m & DT_F16 ? FCL_F16 : m & DT_BF16 ? FCL_BF16 : FCL_F32;
}

/* A suite's dtypes of a case: .fwd (backward 0) or .bwd. */
static inline unsigned attention_dtypes(const oh_attention_case *c, int backward) {
  return backward ? c->bwd : c->fwd;
}

/* Runs every case of a table in the dtypes the suite gives it, seeded by
 * name and dtype, those FCL_TEST_FILTER selects. */
static inline void attention_run_table(fcl_context *ctx, const oh_attention_case *cases,
                                       size_t n, int backward, oh_attention_stats *st) {
  for (size_t i = 0; i < n; ++i)
    for (int t = FCL_F32; t <= FCL_BF16; ++t)
      if ((attention_dtypes(&cases[i], backward) & OH_DT(t)) && oh_selected(cases[i].name))
        oh_attention_case_run(ctx, &cases[i], (fcl_dtype)t, backward,
                              oh_case_seed(cases[i].name, (fcl_dtype)t), st);
}

/* A random case of the forward (backward 0) or the backward suite: the
 * (dtype, d, dv) of one of the suite's head dim cases (the backward: up to
 * 256, 512 being slow on llvmpipe) or d64 in any dtype; lengths among the
 * edges or up to a bound that shrinks with the head dims; GQA, batch,
 * causal, windows, softcap, ALiBi, scale, varlen with empty sequences,
 * layouts and offsets; the forward also lse=NULL. */
static inline void attention_random_case(tu_rng *r, int backward, oh_attention_case *c,
                                         char *name, size_t name_len, int idx) {
  const oh_attention_case *hd[ATTENTION_COUNT(attention_headdim_cases)];
  int n_fixed = 0;
  for (size_t i = 0; i < ATTENTION_COUNT(attention_headdim_cases); ++i)
    if (attention_dtypes(&attention_headdim_cases[i], backward))
      hd[n_fixed++] = &attention_headdim_cases[i];
  memset(c, 0, sizeof *c);
  fcl_dtype dt;
  do {
    const int pick = (int)tu_rng_int(r, 0, n_fixed + 2); /* 3 extra: d64 in each dtype */
    if (pick < n_fixed) {
      dt = attention_mask_dtype(attention_dtypes(hd[pick], backward));
      c->d = hd[pick]->d;
      c->dv = hd[pick]->dv;
    } else {
      dt = (fcl_dtype)(pick - n_fixed);
      c->d = c->dv = 64;
    }
  } while (backward && (c->d > 256 || c->dv > 256));
  if (backward) c->bwd = OH_DT(dt);
  else c->fwd = OH_DT(dt);
  /* llvmpipe is slow at wide heads: keep those problems small. */
  const int wide = backward && (c->d >= 256 || c->dv >= 256);
  const int64_t big = wide ? 40 : (backward ? (c->d > 64 || c->dv > 64)
                                            : (c->d > 256 || c->dv > 256)) ? 70 : 150;
  static const int64_t edge[] = {1, 2, 3, 17, 31, 63, 64, 65, 127, 128, 129};
  for (int t = 0; t < 2; ++t) {
    int64_t len = tu_rng_int(r, 0, 2) == 0 ? edge[tu_rng_int(r, 0, 10)] : tu_rng_int(r, 1, big);
    if (len > big) len = big;
    if (t == 0) c->sq = len; else c->sk = len;
  }
  c->hkv = tu_rng_int(r, 1, 3);
  c->hq = c->hkv * tu_rng_int(r, 1, 3);
  c->b = tu_rng_int(r, 1, wide ? 2 : 3);
  c->causal = (int)tu_rng_int(r, 0, 1);
  if (tu_rng_int(r, 0, 2) == 0) {
    c->win = 1;
    c->wl = tu_rng_int(r, 0, 2) ? tu_rng_int(r, 0, 40) : -1;
    c->wr = tu_rng_int(r, 0, 2) ? tu_rng_int(r, 0, 40) : -1;
  }
  if (tu_rng_int(r, 0, 3) == 0) c->softcap = (float)tu_rng_range(r, 1.0, 20.0);
  c->alibi = tu_rng_int(r, 0, 3) == 0;
  /* An explicit scale keeps logits in a realistic range for any head dim
   * (f32 logit error grows with their magnitude; "large logits" covers that). */
  if (tu_rng_int(r, 0, 2) == 0) c->scale = (float)(tu_rng_range(r, 0.3, 3.0) / sqrt((double)c->d));
  if (tu_rng_int(r, 0, 2) == 0) { /* varlen */
    c->nseq = (int)tu_rng_int(r, 1, 4);
    int any_q = 0, any_k = 0;
    for (int i = 0; i < c->nseq; ++i) {
      c->lens_q[i] = tu_rng_int(r, 0, 5) == 0 ? 0 : (int32_t)tu_rng_int(r, 1, big);
      c->lens_k[i] = tu_rng_int(r, 0, 5) == 0 ? 0 : (int32_t)tu_rng_int(r, 1, big);
      any_q |= c->lens_q[i] > 0;
      any_k |= c->lens_k[i] > 0;
    }
    if (!any_q) c->lens_q[0] = 1;
    if (!any_k) c->lens_k[c->nseq - 1] = 1;
  }
  tu_layout *ls[8] = {&c->lq, &c->lk, &c->lv, &c->lo, &c->ldo, &c->ldq, &c->ldk, &c->ldv};
  for (int i = 0; i < (backward ? 8 : 4); ++i)
    *ls[i] = (tu_layout)tu_rng_int(r, 0, TU_LAYOUT_COUNT - 1);
  c->off = tu_rng_int(r, 0, 1) ? (size_t)tu_rng_int(r, 1, 13) : 0;
  if (!backward) c->no_lse = tu_rng_int(r, 0, 4) == 0;
  snprintf(name, name_len, "random #%d", idx);
  c->name = name;
}

#endif
