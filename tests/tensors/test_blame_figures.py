"""Blame's figures from the metrics pass: the content hash and the sums of squares.

Both kernels (numpy and C) must give the same hash for the same content, whatever the chunk and
range boundaries, and the sum of squared differences up to summation order; the figures must
not change any metric cell (the existing kernel tests check the cells).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch  # noqa: TID253  (tests write real .pt files)

from msq.tensors import chash, fused
from msq.tensors.metrics import compare_arrays, compare_many, compare_metas
from msq.tensors.pool import TensorJob, compute_metrics
from msq.tensors.reader import inspect_tensor


def _f32(rng: np.random.Generator, k: int) -> np.ndarray:
    return rng.standard_normal(k).astype(np.float32)


def test_hash_is_a_sum_over_any_split() -> None:
    rng = np.random.default_rng(1)
    w = rng.integers(0, 2**32, 3 * chash.HASH_BLOCK + 77, dtype=np.uint64).astype(np.uint32)
    whole = chash.hash_words(w)
    for cut in (1, 5, chash.HASH_BLOCK - 1, chash.HASH_BLOCK, 2 * chash.HASH_BLOCK + 3):
        parts = chash.hash_words(w[:cut]) + chash.hash_words(w[cut:], cut)
        assert parts & chash.MASK == whole


def test_hash_sees_position_and_every_bit() -> None:
    rng = np.random.default_rng(2)
    x = _f32(rng, 10_000)
    base = chash.hash_values(x)
    flipped = x.copy()
    flipped.view(np.uint32)[1234] ^= 1  # one ulp
    swapped = x.copy()
    swapped[[10, 10 + chash.HASH_BLOCK]] = swapped[[10 + chash.HASH_BLOCK, 10]]  # same statistics
    assert chash.hash_values(x.copy()) == base
    assert chash.hash_values(flipped) != base
    assert chash.hash_values(swapped) != base
    assert chash.hash_values(x.astype(np.float64)) != base  # other dtype, other words


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
@pytest.mark.parametrize("kind", [fused.F32, fused.BF16, fused.F16])
@pytest.mark.parametrize("base", [0, 8, 4088, 4096 * 3, 5])  # 5: off the lane grid (a separate pass)
def test_c_kernel_hash_equals_the_numpy_hash(kind: int, base: int) -> None:
    rng = np.random.default_rng(kind * 100 + base)
    values = rng.standard_normal(9_001) * 3
    if kind == fused.F32:
        raw = values.astype(np.float32)
    elif kind == fused.F16:
        raw = values.astype(np.float16)
    else:
        raw = (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    other = raw[::-1].copy()
    rdt = np.float16 if kind == fused.F16 else np.float32
    plan = fused.Plan(kind, kind, float(np.finfo(rdt).eps), float(rdt(0.001)), float(rdt(0.005)))
    for loop in ("avx512", "avx2", "generic"):
        fused._fused.use_isa(loop)
        try:
            got = fused.stats(raw, other, plan, False, base)
        finally:
            fused._fused.use_isa("avx512")
        assert got is not None
        n_vals, b_vals = fused.values(raw, kind), fused.values(other, kind)
        assert got[10] == chash.hash_values(n_vals, base)
        assert got[11] == chash.hash_values(b_vals, base)
        diff = n_vals.astype(np.float64) - b_vals.astype(np.float64)
        assert math.isclose(got[9], float(np.dot(diff, diff)), rel_tol=1e-12)


@pytest.mark.parametrize("compat", [True, False])
def test_small_pairs_together_give_the_single_pair_figures(compat: bool) -> None:
    rng = np.random.default_rng(4)
    pairs = []
    for k in (1, 7, 300, 5000):
        b = _f32(rng, k)
        n = (b + rng.standard_normal(k).astype(np.float32) * 1e-3).astype(np.float32)
        b[:2] = 0.0  # the epsilon shift must not reach the hash
        pairs.append((n, b))
    pairs.append((pairs[0][0].astype(np.float16), pairs[0][1].astype(np.float16)))
    for got, (n, b) in zip(compare_many(pairs, compat=compat), pairs):
        want = compare_arrays(n.copy(), b.copy(), compat=compat)
        assert got[8:] == want[8:]
        assert got.npu_hash == chash.hash_values(n)
        assert got.bench_hash == chash.hash_values(b)
        diff = n.astype(np.float64) - b.astype(np.float64)
        if not compat:
            assert math.isclose(got.sq_diff, float(np.dot(diff, diff)), rel_tol=1e-12,
                                abs_tol=1e-300)


def test_scalar_and_empty_pairs_carry_figures() -> None:
    scalar = compare_arrays(np.array(3.0, np.float32), np.array(2.0, np.float32), compat=False)
    assert (scalar.sq_diff, scalar.npu_sq, scalar.bench_sq) == (1.0, 9.0, 4.0)
    assert scalar.npu_hash == chash.hash_values(np.array([3.0], np.float32))
    empty = compare_arrays(np.zeros(0, np.float32), np.zeros(0, np.float32), compat=False)
    assert (empty.sq_diff, empty.npu_hash) == (0.0, 0)
    shape = compare_arrays(np.zeros(3, np.float32), np.zeros(4, np.float32), compat=False)
    assert shape.sq_diff is None and shape.npu_hash is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_files_through_ranges_and_the_pool_give_the_whole_tensor_figures(
    tmp_path: Path, dtype: torch.dtype
) -> None:
    """A big pair streamed in chunks and element ranges (C kernel where it covers the dtype),
    and the same content in another file pair: equal hashes, the sums of the whole tensors."""
    rng = np.random.default_rng(5)
    k = 3 * (1 << 17) + 999
    n = rng.standard_normal(k).astype(np.float32)
    b = (n + rng.standard_normal(k).astype(np.float32) * 1e-2).astype(np.float32)
    n[1 << 17] = b[1 << 17] = np.inf  # a chunk that falls back to numpy
    for name, arr in (("n", n), ("b", b), ("n2", n)):
        torch.save(torch.from_numpy(arr).to(dtype), tmp_path / f"{name}.pt")
    nm, bm = inspect_tensor(str(tmp_path / "n.pt"), None), inspect_tensor(str(tmp_path / "b.pt"),
                                                                          None)
    whole = compare_metas(nm, bm, compat=False)
    ranged = compare_metas(nm, bm, compat=False, chunk=1 << 15)
    n_vals = torch.from_numpy(n).to(dtype)
    n_vals = (n_vals.float() if dtype == torch.bfloat16 else n_vals).numpy()
    assert whole.npu_hash == ranged.npu_hash == chash.hash_values(n_vals)
    assert math.isclose(whole.sq_diff, ranged.sq_diff, rel_tol=1e-9)
    jobs = [TensorJob(0, "n.pt", "b.pt", str(tmp_path), str(tmp_path)),
            TensorJob(1, "n2.pt", "n.pt", str(tmp_path), str(tmp_path))]
    table = compute_metrics(jobs, compat=False, workers=2, progress=False,
                            range_elems=1 << 17).to_pylist()
    assert table[0]["npu_hash"] == table[1]["npu_hash"] == table[1]["bench_hash"]
    assert table[0]["bench_hash"] != table[0]["npu_hash"]
    assert table[1]["sq_diff"] == 0.0
    assert math.isclose(table[0]["sq_diff"], whole.sq_diff, rel_tol=1e-9)


def test_arrays_compared_in_chunks_give_the_whole_arrays_figures() -> None:
    """compare_arrays over several chunks: the hash is of the whole content (each chunk at its
    place), and the sums and metrics are those of one pass."""
    rng = np.random.default_rng(9)
    n = rng.standard_normal(10_000).astype(np.float32)
    b = (n + rng.standard_normal(10_000).astype(np.float32) * 1e-3).astype(np.float32)
    one = compare_arrays(n.copy(), b.copy(), compat=False)
    chunked = compare_arrays(n.copy(), b.copy(), compat=False, chunk=1024)
    assert chunked.npu_hash == one.npu_hash == chash.hash_values(n)
    assert chunked.bench_hash == one.bench_hash != one.npu_hash
    assert math.isclose(chunked.sq_diff, one.sq_diff, rel_tol=1e-9)
    assert math.isclose(chunked.cosine, one.cosine, rel_tol=1e-12)
