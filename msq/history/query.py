"""Reading the history database: ``msq sql`` and ``msq runs`` (read-only).

:func:`query` fetches a result as a :class:`Table` (the CLI renders it as text); :func:`export`
streams it to CSV, JSON or Parquet with DuckDB's own writers.

Read-only holds whatever the query says: DuckDB's own parser splits it into statements and only
reads are run (:func:`check_reads`), on a connection that cannot reach any other file, install or
load an extension, or change its settings (:data:`READ_CONFIG`); the file written with ``-o``
is never the database itself (:func:`check_output`).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from msq import db
from msq.errors import HistoryError, UsageError
from msq.history.schema import check_version, stored_version
from msq.history.store import DB_FILE, first_lines, lock_timeout, with_lock_retry

#: The reading connection reaches no file but the history (no ATTACH, COPY, read_csv; a hard
#: link to the history is another file too), fetches and loads no extension, and its settings
#: cannot be changed back by a query.
READ_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}
_READS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
# PIVOT parses as a MULTI statement (it creates a temporary type first); nothing else does
_PIVOT = re.compile(r"^(\s|--[^\n]*\n|/\*.*?\*/)*PIVOT(_WIDER)?\b", re.IGNORECASE | re.DOTALL)
_KIND = {"LOAD": "INSTALL/LOAD", "MULTI": "multi-part"}


def connect_read(path: Path, timeout: float | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection to an existing history file whose schema this msq understands."""
    if not path.is_file():
        raise HistoryError(f"{path}: no history database here; msq compare records into "
                           f"{DB_FILE} in its output directory: pass that file with --db or MSQ_DB")
    # an absolute name: DuckDB gives "md:", "s3://" ... a meaning of their own
    con = with_lock_retry(lambda: duckdb.connect(str(path.absolute()), read_only=True,
                                                 config=READ_CONFIG), path, lock_timeout(timeout))
    catalog = db.scalar(con, "SELECT current_database()")
    try:
        version = stored_version(con, catalog, path)
        if version is None:
            raise HistoryError(f"{path}: an empty DuckDB database, no compare recorded yet")
        check_version(version, path)
        if version == VIEWS_REPLACED_AT - 1:
            _current_blame_rows(con)
    except BaseException:
        con.close()
        raise
    return con


#: The schema version whose migration replaced a view and rewrote no row (blame_rows, v9.sql):
#: reading a file of the version before it (not migrated: reads never write) puts the current
#: view in front of the stored one, so that the file reads as fast as a migrated one
VIEWS_REPLACED_AT = 9


def read_cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A cursor of a :func:`connect_read` connection, with its temporary views (a cursor is a
    connection of its own: it does not see the temporary objects of the one it came from)."""
    cur = con.cursor()
    if con.execute("SELECT count(*) FROM duckdb_views() WHERE database_name = 'temp' "
                   "AND view_name = 'blame_rows'").fetchall()[0][0]:
        _current_blame_rows(cur)
    return cur


def _current_blame_rows(con: duckdb.DuckDBPyConnection) -> None:
    """A temporary ``blame_rows`` (DuckDB resolves a name in ``temp`` first) with the current
    definition, over a version-8 file's tables: its stored view copies a list of every term into
    each row of a join (a GROUP BY verdict over a 64-pair run: 11.7 s against 0.3 s)."""
    text = db.sql_file(f"history/migrate/v{VIEWS_REPLACED_AT}.sql").text
    head = "CREATE OR REPLACE VIEW blame_rows AS"
    con.execute("CREATE TEMP VIEW blame_rows AS " + text[text.index(head) + len(head):])


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


def check_reads(sql: str) -> None:
    """Refuse anything but read statements (SELECT and its forms, EXPLAIN, PIVOT).

    The statements are told apart by DuckDB's own parser, so a write hidden behind a first
    harmless statement, a comment or odd spacing is found as well.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        raise HistoryError(f"SQL error: {first_lines(err)}") from None
    for statement in statements:
        if statement.type in _READS or (statement.type == duckdb.StatementType.MULTI
                                        and _PIVOT.match(statement.query)):
            continue
        kind = _KIND.get(statement.type.name, statement.type.name)
        raise HistoryError(f"msq sql is read-only: {kind} statements are refused; query the "
                           "history's tables and views with SELECT (docs/schema.md)")


def _relation(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.DuckDBPyRelation | None:
    check_reads(sql)
    try:
        return read_cursor(con).sql(sql)
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
    check_output(path, dest)
    # CSV: every cell quoted and formula-like texts prefixed, as in compare's CSV (outputs.py)
    options = {"csv": "FORMAT csv, HEADER true, FORCE_QUOTE *", "json": "FORMAT json, ARRAY true",
               "parquet": "FORMAT parquet"}[fmt]
    con = connect_read(path, timeout)
    # the history's connection reaches no file: a plain in-memory one writes the result
    writer = duckdb.connect()
    try:
        rel = _relation(con, sql)
        if rel is None:
            raise HistoryError("SQL error: the statement returns no rows to export; give a query")
        select = _csv_select(rel) if fmt == "csv" else "*"
        writer.register("_msq_result", rel.to_arrow_reader())
        with db.atomic_write(dest) as tmp:
            writer.execute(f"COPY (SELECT {select} FROM _msq_result) TO {db.quote_str(tmp)} "
                           f"({options})")
    except duckdb.Error as err:
        raise HistoryError(f"SQL error: {first_lines(err)}") from None
    finally:
        writer.close()
        con.close()


def check_output(path: Path, dest: Path) -> None:
    """Refuse an output file that is the history database or its write-ahead log: by name,
    through a symlink, or as another name (hard link) of the same file."""
    for target in (path, path.with_name(path.name + ".wal")):
        if _same_file(target, dest):
            raise UsageError(f"{dest}: is the history database {path} (or its write-ahead log); "
                             "write the result to another file")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where the names lead
        return os.path.realpath(a) == os.path.realpath(b)


def write_text(path: Path, dest: Path, text: str) -> None:
    """Write a rendered result to ``dest`` (never the database ``path``), atomically."""
    check_output(path, dest)
    with db.atomic_write(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")


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
        with open(out, encoding="utf-8", newline="") as handle:  # a CR in a cell stays a CR
            return handle.read()


RUNS_QUERY = "SELECT * FROM runs{where} ORDER BY compare_id"


def runs_sql(label: str | None = None) -> str:
    """The query ``msq runs`` prints (optionally one label's compares)."""
    if label is None:
        return RUNS_QUERY.format(where="")
    return RUNS_QUERY.format(where=f" WHERE label = {db.quote_str(label)}")
