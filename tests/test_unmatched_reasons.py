"""Why a row is unmatched (sql/compare/rules/unmatched_reasons.sql), table-driven, end to end.

Each case is a pair of small dumps (and flags); the test runs the default mode and reads, for the
rows named, the Err_message (statistics mode: ``No bench data matched: <why>.``), the Reason column
and the console's count per reason. Float dtypes that differ only in precision are matched.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from msq import db, pipeline
from msq.cli import main
from msq.config import options_from_kwargs, parse_compare_json
from tests.dumps import bwd, fwd, t, write_pair

F32, I64, BF16 = "torch.float32", "torch.int64", "torch.bfloat16"


def op(out_dtype: str = F32, shape: list[int] | None = None, **kwargs: Any) -> dict[str, Any]:
    return fwd(t(), out=t(shape, dtype=out_dtype), **kwargs)


@dataclass
class Case:
    name: str
    npu: dict[str, Any]
    bench: dict[str, Any]
    # row name -> expected Reason (a substring; the Err_message carries the same text)
    want: dict[str, str]
    console: str = ""              # expected in the console's count per reason
    flags: list[str] = field(default_factory=list)
    mapping: str | None = None     # -dm YAML text


CASES = [
    Case("dtype that cannot be compared",
         {"Functional.a.0.forward": op(), "Functional.b.0.forward": op()},
         {"Functional.a.0.forward": op(I64), "Functional.b.0.forward": op()},
         {"Functional.a.0.forward.output.0":
          "bench has this name with dtype torch.int64; torch.float32 vs torch.int64 cannot be "
          "compared",
          "Functional.a.0.forward.input.0":
          "its op does not match the bench op of that name (Functional.a.0.forward.output.0: "
          "dtype torch.float32 vs torch.int64)"},
         "NPU-only: 2 rows (1 another row of its op differs, 1 dtype cannot be compared)"),
    Case("shape",
         {"Functional.a.0.forward": op(shape=[4, 16]), "Functional.b.0.forward": op()},
         {"Functional.a.0.forward": op(shape=[4, 8]), "Functional.b.0.forward": op()},
         {"Functional.a.0.forward.output.0":
          "bench has this name with shape [4, 8]; shapes [4, 16] vs [4, 8] differ"},
         "1 shape differs"),
    Case("no bench op at that call",
         {f"Functional.relu.{i}.forward": op() for i in range(3)},
         {f"Functional.relu.{i}.forward": op() for i in range(2)},
         {"Functional.relu.2.forward.output.0":
          "no bench op of this API at call 2 (bench has calls 0-1 of Functional.relu.forward)"},
         "NPU-only: 2 rows (2 no bench op at that call)"),
    # an API of one word before its call count: the op's name and its API share only the text
    # up to the first dot (the view joins the other side's calls on it)
    Case("no bench op at that call, an API of one word",
         {f"Torch.{i}.forward": op() for i in range(3)},
         {f"Torch.{i}.forward": op() for i in range(2)},
         {"Torch.2.forward.output.0":
          "no bench op of this API at call 2 (bench has calls 0-1 of Torch.forward)"},
         "NPU-only: 2 rows (2 no bench op at that call)"),
    Case("an API the bench lacks, a bench-only API",
         {"Functional.a.0.forward": op(), "Functional.hardtanh.0.forward": op()},
         {"Functional.a.0.forward": op(), "Tensor.flatten.0.forward": op()},
         {"Functional.hardtanh.0.forward.output.0": "the bench has no Functional.hardtanh.forward op",
          "Tensor.flatten.0.forward.output.0": "the NPU has no Tensor.flatten.forward op"},
         "bench-only: 2 rows (2 the NPU lacks the API)"),
    Case("other arguments",
         {"Functional.a.0.forward": op(), "Functional.b.0.forward": op(inplace={"type": "bool", "value": True})},
         {"Functional.a.0.forward": op(), "Functional.b.0.forward": op()},
         {"Functional.b.0.forward.input.inplace.0":
          "the bench op of this name has other arguments "
          "(no Functional.b.0.forward.input.inplace.0 there)",
          "Functional.b.0.forward.output.0": "its op does not match the bench op of that name"}),
    Case("a backward op with another gradient count",
         {"Functional.a.0.backward": bwd([t()], [t(), t()]), "Functional.b.0.forward": op()},
         {"Functional.a.0.backward": bwd([t()], [t()]), "Functional.b.0.forward": op()},
         {"Functional.a.0.backward.output.1":
          "the bench op of this name has other arguments (no Functional.a.0.backward.output.1 "
          "there)"}),
    Case("-dm names a bench row the bench lacks; rows it does not name",
         {"Functional.a.0.forward": op(), "Functional.b.0.forward": op()},
         {"Functional.a.0.forward": op(), "Functional.b.0.forward": op()},
         {"Functional.a.0.forward.output.0":
          "mapped by -dm to Functional.zz.0.forward.output.0, which the bench lacks",
          "Functional.b.0.forward.output.0": "not named in the -dm mapping"},
         "-dm maps it to a name the bench lacks",
         mapping="Functional.a.0.forward.output.0: Functional.zz.0.forward.output.0\n"
                 "Functional.a.0.forward.input.0: Functional.a.0.forward.input.0\n"),
    Case("bf16 against fp32 is matched, the dtypes noted",
         {"Functional.a.0.forward": op(BF16)},
         {"Functional.a.0.forward": op(F32)},
         {"Functional.a.0.forward.output.0":
          "dtypes differ in precision (torch.bfloat16 vs torch.float32): values compared"}),
]


def _run(case: Case, tmp_path: Path, *extra: str) -> tuple[int, str, dict[str, dict[str, str]]]:
    cfg = write_pair(tmp_path, case.npu, case.bench)
    flags = list(case.flags)
    if case.mapping is not None:
        (tmp_path / "dm.yaml").write_text(case.mapping)
        flags += ["-dm", str(tmp_path / "dm.yaml")]
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compare", str(cfg), "-o", str(out), "--no-history",
                                       "--format", "csv", *flags, *extra], catch_exceptions=False)
    (path,) = out.glob("compare_result_*.csv")
    with path.open(newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    by_name = {r["NPU Name"] if r["NPU Name"] != "N/A" else r["Bench Name"]: r for r in table}
    return result.exit_code, result.output, by_name


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_unmatched_rows_say_why(case: Case, tmp_path: Path) -> None:
    code, output, by_name = _run(case, tmp_path)
    assert code == 0, output
    for name, why in case.want.items():
        row = by_name[name]
        assert why in row["Reason"], f"{name}: {row['Reason']!r}"
        unmatched = "N/A" in (row["NPU Name"], row["Bench Name"])
        if unmatched:
            side = "bench" if row["NPU Name"] != "N/A" else "NPU"
            assert row["Err_message"] == f"No {side} data matched: {row['Reason']}."
        else:
            assert row["Result"] == "" and row["Max diff"] == "0.0"
    assert case.console in output


def test_compat_keeps_msprobe_texts_and_tolerance(tmp_path: Path) -> None:
    """1.1.0: bf16 against fp32 does not match; Err_message is a bare "No bench data matched."."""
    case = next(c for c in CASES if c.name.startswith("bf16"))
    code, output, by_name = _run(case, tmp_path, "--compat", "msprobe-1.1")
    assert code == 0, output
    row = by_name["Functional.a.0.forward.output.0"]
    assert (row["Bench Name"], row["Err_message"]) == ("N/A", "No bench data matched.")
    assert "Reason" not in row


def test_the_empty_stand_in_has_the_views_columns() -> None:
    """pipeline.skip_unmatched_reasons replaces the view by NO_UNMATCHED_REASONS when every row
    is matched: same names and types, or verdicts would change."""
    con = db.connect()
    db.run_schema(con)
    db.load_views(con, variants=["statistics", "default"])
    real = con.execute("DESCRIBE SELECT * FROM unmatched_reasons").fetchall()
    assert con.execute(f"DESCRIBE {pipeline.NO_UNMATCHED_REASONS}").fetchall() == real


def _verdicts(cfg: Path, out: Path) -> tuple[list[tuple[Any, ...]], str]:
    inp = parse_compare_json(cfg)
    opts = options_from_kwargs(False, True, False, {"record": False})
    con, _, _, _ = pipeline.compute(inp, opts, out, "", None)
    try:
        rows = con.execute("SELECT * FROM verdicts ORDER BY out_seq").fetchall()
        sql = db.scalar(con, "SELECT sql FROM duckdb_views() WHERE view_name = 'unmatched_reasons'")
        if sql is None:  # the shipped view's rows, made a table before verdicts read them
            assert db.has_table(con, "unmatched_reasons")
            return rows, "a table"
        return rows, str(sql)
    finally:
        con.close()


@pytest.mark.parametrize("matched", [True, False], ids=["all matched", "one unmatched"])
def test_verdicts_are_the_same_without_the_reasons_query(
        matched: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row matched: the stand-in is used and the verdicts (marks, rules, reasons: a red
    row, a yellow one, a precision note) are those of the real view; a row unmatched: the real
    view stays, its rows made a table (pipeline.create_unmatched_reasons) with the same
    verdicts."""
    npu = {"Functional.a.0.forward": fwd(t(), out=t(mx=5.0)),
           "Functional.b.0.forward": fwd(t(mx=5.0), out=t(mx=1.05, dtype=BF16)),
           "Functional.c.0.forward": op()}
    bench = {"Functional.a.0.forward": fwd(t(), out=t(mx=1.0)),
             "Functional.b.0.forward": fwd(t(mx=5.0), out=t(mx=1.0)),
             "Functional.c.0.forward": op() if matched else op(I64)}
    cfg = write_pair(tmp_path, npu, bench)
    fast, stand_in = _verdicts(cfg, tmp_path / "fast")
    monkeypatch.setattr(pipeline, "skip_unmatched_reasons", lambda con, unmatched=None: None)
    full, view = _verdicts(cfg, tmp_path / "full")
    assert fast == full
    assert (stand_in == "a table") is not matched and view == "a table"
    assert matched is ("FROM judged" not in stand_in and "WHERE false" in stand_in)
    assert {row[1] for row in fast} >= {"red", "yellow"}
    assert any("dtypes differ in precision" in (row[3] or "") for row in fast)



def test_bound_settings_give_the_shipped_views_rows(tmp_path: Path) -> None:
    """pipeline.bound_reasons writes the settings and the -dm flag into the view's text: its
    rows are those of the shipped file as it is, on every case (unmatched rows of each reason,
    -dm on and off), with and without the MindSpore name mappings' branch."""
    shipped = db.sql_file("compare/rules/unmatched_reasons.sql").body
    seen: set[str] = set()
    for i, case in enumerate(CASES):
        cfg = write_pair(tmp_path / str(i), case.npu, case.bench)
        kwargs: dict[str, Any] = {"record": False}
        if case.mapping is not None:
            (tmp_path / str(i) / "dm.yaml").write_text(case.mapping)
            kwargs["data_mapping"] = str(tmp_path / str(i) / "dm.yaml")
        opts = options_from_kwargs(False, True, False, kwargs)
        con, _, _, _ = pipeline.compute(parse_compare_json(cfg), opts, tmp_path / str(i), "",
                                        None)
        try:
            for mapping in (False, True):
                con.execute("UPDATE settings SET api_mapping = ?", [mapping])
                bound = pipeline.bound_reasons(con).body
                assert all(read not in bound for read in pipeline.REASON_SETTINGS)
                want = con.execute(f"SELECT * FROM ({shipped}) ORDER BY ALL").fetchall()
                got = con.execute(f"SELECT * FROM ({bound}) ORDER BY ALL").fetchall()
                assert got == want, (case.name, mapping)
                seen.update(row[1] for row in got)
        finally:
            con.close()
    assert {"api", "call", "dtype", "shape", "args", "dm_missing", "dm_unnamed"} <= seen


def test_an_ops_api_stem_starts_its_name() -> None:
    """unmatched_reasons' other_calls runs op_api only for the other side's ops that start with
    the API's stem (the API without its last part): every op of an API must start with it."""
    con = db.connect()
    db.run_schema(con)
    names = ["Functional.relu.2.forward", "Functional.relu.forward.2", "Torch.3.backward",
             "Tensor.__add__.0.forward", "Module.fc.Linear.forward.0", "Module.fc.Linear.backward.1",
             "Distributed.all_reduce.7.forward", "X.forward", "X.3.forward", "X.forward.3",
             ".3.forward", "3.forward", "relu", "a.b.c", "", "Functional.relu.forward"]
    rows = con.execute(
        "SELECT op, op_api(op) FROM unnest(?::VARCHAR[]) t(op) "
        r"WHERE NOT starts_with(op, regexp_replace(op_api(op), '\.[^.]*$', ''))",
        [names]).fetchall()
    assert rows == []
    # names op_api rewrites and names it keeps
    assert con.execute("SELECT count(DISTINCT op_api(op) <> op) FROM unnest(?::VARCHAR[]) t(op)",
                       [names]).fetchall() == [(2,)]
