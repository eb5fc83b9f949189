"""Inputs rounded to the tested dtype, device copies, and the comparisons
with the tolerances of tests/ref/test_util.c (tu_tol_*), which they mirror."""
import numpy as np
import pyopencl.array as cl_array

from flashcl.host import from_bf16, to_bf16

STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}
# (atol times max|ref|, rtol times |ref|), per dtype, as tu_tol_output etc.
TOL_OUTPUT = {"f32": (1e-5, 1e-4), "f16": (1e-3, 2e-3), "bf16": (8e-3, 1.6e-2)}
TOL_LSE = (1e-5, 1e-4)  # absolute atol: lse is f32 for every dtype
TOL_GRAD = {"f32": 2e-4, "f16": 5e-3, "bf16": 3e-2}
TOL_RWKV6 = {"f32": 1e-4, "f16": 3e-3, "bf16": 2e-2}
TOL_STATE = 1e-4


def storage(x, dt):
    """x (float64) in dtype dt's storage (bf16: uint16 bits)."""
    if dt == "bf16":
        return to_bf16(np.asarray(x, np.float32))
    return np.asarray(x).astype(STORAGE[dt])


def values(s, dt):
    """float64 values of storage s of dtype dt."""
    return (from_bf16(s) if dt == "bf16" else np.asarray(s)).astype(np.float64)


def rand(rng, shape, dt, amp=1.0):
    """Random storage of dtype dt and its exact float64 values."""
    s = storage(rng.uniform(-amp, amp, shape), dt)
    return s, values(s, dt)


def dev(ctx, a):
    return cl_array.to_device(ctx.queue, np.ascontiguousarray(a))


def logit_error(bound):
    """tu_logit_error: 8 units of 2^-24 times the bound of |s|."""
    return 8.0 * 2.0 ** -24 * bound


def assert_close(what, got, ref, atol, rtol=0.0, abs_extra=0.0, lse_style=False):
    """|got - ref| <= atol * max|ref| (lse_style: atol) + rtol * |ref| +
    abs_extra; infinities must match, NaN never passes (tu_compare)."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    assert not np.isnan(got).any() and not np.isnan(ref).any(), what + ": NaN"
    inf = np.isinf(ref) | np.isinf(got)
    assert np.array_equal(got[inf], ref[inf]), what + ": infinities differ"
    fin = ~inf
    ref_max = np.max(np.abs(ref[fin]), initial=0.0)
    allowed = (atol if lse_style else atol * ref_max) + rtol * np.abs(ref[fin]) + abs_extra
    err = np.abs(got[fin] - ref[fin])
    bad = err > allowed
    if bad.any():
        i = np.argmax(err - allowed)
        raise AssertionError("%s: %d of %d elements off; worst got %r ref %r err %.3e "
                             "allowed %.3e" % (what, bad.sum(), err.size, got[fin][i],
                                               ref[fin][i], err[i], np.ravel(allowed)[i]
                                               if np.ndim(allowed) else allowed))


def check_output(what, got, ref, dt, bound, vmax):
    a, r = TOL_OUTPUT[dt]
    assert_close(what, got, ref, a, r, 2.0 * logit_error(bound) * vmax)


def check_lse(what, got, ref, bound):
    assert_close(what, got, ref, TOL_LSE[0], TOL_LSE[1], logit_error(bound), lse_style=True)
