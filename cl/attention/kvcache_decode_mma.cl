/* requires: attention/attention_abi.h common/mma_common.cl attention/kvcache_append.cl */
/* requires: attention/kvcache_tile.cl attention/kvcache_split_merge.cl */
/* requires: attention/kvcache_mma_formats.cl */
/* Attention of a few new query rows against a KV cache on NVIDIA's tensor
 * cores (prepend mma_warp.cl, mma_common.cl, kvcache_tile.cl and
 * kvcache_split_merge.cl): the decode kernel's work (a tile of ROWS <= 16
 * query rows of one kv head, one split of its keys, the last of a tile's
 * splits merging them) with every warp walking its own keys, its own
 * online softmax in registers and no barrier until the end.
 *
 * Each warp takes KB = 16 KSUB keys of every block of BN = WG / 32 * KB:
 *   S   = Q K^T    A = Q (16 rows x 16 dims), B = K^T, two n8 tiles of keys;
 *   O^T += V^T P^T A = V^T (16 dims x 16 keys), B = P^T (16 keys x 8 rows).
 * The second product keeps P in the registers S left it in (lane 4 g + t
 * holds P[row g][keys 2t, 2t + 1] of each key tile, which is B's layout),
 * and both take their K and V operands straight from 16-byte global loads
 * into registers, without local memory: a dot product may visit the head
 * dims in any order, so a lane's k-slots map to 8 consecutive dims of its
 * key (K_COL), and the output's dims are permuted the same way (V_COL):
 * lane g of a key's V row holds dims 8 g + 64 i + [0, 8), two m-tile rows
 * (g, g + 8) in each 32-bit word. A K row is read by 4 lanes, 64 bytes a
 * load; a V row by 8 lanes, 128 bytes a load. Loads run a block ahead,
 * page ids two blocks ahead. (Prefetching blocks further ahead into L2,
 * prefetch.global.L2 a sector at a time, measured slower on the H100:
 * docs/defaults.md.)
 *
 * The warps' (m, l, O) are merged in a fixed order at the end (run-to-run
 * identical results). Every loop has the same trip count in each warp, so
 * the emulation (FCL_MMA_EMULATE, barriers in its shuffles) runs it too.
 *
 * Build: HEAD_DIM (a multiple of 32), HEAD_DIM_V (of 64), WG (a multiple
 * of 32), KSUB (16-key steps a warp iteration), ROWS (at most 16), VEC 8. Paged caches: pages of a
 * multiple of 16 tokens. Quantized caches (kvcache_format.cl): their loads
 * kept raw, dequantized and rounded to the operand dtype where used; a
 * block format whose rows the host found 8-byte aligned (KV_K_LANE,
 * KV_V_LANE) read by lane-owned blocks, below. */
#define NW (WG / 32)
#define KB (16 * KSUB)
#define BN (NW * KB)
#define NKS (HEAD_DIM / 16)   /* k-steps of S */
#define NKL (HEAD_DIM / 32)   /* 16-byte loads of a K row, a lane */
#define NDT (HEAD_DIM_V / 16) /* m-tiles of O^T */
#define NVL (HEAD_DIM_V / 64) /* 16-byte loads of a V row, a lane */
#define NRT ((ROWS + 7) / 8)  /* n-tiles of O^T: query rows 0-7, 8-15 */
/* The warps' O merged through a slice each (16 KiB at most), one barrier,
 * rather than one warp after another. */
#define KV_WARP_SLICES (NW * ROWS * HEAD_DIM_V <= 4096)

/* The head dim of k-step s's slots (2t, 2t + 1) for w = 0, (2t + 8, 2t + 9)
 * for w = 1 (lane quad t): word 2 (s % 2) + w of load s / 2. */
#if KV_K_LANE /* lane t owns dims [t D / 4, (t + 1) D / 4): whole blocks */
#define K_COL(s, t, w) (HEAD_DIM / 4 * (t) + 4 * (s) + 2 * (w))
#else
#define K_COL(s, t, w) (32 * ((s) / 2) + 8 * (t) + 4 * ((s) % 2) + 2 * (w))
#endif
/* The output dim of m-tile j's row g (hi = 0) or g + 8 (hi = 1) for lane
 * group g: half hi of word j % 4 of V load j / 4. */
#if KV_V_LANE /* lane g owns dims [g D_V / 8, (g + 1) D_V / 8) */
#define V_COL(j, g, hi) (HEAD_DIM_V / 8 * (g) + 8 * ((j) / 4) + 2 * ((j) % 4) + (hi))
#else
#define V_COL(j, g, hi) (64 * ((j) / 4) + 8 * (g) + 2 * ((j) % 4) + (hi))
#endif

inline uint kvm_word(uint4 x, int w) { return w == 0 ? x.x : w == 1 ? x.y : w == 2 ? x.z : x.w; }

inline float kvm_elem(float4 x, int e) { return e == 0 ? x.x : e == 1 ? x.y : e == 2 ? x.z : x.w; }

/* The cache row that holds the 16-key step from position j: its page
 * (paged) or the sequence's row of a contiguous cache; -1 past the keys or
 * out of range. With the step's first slot in that row (j % page_size, or
 * j), a key's element offset is off + row * sb + slot * ss either way: the
 * loads share one formula, and a contiguous cache does not pay for the
 * paged one's selects (the compiler makes both branchless). Found once a
 * step: the step's keys are the 16 slots after it in the same page. */
inline int kvm_row(int j, bool ok, int kv_flags, const kv_seq *s,
                   const __global int *block_table, int b, int pages_per_seq, int page_size,
                   int num_pages, int page_size_mul, int page_size_shift) {
  if (!ok) return -1;
  if (!(kv_flags & FCL_KV_PAGED)) return (int)s->row;
  const int pg = block_table[(long)b * pages_per_seq + KV_DIV(j, page_size)];
  return pg >= 0 && pg < num_pages ? pg : -1;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void fcl_kv_decode_mma(
    KV_DECODE_PARAMS) {
  KV_DECODE_UNPACK
  __local float q_s[ROWS * HEAD_DIM];
  __local float out_s[(KV_WARP_SLICES ? NW : 1) * ROWS * HEAD_DIM_V];
  __local uint4 qa_s[NKS * 32];
  __local float mw_s[NW * 16], lw_s[NW * 16], m_s[ROWS], l_s[ROWS];
  __local float lse_s[KV_MERGE_LOCAL];
  __local int last_s;
  MMA_EMU_DECL(NW)
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int g = lane >> 2, t = lane & 3;
  KV_TILE_IDS;
  const kv_seq s = KV_SEQ(b);
  KV_TILE_KEYS_FROM(BN, 16);
  if (split >= splits) return; /* no keys: the tile's merge does not wait for it */
  KV_FUSED_APPEND(lo + blk0 * BN, min(hi, lo + blk1 * BN));
  /* This lane's keys of block x: K of key tile nt (key g), V of keys
   * 2t, 2t + 1, 2t + 8, 2t + 9 (kk = 0 .. 3) of each 16-key step u. A step
   * starts at a multiple of 16 and lies in one page (pages of a multiple
   * of 16 tokens): one row and first slot a step (kvm_row). */
#define KEY0(x) (lo + (x) * BN + warp * KB)
#define K_OFF(nt) (8 * (nt) + g)
#define V_OFF(kk) (2 * t + ((kk) & 1) + 8 * ((kk) >> 1))
#define K_KEY(x, u, nt) (KEY0(x) + 16 * (u) + K_OFF(nt))
#define V_KEY(x, u, kk) (KEY0(x) + 16 * (u) + V_OFF(kk))
#define PAGE_IDS(ids, x)                                                           \
  FCL_UNROLL for (int u_ = 0; u_ < KSUB; ++u_) {                                   \
    const int j_ = KEY0(x) + 16 * u_;                                              \
    (ids)[u_] = kvm_row(j_, (x) < blk1 && j_ < hi, kv_flags, &s, block_table, b,   \
                        pages_per_seq, page_size, num_pages, page_size_mul,        \
                        page_size_shift);                                          \
    sl[u_] = (kv_flags & FCL_KV_PAGED) ? KV_MOD(j_, page_size) : j_;               \
  }
  int pg[KSUB], sl[KSUB];
#if KV_K_LANE
  /* Lane t's window of the key's row: its bytes from (its first block &
   * ~7); the byte offset in a row is the same for every row. */
  uint kr[KSUB][2][2 * KW8K + 1];
  const int k_lane = t * NBK * KBB, k_o = k_lane & 7;
#define LOAD_K(x)                                                                  \
  FCL_UNROLL for (int u_ = 0; u_ < KSUB; ++u_)                                     \
    FCL_UNROLL for (int n_ = 0; n_ < 2; ++n_) {                                    \
      const int j_ = K_KEY(x, u_, n_);                                             \
      const bool ok_ = j_ < hi && pg[u_] >= 0;                                     \
      const __global uchar *p_ =                                                   \
          k_cache + (ok_ ? k_off + ((long)pg[u_] * k_sb + (long)(sl[u_] + K_OFF(n_)) * k_ss + \
                                    (long)hk * k_sh) / 32 * KBB + k_lane - k_o     \
                         : 0);                                                     \
      FCL_UNROLL for (int i_ = 0; i_ < KW8K; ++i_) {                               \
        const uint2 w_ = ok_ ? ((const __global uint2 *)p_)[i_] : (uint2)(0u);     \
        kr[u_][n_][2 * i_] = w_.s0, kr[u_][n_][2 * i_ + 1] = w_.s1;                \
      }                                                                            \
      kr[u_][n_][2 * KW8K] = 0u;                                                   \
    }
#else
  kc_raw kr[KSUB][2][NKL];
#define LOAD_K(x)                                                                  \
  FCL_UNROLL for (int u_ = 0; u_ < KSUB; ++u_)                                     \
    FCL_UNROLL for (int n_ = 0; n_ < 2; ++n_) {                                    \
      const int j_ = K_KEY(x, u_, n_);                                             \
      const long kb_ = j_ < hi && pg[u_] >= 0 ? KC_IDX_OFF(k_off) + (long)pg[u_] * k_sb + \
                                                    (long)(sl[u_] + K_OFF(n_)) * k_ss  \
                                              : -1;                                \
      FCL_UNROLL for (int i_ = 0; i_ < NKL; ++i_)                                  \
        kr[u_][n_][i_] = kb_ >= 0 ? KC_LOAD(k_cache, k_off, kb_ + (long)hk * k_sh +  \
                                                            32 * i_ + 8 * t)       \
                                  : KC_ZERO;                                       \
    }
#endif
#if KV_V_LANE
  /* Lane g's window of the key's V row (KVM_V_LANE_RAW) and its block's d. */
  uint vr[KSUB][4][2 * KW8V];
  uint vd[KSUB][4];
  const int v_blk = (VHALF ? g / 2 : g) * VBB;
  const int v_lane = v_blk + 2 + (KV_V_FMT == FCL_KV_Q8_0 && VHALF ? 16 * (g & 1) : 0);
  const int v_o = v_lane & 7;
#define LOAD_V(x)                                                                  \
  FCL_UNROLL for (int u_ = 0; u_ < KSUB; ++u_)                                     \
    FCL_UNROLL for (int k_ = 0; k_ < 4; ++k_) {                                    \
      const int j_ = V_KEY(x, u_, k_);                                             \
      const bool ok_ = j_ < hi && pg[u_] >= 0;                                     \
      const __global uchar *r_ =                                                   \
          v_cache + (ok_ ? v_off + ((long)pg[u_] * v_sb + (long)(sl[u_] + V_OFF(k_)) * v_ss + \
                                    (long)hk * v_sh) / 32 * VBB                    \
                         : 0);                                                     \
      const __global uint2 *p_ = (const __global uint2 *)(r_ + v_lane - v_o);      \
      vd[u_][k_] = ok_ ? *(const __global ushort *)(r_ + v_blk) : 0u;              \
      FCL_UNROLL for (int i_ = 0; i_ < KW8V; ++i_) {                               \
        const uint2 w_ = ok_ && (i_ < KW8V - 1 || v_o) ? p_[i_] : (uint2)(0u);     \
        vr[u_][k_][2 * i_] = w_.s0, vr[u_][k_][2 * i_ + 1] = w_.s1;                \
      }                                                                            \
    }
#else
  vc_raw vr[KSUB][4][NVL];
#define LOAD_V(x)                                                                  \
  FCL_UNROLL for (int u_ = 0; u_ < KSUB; ++u_)                                     \
    FCL_UNROLL for (int k_ = 0; k_ < 4; ++k_) {                                    \
      const int j_ = V_KEY(x, u_, k_);                                             \
      const long vb_ = j_ < hi && pg[u_] >= 0 ? VC_IDX_OFF(v_off) + (long)pg[u_] * v_sb + \
                                                    (long)(sl[u_] + V_OFF(k_)) * v_ss  \
                                              : -1;                                \
      FCL_UNROLL for (int i_ = 0; i_ < NVL; ++i_)                                  \
        vr[u_][k_][i_] = vb_ >= 0 ? VC_LOAD(v_cache, v_off, vb_ + (long)hk * v_sh +  \
                                                            64 * i_ + 8 * g)       \
                                  : VC_ZERO;                                       \
    }
#endif
  /* The first block's loads go out before Q is staged: its latency hides
   * behind theirs. */
  PAGE_IDS(pg, blk0);
  LOAD_K(blk0);
  LOAD_V(blk0);
  PAGE_IDS(pg, blk0 + 1);

  /* Q as A fragments (rows g and g + 8, zeros past ROWS, permuted dims),
   * kept in local memory: read once a k-step, they spare 32 registers.
   * Without rotary, from a view whose rows start at multiples of 8
   * elements, warp 0 loads them itself: a lane's 8 dims of a row for two
   * k-steps are one 16-byte load, the A fragment's pairs as they lie in
   * memory (the same bits as through f32). Else the tile's rows are staged
   * (rotated) in q_s first. */
  if (!(kv_flags & FCL_KV_ROTARY) && (kv_flags & FCL_KV_Q_VEC8)) {
    if (warp == 0) {
      uint4 raw[2][NKS / 2];
      FCL_UNROLL for (int hh = 0; hh < 2; ++hh) {
        KV_ROW_TOKEN_HEAD(row0 + g + 8 * hh, tq, hq);
        const bool ok = g + 8 * hh < ROWS && tq < s.n;
        const long qi = ok ? kv_token_index(&s, b, tq, hq, q_off, q_sb, q_ss, q_sh) +
                                 K_COL(0, t, 0) : 0;
        FCL_UNROLL for (int m = 0; m < NKS / 2; ++m) /* dims K_COL(2 m, t, 0) .. + 8 */
          raw[hh][m] = ok ? *(const __global uint4 *)(q + qi + K_COL(2 * m, 0, 0))
                          : (uint4)(0u);
      }
      FCL_UNROLL for (int ks = 0; ks < NKS; ++ks) {
        const int w = 2 * (ks % 2);
        qa_s[ks * 32 + lane] =
            (uint4)(kvm_word(raw[0][ks / 2], w), kvm_word(raw[1][ks / 2], w),
                    kvm_word(raw[0][ks / 2], w + 1), kvm_word(raw[1][ks / 2], w + 1));
      }
    }
  } else {
    KV_TILE_Q(q_s);
    barrier(CLK_LOCAL_MEM_FENCE);
    FCL_UNROLL for (int ks = 0; ks < NKS; ++ks) {
      const int c = K_COL(ks, t, 0);
      float x[2][4];
      FCL_UNROLL for (int hh = 0; hh < 2; ++hh)
        FCL_UNROLL for (int e = 0; e < 4; ++e)
          x[hh][e] = g + 8 * hh < ROWS ? q_s[(g + 8 * hh) * HEAD_DIM + c + e] : 0.0f;
      if (warp == 0)
        qa_s[ks * 32 + lane] = (uint4)(mma_pack(x[0][0], x[0][1]), mma_pack(x[1][0], x[1][1]),
                                       mma_pack(x[0][2], x[0][3]), mma_pack(x[1][2], x[1][3]));
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* Rows g and g + 8 of S: their token, whether they are real, ALiBi. */
  int tok[2];
  bool live[2];
  float slope[2];
  FCL_UNROLL for (int hh = 0; hh < 2; ++hh) {
    const int gr = row0 + g + 8 * hh;
    tok[hh] = KV_DIV(gr, group);
    live[hh] = g + 8 * hh < ROWS && tok[hh] < s.n;
    slope[hh] = live[hh] && (flags & FCL_ATTN_ALIBI)
                    ? alibi[hk * group + gr - tok[hh] * group] * FCL_LOG2E : 0.0f;
  }

  const float qk_s = qk_scale * KV_K_SCALE(hk); /* an fp8 K's scale folded in */
  float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.0f, 0.0f};
  float4 acc[NRT][NDT];
  FCL_UNROLL for (int nr = 0; nr < NRT; ++nr)
    FCL_UNROLL for (int j = 0; j < NDT; ++j) acc[nr][j] = (float4)(0.0f);

  MMA_NO_UNROLL for (int blk = blk0; blk < blk1; ++blk) {
    /* S of the warp's keys: sc[u][nt] holds rows g, g + 8 at keys
     * 16 u + 8 nt + 2t + {0, 1}. */
    float4 sc[KSUB][2];
    FCL_UNROLL for (int u = 0; u < KSUB; ++u)
      FCL_UNROLL for (int nt = 0; nt < 2; ++nt) {
        uint4 kh[NKL]; /* each load's pairs once (a quantized cache's converted) */
#if KV_K_LANE
        uint kn[KNN];
        kvw_align(kr[u][nt], k_o, kn, KNN);
        FCL_UNROLL for (int i = 0; i < NKL; ++i) kh[i] = KC_PAIRS(KVM_K_LANE_RAW(kn, i));
#else
        FCL_UNROLL for (int i = 0; i < NKL; ++i) kh[i] = KC_PAIRS(kr[u][nt][i]);
#endif
        float4 c = (float4)(0.0f);
        FCL_UNROLL for (int ks = 0; ks < NKS; ++ks) {
          const uint4 w = kh[ks / 2];
          c = mma_16816(qa_s[ks * 32 + lane], (uint2)(kvm_word(w, 2 * (ks % 2)), kvm_word(w, 2 * (ks % 2) + 1)),
                        c);
        }
        sc[u][nt] = c;
      }
    LOAD_K(blk + 1);

    /* Scores (log2 domain, masked to -inf) and the rows' maxima. */
    float mx[2] = {-INFINITY, -INFINITY};
    FCL_UNROLL for (int u = 0; u < KSUB; ++u)
      FCL_UNROLL for (int nt = 0; nt < 2; ++nt) {
        float x[4];
        FCL_UNROLL for (int e = 0; e < 4; ++e) {
          const int hh = e >> 1, j = KEY0(blk) + 16 * u + 8 * nt + 2 * t + (e & 1);
          float tt;
          x[e] = live[hh] && j < hi && attn_visible(tok[hh], j, s.diag, s.sk, window_left,
                                                    window_right)
                     ? attn_score(kvm_elem(sc[u][nt], e), tok[hh], j, s.diag, qk_s,
                                  softcap_l2, slope[hh], &tt)
                     : -INFINITY;
          mx[hh] = fmax(mx[hh], x[e]);
        }
        sc[u][nt] = (float4)(x[0], x[1], x[2], x[3]);
      }
    float al[2], mu[2];
    FCL_UNROLL for (int hh = 0; hh < 2; ++hh) {
      mx[hh] = fmax(mx[hh], mma_shfl_xor(mx[hh], 1));
      mx[hh] = fmax(mx[hh], mma_shfl_xor(mx[hh], 2));
      const float mn = fmax(m_r[hh], mx[hh]);
      mu[hh] = mn == -INFINITY ? 0.0f : mn;
      al[hh] = mma_exp2(m_r[hh] - mu[hh]);
      m_r[hh] = mn;
      l_r[hh] *= al[hh];
    }
    /* P, packed as B fragments of O^T's row tiles: rows g (c0, c1) and
     * g + 8 (c2, c3) of the key tiles 0-7 and 8-15. */
    uint2 pb[KSUB][NRT];
    FCL_UNROLL for (int u = 0; u < KSUB; ++u) {
      float4 p[2];
      FCL_UNROLL for (int nt = 0; nt < 2; ++nt) {
        p[nt] = (float4)(mma_exp2(sc[u][nt].x - mu[0]), mma_exp2(sc[u][nt].y - mu[0]),
                         mma_exp2(sc[u][nt].z - mu[1]), mma_exp2(sc[u][nt].w - mu[1]));
        l_r[0] += p[nt].x + p[nt].y;
        l_r[1] += p[nt].z + p[nt].w;
      }
      FCL_UNROLL for (int nr = 0; nr < NRT; ++nr)
        pb[u][nr] = nr == 0 ? (uint2)(mma_pack(p[0].x, p[0].y), mma_pack(p[1].x, p[1].y))
                            : (uint2)(mma_pack(p[0].z, p[0].w), mma_pack(p[1].z, p[1].w));
    }
    /* O^T's columns are rows 2t, 2t + 1 (+ 8): their scale from lanes 8t
     * and 8t + 4, which hold rows g = 2t and 2t + 1 (and + 8). */
    const uint2 a0 = mma_shfl_idx2((uint2)(as_uint(al[0]), as_uint(al[1])), 8 * t);
    const uint2 a1 = mma_shfl_idx2((uint2)(as_uint(al[0]), as_uint(al[1])), 8 * t + 4);
    FCL_UNROLL for (int nr = 0; nr < NRT; ++nr) {
      const float s0 = as_float(nr == 0 ? a0.x : a0.y), s1 = as_float(nr == 0 ? a1.x : a1.y);
      FCL_UNROLL for (int j = 0; j < NDT; ++j) acc[nr][j] *= (float4)(s0, s1, s0, s1);
    }
    /* O^T += V^T P^T: V^T's A fragment pairs two keys' halves of a word. */
    FCL_UNROLL for (int u = 0; u < KSUB; ++u) {
      uint4 vh[4][NVL]; /* each load's pairs once */
      FCL_UNROLL for (int k = 0; k < 4; ++k) {
#if KV_V_LANE
        uint vn[VNN];
        kvw_align(vr[u][k], v_o, vn, VNN);
        FCL_UNROLL for (int i = 0; i < NVL; ++i)
          vh[k][i] = VC_PAIRS(KVM_V_LANE_RAW(vn, vd[u][k], g & 1, i));
#else
        FCL_UNROLL for (int i = 0; i < NVL; ++i) vh[k][i] = VC_PAIRS(vr[u][k][i]);
#endif
      }
      FCL_UNROLL for (int j = 0; j < NDT; ++j) {
        const uint w0 = kvm_word(vh[0][j / 4], j % 4), w1 = kvm_word(vh[1][j / 4], j % 4);
        const uint w2 = kvm_word(vh[2][j / 4], j % 4), w3 = kvm_word(vh[3][j / 4], j % 4);
        const uint4 a = (uint4)((w0 & 0xffffu) | (w1 << 16), (w0 >> 16) | (w1 & 0xffff0000u),
                                (w2 & 0xffffu) | (w3 << 16), (w2 >> 16) | (w3 & 0xffff0000u));
        FCL_UNROLL for (int nr = 0; nr < NRT; ++nr) acc[nr][j] = mma_16816(a, pb[u][nr], acc[nr][j]);
      }
    }
    LOAD_V(blk + 1);
    PAGE_IDS(pg, blk + 2);
  }
#undef LOAD_K
#undef LOAD_V
#undef PAGE_IDS
#undef K_KEY
#undef V_KEY
#undef K_OFF
#undef V_OFF
#undef KEY0

  /* The warps merged in a fixed order: the rows' maxima and sums, then
   * each warp's O scaled to the common maximum. */
  FCL_UNROLL for (int hh = 0; hh < 2; ++hh) {
    l_r[hh] += mma_shfl_xor(l_r[hh], 1);
    l_r[hh] += mma_shfl_xor(l_r[hh], 2);
    if (t == 0) mw_s[warp * 16 + g + 8 * hh] = m_r[hh], lw_s[warp * 16 + g + 8 * hh] = l_r[hh];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < ROWS) {
    float mx = -INFINITY;
    for (int w = 0; w < NW; ++w) mx = fmax(mx, mw_s[w * 16 + lid]);
    const float mu = mx == -INFINITY ? 0.0f : mx;
    float l = 0.0f;
    for (int w = 0; w < NW; ++w) l += lw_s[w * 16 + lid] * exp2(mw_s[w * 16 + lid] - mu);
    m_s[lid] = mu, l_s[lid] = l;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#if KV_WARP_SLICES
  /* Each warp's O in its own slice, then summed in warp order. */
  FCL_UNROLL for (int nr = 0; nr < NRT; ++nr)
    FCL_UNROLL for (int e = 0; e < 4; ++e) {
      const int r = 8 * nr + 2 * t + (e & 1);
      if (r < ROWS) {
        const float f = exp2(mw_s[warp * 16 + r] - m_s[r]);
        FCL_UNROLL for (int j = 0; j < NDT; ++j)
          out_s[(warp * ROWS + r) * HEAD_DIM_V + V_COL(j, g, e >> 1)] =
              f * kvm_elem(acc[nr][j], e);
      }
    }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = lid; i < ROWS * HEAD_DIM_V; i += WG) {
    float x = out_s[i];
    for (int w = 1; w < NW; ++w) x += out_s[w * ROWS * HEAD_DIM_V + i];
    out_s[i] = x;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#else
  for (int w = 0; w < NW; ++w) {
    if (warp == w)
      FCL_UNROLL for (int nr = 0; nr < NRT; ++nr)
        FCL_UNROLL for (int e = 0; e < 4; ++e) {
          const int r = 8 * nr + 2 * t + (e & 1);
          if (r < ROWS) {
            const float f = exp2(mw_s[w * 16 + r] - m_s[r]);
            FCL_UNROLL for (int j = 0; j < NDT; ++j) {
              const int i = r * HEAD_DIM_V + V_COL(j, g, e >> 1);
              out_s[i] = (w == 0 ? 0.0f : out_s[i]) + f * kvm_elem(acc[nr][j], e);
            }
          }
        }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif
  KV_TILE_STORE(out_s, m_s, l_s);
  KV_SPLIT_MERGE(&last_s, lse_s);
}
