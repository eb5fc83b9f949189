"""attention and attention_backward: fcl_attention_forward and _backward
with flash-attn's names (flash_attn_func, flash_attn_varlen_func)."""
import ctypes

import numpy as np

from . import _capi
from ._errors import invalid
from ._config import config_info_of
from ._tensors import (check_dtype_arg, empty, expect_shape, fcl_dtype, int32_array, output, raw,
                       resolve_context, scale_arg, tensor, window_arg)

lib = _capi.lib
_I32P = ctypes.POINTER(ctypes.c_int32)


def _cu_seqlens(ctx, cu, name, max_seqlen, keep):
    """Device cu_seqlens, its host copy (or NULL) and the longest length."""
    arr, host = int32_array(ctx, cu, name)
    if arr.ndim != 1 or arr.shape[0] < 2:
        raise invalid("%s: has shape %s, must be (batch + 1,)" % (name, arr.shape))
    buf = raw(arr, name, np.int32, arr.shape, "batch + 1 prefix sums")
    if max_seqlen is None:
        if host is None:
            host = arr.get()  # waits for the queue, as the library would
        max_seqlen = int(np.max(np.diff(host.astype(np.int64)), initial=0))
    keep += [arr, host]
    hp = host.ctypes.data_as(_I32P) if host is not None else None
    return buf, hp, int(max_seqlen), arr.shape[0] - 1


def attention_desc(ctx, q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1),
                   softcap=0.0, alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None,
                   max_seqlen_q=None, max_seqlen_k=None, dropout_p=0.0, seed=None,
                   dropout_offset=0, dtype=None):
    """The fcl_attention_desc of a call, the expected shapes of o and lse,
    and the objects the desc points into (kept alive through the call)."""
    check_dtype_arg(dtype)
    d, keep = _capi.attention_desc(), []
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise invalid("cu_seqlens_q, cu_seqlens_k: give both or neither")
    nd = 3 if varlen else 4
    for name, a in (("q", q), ("k", k), ("v", v)):
        if getattr(a, "ndim", None) != nd:
            raise invalid("%s: has %s dimensions, must have %d (%s)" % (
                name, getattr(a, "ndim", "no"), nd, "tokens, heads, head_dim" if varlen
                else "batch, seqlen, heads, head_dim"))
    heads_q, head_dim = q.shape[-2:]
    heads_kv, head_dim_v = k.shape[-2], v.shape[-1]
    if varlen:
        d.cu_seqlens_q, d.cu_seqlens_q_host, d.seqlen_q, d.batch = _cu_seqlens(
            ctx, cu_seqlens_q, "cu_seqlens_q", max_seqlen_q, keep)
        d.cu_seqlens_k, d.cu_seqlens_k_host, d.seqlen_k, batch_k = _cu_seqlens(
            ctx, cu_seqlens_k, "cu_seqlens_k", max_seqlen_k, keep)
        if batch_k != d.batch:
            raise invalid("cu_seqlens_k: has %d entries, cu_seqlens_q %d" % (
                batch_k + 1, d.batch + 1))
        expect_shape(k, "k", (k.shape[0], heads_kv, head_dim), "tokens, heads_kv, head_dim")
        expect_shape(v, "v", (k.shape[0], heads_kv, head_dim_v), "tokens as k, heads_kv")
        o_shape = (q.shape[0], heads_q, head_dim_v)
        lse_shape = (heads_q, q.shape[0])
    else:
        d.batch, d.seqlen_q, d.seqlen_k = q.shape[0], q.shape[1], k.shape[1]
        expect_shape(k, "k", (d.batch, d.seqlen_k, heads_kv, head_dim),
                     "batch, seqlen_k, heads_kv, head_dim of q")
        expect_shape(v, "v", (d.batch, d.seqlen_k, heads_kv, head_dim_v),
                     "batch, seqlen_k, heads_kv of k")
        o_shape = (d.batch, d.seqlen_q, heads_q, head_dim_v)
        lse_shape = (d.batch, heads_q, d.seqlen_q)
    d.heads_q, d.heads_kv, d.head_dim, d.head_dim_v = heads_q, heads_kv, head_dim, head_dim_v
    d.softmax_scale = scale_arg(softmax_scale)
    d.causal = 1 if causal else 0
    d.window_left, d.window_right = window_arg(window_size)
    d.softcap = float(softcap)
    d.alibi_slopes = raw(alibi_slopes, "alibi_slopes", np.float32, (heads_q,), "heads_q")
    d.dropout_p = float(dropout_p)
    if dropout_p:
        if seed is None:
            raise invalid("seed: dropout_p > 0 needs a seed (the backward pass "
                          "regenerates the mask from seed and dropout_offset)")
        d.dropout_seed = int(seed) & (2**64 - 1)
        d.dropout_offset = int(dropout_offset) & (2**64 - 1)
    return d, o_shape, lse_shape, keep


def attention(q, k, v, *, softmax_scale=None, causal=False, window_size=(-1, -1),
              softcap=0.0, alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None,
              max_seqlen_q=None, max_seqlen_k=None, dropout_p=0.0, seed=None,
              dropout_offset=0, return_lse=False, out=None, dtype=None, context=None):
    """o = softmax(softmax_scale * q k^T + bias, masked) v (FlashAttention-2).

    q: (batch, seqlen_q, heads_q, head_dim); k: (batch, seqlen_k, heads_kv,
    head_dim); v: (batch, seqlen_k, heads_kv, head_dim_v), any strides with
    the last one 1. With cu_seqlens_q/k (int32, batch + 1 prefix sums; a
    pyopencl array, or host values that are uploaded) the batch is packed:
    q (total_q, heads_q, head_dim), k and v (total_k, heads_kv, ...);
    max_seqlen_q/k default to the longest (read back when device arrays).

    softmax_scale None is 1/sqrt(head_dim); causal is aligned bottom-right;
    window_size (left, right), -1 unlimited; softcap > 0 applies
    softcap * tanh(s / softcap); alibi_slopes: float32 (heads_q,) array.
    dropout_p > 0 needs seed (and dropout_offset): the Philox mask of
    flashcl.h, which attention_backward regenerates from them.

    float32 or float16 arrays, or bf16 as uint16 arrays with dtype="bf16".
    Returns o (like q, head_dim_v), and with return_lse the float32 lse
    (batch, heads_q, seqlen_q), varlen (heads_q, total_q). Work is enqueued
    on the context's queue (that of q unless context= is given).
    """
    ctx = resolve_context(context, (q, k, v, out))
    d, o_shape, lse_shape, keep = attention_desc(
        ctx, q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes,
        cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, seed,
        dropout_offset, dtype)
    nd = q.ndim
    tq, tk, tv = (tensor(a, n, dtype, nd) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    o = output(ctx, out, "out", o_shape, q, "q's shape with head_dim_v")
    to = tensor(o, "out", dtype, nd)
    lse = empty(ctx, lse_shape, np.float32) if return_lse else None
    ctx.call(lib.fcl_attention_forward, ctypes.byref(d), ctypes.byref(tq),
             ctypes.byref(tk), ctypes.byref(tv), ctypes.byref(to),
             lse.base_data.int_ptr if lse is not None else None)
    del keep
    return (o, lse) if return_lse else o


def attention_backward(dout, q, k, v, out, lse, dq=None, dk=None, dv=None, *,
                       softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                       alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None,
                       max_seqlen_q=None, max_seqlen_k=None, dropout_p=0.0, seed=None,
                       dropout_offset=0, dtype=None, context=None):
    """Gradients of attention (flash-attn's _flash_attn_backward): given
    dout (like out), q, k, v, the forward's out and lse (return_lse=True)
    and the forward's keywords, returns (dq, dk, dv) like q, k, v (written
    into dq, dk, dv when given). Deterministic; with GQA dk, dv sum over
    the query heads of a group; dropout regenerates the forward's mask."""
    ctx = resolve_context(context, (dout, q, k, v, out, lse, dq, dk, dv))
    d, o_shape, lse_shape, keep = attention_desc(
        ctx, q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes,
        cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, seed,
        dropout_offset, dtype)
    nd = q.ndim
    expect_shape(out, "out", o_shape, "the forward's output")
    expect_shape(dout, "dout", o_shape, "the forward's output")
    lse_mem = raw(lse, "lse", np.float32, lse_shape, "the forward's lse")
    dq = output(ctx, dq, "dq", q.shape, q, "q's shape")
    dk = output(ctx, dk, "dk", k.shape, q, "k's shape, q's dtype")
    dv = output(ctx, dv, "dv", v.shape, q, "v's shape, q's dtype")
    t = [tensor(a, n, dtype, nd) for a, n in ((q, "q"), (k, "k"), (v, "v"), (out, "out"),
                                             (dout, "dout"), (dq, "dq"), (dk, "dk"),
                                             (dv, "dv"))]
    r = [ctypes.byref(x) for x in t]
    ctx.call(lib.fcl_attention_backward, ctypes.byref(d), r[0], r[1], r[2], r[3], lse_mem,
             r[4], r[5], r[6], r[7])
    del keep
    return dq, dk, dv


def attention_config(q, k, v, *, backward=False, dtype=None, context=None, **kwargs):
    """The kernel, parameters and their origin (tuning database or built-in
    defaults) that attention (backward=True: attention_backward) would use
    with these arrays and keywords, as a flashcl.ConfigInfo."""
    ctx = resolve_context(context, (q, k, v))
    d, _, _, keep = attention_desc(ctx, q, k, v, dtype=dtype, **kwargs)
    info = config_info_of(ctx, lib.fcl_attention_config, d, fcl_dtype(q, "q", dtype),
                          backward)
    del keep
    return info
