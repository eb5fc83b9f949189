"""rwkv7 and rwkv7_backward: fcl_rwkv7_forward and _backward with the
names of fla's chunk_rwkv7 / fused_recurrent_rwkv7 (flash-linear-attention)."""
import ctypes

import numpy as np

from . import _capi
from ._config import config_info_of
from ._errors import invalid
from ._rwkv import check_4d, fill_sequences
from ._tensors import (check_dtype_arg, empty, expect_shape, fcl_dtype, output, raw,
                       resolve_context, tensor)

lib = _capi.lib
_NAMES = ("r", "w", "k", "v", "a", "b")


def rwkv7_desc(ctx, r, w, k, v, a, b, scale=None, reverse=False, cu_seqlens=None,
               decay_lower_bound=None, dtype=None):
    """The fcl_rwkv7_desc of a call, the state shape and kept objects."""
    check_dtype_arg(dtype)
    d, keep = _capi.rwkv7_desc(), []
    check_4d(zip(_NAMES, (r, w, k, v, a, b)))
    state = fill_sequences(ctx, d, r, v, (("w", w), ("k", k), ("a", a), ("b", b)), cu_seqlens,
                           scale, reverse, keep)
    d.decay_lower_bound = 0.0 if decay_lower_bound is None else float(decay_lower_bound)
    return d, state, keep


def rwkv7(r, w, k, v, a, b, scale=None, initial_state=None, output_final_state=False,
          reverse=False, cu_seqlens=None, *, decay_lower_bound=None, out=None, dtype=None,
          context=None):
    """RWKV-7 time mixing, as fla's chunk_rwkv7. Per (batch, head), from
    S = initial_state (or 0), for each step t (last to first if reverse):
        S[i][j] = exp(w_t[i]) S[i][j] + b_t[i] sum_m a_t[m] S[m][j] + k_t[i] v_t[j]
        o_t[j]  = scale * sum_i r_t[i] S[i][j]     (the state after the step)
    r, w (log decay, <= 0), k, a, b: (batch, seqlen, heads, K); v: (..., V),
    one dtype; states float32 (batch, heads, K, V). cu_seqlens (int32,
    N + 1): N sequences packed along seqlen of batch 1, states (N, ...).
    scale None: 1/sqrt(K) (fla's default is 1.0, which models pass: give it).
    decay_lower_bound: None, or a promise that every w >= it (models:
    -exp(-0.5)). Returns (o, final_state); final_state is None unless
    output_final_state.
    """
    ctx = resolve_context(context, (r, w, k, v, a, b, initial_state, out))
    d, state_shape, keep = rwkv7_desc(ctx, r, w, k, v, a, b, scale, reverse, cu_seqlens,
                                      decay_lower_bound, dtype)
    t = [tensor(x, n, dtype) for x, n in zip((r, w, k, v, a, b), _NAMES)]
    h0 = raw(initial_state, "initial_state", np.float32, state_shape, "batch, heads, K, V")
    o = output(ctx, out, "out", v.shape, r, "v's shape, r's dtype")
    to = tensor(o, "out", dtype)
    ht = empty(ctx, state_shape, np.float32) if output_final_state else None
    p = [ctypes.byref(x) for x in t]
    ctx.call(lib.fcl_rwkv7_forward, ctypes.byref(d), *p, h0, ctypes.byref(to),
             ht.base_data.int_ptr if ht is not None else None)
    del keep
    return o, ht


def rwkv7_backward(do, r, w, k, v, a, b, scale=None, initial_state=None, dht=None,
                   reverse=False, cu_seqlens=None, *, decay_lower_bound=None, dtype=None,
                   context=None):
    """Gradients of rwkv7: do (like o) and dht (None: zero; float32 like the
    final state) give (dr, dw, dk, dv, da, db, dh0), each like its input;
    dh0 is None without initial_state."""
    ctx = resolve_context(context, (do, r, w, k, v, a, b, initial_state, dht))
    d, state_shape, keep = rwkv7_desc(ctx, r, w, k, v, a, b, scale, reverse, cu_seqlens,
                                      decay_lower_bound, dtype)
    expect_shape(do, "do", v.shape, "the output's shape")
    t = [tensor(x, n, dtype) for x, n in zip((r, w, k, v, a, b, do), _NAMES + ("do",))]
    h0 = raw(initial_state, "initial_state", np.float32, state_shape, "batch, heads, K, V")
    dht_mem = raw(dht, "dht", np.float32, state_shape, "batch, heads, K, V")
    grads = [empty(ctx, x.shape, r.dtype) for x in (r, w, k, v, a, b)]
    tg = [tensor(g, "d" + n, dtype) for g, n in zip(grads, _NAMES)]
    dh0 = empty(ctx, state_shape, np.float32) if initial_state is not None else None
    p = [ctypes.byref(x) for x in t]
    g = [ctypes.byref(x) for x in tg]
    ctx.call(lib.fcl_rwkv7_backward, ctypes.byref(d), *p[:6], h0, p[6], dht_mem, *g,
             dh0.base_data.int_ptr if dh0 is not None else None)
    del keep
    return tuple(grads) + (dh0,)


def rwkv7_config(r, w, k, v, a, b, *, backward=False, dtype=None, context=None, **kwargs):
    """The ConfigInfo (kernel, parameters, origin) rwkv7 (backward=True:
    rwkv7_backward) would use for these arrays and keywords."""
    ctx = resolve_context(context, (r, w, k, v, a, b))
    allowed = {"scale", "reverse", "cu_seqlens", "decay_lower_bound"}
    extra = set(kwargs) - allowed
    if extra:
        raise invalid("%s: not a keyword of rwkv7_config" % ", ".join(sorted(extra)))
    d, _, keep = rwkv7_desc(ctx, r, w, k, v, a, b, dtype=dtype, **kwargs)
    info = config_info_of(ctx, lib.fcl_rwkv7_config, d, fcl_dtype(r, "r", dtype), backward)
    del keep
    return info
