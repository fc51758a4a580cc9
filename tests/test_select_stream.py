"""msq.db.SelectStream: a SELECT's Arrow C stream, the same rows as the relation's."""

from __future__ import annotations

from typing import Any

import duckdb

from msq import db
from msq.flatten import arrow_columns

QUERY = ("SELECT i AS out_seq, i::VARCHAR || 'x' AS name, CASE WHEN i % 3 = 0 THEN NULL "
         "ELSE i / 7 END AS value FROM range(300000) t(i)")


class _RelationOnly:
    """A connection without DuckDB 2's ``_submit``: SelectStream falls back to the relation."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def sql(self, text: str) -> Any:
        return self._con.sql(text)


class _OtherSubmit(_RelationOnly):
    """A connection whose ``_submit`` gives something else (another DuckDB's private API)."""

    def _submit(self, *args: Any) -> object:
        return object()


def test_the_stream_scans_as_the_relation_does() -> None:
    con = duckdb.connect()
    other = duckdb.connect()
    try:
        want = con.execute(f"SELECT * FROM ({QUERY}) ORDER BY out_seq").fetchall()
        for source in (con, _RelationOnly(con), _OtherSubmit(con)):
            other.register("streamed", db.SelectStream(source, QUERY))  # type: ignore[arg-type]
            try:
                got = other.execute("SELECT * FROM streamed ORDER BY out_seq").fetchall()
            finally:
                other.unregister("streamed")
            assert got == want
    finally:
        con.close()
        other.close()


def test_arrow_columns_reads_it_as_the_relation() -> None:
    con = duckdb.connect()
    con.execute("SET threads = 1")  # the rows in one order, both times
    try:
        # no NULL number: the bytes under a NULL are undefined (arrow_columns reads them raw)
        query = QUERY.replace("NULL", "-1.5")
        plain = arrow_columns(con.sql(query))
        if plain is None:  # the C helpers are not built: nothing to compare
            return
        assert arrow_columns(db.SelectStream(con, query)) == plain
        assert plain[0] == 300000
    finally:
        con.close()
