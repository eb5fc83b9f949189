"""attention_with_kvcache (flash-attn's flash_attn_with_kvcache) on
fcl_attention_kvcache, and merge_states (FlashInfer's name) on
fcl_attention_merge."""
import ctypes

import numpy as np

from . import _capi
from ._errors import invalid
from ._tensors import (check_dtype_arg, empty, expect_shape, int32_array, output, raw,
                       resolve_context, scale_arg, tensor, window_arg)
from ._attention import _cu_seqlens

lib = _capi.lib


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, *, rotary_cos=None,
                           rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                           block_table=None, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, rotary_interleaved=True,
                           alibi_slopes=None, num_splits=0, return_lse=False,
                           return_softmax_lse=None, out=None, dtype=None, context=None):
    """Attention of new tokens against a KV cache, as flash_attn_with_kvcache.

    q: (batch, seqlen_q, heads_q, head_dim). k_cache, v_cache: (batch_cache,
    capacity, heads_kv, head_dim[_v]), or with block_table (int32 (batch,
    pages_per_sequence)) paged: (num_pages, page_size, heads_kv, ...).
    cache_seqlens: int or int32 (batch,): tokens cached before the call
    (None: the whole capacity); cache_batch_idx: int32 (batch,) rows of a
    contiguous cache. k, v (batch, seqlen_q, heads_kv, ...): appended to the
    cache in place at positions cache_seqlens[b] + i before attending (the
    caller then adds seqlen_q to its cache_seqlens). rotary_cos/sin: float32
    (positions, rotary_dim / 2), rotating q and k at position
    cache_seqlens[b] + i (rotary_interleaved: pairs (2i, 2i+1), else
    (i, i + rotary_dim / 2)). The queries are the last seqlen_q keys
    (causal bottom-right). num_splits 0: the library chooses.

    Returns out (like q, head_dim_v) and, with return_lse (flash-attn's
    return_softmax_lse), the float32 lse (batch, heads_q, seqlen_q).
    """
    if return_softmax_lse is not None:
        return_lse = return_softmax_lse
    check_dtype_arg(dtype)
    ctx = resolve_context(context, (q, k_cache, v_cache, k, v, out))
    tq = tensor(q, "q", dtype)
    tkc, tvc = tensor(k_cache, "k_cache", dtype), tensor(v_cache, "v_cache", dtype)
    d, keep = _capi.kvcache_desc(), []
    d.batch, d.seqlen_q, d.heads_q, d.head_dim = q.shape
    d.heads_kv, d.head_dim_v = k_cache.shape[2], v_cache.shape[3]
    expect_shape(k_cache, "k_cache", k_cache.shape[:3] + (d.head_dim,), "head_dim of q")
    expect_shape(v_cache, "v_cache", k_cache.shape[:3] + (d.head_dim_v,),
                 "slots, tokens and heads of k_cache")
    if block_table is not None:
        bt, _ = int32_array(ctx, block_table, "block_table")
        keep.append(bt)
        if bt.ndim != 2:
            raise invalid("block_table: has shape %s, must be (batch, pages per sequence)"
                          % (bt.shape,))
        d.block_table = raw(bt, "block_table", np.int32, (d.batch, bt.shape[1]),
                            "batch, pages per sequence")
        d.page_size, d.num_pages = k_cache.shape[1], k_cache.shape[0]
        d.cache_capacity = bt.shape[1] * d.page_size
    else:
        d.cache_capacity, d.cache_batch = k_cache.shape[1], k_cache.shape[0]
    if cache_seqlens is None:
        cache_seqlens = d.cache_capacity
    if np.ndim(cache_seqlens) == 0 and not hasattr(cache_seqlens, "queue"):
        cache_seqlens = np.full(d.batch, int(cache_seqlens), np.int32)
    for name, x in (("cache_seqlens", cache_seqlens), ("cache_batch_idx", cache_batch_idx)):
        arr, _ = int32_array(ctx, x, name)
        keep.append(arr)
        setattr(d, name, raw(arr, name, np.int32, (d.batch,), "batch"))
    tk = tv = None
    if k is not None:
        expect_shape(k, "k", (d.batch, d.seqlen_q, d.heads_kv, d.head_dim),
                     "batch, seqlen of q, heads_kv, head_dim")
        tk = tensor(k, "k", dtype)
    if v is not None:
        expect_shape(v, "v", (d.batch, d.seqlen_q, d.heads_kv, d.head_dim_v),
                     "batch, seqlen of q, heads_kv, head_dim_v")
        tv = tensor(v, "v", dtype)
    if rotary_cos is not None or rotary_sin is not None:
        shape = (rotary_cos if rotary_cos is not None else rotary_sin).shape
        if len(shape) != 2:
            raise invalid("rotary_cos: has shape %s, must be (positions, rotary_dim / 2)"
                          % (shape,))
        d.rotary_positions, d.rotary_dim = shape[0], 2 * shape[1]
        d.rotary_cos = raw(rotary_cos, "rotary_cos", np.float32, shape,
                           "positions, rotary_dim / 2")
        d.rotary_sin = raw(rotary_sin, "rotary_sin", np.float32, shape, "as rotary_cos")
        d.rotary_interleaved = 1 if rotary_interleaved else 0
    d.softmax_scale = scale_arg(softmax_scale)
    d.causal = 1 if causal else 0
    d.window_left, d.window_right = window_arg(window_size)
    d.softcap = float(softcap)
    d.alibi_slopes = raw(alibi_slopes, "alibi_slopes", np.float32, (d.heads_q,), "heads_q")
    d.num_splits = int(num_splits)
    o = output(ctx, out, "out", q.shape[:3] + (d.head_dim_v,), q,
               "q's shape with head_dim_v")
    to = tensor(o, "out", dtype)
    lse = empty(ctx, (d.batch, d.heads_q, d.seqlen_q), np.float32) if return_lse else None
    ref = ctypes.byref
    ctx.call(lib.fcl_attention_kvcache, ref(d), ref(tq), ref(tkc), ref(tvc),
             ref(tk) if tk is not None else None, ref(tv) if tv is not None else None,
             ref(to), lse.base_data.int_ptr if lse is not None else None)
    del keep
    return (o, lse) if return_lse else o


def merge_states(v, s, *, out=None, out_lse=None, cu_seqlens_q=None, max_seqlen_q=None,
                 dtype=None, context=None):
    """Merges partial attention results of the same queries over disjoint
    key sets: lse = log(sum_i exp(s_i)), o = sum_i exp(s_i - lse) v_i.

    v: a sequence of n outputs (batch, seqlen, heads, head_dim), or with
    cu_seqlens_q (tokens, heads, head_dim); s: their float32 lse (batch,
    heads, seqlen), varlen (heads, tokens), natural log as attention's
    return_lse (FlashInfer's merge_states takes log2). Parts may differ in
    dtype; out may be v[0] and out_lse s[0] (in place). Returns (o, lse).
    """
    check_dtype_arg(dtype)
    v, s = list(v), list(s)
    if not v or len(v) != len(s):
        raise invalid("v, s: %d outputs and %d lse; give as many of each, at least one"
                      % (len(v), len(s)))
    ctx = resolve_context(context, v + s + [out, out_lse])
    d, keep = _capi.attention_desc(), []
    varlen = cu_seqlens_q is not None
    nd = 3 if varlen else 4
    first = v[0]
    if getattr(first, "ndim", None) != nd:
        raise invalid("v[0]: has %s dimensions, must have %d" % (
            getattr(first, "ndim", "no"), nd))
    d.heads_q, d.head_dim_v = first.shape[-2:]
    if varlen:
        d.cu_seqlens_q, d.cu_seqlens_q_host, d.seqlen_q, d.batch = _cu_seqlens(
            ctx, cu_seqlens_q, "cu_seqlens_q", max_seqlen_q, keep)
        lse_shape = (d.heads_q, first.shape[0])
    else:
        d.batch, d.seqlen_q = first.shape[:2]
        lse_shape = (d.batch, d.heads_q, d.seqlen_q)
    d.heads_kv, d.head_dim = d.heads_q, d.head_dim_v
    parts = (_capi.Tensor * len(v))()
    lses = (_capi.cl_mem * len(v))()
    for i, (vi, si) in enumerate(zip(v, s)):
        expect_shape(vi, "v[%d]" % i, first.shape, "v[0]'s shape")
        parts[i] = tensor(vi, "v[%d]" % i, dtype, nd)
        lses[i] = raw(si, "s[%d]" % i, np.float32, lse_shape, "v's lse")
    o = output(ctx, out, "out", first.shape, out if out is not None else first, "v's shape")
    to = tensor(o, "out", dtype, nd)
    if out_lse is None:
        out_lse = empty(ctx, lse_shape, np.float32)
    lse_mem = raw(out_lse, "out_lse", np.float32, lse_shape, "v's lse")
    ctx.call(lib.fcl_attention_merge, ctypes.byref(d), len(v), parts, lses,
             ctypes.byref(to), lse_mem)
    del keep
    return o, out_lse
