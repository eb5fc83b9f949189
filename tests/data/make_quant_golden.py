#!/usr/bin/env python3
"""Writes tests/data/quant_golden.h, the golden data of test_quant_reference:

  - FCL_Q8_0 and FCL_Q4_0: f32 blocks of 32 values and the bytes of ggml's
    block_q8_0 (f16 d, 32 int8) / block_q4_0 (f16 d, 16 bytes of nibbles),
    from gguf.quants.quantize (the gguf package that ships with llama.cpp);
  - FCL_FP8_E4M3 ("fn") and FCL_FP8_E5M2: the value of each of the 256 bytes,
    and a list of (x, scale) with the byte torch gives for f32(x / scale)
    clamped to +-max (saturation is the contract; torch's own overflow
    behaviour differs by format and version: 2.15 on the CPU saturates
    float8_e4m3fn but turns an E5M2 overflow into inf; ml_dtypes 0.7 turns
    an E4M3 overflow into NaN).

Run once, and commit its output:
    pip install numpy gguf torch ml_dtypes      (torch's CPU or CUDA wheel)
    python3 tests/data/make_quant_golden.py            # -> tests/data/quant_golden.h

What this script found about gguf against ggml's C reference
(ggml-quants.c, quantize_row_q8_0_ref / quantize_row_q4_0_ref), which is the
contract (DESIGN.md, "Quantized KV caches"):

  q8_0  gguf's Q8_0.quantize_blocks computes d = amax / 127, id = 1 / d and
        x * id in f32 (NumPy 2 keeps the Python scalars 127 and 1 "weak", so
        no step is promoted to f64), and rounds with np_roundf:
        sign(x) * (floor(|x|) + floor(2 * (|x| - floor(|x|)))), which is
        exact in f32 and rounds half away from zero like C's roundf (not
        np.round, which rounds half to even). It matches the C reference on
        every block below, ties included.
  q4_0  gguf's Q4_0.quantize_blocks takes the first value of largest
        magnitude (argmax of |x|: the first, as C's strict `amax < |v|`),
        d = max / -8, id = 1 / d, trunc(f32(x * id) + 8.5f) in f32, clip to
        15: the C reference, with one difference: a block of zeros. C starts
        from max = +0.0f, so d = +0.0f / -8 = -0.0f (f16 0x8000) whatever the
        signs of the zeros; gguf takes max = x[0], so a block whose first
        value is -0.0 gets d = +0.0 (0x0000). The golden bytes follow C there
        (the blocks marked "C, not gguf").
  Both  C compilers may contract x * id + 8.5f into one fma (GCC does by
        default in GNU C mode on targets with fma; OpenCL C allows it unless
        FP_CONTRACT is OFF). The reference is two f32 roundings, as written;
        the blocks marked "fma differs" have a value whose nibble an fma
        would change. Likewise "x/d differs" (x / d in place of x * id) and
        "f16 d differs" (q computed from d rounded to f16 in place of the f32
        d): the C reference uses x * id with the f32 d.

Every block's bytes are also recomputed here by a step-by-step transliteration
of the C reference in NumPy f32 scalars; the two must agree except where
documented above. For fp8, torch's bytes are checked against ml_dtypes (where
installed) and against an exact rational round-to-nearest-even written here;
all three must agree on every value (NaN: only that it is a NaN).
"""
import importlib.metadata
import math
import os
import sys
from fractions import Fraction

import numpy as np
import torch
from gguf import GGMLQuantizationType
from gguf.quants import quantize as gguf_quantize

try:
    import ml_dtypes
except ImportError:  # an extra cross-check only
    ml_dtypes = None

F32 = np.float32
RNG = np.random.default_rng(20250611)


# ---- ggml's C reference, transliterated (f32 scalar arithmetic) ------------
def c_roundf(v):
    """C's roundf: half away from zero (a + 0.5 is exact in double here)."""
    r = math.floor(abs(float(v)) + 0.5)
    return -r if v < 0 else r


def itrunc(v):
    return math.trunc(float(v))


def f32_of(fr):
    """A Fraction rounded once to f32, nearest, ties to even."""
    c = F32(float(fr))
    best = None
    for cand in (np.nextafter(c, F32(-np.inf)), c, np.nextafter(c, F32(np.inf))):
        err = abs(Fraction(float(cand)) - fr)
        even = int(np.array([cand], dtype=F32).view(np.uint32)[0]) % 2 == 0
        if best is None or err < best[0] or (err == best[0] and even):
            best = (err, cand)
    return best[1]


def c_q8_0(x):
    x = np.asarray(x, dtype=F32)
    amax = F32(0.0)
    for v in x:
        av = F32(abs(v))
        amax = amax if amax > av else av  # MAX(amax, fabsf(v))
    d = F32(amax / F32(127))
    idd = F32(F32(1) / d) if d != 0 else F32(0)
    qs = [int(c_roundf(F32(v * idd))) for v in x]
    return bytes(np.array([d], dtype=np.float16).view(np.uint8)) + bytes(
        np.array(qs, dtype=np.int8).view(np.uint8))


def c_q4_0(x):
    x = np.asarray(x, dtype=F32)
    amax, mx = F32(0.0), F32(0.0)
    for v in x:
        if amax < F32(abs(v)):
            amax, mx = F32(abs(v)), v
    d = F32(mx / F32(-8))
    idd = F32(F32(1) / d) if d != 0 else F32(0)
    nib = [min(15, int(itrunc(F32(F32(v * idd) + F32(8.5))))) for v in x]
    qs = [nib[j] | (nib[j + 16] << 4) for j in range(16)]
    return bytes(np.array([d], dtype=np.float16).view(np.uint8)) + bytes(qs)


def gguf_bytes(x, qtype):
    return bytes(gguf_quantize(np.asarray(x, dtype=F32).reshape(1, 32), qtype).reshape(-1))


# ---- the blocks -------------------------------------------------------------
def f32(v):
    return np.asarray(v, dtype=F32)


def normal_blocks(scales, per):
    out = []
    for s in scales:
        for _ in range(per):
            out.append((f32(RNG.standard_normal(32) * s), "normal sigma %g" % s))
    return out


def q8_ties():
    """Blocks where f32(x * id) lands exactly on k + 0.5, and one ulp to
    either side (found by search where id is not a power of two)."""
    out = []
    x = f32([(k + 0.5) * (1 if k % 2 else -1) for k in range(31)] + [127.0])
    out.append((x, "ties: d = 1, x = +-(k + 0.5)"))
    out.append((f32(x / 8), "ties: d = 1/8, x = +-(k + 0.5)/8"))
    for trial in range(3):
        amax = F32(RNG.uniform(0.3, 3.0))
        d = F32(amax / F32(127))
        idd = F32(F32(1) / d)
        vals = [amax]
        while len(vals) < 32:
            k = int(RNG.integers(-126, 126))
            xv = F32(F32(k + 0.5) / idd)
            for cand in (xv, np.nextafter(xv, F32(np.inf)), np.nextafter(xv, F32(-np.inf))):
                if F32(cand * idd) == F32(k + 0.5) and abs(cand) < amax and len(vals) < 32:
                    vals.append(cand)
                    nb = np.nextafter(cand, F32(np.inf if k >= 0 else -np.inf))
                    if len(vals) < 32 and abs(nb) < amax:
                        vals.append(nb)  # just past the tie
                    break
        out.append((f32(RNG.permutation(vals)), "ties: f32(x * id) = k + 0.5 exactly, d %s" % d))
    return out


def q4_edges():
    out = []
    m = F32(2.0)
    x = f32(RNG.uniform(-1.9, 1.9, 32))
    x[5] = -m
    out.append((x.copy(), "largest magnitude negative"))
    x = f32(RNG.uniform(-1.9, 1.9, 32))
    x[3], x[20] = m, -m
    out.append((x.copy(), "+m then -m: the first wins (d < 0), -m clamps to 15"))
    x = f32(RNG.uniform(-1.9, 1.9, 32))
    x[3], x[20] = -m, m
    out.append((x.copy(), "-m then +m: the first wins (d > 0), +m clamps to 15"))
    x = f32(RNG.uniform(-3.0, 3.0, 32))
    x[0] = F32(3.2)
    x[1:9] = f32([-3.2, -3.1, -3.05, -3.0, 3.0, -2.99, -2.9, -2.85])
    out.append((x.copy(), "x * id + 8.5 reaches 16 and more (clamped to 15)"))
    # d = 1 (max = -8): x + 8.5 lands exactly on integers, and one ulp off.
    x = [F32(-8.0)]
    for k in range(-7, 8):
        t = F32(k - 0.5)
        x += [t, np.nextafter(t, F32(-np.inf))]
    x.append(F32(7.5))
    out.append((f32(x[:32]), "truncation ties: x * id + 8.5 exactly integer, and just below"))
    return out


def tiny_blocks(kind):
    """amax around where d = amax / 127 (or / 8) is an f16 subnormal, at the
    normal/subnormal boundary, and below half the smallest subnormal (d
    stored as 0 with nonzero q)."""
    div = 127.0 if kind == "q8_0" else 8.0
    out = []
    for dtarget, what in ((2.0 ** -14, "d at f16's smallest normal"),
                          (2.0 ** -20 * 3.3, "d an f16 subnormal"),
                          (2.0 ** -24 * 1.4, "d near f16's smallest subnormal"),
                          (2.0 ** -26, "d below half f16's smallest subnormal: stored 0")):
        x = f32(RNG.uniform(-1, 1, 32) * dtarget * div)
        x[int(RNG.integers(0, 32))] = F32(-dtarget * div if kind == "q4_0" else dtarget * div)
        out.append((x, "tiny: " + what))
    return out


def zero_blocks():
    return [(f32(np.zeros(32)), "all +0"),
            (f32(-np.zeros(32)), "all -0 (C, not gguf, for q4_0)"),
            (f32([(-0.0 if i % 3 == 0 else 0.0) for i in range(32)]),
             "+-0 mixed, first -0 (C, not gguf, for q4_0)")]


def fma_blocks(count):
    """q4_0 blocks with values whose exact x * id lies within half an ulp of
    -4.5, -5.5, -6.5 or -7.5 (so f32(x * id) is that tie value and the sum
    is an integer), while the exact x * id + 8.5, rounded once as an fma
    would, falls below the integer: the nibble is one less with an fma."""
    out = []
    while len(out) < count:
        m = F32(RNG.uniform(0.5, 4.0) * (1 if RNG.integers(2) else -1))
        d = F32(m / F32(-8))
        idd = F32(F32(1) / d)
        hits = []
        for t in (-4.5, -5.5, -6.5, -7.5):
            x0 = F32(F32(t) / idd)
            for k in range(-4, 5):
                cand = x0
                for _ in range(abs(k)):
                    cand = np.nextafter(cand, F32(np.inf if k > 0 else -np.inf))
                if abs(cand) >= abs(m):
                    continue
                prod = Fraction(float(cand)) * Fraction(float(idd))
                two = itrunc(F32(F32(cand * idd) + F32(8.5)))
                one = itrunc(f32_of(prod + Fraction(17, 2)))
                if two != one:
                    hits.append(cand)
        if len(hits) < 2:
            continue
        x = f32(RNG.uniform(-1, 1, 32) * abs(m) * 0.99)
        pos = RNG.permutation(32)
        x[pos[0]] = m
        for i, h in enumerate(hits[:4]):
            x[pos[1 + i]] = h
        out.append((x, "fma differs: x * id + 8.5f fused changes a nibble"))
    return out


def nudges(x0, amax):
    """x0 and its f32 neighbours up to 4 ulps away, below amax in magnitude."""
    out = []
    for k in range(-4, 5):
        c = x0
        for _ in range(abs(k)):
            c = np.nextafter(c, F32(np.inf if k > 0 else -np.inf))
        if abs(c) < amax:
            out.append(c)
    return out


def q_of(kind, v, idd, d, how):
    """One value's q (q8_0) or nibble (q4_0) the C way ("ref"), with x / d
    ("div"), or with id from d rounded to f16 ("f16d")."""
    if how == "div":
        p = F32(v / d)
    elif how == "f16d":
        p = F32(v * F32(F32(1) / F32(np.float16(d))))
    else:
        p = F32(v * idd)
    return c_roundf(p) if kind == "q8_0" else min(15, itrunc(F32(p + F32(8.5))))


def discriminating(kind, how, count):
    """Blocks with values next to a rounding boundary (q8_0: x * id near
    k + 0.5; q4_0: x * id + 8.5 near an integer) where a plausible deviation
    from the C reference changes the bytes: "div" (x / d in place of
    x * id) or "f16d" (q from d rounded to f16 in place of the f32 d)."""
    out = []
    while len(out) < count:
        m = F32(RNG.uniform(0.05, 40.0) * (1 if RNG.integers(2) else -1))
        d = F32(abs(m) / F32(127)) if kind == "q8_0" else F32(m / F32(-8))
        idd = F32(F32(1) / d)
        hits = []
        for _ in range(40):
            t = (int(RNG.integers(-126, 126)) + 0.5 if kind == "q8_0"
                 else int(RNG.integers(-7, 8)) - 0.5)
            for c in nudges(F32(F32(t) / idd), abs(m)):
                if q_of(kind, c, idd, d, "ref") != q_of(kind, c, idd, d, how):
                    hits.append(c)
                    break
        if len(hits) < 2:
            continue
        x = f32(RNG.uniform(-1, 1, 32) * abs(m) * 0.99)
        pos = RNG.permutation(32)
        x[pos[0]] = m
        for i, h in enumerate(hits[:6]):
            x[pos[1 + i]] = h
        label = {"div": "x/d differs", "f16d": "f16 d differs"}[how]
        out.append((x, "%s: a plausible deviation changes the bytes" % label))
    return out


def block_cases(kind):
    qt = GGMLQuantizationType.Q8_0 if kind == "q8_0" else GGMLQuantizationType.Q4_0
    ref = c_q8_0 if kind == "q8_0" else c_q4_0
    cases = normal_blocks([1e-3, 0.1, 1.0, 30.0, 1e4], 3)
    cases += zero_blocks() + tiny_blocks(kind)
    cases += q8_ties() if kind == "q8_0" else q4_edges()
    for want in ("div", "f16d"):
        cases += discriminating(kind, want, 2)
    if kind == "q4_0":
        cases += fma_blocks(2)
    rows = []
    for x, what in cases:
        g, c = gguf_bytes(x, qt), ref(x)
        if g != c:
            if "C, not gguf" not in what:
                sys.exit("%s: gguf and the C reference differ on '%s':\n %s\n %s"
                         % (kind, what, g.hex(), c.hex()))
        elif "C, not gguf" in what and kind == "q4_0" and "first -0" in what:
            sys.exit("q4_0: expected gguf to differ from C on '%s'" % what)
        rows.append((x, c, what))
    return rows


# ---- fp8 ----------------------------------------------------------------------
FP8 = {  # name: (torch dtype, exponent bits, mantissa bits, bias, max, has inf)
    "e4m3": (torch.float8_e4m3fn, 4, 3, 7, 448.0, False),
    "e5m2": (torch.float8_e5m2, 5, 2, 15, 57344.0, True),
}


def fp8_value_exact(b, fmt):
    _, eb, mb, bias, _, has_inf = FP8[fmt]
    s = -1.0 if b & 0x80 else 1.0
    e, m = (b >> mb) & ((1 << eb) - 1), b & ((1 << mb) - 1)
    if e == (1 << eb) - 1 and (has_inf or m == (1 << mb) - 1):
        return s * math.inf if has_inf and m == 0 else math.nan
    if e == 0:
        return s * m * 2.0 ** (1 - bias - mb)
    return s * (1 + m / 2 ** mb) * 2.0 ** (e - bias)


def fp8_encode_exact(y, fmt):
    """Round-to-nearest-even of the f32 y to the format, saturating."""
    _, eb, mb, bias, mx, _ = FP8[fmt]
    if math.isnan(y):
        return None
    sign = 0x80 if math.copysign(1.0, y) < 0 else 0
    a = min(abs(y), mx)
    best, best_err = 0, None
    for b in range(0x80):
        v = fp8_value_exact(b, fmt)
        if math.isnan(v) or math.isinf(v):
            continue
        err = abs(Fraction(v) - Fraction(a))
        if best_err is None or err < best_err or (err == best_err and b % 2 == 0 and best % 2):
            best, best_err = b, err
    return sign | best


def torch_bytes(y, fmt):
    tdt, *_, mx, _ = FP8[fmt]
    return torch.tensor(np.clip(f32(y), -mx, mx)).to(tdt).view(torch.uint8).numpy()


def fp8_values(fmt):
    tdt = FP8[fmt][0]
    vals = torch.arange(256, dtype=torch.uint8).view(tdt).float().numpy()
    for b in range(256):
        want = fp8_value_exact(b, fmt)
        if not (math.isnan(want) and math.isnan(vals[b])) and want != float(vals[b]):
            sys.exit("%s byte 0x%02x: torch %r, the format says %r" % (fmt, b, vals[b], want))
    if ml_dtypes is not None:
        mdt = ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2
        other = np.arange(256, dtype=np.uint8).view(mdt).astype(F32)
        if not np.array_equal(vals, other, equal_nan=True):
            sys.exit("%s: torch and ml_dtypes decode differently" % fmt)
    return vals


def fp8_encode_cases(fmt):
    _, eb, mb, bias, mx, _ = FP8[fmt]
    finite = sorted({fp8_value_exact(b, fmt) for b in range(0x80)} - {math.inf}, key=float)
    finite = [v for v in finite if not math.isnan(v)]
    cases = []
    for lo, hi in zip(finite, finite[1:]):  # every midpoint (ties), both signs
        mid = (lo + hi) / 2
        if F32(mid) == mid:
            cases.append((mid, 1.0, "tie %g|%g" % (lo, hi)))
            cases.append((-mid, 1.0, "tie -(%g|%g)" % (lo, hi)))
            cases.append((float(np.nextafter(F32(mid), F32(np.inf))), 1.0, "just above a tie"))
    cases.append((finite[1] / 4, 1.0, "a quarter of the smallest subnormal"))
    cases.append((-finite[1] * 0.75, 1.0, "3/4 of the smallest subnormal, negative"))
    for v in finite[1:8]:
        cases.append((v, 1.0, "subnormal or small"))
    nxt = mx + 2.0 ** (math.floor(math.log2(mx)) - mb)  # the value past max, were there one
    for v, what in ((mx, "max"), (float(np.nextafter(F32(mx), F32(np.inf))), "just above max"),
                    ((mx + nxt) / 2, "halfway past max"), (nxt, "one step past max"),
                    (1e30, "1e30"), (float(np.finfo(F32).max), "f32 max")):
        cases.append((v, 1.0, what))
        cases.append((-v, 1.0, "-" + what))
    cases += [(math.inf, 1.0, "inf"), (-math.inf, 1.0, "-inf"), (-0.0, 1.0, "-0"),
              (0.0, 1.0, "+0"), (1e-40, 1.0, "f32 subnormal"), (-1e-40, 1.0, "-f32 subnormal"),
              (math.nan, 1.0, "NaN"), (-math.nan, 1.0, "-NaN"), (math.nan, 0.5, "NaN, scale 0.5")]
    # Scales: powers of two (exact), and ties that x / scale reaches only
    # when divided (x * (1 / scale) lands elsewhere).
    for s in (0.25, 4.0, 2.0 ** -8):
        for v in finite[9:40:7]:
            cases.append((v * s, s, "scale %g" % s))
    found = 0
    mids = [(lo + hi) / 2 for lo, hi in zip(finite, finite[1:]) if F32((lo + hi) / 2) == (lo + hi) / 2]
    for _ in range(200000):
        if found >= 6:
            break
        mid = mids[int(RNG.integers(len(mids) // 3, len(mids)))]
        s = F32(RNG.uniform(0.01, 3.0))
        x = F32(F32(mid) * s)
        for cand in (x, np.nextafter(x, F32(np.inf)), np.nextafter(x, F32(-np.inf))):
            y_div, y_mul = F32(cand / s), F32(cand * F32(F32(1) / s))
            if y_div == F32(mid) and fp8_encode_exact(float(y_div), fmt) != \
                    fp8_encode_exact(float(y_mul), fmt):
                cases.append((float(cand), float(s), "x / scale on a tie; x * (1/scale) is not"))
                found += 1
                break
    if found < 6:
        sys.exit("%s: found only %d scale ties" % (fmt, found))
    for mag in (1e-3, 1.0, 30.0, mx / 4):
        for v in RNG.standard_normal(6) * mag:
            s = float(F32(RNG.uniform(0.2, 2.0)))
            cases.append((float(F32(v)), s, "random"))
    rows = []
    for x, s, what in cases:
        x, s = F32(x), F32(s)
        with np.errstate(over="ignore", invalid="ignore"):
            y = F32(x / s)
        tb = int(torch_bytes([y], fmt)[0])
        ex = fp8_encode_exact(float(y), fmt)
        if ex is None:
            if not math.isnan(fp8_value_exact(tb, fmt)):
                sys.exit("%s: NaN input gave byte 0x%02x" % (fmt, tb))
        elif ex != tb:
            sys.exit("%s %s: x %r scale %r: torch 0x%02x, exact RNE 0x%02x" % (fmt, what, x, s, tb, ex))
        if ml_dtypes is not None and ex is not None:
            mdt = ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2
            mb_ = int(np.clip(f32([y]), -mx, mx).astype(mdt).view(np.uint8)[0])
            if mb_ != tb:
                sys.exit("%s %s: torch 0x%02x, ml_dtypes 0x%02x" % (fmt, what, tb, mb_))
        rows.append((x, s, tb, ex is None, what))
    return rows


# ---- the header ---------------------------------------------------------------
def cf(v):
    """A C float literal, exact (hexadecimal); -0.0 keeps its sign."""
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return ("-" if math.copysign(1.0, v) < 0 else "") + abs(v).hex() + "f"


def cbytes(b):
    return "{" + ", ".join("0x%02x" % c for c in b) + "}"


def emit_blocks(out, kind, rows, nbytes):
    up = kind.upper()
    out.append("#define QG_%s_COUNT %d" % (up, len(rows)))
    out.append("static const qg_block_%d qg_%s[QG_%s_COUNT] = {" % (nbytes, kind, up))
    for x, b, what in rows:
        out.append("  {\"%s\",\n   {%s},\n   %s}," % (what, ", ".join(cf(v) for v in x), cbytes(b)))
    out.append("};\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "quant_golden.h")
    q8, q4 = block_cases("q8_0"), block_cases("q4_0")
    out = ["/* Generated by tests/data/make_quant_golden.py (gguf %s, torch %s%s); do not edit."
           % (importlib.metadata.version("gguf"), torch.__version__,
              ", ml_dtypes %s" % ml_dtypes.__version__ if ml_dtypes else ""),
           " * The script says where each number comes from and what was checked. */",
           "#ifndef FCL_QUANT_GOLDEN_H", "#define FCL_QUANT_GOLDEN_H", "#include <math.h>", "",
           "typedef struct { const char *what; float x[32]; unsigned char bytes[34]; } qg_block_34;",
           "typedef struct { const char *what; float x[32]; unsigned char bytes[18]; } qg_block_18;",
           "/* byte: torch's for f32(x / scale) clamped to +-max; nan: x / scale is NaN, and",
           " * the encoding must be a NaN of the format (not a given byte). */",
           "typedef struct { const char *what; float x, scale; unsigned char byte, nan; } qg_fp8_enc;",
           ""]
    emit_blocks(out, "q8_0", q8, 34)
    emit_blocks(out, "q4_0", q4, 18)
    for fmt in ("e4m3", "e5m2"):
        vals = fp8_values(fmt)
        out.append("/* The value of each byte (torch: tensor(bytes, uint8).view(float8_%s).float()). */"
                   % ("e4m3fn" if fmt == "e4m3" else "e5m2"))
        out.append("static const float qg_%s_value[256] = {" % fmt)
        for i in range(0, 256, 8):
            out.append("  " + ", ".join(cf(v) for v in vals[i:i + 8]) + ",")
        out.append("};\n")
        rows = fp8_encode_cases(fmt)
        out.append("#define QG_%s_ENC_COUNT %d" % (fmt.upper(), len(rows)))
        out.append("static const qg_fp8_enc qg_%s_enc[QG_%s_ENC_COUNT] = {" % (fmt, fmt.upper()))
        for x, s, b, nan, what in rows:
            out.append("  {\"%s\", %s, %s, 0x%02x, %d}," % (what, cf(x), cf(s), b, int(nan)))
        out.append("};\n")
    out.append("#endif")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s: q8_0 %d blocks, q4_0 %d blocks" % (path, len(q8), len(q4)))


if __name__ == "__main__":
    main()
