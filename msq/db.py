"""DuckDB connection, the one SQL loader, and the helpers every writer shares.

The SQL lives in ``sql/`` (package ``msq.sql``), one folder per job and stage:

* ``compare/schema`` — the compare's tables, types and macros (DDL, executed in file order);
* ``compare/match``, ``compare/shape``, ``compare/rules``, ``compare/reports`` — its views;
* ``kernel`` — the MindSpore kernel compare's views;
* ``history/schema``, ``history/views``, ``history/record`` — the history database.

A view file holds one bare SELECT; its stem is the view name, and a ``-- description:`` header
line becomes the view's catalog comment (in the history's database, and for a user's views:
:func:`load_views` leaves it off msq's own views in a compare's short-lived database). A
sub-folder named after a variant (a mode such as ``statistics``, or ``mindspore``) is loaded only
by the compares that use it. A user's folder
(``--sql-dir``) mirrors this layout and replaces shipped views by name.

The helpers: SQL quoting (:func:`quote_ident`, :func:`quote_str`), the CSV formula guard
(:func:`csv_guard`), bulk loading of Arrow tables (:func:`insert_arrow`), atomic file output
(:func:`atomic_write`; :func:`new_file` when an existing file must never be replaced) and
:func:`scalar`.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import itertools
import os
import re
import stat
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import duckdb

from msq import interrupts, procs
from msq.errors import SqlFileError
from msq.sqlfiles import (  # noqa: F401 (read without duckdb there, for msq/opening.py; re-exported)
    COMPARE_VIEWS,
    SqlFile,
    quote_ident,
    sql_file,
    sql_files,
    sql_root,
    view_files,
    view_statement,
)

if TYPE_CHECKING:
    import pyarrow as pa

_DESCRIPTION = re.compile(r"^--\s*description:\s*(.+)$", re.MULTILINE)


def connect(path: str | Path | None = None, *, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open an in-memory (or file) DuckDB database."""
    con = duckdb.connect(str(path) if path else ":memory:")
    procs.track(con)  # its threads make fork unsafe while it lives (msq/procs.py)
    con.execute("SET enable_progress_bar = false")  # msq prints its own progress, on a TTY only
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    return con


def keep_blocks(con: duckdb.DuckDBPyConnection, size: str) -> None:
    """Have DuckDB keep up to ``size`` of its blocks' memory once used (its block allocator,
    DuckDB 1.3+), for a database that runs the same work again and again: blocks freed and
    allocated again are then not faulted in anew from the system. A DuckDB without the setting
    allocates as before."""
    try:
        con.execute(f"SET block_allocator_memory = '{size}'")
    except duckdb.Error:
        pass


def run_schema(con: duckdb.DuckDBPyConnection, folder: str = "compare/schema") -> None:
    """Execute the DDL files of ``sql/<folder>`` (tables, types, macros) in file-name order."""
    for file in sql_files(folder):
        try:
            con.execute(file.text)
        except duckdb.Error as err:
            raise SqlFileError(f"{file.origin}: {err}") from err


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


def create_view(con: duckdb.DuckDBPyConnection, file: SqlFile, *, defer: bool = False,
                comment: bool = True) -> None:
    """``CREATE OR REPLACE VIEW <file.name> AS <file.body>`` and attach the description comment
    (unless ``comment`` is False).

    ``defer``: skip binding now (DuckDB binds the view when a query uses it). Binding a view
    binds every view under it, so a stack of views costs ~25 ms per view at creation; msq's own
    views are deferred (``tests/sql/test_loader.py`` binds each of them), user views are not, so
    an error in one is reported at load, with its file.
    """
    match = _DESCRIPTION.search(file.text) if comment else None
    # the view and its comment in one round trip (a compare creates two dozen views); the
    # semicolon on a line of its own: the body may end with a -- comment
    described = (f"\n;\nCOMMENT ON VIEW {quote_ident(file.name)} IS "
                 f"{quote_str(match.group(1).strip())}" if match else "")
    try:
        con.execute(view_statement(file, defer=defer and can_defer_binding(con)) + described)
    except duckdb.Error as err:
        raise SqlFileError(f"{file.origin}: {err}") from err


def load_views(con: duckdb.DuckDBPyConnection, folders: Iterable[str] = COMPARE_VIEWS, *,
               user_dirs: Iterable[Path] = (), variants: Iterable[str] = (),
               defer: bool = True, skip: Collection[str] = ()) -> list[str]:
    """Create every view of ``folders`` (see :func:`view_files`); return their names in load order.

    ``defer``: create msq's shipped views without binding them (see :func:`create_view`).
    ``skip``: shipped views not to create (the compare does not read them; see
    :func:`view_files`). Only a user's views get their description as a catalog comment: the
    databases these views live in (a compare's, a kernel compare's) end with the compare, and the
    ``COMMENT ON`` statements were ~0.2 ms a view, a fifth of the views' creation.

    A view may read any other: one whose dependency is not created yet (a user's view, bound at
    load, or any view when ``defer`` is off) is retried after the others, until a pass makes no
    progress; then the first error is reported, with its file.
    """
    pending, users = view_files(folders, user_dirs, variants, skip)
    names: list[str] = []
    while pending:
        failed: list[SqlFile] = []
        first_error: SqlFileError | None = None
        for file in pending:
            try:
                user = file.name in users
                create_view(con, file, defer=defer and not user, comment=user)
                names.append(file.name)
            except SqlFileError as err:
                if not isinstance(err.__cause__, duckdb.CatalogException):
                    raise
                failed.append(file)
                first_error = first_error or err
        if len(failed) == len(pending):
            assert first_error is not None
            raise first_error
        pending = failed
    return names


#: Set while a pool worker's kept database (msq.pair_tables.WorkerDatabase) runs a pair: a
#: materialised view is left under its ``_src_`` name, not dropped, and the database's reset
#: renames it back (~0.2 ms a view) instead of creating it again from its text (~0.9 ms: DuckDB
#: parses it). Elsewhere the compare's database ends with the compare: the view is dropped.
KEEP_SOURCES = False


def source_of(view: str) -> str:
    """The name :func:`materialize` gives ``view`` while its ``select`` runs (quoted): what a
    ``select`` reads the view's rows from."""
    return quote_ident(f"_src_{view}")


def materialize(con: duckdb.DuckDBPyConnection, view: str, select: str | None = None) -> None:
    """Replace a view by a table of its current rows, under the same name (nothing when
    ``view`` is not a view: a table already, or none).

    DuckDB binds a view's SQL each time it is queried, so the views built on this one keep
    working and stop recomputing it: the exporters read the same result several times. The view
    itself is dropped, or, with :data:`KEEP_SOURCES`, left as ``_src_<view>``. ``select``: the
    table's rows from this SELECT instead of the view (the caller's, which gives the same rows:
    msq.pipeline.pair_rows' op_keys from the readers' columns).
    """
    name, src = quote_ident(view), source_of(view)
    drop = "" if KEEP_SOURCES else f"DROP VIEW {src}; "
    rows = select if select is not None else f"SELECT * FROM {src}"
    try:
        # one transaction: a query on another cursor (msq.pipeline materialises on two at once)
        # sees the view or the table, never the moment between; one round trip: a small
        # compare materialises a dozen views, and each statement costs DuckDB ~0.3 ms
        con.execute(f"BEGIN TRANSACTION; ALTER VIEW {name} RENAME TO {src}; "
                    f"CREATE TABLE {name} AS {rows}; {drop}COMMIT")
    except BaseException as err:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        if isinstance(err, duckdb.CatalogException) and not _is_view(con, view):
            return
        raise


def has_table(con: duckdb.DuckDBPyConnection, name: str, *, batched: bool = False) -> bool:
    """``name`` is a table of the compare's database; ``batched``: or its batch's table
    ``batch_<name>`` is (a pair of a batch then reads ``name`` as a view of its rows:
    msq.pipeline.split_batch and pair_views)."""
    names = [name, f"batch_{name}"] if batched else [name]
    return scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name IN (SELECT "
                       "unnest(?::VARCHAR[])) AND database_name = current_database()",
                  [names]) > 0


def _is_view(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return scalar(con, "SELECT count(*) FROM duckdb_views() WHERE view_name = ? AND NOT internal",
                  [name]) > 0


#: Rows in one DuckDB row group (its default ``row_group_size``; the history file sets its own,
#: msq.history.recorder.ROW_GROUP_ROWS): the unit a scan is split by between threads
DEFAULT_ROW_GROUP_ROWS = 122_880


@contextlib.contextmanager
def threads(con: duckdb.DuckDBPyConnection, count: int) -> Iterator[None]:
    """DuckDB's ``threads`` set to ``count`` inside the block (0: left as it is), then back."""
    if count <= 0:
        yield
        return
    before = int(scalar(con, "SELECT current_setting('threads')"))
    if before == count:  # a small compare's database has one thread from the start
        yield
        return
    con.execute(f"SET threads = {int(count)}")
    try:
        yield
    finally:
        with contextlib.suppress(duckdb.Error):
            con.execute(f"SET threads = {before}")


T = TypeVar("T")


def materialize_halves(con: duckdb.DuckDBPyConnection, view: str, column: str,
                       middle: int) -> None:
    """:func:`materialize` on both cores: the rows below ``middle`` in ``column`` and the others
    are computed at once (on two cursors: a compare's tables are smaller than one DuckDB row
    group, so one query runs on one core) into one table under the view's name, in the same
    order as before: the lower half commits first. For a view whose filter on ``column`` DuckDB
    pushes down to its base table (``out_seq``: ``compare_rows``).

    One table, not a view of two halves' union: a query of the union ran its two halves on two
    threads, each with its own sink. The history's insert of the rows then wrote two partial
    row groups, which DuckDB merged again at the record's CHECKPOINT, after the outputs
    (--compat on 100k rows: ~0.2 s of CPU at the compare's very end)."""
    name, src = quote_ident(view), quote_ident(f"_src_{view}")
    col = quote_ident(column)
    # the view renamed (both halves read it), an empty table of its columns under its name
    con.execute(f"BEGIN TRANSACTION; ALTER VIEW {name} RENAME TO {src}; "
                f"CREATE TABLE {name} AS SELECT * FROM {src} WHERE false; COMMIT")
    with interrupts.deferred():  # the thread started and its handle held, or neither
        beside = Beside(con, lambda cur: cur.execute(
            f"INSERT INTO {name} SELECT * FROM {src} WHERE {col} < {int(middle)}"), "half")
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(f"INSERT INTO {name} SELECT * FROM {src} WHERE {col} >= {int(middle)}")
            beside.result()  # the lower half has committed: the upper half's rows follow it
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise
    finally:
        beside.stop()
    if not KEEP_SOURCES:
        con.execute(f"DROP VIEW {src}")


class Beside(Generic[T]):
    """A function of a cursor of ``con`` run in a thread, beside the caller's own queries.

    A compare's tables are smaller than one DuckDB row group (122,880 rows), so each query runs
    on one core; two independent ones run on two. :meth:`result` waits (Ctrl-C still raising in
    the main thread); :meth:`stop` interrupts the query and waits for the thread to end.
    Create it and assign it inside ``interrupts.deferred()``: a Ctrl-C between the thread's
    start and the assignment leaves a thread nobody stops (it logged past the exit line).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, func: Callable[[duckdb.DuckDBPyConnection], T],
                 name: str) -> None:
        self._cursor = con.cursor()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"msq-{name}")
        self._future = self._pool.submit(func, self._cursor)

    def result(self) -> T:
        try:
            return interrupts.result_of(self._future)
        finally:
            self.stop()

    def stop(self) -> None:
        """Interrupt the query (if still running) and wait for the thread to end."""
        with interrupts.deferred():
            if not self._future.done():
                self._cursor.interrupt()
            self._pool.shutdown(wait=True)
            with contextlib.suppress(duckdb.Error):
                self._cursor.close()


# --------------------------------------------------------------------------------------------
# helpers shared by every writer


def quote_str(text: str | Path) -> str:
    """``text`` as a SQL string literal: single quotes, inner single quotes doubled."""
    return "'" + str(text).replace("'", "''") + "'"


def range_case(column: str, ranges: Sequence[tuple[int, int, int]]) -> str:
    """A SQL expression: the key ``k`` of the first of ``ranges`` ((k, first, last), inclusive;
    one of first > last holds nothing) that holds ``column``'s value; NULL where none does (or
    there is none to hold it). Ranges that do not meet are tested by halves (:func:`_halves`): a
    value meets ~log2(n) compares, not a BETWEEN a range up to its own (each a pass of DuckDB's
    CASE over the rows left: a batch's pair of each of its ~170,000 compare rows, ~100
    instructions a row for seven pairs, ~45 by halves)."""
    held = sorted((lo, hi, k) for k, lo, hi in ranges if hi >= lo)
    if not held:
        return "NULL::INTEGER"
    if any(low[1] >= high[0] for low, high in itertools.pairwise(held)):  # first one wins
        whens = " ".join(f"WHEN {column} BETWEEN {lo} AND {hi} THEN {k}"
                         for k, lo, hi in ranges if hi >= lo)
        return f"(CASE {whens} END)"
    return f"(CASE WHEN {column} BETWEEN {held[0][0]} AND {held[-1][1]} THEN " \
           f"{_halves(column, held)} END)"


def _halves(column: str, held: list[tuple[int, int, int]]) -> str:
    """:func:`range_case`'s test of a value between the first of ``held`` (ranges (first, last,
    k), in order, none meeting another) and the last one's last: the key of the range that
    holds it, found by halves; NULL in a gap between two ranges. A range's first is known to
    be reached (the value is at least the first range's first, or not below this range's), its
    last is tested only where a gap follows it."""
    if len(held) == 1:
        return str(held[0][2])
    half = len(held) // 2
    low, high = held[:half], held[half:]
    last = low[-1][1]
    left = _halves(column, low)
    if high[0][0] > last + 1:  # a gap after the lower half: its last range tested
        left = f"CASE WHEN {column} <= {last} THEN {left} END"
    return f"CASE WHEN {column} < {high[0][0]} THEN {left} ELSE {_halves(column, high)} END"


def csv_guard(text: str) -> str:
    """SQL for the text expression ``text`` as a CSV cell that a spreadsheet will not evaluate."""
    # A spreadsheet opening the CSV would evaluate =, +, - or @ at the start of a text cell; a
    # leading tab or CR is prefixed too (OWASP: some readers strip it, then evaluate). A leading
    # apostrophe keeps the cell text. Numbers (e.g. -1.5) are not touched.
    return (f"CASE WHEN TRY_CAST({text} AS DOUBLE) IS NULL "
            f"AND regexp_matches({text}, '^[=+\\-@＝＋－＠\t\r]') "
            f"THEN '''' || {text} ELSE {text} END")


_ARROW_VIEW = "_msq_arrow"


def insert_arrow(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table | Any, *,
                 select: str = "*", by_name: bool = False, create: bool = False) -> None:
    """Load an Arrow table into ``table`` with one ``INSERT ... SELECT`` (never row by row).

    Args:
        con: the connection.
        table: the table to fill (or, with ``create``, to create from the data).
        data: the rows: a pyarrow table, or any object with ``__arrow_c_stream__``
            (msq.flatten.Columns: DuckDB reads it without pyarrow).
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


@dataclass
class NewFile:
    """A file being written by :func:`new_file`: the body writes ``tmp``; ``path`` is the final
    name, known once the block has ended."""

    tmp: Path
    path: Path


@contextlib.contextmanager
def new_file(path: Path, *, mode: int | None = None) -> Iterator[NewFile]:
    """Like :func:`atomic_write`, but never replaces a file: the complete file takes the name
    ``path``, or ``<stem>_2<suffix>``, ``_3``, ... when that is taken (see :func:`publish`).

    Two compares into one folder in the same second name their outputs alike; each keeps its
    own this way, and learns the name it got from ``NewFile.path``.

    In a :func:`staging` block the complete file keeps its temporary name (``NewFile.path``
    stays ``path``), for another process to publish.
    """
    stage = _STAGED.get()
    # a staged file waits under its temporary name for another process to publish it: one
    # process may stage two files of one name meanwhile (two compares of one pair in the same
    # second), so its temporary names are numbered
    unique = "" if stage is None else f"~{next(_STAGED_NUMBERS)}"
    staged = NewFile(path.with_name(f".{path.name}{unique}.{os.getpid()}.tmp"), path)
    kept = False
    try:
        yield staged
        if mode is not None:
            os.chmod(staged.tmp, mode)
        if stage is None:
            staged.path = publish(staged.tmp, path)
        else:
            stage.append(staged)
            kept = True
    finally:
        if not kept:
            staged.tmp.unlink(missing_ok=True)


#: The files :func:`new_file` completed in the current :func:`staging` block (None: outside one)
_STAGED: contextvars.ContextVar[list[NewFile] | None] = contextvars.ContextVar(
    "msq_staged_files", default=None)
#: The numbers of a process's staged temporaries (``.<name>~<n>.<pid>.tmp``)
_STAGED_NUMBERS = itertools.count(1)


@contextlib.contextmanager
def staging() -> Iterator[list[NewFile]]:
    """:func:`new_file` in this block leaves each complete file under its temporary name
    (``.<name>~<n>.<pid>.tmp`` beside ``path``, what :func:`remove_stale_temporaries` removes of a
    killed process) and lists it in the yielded list, unpublished: a pool worker renders a
    pair's files into the output folder so, and the driver publishes each by a rename
    (:func:`publish`), not a copy. The block failing removes the files it staged."""
    staged: list[NewFile] = []
    token = _STAGED.set(staged)
    try:
        yield staged
    except BaseException:
        for file in staged:
            file.tmp.unlink(missing_ok=True)
        raise
    finally:
        _STAGED.reset(token)


_TEMPORARY = re.compile(r"^\.(.+?)(?:~\d+)?\.\d+\.tmp$")


def final_name(path: Path) -> Path:
    """The name a temporary of :func:`new_file` or :func:`atomic_write` is written for (for
    messages); other names as they are."""
    found = _TEMPORARY.match(path.name)
    return path.with_name(found.group(1)) if found else path


#: Suffixes tried before giving up (a folder of 10,000 outputs of one second is not a collision)
MAX_SUFFIX = 10_000


def publish(tmp: Path, path: Path) -> Path:
    """Give the complete file ``tmp`` the first free name of ``path``, ``<stem>_2<suffix>``, ...
    without ever replacing a file; return the name used (``tmp`` is gone then).

    A hard link is created exclusively by the kernel; on a file system without hard links the
    name is reserved with ``O_EXCL`` and the file renamed onto its own reservation.
    """
    for n in range(1, MAX_SUFFIX + 1):
        candidate = path if n == 1 else path.with_name(f"{path.stem}_{n}{path.suffix}")
        try:
            os.link(tmp, candidate)
        except FileExistsError:
            continue
        except OSError as err:
            if err.errno not in _NO_LINKS:
                raise
            if not _reserve(candidate):
                continue
            try:
                os.replace(tmp, candidate)
            except BaseException:
                candidate.unlink(missing_ok=True)  # our own, empty reservation
                raise
            return candidate
        tmp.unlink()
        return candidate
    raise FileExistsError(errno.EEXIST, f"{path} and {MAX_SUFFIX - 1} suffixed names are taken",
                          str(path))


_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS}


def _reserve(path: Path) -> bool:
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    return True


#: A temporary untouched for this long, whose process is gone, is a killed msq's leftover (a
#: live writer, even on another machine sharing the folder, writes its temporary continuously).
STALE_SECONDS = 600
_WRITE_TEST = ".msq-write-test-"


def remove_stale_temporaries(folder: Path, names: Sequence[str],
                             dead: Collection[int] = ()) -> int:
    """Remove what a killed msq left in ``folder``: the ``.<name>.<pid>.tmp`` of outputs whose
    names start with one of ``names`` (and the ``.msq-write-test-`` probes).

    Only regular files owned by this user (never a symlink or a directory), whose process no
    longer runs and which have not been written for :data:`STALE_SECONDS`; those of the pids
    in ``dead`` (workers msq has just killed) at once. Returns how many.
    """
    pattern = re.compile(r"^\.+(?:" + "|".join(re.escape(n) for n in names) + r").*\.(\d+)\.tmp$")
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        found = pattern.match(entry.name)
        if not (found or entry.name.startswith(_WRITE_TEST)):
            continue
        ours = found is not None and int(found.group(1)) in dead
        if found and not ours and process_alive(int(found.group(1))):
            continue
        if _own_file(entry, 0 if ours else STALE_SECONDS):
            with contextlib.suppress(OSError):  # another msq removed it first
                os.unlink(entry.path)
                removed += 1
    return removed


def _own_file(entry: os.DirEntry[str], untouched: float) -> bool:
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
            and time.time() - st.st_mtime >= untouched)


def process_alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a pid msq writes: leave the file alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process (or nonsense): keep
        return True
    return True


class SelectStream:
    """The rows of one SELECT (no parameters) as an Arrow C stream: ``__arrow_c_stream__`` runs
    it on ``con`` and returns the stream's capsule, as a relation's (``con.sql(sql)``) does, for
    msq.flatten.arrow_columns or a ``register()`` on another connection.

    The relation first binds the SELECT to learn its columns (~5 ms of a workbook sheet's query)
    and renders it again in DuckDB's Python layer at each run; DuckDB 2's connection runs the
    text as it is (``_submit``, what the relation calls to run). Elsewhere, or should that call
    not take these arguments, the relation runs it."""

    def __init__(self, con: duckdb.DuckDBPyConnection, sql: str,
                 batch_rows: int | None = None) -> None:
        self._con = con
        self._sql = sql
        self._batch_rows = batch_rows or ARROW_BATCH_ROWS  # rows an Arrow batch (DuckDB 2's call)

    def __arrow_c_stream__(self, requested_schema: object = None) -> Any:
        submit = getattr(self._con, "_submit", None)
        if submit is not None:
            try:
                return submit(self._sql, None, "stream", self._batch_rows).arrow_capsule()
            except (TypeError, AttributeError):  # another signature or result: the public way
                pass
        return self._con.sql(self._sql).__arrow_c_stream__(requested_schema)


#: Rows per Arrow batch of a :class:`SelectStream` (DuckDB 2's default for a relation's stream).
ARROW_BATCH_ROWS = 131_072


def valid_mask(values: pa.Array | pa.ChunkedArray) -> Any:
    """Which of ``values`` are not NULL, as numpy booleans (None: every one), unpacked from their
    validity bitmaps (pyarrow's conversion of booleans costs ~70 instructions a value)."""
    import numpy as np

    if not values.null_count:
        return None
    parts = []
    for chunk in getattr(values, "chunks", [values]):
        bitmap = chunk.buffers()[0]
        if bitmap is None or not chunk.null_count:
            parts.append(np.ones(len(chunk), bool))
            continue
        bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little")
        parts.append(bits[chunk.offset:chunk.offset + len(chunk)].astype(bool))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row of ``sql`` (None when it returns no row)."""
    # fetchall, not fetchone: DuckDB 2 refuses new work while a result is still unfinished
    rows = con.execute(sql, list(params)).fetchall()
    return rows[0][0] if rows else None
