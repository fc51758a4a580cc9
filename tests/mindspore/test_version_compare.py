"""MindSpore against MindSpore (version compare): statistics, md5 and tensor tasks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from msq import compare
from tests.mindspore.msdump import BF16, DumpBuilder, api_input, arrays, compare_json, run_cli

OPS = ("Cell.net.fc1.Dense.forward.0", "Mint.matmul.0.forward", "Functional.softmax.0.forward",
       "Tensor.__mul__.0.forward", "Cell.net.fc1.Dense.backward.0")


def version_pair(tmp: Path, task: str = "statistics", md5: bool = False,
                 drift: float = 1.0) -> tuple[DumpBuilder, DumpBuilder]:
    """Two MindSpore dumps of the same network; the bench softmax output is scaled by ``drift``."""
    a = arrays(1)
    x, y, w, b = a["x"], a["y"], a["w"], a["b"]
    sides = []
    for root, scale in (("npu", 1.0), ("bench", drift)):
        d = DumpBuilder(tmp / root, "mindspore", task, md5)
        d.op(OPS[0], [x], {}, [x @ w.T + b])
        d.op(OPS[1], [[x, y.T]], {"transpose_b": False}, [x @ y.T])
        d.op(OPS[2], [x @ y.T], {"axis": -1}, [np.tanh(x @ y.T) * scale])
        d.op(OPS[3], [BF16(x), 2.0], {}, [BF16(2 * x)])
        d.op(OPS[4], [x @ w.T], {}, [x])
        d.write()
        sides.append(d)
    return sides[0], sides[1]


@pytest.mark.parametrize(("compat", "drift", "result"), [
    (True, 1.5, ""), (True, 3.0, "Warning"), (False, 1.001, ""), (False, 1.5, "Warning")])
def test_statistics_version_compare(tmp_path: Path, compat: bool, drift: float,
                                    result: str) -> None:
    npu, bench = version_pair(tmp_path, drift=drift)
    run = run_cli(compare_json(tmp_path, npu, bench), tmp_path / "out",
                  *(["--compat", "msprobe-1.1"] if compat else []))
    assert run.exit_code == 0, run.output
    assert all(n == b for n, b in run.pairs())
    names = [r["NPU Name"] for r in run.rows]
    assert names[:4] == ["Cell.net.fc1.Dense.forward.0.input.0", "Cell.net.fc1.Dense.forward.0.output.0",
                         "Mint.matmul.0.forward.input.0.0", "Mint.matmul.0.forward.input.0.1"]
    rows = run.by_npu()
    assert rows["Mint.matmul.0.forward.input.transpose_b.0"]["NPU Dtype"] == "<class 'bool'>"
    assert rows["Tensor.__mul__.0.forward.input.0"]["NPU Dtype"] == "BFloat16"
    assert rows["Tensor.__mul__.0.forward.input.1"]["NPU max"] == 2
    assert rows["Cell.net.fc1.Dense.backward.0.input.0"]["Bench Dtype"] == "Float32"
    soft = rows["Functional.softmax.0.forward.output.0"]
    assert soft["Max diff"] == pytest.approx(soft["NPU max"] - soft["Bench max"])
    assert float(soft["MaxRelativeErr"].rstrip("%")) == pytest.approx(
        abs((soft["NPU max"] - soft["Bench max"]) / soft["Bench max"]) * 100)
    # the bench output is the NPU's times ``drift``. 1.1.0: Warning once a statistic differs by
    # more than half of the larger magnitude (spec §4.1), i.e. for a drift above 2. The default
    # mode: Warning on the rows its rules colour (compat.md #18): an error >= 0.1 of the tensor's
    # scale is red, and its Reason gives the rule and the numbers (docs/rules.md)
    flagged = any(abs(soft[f"NPU {s}"] - soft[f"Bench {s}"])
                  / (max(abs(soft[f"NPU {s}"]), abs(soft[f"Bench {s}"])) + 1e-10) > 0.5
                  for s in ("max", "min", "mean", "l2norm"))
    assert (soft["Result"] or "") == result  # "" reads as None
    if compat:
        assert result == ("Warning" if flagged else "")
        assert "Reason" not in soft
    else:
        assert (">= 0.1" in (soft["Reason"] or "")) == bool(result), soft["Reason"]
    untouched = rows["Functional.softmax.0.forward.input.0"]
    assert untouched["Max diff"] == 0 and untouched["MaxRelativeErr"] == "0.0%"


def test_md5_version_compare(tmp_path: Path) -> None:
    npu, bench = version_pair(tmp_path, md5=True, drift=1.5)
    run = run_cli(compare_json(tmp_path, npu, bench), tmp_path / "out")
    assert run.exit_code == 0, run.output
    assert "NPU MD5" in run.header
    rows = run.by_npu()
    assert rows["Functional.softmax.0.forward.output.0"]["Result"] == "Different"
    assert rows["Functional.softmax.0.forward.input.0"]["Result"] == "pass"
    assert len(rows["Mint.matmul.0.forward.input.0.0"]["NPU MD5"]) == 8


def test_tensor_version_compare_reads_npy_both_sides(tmp_path: Path) -> None:
    npu, bench = version_pair(tmp_path, task="tensor", drift=1.5)
    assert (bench.tensor_dir / "Tensor.__mul__.0.forward.input.0.npy").is_file()
    run = run_cli(compare_json(tmp_path, npu, bench), tmp_path / "out", "--workers", "1")
    assert run.exit_code == 0, run.output
    rows = run.by_npu()
    same = rows["Cell.net.fc1.Dense.forward.0.output.0"]
    assert (same["Cosine"], same["MaxAbsErr"], same["Accuracy Reached or Not"]) == (1, 0, "Yes")
    assert same["Data_name"] == "Cell.net.fc1.Dense.forward.0.output.0.npy"
    assert same["Err_message"] is None  # same names: no fuzzy-matching note
    # MindSpore saves a bf16 tensor as float32 .npy; it is read and compared as such
    bf16 = rows["Tensor.__mul__.0.forward.output.0"]
    assert (bf16["NPU Dtype"], bf16["Cosine"], bf16["MaxAbsErr"]) == ("BFloat16", 1, 0)
    drifted = rows["Functional.softmax.0.forward.output.0"]
    assert drifted["Cosine"] == 1 and drifted["MaxAbsErr"] > 0.1
    # tensor kwargs keep the data_name stem (kwargs.<k>); scalars have no file
    assert rows["Mint.matmul.0.forward.input.transpose_b.0"]["Data_name"] == "-1"


def test_version_compare_through_the_api(tmp_path: Path) -> None:
    npu, bench = version_pair(tmp_path)
    result = compare(api_input(npu, bench), tmp_path / "out", framework="mindspore", record=False)
    assert result.mode == "statistics"
    assert result.unmatched_npu == 0 and result.matched == result.rows
