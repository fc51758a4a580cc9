"""The op dictionary (history schema version 4): each name stored once in ``names``, the rows in
``result_data`` by key, and the view ``result_rows`` giving the same columns and rows as the table
of versions 1-3; a version-3 file with rows is migrated at its next recording."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from msq import history
from msq.history import schema
from tests.history.builders import as_version_3, run_api, single_card, tensor, write_json

OP = "Functional.relu.0.forward.output.0"


def fetch(db: Path, query: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query, params or []).fetchall()
    finally:
        con.close()


def all_rows(db: Path) -> list[tuple[Any, ...]]:
    return fetch(db, "SELECT * FROM result_rows ORDER BY compare_id, out_seq")


def columns(db: Path, table: str) -> list[tuple[str, str]]:
    return fetch(db, "SELECT column_name, data_type FROM duckdb_columns() "
                     "WHERE table_name = ? ORDER BY column_index", [table])


def unmatched_card(base: Path) -> Path:
    """A one-card compare with an NPU-only and a bench-only op: rows with an absent name."""
    cj = single_card(base)
    doc = json.loads(cj.read_text())
    for side, op in (("npu_path", "Functional.gelu.0.forward"),
                     ("bench_path", "Functional.silu.0.forward")):
        dump = Path(doc[side])
        data = json.loads(dump.read_text())
        data["data"][op] = {"input_args": [tensor([4, 4], 3)], "input_kwargs": {},
                            "output": [tensor([4, 4], 5)]}
        write_json(dump, data)
    return cj


@pytest.fixture
def mixed(hist: Path, tmp_path: Path) -> Path:
    """A copy of the two-run history plus a compare with unmatched rows (NULL names)."""
    db = tmp_path / "h.duckdb"
    shutil.copyfile(hist, db)
    run_api(unmatched_card(tmp_path / "dumps"), tmp_path / "out", db=db, label="odd")
    return db


def test_each_name_is_stored_once_and_every_row_keeps_its_names(mixed: Path) -> None:
    n_names, distinct, zero = fetch(mixed, "SELECT count(*), count(DISTINCT name), "
                                           "count(*) FILTER (name_id = 0 AND name IS NULL) "
                                           "FROM names")[0]
    assert n_names == distinct + 1 and zero == 1, "each name once, and 0 the absent name"
    used = fetch(mixed, "SELECT count(DISTINCT n) FROM (SELECT unnest([op_name, npu_name, "
                        "bench_name]) AS n FROM result_rows)")[0][0]
    assert used == distinct
    # the view's inner joins lose no row: every key is in the dictionary
    assert fetch(mixed, "SELECT (SELECT count(*) FROM result_data), "
                        "(SELECT count(*) FROM result_rows)")[0] == (13 * 12 + 17, 13 * 12 + 17)
    absent = fetch(mixed, "SELECT kind, op_name, npu_name, bench_name FROM result_rows "
                          "WHERE npu_name IS NULL OR bench_name IS NULL ORDER BY out_seq")
    assert sorted(absent) == [
        ("bench_only", "Functional.silu.0.forward", None, "Functional.silu.0.forward.input.0"),
        ("bench_only", "Functional.silu.0.forward", None, "Functional.silu.0.forward.output.0"),
        ("npu_only", "Functional.gelu.0.forward", "Functional.gelu.0.forward.input.0", None),
        ("npu_only", "Functional.gelu.0.forward", "Functional.gelu.0.forward.output.0", None)]


def test_a_version_3_file_with_rows_is_migrated_with_every_column(mixed: Path,
                                                                   tmp_path: Path) -> None:
    before_rows, before_cols = all_rows(mixed), columns(mixed, "result_rows")
    trend = ("SELECT label, step, rank, out_seq, max_diff, mark FROM op_trend "
             "WHERE npu_name = ? ORDER BY label, step, rank")
    before_trend = fetch(mixed, trend, [OP])
    before_first = fetch(mixed, "SELECT * FROM first_divergence ORDER BY compare_id")
    as_version_3(mixed)
    assert fetch(mixed, "SELECT table_type FROM information_schema.tables "
                        "WHERE table_name = 'result_rows'") == [("BASE TABLE",)]
    # a reader of the version-3 file (read-only: not migrated) answers as before
    assert history.query(mixed, "SELECT * FROM result_rows ORDER BY compare_id, out_seq"
                         ).rows == before_rows
    assert history.query(mixed, trend.replace("?", f"'{OP}'")).rows == before_trend
    # the next recording migrates it, in its transaction
    run_api(single_card(tmp_path / "again"), tmp_path / "out2", db=mixed, label="after")
    assert fetch(mixed, "SELECT value FROM meta WHERE key = 'schema_version'") == [
        (str(schema.SCHEMA_VERSION),)]
    assert fetch(mixed, "SELECT table_type FROM information_schema.tables "
                        "WHERE table_name = 'result_rows'") == [("VIEW",)]
    after = all_rows(mixed)
    assert after[:len(before_rows)] == before_rows, "every row and column survives"
    assert len(after) == len(before_rows) + 13
    assert columns(mixed, "result_rows") == before_cols
    assert [r for r in fetch(mixed, trend, [OP]) if r[0] != "after"] == before_trend
    assert fetch(mixed, "SELECT * FROM first_divergence WHERE label <> 'after' "
                        "ORDER BY compare_id") == before_first
    assert fetch(mixed, "SELECT count(*) = count(DISTINCT name) + 1 FROM names") == [(True,)]
    # the migration builds what a new file's schema builds
    fresh = tmp_path / "fresh.duckdb"
    run_api(single_card(tmp_path / "new"), tmp_path / "out3", db=fresh)
    for table in ("names", "result_data", "result_rows"):
        assert columns(mixed, table) == columns(fresh, table), table


def test_lookups_by_name_give_the_rows_a_full_filter_gives(mixed: Path) -> None:
    rows = all_rows(mixed)
    names = [c for c, _ in columns(mixed, "result_rows")]
    at = {c: names.index(c) for c in ("op_name", "npu_name", "bench_name")}
    for column, value in (("npu_name", OP), ("op_name", "Functional.linear.1.forward"),
                          ("bench_name", "Functional.silu.0.forward.output.0"),
                          ("npu_name", "no such op")):
        got = fetch(mixed, f"SELECT * FROM result_rows WHERE {column} = ? "
                           "ORDER BY compare_id, out_seq", [value])
        assert got == [r for r in rows if r[at[column]] == value], column
    assert fetch(mixed, "SELECT count(*) FROM result_rows WHERE npu_name IS NULL") == [(2,)]
    both = fetch(mixed, "SELECT count(*) FROM op_trend WHERE npu_name IN (?, ?)",
                 [OP, "Functional.linear.1.forward.output.0"])
    assert both == [(2 * 13,)], "two ops in 12 compares of two runs and the odd one"


def test_a_large_history_is_told_before_its_migration(mixed: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """A migration rewrites every row (minutes for tens of millions): a large history is warned
    of, with its size; a small one only at -v. (Large is made 100 rows here.)"""
    n_rows = len(all_rows(mixed))
    as_version_3(mixed)
    monkeypatch.setattr(schema, "LARGE_MIGRATION_ROWS", 100)
    with caplog.at_level("INFO", logger="msq"):
        run_api(single_card(tmp_path / "again"), tmp_path / "out2", db=mixed, label="after")
    told = [r for r in caplog.records if "migrating the history" in r.getMessage()]
    assert [(r.levelname, f"its {n_rows} result rows" in r.getMessage()) for r in told] == [
        ("WARNING", True)]
    assert str(mixed) in told[0].getMessage()
    monkeypatch.setattr(schema, "LARGE_MIGRATION_ROWS", n_rows + 100)
    small = tmp_path / "small.duckdb"
    shutil.copyfile(mixed, small)
    as_version_3(small)
    caplog.clear()
    with caplog.at_level("INFO", logger="msq"):
        run_api(single_card(tmp_path / "third"), tmp_path / "out3", db=small, label="later")
    assert [r.levelname for r in caplog.records
            if "migrating the history" in r.getMessage()] == ["INFO"]
