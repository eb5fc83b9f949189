"""Double-precision (numpy float64) references for the tests, written from
flashcl.h's semantics (DESIGN.md), fed with inputs already rounded to the
tested dtype. Attention works on one sequence: q (Sq, Hq, D), k (Sk, Hkv, D),
v (Sk, Hkv, Dv); batches and packed batches loop over it."""
import numpy as np


# ---- Philox-4x32-10 and the dropout mask ------------------------------------
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Ten rounds (Salmon et al., SC'11) on uint64 arrays holding 32-bit words."""
    m32 = np.uint64(0xFFFFFFFF)
    c = [np.asarray(x, np.uint64) & m32 for x in (c0, c1, c2, c3)]
    k = [np.asarray(x, np.uint64) & m32 for x in (k0, k1)]
    for r in range(10):
        if r:
            k = [(k[0] + np.uint64(0x9E3779B9)) & m32, (k[1] + np.uint64(0xBB67AE85)) & m32]
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & m32
        hi1, lo1 = p1 >> np.uint64(32), p1 & m32
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
    return c


def dropout_keep(seed, offset, p, b, heads_q, seqlen_q, seqlen_k, rows, cols):
    """Keep mask (Hq, rows, cols) of sequence b: element n = ((b * Hq + h) *
    seqlen_q + i) * seqlen_k + j is kept iff Philox word n % 4 of counter
    (n/4, offset) and key seed reaches (uint32)(p * 2^32)."""
    h, i, j = np.meshgrid(np.arange(heads_q), np.arange(rows), np.arange(cols), indexing="ij")
    n = (((b * heads_q + h) * seqlen_q + i) * seqlen_k + j).astype(np.uint64)
    g = n // np.uint64(4)
    w = philox4x32_10(g & np.uint64(0xFFFFFFFF), g >> np.uint64(32), offset & 0xFFFFFFFF,
                      offset >> 32, seed & 0xFFFFFFFF, seed >> 32)
    word = np.choose((n % np.uint64(4)).astype(np.int64), w)
    return word >= np.uint64(int(p * 4294967296.0))


# ---- attention ---------------------------------------------------------------
def _logits(q, k, scale, causal, window, softcap, alibi):
    """Scores (Hq, Sq, Sk) after softcap and ALiBi, the visibility mask, and
    tanh(s / softcap) for the backward pass."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[:2]
    kk = np.repeat(k, hq // hkv, axis=1)
    s = np.einsum("ihd,jhd->hij", q, kk) * (1.0 / np.sqrt(d) if scale is None else scale)
    th = None
    if softcap:
        th = np.tanh(s / softcap)
        s = softcap * th
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    diag = i + sk - sq
    if alibi is not None:
        s = s - np.asarray(alibi, np.float64)[:, None, None] * np.abs(diag - j)[None]
    vis = np.ones((sq, sk), bool)
    left, right = window
    if causal:
        vis &= j <= diag
    if left >= 0:
        vis &= j >= diag - left
    if right >= 0:
        vis &= j <= diag + right
    return s, np.broadcast_to(vis, s.shape), th


def logit_bound(q, k, scale=None, causal=False, window=(-1, -1), alibi=None):
    """ref_attention_logit_bound: the largest scale * sum|q_c k_c| + |ALiBi
    bias| over the visible pairs of one sequence."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[:2]
    kk = np.abs(np.repeat(k, hq // hkv, axis=1))
    s = np.einsum("ihd,jhd->hij", np.abs(q), kk) * abs(1.0 / np.sqrt(d) if scale is None
                                                      else scale)
    if alibi is not None:
        dist = np.abs(np.arange(sq)[:, None] + sk - sq - np.arange(sk)[None, :])
        s = s + np.abs(np.asarray(alibi, np.float64))[:, None, None] * dist[None]
    _, vis, _ = _logits(q, k, scale, causal, window, 0.0, None)
    return float(np.max(np.where(vis, s, 0.0), initial=0.0))


def attention(q, k, v, scale=None, causal=False, window=(-1, -1), softcap=0.0, alibi=None,
              keep=None, p=0.0):
    """o (Sq, Hq, Dv) and lse (Hq, Sq); rows that see no key: o 0, lse -inf."""
    s, vis, _ = _logits(q, k, scale, causal, window, softcap, alibi)
    sm = np.where(vis, s, -np.inf)
    m = np.max(sm, axis=2, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(vis, np.exp(sm - m), 0.0)
    den = e.sum(axis=2, keepdims=True)
    P = np.where(den > 0, e / np.where(den > 0, den, 1.0), 0.0)
    lse = np.where(den[..., 0] > 0, np.log(np.where(den[..., 0] > 0, den[..., 0], 1.0))
                   + m[..., 0], -np.inf)
    if keep is not None:
        P = P * keep / (1.0 - p)
    vv = np.repeat(v, q.shape[1] // k.shape[1], axis=1)
    return np.einsum("hij,jhd->ihd", P, vv), lse


def attention_grad(q, k, v, do, scale=None, causal=False, window=(-1, -1), softcap=0.0,
                   alibi=None, keep=None, p=0.0):
    """dq, dk, dv of attention (GQA: dk, dv summed over a group's heads)."""
    sq, hq, d = q.shape
    hkv = k.shape[1]
    g = hq // hkv
    sc = 1.0 / np.sqrt(d) if scale is None else scale
    s, vis, th = _logits(q, k, scale, causal, window, softcap, alibi)
    sm = np.where(vis, s, -np.inf)
    m = np.max(sm, axis=2, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(vis, np.exp(sm - m), 0.0)
    den = e.sum(axis=2, keepdims=True)
    P = np.where(den > 0, e / np.where(den > 0, den, 1.0), 0.0)
    drop = keep / (1.0 - p) if keep is not None else 1.0
    Pd = P * drop
    vv = np.repeat(v, g, axis=1)
    kk = np.repeat(k, g, axis=1)
    dv = np.einsum("hij,ihd->jhd", Pd, do)
    dP = np.einsum("ihd,jhd->hij", do, vv) * drop
    dS = P * (dP - np.sum(P * dP, axis=2, keepdims=True))
    if softcap:
        dS = dS * (1.0 - th * th)
    dq = np.einsum("hij,jhd->ihd", dS, kk) * sc
    dk = np.einsum("hij,ihd->jhd", dS, q) * sc
    sum_group = lambda x: x.reshape(x.shape[0], hkv, g, x.shape[2]).sum(axis=2)
    return dq, sum_group(dk), sum_group(dv)


# ---- KV cache ------------------------------------------------------------------
def rotate(x, cos, sin, pos, interleaved):
    """x (n, heads, D) rotated at positions pos (n,) on its first 2 * cos.shape[1] dims."""
    x = x.copy()
    r = cos.shape[1]
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]
    if interleaved:
        a, b = x[..., 0:2 * r:2].copy(), x[..., 1:2 * r:2].copy()
        x[..., 0:2 * r:2], x[..., 1:2 * r:2] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., :r].copy(), x[..., r:2 * r].copy()
        x[..., :r], x[..., r:2 * r] = a * c - b * s, b * c + a * s
    return x


# ---- RWKV6 -----------------------------------------------------------------------
def rwkv6(r, k, v, w, u, scale, h0=None, reverse=False):
    """One sequence: r, k, w (T, H, K), v (T, H, V), u (H, K); returns o
    (T, H, V), the final state (H, K, V) and the states before each step."""
    T, H, K = r.shape
    S = np.zeros((H, K, v.shape[2])) if h0 is None else h0.copy()
    o = np.zeros(v.shape)
    states = [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        states[t] = S
        kv = k[t][:, :, None] * v[t][:, None, :]
        o[t] = scale * np.einsum("hi,hij->hj", r[t], S + u[:, :, None] * kv)
        S = S * np.exp(w[t])[:, :, None] + kv
    return o, S, states


def rwkv6_grad(r, k, v, w, u, scale, do, h0=None, dht=None, reverse=False):
    """dr, dk, dv, dw, du, dh0 of rwkv6 for one sequence (backpropagation
    through the recurrence, step by step)."""
    _, _, states = rwkv6(r, k, v, w, u, scale, h0, reverse)
    T, H, K = r.shape
    G = np.zeros((H, K, v.shape[2])) if dht is None else dht.copy()
    dr, dk, dv, dw = (np.zeros(x.shape) for x in (r, k, v, w))
    du = np.zeros(u.shape)
    for t in (range(T) if reverse else range(T - 1, -1, -1)):
        S, e = states[t], np.exp(w[t])
        kv = k[t][:, :, None] * v[t][:, None, :]
        dov = np.einsum("hj,hj->h", do[t], v[t])
        dr[t] = scale * (np.einsum("hij,hj->hi", S, do[t]) + u * k[t] * dov[:, None])
        du += scale * r[t] * k[t] * dov[:, None]
        dk[t] = scale * r[t] * u * dov[:, None] + np.einsum("hij,hj->hi", G, v[t])
        dv[t] = scale * np.einsum("hi,hj->hj", r[t] * u * k[t], do[t]) \
            + np.einsum("hij,hi->hj", G, k[t])
        dw[t] = e * np.einsum("hij,hij->hi", G, S)
        G = G * e[:, :, None] + scale * r[t][:, :, None] * do[t][:, None, :]
    return dr, dk, dv, dw, du, G


# ---- RWKV7 -----------------------------------------------------------------------
def rwkv7(r, w, k, v, a, b, scale, h0=None, reverse=False):
    """One sequence: r, w, k, a, b (T, H, K), v (T, H, V); returns o (T, H, V),
    the final state (H, K, V) and the states before each step:
        S = diag(exp(w_t)) S + b_t (a_t^T S) + k_t v_t^T,  o_t = scale r_t^T S."""
    T, H, K = r.shape
    S = np.zeros((H, K, v.shape[2])) if h0 is None else h0.copy()
    o = np.zeros(v.shape)
    states = [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        states[t] = S
        sa = np.einsum("hi,hij->hj", a[t], S)
        S = np.exp(w[t])[:, :, None] * S + b[t][:, :, None] * sa[:, None, :] \
            + k[t][:, :, None] * v[t][:, None, :]
        o[t] = scale * np.einsum("hi,hij->hj", r[t], S)
    return o, S, states


def rwkv7_grad(r, w, k, v, a, b, scale, do, h0=None, dht=None, reverse=False):
    """dr, dw, dk, dv, da, db, dh0 of rwkv7 for one sequence
    (backpropagation through the recurrence, step by step)."""
    _, _, states = rwkv7(r, w, k, v, a, b, scale, h0, reverse)
    T, H, K = r.shape
    G = np.zeros((H, K, v.shape[2])) if dht is None else dht.copy()
    dr, dw, dk, dv, da, db = (np.zeros(x.shape) for x in (r, w, k, v, a, b))
    for t in (range(T) if reverse else range(T - 1, -1, -1)):
        S, e = states[t], np.exp(w[t])
        sa = np.einsum("hi,hij->hj", a[t], S)
        S1 = e[:, :, None] * S + b[t][:, :, None] * sa[:, None, :] \
            + k[t][:, :, None] * v[t][:, None, :]
        G = G + scale * r[t][:, :, None] * do[t][:, None, :]
        dr[t] = scale * np.einsum("hij,hj->hi", S1, do[t])
        dk[t] = np.einsum("hij,hj->hi", G, v[t])
        dv[t] = np.einsum("hij,hi->hj", G, k[t])
        dw[t] = e * np.einsum("hij,hij->hi", G, S)
        db[t] = np.einsum("hij,hj->hi", G, sa)
        gb = np.einsum("hi,hij->hj", b[t], G)
        da[t] = np.einsum("hij,hj->hi", S, gb)
        G = e[:, :, None] * G + a[t][:, :, None] * gb[:, None, :]
    return dr, dw, dk, dv, da, db, G
