"""Real-data metrics: every verified example of spec §4.3.8, compat vs default, kernel paths agree."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch  # noqa: TID253  (tests write and cross-check real .pt files)

from msq.tensors.metrics import (
    MSG_COS_ZERO_BENCH,
    MSG_COS_ZERO_NPU,
    MetricResult,
    accuracy,
    compare_arrays,
    compare_many,
    r12,
)
from msq.tensors.pool import TensorJob, compute_metrics

ROWS = np.load(Path(__file__).with_name("data") / "spec_rows.npz")
f32, f16 = np.float32, np.float16


def fp32_after(x: float, ulps: int) -> np.float32:
    return (np.array([x], f32).view(np.int32) + ulps).view(f32)[0]


# (id, npu, bench, cosine, max_abs, max_rel, 1‰, 5‰, accuracy, err_message) — spec §4.3.8, compat.
# Rows with random data in the spec use inputs built by data/make_spec_rows.py (see its docstring).
SPEC = [
    (
        "identical",
        np.arange(1, 21, dtype=f32).reshape(4, 5),
        np.arange(1, 21, dtype=f32).reshape(4, 5),
        1.0,
        0.0,
        0.0,
        1.0,
        1.0,
        "Yes",
        "",
    ),
    (
        "npu-all-zero",
        np.zeros((4, 5), f32),
        ROWS["random_x"],
        "Nan",
        1.541942596436,
        1.0,
        0.0,
        0.0,
        "No",
        MSG_COS_ZERO_NPU,
    ),
    (
        "bench-all-zero",
        ROWS["random_x"],
        np.zeros((4, 5), f32),
        0.046135742112,
        1.541942596436,
        12934752.0,
        0.0,
        0.0,
        "No",
        "",
    ),
    (
        "nan-same-position",
        ROWS["nan_n"],
        ROWS["nan_b"],
        1.0,
        0.00100004673,
        0.014690210111,
        0.25,
        0.8,
        "Yes",
        "",
    ),
    (
        "nan-different-position",
        np.array([1, np.nan, 2, 3], f32),
        np.array([1, 2, np.nan, 3], f32),
        "N/A",
        "N/A",
        "N/A",
        "N/A",
        "N/A",
        "No",
        "The position of inf or nan in NPU and bench Tensor do not match.",
    ),
    (
        "fp16-vs-fp32",
        ROWS["fp16_n"],
        ROWS["fp16_b"],
        1.0,
        0.000212848186,
        0.000360129023,
        1.0,
        1.0,
        "Yes",
        "",
    ),
    ("bf16", ROWS["bf16_n"], ROWS["bf16_b"], 1.0, 0.0078125, 0.007092198357, 0.7, 0.8, "Yes", ""),
    (
        "int32-plus-one",
        ROWS["int_n"],
        ROWS["int_b"],
        0.997997453695,
        1.0,
        0.25,
        0.95,
        0.95,
        "Yes",
        "",
    ),
    (
        "bool",
        np.array([True, False, True, True]),
        np.array([True, True, True, True]),
        0.866025403784,
        1.0,
        1.0,
        0.75,
        0.75,
        "No",
        "",
    ),
    (
        "empty",
        np.zeros(0, f32),
        np.zeros(0, f32),
        "unsupported",
        0.0,
        0.0,
        0.0,
        0.0,
        "None",
        "This is empty data, can not compare.",
    ),
    (
        "length-1",
        np.array([2.0], f32),
        np.array([2.5], f32),
        "unsupported",
        0.5,
        0.20000000298,
        0.0,
        0.0,
        "None",
        "This tensor is scalar.",
    ),
    (
        "0-d",
        np.array(f32(5.80557)),
        np.array(fp32_after(5.77263, 5)),
        "unsupported",
        0.032937526703,
        0.005705806892,
        "Nan",
        "Nan",
        "None",
        "This is type of scalar data, can not compare.",
    ),
    (
        "shape-20-vs-10",
        np.ones(20, f32),
        np.ones(10, f32),
        *["shape unmatched"] * 5,
        "Unmatched",
        "Shape of NPU and bench Tensor do not match. Skipped.",
    ),
    (
        "fp32-five",
        np.array([0.3, 0, 1.5, -2, 0], f32),
        np.array([0, 0, 1.5001, -2, 0.001], f32),
        0.992876758073,
        0.300000011921,
        2516582.5,
        0.6,
        0.6,
        "Yes",
        "",
    ),
    (
        "fp16-five",
        np.array([0.3, 0, 1.5, -2, 0], f16),
        np.array([0, 0, 1.5001, -2, 0.001], f16),
        0.99287512897,
        0.300048828125,
        307.25,
        0.6,
        0.6,
        "Yes",
        "",
    ),
    (
        "fp16-overflow",
        np.array([100, 1], f16),
        np.array([0, 1], f16),
        0.010976008479,
        99.9990234375,
        math.inf,
        0.5,
        0.5,
        "No",
        "",
    ),
    (
        "noise-0.008",
        ROWS["s008_n"],
        ROWS["s008_b"],
        0.999969,
        0.027788579464,
        10.945595741272,
        0.084,
        0.357,
        "Yes",
        "",
    ),
    (
        "noise-0.5",
        ROWS["s05_n"],
        ROWS["s05_b"],
        0.891859321902,
        1.69163697958,
        611.401245117188,
        0.001,
        0.006,
        "No",
        "",
    ),
    (
        "1e11-vs-1",
        np.array([1e11] + [1] * 9, f32),
        np.ones(10, f32),
        0.316227766045,
        99999997951.0,
        99999997952.0,
        0.9,
        0.9,
        "No",
        "",
    ),
]


def cells(r: MetricResult) -> tuple:
    return (
        r.cosine,
        r.max_abs_err,
        r.max_rel_err,
        r.one_thousandth,
        r.five_thousandth,
        r.accuracy,
        r.err_message,
    )


def assert_cells(got: tuple, want: tuple) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w), (got, want)
        assert g == w or (isinstance(w, float) and math.isnan(w) and math.isnan(g)), (got, want)


@pytest.mark.parametrize("row", SPEC, ids=[r[0] for r in SPEC])
def test_spec_examples_in_memory(row: tuple) -> None:
    _, npu, bench, *want = row
    assert_cells(cells(compare_arrays(npu, bench, compat=True)), tuple(want))


def _save(path: Path, arr: np.ndarray, bf16: bool) -> None:
    t = torch.from_numpy(np.array(arr))
    torch.save(t.bfloat16() if bf16 else t, path)


@pytest.mark.parametrize("workers", [1, 2])
def test_spec_examples_through_pt_files_and_the_pool(tmp_path: Path, workers: int) -> None:
    npu_dir, bench_dir = tmp_path / "npu", tmp_path / "bench"
    npu_dir.mkdir()
    bench_dir.mkdir()
    jobs = []
    for i, (name, npu, bench, *_) in enumerate(SPEC):
        file = f"Torch.{name}.0.forward.output.0.pt"
        _save(npu_dir / file, npu, name == "bf16")
        _save(bench_dir / file, bench, name == "bf16")
        jobs.append(TensorJob(i, file, file, str(npu_dir), str(bench_dir)))
    table = compute_metrics(jobs * 3, compat=True, workers=workers, progress=False).to_pylist()
    for got, (_, _, _, *want) in zip(table, SPEC * 3):
        assert_cells(_cells_of_row(got), tuple(want))


def _cells_of_row(row: dict) -> tuple:
    names = ("cosine", "max_abs_err", "max_rel_err", "one_thousandth", "five_thousandth")
    vals = tuple(row[n] if row[n] is not None else row[f"{n}_text"] for n in names)
    return vals + (row["accuracy"], row["err_message"])


def test_spec_missing_files_and_unmatched_rows(tmp_path: Path) -> None:
    npu_dir, bench_dir = tmp_path / "npu", tmp_path / "bench"
    npu_dir.mkdir()
    bench_dir.mkdir()
    present = "Torch.missing_bench.0.forward.output.0.pt"
    torch.save(torch.ones(3), npu_dir / present)
    jobs = [
        TensorJob(
            1,
            "Torch.missing_npu.0.forward.output.0.pt",
            "Torch.missing_npu.0.forward.output.0.pt",
            str(npu_dir),
            str(bench_dir),
        ),
        TensorJob(2, present, present, str(npu_dir), str(bench_dir)),
        TensorJob(3, None, None),  # int/None argument, or unmatched
    ]
    rows = compute_metrics(jobs, compat=True, workers=1).to_pylist()
    none5 = ("None",) * 5
    assert _cells_of_row(rows[0]) == none5 + (
        "None",
        "Dump file: Torch.missing_npu.0.forward.output.0.pt not found.",
    )
    assert _cells_of_row(rows[1]) == none5 + ("None", f"Dump file: {present} not found.")
    assert _cells_of_row(rows[2]) == none5 + ("None", "No bench data matched.")
    assert [r["status"] for r in rows] == ["no_data"] * 3


def test_spec_fuzzy_names_differ_identical_data(tmp_path: Path) -> None:
    (tmp_path / "n").mkdir()
    (tmp_path / "b").mkdir()
    torch.save(torch.arange(1.0, 7.0), tmp_path / "n" / "Functional.relu.1.forward.output.0.pt")
    torch.save(torch.arange(1.0, 7.0), tmp_path / "b" / "Functional.relu.0.forward.output.0.pt")
    job = TensorJob(
        0,
        "Functional.relu.1.forward.output.0.pt",
        "Functional.relu.0.forward.output.0.pt",
        str(tmp_path / "n"),
        str(tmp_path / "b"),
    )
    row = compute_metrics([job], compat=True, workers=1).to_pylist()[0]
    # the caller appends " Fuzzy matching data, ..." because the names differ
    assert _cells_of_row(row) == (1.0, 0.0, 0.0, 1.0, 1.0, "Yes", "")


# ----------------------------------------------------------------- compat vs default (docs/tensors.md)


def test_default_cosine_and_max_abs_use_unshifted_data() -> None:
    n, b = np.array([0.3, 0, 1.5, -2, 0], f32), np.array([0, 0, 1.5001, -2, 0.001], f32)
    compat, default = compare_arrays(n, b, compat=True), compare_arrays(n, b, compat=False)
    assert compat.cosine == 0.992876758073 and default.cosine == 0.992876757992
    n, b = np.array([100, 1], f16), np.array([0, 1], f16)
    compat, default = compare_arrays(n, b, compat=True), compare_arrays(n, b, compat=False)
    assert (compat.cosine, compat.max_abs_err) == (0.010976008479, 99.9990234375)
    assert (default.cosine, default.max_abs_err) == (0.009999500037, 100.0)
    # the relative error (and its ratios) is the same in both modes: ε is still needed there
    assert (default.max_rel_err, default.one_thousandth) == (
        compat.max_rel_err,
        compat.one_thousandth,
    )


def test_default_all_zero_bench_is_a_zero_norm_not_an_epsilon_cosine() -> None:
    x = ROWS["random_x"]
    compat = compare_arrays(x, np.zeros((4, 5), f32), compat=True)
    default = compare_arrays(x, np.zeros((4, 5), f32), compat=False)
    assert compat.cosine == 0.046135742112 and compat.err_message == ""
    assert default.cosine == "Nan" and default.err_message == MSG_COS_ZERO_BENCH
    assert default.max_abs_err == 1.541942596436 and default.max_rel_err == 12934752.0
    assert default.accuracy == "No"


def test_default_zero_norm_side_is_never_yes() -> None:
    small = np.array([0.1, -0.2, 0.3, 0.05], f32)
    compat = compare_arrays(np.zeros(4, f32), small, compat=True)
    default = compare_arrays(np.zeros(4, f32), small, compat=False)
    assert compat.cosine == "Nan" and compat.accuracy == "Yes"  # msprobe's float("Nan") bug
    assert default.cosine == "Nan" and default.accuracy == "No"
    assert compat.err_message == default.err_message == MSG_COS_ZERO_NPU


def test_both_sides_all_zero_is_yes_in_both_modes() -> None:
    z = np.zeros(6, f32)
    for compat in (True, False):
        r = compare_arrays(z, z.copy(), compat=compat)
        assert (r.cosine, r.max_abs_err, r.accuracy) == (1.0, 0.0, "Yes")


def test_accuracy_rules() -> None:
    assert accuracy("shape unmatched", "shape unmatched", compat=True) == "Unmatched"
    assert accuracy("None", "None", compat=True) == "None"
    assert accuracy("N/A", "N/A", compat=False) == "No"
    assert accuracy("unsupported", 0.5, compat=True) == "None"
    assert accuracy(0.98, 0.002, compat=True) == "No"
    assert accuracy(0.98, 0.0005, compat=True) == "Yes"
    assert accuracy(0.89, 0.0, compat=True) == "No"
    assert accuracy(0.999, 1.5, compat=True) == "No"
    assert accuracy("Nan", 0.5, compat=True) == "Yes"
    assert accuracy("Nan", 0.5, compat=False) == "No"


def test_r12_rounds_to_twelve_decimals_not_digits() -> None:
    assert r12(1.23456789012345e-13) == 0.0
    assert r12(123456.1234567890123) == 123456.123456789
    assert r12(math.inf) == math.inf
    assert r12(np.float32(0.2)) == 0.20000000298


# ------------------------------------------------------------------------------- 0-d corners


def test_zero_d_int_keeps_native_arithmetic() -> None:
    r = compare_arrays(np.array(5, np.uint8), np.array(7, np.uint8), compat=True)
    assert r.max_abs_err == 254.0  # uint8 wrap-around, as numpy does in msprobe
    assert r.max_rel_err == r12(2 / 7)
    assert (r.one_thousandth, r.five_thousandth, r.accuracy) == ("Nan", "Nan", "None")


def test_zero_d_nan_gives_nan_max_rel_message() -> None:
    r = compare_arrays(np.array(np.nan, f32), np.array(np.nan, f32), compat=True)
    assert r.max_rel_err == "Nan"
    assert r.err_message == (
        "This is type of scalar data, can not compare."
        "Cannot compare by MaxRelativeError, the data contains nan in dump data."
    )


def test_zero_d_bool() -> None:
    r = compare_arrays(np.array(True), np.array(False), compat=True)
    assert (r.cosine, r.max_abs_err) == ("unsupported", 1.0)


def test_zero_d_zero_bench_shift_leaks_only_in_compat() -> None:
    n, b = np.array(f32(0.5)), np.array(f32(0.0))
    compat, default = compare_arrays(n, b, compat=True), compare_arrays(n, b, compat=False)
    assert compat.max_abs_err == r12(0.5)  # (0.5 + ε) - ε in float32
    assert default.max_abs_err == 0.5


def test_inputs_are_not_mutated() -> None:
    n, b = np.array([1.0, 0.0, np.nan], f32), np.array([0.0, 0.0, np.nan], f32)
    n0, b0 = n.copy(), b.copy()
    compare_arrays(n, b, compat=True)
    compare_many([(n, b)], compat=True)
    assert np.array_equal(n, n0, equal_nan=True) and np.array_equal(b, b0, equal_nan=True)


# ------------------------------------------------------------------ paths agree with each other


def _random_pairs(rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    pairs = []
    for i in range(60):
        size = int(rng.integers(1, 300))
        kind = i % 6
        b = rng.standard_normal(size)
        n = b + rng.standard_normal(size) * rng.choice([1e-4, 1e-2, 1])
        if kind == 1:
            b[rng.random(size) < 0.3] = 0
        if kind == 2:
            pos = rng.random(size) < 0.1
            n[pos], b[pos] = np.nan, np.nan
            inf = rng.random(size) < 0.05
            n[inf], b[inf] = np.inf, -np.inf
        if kind == 3:
            pairs.append((n.astype(f16), b.astype(f32)))
            continue
        if kind == 4:
            pairs.append(((n * 10).astype(np.int32), (b * 10).astype(np.int32)))
            continue
        if kind == 5:
            pairs.append((n > 0, b > 0))
            continue
        pairs.append((n.astype(f32), b.astype(f32)))
    return pairs


@pytest.mark.parametrize("compat", [True, False])
def test_vectorised_small_path_equals_single_pair_path(compat: bool) -> None:
    pairs = _random_pairs(np.random.default_rng(11))
    many = compare_many(pairs, compat=compat)
    for (n, b), got in zip(pairs, many):
        assert cells(got) == cells(compare_arrays(n, b, compat=compat)) or _nan_equal(
            got, n, b, compat
        )


def _nan_equal(got: MetricResult, n: np.ndarray, b: np.ndarray, compat: bool) -> bool:
    want = compare_arrays(n, b, compat=compat)
    return all(
        g == w
        or (isinstance(g, float) and isinstance(w, float) and math.isnan(g) and math.isnan(w))
        for g, w in zip(cells(got), cells(want))
    )


@pytest.mark.parametrize("compat", [True, False])
def test_chunked_kernel_equals_one_chunk_up_to_dot_rounding(compat: bool) -> None:
    def eq(g: object, w: object) -> bool:
        return g == w or (
            isinstance(g, float) and isinstance(w, float) and math.isnan(g) and math.isnan(w)
        )

    for n, b in _random_pairs(np.random.default_rng(5)):
        w = cells(compare_arrays(n, b, compat=compat))
        c = cells(compare_arrays(n, b, compat=compat, chunk=7))
        assert all(eq(x, y) for x, y in zip(c[1:5], w[1:5])), (c, w)  # maxima and counts: exact
        assert c[6] == w[6]
        if isinstance(w[0], float) and isinstance(c[0], float):
            assert abs(w[0] - c[0]) <= 2e-12  # dot products summed per chunk
        else:
            assert w[0] == c[0]


def test_nanpos_found_in_a_late_chunk() -> None:
    n = np.ones(1000, f32)
    b = np.ones(1000, f32)
    n[990] = np.nan
    assert compare_arrays(n, b, compat=True, chunk=64).status == "nanpos"


def test_threads_do_not_share_scratch_buffers() -> None:
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(1)
    pairs = [
        (rng.standard_normal(5000).astype(f32), rng.standard_normal(5000).astype(f32))
        for _ in range(8)
    ]
    want = [cells(compare_arrays(n, b, compat=True, chunk=512)) for n, b in pairs]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda p: cells(compare_arrays(*p, compat=True, chunk=512)), pairs * 4))
    assert got == want * 4


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("dtypes", [(f32, f32), (f16, f32), (f32, f16), (f16, f16)])
def test_chunks_with_zeros_then_inf_nan_match_one_chunk(compat: bool, dtypes: tuple) -> None:
    rng = np.random.default_rng(9)
    b = rng.standard_normal(400)
    n = b + rng.standard_normal(400) * 0.01
    b[rng.random(400) < 0.2] = 0  # zeros from the first chunks on
    n[::37] = 0.0
    late = np.arange(200, 400, 23)
    n[late], b[late] = np.nan, np.nan  # zeroed, then shifted, in later chunks
    n[late + 5], b[late + 5] = np.inf, -np.inf
    n, b = n.astype(dtypes[0]), b.astype(dtypes[1])
    whole = cells(compare_arrays(n, b, compat=compat))
    for chunk in (7, 50, 128):
        part = cells(compare_arrays(n, b, compat=compat, chunk=chunk))
        assert part[1:] == whole[1:]
        assert abs(part[0] - whole[0]) <= 2e-12
