"""End-to-end kernel (MindSpore static graph) compare: dumps in tmp dirs -> xlsx -> openpyxl."""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path

import numpy as np
import openpyxl
import pytest

from msq.errors import DumpError, InputError, TensorFileError
from msq.export import xlsx
from msq.mindspore.kernel import compare_kernel
from msq.tensors import pool

NPY_HEADER = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
    "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
    "Bench l2norm", "Accuracy Reached or Not", "Err_message", "Cosine", "MaxAbsErr",
    "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio",
]
STAT_HEADER = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
    "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
    "Bench l2norm", "Accuracy Reached or Not", "Err_message", "Max diff", "Min diff", "Mean diff",
    "L2norm diff", "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr",
]
CSV_HEADER = ["Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "IO", "Slot", "Data Size",
              "Data Type", "Shape", "Max Value", "Min Value", "Avg Value", "L2Norm Value"]


def kbk_dir(root: Path, rank: int = 0, step: int = 0, graph: int = 0) -> Path:
    """``root/rank_{r}/{net}/{graph}/{step}``, created."""
    folder = root / f"rank_{rank}" / "net" / str(graph) / str(step)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save(folder: Path, op: str, ts: int, array: np.ndarray, io: str = "output", slot: int = 0,
         op_type: str = "Add") -> Path:
    """np.save under the MindSpore kernel file name; returns the path."""
    path = folder / f"{op_type}.{op}.7.3.{ts}.{io}.{slot}.DefaultFormat.npy"
    np.save(path, array)
    return path


def write_csv(folder: Path, rows: list[list[object]], header: list[str] = CSV_HEADER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "statistic.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def stat_row(op: str, ts: int, stats: tuple[float, float, float, float], dtype: str = "float32",
             shape: str = "(2, 3)", io: str = "output", slot: int = 0) -> list[object]:
    return ["Add", op, 7, 3, ts, io, slot, 24, dtype, shape, *stats]


def read(path: Path) -> list[list[object]]:
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Sheet1"]
    return [list(row) for row in book["Sheet1"].iter_rows(values_only=True)]


def run_one(tmp_path: Path, **kwargs: object) -> list[list[object]]:
    files = compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out", **kwargs)
    assert len(files) == 1
    return read(files[0])


def xlsx_number(value: float) -> float:
    """A number as it reads back from xlsx (written with 16 significant digits)."""
    return float(f"{value:.16g}")


def r12(value: float) -> float:
    return float(format(value, ".12f"))


# ---------------------------------------------------------------------------------------- NPY


def test_npy_pairing_names_and_metrics(tmp_path: Path) -> None:
    npu, bench = kbk_dir(tmp_path / "npu"), kbk_dir(tmp_path / "bench")
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    b = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]], np.float32)
    # "op.7.3.output.0" twice: the k-th NPU file by timestamp meets the k-th bench file
    n_first, n_second = save(npu, "op", 100, a), save(npu, "op", 300, a * 2)
    b_first, b_second = save(bench, "op", 120, b), save(bench, "op", 310, a * 2)
    n_only = save(npu, "npu_only", 200, a, io="input")
    b_only = save(bench, "bench_only", 50, a)
    rows = run_one(tmp_path)
    assert rows[0] == NPY_HEADER
    assert [row[:2] for row in rows[1:]] == [
        [str(n_first), str(b_first)],
        [str(n_only), None],
        [str(n_second), str(b_second)],
        [None, str(b_only)],
    ]
    first = dict(zip(NPY_HEADER, rows[1]))
    n64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    cos = n64 @ b64 / (np.linalg.norm(n64) * np.linalg.norm(b64))
    assert first["Cosine"] == r12(cos)
    assert first["MaxAbsErr"] == 0.5
    assert first["MaxRelativeErr"] == r12(0.5 / 6.5)
    assert first["One Thousandth Err Ratio"] == r12(5 / 6)
    assert first["Five Thousandths Err Ratio"] == r12(5 / 6)
    assert first["Accuracy Reached or Not"] == "Yes"
    assert first["Err_message"] is None
    assert (first["NPU Dtype"], first["NPU Tensor Shape"]) == ("float32", "(2, 3)")
    assert (first["NPU max"], first["NPU min"], first["NPU mean"]) == (6, 1, 3.5)
    assert first["NPU l2norm"] == float(np.linalg.norm(a))
    assert first["Bench max"] == 6.5
    second = dict(zip(NPY_HEADER, rows[3]))
    assert [second[k] for k in NPY_HEADER[16:]] == [1, 0, 0, 1, 1]
    npu_only = dict(zip(NPY_HEADER, rows[2]))
    assert npu_only["Err_message"] == "Dump file is not ndarray.\n"
    assert npu_only["NPU max"] == 6 and npu_only["Bench max"] is None
    assert npu_only["Accuracy Reached or Not"] is None and npu_only["Cosine"] is None
    bench_only = dict(zip(NPY_HEADER, rows[4]))
    assert bench_only["Bench Dtype"] == "float32" and bench_only["NPU Dtype"] is None


def test_npy_messages(tmp_path: Path) -> None:
    npu, bench = kbk_dir(tmp_path / "npu"), kbk_dir(tmp_path / "bench")
    cases = {
        "empty": (np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32)),
        "zerod": (np.array(1.5, np.float32), np.array(1.5, np.float32)),
        "shape": (np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)),
        "dtype": (np.ones(3, np.float32), np.ones(3, np.float16)),
        "nanpos": (np.array([1, np.nan, 3], np.float32), np.array([np.nan, 2, 3], np.float32)),
        "nansame": (np.array([1, np.nan, np.inf, 4], np.float32),
                    np.array([1, np.nan, np.inf, 4.5], np.float32)),
        "lenone": (np.array([2.0], np.float32), np.array([2.5], np.float32)),
        "npuzero": (np.zeros(4, np.float32), np.array([1, 2, 3, 4], np.float32)),
    }
    for ts, (op, (x, y)) in enumerate(cases.items()):
        save(npu, op, ts, x)
        save(bench, op, ts, y)
    rows = {row[0].split(".")[1]: dict(zip(NPY_HEADER, row)) for row in run_one(tmp_path)[1:]}
    message = {op: row["Err_message"] for op, row in rows.items()}
    assert message["empty"] == "This is empty data, can not compare.\n"
    assert message["zerod"] == "This is type of scalar data, can not compare.\n"
    assert message["shape"] == "Shape of NPU and bench Tensor do not match.\n"
    assert message["dtype"] == "Dtype of NPU and bench Tensor do not match. Skipped.\n"
    assert message["nanpos"] == "The position of inf or nan in NPU and bench Tensor do not match.\n"
    for op in ("empty", "zerod", "shape", "dtype", "nanpos"):
        assert [rows[op][k] for k in NPY_HEADER[16:]] == [None] * 5
        assert rows[op]["Accuracy Reached or Not"] is None
    assert rows["empty"]["NPU max"] is None and rows["empty"]["NPU Tensor Shape"] == "(0, 2)"
    assert rows["zerod"]["NPU Tensor Shape"] == "()" and rows["zerod"]["NPU max"] == 1.5
    assert rows["nansame"]["Err_message"] is None
    assert rows["nansame"]["MaxAbsErr"] == 0.5 and rows["nansame"]["NPU max"] is None  # nan stat
    assert rows["nansame"]["MaxRelativeErr"] == r12(0.5 / 4.5)
    assert message["lenone"] == "This tensor is scalar."
    assert rows["lenone"]["Cosine"] == "unsupported"
    assert rows["lenone"]["Accuracy Reached or Not"] == "None"
    assert message["npuzero"] == ("Cannot compare by Cosine Similarity, All the data is Zero in npu "
                                  "dump data.")
    assert rows["npuzero"]["Cosine"] == "Nan"
    assert rows["npuzero"]["Accuracy Reached or Not"] == "No"  # 1.1.0 said Yes (NaN compare)


def test_npy_accuracy_no(tmp_path: Path) -> None:
    npu, bench = kbk_dir(tmp_path / "npu"), kbk_dir(tmp_path / "bench")
    save(npu, "op", 1, np.array([1, 2, 3, 4], np.float32))
    save(bench, "op", 1, np.array([1, 2, 3, -4], np.float32))
    row = dict(zip(NPY_HEADER, run_one(tmp_path)[1]))
    assert row["Cosine"] == r12(-2 / 30)
    assert row["MaxAbsErr"] == 8
    assert row["Accuracy Reached or Not"] == "No"


def test_npy_mapping_csv_and_short_names(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    npu, bench = kbk_dir(tmp_path / "npu"), kbk_dir(tmp_path / "bench")
    np.save(npu / "short_1.npy", np.ones(3, np.float32))
    np.save(npu / "a.b.c.npy", np.ones(3, np.float32))  # < 7 fields: ignored
    with open(npu / "mapping.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([["File Name", "Original Name"],
                                      ["short_1.npy", "Add.long.7.3.10.output.0.DefaultFormat.npy"]])
    save(bench, "long", 11, np.ones(3, np.float32))
    with caplog.at_level(logging.WARNING, logger="msq.kernel"):
        rows = run_one(tmp_path)
    assert len(rows) == 2
    assert rows[1][0] == str(npu / "short_1.npy")
    assert rows[1][14] == "Yes"
    assert "fewer than 7 dot-separated fields" in caplog.text


def test_process_pool_gives_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    npu, bench = kbk_dir(tmp_path / "npu"), kbk_dir(tmp_path / "bench")
    rng = np.random.default_rng(1)
    for ts in range(6):
        data = rng.standard_normal(50).astype(np.float32)
        save(npu, f"op{ts}", ts, data)
        save(bench, f"op{ts}", ts, data + np.float32(0.01 * ts))
    inline = run_one(tmp_path)
    monkeypatch.setattr(pool, "INLINE_JOBS", 0)  # the tensor engine's pool, even for 6 pairs
    files = compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out2", workers=2)
    assert read(files[0]) == inline


# ----------------------------------------------------------------------------------- STATISTIC


def test_statistic_diffs_percent_and_accuracy(tmp_path: Path) -> None:
    npu_csv = write_csv(kbk_dir(tmp_path / "npu"), [
        stat_row("ok", 10, (3.0, -1.0, 0.5, 4.0)),
        stat_row("big", 20, (3.0, 1.0, 2.0, 9.0)),
        stat_row("shape", 30, (1.0, 1.0, 1.0, 1.0), shape="(3, 2)"),
        stat_row("dtype", 40, (1.0, 1.0, 1.0, 1.0), dtype="float16"),
        stat_row("scalar", 50, (1.0, 1.0, 1.0, 1.0), shape=""),
        stat_row("npu_only", 60, (1.0, 1.0, 1.0, 1.0)),
    ])
    bench_csv = write_csv(kbk_dir(tmp_path / "bench"), [
        stat_row("ok", 11, (2.0, -1.0, 0.3, 4.0)),
        stat_row("big", 21, (1.0, 3.0, 1.0, 3.0)),
        stat_row("shape", 31, (1.0, 1.0, 1.0, 1.0)),
        stat_row("dtype", 41, (1.0, 1.0, 1.0, 1.0)),
        stat_row("scalar", 51, (1.0, 1.0, 1.0, 1.0), shape=""),
        stat_row("bench_only", 5, (1.0, 1.0, 1.0, 1.0)),
    ])
    table = run_one(tmp_path)
    assert table[0] == STAT_HEADER
    rows = [dict(zip(STAT_HEADER, row)) for row in table[1:]]
    assert [(r["NPU Name"], r["Bench Name"]) for r in rows] == [
        (f"ok.7.3.output {npu_csv}", f"ok.7.3.output {bench_csv}"),
        (f"big.7.3.output {npu_csv}", f"big.7.3.output {bench_csv}"),
        (f"shape.7.3.output {npu_csv}", f"shape.7.3.output {bench_csv}"),
        (f"dtype.7.3.output {npu_csv}", f"dtype.7.3.output {bench_csv}"),
        (f"scalar.7.3.output {npu_csv}", f"scalar.7.3.output {bench_csv}"),
        (f"npu_only.7.3.output {npu_csv}", None),
        (None, f"bench_only.7.3.output {bench_csv}"),
    ]
    ok, big = rows[0], rows[1]
    mean_diff = np.abs(np.float32(0.5) - np.float32(0.3))
    assert [ok[k] for k in STAT_HEADER[16:20]] == [1, 0, xlsx_number(mean_diff), 0]
    # float32 ratio, widened to float64 by "* 100" (numpy 1.x, 1.1.0's baseline), Python repr
    mean_rel = repr(float(mean_diff / np.float32(0.3)) * 100) + "%"
    assert [ok[k] for k in STAT_HEADER[20:]] == ["50.0%", "0%", mean_rel, "0.0%"]
    assert ok["Bench mean"] == xlsx_number(np.float32(0.3))
    assert (ok["Accuracy Reached or Not"], ok["Err_message"]) == ("Yes", None)
    assert [big[k] for k in STAT_HEADER[16:]] == [2, 2, 1, 6, "200.0%", "66.66666865348816%",
                                                   "100.0%", "200.0%"]
    assert big["Accuracy Reached or Not"] == "No"  # 2 / (3 + 1e-10) > 0.5
    messages = [r["Err_message"] for r in rows[2:]]
    assert messages == [
        "Tensor shapes do not match.\n",
        "Dtype of NPU and bench Tensor do not match. Skipped.\n",
        "This is type of scalar data, can not compare.\n",
        "Dump file not found.\n",
        "Dump file not found.\n",
    ]
    for row in rows[2:]:
        assert [row[k] for k in STAT_HEADER[16:]] == [None] * 8
        assert row["Accuracy Reached or Not"] is None
    assert rows[5]["Bench max"] is None and rows[5]["Bench Dtype"] is None


def test_statistic_slotless_key_pairs_by_timestamp(tmp_path: Path) -> None:
    write_csv(kbk_dir(tmp_path / "npu"), [
        stat_row("mul", 2, (5.0, 5.0, 5.0, 5.0), io="input", slot=1),
        stat_row("mul", 1, (4.0, 4.0, 4.0, 4.0), io="input", slot=0),
    ])
    write_csv(kbk_dir(tmp_path / "bench"), [
        stat_row("mul", 8, (4.0, 4.0, 4.0, 4.0), io="input", slot=0),
        stat_row("mul", 9, (5.0, 5.0, 5.0, 5.0), io="input", slot=1),
    ])
    rows = run_one(tmp_path)[1:]
    assert [(row[6], row[10], row[16]) for row in rows] == [(4, 4, 0), (5, 5, 0)]


@pytest.mark.parametrize("odd", [False, True])
def test_statistic_special_values(tmp_path: Path, odd: bool) -> None:
    # " 1.5" sends the file to the line-by-line reader; both readers must agree
    first = " 1.5" if odd else "1.5"
    write_csv(kbk_dir(tmp_path / "npu"), [stat_row("b", 1, (first, "True", "null", "1e40"))])  # type: ignore[arg-type]
    write_csv(kbk_dir(tmp_path / "bench"), [stat_row("b", 1, ("1.5", "False", "null", "-inf"))])  # type: ignore[arg-type]
    row = dict(zip(STAT_HEADER, run_one(tmp_path)[1]))
    assert [row[k] for k in STAT_HEADER[6:10]] == [1.5, 1, None, "inf"]  # 1e40 overflows float32
    assert [row[k] for k in STAT_HEADER[10:14]] == [1.5, 0, None, "-inf"]
    assert [row[k] for k in STAT_HEADER[16:20]] == [0, 1, None, "inf"]
    assert row["MinRelativeErr"] == "0%" and row["MeanRelativeErr"] == "0%"


@pytest.mark.parametrize(("rows", "header", "where"), [
    ([], [c for c in CSV_HEADER if c != "Avg Value"], "line 1: the header has no 'Avg Value'"),
    ([stat_row("a", 1, (1.0, 1.0, 1.0, 1.0)), stat_row("b", 2, ("x1", 1.0, 1.0, 1.0))],  # type: ignore[arg-type]
     CSV_HEADER, "line 3: column 'Max Value' holds 'x1'"),
    ([stat_row("a", 1, (1.0, 1.0, 1.0, 1.0))[:-1]], CSV_HEADER, "line 2: 13 columns"),
    ([["Add", "a", 7, 3, "soon", "output", 0, 24, "float32", "(2,)", 1, 1, 1, 1]], CSV_HEADER,
     "line 2: the Timestamp column"),
])
def test_malformed_statistic_csv(tmp_path: Path, rows: list[list[object]], header: list[str],
                                 where: str) -> None:
    bad = write_csv(kbk_dir(tmp_path / "npu"), rows, header)
    write_csv(kbk_dir(tmp_path / "bench"), [stat_row("a", 1, (1.0, 1.0, 1.0, 1.0))])
    with pytest.raises(DumpError) as err:
        compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out")
    assert str(err.value).startswith(f"{bad}: {where}")


# --------------------------------------------------------------- layouts, filters and safety


def o2_dir(root: Path, device: int, step: int) -> Path:
    """``root/{device_id}/{model}/{model_id}/{iteration}``, created."""
    folder = root / str(device) / "model" / "1" / str(step)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_o2_layout_with_rank_and_step_filters(tmp_path: Path) -> None:
    for side in ("npu", "bench"):
        for device in (0, 1):
            for step in (0, 1):
                save(o2_dir(tmp_path / side, device, step), "op", 1,
                     np.full(3, device * 10 + step, np.float32))
    files = compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out",
                           rank_ids=[1], step_ids=[0])
    assert [f.name[: len("compare_result_1_0_")] for f in files] == ["compare_result_1_0_"]
    assert files[0].name[len("compare_result_1_0_"):-len(".xlsx")].isdigit()
    rows = read(files[0])
    assert rows[1][0] == str(tmp_path / "npu" / "1" / "model" / "1" / "0" /
                             "Add.op.7.3.1.output.0.DefaultFormat.npy")
    assert rows[1][6] == 10
    every = compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "all", rank_ids=[],
                           step_ids=[])
    assert [f.name[:19] for f in every] == ["compare_result_0_0_", "compare_result_0_1_",
                                            "compare_result_1_0_", "compare_result_1_1_"]


def test_kbk_graphs_of_one_step_are_merged(tmp_path: Path) -> None:
    for side in ("npu", "bench"):
        save(kbk_dir(tmp_path / side, graph=0), "g0", 1, np.ones(2, np.float32))
        save(kbk_dir(tmp_path / side, graph=1), "g1", 2, np.ones(2, np.float32))
        (tmp_path / side / "rank_0" / "graphs").mkdir()
        (tmp_path / side / "rank_0" / "execution_order").mkdir()
    rows = run_one(tmp_path)
    assert [row[0].split(".")[1] for row in rows[1:]] == ["g0", "g1"]


def test_skipped_pairs_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    save(kbk_dir(tmp_path / "npu", step=0), "op", 1, np.ones(2, np.float32))
    write_csv(kbk_dir(tmp_path / "bench", step=0), [stat_row("op", 1, (1.0, 1.0, 1.0, 1.0))])
    save(kbk_dir(tmp_path / "npu", step=1), "op", 1, np.ones(2, np.float32))
    kbk_dir(tmp_path / "bench", step=2)
    with caplog.at_level(logging.WARNING, logger="msq.kernel"):
        files = compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out")
    assert files == []
    assert "rank 0 step 0 skipped: NPU mode NPY_MODE is not bench mode STATISTIC_MODE" in caplog.text
    assert "rank 0 step 1 skipped: only the npu dump has it" in caplog.text
    assert "rank 0 step 2 skipped: only the bench dump has it" in caplog.text


def test_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    secret = save(outside, "op", 1, np.ones(2, np.float32))
    npu, bench = kbk_dir(tmp_path / "npu"), kbk_dir(tmp_path / "bench")
    os.symlink(secret, npu / secret.name)
    save(bench, "op", 1, np.ones(2, np.float32))
    with pytest.raises(TensorFileError, match="outside the dump root"):
        compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out")
    (npu / secret.name).unlink()
    inside = save(npu, "real", 5, np.ones(2, np.float32))
    os.symlink(inside, npu / secret.name)  # a link that stays inside the root is fine
    assert len(run_one(tmp_path)) == 3


def test_statistic_csv_linked_out_of_the_root_is_refused(tmp_path: Path) -> None:
    outside = write_csv(tmp_path / "elsewhere", [stat_row("a", 1, (1.0, 1.0, 1.0, 1.0))])
    os.symlink(outside, kbk_dir(tmp_path / "npu") / "statistic.csv")
    write_csv(kbk_dir(tmp_path / "bench"), [stat_row("a", 1, (1.0, 1.0, 1.0, 1.0))])
    with pytest.raises(InputError, match="outside the dump root"):
        compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out")


def test_pickled_npy_is_refused(tmp_path: Path) -> None:
    npu, bench = kbk_dir(tmp_path / "npu"), kbk_dir(tmp_path / "bench")
    save(npu, "op", 1, np.array([{"a": 1}], dtype=object))
    save(bench, "op", 1, np.ones(1, np.float32))
    with pytest.raises(TensorFileError, match="needs a pickle to load; msq only loads numeric"):
        compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out")


def test_depth_limit_and_bad_inputs(tmp_path: Path) -> None:
    deep = tmp_path / "npu" / "/".join(f"d{i}" for i in range(12))
    deep.mkdir(parents=True)
    (tmp_path / "bench").mkdir()
    with pytest.raises(InputError, match="more than 10 directory levels"):
        compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out")
    with pytest.raises(InputError, match="does not exist"):
        compare_kernel(tmp_path / "nope", tmp_path / "bench", tmp_path / "out")
    with pytest.raises(InputError, match="rank_id holds True"):
        compare_kernel(tmp_path / "bench", tmp_path / "bench", tmp_path / "out", rank_ids=[True])


def test_formula_like_text_is_written_as_text(tmp_path: Path) -> None:
    write_csv(kbk_dir(tmp_path / "npu"), [stat_row("=1+2", 1, (1.0, 1.0, 1.0, 1.0),
                                                   dtype="@SUM(A1)", shape="-(2)")])
    write_csv(kbk_dir(tmp_path / "bench"), [stat_row("=1+2", 1, (1.0, 1.0, 1.0, 1.0),
                                                     dtype="＋cmd", shape="-(2)")])
    files = compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out")
    sheet = openpyxl.load_workbook(files[0])["Sheet1"]
    cells = [sheet.cell(2, col) for col in range(1, 6)]
    assert [cell.data_type for cell in cells] == ["s"] * 5
    assert cells[0].value.startswith("=1+2.7.3.output ")
    assert [cell.value for cell in cells[2:]] == ["@SUM(A1)", "＋cmd", "-(2)"]


def test_rows_past_the_sheet_limit_continue_on_further_sheets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    rows = [stat_row(f"op{i}", i, (1.0, 1.0, 1.0, 1.0)) for i in range(5)]
    write_csv(kbk_dir(tmp_path / "npu"), rows)
    write_csv(kbk_dir(tmp_path / "bench"), rows)
    monkeypatch.setattr(xlsx, "EXCEL_MAX_ROWS", 3)  # 2 data rows per sheet, as if Excel's limit
    with caplog.at_level(logging.WARNING, logger="msq.kernel"):
        (path,) = compare_kernel(tmp_path / "npu", tmp_path / "bench", tmp_path / "out")
    assert "5 rows, continued on further sheets (Sheet2, ...)" in caplog.text
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Sheet1", "Sheet2", "Sheet3"]
    sheets = [[list(r) for r in book[name].iter_rows(values_only=True)] for name in book.sheetnames]
    assert [sheet[0] for sheet in sheets] == [STAT_HEADER] * 3  # the header on every sheet
    assert [row[0].split(" ")[0] for sheet in sheets for row in sheet[1:]] == [
        f"op{i}.7.3.output" for i in range(5)]
    for name in book.sheetnames:
        header = book[name]["A1"]
        assert header.font.b and header.border.left.style == "thin"
        assert header.alignment.horizontal == "center"
    assert oct(path.stat().st_mode & 0o777) == "0o640"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
