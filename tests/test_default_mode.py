"""The default mode on the golden cases: msprobe's output, plus the documented fixes (docs/compat.md).

Where no 1.1.0 bug is triggered the default mode must equal msprobe cell by cell. The differences
allowed here are exactly the ones docs/compat.md lists: bench-only rows added (NPU Name "N/A"),
in real-data mode Cosine/MaxAbsErr computed without the ε shift, NPU ops that 1.1.0's moving
window left unmatched although the bench dump has an op of the same name and structure (the default
mode pairs them by name wherever they sit), float dtypes that differ only in precision matched,
the verdict columns (Result, Accuracy Reached or Not, Err_message) and the fills set by msq's own
rules (docs/rules.md, tested row by row in tests/test_verdicts.py), and the Reason column.
"""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from msq.cli import main
from tests.conftest import GOLDEN, golden_params
from tests.golden_util import all_flag_sets, outputs_by_name, read_sheet

SETS = [fs for fs in (all_flag_sets() if GOLDEN.is_dir() else [])
        if fs.name in ("default", "dist_default", "am", "dm")]
TENSOR_SHIFT_COLUMNS = {"Cosine", "MaxAbsErr"}


def run_default(fs, tmp_path, monkeypatch):
    monkeypatch.chdir(fs.case_dir)
    out = tmp_path / "out"
    argv = [a for a in fs.argv(out) if a not in ("--compat", "msprobe-1.1")]
    result = CliRunner().invoke(main, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def op_of(name: str) -> str:
    for tag in (".input", ".output", ".kwargs"):
        if tag in name:
            return name.split(tag)[0]
    return name


@pytest.mark.parametrize("fs", golden_params(SETS, ids=str))
def test_default_mode_differs_only_as_documented(fs, tmp_path, monkeypatch):
    out = run_default(fs, tmp_path, monkeypatch)
    want_files, got_files = outputs_by_name(fs.expected, ".xlsx"), outputs_by_name(out, ".xlsx")
    assert sorted(got_files) == sorted(want_files)
    for name, want_path in want_files.items():
        got, got_fills = read_sheet(got_files[name])
        want, _ = read_sheet(want_path)  # msprobe's fills follow its rules, not the default's
        header = want[0]
        assert got[0] == header + ["Reason"], "msprobe's columns, then Reason"
        reasons = [row[-1] for row in got[1:]]
        got = [row[:-1] for row in got]
        npu_col, bench_col = header.index("NPU Name"), header.index("Bench Name")
        verdict_cols = {c for c in ("Result", "Accuracy Reached or Not", "Err_message")
                        if c in header}
        for row, fill, reason in zip(got[1:], got_fills, reasons):
            _check_verdict(header, row, fill, reason)
        bench_only = [r for r in got[1:] if r[npu_col] == "N/A"]
        for row in bench_only:
            if "Err_message" in header:
                assert row[header.index("Err_message")].startswith("No NPU data matched: ")
            assert row[bench_col] != "N/A"
        kept = [(r, f) for r, f in zip(got[1:], got_fills) if r[npu_col] != "N/A"]
        if fs.name == "dm":
            # the default -dm report goes on with the NPU rows the mapping does not name
            unnamed = kept[len(want) - 1:]
            assert unnamed and all(r[bench_col] == "N/A" for r, _ in unnamed)
            kept = kept[: len(want) - 1]
        assert len(kept) == len(want) - 1, "every NPU row of msprobe's report, and no other"
        rematched_ops = {op_of(r[npu_col]) for (r, _), w in zip(kept, want[1:])
                         if w[bench_col] == "N/A" and r[bench_col] == r[npu_col]}
        for i, ((row, _), want_row) in enumerate(zip(kept, want[1:])):
            if op_of(row[npu_col]) in rematched_ops:
                assert row[npu_col] == want_row[npu_col]
                continue
            for col, (g, w) in enumerate(zip(row, want_row)):
                if g == w or header[col] in verdict_cols or (
                        isinstance(g, float) and isinstance(w, float)
                        and math.isnan(g) and math.isnan(w)):
                    continue
                tensor_mode = "Cosine" in header
                assert tensor_mode and header[col] in TENSOR_SHIFT_COLUMNS, (
                    f"{name} row {i} {header[col]}: default {g!r}, msprobe {w!r}")


def _check_verdict(header: list[str], row: list, fill: str | None, reason: str | None) -> None:
    """A row's colour, verdict column and Reason agree (the rules themselves: test_verdicts.py)."""
    unmatched = "N/A" in (row[header.index("NPU Name")], row[header.index("Bench Name")])
    colour = {"FFFF0000": "red", "00FFFF00": "yellow", None: None}[fill]
    if unmatched:
        assert colour is None and reason, "an unmatched row says why"
        if "Err_message" in header:
            assert reason in row[header.index("Err_message")]
        return
    if colour is not None:
        assert reason and reason.split(":")[0] in (
            "inf/nan", "inf/nan on one side") or " >= " in reason, reason
    if "Result" in header and "NPU MD5" not in header:
        assert (row[header.index("Result")] == "Warning") == (colour is not None)
    if "Accuracy Reached or Not" in header and colour is not None:
        assert row[header.index("Accuracy Reached or Not")] == "No"
