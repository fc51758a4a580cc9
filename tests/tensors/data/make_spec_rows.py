"""Build inputs that reproduce the random-data rows of spec §4.3.8 (writes spec_rows.npz).

The spec lists msprobe 1.1.0's outputs for random tensors it does not ship. This script searches
for small fp32/fp16/bf16/int32 inputs that a plain transcription of msprobe's formulas (``ref``,
independent of msq's kernel) maps to exactly those printed values; test_metrics.py then checks the
msq kernel on them. Run: python tests/tensors/data/make_spec_rows.py (numpy only, ~1 min).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

f32 = np.float32


def r12(x: float) -> float:
    return float(format(float(x), ".12f"))


def ref(n: np.ndarray, b: np.ndarray) -> tuple:
    """msprobe 1.1.0 real-data metrics for >= 1-d arrays, inf/NaN at equal places (spec 4.3.2-4.3.4)."""
    n, b = np.array(n), np.array(b)
    with np.errstate(all="ignore"):
        bad = np.isnan(n) | np.isinf(n)
        assert np.array_equal(bad, np.isnan(b) | np.isinf(b))
        n[bad], b[bad] = 0, 0
        if b.dtype.kind == "f":
            z = b == 0
            b[z] += np.finfo(b.dtype).eps
            n[z] += np.finfo(b.dtype).eps
            rel = np.abs((n - b) / b)
        else:
            n2, b2 = n.astype(float), b.astype(float)
            z = b2 == 0
            b2[z] += np.finfo(float).eps
            n2[z] += np.finfo(float).eps
            rel = np.abs((n2 - b2) / b2)
        n, b = n.reshape(-1).astype(float), b.reshape(-1).astype(float)
        cos = n.dot(b) / (np.linalg.norm(n) * np.linalg.norm(b))
    c = r12(cos)
    if c > 0.9999:
        c = round(c, 6)
    if c > 0.99999:
        c = 1.0
    size = rel.size
    return (c, r12(np.max(np.abs(n - b))), r12(np.max(rel)), r12(np.sum(rel < 0.001) / size),
            r12(np.sum(rel < 0.005) / size))  # fmt: skip


def ulp(x: np.floating, k: int) -> np.floating:
    """x moved by k units in the last place (same dtype)."""
    arr = np.array([x])
    ints = arr.view(np.int32 if arr.dtype == f32 else np.int16)
    return (ints + k).view(arr.dtype)[0]


def bisect(fn, target: float, lo: float, hi: float) -> float:
    flo = fn(lo) - target
    for _ in range(80):
        mid = (lo + hi) / 2
        fm = fn(mid) - target
        if (fm < 0) == (flo < 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return (lo + hi) / 2


def tune_cos(make, target: float, span: int = 200000) -> tuple[np.ndarray, np.ndarray]:
    """Move two elements by integer ulps until ref()'s Cosine prints as ``target``."""
    c0 = make(0, 0)
    base = ref(*c0)[0]
    u = (ref(*make(2000, 0))[0] - base) / 2000
    v = (ref(*make(0, 2000))[0] - base) / 2000
    for i in range(span):
        for ii in (i, -i):
            j = round((target - base - ii * u) / v)
            for jj in (j - 1, j, j + 1):
                pair = make(ii, jj)
                if ref(*pair)[0] == target:
                    return pair
    raise SystemExit(f"no ulp pair reaches cosine {target}")


def find_rel(target: float, b_lo: float, b_hi: float, n_of) -> tuple[np.floating, np.floating]:
    """fp32 (n, b) with b in [b_lo, b_hi], n = n_of(b) (vectorised), whose fp32 relative error
    prints as target."""
    lo, hi = np.array([b_lo, b_hi], f32).view(np.int32)
    b = np.arange(lo, hi, dtype=np.int32).view(f32)
    n = n_of(b).astype(f32)
    with np.errstate(all="ignore"):
        rel = np.abs((n - b) / b)
    for i in np.flatnonzero(np.abs(rel.astype(float) - target) < 1e-11):
        if r12(rel[i]) == target:
            return n[i], b[i]
    raise SystemExit(f"no fp32 pair gives relative error {target}")


def row_zero_npu_and_zero_bench(rng: np.random.Generator) -> np.ndarray:
    """A [4,5] fp32 tensor x with max|x| printing 1.541942596436 and cos(x+eps, eps) 0.046135742112."""
    v = f32(1.541942596436)
    base = (rng.standard_normal(20).astype(f32) * f32(0.5)).clip(-1.4, 1.4).astype(f32)

    def shifted(s: float) -> np.ndarray:
        x = (base + f32(s)).astype(f32)
        x[3] = -v
        return x

    zero = np.zeros(20, f32)
    base = shifted(bisect(lambda s: ref(shifted(s), zero)[0], 0.046135742112, -0.3, 0.3))

    def make(i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        x = base.copy()
        x[5], x[11] = ulp(x[5], i), ulp(x[11], j)
        return x, zero.copy()

    return tune_cos(make, 0.046135742112)[0].reshape(4, 5)


def row_nan_same_position() -> tuple[np.ndarray, np.ndarray]:
    """[4,5] fp32, NaN at one shared position, npu = bench + 0.001 elsewhere."""
    n_m, b_m = find_rel(0.014690210111, 0.0675, 0.0690, lambda b: b + f32(0.001))
    big = [1.1, -1.3, 1.55, 1.9]  # rel < 0.001
    mid = [0.3, -0.35, 0.4, 0.45, -0.5, 0.55, 0.6, -0.7, 0.75, 0.8, 0.85]  # 0.001 <= rel < 0.005
    small = [0.1, -0.15, 0.12]  # rel >= 0.005, below the maximum
    b = np.array([np.nan] + big + mid + small + [b_m], f32)
    n = (b + f32(0.001)).astype(f32)
    n[-1] = n_m
    return n.reshape(4, 5), b.reshape(4, 5)


def row_fp16_vs_fp32(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """npu = bench rounded to fp16 (fp16 tensor), bench fp32."""
    exact = (rng.integers(-900, 900, 18) / 1024).astype(f32)  # representable in fp16
    b1 = f32(0.75 + 3571 * 2.0**-24)  # |fp16(b1) - b1| = 3571 * 2**-24
    _, b2 = find_rel(0.000360129023, 0.25, 0.59, lambda b: b.astype(np.float16))
    b = np.concatenate([exact, [b1, b2]]).astype(f32)
    return b.astype(np.float16), b


def row_bf16() -> tuple[np.ndarray, np.ndarray]:
    """bf16 both (widened to fp32): 7 equal, one diff below 0.005, two above (max 1/141)."""
    b = np.array([0.5, -1.0, 2.0, 0.75, -3.0, 1.5, 0.25, 1.75, 1.1015625, 1.25], f32)
    n = b.copy()
    n[7:] += f32(2.0**-7)
    return n, b


def row_int32() -> tuple[np.ndarray, np.ndarray]:
    """[4,5] int32, one element 4 -> 5; cos = (Q+4)/sqrt(Q(Q+9)) with Q = sum of squares."""
    target = 0.997997453695
    q = next(q for q in range(16, 100000) if r12((q + 4) / math.sqrt(q * (q + 9))) == target)
    rest = q - 16  # sum of squares of the other 19 elements (zeros allowed)
    vals, left = [], rest
    for _ in range(19):
        k = math.isqrt(left)
        vals.append(k)
        left -= k * k
    assert left == 0, (q, vals, left)
    b = np.array([4] + [v if i % 2 else -v for i, v in enumerate(vals)], np.int32)
    n = b.copy()
    n[0] = 5
    return n.reshape(4, 5), b.reshape(4, 5)


def row_noise(rng: np.random.Generator, spec: dict) -> tuple[np.ndarray, np.ndarray]:
    """1000 fp32 elements with prescribed maxima, ratio counts and cosine."""
    size = 1000
    b = (rng.uniform(0.4, 1.3, size) * rng.choice([-1, 1], size)).astype(f32)
    kinds = np.array(
        [0] * spec["c1"] + [1] * (spec["c5"] - spec["c1"]) + [2] * (size - 2 - spec["c5"])
    )
    rng.shuffle(kinds)
    kinds = np.concatenate([[2, 2], kinds])  # elements 0 and 1 carry the two maxima
    u = rng.uniform(0.05, 0.95, size)
    sign = rng.choice([-1, 1], size)

    def build(scale: float) -> tuple[np.ndarray, np.ndarray]:
        r = np.where(
            kinds == 0, u * 0.0009, np.where(kinds == 1, 0.0011 + u * 0.0037, 0.0055 + u * scale)
        )
        r = np.minimum(r, spec["cap"] / np.abs(b))  # no |n - b| above the designated maximum
        n = (b * (1 + sign * r)).astype(f32)
        n[0], b[0] = spec["abs_pair"]
        n[1], b[1] = spec["rel_pair"]
        return n, b.copy()

    scale = bisect(lambda s: -ref(*build(s))[0], -spec["cos_coarse"], 1e-4, spec["scale_hi"])
    n, b2 = build(scale)
    if spec.get("cos_exact"):

        def make(i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
            m = n.copy()
            m[10], m[20] = ulp(m[10], i), ulp(m[20], j)
            return m, b2.copy()

        n, b2 = tune_cos(make, spec["cos_exact"])
    return n, b2


def abs_pair(target: float, b_lo: float, b_hi: float) -> tuple[np.floating, np.floating]:
    """fp32 (n, b), b in [b_lo, b_hi) and n = b + ~target, whose float64 difference prints as
    target (scans b, rounds n)."""
    lo, hi = np.array([b_lo, b_hi], f32).view(np.int32)
    b = np.arange(lo, hi, dtype=np.int32).view(f32)
    n = (b.astype(float) + target).astype(f32)
    diff = n.astype(float) - b.astype(float)
    for i in np.flatnonzero(np.abs(diff - target) < 1e-11):
        if r12(diff[i]) == target:
            return n[i], b[i]
    raise SystemExit(f"no pair with difference {target}")


def main() -> None:
    rng = np.random.default_rng(20261129)
    out: dict[str, np.ndarray] = {}
    out["random_x"] = row_zero_npu_and_zero_bench(rng)
    out["nan_n"], out["nan_b"] = row_nan_same_position()
    out["fp16_n"], out["fp16_b"] = row_fp16_vs_fp32(rng)
    out["bf16_n"], out["bf16_b"] = row_bf16()
    out["int_n"], out["int_b"] = row_int32()
    small = {
        "c1": 84, "c5": 357, "cap": 0.0275, "abs_pair": abs_pair(0.027788579464, 0.004, 0.0078),
        "rel_pair": find_rel(10.945595741272, 0.0021, 0.0023, lambda b: b * f32(1 + 10.945595741272)),
        "cos_coarse": 0.999969, "scale_hi": 0.05,
    }  # fmt: skip
    out["s008_n"], out["s008_b"] = row_noise(rng, small)
    large = {
        "c1": 1, "c5": 6, "cap": 1.69, "abs_pair": abs_pair(1.69163697958, 0.004, 0.0078),
        "rel_pair": find_rel(611.401245117188, 0.0021, 0.0024, lambda b: b * f32(1 + 611.401245117188)),
        "cos_coarse": 0.891859321902, "cos_exact": 0.891859321902, "scale_hi": 2.0,
    }  # fmt: skip
    out["s05_n"], out["s05_b"] = row_noise(rng, large)
    for key in ("s008", "s05", "int", "bf16", "fp16", "nan"):
        print(key, ref(out[f"{key}_n"], out[f"{key}_b"]))
    print("random_x", ref(out["random_x"], np.zeros((4, 5), f32)))
    np.savez(Path(__file__).with_name("spec_rows.npz"), **out)


if __name__ == "__main__":
    main()
