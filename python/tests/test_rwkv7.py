"""flashcl.rwkv7 and rwkv7_backward against the float64 reference."""
import numpy as np
import pytest

import flashcl
import reference as ref
from helpers import TOL_RWKV6, TOL_STATE, assert_close, dev, rand, storage, values
from rwkv_seqs import dense, packed, per_seq


def inputs(rng, dt, B, T, H, K, V):
    """r, w, k, v, a, b as fla's tests make them (w in the models' range,
    a = -kk, b = kk * U(0, 0.1), kk L2-normalised): storage and values."""
    (rs, r), (ks, k), (vs, v) = (rand(rng, (B, T, H, K), dt), rand(rng, (B, T, H, K), dt),
                                 rand(rng, (B, T, H, V), dt))
    ws = storage(rng.uniform(-np.exp(-0.5), 0.0, (B, T, H, K)), dt)
    kk = rng.uniform(-1, 1, (B, T, H, K))
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    as_ = storage(-kk, dt)
    bs = storage(kk * rng.uniform(0, 0.1, (B, T, H, K)), dt)
    return (rs, ws, ks, vs, as_, bs), (r, values(ws, dt), k, v, values(as_, dt), values(bs, dt))


def per_seq_ref(x, scale, h0, reverse, seqs):
    return per_seq(lambda bi, ts, h: ref.rwkv7(*(y[bi, ts] for y in x), scale, h, reverse),
                   x[3].shape, h0, seqs)


# T = 2: the step kernel (forwards of up to 4 positions); T = 11: the recurrent one.
@pytest.mark.parametrize("dt,T", [("f32", 2), ("f32", 11), ("f16", 1), ("bf16", 11)])
def test_forward_states(ctx, rng, dt, T):
    B, H, K, V = 2, 2, 8, 6
    dev_in, x = inputs(rng, dt, B, T, H, K, V)
    h0 = rng.uniform(-1, 1, (B, H, K, V)).astype(np.float32)
    o, ht = flashcl.rwkv7(*(dev(ctx, a) for a in dev_in), initial_state=dev(ctx, h0),
                          output_final_state=True, dtype=dt)
    o_ref, ht_ref = per_seq_ref(x, K ** -0.5, h0.astype(np.float64), False,
                                dense(B))
    assert_close("o", values(o.get(), dt), o_ref, TOL_RWKV6[dt])
    assert_close("ht", ht.get(), ht_ref, TOL_STATE)


def test_forward_reverse_varlen_scale(ctx, rng):
    lens = [4, 1, 6]
    cu, seqs = packed(lens)
    dev_in, x = inputs(rng, "f32", 1, cu[-1], 2, 8, 8)
    o, ht = flashcl.rwkv7(*(dev(ctx, a) for a in dev_in), scale=1.0, reverse=True,
                          cu_seqlens=cu, output_final_state=True)
    assert ht.shape == (3, 2, 8, 8)
    o_ref, ht_ref = per_seq_ref(x, 1.0, None, True, seqs)
    assert_close("o", o.get(), o_ref, TOL_RWKV6["f32"])
    assert_close("ht", ht.get(), ht_ref, TOL_STATE)


@pytest.mark.parametrize("reverse", [False, True])
def test_backward(ctx, rng, reverse):
    B, T, H, K, V = 2, 9, 2, 8, 6
    dev_in, x = inputs(rng, "f32", B, T, H, K, V)
    dos, do = rand(rng, (B, T, H, V), "f32")
    h0 = rng.uniform(-1, 1, (B, H, K, V)).astype(np.float32)
    dht = rng.uniform(-1, 1, (B, H, K, V)).astype(np.float32)
    grads = flashcl.rwkv7_backward(dev(ctx, dos), *(dev(ctx, a) for a in dev_in),
                                   initial_state=dev(ctx, h0), dht=dev(ctx, dht),
                                   reverse=reverse)
    refs = [ref.rwkv7_grad(*(y[bi] for y in x), K ** -0.5, do[bi], h0[bi].astype(np.float64),
                           dht[bi].astype(np.float64), reverse) for bi in range(B)]
    for i, name in enumerate(("dr", "dw", "dk", "dv", "da", "db")):
        assert_close(name, grads[i].get(), np.stack([g[i] for g in refs]), TOL_RWKV6["f32"])
    assert_close("dh0", grads[6].get(), np.stack([g[6] for g in refs]), TOL_STATE)


def test_host_and_config(ctx, rng):
    """The numpy layer (bf16 as uint16) without states, and config_info
    naming the step kernel for T = 1."""
    dev_in, x = inputs(rng, "bf16", 1, 1, 2, 8, 8)
    o, ht = flashcl.host.rwkv7(*dev_in, dtype="bf16", context=ctx)
    assert ht is None
    o_ref, _ = per_seq_ref(x, 8 ** -0.5, None, False, [(0, slice(None))])
    assert_close("o", values(o, "bf16"), o_ref, TOL_RWKV6["bf16"])
    info = flashcl.config_info("rwkv7", *(dev(ctx, a) for a in dev_in), dtype="bf16",
                               context=ctx)
    assert info.kernel == "rwkv7_step", info


def test_bad_input(ctx, rng):
    dev_in, _ = inputs(rng, "f32", 1, 3, 2, 8, 8)
    args = [dev(ctx, a) for a in dev_in]
    args[4] = dev(ctx, np.zeros((1, 3, 2, 7), np.float32))  # a: K of 7
    with pytest.raises(flashcl.Error, match=r"\ba\b"):
        flashcl.rwkv7(*args)
    args[4] = dev(ctx, dev_in[4])
    with pytest.raises(flashcl.Error, match="initial_state"):
        flashcl.rwkv7(*args, initial_state=dev(ctx, np.zeros((1, 2, 8, 7), np.float32)))


def test_reference_gradient_by_finite_differences(rng):
    """The reference backward against central differences of the reference
    forward (float64), so the tests above check against a true gradient."""
    T, H, K, V = 4, 1, 3, 2
    x = [rng.uniform(-1, 1, (T, H, K if i != 3 else V)) for i in range(6)]
    x[1] = -np.exp(rng.uniform(-2, 0, (T, H, K)))
    h0, dht, do = (rng.uniform(-1, 1, s) for s in ((H, K, V), (H, K, V), (T, H, V)))
    for reverse in (False, True):
        args = x + [h0]

        def loss(p):
            o, ht, _ = ref.rwkv7(*p[:6], 0.6, p[6], reverse)
            return np.sum(o * do) + np.sum(ht * dht)
        grads = ref.rwkv7_grad(*x, 0.6, do, h0, dht, reverse)
        for i in range(7):  # dr, dw, dk, dv, da, db, dh0
            num = np.zeros(args[i].shape)
            for idx in np.ndindex(args[i].shape):
                plus = [p.copy() for p in args]
                minus = [p.copy() for p in args]
                plus[i][idx] += 1e-6
                minus[i][idx] -= 1e-6
                num[idx] = (loss(plus) - loss(minus)) / 2e-6
            np.testing.assert_allclose(grads[i], num, rtol=1e-6, atol=1e-8)


def test_desc_layout():
    """Rwkv7Desc as fcl_rwkv7_desc (rwkv7_entry.c asserts 80 bytes on 64-bit
    hosts; the ABI reference of the last release predates it)."""
    import ctypes
    from flashcl import _capi
    d = _capi.Rwkv7Desc
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        assert ctypes.sizeof(d) == 80
        assert (d.scale.offset, d.cu_seqlens.offset, d.decay_lower_bound.offset) == (48, 56, 72)
