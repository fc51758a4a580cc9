"""The SQL loader (msq/db.py) and msq's own views: every one binds, in every mode, whether
created bound or deferred; user views replace shipped ones by name.

A compare creates its views with deferred binding (DuckDB binds them when a query first uses
them), so an error in a view file would otherwise surface only in the compare that reaches it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from msq import db, sqlfiles
from msq.errors import SqlFileError

VARIANTS = [
    [mode, rules, *extra] for mode in ("statistics", "md5", "tensor")
    for rules in ("default", "compat") for extra in ([], ["mindspore"])
]


def _views(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return {r[0] for r in rows}


@pytest.mark.parametrize("variants", VARIANTS, ids="+".join)
def test_every_shipped_view_binds(variants: list[str]) -> None:
    bound = db.connect()
    db.run_schema(bound)
    names = db.load_views(bound, variants=variants, defer=False)  # binds each view now
    for name in names:  # and each binds again as a query, over the empty tables
        bound.execute(f'SELECT * FROM "{name}" LIMIT 0').fetchall()
    deferred = db.connect()
    db.run_schema(deferred)
    assert sorted(db.load_views(deferred, variants=variants)) == sorted(names)
    assert _views(deferred) == _views(bound) == set(names)
    for name in names:
        cols = deferred.execute(f'SELECT * FROM "{name}" LIMIT 0').description
        assert cols == bound.execute(f'SELECT * FROM "{name}" LIMIT 0').description, name


def test_shipped_views_are_deferred_where_duckdb_can() -> None:
    con = db.connect()
    db.run_schema(con)
    db.load_views(con, variants=["statistics"])
    if not db.can_defer_binding(con):
        pytest.skip("this DuckDB binds every view at creation")
    # a deferred view is stored unbound: DuckDB reports no column count for it
    unbound = con.execute(
        "SELECT count(*) FROM duckdb_views() WHERE NOT internal AND NOT is_bound"
    ).fetchone()
    assert unbound is not None and unbound[0] > 0


def test_a_user_view_error_is_reported_at_load_with_its_file(tmp_path: Path) -> None:
    (tmp_path / "compare" / "rules").mkdir(parents=True)
    (tmp_path / "compare" / "rules" / "my_rule.sql").write_text(
        "SELECT no_such_column FROM display_rows\n")
    con = db.connect()
    db.run_schema(con)
    with pytest.raises(SqlFileError, match=r"compare/rules/my_rule\.sql: Binder Error"):
        db.load_views(con, user_dirs=[tmp_path], variants=["statistics"])


def test_a_user_view_replaces_the_shipped_one_of_its_name(tmp_path: Path) -> None:
    (tmp_path / "compare" / "reports").mkdir(parents=True)
    (tmp_path / "compare" / "reports" / "advisor_finding.sql").write_text(
        "-- description: mine\nSELECT 'NA' AS line, 'NA' AS suspect, 'none' AS advice\n")
    con = db.connect()
    db.run_schema(con)
    names = db.load_views(con, user_dirs=[tmp_path], variants=["statistics"])
    assert names.count("advisor_finding") == 1
    assert con.execute("SELECT advice FROM advisor_finding").fetchall() == [("none",)]
    assert con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'advisor_finding'"
                       ).fetchall() == [("mine",)]


def test_every_view_file_of_a_view_folder_is_one_bare_select() -> None:
    """One view per file, named by its stem; no stem appears twice in one compare's views."""
    for variants in VARIANTS:
        files, _ = db.view_files(variants=variants)
        assert len({f.name for f in files}) == len(files)
        for file in files:
            first = next(line for line in file.text.splitlines()
                         if line.strip() and not line.lstrip().startswith("--"))
            assert first.lstrip().upper().startswith(("SELECT", "WITH")), file.origin


def test_two_shipped_views_of_one_name_are_refused(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in ("compare/match", "compare/rules"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "same.sql").write_text("SELECT 1 AS x\n")
    monkeypatch.setattr(sqlfiles, "sql_root", lambda: tmp_path)  # where view_files reads
    with pytest.raises(SqlFileError, match=r"sql/compare/rules/same\.sql: a view named same is "
                                           r"also defined in sql/compare/match/same\.sql"):
        db.view_files()


def test_materialize_turns_a_view_into_a_table_of_its_rows() -> None:
    con = db.connect()
    con.execute("CREATE TABLE base AS SELECT range AS i FROM range(5)")
    con.execute("CREATE VIEW twice AS SELECT i, 2 * i AS j FROM base")
    con.execute("CREATE VIEW above AS SELECT j FROM twice WHERE j > 4")  # reads it by name
    db.materialize(con, "twice")
    con.execute("INSERT INTO base VALUES (10)")  # a table now: no longer recomputed
    assert con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall() == [
        ("base",), ("twice",)]
    assert sorted(_views(con)) == ["above"]
    assert con.execute("SELECT j FROM above ORDER BY j").fetchall() == [(6,), (8,)]
    db.materialize(con, "twice")  # a table already: nothing happens
    db.materialize(con, "no_such_view")
    assert con.execute("SELECT count(*) FROM twice").fetchall() == [(5,)]


def test_a_view_that_fails_to_materialize_stays_a_view() -> None:
    con = db.connect()
    con.execute("CREATE TABLE base AS SELECT 1 AS i")
    con.execute("CREATE VIEW broken AS SELECT i FROM base")
    con.execute("DROP TABLE base")  # the view now reads a table that is gone
    with pytest.raises(duckdb.CatalogException, match="base"):
        db.materialize(con, "broken")
    assert _views(con) == {"broken"}
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchall() == [(0,)]
    con.execute("CREATE TABLE base AS SELECT 2 AS i")  # no transaction left open
    db.materialize(con, "broken")
    assert con.execute("SELECT * FROM broken").fetchall() == [(2,)]


def test_a_view_ending_with_a_comment_line_keeps_its_description(tmp_path: Path) -> None:
    (tmp_path / "compare" / "rules").mkdir(parents=True)
    (tmp_path / "compare" / "rules" / "my_rule.sql").write_text(
        "-- description: it's mine\nSELECT 1 AS one\n-- a last note, no newline after it")
    con = db.connect()
    db.run_schema(con)
    db.load_views(con, user_dirs=[tmp_path], variants=["statistics"])
    assert con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'my_rule'"
                       ).fetchall() == [("it's mine",)]
    assert con.execute("SELECT * FROM my_rule").fetchall() == [(1,)]


def test_shipped_files_are_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real = sqlfiles._read_files

    def counted(folder: str, root: Path | None) -> list[sqlfiles.SqlFile]:
        reads.append(folder)
        return real(folder, root)

    monkeypatch.setattr(sqlfiles, "_SHIPPED", {})
    monkeypatch.setattr(sqlfiles, "_read_files", counted)
    first = sqlfiles.sql_files("compare/schema")
    first.clear()  # the caller's own list: the kept files are untouched
    again = sqlfiles.sql_files("compare/schema")
    assert again and again == real("compare/schema", None)
    assert db.sql_file("compare/rules/row_error.sql").text == (
        Path(str(db.sql_root())) / "compare" / "rules" / "row_error.sql").read_text(encoding="utf-8")
    db.sql_file("compare/rules/row_error.sql")
    assert reads == ["compare/schema", "compare/rules"]
