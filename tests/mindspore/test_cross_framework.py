"""MindSpore NPU dump against a PyTorch bench dump: -am, -cm (with and without a YAML), -dm, and
real-data compares that read .npy on the NPU side and .pt on the bench side."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mindspore.msdump import compare_json, cross_framework_pair, run_cli

FUZZY = " Fuzzy matching data, the comparison accuracy may be affected."
NPU_OPS = ["Functional.add.0.forward", "Mint.abs.0.forward", "MintFunctional.relu.0.forward",
           "Functional.dense.0.forward", "Tensor.__add__.0.forward", "Cell.fc1.Dense.forward.0"]


def matched_ops(run) -> list[str]:
    """NPU ops (by name) whose every row has a bench row."""
    ops = {}
    for row in run.rows:
        name = row["NPU Name"]
        if name in (None, "N/A"):
            continue
        op = next(o for o in NPU_OPS if name.startswith(o))
        ops[op] = ops.get(op, True) and row["Bench Name"] not in (None, "N/A")
    return [op for op in NPU_OPS if ops.get(op)]


@pytest.fixture(scope="module")
def stat_pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("xfw")
    npu, bench = cross_framework_pair(tmp)
    (tmp / "cells.yaml").write_text("fc1.Dense: fc1.Linear\n")
    return compare_json(tmp, npu, bench)


@pytest.mark.parametrize("flags, expected", [
    ((), []),
    (("-am",), NPU_OPS[:5]),
    (("-cm",), ["Tensor.__add__.0.forward"]),
    (("-cm", "CELLS"), ["Tensor.__add__.0.forward", "Cell.fc1.Dense.forward.0"]),
    (("-am", "-cm", "CELLS"), NPU_OPS),
], ids=["none", "am", "cm", "cm_yaml", "am_cm_yaml"])
def test_verified_pairing_table(stat_pair: Path, tmp_path: Path, flags, expected) -> None:
    """Spec §3.7's table of verified 1.1.0 outcomes, in the default mode."""
    flags = [str(stat_pair.parent / "cells.yaml") if f == "CELLS" else f for f in flags]
    run = run_cli(stat_pair, tmp_path / "out", *flags)
    if not flags:  # 1.1.0 pairs nothing; the default mode says so instead of a hollow pass
        assert run.exit_code == 1 and "add -am" in run.output, run.output
        return
    assert run.exit_code == 0, run.output
    assert matched_ops(run) == expected
    npu_rows = [r for r in run.rows if r["NPU Name"] != "N/A"]
    assert len(npu_rows) == 16  # every NPU row is in the workbook, matched or not
    if expected:
        linear = run.by_npu().get("Functional.dense.0.forward.input.1")
        if "Functional.dense.0.forward" in expected:
            assert linear["Bench Name"] == "Functional.linear.0.forward.input.1"
            assert (linear["NPU Dtype"], linear["Bench Dtype"]) == ("Float32", "torch.float32")
            assert linear["Max diff"] == 0


def test_compat_keeps_only_matched_and_unmatched_npu(stat_pair: Path, tmp_path: Path) -> None:
    run = run_cli(stat_pair, tmp_path / "out", "-am", "--compat", "msprobe-1.1")
    assert run.exit_code == 0, run.output
    assert matched_ops(run) == NPU_OPS[:5]
    assert all(r["NPU Name"] != "N/A" for r in run.rows)  # 1.1.0 never shows bench-only rows


def test_data_mapping_cross_framework(stat_pair: Path, tmp_path: Path) -> None:
    mapping = tmp_path / "dm.yaml"
    mapping.write_text("Cell.fc1.Dense.forward.0.input.0: Module.fc1.Linear.forward.0.input.0\n"
                       "Cell.fc1.Dense.forward.0.output.0: Module.fc1.Linear.forward.0.output.0\n"
                       "Cell.fc9.Dense.forward.0.output.0: Module.fc9.Linear.forward.0.output.0\n"
                       "Mint.abs.0.forward.input.0: Torch.abs.9.forward.input.0\n")
    run = run_cli(stat_pair, tmp_path / "out", "-dm", str(mapping))
    assert run.exit_code == 0, run.output
    assert run.pairs()[:2] == [
        ("Cell.fc1.Dense.forward.0.input.0", "Module.fc1.Linear.forward.0.input.0"),
        ("Cell.fc1.Dense.forward.0.output.0", "Module.fc1.Linear.forward.0.output.0")]
    assert "Cell.fc9.Dense.forward.0.output.0" in run.output  # named, not found: warned
    assert "Torch.abs.9.forward.input.0" in run.output
    assert len(run.rows) == 16  # the default mode keeps the NPU rows the mapping leaves out
    assert run.by_npu()["Mint.abs.0.forward.input.0"]["Bench Name"] == "N/A"


@pytest.fixture(scope="module")
def tensor_pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("xfw_tensor")
    npu, bench = cross_framework_pair(tmp, task="tensor")
    assert (npu.tensor_dir / "Mint.abs.0.forward.input.0.npy").is_file()
    assert (bench.tensor_dir / "Torch.abs.0.forward.input.0.pt").is_file()
    return compare_json(tmp, npu, bench)


def test_tensor_npy_against_pt(tensor_pair: Path, tmp_path: Path) -> None:
    run = run_cli(tensor_pair, tmp_path / "out", "-am", "-cm", "--workers", "1")
    assert run.exit_code == 0, run.output
    rows = run.by_npu()
    for name in ("Functional.add.0.forward.output.0", "Mint.abs.0.forward.input.0",
                 "Functional.dense.0.forward.input.2"):
        row = rows[name]
        assert (row["Cosine"], row["MaxAbsErr"], row["Accuracy Reached or Not"]) == (1, 0, "Yes")
        # msprobe appends the note to an empty message: it starts with its space
        assert row["Err_message"] == FUZZY
        assert row["Data_name"] == name + ".npy"
    # same names on both sides: no fuzzy-matching note; bf16 .npy (float32) vs bf16 .pt
    same = rows["Tensor.__add__.0.forward.output.0"]
    assert (same["NPU Dtype"], same["Bench Dtype"]) == ("BFloat16", "torch.bfloat16")
    assert (same["Cosine"], same["MaxAbsErr"], same["Err_message"]) == (1, 0, None)
    # unmatched NPU rows stay, without metrics
    cell = rows["Cell.fc1.Dense.forward.0.input.0"]
    assert (cell["Bench Name"], cell["Err_message"]) == (
        "N/A", "No bench data matched: the bench has no Module.fc1.Dense.forward op.")


def test_tensor_data_mapping_npy_against_pt(tensor_pair: Path, tmp_path: Path) -> None:
    mapping = tmp_path / "dm.yaml"
    mapping.write_text("Cell.fc1.Dense.forward.0.output.0: Module.fc1.Linear.forward.0.output.0\n"
                       "Mint.abs.0.forward.input.0: Torch.add.0.forward.input.0\n")
    run = run_cli(tensor_pair, tmp_path / "out", "-dm", str(mapping), "--workers", "1")
    assert run.exit_code == 0, run.output
    rows = run.by_npu()
    cell = rows["Cell.fc1.Dense.forward.0.output.0"]
    assert (cell["Cosine"], cell["MaxAbsErr"]) == (1, 0)
    assert cell["Err_message"].endswith(FUZZY)
    # abs(x) input is x, the same tensor as add's first input
    assert rows["Mint.abs.0.forward.input.0"]["MaxAbsErr"] == 0


def test_md5_cross_framework(tmp_path: Path) -> None:
    npu, bench = cross_framework_pair(tmp_path, md5=True)
    run = run_cli(compare_json(tmp_path, npu, bench), tmp_path / "out", "-am", "-cm")
    assert run.exit_code == 0, run.output
    assert "NPU MD5" in run.header
    rows = run.by_npu()
    dense = rows["Functional.dense.0.forward.input.1"]
    assert dense["Bench Name"] == "Functional.linear.0.forward.input.1"
    assert dense["NPU MD5"] == dense["BENCH MD5"] and dense["Result"] == "pass"
    assert rows["Cell.fc1.Dense.forward.0.input.0"]["Result"] == "N/A"
