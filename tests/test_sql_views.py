"""msq's own SQL views: every one binds, in every mode, whether created bound or deferred.

A compare creates its views with deferred binding (DuckDB binds them when a query first uses
them), so an error in a view file would otherwise surface only in the compare that reaches it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from msq import db
from msq.errors import SqlFileError

VARIANTS = [
    [mode, *extra] for mode in ("statistics", "md5", "tensor") for extra in ([], ["mindspore"])
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
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "my_rule.sql").write_text("SELECT no_such_column FROM display_rows\n")
    con = db.connect()
    db.run_schema(con)
    with pytest.raises(SqlFileError, match=r"my_rule\.sql"):
        db.load_views(con, user_dirs=[tmp_path], variants=["statistics"])
