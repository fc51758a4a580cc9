"""The default mode's verdict rules (sql/compare/rules/default/verdicts.sql, docs/rules.md), table-driven.

Rows in, marks out, in a real DuckDB: each case is one op (its input and output rows, NPU and
bench statistics, in tensor mode the sums of squares of the metrics pass); the test loads them
into the compare's tables and reads the mark, the rule and the Reason text of every row. The same
rows under ``--compat msprobe-1.1`` show what 1.1.0's rules said instead (docs/compat.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import duckdb
import pytest

from msq import db

INF, NAN = math.inf, math.nan
COLS = ("side, row_seq, op_seq, row_in_op, name, disp_name, match_name, io, disp_io, dtype, shape, "
        "md5, data_name, is_tensor, numel, max_num, max_kind, max_str, min_num, min_kind, min_str, "
        "mean_num, mean_kind, mean_str, norm_num, norm_kind, norm_str")
Stats = tuple[float, float, float, float]  # Max, Min, Mean, Norm
EQ: Stats = (1.0, -1.0, 0.1, 4.0)


@dataclass
class Row:
    io: str                       # input | output
    npu: Stats | int | str
    bench: Stats | int | str
    mark: str | None = None       # expected: red | yellow | None
    why: str = ""                 # expected substring of the Reason
    npu_dtype: str = "torch.float32"
    bench_dtype: str = "torch.float32"
    sq: tuple[float, float, float] | None = None  # tensor mode: sum (n-b)^2, sum n^2, sum b^2
    status: str = "ok"            # tensor mode: the metrics pass's status
    compat_mark: str | None = "?"  # expected under --compat ("?" = not checked)
    accuracy: str = "Yes"         # tensor mode: msprobe's Accuracy Reached or Not for the row


@dataclass
class Case:
    name: str
    rows: list[Row]
    mode: str = "statistics"
    extra: dict[str, str] = field(default_factory=dict)


def _insert(con: duckdb.DuckDBPyConnection, side: str, seq: int, row: Row) -> None:
    value = row.npu if side == "npu" else row.bench
    dtype = row.npu_dtype if side == "npu" else row.bench_dtype
    name = f"Functional.op.0.forward.{row.io}.{seq}"
    if isinstance(value, tuple):
        mx, mn, mean, norm = value
        con.execute(f"INSERT INTO tensors ({COLS}) VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, ?, '[16]', "
                    "NULL, ?, true, 16, ?, 'f', NULL, ?, 'f', NULL, ?, 'f', NULL, ?, 'f', NULL)",
                    [side, seq, seq, name, name, name, row.io, row.io, dtype, name + ".pt",
                     mx, mn, mean, norm])
    else:
        num = float(value) if isinstance(value, int) else None
        kind, text = ("i", None) if isinstance(value, int) else ("s", str(value))
        con.execute(f"INSERT INTO tensors ({COLS}) VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, "
                    "'<class ''int''>', '[]', NULL, '-1', false, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                    "?, ?, ?)", [side, seq, seq, name, name, name, row.io, row.io]
                    + [num, kind, text] * 4)


def load(case: Case, compat: bool = False) -> duckdb.DuckDBPyConnection:
    """A compare's tables holding the case's rows, and its views."""
    con = db.connect()
    db.run_schema(con)
    db.load_views(con, variants=[case.mode, "compat" if compat else "default"])
    con.execute("INSERT INTO settings VALUES (?, ?, false, false, false, false, false)",
                [case.mode, compat])
    for seq, row in enumerate(case.rows):
        _insert(con, "npu", seq, row)
        _insert(con, "bench", seq, row)
        con.execute("INSERT INTO compare_rows VALUES (?, 0, ?, ?, 'matched', false)",
                    [seq, seq, seq])
        con.execute("INSERT INTO hl_windows VALUES (?, 0, ?)", [seq, row.io == "input"])
        if case.mode == "tensor" and isinstance(row.npu, tuple):
            sq = row.sq or (None, None, None)
            con.execute("INSERT INTO tensor_metrics (out_seq, cosine, max_abs_err, one_thousandth, "
                        "accuracy, err_message, status, sq_diff, npu_sq, bench_sq) "
                        "VALUES (?, 1.0, 0.0, 1.0, ?, '', ?, ?, ?, ?)",
                        [seq, row.accuracy, row.status, *sq])
    return con


def verdicts(case: Case, compat: bool = False) -> list[tuple[str | None, str | None, str]]:
    """(mark, rule, Reason) of each row of the case, in order."""
    con = load(case, compat)
    if compat:
        marks = dict(con.execute("SELECT out_seq, mark FROM marks").fetchall())
        return [(marks.get(i), None, "") for i in range(len(case.rows))]
    got = con.execute("SELECT out_seq, mark, rule, reason FROM verdicts ORDER BY out_seq").fetchall()
    marks = dict(con.execute("SELECT out_seq, mark FROM marks").fetchall())
    assert {i: m for i, m, _, _ in got if m} == marks, "marks are the verdicts' marks"
    return [(m, rule, reason) for _, m, rule, reason in got]


def _scaled(norm: float) -> Stats:
    """The EQ statistics with another L2 norm (the norm sets the scale-aware error)."""
    return (EQ[0], EQ[1], EQ[2], norm)


CASES = [
    Case("equal rows", [Row("input", EQ, EQ), Row("output", EQ, EQ, compat_mark=None)]),
    Case("a shared -inf (masked_fill) is not an error", [
        Row("input", EQ, EQ),
        Row("output", (1.7263, -INF, -INF, INF), (1.7262, -INF, -INF, INF), compat_mark="red")]),
    Case("a shared NaN is not an error", [
        Row("output", (NAN, NAN, NAN, NAN), (NAN, NAN, NAN, NAN), compat_mark="red")]),
    Case("inf on the NPU side only", [
        Row("input", EQ, EQ),
        Row("output", (INF, -1.0, INF, INF), (3.0, -1.0, 0.5, 5.0), "red",
            "inf/nan on one side: Max inf vs 3", compat_mark="red")]),
    Case("-inf on the bench side only", [
        Row("output", (3.0, -1.0, 0.5, 5.0), (3.0, -INF, -INF, INF), "red",
            "inf/nan on one side", compat_mark=None)]),
    Case("a near-zero mean is no suspect (MeanRelativeErr 250%)", [
        Row("input", EQ, EQ),
        Row("output", (2.0, -2.0, -5.6e-9, 4.0), (2.0, -2.0, 3.7e-9, 4.0), compat_mark=None)]),
    Case("an output 20% off is red", [
        Row("input", EQ, EQ),
        Row("output", _scaled(4.8), EQ, "red",
            "scale-aware error 0.167 >= 0.1, from Norm: NPU 4.8, bench 4")]),
    Case("an input 20% off is red, and so is its output", [
        Row("input", _scaled(4.8), EQ, "red", "scale-aware error 0.167 >= 0.1"),
        Row("output", _scaled(4.8), EQ, "red", "scale-aware error 0.167 >= 0.1")]),
    Case("2% off from equal inputs: the error grows here", [
        Row("input", EQ, EQ),
        Row("output", _scaled(4.08), EQ, "yellow",
            "scale-aware error 0.0196 >= 0.01 from equal inputs, from Norm")]),
    Case("2% off from inputs 0.1% off: ten times more", [
        Row("input", _scaled(4.004), EQ),
        Row("output", _scaled(4.08), EQ, "yellow", ">= 10x its inputs' worst 0.000999")]),
    Case("2% off from inputs 1% off: inherited", [
        Row("input", _scaled(4.04), EQ),
        Row("output", _scaled(4.08), EQ)]),
    Case("0.5% off from equal inputs: below the floor", [
        Row("input", EQ, EQ),
        Row("output", _scaled(4.02), EQ)]),
    Case("5% off with no compared input", [
        Row("output", _scaled(4.2), EQ, "yellow", "with no compared input")]),
    Case("an int argument 3 vs 4", [
        Row("input", 3, 4, "red", "relative difference 0.25 >= 0.1, value 3 vs 4"),
        Row("output", EQ, EQ)]),
    Case("equal strings", [Row("input", "mean", "mean"), Row("output", EQ, EQ)]),
    Case("bf16 against fp32: compared, and the dtypes noted", [
        Row("input", EQ, EQ, None, "dtypes differ in precision (torch.bfloat16 vs torch.float32)",
            npu_dtype="torch.bfloat16"),
        Row("output", EQ, EQ, npu_dtype="torch.bfloat16")]),
    Case("md5 mode has no marks", [
        Row("output", _scaled(8.0), EQ, bench_dtype="torch.float32")], mode="md5"),
    # tensor mode: the relative L2 error of the metrics pass
    Case("tensor: relative L2 0.105 from equal inputs", [
        Row("input", EQ, EQ, sq=(0.0, 16.0, 16.0)),
        Row("output", EQ, EQ, "red", "relative L2 error 0.105 >= 0.1", sq=(0.1764, 16.0, 16.0))],
        mode="tensor"),
    Case("tensor: relative L2 0.05 from equal inputs", [
        Row("input", EQ, EQ, sq=(0.0, 16.0, 16.0)),
        Row("output", EQ, EQ, "yellow", "relative L2 error 0.05 >= 0.01 from equal inputs",
            sq=(0.04, 16.0, 16.0))], mode="tensor"),
    Case("tensor: relative L2 0.05 from inputs 0.02 off", [
        Row("input", EQ, EQ, sq=(0.0064, 16.0, 16.0)),
        Row("output", EQ, EQ, sq=(0.04, 16.0, 16.0))], mode="tensor"),
    Case("tensor: inf/nan at different positions", [
        Row("output", (INF, -1.0, INF, INF), (INF, -1.0, INF, INF), "red",
            "at different positions", status="nanpos")], mode="tensor"),
    Case("tensor: inf at the same positions", [
        Row("output", (INF, -1.0, INF, INF), (INF, -1.0, INF, INF), sq=(0.0, 4.0, 4.0))],
        mode="tensor"),
    Case("tensor: +inf against -inf at one position (the metrics pass zeroes both)", [
        Row("output", (INF, -1.0, NAN, INF), (1.0, -INF, NAN, INF), "red",
            "inf/nan on one side", sq=(0.0, 4.0, 4.0))], mode="tensor"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_default_rules(case: Case) -> None:
    got = verdicts(case)
    for i, (row, (mark, rule, reason)) in enumerate(zip(case.rows, got)):
        assert mark == row.mark, f"row {i}: {mark} ({rule}: {reason}), expected {row.mark}"
        assert row.why in reason, f"row {i}: {reason!r} lacks {row.why!r}"
        if mark is None:
            assert rule is None


@pytest.mark.parametrize("case", [c for c in CASES if any(r.compat_mark != "?" for r in c.rows)],
                         ids=lambda c: c.name)
def test_msprobe_rules_under_compat(case: Case) -> None:
    """The rows where 1.1.0's rules say otherwise (docs/compat.md): e.g. a shared -inf is red."""
    got = verdicts(case, compat=True)
    for i, (row, (mark, _, _)) in enumerate(zip(case.rows, got)):
        if row.compat_mark != "?":
            assert mark == row.compat_mark, f"row {i}: compat {mark}, expected {row.compat_mark}"


def test_tensor_accuracy_follows_the_marks() -> None:
    """Accuracy Reached or Not: No exactly on the rows the default rules colour; 1.1.0's own
    rule (Cosine < 0.99 with MaxAbsErr > 0.001, or MaxAbsErr > 1) is scale-unaware."""
    big = (3000.0, -3000.0, 1.0, 40000.0)
    case = Case("accuracy", [
        # values in the thousands: MaxAbsErr 2 fails 1.1.0's "> 1", a 1e-5 relative error
        Row("input", big, big, sq=(0.16, 1.6e9, 1.6e9), accuracy="No"),
        # a relative L2 error of 0.105 that 1.1.0's cosine rule lets pass
        Row("output", EQ, EQ, "red", sq=(0.1764, 16.0, 16.0), accuracy="Yes"),
        Row("output", EQ, EQ, sq=(0.0, 16.0, 16.0), accuracy="None")], mode="tensor")
    got = [r[0] for r in load(case).execute(
        'SELECT "Accuracy Reached or Not" FROM result_tensor ORDER BY out_seq').fetchall()]
    assert got == ["Yes", "No", "None"]
    old = [r[0] for r in load(case, compat=True).execute(
        'SELECT "Accuracy Reached or Not" FROM result_tensor ORDER BY out_seq').fetchall()]
    assert old == ["No", "Yes", "None"]


def test_statistics_result_follows_the_marks() -> None:
    """Result Warning exactly on coloured rows; 1.1.0 warns on a near-zero mean."""
    case = Case("result", [
        Row("input", EQ, EQ),
        Row("output", (2.0, -2.0, -5.6e-9, 4.0), (2.0, -2.0, 3.7e-9, 4.0)),
        Row("output", _scaled(4.8), EQ, "red")])
    query = 'SELECT "Result", "Err_message" FROM result_statistics ORDER BY out_seq'
    assert load(case).execute(query).fetchall() == [
        ("", ""), ("", ""), ("Warning", "Need double check api accuracy.")]
    assert load(case, compat=True).execute(query).fetchall() == [
        ("", ""), ("Warning", "Need double check api accuracy."), ("", "")]


def test_tensor_mode_matched_argument_without_tensor_data() -> None:
    """1.1.0 writes "No bench data matched." on a matched int argument; the default mode says
    the row was compared by its dump.json values (and colours it when they differ)."""
    case = Case("argument", [Row("input", 3, 4, "red"), Row("output", EQ, EQ, sq=(0.0, 16.0, 16.0))],
                mode="tensor")
    query = 'SELECT "Err_message", "Accuracy Reached or Not" FROM result_tensor ORDER BY out_seq'
    assert load(case).execute(query).fetchall()[0] == (
        "No tensor data: compared by the dump.json values.", "No")
    assert load(case, compat=True).execute(query).fetchall()[0] == ("No bench data matched.", "None")
