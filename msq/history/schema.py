"""The history database's schema: its version, its creation in a new file, and migrations.

The tables are ``sql/history/schema/`` and the views kept in the file ``sql/history/views/``.
``meta.schema_version`` is checked on every open: an older file is migrated with the scripts in
``sql/history/migrate/v<N>.sql`` (inside the writer's transaction), a newer or unknown one is
refused. See docs/schema.md.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import re
from collections.abc import Iterator
from importlib.abc import Traversable
from pathlib import Path

import duckdb

from msq import db
from msq.errors import HistoryError
from msq.history.store import first_lines
from msq.version import VERSION

log = logging.getLogger("msq")

SCHEMA_VERSION = 13

#: The migrations that rewrite every result or blame row (the others add a column or a table, or
#: replace a view: instant at any size)
ROW_REWRITES = frozenset({4, 5, 6, 7, 8, 10, 11, 12, 13})

#: A history of this many result rows or more is told before it is migrated, on stderr: the
#: migration rewrites every row (version 3 to 4: 31M rows took 100 s and 11 GB of memory here)
LARGE_MIGRATION_ROWS = 1_000_000

#: DuckDB's memory limit while a migration rewrites the file (at most; a connection with a lower
#: one keeps it): DuckDB then writes the new table's row groups out as it goes instead of holding
#: them. Uncapped (80 % of RAM), version 4 to 5 peaked at 1,058 MB for 3.1M result rows and grows
#: with them (3 to 4: 11 GB for 31M); capped at 512 MB the same file peaked at 574 MB.
MIGRATION_MEMORY = "1GiB"

_UNITS = {"": 1, "b": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _migration_folder() -> Traversable | Path:
    return db.sql_root() / "history" / "migrate"


def _tables(con: duckdb.DuckDBPyConnection, catalog: str) -> set[str]:
    rows = con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = ?",
                       [catalog]).fetchall()
    views = con.execute("SELECT view_name FROM duckdb_views() WHERE database_name = ? "
                        "AND NOT internal", [catalog]).fetchall()
    return {r[0] for r in rows} | {f"view:{v[0]}" for v in views}


def stored_version(con: duckdb.DuckDBPyConnection, catalog: str, path: Path) -> int | None:
    """The file's schema version; None for an empty database. Refuses unknown databases.

    Args:
        con: a connection where the history file is the catalog ``catalog``.
        catalog: the file's catalog name.
        path: the file, for messages.

    Returns:
        The stored ``schema_version``, or None when the database holds nothing yet.
    """
    names = _tables(con, catalog)
    if not names:
        return None
    if "meta" not in names:
        raise HistoryError(f"{path}: a DuckDB database but not an msq history (no meta table); "
                           "choose another --db")
    value = db.scalar(con, f'SELECT value FROM "{catalog}".main.meta WHERE key = ?',
                    ["schema_version"])
    try:
        return int(value) if value is not None else -1
    except ValueError:
        return -1


def check_version(version: int | None, path: Path) -> None:
    """Refuse a file written by a newer msq (or with an unreadable version)."""
    if version is None or 1 <= version <= SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise HistoryError(f"{path}: history schema version {version} is newer than this msq "
                           f"understands ({SCHEMA_VERSION}); upgrade msq or choose another --db")
    raise HistoryError(f"{path}: unknown history schema version in its meta table; "
                       "choose another --db")


def ensure_schema(con: duckdb.DuckDBPyConnection, catalog: str, path: Path) -> int | None:
    """Create, check or migrate the schema; the caller holds a transaction and ``USE catalog``.

    Returns:
        The schema version the file had; None when it held nothing (the schema was created).
    """
    version = stored_version(con, catalog, path)
    check_version(version, path)
    if version is None:
        db.run_schema(con, "history/schema")
        con.execute("INSERT INTO meta VALUES ('schema_version', ?), ('created_at', ?), "
                    "('created_by', ?)", [str(SCHEMA_VERSION), dt.datetime.now(dt.UTC).isoformat(),
                                          f"msq {VERSION}"])
        return None
    if version < SCHEMA_VERSION:
        if ROW_REWRITES.intersection(range(version + 1, SCHEMA_VERSION + 1)):
            _announce_migration(con, version, path)
        else:
            log.info("%s: migrating the history from schema version %d to %d (its views only)",
                     path, version, SCHEMA_VERSION)
        with memory_capped(con, MIGRATION_MEMORY):
            for target in range(version + 1, SCHEMA_VERSION + 1):
                _migrate(con, target, path)
    return version


def size_bytes(text: str) -> int:
    """Bytes of a DuckDB size setting as DuckDB prints or takes it ('384.0 MiB', '1GiB', '2GB')."""
    found = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", text)
    if not found or found.group(2).lower() not in _UNITS:
        raise ValueError(f"not a DuckDB size: {text!r}")
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])


@contextlib.contextmanager
def memory_capped(con: duckdb.DuckDBPyConnection, cap: str) -> Iterator[None]:
    """DuckDB's memory_limit at most ``cap`` inside the block, then as it was."""
    before = str(db.scalar(con, "SELECT current_setting('memory_limit')"))
    if size_bytes(before) <= size_bytes(cap):
        yield
        return
    con.execute(f"SET memory_limit = '{cap}'")
    yield  # a failed migration aborts the transaction: no SET then, the caller rolls back
    # DuckDB prints the limit rounded ('18.8 GiB'): the default is RESET, not set again
    fresh = duckdb.connect()
    try:
        default = str(db.scalar(fresh, "SELECT current_setting('memory_limit')"))
    finally:
        fresh.close()
    con.execute("RESET memory_limit" if default == before else f"SET memory_limit = '{before}'")


def _announce_migration(con: duckdb.DuckDBPyConnection, version: int, path: Path) -> None:
    """Say that this recording first migrates the file (a warning for a large one: the compare
    then seems to hang for minutes)."""
    rows = int(db.scalar(con, "SELECT count(*) FROM result_rows"))
    level = logging.WARNING if rows >= LARGE_MIGRATION_ROWS else logging.INFO
    log.log(level, "%s: migrating the history from schema version %d to %d before recording "
            "(once; it rewrites its %d result rows: minutes and several GB of memory for tens "
            "of millions)", path, version, SCHEMA_VERSION, rows)


def _migrate(con: duckdb.DuckDBPyConnection, target: int, path: Path) -> None:
    script = _migration_folder() / f"v{target}.sql"
    if not script.is_file():
        raise HistoryError(f"{path}: no migration to history schema version {target} "
                           f"(missing sql/history/migrate/v{target}.sql)")
    try:
        con.execute(script.read_text(encoding="utf-8"))
    except duckdb.Error as err:
        raise HistoryError(f"{path}: migrating to history schema version {target} failed: "
                           f"{first_lines(err)}; the file was left unchanged") from err
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(target)])
    log.info("%s: history schema migrated to version %d", path, target)


def load_views(con: duckdb.DuckDBPyConnection) -> None:
    # Inside a transaction a failed statement aborts it, so no retry-on-missing-view here: the
    # files are loaded in name order and must not depend on a later one.
    for file in db.sql_files("history/views"):
        db.create_view(con, file)
