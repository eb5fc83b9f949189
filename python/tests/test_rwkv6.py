"""flashcl.rwkv6 and rwkv6_backward against the float64 reference."""
import numpy as np
import pytest

import flashcl
import reference as ref
from helpers import TOL_RWKV6, TOL_STATE, assert_close, dev, rand, storage, values
from rwkv_seqs import dense, packed, per_seq


def inputs(rng, dt, B, T, H, K, V):
    (rs, r), (ks, k), (vs, v) = (rand(rng, (B, T, H, K), dt), rand(rng, (B, T, H, K), dt),
                                 rand(rng, (B, T, H, V), dt))
    ws = storage(-np.exp(rng.uniform(-3.0, 0.5, (B, T, H, K))), dt)  # log decay < 0
    us, u = rand(rng, (H, K), dt)
    return (rs, ks, vs, ws, us), (r, k, v, values(ws, dt), u)


def per_seq_ref(r, k, v, w, u, scale, h0, reverse, seqs):
    return per_seq(lambda b, ts, h: ref.rwkv6(r[b, ts], k[b, ts], v[b, ts], w[b, ts], u, scale,
                                              h, reverse), v.shape, h0, seqs)


@pytest.mark.parametrize("dt,algorithm", [("f32", "recurrent"), ("f32", "chunked"),
                                          ("bf16", None)])
def test_forward_states(ctx, rng, dt, algorithm):
    B, T, H, K, V = 2, 11, 2, 8, 8
    dev_in, (r, k, v, w, u) = inputs(rng, dt, B, T, H, K, V)
    h0 = rng.uniform(-1, 1, (B, H, K, V)).astype(np.float32)
    o, ht = flashcl.rwkv6(*(dev(ctx, a) for a in dev_in), initial_state=dev(ctx, h0),
                          output_final_state=True, algorithm=algorithm, dtype=dt)
    o_ref, ht_ref = per_seq_ref(r, k, v, w, u, K ** -0.5, h0.astype(np.float64), False,
                                dense(B))
    assert_close("o", values(o.get(), dt), o_ref, TOL_RWKV6[dt])
    assert_close("ht", ht.get(), ht_ref, TOL_STATE)


def test_forward_reverse_varlen_scale(ctx, rng):
    lens = [4, 1, 6]
    cu, seqs = packed(lens)
    dev_in, (r, k, v, w, u) = inputs(rng, "f32", 1, cu[-1], 2, 8, 8)
    o, ht = flashcl.rwkv6(*(dev(ctx, a) for a in dev_in), scale=0.7, reverse=True,
                          cu_seqlens=cu, output_final_state=True)
    assert ht.shape == (3, 2, 8, 8)
    o_ref, ht_ref = per_seq_ref(r, k, v, w, u, 0.7, None, True, seqs)
    assert_close("o", o.get(), o_ref, TOL_RWKV6["f32"])
    assert_close("ht", ht.get(), ht_ref, TOL_STATE)


@pytest.mark.parametrize("algorithm", ["recurrent", "chunked"])
def test_backward(ctx, rng, algorithm):
    B, T, H, K, V = 2, 9, 2, 8, 8
    dev_in, (r, k, v, w, u) = inputs(rng, "f32", B, T, H, K, V)
    dos, do = rand(rng, (B, T, H, V), "f32")
    h0 = rng.uniform(-1, 1, (B, H, K, V)).astype(np.float32)
    dht = rng.uniform(-1, 1, (B, H, K, V)).astype(np.float32)
    grads = flashcl.rwkv6_backward(dev(ctx, dos), *(dev(ctx, a) for a in dev_in),
                                   initial_state=dev(ctx, h0), dht=dev(ctx, dht),
                                   algorithm=algorithm)
    refs = [ref.rwkv6_grad(r[b], k[b], v[b], w[b], u, K ** -0.5, do[b],
                           h0[b].astype(np.float64), dht[b].astype(np.float64))
            for b in range(B)]
    names = ("dr", "dk", "dv", "dw")
    for i, name in enumerate(names):
        assert_close(name, grads[i].get(), np.stack([x[i] for x in refs]), TOL_RWKV6["f32"])
    assert_close("du", grads[4].get(), sum(x[4] for x in refs), TOL_RWKV6["f32"])
    assert_close("dh0", grads[5].get(), np.stack([x[5] for x in refs]), TOL_STATE)


def test_reference_gradient_by_finite_differences(rng):
    """The reference backward against central differences of the reference
    forward (float64), so the test above checks against a true gradient."""
    T, H, K, V = 4, 1, 3, 2
    r, k, v, u = (rng.uniform(-1, 1, s) for s in ((T, H, K), (T, H, K), (T, H, V), (H, K)))
    w = -np.exp(rng.uniform(-2, 0, (T, H, K)))
    h0, dht, do = (rng.uniform(-1, 1, s) for s in ((H, K, V), (H, K, V), (T, H, V)))
    for reverse in (False, True):
        args = [r, k, v, w, u, h0]

        def loss(a):
            o, ht, _ = ref.rwkv6(a[0], a[1], a[2], a[3], a[4], 0.6, a[5], reverse)
            return np.sum(o * do) + np.sum(ht * dht)
        grads = ref.rwkv6_grad(r, k, v, w, u, 0.6, do, h0, dht, reverse)
        for i in range(6):  # dr, dk, dv, dw, du, dh0
            num = np.zeros(args[i].shape)
            for idx in np.ndindex(args[i].shape):
                plus = [a.copy() for a in args]
                minus = [a.copy() for a in args]
                plus[i][idx] += 1e-6
                minus[i][idx] -= 1e-6
                num[idx] = (loss(plus) - loss(minus)) / 2e-6
            np.testing.assert_allclose(grads[i], num, rtol=1e-6, atol=1e-8)
