"""Reading the history database: ``msq sql`` and ``msq runs`` (read-only).

:func:`query` fetches a result as a :class:`Table` (the CLI renders it as text); :func:`export`
streams it to CSV, JSON or Parquet with DuckDB's own writers.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from msq import db
from msq.errors import HistoryError, UsageError
from msq.history.schema import check_version, stored_version
from msq.history.store import DB_FILE, first_lines, lock_timeout, with_lock_retry


def connect_read(path: Path, timeout: float | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection to an existing history file whose schema this msq understands."""
    if not path.is_file():
        raise HistoryError(f"{path}: no history database here; msq compare records into "
                           f"{DB_FILE} in its output directory: pass that file with --db or MSQ_DB")
    con = with_lock_retry(lambda: duckdb.connect(str(path), read_only=True), path,
                          lock_timeout(timeout))
    catalog = db.scalar(con, "SELECT current_database()")
    try:
        version = stored_version(con, catalog, path)
        if version is None:
            raise HistoryError(f"{path}: an empty DuckDB database, no compare recorded yet")
        check_version(version, path)
    except BaseException:
        con.close()
        raise
    return con


@dataclass
class Table:
    """A query's result, fetched: column names, DuckDB type names and rows."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]


def query(path: Path, sql: str, timeout: float | None = None) -> Table:
    """Run one read-only query against the history file and fetch its rows.

    Args:
        path: the history database.
        sql: the query (the last statement's result is returned).
        timeout: seconds to wait for a locked file.

    Returns:
        The fetched :class:`Table` (empty columns for a statement without a result).
    """
    con = connect_read(path, timeout)
    try:
        rel = _relation(con, sql)
        if rel is None:
            return Table([], [], [])
        return Table(list(rel.columns), [str(t) for t in rel.types], _fetch(rel))
    finally:
        con.close()


def _relation(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.DuckDBPyRelation | None:
    try:
        return con.cursor().sql(sql)
    except duckdb.Error as err:
        raise HistoryError(f"SQL error: {first_lines(err)}") from None


def _fetch(rel: duckdb.DuckDBPyRelation) -> list[tuple[Any, ...]]:
    try:
        return rel.fetchall()
    except duckdb.Error as err:
        raise HistoryError(f"SQL error: {first_lines(err)}") from None


def export(path: Path, sql: str, fmt: str, dest: Path, timeout: float | None = None) -> None:
    """Write a query's result to ``dest`` as CSV (with header), a JSON array or Parquet.

    The rows stream from the query into DuckDB's own writers; ``dest`` appears only when complete.
    """
    if fmt not in ("csv", "json", "parquet"):
        raise UsageError(f"unknown export format {fmt!r}; try one of: csv, json, parquet")
    # CSV: every cell quoted and formula-like texts prefixed, as in compare's CSV (outputs.py)
    options = {"csv": "FORMAT csv, HEADER true, FORCE_QUOTE *", "json": "FORMAT json, ARRAY true",
               "parquet": "FORMAT parquet"}[fmt]
    con = connect_read(path, timeout)
    try:
        rel = _relation(con, sql)
        if rel is None:
            raise HistoryError("SQL error: the statement returns no rows to export; give a query")
        select = _csv_select(rel) if fmt == "csv" else "*"
        con.register("_msq_result", rel.to_arrow_reader())
        with db.atomic_write(dest) as tmp:
            con.execute(f"COPY (SELECT {select} FROM _msq_result) TO {db.quote_str(tmp)} "
                        f"({options})")
    except duckdb.Error as err:
        raise HistoryError(f"SQL error: {first_lines(err)}") from None
    finally:
        con.close()


def _csv_select(rel: duckdb.DuckDBPyRelation) -> str:
    """The result's columns, text columns guarded against formula evaluation in spreadsheets."""
    cols = []
    for name, dtype in zip(rel.columns, rel.types):
        col = db.quote_ident(name)
        cols.append(f"{db.csv_guard(col)} AS {col}" if str(dtype) == "VARCHAR" else col)
    return ", ".join(cols)


def export_text(path: Path, sql: str, fmt: str, timeout: float | None = None) -> str:
    """A query's result as CSV or JSON text (same writer as :func:`export`)."""
    if fmt == "parquet":
        raise UsageError("parquet is binary: write it to a file with -o FILE")
    with tempfile.TemporaryDirectory(prefix="msq-sql-") as tmp:
        out = Path(tmp) / f"result.{fmt}"
        export(path, sql, fmt, out, timeout)
        return out.read_text(encoding="utf-8")


RUNS_QUERY = "SELECT * FROM runs{where} ORDER BY compare_id"


def runs_sql(label: str | None = None) -> str:
    """The query ``msq runs`` prints (optionally one label's compares)."""
    if label is None:
        return RUNS_QUERY.format(where="")
    return RUNS_QUERY.format(where=f" WHERE label = {db.quote_str(label)}")
