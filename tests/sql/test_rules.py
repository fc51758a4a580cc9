"""Table-driven tests of the rule views (sql/compare/rules/): rows in, marks out.

Every rule file ``sql/compare/rules/<path>.sql`` has a case file ``tests/sql/rules/<path>.yaml``
(a rule without one fails :func:`test_every_rule_has_cases`). A case file declares ``inputs``:
the views the rule reads, which the test creates as tables of the given column types (the
compare's own tables, such as ``settings`` and ``hl_windows``, come from sql/compare/schema).
Each case then gives ``rows`` per table and the rows the rule must return (``expect``, compared
on the columns it names, ordered by ``out_seq``). Cells (the ``cell`` union type) are given as
plain YAML values: a number, a string or a boolean.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from msq import db, pipeline

RULES = Path(db.sql_root() / "compare" / "rules")  # type: ignore[arg-type]
CASES = Path(__file__).parent / "rules"


def rule_files() -> list[Path]:
    return sorted(RULES.rglob("*.sql"))


def case_file(rule: Path) -> Path:
    return CASES / rule.relative_to(RULES).with_suffix(".yaml")


def all_cases() -> list[Any]:
    found = []
    for rule in rule_files():
        if case_file(rule).is_file():
            doc = yaml.safe_load(case_file(rule).read_text(encoding="utf-8"))
            for case in doc["cases"]:
                found.append(pytest.param(rule, doc["inputs"], case,
                                          id=f"{rule.relative_to(RULES)}: {case['case']}"))
    return found


def test_every_rule_has_cases() -> None:
    missing = [str(case_file(r).relative_to(CASES.parent)) for r in rule_files()
               if not case_file(r).is_file()]
    assert rule_files() and not missing, f"rules without cases: {missing}"


def _value(expr_type: str, value: Any) -> tuple[str, Any]:
    """(SQL expression with one parameter, parameter) for a value of a column type."""
    if value is None:
        return f"NULL::{expr_type}", None
    if expr_type.startswith("UNION") or expr_type == "cell":
        if isinstance(value, bool):
            return "union_value(b := ?::BOOLEAN)::cell", value
        if isinstance(value, (int, float)):
            return "union_value(n := ?::DOUBLE)::cell", float(value)
        return "union_value(s := ?::VARCHAR)::cell", str(value)
    return f"?::{expr_type}", value


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    types = {name: kind for name, kind, *_ in con.execute(f"DESCRIBE {table}").fetchall()}
    for row in rows:
        exprs, params = [], []
        for column, value in row.items():
            expr, param = _value(types[column], value)
            exprs.append(f"{expr} AS {db.quote_ident(column)}")
            if param is not None:
                params.append(param)
        con.execute(f"INSERT INTO {table} BY NAME SELECT {', '.join(exprs)}", params)


def _same(got: Any, want: Any) -> bool:
    if isinstance(got, float) and isinstance(want, (int, float)) and not isinstance(want, bool):
        return got == want or (math.isnan(got) and math.isnan(want))
    return got == want and type(got) is type(want)


def _case_con(rule: Path, inputs: dict[str, dict[str, str]],
              case: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """A database of the case's rows, the rule's view created."""
    con = db.connect()
    db.run_schema(con)
    for table, columns in inputs.items():
        con.execute(f"CREATE TABLE {table} ("
                    + ", ".join(f"{db.quote_ident(c)} {t}" for c, t in columns.items()) + ")")
    for table, rows in case.get("rows", {}).items():
        _insert(con, table, rows)
    db.create_view(con, db.SqlFile(rule.stem, rule.read_text(encoding="utf-8"), str(rule)))
    return con


@pytest.mark.parametrize("rule, inputs, case", all_cases())
def test_rule_case(rule: Path, inputs: dict[str, dict[str, str]], case: dict[str, Any]) -> None:
    con = _case_con(rule, inputs, case)
    want = case["expect"]
    columns = list(want[0]) if want else ["out_seq"]
    got = con.execute(f"SELECT {', '.join(db.quote_ident(c) for c in columns)} FROM {rule.stem} "
                      "ORDER BY out_seq").fetchall()
    assert len(got) == len(want), f"{case['case']}: got {got}"
    for got_row, want_row in zip(got, want):
        for column, value in zip(columns, got_row):
            assert _same(value, want_row[column]), \
                f"{case['case']}: {column} is {value!r}, expected {want_row[column]!r} ({got_row})"


@pytest.mark.parametrize("rule, inputs, case",
                         [p for p in all_cases() if p.values[0] == RULES / "row_error.sql"])
def test_bound_row_error_gives_the_views_rows(rule: Path, inputs: dict[str, dict[str, str]],
                                              case: dict[str, Any]) -> None:
    """msq.pipeline.bound_row_error (what the default mode materialises: the case's mode written
    into the view's text) gives every row and column of the shipped view, in each mode's cases."""
    con = _case_con(rule, inputs, case)
    mode = con.execute("SELECT mode FROM settings").fetchone()[0]  # type: ignore[index]
    bound = pipeline.bound_row_error(mode)
    assert pipeline.ROW_ERROR_MODE not in bound
    want = con.execute("SELECT * FROM row_error ORDER BY out_seq").fetchall()
    got = con.execute(f"SELECT * FROM ({bound}) ORDER BY out_seq").fetchall()
    assert repr(got) == repr(want), case["case"]


def test_bound_row_error_reads_no_tensor_metrics_outside_tensor_mode() -> None:
    """Outside tensor mode the bound text has no join of ``tensor_metrics`` (filled by tensor
    mode alone): its columns are typed NULLs; tensor mode keeps the join."""
    for mode in ("statistics", "md5"):
        assert "tensor_metrics" not in pipeline.bound_row_error(mode)
    assert "LEFT JOIN tensor_metrics tm" in pipeline.bound_row_error("tensor")


#: statistics for test_row_error_err_stat_is_the_first_statistic_at_the_greatest_error: ties,
#: zero scales, non-finite values, overflowing differences, missing statistics
_STAT_VALUES = [0.0, 1.0, -1.0, 2.0, 0.5, 3.0, 1e-300, 1e308, -1e308, math.inf, -math.inf,
                math.nan, None]


def test_row_error_err_stat_is_the_first_statistic_at_the_greatest_error() -> None:
    """row_error's err_stat (statistics mode, tensor rows) names the first of Norm, Mean, Max and
    Min whose error is >= the greatest of those after it, the statistic that set err: the view
    tests each against err itself (equal to their greatest), which is the same where the four
    errors are neither NULL nor NaN. On ~6,000 rows of ties, zero scales and non-finite values
    each row's err_stat is the one this reference picks from the four errors made as the view
    makes them (blame_fin, blame_rel: sql/compare/schema/15_error_macros.sql)."""
    import random

    rnd = random.Random(23)
    small = [0.0, 1.0, 2.0, None]
    rows = [tuple(rnd.choice(_STAT_VALUES) for _ in range(8)) for _ in range(3000)]
    rows += [tuple(rnd.choice(small) for _ in range(8)) for _ in range(3000)]
    con = db.connect()
    db.run_schema(con)
    con.execute("INSERT INTO settings (mode, compat) VALUES ('statistics', false)")
    stats = ("max", "min", "mean", "norm")
    con.executemany(
        "INSERT INTO tensors (side, row_seq, is_tensor, numel, max_num, min_num, mean_num, "
        "norm_num) VALUES (?, ?, true, ?, ?, ?, ?, ?)",
        [(side, i, 1 + i % 5, *row[k * 4:k * 4 + 4])
         for i, row in enumerate(rows) for k, side in enumerate(("npu", "bench"))])
    con.execute("INSERT INTO compare_rows (out_seq, npu_row, bench_row, kind) "
                "SELECT row_seq, row_seq, row_seq, 'matched' FROM tensors WHERE side = 'npu'")
    rule = RULES / "row_error.sql"
    db.create_view(con, db.SqlFile(rule.stem, rule.read_text(encoding="utf-8"), str(rule)))
    errors = ", ".join(
        f"blame_rel(n.{s}_num, b.{s}_num, {scale}) AS e_{s}" for s, scale in (
            ("norm", "ns"), ("mean", "ns / sqrt(greatest(coalesce(n.numel, 1), 1))"),
            ("max", "xs"), ("min", "xs")))
    missing = " OR ".join(f"{t}.{s}_num IS NULL" for s in stats for t in ("n", "b"))
    reference = con.execute(
        "SELECT out_seq, CASE WHEN missing THEN NULL "
        "WHEN e_norm >= greatest(e_mean, e_max, e_min) THEN 'Norm' "
        "WHEN e_mean >= greatest(e_max, e_min) THEN 'Mean' "
        "WHEN e_max >= e_min THEN 'Max' ELSE 'Min' END FROM ("
        f"  SELECT r.out_seq, {missing} AS missing, {errors} FROM compare_rows r, tensors n, "
        "  tensors b, LATERAL (SELECT greatest(blame_fin(n.norm_num), blame_fin(b.norm_num)) AS ns,"
        "    greatest(blame_fin(n.max_num), blame_fin(n.min_num), blame_fin(b.max_num), "
        "             blame_fin(b.min_num)) AS xs) "
        "  WHERE n.side = 'npu' AND n.row_seq = r.npu_row AND b.side = 'bench' "
        "  AND b.row_seq = r.bench_row) ORDER BY out_seq").fetchall()
    got = con.execute("SELECT out_seq, err_stat FROM row_error ORDER BY out_seq").fetchall()
    assert len(got) == len(rows) and got == reference
    picked = {stat for _, stat in got}
    assert picked == {None, "Norm", "Mean", "Max", "Min"}, picked
