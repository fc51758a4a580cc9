"""The history database: every compare kept in a DuckDB file, for ``msq sql`` and ``msq runs``.

Recording happens from a second connection (a cursor) of the compare's in-memory database, in a
thread (:class:`Recorder`): the history file is ATTACHed and all output rows are written with one
``INSERT ... SELECT`` while the outputs are being written; once they exist the compare's metadata
row follows and the one transaction commits. The file is then detached so that other processes
can take their turn.
DuckDB lets one process at a time open a file for writing; a process that finds the file locked
waits with backoff (``MSQ_DB_TIMEOUT`` seconds, default 60) instead of failing.

The schema lives in ``sql/history_schema/`` (tables), ``sql/history/`` (views kept in the file)
and ``sql/history_record/`` (views over the compare's tables that produce the rows to insert).
``meta.schema_version`` is checked on every open: an older file is migrated with the scripts in
``sql/history_migrate/v<N>.sql``, a newer or unknown one is refused. See docs/schema.md.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import random
import re
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from msq import __version__, db
from msq.errors import HistoryError, SqlFileError, UsageError

if TYPE_CHECKING:
    from msq.config import Options, SingleInput
    from msq.result import CompareResult

log = logging.getLogger("msq")

SCHEMA_VERSION = 1
DB_FILE = "msq.duckdb"
ALIAS = "msq_history"
DEFAULT_TIMEOUT = 60.0
ROW_GROUP_ROWS = 32_768
# Above this many output rows the history is written after the outputs, not alongside them:
# the workbook of 500,000 rows takes ~13 s here, and another process waiting for the file
# (a multi-rank compare) must get it well inside its 60 s.
OVERLAP_MAX_ROWS = 500_000
QUERY_FORMATS = ("table", "csv", "json", "parquet")
T = TypeVar("T")

_RANK = re.compile(r"^rank(\d*)$")
_STEP = re.compile(r"^step(\d+)$")


# --------------------------------------------------------------------------------------------
# where the database is, and how long to wait for it


def resolve_db_path(db_opt: str | Path | None, output_dir: Path | None = None) -> Path:
    """The history file: ``db_opt`` (``--db`` / ``db=``), else ``$MSQ_DB``, else ``msq.duckdb``.

    Args:
        db_opt: the path given by the user, if any.
        output_dir: the compare's output directory (the default's folder); the working directory
            when None (``msq sql``, ``msq runs``).

    Returns:
        The database path (not necessarily existing).
    """
    chosen = db_opt or os.environ.get("MSQ_DB")
    if chosen:
        return Path(chosen)
    return (output_dir or Path(".")) / DB_FILE


def lock_timeout(timeout: float | None = None) -> float:
    """Seconds to wait for a locked database: the argument, else ``$MSQ_DB_TIMEOUT``, else 60."""
    if timeout is not None:
        return timeout
    raw = os.environ.get("MSQ_DB_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"MSQ_DB_TIMEOUT must be a number of seconds, got {raw!r}") from None
    if value < 0:
        raise UsageError(f"MSQ_DB_TIMEOUT must be 0 or more seconds, got {raw!r}")
    return value


def _is_lock_error(err: BaseException) -> bool:
    text = str(err)
    return "Could not set lock" in text or "Conflicting lock" in text


def _first_lines(err: BaseException) -> str:
    """DuckDB's message up to its first blank line (drops the LINE/caret excerpt), on one line."""
    head = str(err).strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in head.splitlines() if line.strip())


def with_lock_retry(action: Callable[[], T], path: Path, timeout: float,
                    stop: threading.Event | None = None) -> T:
    """Run ``action`` (open or ATTACH ``path``), retrying while another process holds its lock.

    Args:
        action: opens the database; raises duckdb.IOException when the file is locked.
        path: the database, for messages.
        timeout: seconds to keep trying.
        stop: set by another thread to give up waiting (raises ``_Aborted``).

    Returns:
        What ``action`` returned.
    """
    deadline = time.monotonic() + timeout
    delay = 0.05
    waited = False
    while True:
        try:
            return action()
        except duckdb.IOException as err:
            if not _is_lock_error(err):
                raise _open_error(path, err) from None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HistoryError(
                    f"{path}: the history database is still locked by another process after "
                    f"{timeout:g} s ({_first_lines(err)}); try again later, raise MSQ_DB_TIMEOUT, "
                    "or record elsewhere with --db / skip with --no-history") from None
            if not waited:
                log.info("%s: another process is using the history database; waiting up to %g s",
                         path, timeout)
                waited = True
            # jitter keeps two waiting processes from retrying in lockstep
            pause = min(remaining, delay * random.uniform(0.5, 1.0))
            if stop is None:
                time.sleep(pause)
            elif stop.wait(pause):
                raise _Aborted
            delay = min(delay * 2, 1.0)
        except duckdb.Error as err:
            raise _open_error(path, err) from None


def _open_error(path: Path, err: BaseException) -> HistoryError:
    text = _first_lines(err)
    if "not a valid DuckDB database" in text:
        return HistoryError(f"{path}: exists but is not a DuckDB database; choose another --db")
    return HistoryError(f"{path}: cannot open the history database: {text}")


# --------------------------------------------------------------------------------------------
# schema: create, check, migrate


def _migration_folder() -> Traversable | Path:
    return db.sql_root() / "history_migrate"


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
    value = _scalar(con, f'SELECT value FROM "{catalog}".main.meta WHERE key = ?',
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


def ensure_schema(con: duckdb.DuckDBPyConnection, catalog: str, path: Path) -> None:
    """Create, check or migrate the schema; the caller holds a transaction and ``USE catalog``."""
    version = stored_version(con, catalog, path)
    check_version(version, path)
    if version is None:
        db.run_schema(con, "history_schema")
        con.execute("INSERT INTO meta VALUES ('schema_version', ?), ('created_at', ?), "
                    "('created_by', ?)", [str(SCHEMA_VERSION), _now().isoformat(),
                                          f"msq {__version__}"])
        return
    for target in range(version + 1, SCHEMA_VERSION + 1):
        _migrate(con, target, path)


def _migrate(con: duckdb.DuckDBPyConnection, target: int, path: Path) -> None:
    script = _migration_folder() / f"v{target}.sql"
    if not script.is_file():
        raise HistoryError(f"{path}: no migration to history schema version {target} "
                           f"(missing sql/history_migrate/v{target}.sql)")
    try:
        con.execute(script.read_text(encoding="utf-8"))
    except duckdb.Error as err:
        raise HistoryError(f"{path}: migrating to history schema version {target} failed: "
                           f"{_first_lines(err)}; the file was left unchanged") from err
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(target)])
    log.info("%s: history schema migrated to version %d", path, target)


def _load_history_views(con: duckdb.DuckDBPyConnection) -> None:
    # Inside a transaction a failed statement aborts it, so no retry-on-missing-view here: the
    # files are loaded in name order and must not depend on a later one.
    for name, body, origin in db.iter_stage("history"):
        db.create_view(con, name, body, origin)


# --------------------------------------------------------------------------------------------
# recording one compare


def parse_rank_step(dump_json: Path) -> tuple[int | None, int | None]:
    """Rank and step from ``.../step<S>/rank<R>/dump.json``; None where absent (or ``rank``)."""
    rank_match = _RANK.match(dump_json.parent.name)
    if not rank_match:
        return None, None
    step_match = _STEP.match(dump_json.parent.parent.name)
    rank = int(rank_match.group(1)) if rank_match.group(1) else None
    return rank, (int(step_match.group(1)) if step_match else None)


def _mapping_text(value: Any) -> str | None:
    if value is None or value is False:
        return None
    if value is True:
        return "builtin"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _abs(path: Path | None) -> str | None:
    return None if path is None else str(Path(path).absolute())


@dataclass
class RecordContext:
    """What is known about a compare besides its tables: inputs, options, result, timing."""

    inp: SingleInput
    opts: Options
    result: CompareResult
    output_dir: Path
    started: float
    framework: str


def compare_row(ctx: RecordContext, con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The ``compares`` row of one compare (without its id)."""
    rank, step = parse_rank_step(Path(ctx.inp.npu_json))
    cross = _scalar(con, "SELECT cross_framework FROM settings")
    res, opts = ctx.result, ctx.opts
    return {
        "started_at": dt.datetime.fromtimestamp(ctx.started, dt.timezone.utc),
        "seconds": round(time.time() - ctx.started, 3),
        "label": opts.label, "mode": res.mode, "framework": ctx.framework,
        "compat": opts.compat, "fuzzy": opts.fuzzy_match, "stack": opts.stack_mode,
        "auto_analyze": opts.auto_analyze, "cross_framework": bool(cross),
        "data_mapping": _mapping_text(opts.data_mapping),
        "api_mapping": _mapping_text(opts.api_mapping),
        "cell_mapping": _mapping_text(opts.cell_mapping),
        "layer_mapping": _mapping_text(opts.layer_mapping),
        "npu_path": _abs(ctx.inp.npu_json), "bench_path": _abs(ctx.inp.bench_json),
        "stack_path": _abs(ctx.inp.stack_json), "rank": rank, "step": step,
        "msq_version": __version__, "output_dir": _abs(ctx.output_dir),
        "files": [_abs(f) for f in res.files], "n_rows": res.rows, "n_matched": res.matched,
        "n_npu_only": res.unmatched_npu, "n_bench_only": res.unmatched_bench,
        "n_red": res.red, "n_yellow": res.yellow,
        "suspect_line": None if res.suspect_line == "NA" else int(res.suspect_line),
        "suspect": None if res.suspect == "NA" else res.suspect,
    }


class _Aborted(Exception):
    """The compare stopped (an error or Ctrl-C in the main thread): roll the history back."""


class Recorder:
    """Records one compare into the history file from a thread, while its outputs are written.

    Inserting every output row costs about a second per 100,000 rows and runs on one core, as
    does most of writing the workbook; DuckDB releases the GIL, so the two overlap. The output
    rows go in first; the ``compares`` row, which names the files written and the time taken,
    follows once :meth:`finish` hands it over, and only then is the transaction committed.
    :meth:`abort` (the outputs failed, or Ctrl-C) rolls it back: the file is left as it was.

    The file's lock is taken early only when it is free and the compare is not huge
    (``overlap``): another process then waits for this one's outputs too, which must stay well
    inside its timeout. Otherwise, and when another process holds the file, the rows go in
    after the outputs, and the wait (up to the timeout) starts only then, as it always did.

    The thread owns its own connection (a cursor of the compare's database), where the
    ``hist_result`` view lives; the main thread does not touch that connection.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, mode: str, path: Path,
                 timeout: float | None = None, overlap: bool = True) -> None:
        self.path = path
        self.compare_id: int | None = None
        self._overlap = overlap
        self._cursor = con.cursor()
        self._rows_sql = prepare_rows(self._cursor, mode)
        self._timeout = lock_timeout(timeout)
        self._row: dict[str, Any] | None = None
        self._go = threading.Event()    # set when the compares row is handed over (or on abort)
        self._stop = threading.Event()  # set on abort
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="msq-history", daemon=True)
        self._thread.start()

    def finish(self, row: dict[str, Any]) -> int:
        """Hand over the ``compares`` row (the outputs exist), wait for the commit.

        Returns:
            The new ``compare_id``.
        """
        self._row = row
        self._go.set()
        self._join()
        if self._error is not None:
            raise self._error
        assert self.compare_id is not None
        log.info("recorded compare %d (%d rows) in %s", self.compare_id,
                 row.get("n_rows", 0), self.path)
        return self.compare_id

    def abort(self) -> None:
        """Stop recording and roll back; the history file is left unchanged."""
        self._stop.set()
        self._go.set()
        if self._thread.is_alive():
            with contextlib.suppress(duckdb.Error):  # the thread may have closed it just now
                self._cursor.interrupt()
        self._join()

    def _join(self) -> None:
        # In short waits: a SIGINT that the kernel hands to another thread (this one's, or
        # DuckDB's) still runs Python's handler, in the main thread, within 0.1 s.
        while self._thread.is_alive():
            self._thread.join(0.1)

    # -- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.compare_id = self._record()
        except BaseException as err:  # noqa: BLE001 (re-raised in the main thread by finish())
            self._error = err
        finally:
            self._cursor.close()  # drops the temp view hist_result with it

    def _record(self) -> int:
        if not self.path.parent.is_dir():
            raise HistoryError(f"{self.path}: its folder does not exist; create it or choose "
                               "another --db")
        cur = self._cursor
        self._attach()
        try:
            compare_id = self._write()
            cur.execute(f"CHECKPOINT {ALIAS}")
        finally:
            cur.execute(f"DETACH {ALIAS}")
        return compare_id

    def _attach(self) -> None:
        cur = self._cursor

        def attach() -> None:
            # Row groups of 32,768 rows (not 122,880): a 100,000-row compare then fills whole
            # row groups, which DuckDB compresses and writes while the INSERT runs (alongside
            # the workbook) instead of all at COMMIT. Any row group size reads the same; this
            # costs ~10 % more disk.
            cur.execute(f"ATTACH {db.quote_str(self.path)} AS {ALIAS} "
                        f"(ROW_GROUP_SIZE {ROW_GROUP_ROWS})")

        while self._overlap and not self._go.is_set():
            try:
                attach()
                return
            except duckdb.IOException as err:
                if not _is_lock_error(err):
                    raise _open_error(self.path, err) from None
            except duckdb.Error as err:
                raise _open_error(self.path, err) from None
            self._go.wait(0.2)  # held by another process: look again until the outputs exist
        self._go.wait()
        if self._stop.is_set():
            raise _Aborted
        with_lock_retry(attach, self.path, self._timeout, self._stop)

    def _write(self) -> int:
        cur, path = self._cursor, self.path
        home = _scalar(cur, "SELECT current_database()")
        cur.execute("BEGIN TRANSACTION")
        try:
            cur.execute(f"USE {ALIAS}")
            ensure_schema(cur, ALIAS, path)
            _load_history_views(cur)
            cur.execute(f'USE "{home}"')
            compare_id = int(_scalar(cur, "SELECT coalesce(max(compare_id), 0) + 1 "
                                          f"FROM {ALIAS}.compares"))
            cur.execute(f"INSERT INTO {ALIAS}.result_rows BY NAME "
                        f"SELECT ?::BIGINT AS compare_id, * FROM (\n{self._rows_sql}\n)",
                        [compare_id])
            _insert_compare(cur, compare_id, self._wait_for_row())
            self._before_commit()
            cur.execute("COMMIT")
            return compare_id
        except BaseException as err:
            _rollback(cur, home)
            if isinstance(err, duckdb.Error) and not self._stop.is_set():
                raise HistoryError(f"{path}: could not record the compare ({_first_lines(err)}); "
                                   "the outputs were written, the history was left unchanged"
                                   ) from err
            raise

    def _wait_for_row(self) -> dict[str, Any]:
        self._go.wait()
        if self._stop.is_set() or self._row is None:
            raise _Aborted
        return self._row

    def _before_commit(self) -> None:
        # the last point where an abort still leaves the file unchanged
        if self._stop.is_set():
            raise _Aborted


def start_recording(con: duckdb.DuckDBPyConnection, mode: str, db_opt: str | Path | None,
                    output_dir: Path, rows: int) -> Recorder:
    """Start recording one compare into its history database (``--db``, see
    :func:`resolve_db_path`).

    The output rows are inserted in a thread while the outputs are written (for compares of up
    to ``OVERLAP_MAX_ROWS`` rows); the record is committed only once they exist
    (:meth:`Recorder.finish`).
    """
    return Recorder(con, mode, resolve_db_path(db_opt, output_dir),
                    overlap=rows <= OVERLAP_MAX_ROWS)


def _insert_compare(cur: duckdb.DuckDBPyConnection, compare_id: int,
                    row: dict[str, Any]) -> None:
    cols = ["compare_id", *row]
    cur.execute(f"INSERT INTO {ALIAS}.compares ({', '.join(cols)}) "
                f"VALUES ({', '.join('?' for _ in cols)})", [compare_id, *row.values()])


def _record_sql(name: str) -> tuple[str, str]:
    origin = f"sql/history_record/{name}.sql"
    text = (db.sql_root() / "history_record" / f"{name}.sql").read_text(encoding="utf-8")
    return text.rstrip().rstrip(";"), origin


def prepare_rows(con: duckdb.DuckDBPyConnection, mode: str) -> str:
    """Create the view ``temp.hist_result`` of the compare's rows; return the SELECT to insert.

    The result and marks are tables by now (materialised once for every reader), so the view
    costs nothing to bind; it is temporary, private to ``con``, the recorder's own connection.
    """
    db.run_schema(con, "history_macros")
    ops_sql, ops_origin = _record_sql("hist_row_ops")
    db.create_view(con, "hist_row_ops", ops_sql, ops_origin)
    source, origin = _record_sql(f"hist_source_{mode}")
    try:
        con.execute(f"CREATE OR REPLACE TEMP VIEW hist_result AS {source}")
    except duckdb.Error as err:
        raise SqlFileError(f"{origin}: {err}") from err
    rows_sql, _ = _record_sql(f"hist_rows_{mode}")
    return rows_sql


def _rollback(con: duckdb.DuckDBPyConnection, home: str) -> None:
    for statement in ("ROLLBACK", f'USE "{home}"'):
        try:
            con.execute(statement)
        except duckdb.Error:
            pass


def _scalar(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> Any:
    # fetchall, not fetchone: DuckDB 2 refuses new work while a result is still unfinished
    rows = con.execute(sql, list(params)).fetchall()
    return rows[0][0] if rows else None


# --------------------------------------------------------------------------------------------
# reading: msq sql, msq runs


def connect_read(path: Path, timeout: float | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection to an existing history file whose schema this msq understands."""
    if not path.is_file():
        raise HistoryError(f"{path}: no history database here; msq compare records into "
                           f"{DB_FILE} in its output directory: pass that file with --db or MSQ_DB")
    con = with_lock_retry(lambda: duckdb.connect(str(path), read_only=True), path,
                          lock_timeout(timeout))
    catalog = _scalar(con, "SELECT current_database()")
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
        raise HistoryError(f"SQL error: {_first_lines(err)}") from None


def _fetch(rel: duckdb.DuckDBPyRelation) -> list[tuple[Any, ...]]:
    try:
        return rel.fetchall()
    except duckdb.Error as err:
        raise HistoryError(f"SQL error: {_first_lines(err)}") from None


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
        raise HistoryError(f"SQL error: {_first_lines(err)}") from None
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


def run_sql(path: Path, sql: str, fmt: str = "table", dest: Path | None = None,
            timeout: float | None = None) -> str | None:
    """``msq sql``: the result as text (``dest`` None) or written to ``dest``.

    Args:
        path: the history database.
        sql: the query.
        fmt: table, csv, json or parquet.
        dest: a file to write instead of returning text.
        timeout: seconds to wait for a locked file.

    Returns:
        The text to print, or None when written to ``dest``.
    """
    if fmt not in QUERY_FORMATS:
        raise UsageError(f"unknown format {fmt!r}; try one of: {', '.join(QUERY_FORMATS)}")
    if fmt == "table":
        text = render_table(query(path, sql, timeout))
        if dest is None:
            return text
        dest.write_text(text, encoding="utf-8")
        return None
    if dest is None:
        return export_text(path, sql, fmt, timeout)
    export(path, sql, fmt, dest, timeout)
    return None


RUNS_QUERY = "SELECT * FROM runs{where} ORDER BY compare_id"


def runs_sql(label: str | None = None) -> str:
    """The query ``msq runs`` prints (optionally one label's compares)."""
    if label is None:
        return RUNS_QUERY.format(where="")
    return RUNS_QUERY.format(where=f" WHERE label = {db.quote_str(label)}")


# --------------------------------------------------------------------------------------------
# fixed-width text


def format_value(value: Any) -> str:
    """One cell as text: NULL, shortest round-trip floats, times to the second, escaped newlines."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    text = str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


_NUMERIC = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|"
                      r"UBIGINT|UHUGEINT|FLOAT|DOUBLE|DECIMAL.*)$")


def render_table(table: Table) -> str:
    """A fixed-width text table: header, dashes, rows (numbers right-aligned), row count."""
    if not table.columns:
        return "OK\n"
    cells = [[format_value(v) for v in row] for row in table.rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(table.columns)]
    right = [bool(_NUMERIC.match(t)) for t in table.types]
    lines = [_line(table.columns, widths, [False] * len(widths)),
             _line(["-" * w for w in widths], widths, right)]
    lines += [_line(r, widths, right) for r in cells]
    count = len(table.rows)
    lines.append(f"({count} row{'' if count == 1 else 's'})")
    return "\n".join(lines) + "\n"


def _line(values: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    parts = [v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)]
    return "  ".join(parts).rstrip()


def check_target(db_opt: str | Path | None, output_dir: Path) -> None:
    """A history file that cannot be created would fail the run after the whole compare (the
    outputs written, exit 1): find out before it starts. Schema and locks are checked later, when
    the file is opened."""

    path = resolve_db_path(db_opt, output_dir)
    try:
        _check_db_file(path)
    except OSError as err:  # e.g. a name too long for the file system
        raise HistoryError(f"{str(path)[:200]}: cannot use it as the history database "
                           f"({err.strerror}); choose another --db, or --no-history") from None


def _check_db_file(path: Path) -> None:
    if path.exists():
        if not path.is_file():
            raise HistoryError(f"{path}: is not a file; choose another --db")
        try:
            with open(path, "rb") as handle:
                magic = handle.read(12)[8:]
        except OSError as err:
            raise HistoryError(f"{path}: cannot read the history database ({err.strerror}); "
                               "choose another --db, or --no-history") from None
        if magic != b"DUCK":  # DuckDB's file header: 8 bytes of checksum, then "DUCK"
            raise HistoryError(f"{path}: exists but is not a DuckDB database; choose another --db")
        return
    if not path.parent.is_dir():
        raise HistoryError(f"{path}: its folder does not exist; create it or choose another --db")
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".msq-write-test-"):
            pass
    except OSError as err:
        raise HistoryError(f"{path}: cannot create the history database there ({err.strerror}); "
                           "choose another --db, or --no-history") from None
