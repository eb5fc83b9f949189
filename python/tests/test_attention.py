"""flashcl.attention and attention_backward against the float64 reference."""
import numpy as np
import pytest

import flashcl
import reference as ref
from helpers import (TOL_GRAD, assert_close, check_lse, check_output, dev, rand, storage,
                     values)


def batched_ref(q, k, v, dropout=None, **opts):
    """o, lse and the logit bound over a batch (b, s, h, d) of sequences."""
    B, sq, hq, _ = q.shape
    o, lse, bound = [], [], 0.0
    for b in range(B):
        keep, p = None, 0.0
        if dropout:
            seed, offset, p = dropout
            keep = ref.dropout_keep(seed, offset, p, b, hq, sq, k.shape[1], sq, k.shape[1])
        ob, lb = ref.attention(q[b], k[b], v[b], keep=keep, p=p, **opts)
        o.append(ob)
        lse.append(lb)
        bound = max(bound, ref.logit_bound(q[b], k[b], opts.get("scale"),
                                           opts.get("causal", False),
                                           opts.get("window", (-1, -1)), opts.get("alibi")))
    return np.stack(o), np.stack(lse), bound


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16"])
def test_forward_gqa_causal(ctx, rng, dt):
    # seqlen_q > seqlen_k, causal bottom-right: the first two rows see no key.
    # Shapes here and below share head dims (16), so PoCL compiles few programs.
    (qs, q), (ks, k), (vs, v) = (rand(rng, (2, 7, 4, 16), dt), rand(rng, (2, 5, 2, 16), dt),
                                 rand(rng, (2, 5, 2, 16), dt))
    o, lse = flashcl.attention(dev(ctx, qs), dev(ctx, ks), dev(ctx, vs), causal=True,
                               return_lse=True, dtype=dt)
    assert o.shape == (2, 7, 4, 16) and o.dtype == qs.dtype and lse.shape == (2, 4, 7)
    o_ref, lse_ref, bound = batched_ref(q, k, v, causal=True)
    assert np.isneginf(lse_ref[:, :, :2]).all()
    check_output("o", values(o.get(), dt), o_ref, dt, bound, np.abs(v).max())
    check_lse("lse", lse.get(), lse_ref, bound)


def test_forward_window_softcap_alibi_scale(ctx, rng):
    (qs, q), (ks, k), (vs, v) = (rand(rng, (1, 9, 2, 16), "f32", 2.0) for _ in range(3))
    slopes = np.array([0.25, 0.5], np.float32)
    opts = dict(scale=0.3, window=(3, 1), softcap=2.5, alibi=slopes.astype(np.float64))
    o, lse = flashcl.attention(dev(ctx, qs), dev(ctx, ks), dev(ctx, vs), softmax_scale=0.3,
                               window_size=(3, 1), softcap=2.5,
                               alibi_slopes=dev(ctx, slopes), return_lse=True)
    o_ref, lse_ref, bound = batched_ref(q, k, v, **opts)
    check_output("o", o.get(), o_ref, "f32", bound, np.abs(v).max())
    check_lse("lse", lse.get(), lse_ref, bound)


def test_forward_strided_views_and_out(ctx, rng):
    """q a slice of a wider array, k and v head-major transposes, out a view
    into a larger array whose other elements stay as they were."""
    big_s, big = rand(rng, (2, 6, 5, 20), "f32")
    ks_hm, k_hm = rand(rng, (2, 3, 8, 16), "f32")  # (batch, heads, seq, dim)
    vs_hm, v_hm = rand(rng, (2, 3, 8, 16), "f32")
    q_dev = dev(ctx, big_s)[:, :, 1:4, 2:18]        # (2, 6, 3, 16), strided
    k_dev = dev(ctx, ks_hm).transpose((0, 2, 1, 3))  # (2, 8, 3, 16)
    v_dev = dev(ctx, vs_hm).transpose((0, 2, 1, 3))
    assert not q_dev.flags.c_contiguous and not k_dev.flags.c_contiguous
    sentinel = np.full((2, 6, 4, 40), 7.0, np.float32)
    out_big = dev(ctx, sentinel)
    out = out_big[:, :, 1:, 8:24]
    res = flashcl.attention(q_dev, k_dev, v_dev, out=out)
    assert res is out
    o_ref, _, bound = batched_ref(big[:, :, 1:4, 2:18], k_hm.transpose(0, 2, 1, 3),
                                  v_hm.transpose(0, 2, 1, 3))
    got = out_big.get()
    check_output("o", got[:, :, 1:, 8:24], o_ref, "f32", bound, np.abs(v_hm).max())
    outside = np.ones(got.shape, bool)
    outside[:, :, 1:, 8:24] = False
    assert (got[outside] == 7.0).all()


@pytest.mark.parametrize("device_cu", [False, True])
def test_forward_varlen(ctx, rng, device_cu):
    lens_q, lens_k = [3, 1, 5], [4, 6, 2]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    (qs, q), (ks, k), (vs, v) = (rand(rng, (cu_q[-1], 2, 16), "f16"),
                                 rand(rng, (cu_k[-1], 1, 16), "f16"),
                                 rand(rng, (cu_k[-1], 1, 16), "f16"))
    cq, ck = (dev(ctx, cu_q), dev(ctx, cu_k)) if device_cu else (cu_q, cu_k)
    o, lse = flashcl.attention(dev(ctx, qs), dev(ctx, ks), dev(ctx, vs), cu_seqlens_q=cq,
                               cu_seqlens_k=ck, causal=True, return_lse=True)
    assert o.shape == (9, 2, 16) and lse.shape == (2, 9)
    o, lse = values(o.get(), "f16"), lse.get()
    for b in range(3):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        o_ref, lse_ref = ref.attention(q[sq], k[sk], v[sk], causal=True)
        bound = ref.logit_bound(q[sq], k[sk], causal=True)
        check_output("o[%d]" % b, o[sq], o_ref, "f16", bound, np.abs(v).max())
        check_lse("lse[%d]" % b, lse[:, sq], lse_ref, bound)


def test_backward_gqa_causal_dv(ctx, rng):
    """head_dim_v != head_dim (o, dv take v's)."""
    dt = "f32"
    (qs, q), (ks, k), (vs, v), (dos, do) = (
        rand(rng, (2, 6, 4, 16), dt), rand(rng, (2, 8, 2, 16), dt),
        rand(rng, (2, 8, 2, 8), dt), rand(rng, (2, 6, 4, 8), dt))
    qd, kd, vd = dev(ctx, qs), dev(ctx, ks), dev(ctx, vs)
    o, lse = flashcl.attention(qd, kd, vd, causal=True, return_lse=True)
    dq, dk, dv = flashcl.attention_backward(dev(ctx, dos), qd, kd, vd, o, lse, causal=True)
    for b in range(2):
        refs = ref.attention_grad(q[b], k[b], v[b], do[b], causal=True)
        for name, got, r in zip(("dq", "dk", "dv"), (dq, dk, dv), refs):
            assert_close("%s[%d]" % (name, b), values(got.get()[b], dt), r, TOL_GRAD[dt])


def test_dropout_forward_and_backward(ctx, rng):
    """The Philox mask of flashcl.h, regenerated by the backward pass."""
    seed, offset, p = 0x1234_5678_9ABC, 3, 0.25
    (qs, q), (ks, k), (vs, v), (dos, do) = (rand(rng, (2, 5, 2, 16), "f32") for _ in range(4))
    qd, kd, vd = dev(ctx, qs), dev(ctx, ks), dev(ctx, vs)
    o, lse = flashcl.attention(qd, kd, vd, dropout_p=p, seed=seed, dropout_offset=offset,
                               return_lse=True)
    o_ref, lse_ref, bound = batched_ref(q, k, v, dropout=(seed, offset, p))
    check_output("o", o.get(), o_ref, "f32", bound, np.abs(v).max() / (1 - p))
    check_lse("lse", lse.get(), lse_ref, bound)
    dq, dk, dv = flashcl.attention_backward(dev(ctx, dos), qd, kd, vd, o, lse, dropout_p=p,
                                            seed=seed, dropout_offset=offset)
    for b in range(2):
        keep = ref.dropout_keep(seed, offset, p, b, 2, 5, 5, 5, 5)
        refs = ref.attention_grad(q[b], k[b], v[b], do[b], keep=keep, p=p)
        for name, got, r in zip(("dq", "dk", "dv"), (dq, dk, dv), refs):
            assert_close("%s[%d]" % (name, b), got.get()[b], r, TOL_GRAD["f32"])


def test_philox_reference_known_answer():
    """Random123's known-answer vectors for Philox-4x32-10."""
    w = ref.philox4x32_10(0, 0, 0, 0, 0, 0)
    assert [int(x) for x in w] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    w = ref.philox4x32_10(*([0xFFFFFFFF] * 6))
    assert [int(x) for x in w] == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


def test_bf16_conversions():
    x = np.array([1.0, -2.5, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, np.inf], np.float32)
    b = storage(x, "bf16")
    # 1 + 2^-8 is a tie: it rounds to even (1.0); 1 + 3 * 2^-8 rounds up.
    assert list(b) == [0x3F80, 0xC020, 0x3F80, 0x3F82, 0x7F80]
    assert np.array_equal(values(b, "bf16")[:2], [1.0, -2.5])
