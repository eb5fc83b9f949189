/* fa-bench --baseline: unfused attention, the way code without a fused
 * kernel computes it, built at run time by bench/baseline.c:
 *   bl_scores   S = scale * Q K^T, f32, masked entries -inf  [B, H, Nq, Nk]
 *   bl_softmax  P = softmax(S) in place, row by row, and lse   [B, H, Nq]
 *   bl_pv       O = P V, stored in the dtype
 * q, o: [B, Nq, H, D|Dv]; k, v: [B, Nk, Hkv, D|Dv], dense. The two products
 * are tiled GEMMs: a 16x16 work-group computes a 64x64 tile, each work-item
 * a 4x4 block of it, over 16-deep slices staged in local memory.
 * DTYPE: 0 f32, 1 f16, 2 bf16 (loaded and stored without cl_khr_fp16). */
#ifndef DTYPE
#define DTYPE 0
#endif

#if DTYPE == 0
typedef float T;
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, x) ((p)[i] = (x))
#elif DTYPE == 1
typedef half T;
#define LOAD(p, i) vload_half((i), (p))
#define STORE(p, i, x) vstore_half_rte((x), (i), (p))
#else
typedef ushort T;
#define LOAD(p, i) as_float((uint)(p)[i] << 16)
#define STORE(p, i, x) ((p)[i] = bf16_round(x))
static ushort bf16_round(float x) { /* to nearest even; NaN stays NaN */
  uint u = as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#endif

#define TILE 64
#define SLICE 16
#define WG 16 /* TILE / 4 */

/* grid: (ceil(Nk/64)*16, ceil(Nq/64)*16, B*H), work-groups 16x16. */
__kernel __attribute__((reqd_work_group_size(WG, WG, 1)))
void bl_scores(__global const T *q, __global const T *k, __global float *s, int nq, int nk,
               int h, int hkv, int d, float scale, int causal) {
  __local float qs[SLICE][TILE + 1], ks[SLICE][TILE + 1];
  const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * WG + tx;
  const int bh = get_group_id(2), b = bh / h, hq = bh % h, hk = hq / (h / hkv);
  const int i0 = get_group_id(1) * TILE, j0 = get_group_id(0) * TILE;
  float acc[4][4] = {{0}};
  for (int x0 = 0; x0 < d; x0 += SLICE) {
    for (int l = lid; l < TILE * SLICE; l += WG * WG) {
      const int r = l / SLICE, x = x0 + l % SLICE, i = i0 + r, j = j0 + r;
      qs[l % SLICE][r] = i < nq && x < d ? LOAD(q, ((long)(b * nq + i) * h + hq) * d + x) : 0.0f;
      ks[l % SLICE][r] = j < nk && x < d ? LOAD(k, ((long)(b * nk + j) * hkv + hk) * d + x) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int x = 0; x < SLICE; x++) {
      float qa[4], kb[4];
      for (int r = 0; r < 4; r++) qa[r] = qs[x][ty + WG * r], kb[r] = ks[x][tx + WG * r];
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = mad(qa[r], kb[c], acc[r][c]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 4; c++) {
      const int i = i0 + ty + WG * r, j = j0 + tx + WG * c;
      if (i < nq && j < nk)
        s[((long)bh * nq + i) * nk + j] =
            causal && j > i + nk - nq ? -INFINITY : acc[r][c] * scale;
    }
}

/* One work-group of SM_WG per row of S (B*H*Nq rows): the running maximum
 * and sum in one pass, then P written over S. A row that sees no key gets
 * P = 0 and lse = -inf. */
#define SM_WG 128
__kernel __attribute__((reqd_work_group_size(SM_WG, 1, 1)))
void bl_softmax(__global float *s, __global float *lse, int nk) {
  __local float lm[SM_WG], ll[SM_WG];
  const int lid = get_local_id(0);
  __global float *p = s + (long)get_group_id(0) * nk;
  float m = -INFINITY, l = 0.0f;
  for (int j = lid; j < nk; j += SM_WG) {
    const float x = p[j], mn = fmax(m, x);
    if (mn != -INFINITY) l = l * exp(m - mn) + exp(x - mn), m = mn;
  }
  lm[lid] = m, ll[lid] = l;
  for (int w = SM_WG / 2; w > 0; w /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < w) {
      const float m2 = lm[lid + w], mn = fmax(m, m2);
      if (mn != -INFINITY) l = l * exp(m - mn) + ll[lid + w] * exp(m2 - mn), m = mn;
      lm[lid] = m, ll[lid] = l;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  m = lm[0], l = ll[0];
  const float inv = m == -INFINITY ? 0.0f : 1.0f / l;
  for (int j = lid; j < nk; j += SM_WG) p[j] = m == -INFINITY ? 0.0f : exp(p[j] - m) * inv;
  if (lid == 0) lse[get_group_id(0)] = m == -INFINITY ? -INFINITY : m + log(l);
}

/* grid: (ceil(Dv/64)*16, ceil(Nq/64)*16, B*H), work-groups 16x16. */
__kernel __attribute__((reqd_work_group_size(WG, WG, 1)))
void bl_pv(__global const float *s, __global const T *v, __global T *o, int nq, int nk, int h,
           int hkv, int dv) {
  __local float ps[SLICE][TILE + 1], vs[SLICE][TILE + 1];
  const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * WG + tx;
  const int bh = get_group_id(2), b = bh / h, hq = bh % h, hk = hq / (h / hkv);
  const int i0 = get_group_id(1) * TILE, x0 = get_group_id(0) * TILE;
  float acc[4][4] = {{0}};
  for (int j0 = 0; j0 < nk; j0 += SLICE) {
    for (int l = lid; l < TILE * SLICE; l += WG * WG) {
      const int r = l / SLICE, j = j0 + l % SLICE, i = i0 + r; /* P: 64 rows x 16 keys */
      ps[l % SLICE][r] = i < nq && j < nk ? s[((long)bh * nq + i) * nk + j] : 0.0f;
      const int jj = j0 + l / TILE, x = x0 + l % TILE;         /* V: 16 keys x 64 dims */
      vs[l / TILE][l % TILE] =
          jj < nk && x < dv ? LOAD(v, ((long)(b * nk + jj) * hkv + hk) * dv + x) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = 0; j < SLICE; j++) {
      float pa[4], vb[4];
      for (int r = 0; r < 4; r++) pa[r] = ps[j][ty + WG * r], vb[r] = vs[j][tx + WG * r];
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = mad(pa[r], vb[c], acc[r][c]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 4; c++) {
      const int i = i0 + ty + WG * r, x = x0 + tx + WG * c;
      if (i < nq && x < dv) STORE(o, ((long)(b * nq + i) * h + hq) * dv + x, acc[r][c]);
    }
}
