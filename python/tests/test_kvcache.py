"""flashcl.attention_with_kvcache and merge_states against the float64
reference: contiguous and paged caches, the append, rotary, views."""
import numpy as np
import pytest

import flashcl
import reference as ref
from helpers import (TOL_OUTPUT, assert_close, check_lse, check_output, dev, rand, storage,
                     values)


def kv_ref(q, kc, vc, kn, vn, seqlens, slot_of, cos=None, sin=None, interleaved=True,
           **opts):
    """Per sequence b: the cache after the append (positions c.. of the
    slots slot_of(b, pos)), o and lse. kc, vc are float64 copies of the
    caches (slot, token, head, dim), updated in place as the call would."""
    B, n = q.shape[:2]
    o, lse, bound = [], [], 0.0
    for b in range(B):
        c = int(seqlens[b])
        pos = np.arange(c, c + n)
        qb = q[b] if cos is None else ref.rotate(q[b], cos, sin, pos, interleaved)
        total = c
        if kn is not None:
            kb = kn[b] if cos is None else ref.rotate(kn[b], cos, sin, pos, interleaved)
            for i, p in enumerate(pos):
                kc[slot_of(b, p)] = kb[i]
                vc[slot_of(b, p)] = vn[b][i]
            total = c + n
        keys = np.stack([kc[slot_of(b, p)] for p in range(total)])
        vals = np.stack([vc[slot_of(b, p)] for p in range(total)])
        ob, lb = ref.attention(qb, keys, vals, **opts)
        o.append(ob)
        lse.append(lb)
        bound = max(bound, ref.logit_bound(qb, keys, opts.get("scale"),
                                           opts.get("causal", False),
                                           opts.get("window", (-1, -1))))
    return np.stack(o), np.stack(lse), bound


@pytest.mark.parametrize("interleaved", [True, False])
def test_contiguous_append_rotary(ctx, rng, interleaved):
    B, n, hq, hkv, D, cap = 2, 2, 4, 2, 16, 12
    (qs, q), (kns, kn), (vns, vn) = (rand(rng, (B, n, hq, D), "f32"),
                                     rand(rng, (B, n, hkv, D), "f32"),
                                     rand(rng, (B, n, hkv, D), "f32"))
    (kcs, kc), (vcs, vc) = rand(rng, (3, cap, hkv, D), "f32"), rand(rng, (3, cap, hkv, D), "f32")
    ang = rng.uniform(0, 6.3, (cap, 4))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    seqlens, rows = np.array([5, 3], np.int32), np.array([2, 0], np.int32)
    kc_dev, vc_dev = dev(ctx, kcs), dev(ctx, vcs)
    o, lse = flashcl.attention_with_kvcache(
        dev(ctx, qs), kc_dev, vc_dev, dev(ctx, kns), dev(ctx, vns), rotary_cos=dev(ctx, cos),
        rotary_sin=dev(ctx, sin), cache_seqlens=dev(ctx, seqlens),
        cache_batch_idx=dev(ctx, rows), causal=True, rotary_interleaved=interleaved,
        return_lse=True)
    o_ref, lse_ref, bound = kv_ref(q, kc, vc, kn, vn, seqlens, lambda b, p: (rows[b], p),
                                   cos.astype(np.float64), sin.astype(np.float64),
                                   interleaved, causal=True)
    check_output("o", o.get(), o_ref, "f32", bound, np.abs(vc).max())
    check_lse("lse", lse.get(), lse_ref, bound)
    assert_close("k_cache", kc_dev.get(), kc, *TOL_OUTPUT["f32"])
    assert np.array_equal(vc_dev.get(), vc.astype(np.float32))  # v is copied, not rotated


def test_paged_append_splits_f16(ctx, rng):
    B, n, hq, hkv, D, page, pages = 2, 3, 2, 1, 16, 4, 7
    (qs, q), (kns, kn), (vns, vn) = (rand(rng, (B, n, hq, D), "f16"),
                                     rand(rng, (B, n, hkv, D), "f16"),
                                     rand(rng, (B, n, hkv, D), "f16"))
    (kcs, kc), (vcs, vc) = (rand(rng, (pages, page, hkv, D), "f16"),
                            rand(rng, (pages, page, hkv, D), "f16"))
    table = np.array([[5, 0, 3], [6, 2, 4]], np.int32)
    seqlens = np.array([6, 2], np.int32)
    kc_dev, vc_dev = dev(ctx, kcs), dev(ctx, vcs)
    o = flashcl.attention_with_kvcache(dev(ctx, qs), kc_dev, vc_dev, dev(ctx, kns),
                                       dev(ctx, vns), cache_seqlens=dev(ctx, seqlens),
                                       block_table=dev(ctx, table), num_splits=2)
    slot = lambda b, p: (table[b][p // page], p % page)
    o_ref, _, bound = kv_ref(q, kc, vc, kn, vn, seqlens, slot)
    check_output("o", values(o.get(), "f16"), o_ref, "f16", bound, np.abs(vc).max())
    assert np.array_equal(kc_dev.get(), storage(kc, "f16"))
    assert np.array_equal(vc_dev.get(), storage(vc, "f16"))


def test_decode_head_major_cache_view(ctx, rng):
    """A head-major cache (slot, head, token, dim) passed as its transpose;
    an int cache_seqlens; no append; window and softcap."""
    B, hq, hkv, D, cap = 3, 4, 1, 16, 10
    qs, q = rand(rng, (B, 1, hq, D), "f32")
    (kcs, kc), (vcs, vc) = rand(rng, (B, hkv, cap, D), "f32"), rand(rng, (B, hkv, cap, D), "f32")
    kt = dev(ctx, kcs).transpose((0, 2, 1, 3))
    vt = dev(ctx, vcs).transpose((0, 2, 1, 3))
    o = flashcl.attention_with_kvcache(dev(ctx, qs), kt, vt, cache_seqlens=7,
                                       window_size=(4, 0), softcap=3.0)
    o_ref, _, bound = kv_ref(q, kc.transpose(0, 2, 1, 3), vc.transpose(0, 2, 1, 3), None,
                             None, [7] * B, lambda b, p: (b, p), window=(4, 0), softcap=3.0)
    check_output("o", o.get(), o_ref, "f32", bound, np.abs(vc).max())


@pytest.mark.parametrize("in_place", [False, True])
def test_merge_states(ctx, rng, in_place):
    """Two halves of the keys, each with its lse, merge to the whole."""
    (qs, q), (ks, k), (vs, v) = (rand(rng, (2, 4, 2, 16), "f32") for _ in range(3))
    qd, kd, vd = dev(ctx, qs), dev(ctx, ks), dev(ctx, vs)
    parts = [flashcl.attention(qd, kd[:, a:b], vd[:, a:b], return_lse=True)
             for a, b in ((0, 1), (1, 4))]
    v_parts, s_parts = [p[0] for p in parts], [p[1] for p in parts]
    kw = dict(out=v_parts[0], out_lse=s_parts[0]) if in_place else {}
    o, lse = flashcl.merge_states(v_parts, s_parts, **kw)
    if in_place:
        assert o is v_parts[0] and lse is s_parts[0]
    o_ref = np.stack([ref.attention(q[b], k[b], v[b])[0] for b in range(2)])
    lse_ref = np.stack([ref.attention(q[b], k[b], v[b])[1] for b in range(2)])
    bound = max(ref.logit_bound(q[b], k[b]) for b in range(2))
    check_output("o", o.get(), o_ref, "f32", bound, np.abs(v).max())
    check_lse("lse", lse.get(), lse_ref, bound)
