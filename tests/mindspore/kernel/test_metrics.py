"""NPY-mode metric kernel of the kernel compare (spec §8.3 with the formulas of §4.3.4)."""

from __future__ import annotations

import numpy as np
import pytest

from msq.mindspore.kernel import metrics
from msq.mindspore.kernel.metrics import check_message, pair_metrics, r12, side_stats, worker_count


def expected(npu: np.ndarray, bench: np.ndarray) -> tuple[float, float, float, float, float]:
    """Hand formulas: float64, inf/nan zeroed, ε64 only in the relative error."""
    n = npu.astype(np.float64).reshape(-1)
    b = bench.astype(np.float64).reshape(-1)
    n[~np.isfinite(n)] = 0
    b[~np.isfinite(b)] = 0
    cos = float(n @ b / (np.sqrt(n @ n) * np.sqrt(b @ b)))
    max_abs = float(np.max(np.abs(n - b)))
    eps = np.finfo(np.float64).eps
    bz = np.where(b == 0, b + eps, b)
    nz = np.where(b == 0, n + eps, n)
    rel = np.abs((nz - bz) / bz)
    return cos, max_abs, float(rel.max()), float(np.mean(rel < 0.001)), float(np.mean(rel < 0.005))


def cosine_cell(cos: float) -> float:
    """R12, then 6 decimals above 0.9999, then 1.0 above 0.99999 (spec §4.3.4)."""
    value = r12(cos)
    value = round(value, 6) if value > 0.9999 else value
    return 1.0 if value > 0.99999 else value


@pytest.mark.parametrize("noise", [0.003, 0.3])
def test_metrics_match_hand_formulas(noise: float) -> None:
    rng = np.random.default_rng(7)
    npu = rng.standard_normal((4, 5)).astype(np.float32)
    bench = (npu + rng.normal(0, noise, (4, 5))).astype(np.float32)
    cos, max_abs, max_rel, one, five = expected(npu, bench)
    got = pair_metrics(npu, bench)
    assert got is not None
    cosine, label, g_abs, g_rel, rel_label, g_one, g_five, message = got
    assert cosine == pytest.approx(cosine_cell(cos), abs=1e-12)
    assert label is None and rel_label is None and message == ""
    assert g_abs == r12(max_abs)
    assert g_rel == pytest.approx(r12(max_rel), rel=1e-12)
    assert (g_one, g_five) == (r12(one), r12(five))


def test_epsilon_does_not_leak_into_cosine_or_max_abs() -> None:
    # PyTorch real-data mode gives cosine 0.046... here (spec §4.3.8); kernel mode flattens first.
    npu = np.array([0.5, -1.5, 2.0, 0.25], dtype=np.float32)
    bench = np.zeros(4, dtype=np.float32)
    cosine, label, max_abs, max_rel, _, one, five, message = pair_metrics(npu, bench)
    assert (cosine, label) == (None, "Nan")
    assert message == metrics.MSG_BENCH_ZERO
    assert max_abs == 2.0
    eps = np.finfo(np.float64).eps
    assert max_rel == r12(((2.0 + eps) - eps) / eps)  # the shift is applied to both, in place
    assert (one, five) == (0.0, 0.0)


def test_cosine_rounding_and_snap() -> None:
    npu = np.array([1.0, 2.0, 3.0], dtype=np.float64)
    assert pair_metrics(npu, npu.copy())[0] == 1.0
    near = np.array([1.0, 2.0, 3.001])
    cos = float(npu @ near / (np.linalg.norm(npu) * np.linalg.norm(near)))
    assert cos > 0.99999  # snapped to 1.0
    assert pair_metrics(npu, near)[0] == 1.0
    mid = np.array([1.0, 2.0, 3.05])
    cos = float(npu @ mid / (np.linalg.norm(npu) * np.linalg.norm(mid)))
    assert 0.9999 < cos < 0.99999
    assert pair_metrics(npu, mid)[0] == round(r12(cos), 6)


def test_length_one_and_zero_norms() -> None:
    one = pair_metrics(np.array([2.0], np.float32), np.array([2.5], np.float32))
    assert one[:2] == (None, "unsupported") and one[7] == metrics.MSG_LENGTH_ONE
    assert one[2] == 0.5 and one[3] == 0.2
    both_zero = pair_metrics(np.zeros(3, np.float32), np.zeros(3, np.float32))
    assert both_zero[:3] == (1.0, None, 0.0)
    npu_zero = pair_metrics(np.zeros(3, np.float32), np.ones(3, np.float32))
    assert npu_zero[:2] == (None, "Nan") and npu_zero[7] == metrics.MSG_NPU_ZERO


def test_nan_inf_positions() -> None:
    npu = np.array([1.0, np.nan, np.inf, 4.0], np.float32)
    same = np.array([1.0, np.nan, np.inf, 4.004], np.float32)
    got = pair_metrics(npu, same)
    assert got is not None and got[2] == r12(float(np.float32(4.004)) - 4.0)
    moved = np.array([np.nan, 1.0, np.inf, 4.0], np.float32)
    assert pair_metrics(npu, moved) is None


def test_chunked_equals_single_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    npu = rng.standard_normal(1000).astype(np.float32)
    bench = (npu * 1.002).astype(np.float32)
    bench[::7] = 0
    whole = pair_metrics(npu, bench)
    monkeypatch.setattr(metrics, "CHUNK", 64)
    chunked = pair_metrics(npu, bench)
    assert whole is not None and chunked is not None
    assert chunked[2:] == whole[2:]
    assert chunked[0] == pytest.approx(whole[0], abs=1e-12)


@pytest.mark.parametrize(("npu", "bench", "message"), [
    (None, np.ones(2), metrics.MSG_NOT_NDARRAY),
    (np.ones(0), np.ones(0), metrics.MSG_EMPTY),
    (np.array(1.0), np.array(1.0), metrics.MSG_SCALAR),
    (np.array(1.0), np.ones(2), metrics.MSG_SCALAR + metrics.MSG_SHAPE),
    (np.ones(2), np.ones(3), metrics.MSG_SHAPE),
    (np.ones(2, np.float32), np.ones(2, np.float16), metrics.MSG_DTYPE),
    (np.ones(2, np.float32), np.ones(3, np.float16), metrics.MSG_SHAPE + metrics.MSG_DTYPE),
    (np.ones(2), np.ones(2), ""),
])
def test_check_messages(npu: np.ndarray | None, bench: np.ndarray, message: str) -> None:
    assert check_message(npu, bench) == message


def test_side_stats_types() -> None:
    assert side_stats(None) == metrics.EMPTY_STATS
    half = side_stats(np.array([[0.1, 0.2]], np.float16))
    assert half[:2] == ("float16", "(1, 2)")
    assert half[2] == float(np.float16(0.2))
    assert side_stats(np.array([True, False]))[2:] == (1.0, 0.0, 0.5, 1.0, True)
    assert side_stats(np.zeros((0, 3), np.float32)) == ("float32", "(0, 3)", None, None, None,
                                                        None, False)


def test_worker_count_is_never_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    assert worker_count(0) == 1
    monkeypatch.setattr(metrics.os, "sched_getaffinity", lambda _pid: set(), raising=False)
    assert worker_count() == 1
    monkeypatch.setattr(metrics.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert worker_count() == 2
