"""Reading the history: msq sql and msq runs (msq/history/query.py, its views in sql/history/)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
from click.testing import CliRunner

from msq import history
from msq.cli import main
from tests.history.builders import csv_rows, sql


def test_sql_csv_keeps_formula_like_texts_from_being_evaluated(hist: Path) -> None:
    text = sql(hist, "SELECT '=HYPERLINK(\"x\")' AS f, '@SUM(A1)' AS a, '-3' AS n, -2.5 AS d, "
                     "'a;=1+1' AS s", "--format", "csv")
    assert text.splitlines()[1] == '"\'=HYPERLINK(""x"")","\'@SUM(A1)","-3","-2.5","a;=1+1"'
    assert csv_rows(text)[1] == ["'=HYPERLINK(\"x\")", "'@SUM(A1)", "-3", "-2.5", "a;=1+1"]


def test_op_trend_of_one_op_across_steps(hist: Path) -> None:
    out = sql(hist, "SELECT step, rank, mean_diff, max_diff, mark FROM op_trend "
                    "WHERE label = 'v1' AND npu_name = 'Functional.linear.1.forward.output.0' "
                    "ORDER BY step, rank", "--format", "csv")
    # the Mean drifts by 1/256 a step (too little to colour); step1/rank1's Max x3 is red
    assert csv_rows(out) == [["step", "rank", "mean_diff", "max_diff", "mark"],
                             ["0", "0", "0.0", "0.0", ""], ["0", "1", "0.0", "0.0", ""],
                             ["1", "0", "0.00390625", "0.0", ""],
                             ["1", "1", "0.00390625", "6.5", "red"],
                             ["2", "0", "0.0078125", "0.0", ""], ["2", "1", "0.0078125", "0.0", ""]]


def test_first_divergent_row_per_rank(hist: Path) -> None:
    out = sql(hist, "SELECT rank, step, out_seq, npu_name, reason FROM first_divergence "
                    "WHERE label = 'v2' "
                    "QUALIFY row_number() OVER (PARTITION BY rank ORDER BY step) = 1 "
                    "ORDER BY rank", "--format", "csv")
    assert csv_rows(out) == [
        ["rank", "step", "out_seq", "npu_name", "reason"],
        ["0", "2", "5", "Functional.relu.0.forward.output.0",
         "red: scale-aware error 0.667 >= 0.1, from Max: NPU 7.88, bench 2.62"],
        ["1", "0", "3", "Functional.linear.0.forward.output.0",
         "yellow: scale-aware error 0.0588 >= 0.01 from equal inputs, from Max: NPU 2.66, bench 2.5"]]
    # v1 diverges in two compares: red at step1/rank1; at step2/rank0 the relu row is yellow, which
    # the default mode's advisor also names (Warning: docs/rules.md)
    out = sql(hist, "SELECT label, step, rank, npu_name, mark, result FROM first_divergence "
                    "WHERE label = 'v1' ORDER BY step", "--format", "csv")
    assert csv_rows(out)[1:] == [
        ["v1", "1", "1", "Functional.linear.1.forward.output.0", "red", "Warning"],
        ["v1", "2", "0", "Functional.relu.0.forward.output.0", "yellow", "Warning"]]


def test_regressions_between_labels(hist: Path) -> None:
    out = sql(hist, "SELECT step, rank, npu_name, severity_a, severity_b, mark_a, mark_b "
                    "FROM regressions WHERE label_a = 'v1' AND label_b = 'v2' "
                    "ORDER BY step, rank", "--format", "csv")
    assert csv_rows(out) == [
        ["step", "rank", "npu_name", "severity_a", "severity_b", "mark_a", "mark_b"],
        ["0", "1", "Functional.linear.0.forward.output.0", "0", "1", "", "yellow"],
        ["2", "0", "Functional.relu.0.forward.output.0", "1", "2", "yellow", "red"]]
    # the other way round nothing got worse... except what improved, which is not a regression
    out = sql(hist, "SELECT count(*) AS n FROM regressions WHERE label_a = 'v2' AND label_b = 'v1'",
              "--format", "csv")
    assert csv_rows(out) == [["n"], ["0"]]


def test_rows_are_typed_and_match_the_written_csv(hist: Path) -> None:
    con = duckdb.connect(str(hist), read_only=True)
    try:
        types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                 "WHERE table_name = 'result_rows'").fetchall())
        assert types["max_diff"] == types["cosine"] == types["npu_max"] == "DOUBLE"
        assert types["max_diff_text"] == types["npu_name"] == types["mark"] == "VARCHAR"
        cid, csv_file = con.execute(
            "SELECT compare_id, list_filter(files, lambda f: f LIKE '%.csv')[1] FROM compares "
            "WHERE label = 'v1' AND step = 1 AND rank = 1").fetchall()[0]
        ours = con.execute(
            "SELECT npu_name, max_diff, max_rel_pct, npu_max, bench_max, result, err_message "
            "FROM result_rows WHERE compare_id = ? ORDER BY out_seq", [cid]).fetchall()
        theirs = con.execute(
            f"SELECT \"NPU Name\", \"Max diff\", \"MaxRelativeErr\", \"NPU max\", \"Bench max\", "
            f"\"Result\", \"Err_message\" FROM read_csv('{csv_file}', all_varchar = true)"
        ).fetchall()
    finally:
        con.close()
    assert len(ours) == len(theirs) == 13
    for mine, written in zip(ours, theirs):
        assert mine[0] == written[0]
        assert mine[1] == float(written[1]) and f"{mine[2]!r}%" == written[2]
        assert (mine[3], mine[4]) == (float(written[3]), float(written[4]))
        assert (mine[5] or "", mine[6] or "") == (written[5] or "", written[6] or "")


def test_runs_lists_every_compare_as_a_table(hist: Path) -> None:
    result = CliRunner().invoke(main, ["runs", "--db", str(hist), "--label", "v2"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["compare_id", "started_at", "label", "mode", "rank", "step",
                                "rows", "red", "yellow", "first_suspect"]
    assert set(lines[1]) == {"-", " "}
    assert lines[-1] == "(6 rows)"
    body = [re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00", "T", line).split()
            for line in lines[2:-1]]
    assert sorted(tuple(r[2:]) for r in body) == sorted([
        ("v2", "statistics", "0", "0", "13", "0", "0", "NULL"),
        ("v2", "statistics", "1", "0", "13", "0", "1", "Functional.linear.0.forward.output.0"),
        ("v2", "statistics", "0", "1", "13", "0", "0", "NULL"),
        ("v2", "statistics", "1", "1", "13", "1", "0", "Functional.linear.1.forward.output.0"),
        ("v2", "statistics", "0", "2", "13", "1", "0", "Functional.relu.0.forward.output.0"),
        ("v2", "statistics", "1", "2", "13", "0", "0", "NULL")])
    # the table is fixed width: every line as long as the header, bar trailing blanks
    assert all(len(line) <= len(lines[1]) for line in lines[:-1])


def test_sql_formats_carry_the_same_rows(hist: Path, tmp_path: Path) -> None:
    # the two runs record concurrently, so compare ids interleave: order by what they mean
    query = ("SELECT compare_id, label, step, rank, n_red FROM compares "
             "WHERE n_red > 0 ORDER BY label, step, rank")
    as_json = json.loads(sql(hist, query, "--format", "json"))
    as_csv = csv_rows(sql(hist, query, "--format", "csv"))
    sql(hist, query, "--format", "parquet", "-o", str(tmp_path / "r.parquet"))
    as_parquet = duckdb.sql(f"SELECT * FROM '{tmp_path / 'r.parquet'}'").fetchall()
    assert [r["label"] for r in as_json] == ["v1", "v2", "v2"]
    assert [tuple(r.values()) for r in as_json] == as_parquet
    assert as_csv[1:] == [[str(v) for v in r] for r in as_parquet]
    table = sql(hist, query)
    assert table.splitlines()[-1] == "(3 rows)"
    assert sql(hist, query, "-o", str(tmp_path / "r.txt")) == ""
    assert (tmp_path / "r.txt").read_text() == table


def test_sql_error_is_one_line_and_exit_1(hist: Path) -> None:
    result = CliRunner().invoke(main, ["sql", "SELECT * FROM compare", "--db", str(hist)])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("msq: error: SQL error: Catalog Error: Table with name "
                                    "compare does not exist!")


def test_sql_is_read_only(hist: Path) -> None:
    before = sql(hist, "SELECT count(*) FROM compares", "--format", "csv")
    result = CliRunner().invoke(main, ["sql", "DELETE FROM compares", "--db", str(hist)])
    assert result.exit_code == 1 and "read-only" in result.stderr
    assert sql(hist, "SELECT count(*) FROM compares", "--format", "csv") == before


def test_parquet_needs_a_file_and_formats_are_checked(hist: Path) -> None:
    result = CliRunner().invoke(main, ["sql", "SELECT 1", "--db", str(hist), "--format", "parquet"])
    assert result.exit_code == 2 and "-o FILE" in result.stderr
    result = CliRunner().invoke(main, ["sql", "SELECT 1", "--db", str(hist), "--format", "xml"])
    assert result.exit_code == 2


def doc_queries() -> list[str]:
    text = (Path(__file__).resolve().parents[2] / "docs" / "schema.md").read_text(encoding="utf-8")
    return re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)


def test_docs_schema_examples_run(hist: Path) -> None:
    queries = doc_queries()
    assert len(queries) >= 8
    for query in queries:
        table = history.query(hist, query)
        assert table.columns, query
        assert table.rows, f"no rows from the docs/schema.md example:\n{query}"


def test_docs_schema_documents_every_table_and_view(hist: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "schema.md").read_text(encoding="utf-8")
    con = duckdb.connect(str(hist), read_only=True)
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() UNION ALL "
            "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
        columns = con.execute("SELECT table_name, column_name FROM information_schema.columns "
                              "WHERE table_name IN ('compares', 'result_rows', 'blame_rows', "
                              "'names', 'result_data', 'blame_data', 'blame_runs', 'terms', 'texts', "
                              "'blame_classes', 'result_classes', 'reasons')"
                              ).fetchall()
    finally:
        con.close()
    assert sorted(names) == ["blame", "blame_classes", "blame_data", "blame_edges", "blame_rows",
                             "blame_runs",
                             "compares",
                             "first_divergence", "meta", "names", "noise_bands", "op_trend",
                             "reasons", "regressions", "result_classes", "result_data",
                             "result_rows", "runs", "terms",
                             "texts"]
    for name in names:
        assert f"### `{name}`" in text
    missing = [f"{t}.{c}" for t, c in columns if f"`{c}`" not in text]
    assert not missing, f"columns not in docs/schema.md: {missing}"
