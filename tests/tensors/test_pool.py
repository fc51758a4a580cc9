"""compute_metrics: Arrow output, scheduling (batches, ranges, workers) and golden msprobe outputs."""

from __future__ import annotations

import csv
import glob
import itertools
import math
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch  # noqa: TID253  (tests write and cross-check real .pt files)

from msq.errors import TensorFileError
from msq.tensors.metrics import compare_arrays
from msq.tensors.pool import SCHEMA, TensorJob, compute_metrics
from tests.conftest import GOLDEN

METRICS = ("cosine", "max_abs_err", "max_rel_err", "one_thousandth", "five_thousandth")
CSV_COLUMNS = (
    "Cosine",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
)
FUZZY = " Fuzzy matching data, the comparison accuracy may be affected."


def cell(row: dict, name: str) -> object:
    return row[name] if row[name] is not None else row[f"{name}_text"]


def make_dirs(tmp_path: Path) -> tuple[Path, Path]:
    n, b = tmp_path / "npu", tmp_path / "bench"
    n.mkdir(exist_ok=True)
    b.mkdir(exist_ok=True)
    return n, b


def test_schema_and_text_cells(tmp_path: Path) -> None:
    n, b = make_dirs(tmp_path)
    torch.save(torch.arange(4.0), n / "x.pt")
    torch.save(torch.arange(4.0), b / "x.pt")
    torch.save(torch.zeros(3), n / "s.pt")
    torch.save(torch.zeros(5), b / "s.pt")
    jobs = [
        TensorJob(10, "x.pt", "x.pt", str(n), str(b)),
        TensorJob(7, "s.pt", "s.pt", str(n), str(b)),
        TensorJob(3, None, None),
    ]
    table = compute_metrics(jobs, compat=False, workers=1)
    assert table.schema == SCHEMA
    assert table.schema.field("job_id").type == pa.int64()
    for m in METRICS:
        assert table.schema.field(m).type == pa.float64()
        assert table.schema.field(f"{m}_text").type == pa.string()
    rows = table.to_pylist()
    assert [r["job_id"] for r in rows] == [10, 7, 3]
    assert rows[0]["cosine"] == 1.0 and rows[0]["cosine_text"] is None
    assert rows[1]["cosine"] is None and rows[1]["cosine_text"] == "shape unmatched"
    assert [r["status"] for r in rows] == ["ok", "shape", "no_data"]
    assert rows[2]["err_message"] == "No bench data matched."


def _many_jobs(tmp_path: Path, count: int, big: int = 0) -> list[TensorJob]:
    n, b = make_dirs(tmp_path)
    g = torch.Generator().manual_seed(0)
    jobs = []
    for i in range(count):
        shape = [(3,), (4, 5), (2, 3, 4), (17,), ()][i % 5]
        x = torch.randn(shape, generator=g)
        torch.save(x + 0.01 * torch.randn(shape, generator=g), n / f"t{i}.pt")
        torch.save(x, b / f"t{i}.pt")
        jobs.append(TensorJob(1000 + i, f"t{i}.pt", f"t{i}.pt", str(n), str(b)))
    for i in range(big):
        x = torch.randn(50_000 + 7 * i, generator=g)
        x[::97] = 0
        torch.save(x + 0.001 * torch.randn(x.shape, generator=g), n / f"big{i}.pt")
        torch.save(x, b / f"big{i}.pt")
        jobs.append(TensorJob(5000 + i, f"big{i}.pt", f"big{i}.pt", str(n), str(b)))
    return jobs


@pytest.mark.parametrize("compat", [True, False])
def test_workers_and_ranges_do_not_change_results(tmp_path: Path, compat: bool) -> None:
    jobs = _many_jobs(tmp_path, 150, big=3)
    kwargs = {"compat": compat, "chunk": 1024, "range_elems": 8192, "progress": False}
    one = compute_metrics(jobs, workers=1, **kwargs)
    two = compute_metrics(jobs, workers=2, **kwargs)
    assert one.equals(two)
    assert one.column("job_id").to_pylist() == [j.job_id for j in jobs]


def test_pool_matches_single_pair_kernel(tmp_path: Path) -> None:
    jobs = _many_jobs(tmp_path, 80, big=2)
    rows = compute_metrics(jobs, compat=True, workers=2, progress=False).to_pylist()
    for job, row in zip(jobs, rows):
        n = torch.load(Path(job.npu_dir) / job.npu_file).numpy()
        b = torch.load(Path(job.bench_dir) / job.bench_file).numpy()
        want = compare_arrays(n, b, compat=True)
        for m, w in zip(
            METRICS,
            (
                want.cosine,
                want.max_abs_err,
                want.max_rel_err,
                want.one_thousandth,
                want.five_thousandth,
            ),
        ):
            got = cell(row, m)
            if m == "cosine" and n.size > 8192 and isinstance(w, float):
                assert abs(got - w) <= 1e-11  # ranges merge dot products in another order
            else:
                assert got == w or (isinstance(w, float) and math.isnan(w) and math.isnan(got))
        assert row["err_message"] == want.err_message and row["status"] == want.status


def test_progress_callback_reaches_total(tmp_path: Path) -> None:
    jobs = _many_jobs(tmp_path, 70, big=1)
    seen: list[tuple[int, int]] = []
    compute_metrics(
        jobs, compat=True, workers=2, progress=lambda d, t: seen.append((d, t)), range_elems=16384
    )
    assert seen and seen[-1] == (71, 71)
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))


def test_progress_bar_only_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = _many_jobs(tmp_path, 3)
    compute_metrics(jobs, compat=True, workers=1)  # stderr is not a TTY here: silent
    assert capsys.readouterr().err == ""
    compute_metrics(jobs, compat=True, workers=1, progress=True)
    assert "tensor metrics 3/3 (100%)" in capsys.readouterr().err


def test_unsafe_file_in_a_worker_stops_the_compare(tmp_path: Path) -> None:
    jobs = _many_jobs(tmp_path, 100)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    evil = Path(jobs[57].npu_dir) / "evil.pt"
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(Evil(), protocol=2))
    jobs.append(TensorJob(1, "evil.pt", jobs[57].bench_file, jobs[57].npu_dir, jobs[57].bench_dir))
    with pytest.raises(TensorFileError, match="evil.pt"):
        compute_metrics(jobs, compat=True, workers=2, progress=False)
    assert not marker.exists()


def test_escaping_name_stops_the_compare(tmp_path: Path) -> None:
    n, b = make_dirs(tmp_path)
    with pytest.raises(TensorFileError, match="leaves the tensor directory"):
        compute_metrics([TensorJob(0, "../x.pt", "x.pt", str(n), str(b))], compat=True, workers=1)


def test_npy_against_pt_cross_framework(tmp_path: Path) -> None:
    n, b = make_dirs(tmp_path)
    np.save(n / "Cell.fc1.Dense.forward.0.input.0.npy", np.arange(6, dtype=np.float32))
    torch.save(torch.arange(6.0), b / "Module.fc1.Linear.forward.0.input.0.pt")
    job = TensorJob(
        0,
        "Cell.fc1.Dense.forward.0.input.0.npy",
        "Module.fc1.Linear.forward.0.input.0.pt",
        str(n),
        str(b),
    )
    row = compute_metrics([job], compat=True, workers=1).to_pylist()[0]
    assert (row["cosine"], row["max_abs_err"], row["accuracy"]) == (1.0, 0.0, "Yes")


def test_paths_without_directories(tmp_path: Path) -> None:
    torch.save(torch.ones(3), tmp_path / "a.pt")
    rows = compute_metrics(
        [
            TensorJob(0, str(tmp_path / "a.pt"), str(tmp_path / "a.pt")),
            TensorJob(1, str(tmp_path / "a.pt"), str(tmp_path / "missing.pt"), data_name="a.pt"),
        ],
        compat=True,
        workers=1,
    ).to_pylist()
    assert rows[0]["cosine"] == 1.0
    assert rows[1]["err_message"] == "Dump file: a.pt not found."


def test_empty_job_list() -> None:
    table = compute_metrics([], compat=True)
    assert table.num_rows == 0 and table.schema == SCHEMA


# --------------------------------------------------------------------------------------- golden


def golden_jobs(case: str, flags: str = "default") -> tuple[list[TensorJob], list[dict]]:
    path = glob.glob(str(GOLDEN / case / "expected" / flags / "compare_result_*.csv"))[0]
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    npu = str(GOLDEN / case / "npu" / "step0" / "rank" / "dump_tensor_data")
    bench = str(GOLDEN / case / "bench" / "step0" / "rank" / "dump_tensor_data")
    jobs = []
    for i, r in enumerate(rows):
        if r["Data_name"] == "-1":
            jobs.append(TensorJob(i, None, None))
        else:
            jobs.append(
                TensorJob(
                    i, r["NPU Name"] + ".pt", r["Bench Name"] + ".pt", npu, bench, r["Data_name"]
                )
            )
    return jobs, rows


def _same(got: object, text: str) -> bool:
    if isinstance(got, str):
        return got == text
    try:
        want = float(text)
    except ValueError:
        return False
    return got == want or (math.isnan(want) and math.isnan(got))


@pytest.mark.golden
@pytest.mark.parametrize(
    "case,flags",
    [
        ("mlp_tensor_L1", "default"),
        ("tfm_tensor_L1", "default"),
        ("mlp_fuzzy_tensor_L1", "f"),
        ("mlp_unmatched_tensor_L1", "default"),
        ("tfm_tensor_mix", "default"),
    ],
)
def test_golden_real_data_rows_are_exact(case: str, flags: str) -> None:
    jobs, rows = golden_jobs(case, flags)
    got = compute_metrics(jobs, compat=True, workers=2, progress=False).to_pylist()
    assert len(got) == len(rows) > 100
    for g, r in zip(got, rows):
        for m, c in zip(METRICS, CSV_COLUMNS):
            assert _same(cell(g, m), r[c]), (r["NPU Name"], c, cell(g, m), r[c])
        message = g["err_message"]
        if r["NPU Name"] != r["Bench Name"] and r["Bench Name"] != "N/A":
            message += FUZZY
        assert message == r["Err_message"], r["NPU Name"]
        assert g["accuracy"] == r["Accuracy Reached or Not"], r["NPU Name"]
