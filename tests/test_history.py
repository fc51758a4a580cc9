"""The history database: real compares recorded into real DuckDB files, queried with msq sql/runs.

The module fixture writes msprobe statistics dumps (3 steps x 2 ranks, a bench side and two NPU
runs) and runs ``msq compare`` twice on the dump roots into one database, with labels v1 and v2.
The second run makes two rows worse, so the history answers: one op's trend across steps, the
first divergent row per rank, and the rows that regressed between the labels.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

import msq
from msq import history
from msq.cli import main
from msq.errors import HistoryError

# --------------------------------------------------------------------------------------------
# dumps: one model of four forward ops (13 output rows per compare)

STEPS, RANKS = (0, 1, 2), (0, 1)
MODEL: dict[str, tuple[list[list[int]], list[list[int]]]] = {
    "Functional.linear.0.forward": ([[4, 8], [16, 8], [16]], [[4, 16]]),
    "Functional.relu.0.forward": ([[4, 16]], [[4, 16]]),
    "Functional.linear.1.forward": ([[4, 16], [4, 16], [4]], [[4, 4]]),
    "Functional.mse_loss.0.forward": ([[4, 4], [4, 4]], [[]]),
}
Change = dict[tuple[str, str, int], dict[str, float]]   # (op, io, index) -> {stat: factor}
LINEAR0_OUT = ("Functional.linear.0.forward", "output", 0)
RELU_OUT = ("Functional.relu.0.forward", "output", 0)
LINEAR1_OUT = ("Functional.linear.1.forward", "output", 0)
# How each NPU run departs from the bench, per (step, rank). Both runs also drift linear.1's output
# Mean by 0.125 per step. v1: linear.1 output Max x3 at step1/rank1 (red, Warning) and relu output
# Max x1.25 at step2/rank0 (yellow). v2: the same, but relu x3 (yellow -> red) and linear.0 output
# Max x1.25 at step0/rank1 (pass -> yellow).
RUNS: dict[str, dict[tuple[int, int], Change]] = {
    "v1": {(1, 1): {LINEAR1_OUT: {"Max": 3.0}}, (2, 0): {RELU_OUT: {"Max": 1.25}}},
    "v2": {(1, 1): {LINEAR1_OUT: {"Max": 3.0}}, (2, 0): {RELU_OUT: {"Max": 3.0}},
           (0, 1): {LINEAR0_OUT: {"Max": 1.25}}},
}


def tensor(shape: list[int], seed: int) -> dict[str, Any]:
    """One tensor argument in msprobe's statistics format (exact binary fractions)."""
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape,
            "Max": 2.0 + seed / 8, "Min": -1.0 - seed / 16, "Mean": 1.0 + seed / 32,
            "Norm": 4.0 + seed / 4, "requires_grad": False}


def model_dump(step: int, rank: int, change: Change, drift: bool) -> dict[str, Any]:
    """dump.json of one step and rank: ``change`` scales stats, ``drift`` shifts linear.1's Mean."""
    data: dict[str, Any] = {}
    seed = 0
    for op, (inputs, outputs) in MODEL.items():
        entry: dict[str, Any] = {"input_args": [], "input_kwargs": {}, "output": []}
        for io, shapes in (("input", inputs), ("output", outputs)):
            for i, shape in enumerate(shapes):
                arg = tensor(shape, seed + rank)
                seed += 1
                for stat, factor in change.get((op, io, i), {}).items():
                    arg[stat] *= factor
                if drift and (op, io, i) == LINEAR1_OUT:
                    arg["Mean"] += 0.125 * step
                entry["input_args" if io == "input" else "output"].append(arg)
        data[op] = entry
    return {"task": "statistics", "level": "L1", "dump_data_dir": None, "data": data}


def write_json(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def build_roots(base: Path) -> dict[str, Path]:
    """Dump roots bench/, v1/, v2/ (step*/rank*/dump.json) and compare_<label>.json per run."""
    for step in STEPS:
        for rank in RANKS:
            where = f"step{step}/rank{rank}/dump.json"
            write_json(base / "bench" / where, model_dump(step, rank, {}, drift=False))
            for label, run in RUNS.items():
                write_json(base / label / where, model_dump(step, rank, run.get((step, rank), {}),
                                                            drift=True))
    return {label: write_json(base / f"compare_{label}.json",
                              {"npu_path": str(base / label), "bench_path": str(base / "bench")})
            for label in RUNS}


def single_card(base: Path, change: Change | None = None,
                extra: dict[str, Any] | None = None) -> Path:
    """A one-card compare.json (NPU and bench of step0/rank0); ``extra`` adds ops to both sides."""
    npu, bench = model_dump(0, 0, change or {}, drift=False), model_dump(0, 0, {}, drift=False)
    for doc in (npu, bench):
        doc["data"].update(extra or {})
    npu_path = write_json(base / "npu" / "step0" / "rank0" / "dump.json", npu)
    bench_path = write_json(base / "bench" / "step0" / "rank0" / "dump.json", bench)
    return write_json(base / "compare.json",
                      {"npu_path": str(npu_path), "bench_path": str(bench_path)})


def msq_cmd(*args: str, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The real ``msq`` command in a fresh process."""
    return subprocess.run([sys.executable, "-m", "msq.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, check=False)


def sql(db: Path, query: str, *extra: str) -> str:
    """``msq sql`` in-process; returns stdout (asserting exit status 0)."""
    result = CliRunner().invoke(main, ["sql", query, "--db", str(db), *extra])
    assert result.exit_code == 0, result.output + (result.stderr or "")
    return result.stdout


def csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(text.splitlines()))


# --------------------------------------------------------------------------------------------
# the shared database: two labelled runs of 6 compares each


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("history")
    jsons = build_roots(base)
    db = base / "hist.duckdb"
    # both runs at once: two msq processes (each with a pool of workers) share one database
    procs = [subprocess.Popen(
        [sys.executable, "-m", "msq.cli", "compare", str(compare_json), "-o",
         str(base / f"out_{label}"), "--db", str(db), "--label", label, "--format", "csv", "-c"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for label, compare_json in jsons.items()]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    return db


def test_sql_csv_keeps_formula_like_texts_from_being_evaluated(hist: Path) -> None:
    text = sql(hist, "SELECT '=HYPERLINK(\"x\")' AS f, '@SUM(A1)' AS a, '-3' AS n, -2.5 AS d, "
                     "'a;=1+1' AS s", "--format", "csv")
    assert text.splitlines()[1] == '"\'=HYPERLINK(""x"")","\'@SUM(A1)","-3","-2.5","a;=1+1"'
    assert csv_rows(text)[1] == ["'=HYPERLINK(\"x\")", "'@SUM(A1)", "-3", "-2.5", "a;=1+1"]


def test_every_compare_of_both_runs_is_recorded(hist: Path) -> None:
    rows = csv_rows(sql(hist, "SELECT label, step, rank, mode, n_rows, n_matched FROM compares "
                              "ORDER BY label, step, rank", "--format", "csv"))
    assert rows[0] == ["label", "step", "rank", "mode", "n_rows", "n_matched"]
    assert rows[1:] == [[label, str(s), str(r), "statistics", "13", "13"]
                        for label in ("v1", "v2") for s in STEPS for r in RANKS]


def test_op_trend_of_one_op_across_steps(hist: Path) -> None:
    out = sql(hist, "SELECT step, rank, mean_diff, max_diff, mark FROM op_trend "
                    "WHERE label = 'v1' AND npu_name = 'Functional.linear.1.forward.output.0' "
                    "ORDER BY step, rank", "--format", "csv")
    assert csv_rows(out) == [["step", "rank", "mean_diff", "max_diff", "mark"],
                             ["0", "0", "0.0", "0.0", ""], ["0", "1", "0.0", "0.0", ""],
                             ["1", "0", "0.125", "0.0", ""], ["1", "1", "0.125", "6.5", "red"],
                             ["2", "0", "0.25", "0.0", ""], ["2", "1", "0.25", "0.0", ""]]


def test_first_divergent_row_per_rank(hist: Path) -> None:
    out = sql(hist, "SELECT rank, step, out_seq, npu_name, reason FROM first_divergence "
                    "WHERE label = 'v2' "
                    "QUALIFY row_number() OVER (PARTITION BY rank ORDER BY step) = 1 "
                    "ORDER BY rank", "--format", "csv")
    assert csv_rows(out) == [
        ["rank", "step", "out_seq", "npu_name", "reason"],
        ["0", "2", "5", "Functional.relu.0.forward.output.0", "red: max relative error"],
        ["1", "1", "9", "Functional.linear.1.forward.output.0", "red: max relative error"]]
    # v1 diverges in one compare only: the relu row of step2/rank0 is yellow, not divergent
    out = sql(hist, "SELECT label, step, rank, npu_name, result FROM first_divergence "
                    "WHERE label = 'v1'", "--format", "csv")
    assert csv_rows(out)[1:] == [
        ["v1", "1", "1", "Functional.linear.1.forward.output.0", "Warning"]]


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
        ("v2", "statistics", "1", "0", "13", "0", "1", "NULL"),
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
    text = (Path(__file__).resolve().parents[1] / "docs" / "schema.md").read_text(encoding="utf-8")
    return re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)


def test_docs_schema_examples_run(hist: Path) -> None:
    queries = doc_queries()
    assert len(queries) >= 8
    for query in queries:
        table = history.query(hist, query)
        assert table.columns, query
        assert table.rows, f"no rows from the docs/schema.md example:\n{query}"


def test_docs_schema_documents_every_table_and_view(hist: Path) -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "schema.md").read_text(encoding="utf-8")
    con = duckdb.connect(str(hist), read_only=True)
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() UNION ALL "
            "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
        columns = con.execute("SELECT table_name, column_name FROM information_schema.columns "
                              "WHERE table_name IN ('compares', 'result_rows')").fetchall()
    finally:
        con.close()
    assert sorted(names) == ["compares", "first_divergence", "meta", "op_trend", "regressions",
                             "result_rows", "runs"]
    for name in names:
        assert f"### `{name}`" in text
    missing = [f"{t}.{c}" for t, c in columns if f"`{c}`" not in text]
    assert not missing, f"columns not in docs/schema.md: {missing}"


# --------------------------------------------------------------------------------------------
# single compares: where the database goes, versions, atomicity


def run_api(compare_json: Path, out: Path, **kwargs: Any) -> Any:
    doc = json.loads(compare_json.read_text())
    return msq.compare({"npu_json_path": doc["npu_path"], "bench_json_path": doc["bench_path"]},
                       out, formats="csv", auto_analyze=False, **kwargs)


def count(db: Path, query: str = "SELECT count(*) FROM compares") -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute(query).fetchall()[0][0])
    finally:
        con.close()


def test_default_database_is_in_the_output_directory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MSQ_DB", raising=False)
    cj = single_card(tmp_path, {LINEAR1_OUT: {"Max": 3.0}})
    run_api(cj, tmp_path / "out", label="first")
    db = tmp_path / "out" / "msq.duckdb"
    assert count(db) == 1
    row = history.query(db, "SELECT label, rank, step, mode, framework, fuzzy, stack, compat, "
                            "n_rows, n_red, suspect, msq_version, npu_path FROM compares")
    assert row.rows == [("first", 0, 0, "statistics", "pytorch", False, False, None, 13, 1,
                         "Functional.linear.1.forward.output.0", msq.__version__,
                         str((tmp_path / "npu/step0/rank0/dump.json").absolute()))]
    monkeypatch.setenv("MSQ_DB", str(tmp_path / "env.duckdb"))
    run_api(cj, tmp_path / "out")
    assert count(tmp_path / "env.duckdb") == 1 and count(db) == 1
    run_api(cj, tmp_path / "out", record=False)
    assert count(tmp_path / "env.duckdb") == 1


def test_no_history_flag_writes_no_database(tmp_path: Path) -> None:
    cj = single_card(tmp_path)
    result = CliRunner().invoke(main, ["compare", str(cj), "-o", str(tmp_path / "out"),
                                       "--format", "csv", "--no-history"], env={"MSQ_DB": None})
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "out" / "msq.duckdb").exists()


def test_rank_and_step_come_from_the_dump_path() -> None:
    assert history.parse_rank_step(Path("/d/step3/rank12/dump.json")) == (12, 3)
    assert history.parse_rank_step(Path("/d/step0/rank/dump.json")) == (None, 0)
    assert history.parse_rank_step(Path("/d/step0/dump.json")) == (None, None)
    assert history.parse_rank_step(Path("/d/run/rank1/dump.json")) == (1, None)
    assert history.parse_rank_step(Path("dump.json")) == (None, None)


@pytest.fixture(scope="module")
def one_compare(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A single-card compare.json and a history file holding one compare of it."""
    base = tmp_path_factory.mktemp("one")
    cj = single_card(base / "dumps")
    run_api(cj, base / "out", db=base / "h.duckdb")
    return cj, base / "h.duckdb"


@pytest.fixture
def made(one_compare: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """This test's own copy of the one-compare history file (DuckDB files copy when closed)."""
    cj, template = one_compare
    db = tmp_path / "h.duckdb"
    shutil.copyfile(template, db)
    return cj, db


def set_version(db: Path, version: str) -> None:
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [version])
    con.close()


def test_newer_schema_is_refused_by_name(made: tuple[Path, Path], tmp_path: Path) -> None:
    cj, db = made
    set_version(db, "99")
    with pytest.raises(HistoryError, match=re.escape(f"{db}: history schema version 99 is newer")):
        run_api(cj, tmp_path / "out", db=db)
    result = CliRunner().invoke(main, ["runs", "--db", str(db)])
    assert result.exit_code == 1 and "upgrade msq" in result.stderr
    set_version(db, "1")
    assert count(db) == 1


def test_unknown_databases_are_refused(tmp_path: Path) -> None:
    cj = single_card(tmp_path / "dumps")
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE accounts (id INTEGER)")
    con.close()
    with pytest.raises(HistoryError, match="not an msq history"):
        run_api(cj, tmp_path / "out", db=other)
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database\n" * 200)
    with pytest.raises(HistoryError, match=re.escape(f"{junk}: exists but is not a DuckDB")):
        run_api(cj, tmp_path / "out", db=junk)
    assert junk.read_text() == "not a database\n" * 200
    with pytest.raises(HistoryError, match="no history database here"):
        history.query(tmp_path / "absent.duckdb", "SELECT 1")


def test_older_schema_is_migrated_in_the_same_transaction(made: tuple[Path, Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cj, db = made
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    monkeypatch.setattr(history, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(history, "_migration_folder", lambda: migrations)
    # a broken migration leaves the file as it was
    (migrations / "v2.sql").write_text("ALTER TABLE result_rows ADD COLUMN note VARCHAR;\n"
                                       "ALTER TABLE no_such_table ADD COLUMN x INTEGER;\n")
    with pytest.raises(HistoryError, match="migrating to history schema version 2 failed"):
        run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [("1",)]
    assert count(db) == 1
    (migrations / "v2.sql").write_text(
        "ALTER TABLE result_rows ADD COLUMN note VARCHAR;\n"
        "UPDATE result_rows SET note = 'before v2';\n")
    run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [("2",)]
    assert history.query(db, "SELECT compare_id, count(*), count(note) FROM result_rows "
                             "GROUP BY ALL ORDER BY 1").rows == [(1, 13, 13), (2, 13, 0)]


def test_a_failed_write_leaves_the_database_unchanged(made: tuple[Path, Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cj, db = made
    real = history.prepare_rows
    # the compares row goes in first; a row INSERT that fails must take it back out
    monkeypatch.setattr(history, "prepare_rows",
                        lambda con, mode: real(con, mode) + "\nWHERE error('disk on fire')")
    with pytest.raises(HistoryError, match="history was left unchanged"):
        run_api(cj, tmp_path / "out", db=db)
    assert count(db) == 1 and count(db, "SELECT count(*) FROM result_rows") == 13


def test_formula_and_other_texts_round_trip(tmp_path: Path) -> None:
    kwargs = {"Functional.pad.0.forward": {
        "input_args": [tensor([2, 2], 0)],
        "input_kwargs": {"mode": {"type": "str", "value": "=HYPERLINK(\"x\")"}},
        "output": [tensor([2, 2], 0)]}}
    cj = single_card(tmp_path / "dumps", extra=kwargs)
    db = tmp_path / "h.duckdb"
    run_api(cj, tmp_path / "out", db=db, stack_mode=True)
    rows = history.query(db, "SELECT npu_name, npu_max, npu_max_text, max_diff, max_diff_text "
                             "FROM result_rows WHERE op_name = 'Functional.pad.0.forward' "
                             "ORDER BY out_seq").rows
    assert rows == [("Functional.pad.0.forward.input.0", 2.0, None, 0.0, None),
                    ("Functional.pad.0.forward.input.mode.0", None, '=HYPERLINK("x")', None,
                     "None"),
                    ("Functional.pad.0.forward.output.0", 2.0, None, 0.0, None)]


# --------------------------------------------------------------------------------------------
# two processes, one file


def test_two_msq_processes_record_into_one_database(tmp_path: Path) -> None:
    cj = single_card(tmp_path / "dumps")
    db = tmp_path / "shared.duckdb"
    procs = [subprocess.Popen(
        [sys.executable, "-m", "msq.cli", "compare", str(cj), "-o", str(tmp_path / f"out{i}"),
         "--db", str(db), "--label", f"p{i}", "--format", "csv", "-c"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert history.query(db, "SELECT label, n_rows FROM compares ORDER BY label").rows == [
        ("p1", 13), ("p2", 13)]
    assert count(db, "SELECT count(*) FROM result_rows") == 26


HOLD_LOCK = """
import sys, select, duckdb
con = duckdb.connect(sys.argv[1])
print("locked", flush=True)
select.select([sys.stdin], [], [], 20)   # until told to let go (a line on stdin), at most 20 s
con.close()
"""


class LockHolder(logging.Handler):
    """A process holding the database's write lock until msq logs that it is waiting for it."""

    def __init__(self, db: Path) -> None:
        super().__init__(logging.INFO)
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(db)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"
        self.waiting: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "waiting up to" in message and not self.waiting:
            self.waiting.append(message)
            self.let_go()

    def let_go(self) -> None:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.write("go\n")
            self.proc.stdin.close()

    def __enter__(self) -> LockHolder:  # noqa: PYI034 (typing_extensions is not a dependency)
        logging.getLogger("msq").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("msq").removeHandler(self)
        self.proc.kill()
        self.proc.wait()


def test_a_locked_database_is_waited_for(made: tuple[Path, Path], tmp_path: Path) -> None:
    cj, db = made
    with LockHolder(db) as holder:
        logging.getLogger("msq").setLevel(logging.INFO)
        run_api(cj, tmp_path / "out", db=db)
    assert holder.waiting == [(f"{db}: another process is using the history database; "
                               "waiting up to 60 s")]
    assert count(db) == 2


def test_a_lock_held_too_long_is_one_clear_error(made: tuple[Path, Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cj, db = made
    monkeypatch.setenv("MSQ_DB_TIMEOUT", "0.5")
    with LockHolder(db) as holder:
        holder.waiting.append("do not release")
        with pytest.raises(HistoryError, match=re.escape(f"{db}: the history database is still "
                                                         "locked by another process after 0.5 s")):
            run_api(cj, tmp_path / "out", db=db)
    assert count(db) == 1


def _locked_by_another_process(db: Path) -> bool:
    """Whether another process holds the file (a second process cannot open it to write)."""
    probe = subprocess.run([sys.executable, "-c", "import sys, duckdb; duckdb.connect(sys.argv[1])",
                            str(db)], check=False, capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        assert "lock" in probe.stderr, probe.stderr
    return probe.returncode != 0


@pytest.mark.parametrize("overlap", [True, False])
def test_the_history_file_is_held_during_the_outputs_only_for_compares_that_are_not_huge(
        made: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        overlap: bool) -> None:
    """The rows are inserted while the workbook is written, holding the file; above
    OVERLAP_MAX_ROWS rows (a workbook that takes long) the file is taken only afterwards, so
    that another process waiting for it is not kept waiting for this one's outputs."""
    import threading

    from msq.export import outputs

    cj, db = made
    if not overlap:
        monkeypatch.setattr(history, "OVERLAP_MAX_ROWS", 0)
    rows_in = threading.Event()
    real_wait = history.Recorder._wait_for_row

    def wait_for_row(self: history.Recorder) -> dict[str, Any]:
        rows_in.set()
        return real_wait(self)

    held: list[bool] = []
    real_write = outputs.write_table

    def write_table(*args: Any, **kwargs: Any) -> None:  # run_api writes the CSV only
        if overlap:
            assert rows_in.wait(30), "the rows were not inserted alongside the outputs"
        held.append(_locked_by_another_process(db))
        real_write(*args, **kwargs)

    monkeypatch.setattr(history.Recorder, "_wait_for_row", wait_for_row)
    monkeypatch.setattr(outputs, "write_table", write_table)
    run_api(cj, tmp_path / "out", db=db)
    assert held == [overlap]
    assert count(db) == 2 and rows_in.is_set()


def test_readers_wait_for_a_writer_too(made: tuple[Path, Path], tmp_path: Path) -> None:
    _, db = made
    with LockHolder(db) as holder:
        logging.getLogger("msq").setLevel(logging.INFO)
        table = history.query(db, "SELECT count(*) AS n FROM compares")
    assert holder.waiting and table.rows == [(1,)]


# --------------------------------------------------------------------------------------------
# fixed-width text


def test_render_table_aligns_numbers_and_marks_nulls() -> None:
    text = history.render_table(history.Table(
        ["name", "n", "x"], ["VARCHAR", "BIGINT", "DOUBLE"],
        [("a\tb", 1, 0.5), (None, 12345, float("nan")), ("long name", None, 1e-20)]))
    assert text == ("name       n      x\n"
                    "---------  -----  -----\n"
                    "a\\tb           1    0.5\n"
                    "NULL       12345    nan\n"
                    "long name   NULL  1e-20\n"
                    "(3 rows)\n")
    assert history.render_table(history.Table([], [], [])) == "OK\n"
