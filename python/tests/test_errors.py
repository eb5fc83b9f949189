"""Bad input raises flashcl.Error with the status and the library's message
(or the binding's, for shapes the C API cannot see), and writes nothing."""
import numpy as np
import pyopencl.array as cl_array
import pytest

import flashcl
from helpers import dev


def raises(fn, status, text):
    with pytest.raises(flashcl.Error) as e:
        fn()
    assert e.value.status == status, e.value
    assert text in e.value.message, e.value.message
    assert str(e.value).startswith(flashcl._capi.STATUS_NAMES[status] + ": ")
    return e.value


def ones(ctx, shape, dtype=np.float32):
    return dev(ctx, np.ones(shape, dtype))


def test_attention_library_errors_leave_out_untouched(ctx):
    q = ones(ctx, (1, 4, 2, 16))
    out = dev(ctx, np.full((1, 4, 2, 16), 3.0, np.float32))
    cases = [
        (dict(k=ones(ctx, (1, 4, 2, 16), np.float16)), "k.dtype: is 1 but q.dtype is 0"),
        (dict(window_size=(-5, 0)), "window_left: is -5, must be >= -1"),
        (dict(softcap=-1.0), "softcap: is -1"),
        (dict(dropout_p=1.5, seed=1), "dropout_p: is 1.5, must be in [0, 1)"),
    ]
    for kw, text in cases:
        k = kw.pop("k", q)
        raises(lambda: flashcl.attention(q, k, q, out=out, **kw),
               flashcl.ERROR_INVALID_ARGUMENT, text)
        assert (out.get() == 3.0).all()
    big = ones(ctx, (1, 2, 1, 600))
    raises(lambda: flashcl.attention(big, big, big), flashcl.ERROR_INVALID_ARGUMENT,
           "head_dim: is 600, must be in 1..512")
    # A view that reaches past its buffer (built by hand; slicing cannot).
    buf = ones(ctx, (64,))
    past = cl_array.Array(ctx.queue, (1, 4, 2, 16), np.float32, strides=(256, 80, 32, 4),
                          data=buf.base_data)
    raises(lambda: flashcl.attention(past, q, q, out=out), flashcl.ERROR_INVALID_ARGUMENT,
           "ends past its buffer of 256 bytes")
    assert (out.get() == 3.0).all()
    # The context still works after the refusals.
    flashcl.attention(q, q, q, out=out)
    assert np.allclose(out.get(), 1.0)


def test_binding_errors(ctx):
    q = ones(ctx, (1, 4, 2, 16))
    bad = [
        (lambda: flashcl.attention(q, q, q[:, :, :1]), "v: has shape (1, 4, 1, 16), expected"),
        (lambda: flashcl.attention(np.ones((1, 4, 2, 16), np.float32), q, q),
         "q: is a ndarray, not a pyopencl.array.Array"),
        (lambda: flashcl.attention(ones(ctx, (1, 4, 2, 16), np.uint16), q, q),
         "q: is uint16; pass dtype='bf16'"),
        (lambda: flashcl.attention(q, q, q, dropout_p=0.1), "seed: dropout_p > 0 needs a seed"),
        (lambda: flashcl.attention(q, q, q, alibi_slopes=ones(ctx, (2,), np.float16)),
         "alibi_slopes: dtype float16, must be float32"),
        (lambda: flashcl.attention(q, q, q, alibi_slopes=ones(ctx, (4,))[1:3]),
         "alibi_slopes: must be C-contiguous at offset 0"),
        (lambda: flashcl.rwkv6(q, q, q, q, ones(ctx, (2, 8)), algorithm="fast"),
         "algorithm: 'fast' is not one of auto, recurrent, chunked"),
        (lambda: flashcl.merge_states([q], []), "v, s: 1 outputs and 0 lse"),
    ]
    for fn, text in bad:
        raises(fn, flashcl.ERROR_INVALID_ARGUMENT, text)


def test_kvcache_errors_leave_cache_untouched(ctx):
    q, new = ones(ctx, (1, 1, 2, 8)), ones(ctx, (1, 1, 2, 8))
    kc = dev(ctx, np.full((2, 4, 2, 8), 5.0, np.float32))
    table, rows = dev(ctx, np.zeros((1, 1), np.int32)), dev(ctx, np.zeros(1, np.int32))
    raises(lambda: flashcl.attention_with_kvcache(q, kc, kc, new, new, cache_seqlens=2,
                                                  block_table=table, cache_batch_idx=rows),
           flashcl.ERROR_INVALID_ARGUMENT, "d->cache_batch_idx: is set, but a paged cache")
    cs = ones(ctx, (4, 8))
    raises(lambda: flashcl.attention_with_kvcache(q, kc, kc, new, new, cache_seqlens=2,
                                                  rotary_cos=cs, rotary_sin=cs),
           flashcl.ERROR_INVALID_ARGUMENT, "d->rotary_dim: is 16, must be in 0..8")
    raises(lambda: flashcl.attention_with_kvcache(q, kc, kc, new, None, cache_seqlens=2),
           flashcl.ERROR_INVALID_ARGUMENT, "give both or neither")
    assert (kc.get() == 5.0).all()


def test_rwkv6_errors(ctx):
    x = ones(ctx, (1, 3, 2, 8))
    out = dev(ctx, np.full((1, 3, 2, 8), 2.0, np.float32))
    raises(lambda: flashcl.rwkv6(x, x, x, x, ones(ctx, (2, 8), np.float16), out=out),
           flashcl.ERROR_INVALID_ARGUMENT, "u: dtype float16, must be float32")
    raises(lambda: flashcl.rwkv6(x, x, x, x, ones(ctx, (2, 8)), scale=float("nan"), out=out),
           flashcl.ERROR_INVALID_ARGUMENT, "scale: is nan, must be finite")
    assert (out.get() == 2.0).all()


def test_context_errors(ctx):
    raises(lambda: flashcl.Context("no-such-device"), flashcl.ERROR_NO_DEVICE,
           'no OpenCL device matches "no-such-device"')
    raises(lambda: ctx.set_option("plan_cache", 5000), flashcl.ERROR_INVALID_ARGUMENT,
           "FCL_OPTION_PLAN_CACHE takes 0..4096")
    raises(lambda: ctx.set_option(999, 1), flashcl.ERROR_INVALID_ARGUMENT,
           "option: is 999, not a fcl_option")
    raises(lambda: ctx.set_option("speed", 1), flashcl.ERROR_INVALID_ARGUMENT,
           "option: 'speed' is not one of")
    assert ctx.get_option("plan_cache") == 256
