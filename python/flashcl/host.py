"""The operations on numpy arrays, for trying flashcl without managing
device buffers: each call copies its numpy inputs to the device, runs the
pyopencl function of the same name and keywords, waits, and copies the
results back. That is slower than keeping the arrays on the device (a copy
each way and a wait per call); use the pyopencl functions for real work.

The context is context=, else flashcl.Context() made once (device
$FCL_DEVICE, else the first GPU, else a CPU). bf16 arrays are uint16 with
dtype="bf16"; to_bf16 and from_bf16 convert from and to float32.
"""
import numpy as np
import pyopencl.array as cl_array

from . import _attention as _att
from . import _kvcache as _kv
from . import _rwkv6 as _rw
from . import _rwkv7 as _rw7
from ._context import default_context

_HOST_KEYWORDS = ("cu_seqlens", "cu_seqlens_q", "cu_seqlens_k")  # taken as host values


def to_bf16(x):
    """float32 values to bf16 bits (uint16), rounded to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, (u >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)


def from_bf16(b):
    """bf16 bits (uint16) to float32 values (exact)."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _context(context):
    return default_context() if context is None else context


def _dev(ctx, x):
    if isinstance(x, np.ndarray):
        return cl_array.to_device(ctx.queue, np.ascontiguousarray(x))
    if isinstance(x, (list, tuple)):
        return type(x)(_dev(ctx, y) for y in x)
    return x


def _kwargs(ctx, kwargs):
    return {n: (x if n in _HOST_KEYWORDS else _dev(ctx, x)) for n, x in kwargs.items()}


def _get(x):
    if isinstance(x, cl_array.Array):
        return x.get()
    if isinstance(x, tuple):
        return tuple(_get(y) for y in x)
    return x


def attention(q, k, v, *, context=None, **kwargs):
    """flashcl.attention on numpy arrays: returns o (and lse) as numpy."""
    ctx = _context(context)
    return _get(_att.attention(*_dev(ctx, (q, k, v)), context=ctx, **_kwargs(ctx, kwargs)))


def attention_backward(dout, q, k, v, out, lse, *, context=None, **kwargs):
    """flashcl.attention_backward on numpy arrays: returns (dq, dk, dv)."""
    ctx = _context(context)
    return _get(_att.attention_backward(*_dev(ctx, (dout, q, k, v, out, lse)), context=ctx,
                                        **_kwargs(ctx, kwargs)))


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, *, context=None, **kwargs):
    """flashcl.attention_with_kvcache on numpy arrays. With k and v, the new
    tokens are written into the numpy k_cache and v_cache, as the pyopencl
    function writes them into its device caches."""
    ctx = _context(context)
    kc, vc = _dev(ctx, (k_cache, v_cache))
    res = _kv.attention_with_kvcache(*_dev(ctx, (q,)), kc, vc, *_dev(ctx, (k, v)),
                                     context=ctx, **_kwargs(ctx, kwargs))
    res = _get(res)
    if k is not None or v is not None:
        k_cache[...] = kc.get()
        v_cache[...] = vc.get()
    return res


def merge_states(v, s, *, context=None, **kwargs):
    """flashcl.merge_states on numpy arrays: returns (o, lse)."""
    ctx = _context(context)
    return _get(_kv.merge_states(_dev(ctx, list(v)), _dev(ctx, list(s)), context=ctx,
                                 **_kwargs(ctx, kwargs)))


def rwkv6(r, k, v, w, u, *args, context=None, **kwargs):
    """flashcl.rwkv6 on numpy arrays: returns (o, final_state)."""
    ctx = _context(context)
    return _get(_rw.rwkv6(*_dev(ctx, (r, k, v, w, u) + args), context=ctx,
                          **_kwargs(ctx, kwargs)))


def rwkv6_backward(do, r, k, v, w, u, *args, context=None, **kwargs):
    """flashcl.rwkv6_backward on numpy arrays: (dr, dk, dv, dw, du, dh0)."""
    ctx = _context(context)
    return _get(_rw.rwkv6_backward(*_dev(ctx, (do, r, k, v, w, u) + args), context=ctx,
                                   **_kwargs(ctx, kwargs)))


def rwkv7(r, w, k, v, a, b, *args, context=None, **kwargs):
    """flashcl.rwkv7 on numpy arrays: returns (o, final_state)."""
    ctx = _context(context)
    return _get(_rw7.rwkv7(*_dev(ctx, (r, w, k, v, a, b) + args), context=ctx,
                           **_kwargs(ctx, kwargs)))


def rwkv7_backward(do, r, w, k, v, a, b, *args, context=None, **kwargs):
    """flashcl.rwkv7_backward on numpy arrays: (dr, dw, dk, dv, da, db, dh0)."""
    ctx = _context(context)
    return _get(_rw7.rwkv7_backward(*_dev(ctx, (do, r, w, k, v, a, b) + args), context=ctx,
                                    **_kwargs(ctx, kwargs)))
