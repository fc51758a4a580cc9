"""DuckDB connection, the SQL loader, and the helpers every writer shares.

The helpers: SQL quoting (:func:`quote_ident`, :func:`quote_str`), the CSV formula guard
(:func:`csv_guard`), bulk loading of Arrow tables (:func:`insert_arrow`) and atomic file output
(:func:`atomic_write`).

Every rule is a view kept in its own ``.sql`` file under ``sql/<stage>/`` (the file stem is the view
name, the body a bare SELECT). Stages load in a fixed order because DuckDB binds a view when it is
created (msq's own views are created with deferred binding where DuckDB supports it, which makes
the order matter only for user views). A ``-- description:`` header line becomes the view's
catalog comment.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from msq.errors import SqlFileError

if TYPE_CHECKING:
    import pyarrow as pa

STAGES: tuple[str, ...] = ("match", "rules", "reports")
_DESCRIPTION = re.compile(r"^--\s*description:\s*(.+)$", re.MULTILINE)


def sql_root() -> Traversable:
    """The shipped ``sql/`` folder (live in an editable install, site-packages in a wheel)."""
    return resources.files("msq.sql")


def connect(path: str | Path | None = None, *, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open an in-memory (or file) DuckDB database."""
    con = duckdb.connect(str(path) if path else ":memory:")
    con.execute("SET enable_progress_bar = false")  # msq prints its own progress, on a TTY only
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    return con


def _sql_files(folder: Traversable | Path) -> list[tuple[str, str]]:
    if not folder.is_dir():
        return []
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [(f.name[: -len(".sql")], f.read_text(encoding="utf-8")) for f in files]


def iter_stage(stage: str, user_dirs: Iterable[Path] = (),
               variants: Iterable[str] = ()) -> Iterator[tuple[str, str, str]]:
    """Yield ``(view name, sql text, origin)`` of a stage.

    ``sql/<stage>/*.sql`` always load; ``sql/<stage>/<variant>/*.sql`` only for the variants in
    use (the compare's mode, e.g. ``statistics``), so a view may have one file per mode and a
    compare binds only the views it can use. User folders override shipped files by name.
    """
    chosen: dict[str, tuple[str, str]] = {}
    folders = [("", sql_root() / stage)] + [(v, sql_root() / stage / v) for v in variants]
    for variant, folder in folders:
        for name, text in _sql_files(folder):
            chosen[name] = (text, f"sql/{stage}/{variant + '/' if variant else ''}{name}.sql")
    for user_dir in user_dirs:
        for name, text in _sql_files(Path(user_dir) / stage):
            chosen[name] = (text, str(Path(user_dir) / stage / f"{name}.sql"))
    for name in sorted(chosen):
        text, origin = chosen[name]
        yield name, text, origin


def run_schema(con: duckdb.DuckDBPyConnection, folder: str = "schema") -> None:
    """Execute the ``CREATE TABLE`` files of ``sql/<folder>/`` in file-name order."""
    for name, text in _sql_files(sql_root() / folder):
        try:
            con.execute(text)
        except duckdb.Error as err:
            raise SqlFileError(f"sql/{folder}/{name}.sql: {err}") from err


def can_defer_binding(con: duckdb.DuckDBPyConnection) -> bool:
    """True when this DuckDB creates views ``WITH (DEFER_BINDING)`` (DuckDB 2.0 does)."""
    global _CAN_DEFER
    if _CAN_DEFER is None:
        try:
            con.execute("CREATE OR REPLACE TEMP VIEW _msq_defer_probe WITH (DEFER_BINDING) AS "
                        "SELECT * FROM _msq_no_such_table")
            con.execute("DROP VIEW _msq_defer_probe")
            _CAN_DEFER = True
        except duckdb.Error:
            _CAN_DEFER = False
    return _CAN_DEFER


_CAN_DEFER: bool | None = None


def create_view(con: duckdb.DuckDBPyConnection, name: str, body: str, origin: str, *,
                defer: bool = False) -> None:
    """``CREATE OR REPLACE VIEW name AS body`` and attach the description comment.

    ``defer``: skip binding now (DuckDB binds the view when a query uses it). Binding a view
    binds every view under it, so a stack of views costs ~25 ms per view at creation; msq's own
    views are deferred (``tests/test_sql_views.py`` binds each of them), user views are not, so
    an error in one is reported at load, with its file.
    """
    option = " WITH (DEFER_BINDING)" if defer and can_defer_binding(con) else ""
    try:
        con.execute(f'CREATE OR REPLACE VIEW "{name}"{option} AS\n{body.rstrip().rstrip(";")}')
        match = _DESCRIPTION.search(body)
        if match:
            con.execute(f"COMMENT ON VIEW {quote_ident(name)} IS {quote_str(match.group(1).strip())}")
    except duckdb.Error as err:
        raise SqlFileError(f"{origin}: {err}") from err


def load_stage(con: duckdb.DuckDBPyConnection, stage: str, user_dirs: Iterable[Path] = (),
               variants: Iterable[str] = (), defer: bool = True) -> list[str]:
    """Create every view of one stage; return their names in load order.

    ``defer``: create msq's shipped views without binding them (see :func:`create_view`).

    Views of one stage may read each other: a view whose dependency is not created yet is retried
    after the others, until a pass makes no progress (then the first error is reported).
    """
    user_dirs = list(user_dirs)
    pending = list(iter_stage(stage, user_dirs, variants))
    # a user's view is bound at load, so that an error in it is reported with its file
    users = {name for d in user_dirs for name, _ in _sql_files(Path(d) / stage)}
    names: list[str] = []
    while pending:
        failed: list[tuple[str, str, str]] = []
        first_error: SqlFileError | None = None
        for name, body, origin in pending:
            try:
                create_view(con, name, body, origin, defer=defer and name not in users)
                names.append(name)
            except SqlFileError as err:
                if not isinstance(err.__cause__, duckdb.CatalogException):
                    raise
                failed.append((name, body, origin))
                first_error = first_error or err
        if len(failed) == len(pending):
            assert first_error is not None
            raise first_error
        pending = failed
    return names


def load_views(con: duckdb.DuckDBPyConnection, stages: Iterable[str] = STAGES,
               user_dirs: Iterable[Path] = (), variants: Iterable[str] = (),
               defer: bool = True) -> list[str]:
    """Create the views of several stages in order."""
    names: list[str] = []
    variants = list(variants)
    for stage in stages:
        names.extend(load_stage(con, stage, user_dirs, variants, defer))
    return names


def materialize(con: duckdb.DuckDBPyConnection, view: str) -> None:
    """Replace a view by a table of its current rows, under the same name.

    DuckDB binds a view's SQL each time it is queried, so the views built on this one keep
    working and stop recomputing it: the exporters read the same result several times.
    """
    row = con.execute("SELECT 1 FROM duckdb_views() WHERE view_name = ? AND NOT internal",
                      [view]).fetchone()
    if row is None:
        return
    con.execute(f'ALTER VIEW "{view}" RENAME TO "_src_{view}"')
    con.execute(f'CREATE TABLE "{view}" AS SELECT * FROM "_src_{view}"')
    con.execute(f'DROP VIEW "_src_{view}"')


# --------------------------------------------------------------------------------------------
# helpers shared by every writer


def quote_ident(name: str) -> str:
    """``name`` as a SQL identifier: double quotes, inner double quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def quote_str(text: str | Path) -> str:
    """``text`` as a SQL string literal: single quotes, inner single quotes doubled."""
    return "'" + str(text).replace("'", "''") + "'"


def csv_guard(text: str) -> str:
    """SQL for the text expression ``text`` as a CSV cell that a spreadsheet will not evaluate."""
    # A spreadsheet opening the CSV would evaluate =, +, - or @ at the start of a text cell; a
    # leading tab or CR is prefixed too (OWASP: some readers strip it, then evaluate). A leading
    # apostrophe keeps the cell text. Numbers (e.g. -1.5) are not touched.
    return (f"CASE WHEN TRY_CAST({text} AS DOUBLE) IS NULL "
            f"AND regexp_matches({text}, '^[=+\\-@＝＋－＠\t\r]') "
            f"THEN '''' || {text} ELSE {text} END")


_ARROW_VIEW = "_msq_arrow"


def insert_arrow(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table, *,
                 select: str = "*", by_name: bool = False, create: bool = False) -> None:
    """Load an Arrow table into ``table`` with one ``INSERT ... SELECT`` (never row by row).

    Args:
        con: the connection.
        table: the table to fill (or, with ``create``, to create from the data).
        data: the rows.
        select: the select list over the Arrow columns, e.g. ``"*, disp_name AS match_name"``.
        by_name: match the columns by name instead of by position.
        create: ``CREATE TABLE table AS`` the selection instead of inserting into it.
    """
    con.register(_ARROW_VIEW, data)
    try:
        if create:
            con.execute(f"CREATE TABLE {table} AS SELECT {select} FROM {_ARROW_VIEW}")
        else:
            con.execute(f"INSERT INTO {table}{' BY NAME' if by_name else ''} "
                        f"SELECT {select} FROM {_ARROW_VIEW}")
    finally:
        con.unregister(_ARROW_VIEW)


@contextlib.contextmanager
def atomic_write(path: Path, *, mode: int | None = None) -> Iterator[Path]:
    """Write ``path`` all at once: the body writes the yielded temporary file, which is renamed
    onto ``path`` once the body completes, and removed if it fails (Ctrl-C included).

    The temporary file is ``.<name>.<pid>.tmp`` in the same folder (so the rename stays on one
    file system): a reader never sees a half-written output under its final name.

    Args:
        path: the final file.
        mode: permission bits given to the file before the rename (default: as created).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row of ``sql`` (None when it returns no row)."""
    # fetchall, not fetchone: DuckDB 2 refuses new work while a result is still unfinished
    rows = con.execute(sql, list(params)).fetchall()
    return rows[0][0] if rows else None
