"""rwkv6 and rwkv6_backward: fcl_rwkv6_forward and _backward with the
names of fla's chunk_rwkv6 (flash-linear-attention)."""
import ctypes

import numpy as np

from . import _capi
from ._config import config_info_of
from ._context import RWKV6_ALGORITHMS
from ._errors import invalid
from ._rwkv import check_4d, fill_sequences
from ._tensors import (check_dtype_arg, empty, expect_shape, fcl_dtype, output, raw,
                       resolve_context, tensor)

lib = _capi.lib


def rwkv6_desc(ctx, r, k, v, w, scale=None, reverse=False, cu_seqlens=None,
               algorithm=None, dtype=None):
    """The fcl_rwkv6_desc of a call, the state shape and kept objects."""
    check_dtype_arg(dtype)
    d, keep = _capi.rwkv6_desc(), []
    check_4d((("r", r), ("k", k), ("v", v), ("w", w)))
    state = fill_sequences(ctx, d, r, v, (("k", k), ("w", w)), cu_seqlens, scale, reverse, keep)
    alg = "auto" if algorithm is None else str(algorithm).lower()
    if alg not in RWKV6_ALGORITHMS:
        raise invalid("algorithm: %r is not one of %s" % (algorithm, ", ".join(
            RWKV6_ALGORITHMS)))
    d.algorithm = RWKV6_ALGORITHMS[alg]
    return d, state, keep


def rwkv6(r, k, v, w, u, scale=None, initial_state=None, output_final_state=False,
          reverse=False, cu_seqlens=None, *, algorithm=None, out=None, dtype=None,
          context=None):
    """RWKV6 linear attention, as fla's chunk_rwkv6. Per (batch, head), from
    S = initial_state (or 0), for each step t (last to first if reverse):
        o_t[j] = sum_i scale * r_t[i] * (S[i][j] + u[i] * k_t[i] * v_t[j])
        S[i][j] = S[i][j] * exp(w_t[i]) + k_t[i] * v_t[j]
    r, k, w (log decay): (batch, seqlen, heads, K); v: (..., V); u: (heads, K)
    in r's dtype; states float32 (batch, heads, K, V). cu_seqlens (int32,
    N + 1): N sequences packed along seqlen of batch 1, states (N, ...).
    scale None: 1/sqrt(K). algorithm: None/"auto", "recurrent", "chunked".
    Returns (o, final_state); final_state is None unless output_final_state.
    """
    ctx = resolve_context(context, (r, k, v, w, u, initial_state, out))
    d, state_shape, keep = rwkv6_desc(ctx, r, k, v, w, scale, reverse, cu_seqlens,
                                      algorithm, dtype)
    t = [tensor(a, n, dtype) for a, n in ((r, "r"), (k, "k"), (v, "v"), (w, "w"))]
    u_mem = raw(u, "u", r.dtype, (d.heads, d.head_dim_k), "heads, K; r's dtype")
    h0 = raw(initial_state, "initial_state", np.float32, state_shape, "batch, heads, K, V")
    o = output(ctx, out, "out", v.shape, r, "v's shape, r's dtype")
    to = tensor(o, "out", dtype)
    ht = empty(ctx, state_shape, np.float32) if output_final_state else None
    r_ = [ctypes.byref(x) for x in t]
    ctx.call(lib.fcl_rwkv6_forward, ctypes.byref(d), r_[0], r_[1], r_[2], r_[3], u_mem, h0,
             ctypes.byref(to), ht.base_data.int_ptr if ht is not None else None)
    del keep
    return o, ht


def rwkv6_backward(do, r, k, v, w, u, scale=None, initial_state=None, dht=None,
                   reverse=False, cu_seqlens=None, *, algorithm=None, dtype=None,
                   context=None):
    """Gradients of rwkv6: do (like o) and dht (None: zero; float32 like the
    final state) give (dr, dk, dv, dw, du, dh0), each like its input; du
    sums over batch and time; dh0 is None without initial_state."""
    ctx = resolve_context(context, (do, r, k, v, w, u, initial_state, dht))
    d, state_shape, keep = rwkv6_desc(ctx, r, k, v, w, scale, reverse, cu_seqlens,
                                      algorithm, dtype)
    expect_shape(do, "do", v.shape, "the output's shape")
    t = [tensor(a, n, dtype) for a, n in ((r, "r"), (k, "k"), (v, "v"), (w, "w"),
                                         (do, "do"))]
    u_mem = raw(u, "u", r.dtype, (d.heads, d.head_dim_k), "heads, K; r's dtype")
    h0 = raw(initial_state, "initial_state", np.float32, state_shape, "batch, heads, K, V")
    dht_mem = raw(dht, "dht", np.float32, state_shape, "batch, heads, K, V")
    grads = [empty(ctx, a.shape, r.dtype) for a in (r, k, v, w)]
    tg = [tensor(a, n, dtype) for a, n in zip(grads, ("dr", "dk", "dv", "dw"))]
    du = empty(ctx, u.shape, r.dtype)
    dh0 = empty(ctx, state_shape, np.float32) if initial_state is not None else None
    b = ctypes.byref
    ctx.call(lib.fcl_rwkv6_backward, b(d), b(t[0]), b(t[1]), b(t[2]), b(t[3]), u_mem, h0,
             b(t[4]), dht_mem, b(tg[0]), b(tg[1]), b(tg[2]), b(tg[3]), du.base_data.int_ptr,
             dh0.base_data.int_ptr if dh0 is not None else None)
    del keep
    return tuple(grads) + (du, dh0)


def rwkv6_config(r, k, v, w, u=None, *, backward=False, dtype=None, context=None, **kwargs):
    """The ConfigInfo (kernel, parameters, origin) rwkv6 (backward=True:
    rwkv6_backward) would use for these arrays and keywords."""
    ctx = resolve_context(context, (r, k, v, w))
    allowed = {"scale", "reverse", "cu_seqlens", "algorithm"}
    extra = set(kwargs) - allowed
    if extra:
        raise invalid("%s: not a keyword of rwkv6_config" % ", ".join(sorted(extra)))
    d, _, keep = rwkv6_desc(ctx, r, k, v, w, dtype=dtype, **kwargs)
    info = config_info_of(ctx, lib.fcl_rwkv6_config, d, fcl_dtype(r, "r", dtype), backward)
    del keep
    return info
