"""flashcl.host: the same operations on numpy arrays."""
import numpy as np

import flashcl
import reference as ref
from helpers import TOL_RWKV6, assert_close, check_lse, check_output, rand, values


def test_attention_bf16(ctx, rng):
    (qs, q), (ks, k), (vs, v) = (rand(rng, (1, 7, 2, 16), "bf16") for _ in range(3))
    o, lse = flashcl.host.attention(qs, ks, vs, causal=True, return_lse=True, dtype="bf16",
                                    context=ctx)
    assert isinstance(o, np.ndarray) and o.dtype == np.uint16
    o_ref, lse_ref = ref.attention(q[0], k[0], v[0], causal=True)
    bound = ref.logit_bound(q[0], k[0], causal=True)
    check_output("o", values(o, "bf16")[0], o_ref, "bf16", bound, np.abs(v).max())
    check_lse("lse", lse[0], lse_ref, bound)


def test_kvcache_appends_into_numpy_caches(ctx, rng):
    (qs, q), (ks, k), (vs, v) = (rand(rng, (1, 2, h, 16), "f32") for h in (4, 2, 2))
    kc, vc = np.zeros((1, 6, 2, 16), np.float32), np.zeros((1, 6, 2, 16), np.float32)
    kc[0, :3], vc[0, :3] = rand(rng, (3, 2, 16), "f32")[0], rand(rng, (3, 2, 16), "f32")[0]
    o = flashcl.host.attention_with_kvcache(qs, kc, vc, ks, vs, cache_seqlens=3, causal=True,
                                            context=ctx)
    assert np.array_equal(kc[0, 3:5], ks[0]) and np.array_equal(vc[0, 3:5], vs[0])
    assert not kc[0, 5].any()
    keys, vals = kc[0, :5].astype(np.float64), vc[0, :5].astype(np.float64)
    o_ref, _ = ref.attention(q[0], keys, vals, causal=True)
    check_output("o", o[0], o_ref, "f32", ref.logit_bound(q[0], keys, causal=True), 1.0)


def test_rwkv6(ctx, rng):
    (rs, r), (ks, k), (vs, v), (us, u) = (rand(rng, s, "f32") for s in
                                          [(1, 5, 1, 8)] * 3 + [(1, 8)])
    ws = (-np.exp(rng.uniform(-2, 0, (1, 5, 1, 8)))).astype(np.float32)
    o, ht = flashcl.host.rwkv6(rs, ks, vs, ws, us, output_final_state=True, context=ctx)
    o_ref, ht_ref, _ = ref.rwkv6(r[0], k[0], v[0], ws[0].astype(np.float64), u, 8 ** -0.5)
    assert_close("o", o[0], o_ref, TOL_RWKV6["f32"])
    assert_close("ht", ht[0], ht_ref, TOL_RWKV6["f32"])
