"""One rank x step pair of a directory compare, rendered into its files and rows (worker side).

:func:`compute_pair` runs the compare pipeline of one pair and renders everything it produces,
with the same code as a single-card compare: the workbook (with blame's sheet), CSV, Parquet,
HTML report, advisor and blame files, as bytes (written into a private temporary folder, then
read back; a pool worker's are left in the output folder under temporary names instead,
:func:`compute_pair_shared`), and the pair's history rows (``result_rows``, and blame's
``blame_rows``, ``blame_runs`` and ``blame_edges``) as Arrow tables, from the same SQL as a
single-card compare's recorder. It publishes nothing in the output folder but the ``-lm``
mapping file (which the pair's own compare reads back).

So a pair's work is done where it runs (a process-pool worker with ``--engine local``, a Ray
task with ``--engine ray``), both cores or nodes busy at once; the driver
(:mod:`msq.run_writer`) only publishes the bytes under their names (atomically, never over
another file) and appends the rows to the history, in pair order, the same way for every
engine. Everything returned pickles; Arrow tables travel as Arrow.

Log records of the pair (warnings about its dumps) are kept and handed to the driver, which
logs them in pair order: both engines print the same lines, and a Ray worker's lines are not lost.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from msq import interrupts
from msq.errors import InputError, MsqError

if TYPE_CHECKING:
    import pyarrow as pa

    from msq.config import Options
    from msq.distributed import PairJob
    from msq.export.xlsx import Shapes
    from msq.opening import EarlyDatabase
    from msq.result import CompareResult

log = logging.getLogger("msq")

#: The counts and the advisor finding of a pair (the CompareResult fields the driver copies).
SUMMARY_FIELDS = ("rows", "matched", "unmatched_npu", "unmatched_bench", "red", "yellow",
                  "suspect_line", "suspect", "advice", "suspect_row", "failing", "first_red",
                  "compat", "suspect_reason", "unmatched_reasons", "nothing_compared")


#: Seconds the driver waits for the next pair before the engine calls its ``idle`` (the driver
#: commits the pairs it holds, msq/run_writer.py): pairs that keep coming share transactions,
#: and none stays long uncommitted. Not less: on a loaded machine 24,500-row pairs come ~1-2 s
#: apart, and with 1 s most of them were committed alone (no CPU saved).
IDLE_SECONDS = 10.0


@dataclass
class PairTables:
    """What one pair's compare produced, for the driver to publish and record."""

    mode: str
    framework: str
    started: float                      # time.time() when the pair's compare started
    summary: dict[str, Any]             # SUMMARY_FIELDS
    cross_framework: bool               # the settings row's (the history's compares row)
    #: (file name, content) of each output, in the order a single-card compare writes them;
    #: the content is the bytes, or the path of the complete file a pool worker left in the
    #: output folder under a temporary name (msq.db.staging, :func:`compute_pair_shared`), which
    #: the driver renames into place (msq.export.outputs.place_file; :meth:`release` removes
    #: those not published)
    files: list[tuple[str, bytes | Path]] = field(default_factory=list)
    #: the pair's history rows by history table (result_rows; blame_rows, blame_runs and
    #: blame_edges with blame: blame_rows without what blame_runs' one row holds), without
    #: compare_id; empty without a history
    history: dict[str, pa.Table] = field(default_factory=dict)
    blame: Any = None                   # msq.blame.summary.BlameSummary (None: blame is off)
    logs: list[logging.LogRecord] = field(default_factory=list)
    node: str = ""                      # where it ran (set by the Ray engine)
    #: a pool worker's history rows, handed over in a folder (:func:`compute_pair_shared`):
    #: the folder and the tables (in ``history``'s order); :meth:`take_shared` reads them back
    shared: str = ""
    shared_tables: list[str] = field(default_factory=list)

    def take_shared(self, keep: bool = False) -> None:
        """The history rows a pool worker left in a shared folder, memory-mapped (not copied)
        into ``history``; the folder is removed (the mappings outlive it). The files it left in
        the output folder are checked to be there (a missing one fails the pair here).

        ``keep`` (the driver's): the files stay where they are, for the driver to rename into
        place (msq.export.outputs.place_file: no byte copied; it had copied a 3.4 MB workbook
        from /dev/shm, ~1.7 ms of the kernel's CPU a pair with the worker's write there), and
        :meth:`release` removes those it did not publish. Else they are read into ``files`` and
        removed."""
        if not self.shared:
            return
        import pyarrow as pa

        folder, self.shared = self.shared, ""
        try:
            for path in self._left():
                os.stat(path)
            for table in self.shared_tables:
                with pa.memory_map(os.path.join(folder, f"{table}.arrow")) as source:
                    self.history[table] = pa.ipc.open_file(source).read_all()
            if not keep:
                left = self._left()
                self.files = [(name, data.read_bytes() if isinstance(data, Path) else data)
                              for name, data in self.files]
                for path in left:
                    path.unlink(missing_ok=True)
        except BaseException:
            self.release()
            raise
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def release(self) -> None:
        """Remove the files a pool worker left in the output folder that were not published
        (a pair that failed, or was never taken; those published are gone already)."""
        for path in self._left():
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)

    def _left(self) -> list[Path]:
        return [data for _, data in self.files if isinstance(data, Path)]


@dataclass
class PairFailure:
    """A pair that failed for its own reasons (a broken dump): reported, the others go on."""

    message: str
    logs: list[logging.LogRecord] = field(default_factory=list)
    node: str = ""


def compute_pair(job: PairJob, opts: Options, output_dir: Path,
                 staged: bool = False, kept: bool = False) -> PairTables | PairFailure:
    """Compare one pair into tables; a failure of the pair's own comes back as PairFailure.
    ``staged``: leave the files in ``output_dir`` under temporary names (msq.db.staging; their
    paths in ``files``), not read them back. ``kept``: compare in this process's kept database
    (:class:`WorkerDatabase`, a pool worker's); a pair that fails there, for whatever reason,
    is compared again in a new database, which alone decides its outcome."""
    database = WorkerDatabase.get(opts) if kept else None
    if database is not None:
        with _kept_logs() as records:
            try:
                tables = _compute(job, opts, output_dir, staged, database)
            except Exception:  # noqa: BLE001 (compared again below, in a new database)
                WorkerDatabase.discard()
            else:
                tables.logs = records
                return tables
    with _kept_logs() as records:
        try:
            tables = _compute(job, opts, output_dir, staged)
        except MsqError as err:
            if staged and out_of_room(err):  # the output folder is full
                raise OSError(errno.ENOSPC, f"{output_dir}: {err}") from err
            return PairFailure(f"{job.title}: {err}", records)
    tables.logs = records
    return tables


#: Free bytes a shared folder's filesystem must have for a pool worker to leave a pair's
#: history rows there (~13 MB of Arrow a 24,500-row pair; a few pairs wait for the driver at
#: once; the pair's workbook is staged in the output folder). Less (Docker's default /dev/shm
#: is 64 MB): the rows go through the pool's pipe, as before.
SHARED_MIN_FREE = 512 << 20


def compute_pair_shared(job: PairJob, opts: Options, output_dir: Path) -> PairTables | PairFailure:
    """:func:`compute_pair` in a process-pool worker of the driver's machine: the pair's history
    rows (~13 MB of Arrow a 24,500-row pair) are left in a private folder in shared memory
    (:func:`shared_root`, as Arrow IPC files) instead of going through the pool's pipe pickled:
    the rows take ~9 ms to write and are mapped, not copied, by the driver
    (:meth:`PairTables.take_shared`), against ~36 ms to pickle them, the pipe's copies and
    ~14 ms to unpickle (bench/README, "Session 9: pairs"). Its files (~3.4 MB) are left in the
    output folder under temporary names (msq.db.staging), which the driver renames into place.

    Where there is no such folder, too little room (:data:`SHARED_MIN_FREE`), or the folder
    cannot be made or written (full, read-only), the rows go through the pipe as before (a
    pair whose files could not be written is computed again, its files as bytes). The folders
    of killed workers are removed by the driver (:func:`remove_pair_folders`), their files'
    temporaries too (msq.db.remove_stale_temporaries)."""
    root = shared_root()
    try:
        room = os.statvfs(root)
        enough = room.f_bavail * room.f_frsize >= SHARED_MIN_FREE
    except OSError:
        enough = False
    if not enough:
        return compute_pair(job, opts, output_dir)
    try:
        folder = _new_pair_folder(root)
    except OSError:
        return compute_pair(job, opts, output_dir)
    out: PairTables | PairFailure | None = None
    try:
        try:
            out = compute_pair(job, opts, output_dir, staged=True, kept=True)
        except OSError:  # its files did not fit: rendered again, in a private temporary folder
            shutil.rmtree(folder, ignore_errors=True)
            return compute_pair(job, opts, output_dir)
        if not isinstance(out, PairTables):
            shutil.rmtree(folder, ignore_errors=True)
            return out
        leave_rows(out, folder)
        return out
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        if isinstance(out, PairTables):
            out.release()
        raise


def _new_pair_folder(root: str) -> str:
    """A pool worker's private folder for one pair under ``root`` (see :data:`PAIR_FOLDER`)."""
    with interrupts.deferred():  # the folder is made and named here, or not at all
        return tempfile.mkdtemp(prefix=f"{PAIR_FOLDER}{pid_space()}-{os.getpid()}-", dir=root)


def leave_rows(out: PairTables, folder: str) -> None:
    """Write the pair's history rows into ``folder`` as Arrow IPC files and hand the folder
    over instead (``shared``); where they cannot be written (no room), the folder goes and the
    rows go pickled (its files stay where they were left)."""
    try:
        for table, rows in out.history.items():
            write_table(folder, table, rows)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return
    out.shared, out.shared_tables, out.history = folder, list(out.history), {}


def write_table(folder: str, table: str, rows: pa.Table) -> None:
    """``rows`` (a pair's history rows of ``table``) written into ``folder`` as an Arrow IPC
    file, as :meth:`PairTables.take_shared` reads it."""
    import pyarrow as pa

    with pa.OSFile(os.path.join(folder, f"{table}.arrow"), "wb") as sink, \
            pa.ipc.new_file(sink, rows.schema) as writer:
        writer.write_table(rows)


def out_of_room(err: BaseException) -> bool:
    """Whether ``err`` (an output that could not be written) comes of a full filesystem: an
    ENOSPC or EDQUOT OSError, or DuckDB's errno 28 or 122, in its chain."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if re.search(r'"errno":\s*"(28|122)"', str(seen)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def shared_root() -> str:
    """Where pool workers leave a pair's history rows for the driver: the temporary folder
    when ``TMPDIR`` says where it is (the user's choice), else /dev/shm (memory) where it is a
    writable folder."""
    shm = "/dev/shm"
    if not os.environ.get("TMPDIR") and os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


def _compute(job: PairJob, opts: Options, output_dir: Path, staged: bool,
             database: WorkerDatabase | None = None) -> PairTables:
    from msq.config import SingleInput
    from msq.pipeline import compute
    from msq.tensors_bridge import EarlyMetrics

    inp = SingleInput(job.npu[0], job.bench[0], job.npu[1])
    if not inp.npu_json.is_file() or not inp.bench_json.is_file():
        raise InputError(f"{inp.npu_json} / {inp.bench_json}: both must be dump.json files")
    started = time.time()
    early = con = tables = None
    try:
        with interrupts.deferred():  # a Ctrl-C while the pool starts stops it once it is held
            early = EarlyMetrics.start(inp, opts)
        # the pipeline reads take() and views of a database opened before it: what an
        # EarlyDatabase has, and a WorkerDatabase
        con, mode, framework, result = compute(inp, opts, output_dir, job.suffix, early,
                                               opened=cast("EarlyDatabase | None", database))
        tables = _pair_tables(con, mode, framework, job, opts, result, started,
                              output_dir if staged else None)
        return tables
    finally:
        if early is not None:
            early.cancel()
        if con is not None:
            con.close()
        if database is not None:
            try:
                database.reset()  # raises (the caller discards it) when it cannot be made as new
            except BaseException:
                if tables is not None:  # its files are not handed over: they go
                    tables.release()
                raise


def _pair_tables(con: Any, mode: str, framework: str, job: PairJob, opts: Options,
                 result: CompareResult, started: float, stage: Path | None,
                 rows: dict[str, pa.Table] | None = None) -> PairTables:
    """The pair's summary, files and history rows from its compare's connection ``con``
    (``stage``: the output folder, to leave the files in under temporary names, else they are
    read back; ``rows``: its history rows made already, by table, :func:`_batch_history_rows`).
    """
    from msq import db

    tables = PairTables(
        mode=mode, framework=framework, started=started,
        summary={name: getattr(result, name) for name in SUMMARY_FIELDS},
        cross_framework=bool(db.scalar(con, "SELECT cross_framework FROM settings")),
        blame=result.blame)
    if result.rows and stage is not None:  # left in the output folder for the driver
        tables.files = _staged_files(con, mode, job, opts, result, started, stage)
    elif result.rows:  # rendered in a private temporary folder, read back
        with tempfile.TemporaryDirectory(
                prefix=f"{PAIR_FOLDER}{pid_space()}-{os.getpid()}-") as tmp:
            tables.files = [(Path(path).name, Path(path).read_bytes())
                            for path in _render(con, mode, job, opts, result, started, tmp)]
    try:
        if opts.record:
            tables.history = _history_rows(con, mode, rows)
        if tables.blame is not None:  # the driver keeps it to the run's end: bytes (PackedRows)
            tables.blame = tables.blame.packed()
    except BaseException:
        tables.release()  # the files left: the pair is not handed over
        raise
    return tables


def _staged_files(con: Any, mode: str, job: PairJob, opts: Options, result: CompareResult,
                  started: float, output_dir: Path) -> list[tuple[str, bytes | Path]]:
    """Every output file of the pair, written into ``output_dir`` and left there under its
    temporary name (msq.db.staging: ``.<name>~<n>.<pid>.tmp``) for the driver to rename into
    place: (its name, its temporary's path) each, in :func:`_render`'s order."""
    from msq.db import staging

    with staging() as staged:
        names = [Path(path).name for path in
                 _render(con, mode, job, opts, result, started, str(output_dir))]
        if names != [file.path.name for file in staged]:  # every file of a pair is a new_file
            raise RuntimeError(f"{job.title}: files {names} left as {staged}")  # (removed)
    return [(file.path.name, file.tmp) for file in staged]


def compute_pairs_shared(jobs: list[PairJob], opts: Options, output_dir: Path,
                         ) -> list[PairTables | PairFailure]:
    """:func:`compute_pair_shared` of several pairs in a pool worker, in job order: compared
    as one batch through one set of queries where they can be (:func:`_batch_shared`; a
    pair's fixed cost, ~30 % of a 24,500-row pair's, is paid once a batch), else, or when the
    batch fails for whatever reason (one broken dump), each alone as before: one bad pair
    loses none of the others, and decides its own outcome."""
    if len(jobs) > 1:
        try:
            return _batch_shared(jobs, opts, output_dir)
        except Exception as err:  # noqa: BLE001 (each pair is compared alone below)
            log.debug("batch of %d pairs compared one by one: %s", len(jobs), err)
    return [compute_pair_shared(job, opts, output_dir) for job in jobs]


def _batch_shared(jobs: list[PairJob], opts: Options, output_dir: Path,
                  ) -> list[PairTables | PairFailure]:
    """The pairs of ``jobs`` compared as one batch (msq.pipeline.compute_batch) in this
    worker's kept database, each pair's files and rows left in a shared folder of its own as
    :func:`compute_pair_shared` leaves them. Raises when anything fails (the folders made
    removed, the database discarded): the caller compares the pairs one by one."""
    from msq.config import SingleInput
    from msq.export.outputs import batch_workbook_queries
    from msq.export.xlsx import batch_sheets, same_shapes
    from msq.pipeline import (
        NotBatchable,
        batch_result_rows,
        batch_results,
        compute_batch,
        pair_reads_views,
        split_batch,
    )

    root = shared_root()
    room = os.statvfs(root)
    if room.f_bavail * room.f_frsize < SHARED_MIN_FREE * len(jobs):
        raise NotBatchable(f"{root}: too little room for {len(jobs)} pairs")
    database = WorkerDatabase.get(opts)
    if database is None:
        raise NotBatchable("no kept database")
    inps = [SingleInput(job.npu[0], job.bench[0], job.npu[1]) for job in jobs]
    outs: list[PairTables | PairFailure] = []
    folders: list[str] = []  # the pairs' shared folders, their history rows left in them
    con = None
    try:
        with _kept_logs() as shared_logs:
            con, mode, parts = compute_batch(inps, opts, database)
            rows: list[_LeftRows | None] = [None] * len(parts)
            if opts.record:
                for _ in parts:
                    folders.append(_new_pair_folder(root))
                rows = _batch_history_rows(con, mode, [part.place for part in parts], folders)
            results = batch_results(con, mode, parts, opts)
            types = split_batch(con, mode)
        if any(record.levelno >= logging.WARNING for record in shared_logs):
            raise NotBatchable("a pair's dump warned: its lines are its own compare's")
        # each pair's views are the batch's tables' columns (pair_views): its sheets' column
        # types are the batch queries', and its sheets' rows (main and blame) are its slice of
        # the batch's, fetched once for the batch
        with same_shapes(database.shapes(mode, types)), batch_sheets(batch_workbook_queries(
                mode, [part.place.out_range for part in parts],
                batch_result_rows(mode))) as sheets:
            eager = pair_reads_views(opts)
            views = _PairViews(con, mode, types)
            for job, part, result, pair_rows in zip(jobs, parts, results, rows, strict=True):
                # the pair's views (batch_pair): made first where its outputs read them, else
                # only if one of its sheets cannot be its slice of the batch's rows
                make = functools.partial(views.make, part)
                sheets.pair(part.place.out_range, None if eager else make)
                outs.append(_batch_pair_shared(con, mode, job, part, result, opts, root,
                                               output_dir, pair_rows, make if eager else None))
                views.end()
        con.close()
        con = None
        database.reset()  # raises when it cannot be made as new: the pairs' files go too
    except BaseException:
        for out in outs:
            if isinstance(out, PairTables):
                shutil.rmtree(out.shared, ignore_errors=True)
                out.release()
        for folder in folders:  # those of the pairs not handed over yet
            shutil.rmtree(folder, ignore_errors=True)
        WorkerDatabase.discard()
        raise
    finally:
        if con is not None:
            con.close()
    return outs


class _PairViews:
    """Makes a batch's pair's views (msq.pipeline.batch_pair) and undoes them after the pair
    (msq.pipeline.end_batch_pair), for a pair whose views were made: a pair whose outputs read
    none of them (a workbook-only pair's sheets are slices of the batch's rows,
    msq.export.xlsx.batch_sheets) makes nothing else in the database either (its writers and
    its history rows only read), so the catalog is left as it is without asking it (~4.4 M
    instructions a query, two a pair) or deleting from the schema's tables. The catalog to
    restore is asked before the first pair's views are made."""

    def __init__(self, con: Any, mode: str, types: Any) -> None:
        self.con, self.mode, self.types = con, mode, types
        self.before: tuple[list[str], list[str]] | None = None
        self.made = False  # the current pair's views were made

    def make(self, part: Any) -> None:
        from msq.pipeline import batch_catalog, batch_pair

        if self.before is None:
            self.before = batch_catalog(self.con)
        self.made = True
        batch_pair(self.con, self.mode, part, self.types)

    def end(self) -> None:
        from msq.pipeline import end_batch_pair

        if self.made:
            assert self.before is not None
            end_batch_pair(self.con, self.before)
            self.made = False


@dataclass
class _LeftRows:
    """A batch's pair's history rows, written already into a shared folder of its own
    (:func:`_batch_history_rows`): the folder and its tables (in the order a pair's own
    compare makes them)."""

    folder: str
    tables: list[str]


def _batch_pair_shared(con: Any, mode: str, job: PairJob, part: Any, result: CompareResult,
                       opts: Options, root: str, output_dir: Path,
                       rows: _LeftRows | None = None,
                       views: Callable[[], None] | None = None) -> PairTables:
    """One pair of a batch, its rows left in a shared folder of its own under ``root`` and its
    files in ``output_dir`` under temporary names, its log lines its own (``result``: its
    summary and ``rows``: the folder its history rows were left in already, made for the
    batch at once; None: without a history; ``views``: makes its views,
    msq.pipeline.batch_pair, first; None: they are made on demand, or are made already)."""
    from msq.pipeline import log_setup

    with _kept_logs() as records:
        started = time.time()
        log_setup(mode, opts)  # what a single compare logs of itself
        if views is not None:
            views()
        folder = rows.folder if rows is not None else _new_pair_folder(root)
        tables = None
        try:
            tables = _pair_tables(con, mode, "pytorch", job, opts, result, started, output_dir,
                                  {} if rows is not None else None)
            if rows is not None:
                tables.shared, tables.shared_tables = rows.folder, rows.tables
            else:
                leave_rows(tables, folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            if tables is not None:
                tables.release()
            raise
    tables.logs = records
    return tables


def _list(select: str) -> str:
    """A catalog query's rows as one list value (in its ORDER BY's order), for a subquery."""
    head, _, order = select.partition(" ORDER BY ")
    columns, _, rest = head[len("SELECT "):].partition(" FROM ")
    value = columns if "," not in columns else f"({columns})"
    return f"SELECT list({value} ORDER BY {order}) FROM {rest}"


#: Memory a kept worker database's blocks (its tables' column segments, its hash tables) come
#: from and go back to, never given back to the system (DuckDB's block allocator): a worker
#: takes task after task of the same size, and blocks given back to the allocator between two
#: of them were faulted in again by the next (~160,000 of a root-8x8-5000 run's page faults,
#: for ~70 MB more of the tree's peak: bench/README "Session 26: lead"). What a task needs
#: beyond it comes from the allocator, as before.
WORKER_BLOCK_MEMORY = "384MB"


class WorkerDatabase:
    """A pool worker's compare database, kept from one pair to the next.

    A new in-memory DuckDB database a pair cost ~12 ms to open, ~15 ms for its schema (types,
    macros, tables), ~10 ms for the views every compare reads and ~2 ms to close, and each
    pair's queries then faulted their memory in anew (~60,000 minor page faults a 24,500-row
    pair, ~0.15 s of system time; about half with the database kept). Here the database is
    opened once per worker (:meth:`get`) and each pair gets its own connection to it (a
    cursor: its temporary objects go with it), through the hook single-card compares use for
    a database opened early (``opened`` of :func:`msq.pipeline.compute`: :meth:`take` and
    :attr:`views`). After the pair, :meth:`reset` makes the catalog what a new database's is:
    every table dropped and the schema's table files run again (empty tables, as new), every
    view the pair made or replaced dropped, the early views it turned into tables renamed back
    (a pair's materialisations leave them as ``_src_<view>``: msq.db.KEEP_SOURCES; renaming is
    ~0.2 ms a view, creating one from its text ~0.9 ms, DuckDB's parser) or, had the pair replaced
    them, created again, the macros a pair adds dropped; the views a batch creates beside the
    database's own are kept for the next batch (:meth:`batch_views`). The history's record
    macros are the database's own, made with its schema (the same text every time: a batch
    does not make them again, :func:`_batch_history_rows`).

    Anything unexpected (a pair that fails, a reset that cannot complete or leaves another
    catalog) discards the database (:meth:`discard`): the pair is compared again in a new one,
    as before, and the next pair opens a new kept one. Not with a user's views (``--sql-dir``:
    they may read or replace anything).
    """

    _kept: WorkerDatabase | None = None
    #: the catalog queries of :meth:`reset` (the compare's own database, schema main)
    _VIEWS = ("SELECT view_name, sql FROM duckdb_views() WHERE database_name = current_database() "
              "AND schema_name = 'main' AND NOT internal AND NOT temporary ORDER BY view_name")
    _VIEW_NAMES = _VIEWS.replace("SELECT view_name, sql ", "SELECT view_name ", 1)
    #: each view's catalog oid, by which :meth:`reset` knows the views the database and a batch
    #: made (DuckDB gives a view created or replaced a new oid, never one given before, and a view
    #: renamed keeps its own), not by its text, which DuckDB renders from the view's query each
    #: time it is asked (~11 M instructions a reset for the texts of ~20 views, ~3.5 M without)
    _VIEW_OIDS = _VIEWS.replace("SELECT view_name, sql ", "SELECT view_name, view_oid ", 1)
    #: :meth:`reset`'s catalog: each view's ('v') name and oid and each table's ('t') name, in
    #: one query
    _CATALOG = (_VIEW_OIDS.replace("SELECT view_name,", "SELECT 'v', view_name,", 1)
                .replace(" ORDER BY view_name", "") + " UNION ALL SELECT 't', table_name, NULL "
                "FROM duckdb_tables() WHERE database_name = current_database() "
                "AND schema_name = 'main' AND NOT temporary")
    _TABLES = ("SELECT table_name, sql FROM duckdb_tables() WHERE database_name = "
               "current_database() AND schema_name = 'main' AND NOT temporary ORDER BY table_name")
    _TYPES = ("SELECT type_name FROM duckdb_types() WHERE database_name = current_database() "
              "AND schema_name = 'main' AND NOT internal ORDER BY type_name")
    _MACROS = ("SELECT DISTINCT function_name FROM duckdb_functions() WHERE database_name = "
               "current_database() AND schema_name = 'main' AND NOT internal "
               "AND function_type IN ('macro', 'table_macro') ORDER BY function_name")

    @classmethod
    def get(cls, opts: Options) -> WorkerDatabase | None:
        """This process's kept database for compares of ``opts`` (opened at the first call; a
        kept one of other options is closed); None where none is kept (``--sql-dir``), or it
        could not be opened."""
        if opts.sql_dir or opts.workers != 1:
            return None
        from msq.opening import early_views

        statements = early_views(opts)
        kept = cls._kept
        if kept is not None and kept.statements == statements:
            return kept
        cls.discard()
        try:
            cls._kept = cls(statements)
        except Exception:  # noqa: BLE001 (each pair opens its own database, as before)
            cls._kept = None
        return cls._kept

    @classmethod
    def discard(cls) -> None:
        from msq import db

        db.KEEP_SOURCES = False
        kept, cls._kept = cls._kept, None
        if kept is not None:
            with contextlib.suppress(Exception):
                kept._con.close()

    def __init__(self, statements: dict[str, str]) -> None:
        from msq import db

        self.statements = statements
        #: the views the database holds for each pair (the ``opened`` hook's)
        self.views: set[str] = set(statements)
        self._macros: set[str] = set()  # the macros pairs add (learnt at the first reset)
        #: the views a batch creates beside these (its mode's, unmatched_reasons), kept from
        #: one batch to the next (:meth:`batch_views`): {name: (its statement, its oid)}
        self._batch: dict[str, tuple[str, int]] = {}
        self._learnt = False
        #: what the workbooks' sheets asked of the catalog (:meth:`shapes`), and of which batch
        self._shapes: tuple[str, Any, Shapes] | None = None
        self._con = con = db.connect(threads=1)
        try:
            db.keep_blocks(con, WORKER_BLOCK_MEMORY)
            db.can_defer_binding(con)  # its probe's view made and dropped now, not in a pair
            self._table_files: list[str] = []
            for file in db.sql_files("compare/schema"):  # as db.run_schema
                before = con.execute(self._TABLES).fetchall()
                con.execute(file.text)
                if con.execute(self._TABLES).fetchall() != before:
                    self._table_files.append(file.text)
            for statement in statements.values():
                con.execute(statement)
            # the history's record macros, kept from one batch to the next as the schema's
            # (_batch_history_rows does not make them again: ~20 M instructions a batch)
            db.run_schema(con, "history/record/macros")
            self._views: dict[str, int] = dict(con.execute(self._VIEW_OIDS).fetchall())
            self._catalog = self._snapshot()
            self._template_macros = {m for (m,) in con.execute(self._MACROS).fetchall()}
            self.reset()  # the reset itself must give the same catalog back
            self._learnt = False  # the macros a pair adds: learnt after the first pair
        except BaseException:
            con.close()
            raise

    #: :meth:`_snapshot`'s four lists in one query (one statement, not four: ~2 ms a pair less)
    _SNAPSHOT = (f"SELECT ({_list(_VIEW_NAMES)}), ({_list(_TABLES)}), ({_list(_TYPES)}), "
                 "current_setting('threads')")

    def _snapshot(self) -> tuple[Any, ...]:
        """The catalog as :meth:`reset` checks it: the views' names (their texts are those of
        the same statements), the tables' names and definitions, the types, the thread count."""
        return tuple(self._con.execute(self._SNAPSHOT).fetchall()[0])

    def take(self, threads: int | None) -> Any:
        """A new connection to the database, for one pair (see :class:`EarlyDatabase`); None
        for another thread count than the database's one (the pipeline opens its own)."""
        if threads != 1:
            return None
        from msq import db, procs

        cur = self._con.cursor()
        procs.track(cur)
        cur.execute("SET enable_progress_bar = false")  # as msq.db.connect
        db.KEEP_SOURCES = True  # the views the pair materialises are kept for reset (renamed back)
        return cur

    def batch_views(self, con: Any, statements: dict[str, str]) -> None:
        """Create the views of ``statements`` ({name: its CREATE statement}) on ``con`` (a
        batch's connection, :meth:`take`), but those the database holds from the previous batch
        by the same statement: DuckDB parses a view's text as it creates it, ~60 M instructions
        a 4-pair batch for the statistics mode's views and unmatched_reasons, the same texts
        every batch. :meth:`reset` keeps them as they were created (a view a batch replaced or
        dropped is dropped, and created again by the next batch)."""
        made = [name for name, statement in statements.items()
                if self._batch.get(name, ("", ""))[0] != statement]
        if not made:
            return
        con.execute("\n;\n".join(statements[name] for name in made))
        oids = dict(con.execute(self._VIEW_OIDS).fetchall())
        for name in made:
            self._batch[name] = (statements[name], oids[name])

    def shapes(self, mode: str, types: Any) -> Shapes:
        """What the workbooks of a batch of ``mode`` whose tables' columns are of ``types``
        (msq.pipeline.split_batch's) ask of the catalog (msq.export.xlsx.same_shapes: their
        sheet queries' column types, which of their sources are tables): what the batch before
        asked where it was of the same mode and types, else asked anew. Each batch starts from
        the catalog :meth:`reset` makes as new, and its sheets read its batch tables alone (and
        the settings, the same for the database's options): the same answers every batch, which
        the sheets' DESCRIBEs and the workbook's catalog query (~17 M instructions) gave again
        for each."""
        from msq.export.xlsx import Shapes

        if self._shapes is None or self._shapes[:2] != (mode, types):
            self._shapes = (mode, dict(types), Shapes())
        return self._shapes[2]

    def reset(self) -> None:
        """The catalog made as a new database's again (see the class docstring), but for the
        views a batch keeps (:meth:`batch_views`); raises when it cannot be (the caller then
        discards the database)."""
        from msq import db

        db.KEEP_SOURCES = False
        con = self._con
        catalog = con.execute(self._CATALOG).fetchall()
        views = sorted((name, oid) for kind, name, oid in catalog if kind == "v")
        tables = sorted(name for kind, name, _ in catalog if kind == "t")
        if not self._learnt:  # once: the macros a pair adds
            self._macros = {m for (m,) in con.execute(self._MACROS).fetchall()} \
                - self._template_macros
            self._learnt = True
        kept = {name for name, oid in views if self._views.get(name) == oid}
        batch = {name for name, oid in views if name in self._batch and self._batch[name][1] == oid}
        kept |= batch
        back = self._renamed_back(views, kept)
        self._batch = {name: entry for name, entry in self._batch.items()
                       if name in batch or name in back.values()}
        script = [f"DROP VIEW {db.quote_ident(name)}" for name, _ in views
                  if name not in kept and name not in back]
        script += [f"DROP TABLE {db.quote_ident(name)}" for name in tables]
        script += [f"DROP MACRO IF EXISTS {db.quote_ident(name)}" for name in sorted(self._macros)]
        script += self._table_files
        script += [f"ALTER VIEW {db.quote_ident(src)} RENAME TO {db.quote_ident(name)}"
                   for src, name in back.items()]
        made = kept | set(back.values())
        again = [name for name in self.statements if name not in made]
        script += [self.statements[name] for name in again]
        con.execute("\n;\n".join(script))
        if again:  # the database's own views made again: their new oids
            oids = dict(con.execute(self._VIEW_OIDS).fetchall())
            self._views.update({name: oids[name] for name in again})
        names, *rest = self._catalog
        if self._snapshot() != (sorted({*names, *self._batch}), *rest):
            self._batch = {}
            raise RuntimeError("the kept compare database differs from a new one after its reset")

    def _renamed_back(self, views: list[tuple[str, int]], kept: set[str]) -> dict[str, str]:
        """The views (``views``: name and oid, :data:`_VIEW_OIDS`) the pair materialised and
        left as ``_src_<name>`` (msq.db.KEEP_SOURCES) that are the database's own, renamed (its
        oid): {source: name}, to be renamed back. Any other (a view the pair replaced before
        materialising it) is dropped and the database's own created again from its
        statement."""
        back: dict[str, str] = {}
        for src, oid in views:
            name = src[len("_src_"):] if src.startswith("_src_") else ""
            own = self._views[name] if name in self._views else \
                self._batch[name][1] if name in self._batch else None
            if own is not None and name not in kept and oid == own:
                back[src] = name
        return back


#: The private folder a worker renders a pair's files in:
#: ``<tmp>/msq-pair-<pid namespace>-<pid>-<random>`` (and a pool worker leaves its rows in,
#: ``/dev/shm/msq-pair-...``, :func:`compute_pair_shared`). The driver removes those of the workers it
#: had to kill, and of workers no longer running in its own pid namespace
#: (:func:`remove_pair_folders`): a Ray node in a container of this machine shares /tmp with
#: its own pids.
PAIR_FOLDER = "msq-pair-"


def pid_space() -> str:
    """This process's pid namespace (its inode number; "0" where /proc does not say)."""
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return "0"
    return link.rpartition("[")[2].rstrip("]") or "0"


def _render(con: Any, mode: str, job: PairJob, opts: Options, result: CompareResult,
            started: float, folder: str) -> list[str]:
    """Every output file of the pair, written as a single-card compare writes them, but into
    ``folder`` (private to this pair; the driver publishes them); returns their paths."""
    from msq.blame.export import write_blame_outputs
    from msq.export.outputs import write_outputs
    from msq.pipeline import report_writer

    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(started))
    write_outputs(con, mode, Path(folder), opts, job.suffix, stamp, result,
                  report_writer(con, mode, opts, result))
    if result.blame is not None:
        with _quiet():  # "Blame is in <file>": the driver says it of the file it publishes
            write_blame_outputs(con, Path(folder), opts, job.suffix, stamp, result)
    paths, result.files = [str(path) for path in result.files], []
    return paths


def _history_rows(con: Any, mode: str,
                  rows: dict[str, pa.Table] | None = None) -> dict[str, pa.Table]:
    """The pair's history rows, by history table, from the single-card recorder's SQL
    (``rows``: those made already, :func:`_batch_history_rows`).

    Each SELECT runs as its text (:class:`msq.db.SelectStream`), not through a relation, which
    binds it once more first: ~7-10 ms less a pair, the same batches (bench/README, "Session
    12: pairs")."""
    import pyarrow as pa

    from msq import db
    from msq.history.recorder import prepare_blame, prepare_rows

    if rows is not None:
        return rows
    tables = {"result_rows": bench_once(pa.table(db.SelectStream(con, prepare_rows(con, mode))))}
    for table, sql in prepare_blame(con):
        if table == "blame_rows":
            blame, tables["blame_runs"] = _blame_rows(con, sql)
            tables[table] = blame_names_once(blame, tables["result_rows"])
        else:
            tables[table] = pa.table(db.SelectStream(con, sql))
    return tables


def _blame_rows(con: Any, sql: str, names: bool = True) -> tuple[pa.Table, pa.Table]:
    """Blame's history rows (``sql``: the recorder's SELECT) without what every row of a
    compare shares (``BLAME_RUN_COLUMNS``: the run's id, thresholds and noise source), and
    those once, one row (none without rows): the driver stores them once a compare
    (``blame_runs``), and sending them on every row cost the worker's Arrow export a 32-byte
    run id a row. ``names`` false: without their names too (``BLAME_NAMES``, which the driver
    then takes from their output rows)."""
    import pyarrow as pa

    from msq import db
    from msq.history.recorder import BLAME_NAMES, BLAME_RUN_COLUMNS

    left = ", ".join(BLAME_RUN_COLUMNS if names else (*BLAME_NAMES, *BLAME_RUN_COLUMNS))
    rows = pa.table(db.SelectStream(con, f"SELECT * EXCLUDE ({left}) FROM (\n{sql}\n)"))
    shared = ", ".join(BLAME_RUN_COLUMNS)
    runs = pa.table(db.SelectStream(con, f"SELECT {shared} FROM (\n{sql}\n) LIMIT 1"))
    return rows, runs


def _blame_texts(sql: str) -> str:
    """The recorder's SELECT of blame's rows (``sql``) over a batch's stored ``blame_rows``, its
    reasons' texts made from their kinds (msq.blame.BATCH_TEXTS; its floor sources go as they
    are, a ``blame_floor`` the driver looks up by its dictionary as the other ENUMs)."""
    from msq.blame import BATCH_TEXTS

    if sql.count(_BLAME_REASON) != 1:
        raise AssertionError("hist_blame_rows.sql does not select b.reason once")
    return sql.replace(_BLAME_REASON, f"{BATCH_TEXTS['reason']} AS reason,")


#: What hist_blame_rows.sql selects of blame_rows' reason (:func:`_blame_texts`)
_BLAME_REASON = "b.reason,"

#: What blame_edges' history SELECT gets to say whose edge a row is (see _batch_history_rows)
_EDGES_SELECT = "SELECT e.side, "


def _batch_history_rows(con: Any, mode: str, places: list[Any], folders: list[str],
                        ) -> list[_LeftRows | None]:
    """The history rows of every pair of a batch (msq.pipeline.compute_batch, before
    split_batch: its tables under their own names), by table, from one run of each of the
    recorder's SELECTs over the batch's rows, not one a pair over its views. Each SELECT reads
    each row alone (joins on out_seq, row_seq and op_seq, which run on from pair to pair), so a
    pair's rows are what its own SELECTs give: the result and blame rows of its out_seq range
    (``places``: msq.pipeline.BatchPlace), blame's edges of its pair number, in the order they
    come, numbered as its own compare numbers them (out_seq from its first, op_seq from its
    op_base). A pair's blame rows go without their names: each is its output row's
    (blame_tensors' ``r.npu_row = t.row_seq``: its NPU tensor row and that row's op, the names
    hist_row_ops.sql and the result's "NPU Name" give a matched row), which the driver takes
    (msq.history.run_recorder._Names.key_blame); a workbook-only batch's blame_rows holds
    them on a few rows alone (msq.blame.compute.batch_rows_select).

    Each pair's rows of a table are written into its shared folder (``folders``, in
    ``places``' order; :func:`write_table`) as soon as the batch's are made, and let go: a
    worker holds one of the batch's history tables at a time, not all of them to its last
    pair's workbook (~100 MB of Arrow and its allocator's slack for six 24,500-row pairs,
    beside the sheets' rows and the renderer's buffers: a worker's peak memory, bench/README
    "Session 28: mem"). Raises OSError where a folder cannot be written: the caller compares
    the pairs one by one."""
    import pyarrow as pa

    from msq import db
    from msq.history.recorder import prepare_blame, prepare_ops, prepare_rows

    ranges = [place.out_range for place in places]
    firsts = [lo for lo, _ in ranges]
    lines = pa.table(db.SelectStream(con, _BATCH_LINES))  # what the two below read
    ops = _batch_row_ops(con, lines)
    if ops is None:  # the SQL's rows' ops (hist_row_ops.sql)
        prepare_ops(con, macros=False)  # the kept database has the macros (WorkerDatabase)
    else:  # none: they are put in below
        con.execute(f"CREATE OR REPLACE VIEW hist_row_ops AS {_NO_OPS}")
    select, sided = _unsided(prepare_rows(con, mode, ops=False))
    select, once = _bench_once_select(_coded(select), sided)
    rows = _sided(_result_rows(con, mode, select), sided)
    rows = _flag_last(rows) if once else bench_once(rows)
    con.execute("DROP VIEW temp.hist_result; DROP VIEW hist_row_ops")
    if ops is not None:
        at = rows.schema.get_field_index("op_name")
        rows = rows.set_column(at, rows.schema.field(at), ops(rows.column("out_seq")))
    written = ["result_rows"]
    parts = split_rows(rows, ranges)
    del rows  # the parts hold what they need of it
    _write_parts(folders, "result_rows", parts)
    del parts
    for table, sql in prepare_blame(con):
        if table == "blame_rows":
            blame, runs = _blame_rows(con, _blame_texts(sql), names=False)
            cut = split_rows(blame, ranges,
                             shifts={"out_seq": firsts,
                                     "op_seq": [place.op_base for place in places]})
            del blame  # as rows above
            _write_parts(folders, "blame_runs", [runs] * len(folders))
            written.append("blame_runs")
        else:  # blame_edges: its pair says whose (an edge's rows may have no output line)
            cut = [part.drop_columns([_PAIR]) for part in split_rows(
                _batch_edges(con, sql, lines), [(place.pair, place.pair) for place in places],
                key=_PAIR, shifts={"consumer_seq": firsts, "producer_seq": firsts})]
        _write_parts(folders, table, cut)
        written.append(table)
        del cut
    return [_LeftRows(folder, list(written)) for folder in folders]


def _write_parts(folders: list[str], table: str, parts: list[pa.Table]) -> None:
    """Each pair's rows of ``table`` written into its folder (:func:`write_table`)."""
    for folder, part in zip(folders, parts, strict=True):
        write_table(folder, table, part)


#: The result rows' few-valued texts a batch hands over as ENUMs (sql/compare/schema/00_types.sql):
#: {the text hist_rows_<mode>.sql makes the column by: the same made an ENUM}. The verdict's
#: CASE of constants makes an ENUM for free; the kind, the CASE's one comparison a row on most
#: (~30 instructions), is exported as a byte, not a text (~85). The driver keys them by their
#: dictionaries (msq.history.run_recorder._Classes: the same classes, its texts).
CODED_HISTORY = {
    "CASE r.\"Result\" WHEN '' THEN 'pass' WHEN 'Warning' THEN 'warning' ELSE 'unmatched' END":
        "CASE r.\"Result\" WHEN '' THEN 'pass'::hist_verdict WHEN 'Warning' THEN "
        "'warning'::hist_verdict ELSE 'unmatched'::hist_verdict END",
    "out_seq, kind, op_name,":
        "out_seq, CASE kind WHEN 'matched' THEN 'matched'::hist_kind WHEN 'npu_only' THEN "
        "'npu_only'::hist_kind WHEN 'bench_only' THEN 'bench_only'::hist_kind "
        "ELSE error('a row of kind ' || kind) END AS kind, op_name,"}


#: The statistics result's texts (stat_result.sql's "Result": '' a pass, most rows, 'Warning',
#: 'N/A' unmatched) a batch hands over as an ENUM of them (a byte a row exported, not a text:
#: ~7 M instructions a 6-pair root batch): {hist_rows_statistics.sql's column: the same made an
#: ENUM}. A row of another text (--compat's or a user's result_statistics, a user's stat_result)
#: stops the SELECT by :data:`_UNCODED_RESULT`'s error, and the SELECT runs again with its texts.
_UNCODED_RESULT = "msq: a result not coded"
_RESULT_ENUM = "ENUM('', 'Warning', 'N/A')"
CODED_RESULT = {
    '"Result" AS result,':
        "CASE \"Result\" " + " ".join(f"WHEN '{text}' THEN '{text}'::{_RESULT_ENUM}"
                                      for text in ("", "Warning", "N/A"))
        + f" ELSE error('{_UNCODED_RESULT}') END AS result,"}


def _coded(select: str, coded: dict[str, str] = CODED_HISTORY) -> str:
    """The batch's result rows' SELECT (``select``) with each of ``coded``'s texts (by default
    :data:`CODED_HISTORY`'s) it holds once made its ENUM's; one not found is left as it is."""
    for text, made in coded.items():
        if select.count(text) == 1:
            select = select.replace(text, made)
    return select


def _result_rows(con: Any, mode: str, select: str) -> pa.Table:
    """The rows of the batch's result rows' SELECT (``select``), its statistics result an ENUM
    (:data:`CODED_RESULT`) where every row's is one of its texts; else (the SELECT stopped by
    :data:`_UNCODED_RESULT`) as ``select`` gives it, a text."""
    import duckdb
    import pyarrow as pa

    from msq import db

    coded = _coded(select, CODED_RESULT) if mode == "statistics" else select
    if coded != select:
        try:
            return pa.table(db.SelectStream(con, coded))
        # DuckDB's error, or the same raised by the Arrow stream reading its rows (an OSError)
        except (duckdb.Error, OSError, pa.ArrowException) as err:
            if _UNCODED_RESULT not in str(err):
                raise
    return pa.table(db.SelectStream(con, select))


#: The result rows' columns of one side (hist_rows_<mode>.sql): NULL on the rows of the other
#: side alone, by a CASE of each ({column: (the side's name in the result, the other side's kind)})
_SIDED = {f"{side.lower()}_{name}": (f"{side} {shown}", other)
          for side, other in (("NPU", "bench_only"), ("Bench", "npu_only"))
          for name, shown in (("name", "Name"), ("dtype", "Dtype"), ("shape", "Tensor Shape"))}


def _sided_case(column: str) -> str:
    shown, other = _SIDED[column]
    return f"CASE WHEN kind <> '{other}' THEN \"{shown}\" END AS {column}"


def _unsided(select: str) -> tuple[str, list[str]]:
    """The result rows' SELECT (``select``) with each of the :data:`_SIDED` columns it makes by
    its CASE selected as it is, and those columns (:func:`_sided` NULLs them where the CASE
    would): DuckDB's CASE copied each of the six texts of every row (~50 M instructions a
    6-pair root batch), where a column's validity bitmap ANDed with its side's is a bitmap."""
    sided = []
    for column in _SIDED:
        case = _sided_case(column)
        if select.count(case) == 1:
            select = select.replace(case, f'"{_SIDED[column][0]}" AS {column}')
            sided.append(column)
    return select, sided


def _sided(rows: pa.Table, sided: list[str]) -> pa.Table:
    """``rows`` with each of ``sided`` (:func:`_unsided`) NULL where its CASE would make it:
    on the rows whose kind is NULL or the other side's."""
    import pyarrow as pa

    kinds = rows.column("kind")
    keep: dict[str, list[Any]] = {}
    for column in sided:
        other = _SIDED[column][1]
        at = rows.schema.get_field_index(column)
        values = rows.column(at)
        if [len(c) for c in values.chunks] != [len(c) for c in kinds.chunks]:  # not DuckDB's
            values, kinds = (pa.chunked_array([c.combine_chunks()]) for c in (values, kinds))
            keep = {}
        if other not in keep:
            keep[other] = [_kept(kind, other) for kind in kinds.chunks]
        chunks = [_masked(chunk, kept)
                  for chunk, kept in zip(values.chunks, keep[other], strict=True)]
        rows = rows.set_column(at, rows.schema.field(at), pa.chunked_array(chunks, values.type))
    return rows


def _kept(kinds: pa.Array, other: str) -> Any:
    """Where ``kinds`` is neither NULL nor ``other``, as numpy booleans: the texts of
    ``other``'s length alone compared with it (a batch's kinds differ in length; ``other``'s
    rows ~1 %), not every text (pyarrow's not_equal: ~16 instructions a row)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from msq import db

    if pa.types.is_dictionary(kinds.type):  # a batch's ENUM (CODED_HISTORY): by its codes
        return _kept_codes(kinds, other)
    if not pa.types.is_string(kinds.type):
        return np.asarray(pc.fill_null(pc.not_equal(kinds, other), False))
    n = len(kinds)
    offsets = np.frombuffer(kinds.buffers()[1], np.int32)[kinds.offset:kinds.offset + n + 1]
    word = other.encode()
    same = np.flatnonzero(np.diff(offsets) == len(word))
    if len(same):
        data = np.frombuffer(kinds.buffers()[2], np.uint8)
        texts = data[offsets[same][:, None] + np.arange(len(word))]
        same = same[(texts == np.frombuffer(word, np.uint8)).all(axis=1)]
    kept = np.ones(n, bool)
    kept[same] = False
    valid = db.valid_mask(kinds)
    return kept if valid is None else kept & valid


def _kept_codes(kinds: pa.DictionaryArray, other: str) -> Any:
    """:func:`_kept` of a dictionary array: its codes compared with ``other``'s (none: every
    row but a NULL), not its texts."""
    import numpy as np

    from msq import db

    indices = kinds.indices  # its buffer's values (a NULL's too: the validity masks it)
    codes = np.frombuffer(indices.buffers()[1], indices.type.to_pandas_dtype())[
        indices.offset:indices.offset + len(indices)]
    places = np.flatnonzero(np.asarray(kinds.dictionary.to_pylist(), object) == other)
    kept = np.ones(len(kinds), bool)
    for place in places.tolist():
        kept &= codes != place
    valid = db.valid_mask(kinds)
    return kept if valid is None else kept & valid


def _masked(values: pa.Array, keep: Any) -> pa.Array:
    """``values`` NULL where ``keep`` (numpy booleans) is false: its own buffers with a
    validity bitmap of its own and ``keep``'s, not its texts copied (as ``if_else`` does)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)) \
            or values.offset or len(values) != len(keep):
        return pc.if_else(pa.array(keep), values, pa.scalar(None, values.type))
    bits = np.packbits(keep, bitorder="little")
    if values.null_count:
        own = values.buffers()[0]
        bits &= np.frombuffer(own, np.uint8)[:len(bits)]
    return pa.Array.from_buffers(values.type, len(values),
                                 [pa.py_buffer(bits), *values.buffers()[1:]])


def _flag_last(rows: pa.Table) -> pa.Table:
    """``rows`` with their ``BENCH_SAME`` column last, where :func:`bench_once` puts it (the
    SELECT of :func:`_bench_once_select` makes it before the columns that read it)."""
    from msq.history.recorder import BENCH_SAME

    names = [name for name in rows.column_names if name != BENCH_SAME]
    return rows.select([*names, BENCH_SAME])


def blame_names_once(blame: pa.Table, result: pa.Table) -> pa.Table:
    """A pair's blame rows ``blame`` as a pool worker hands them over: without their names
    (``BLAME_NAMES``) where every row's are those of its output row (the row of ``result``, the
    pair's result rows, with its out_seq; NULL where that is NULL), which the driver then keys
    as it keyed those (msq.history.recorder.BLAME_NAMES); else as they are.

    Told by runs of rows (:func:`_matched_runs`: both tables come in runs of consecutive
    out_seqs, a few a pair), each run's names compared as slices (:func:`_same_texts`), not by
    taking the output rows' names and comparing them row by row (a copy of every name: ~12 M
    instructions a 24,500-row pair)."""
    from msq.history.recorder import BLAME_NAMES

    have = set(blame.column_names) & set(result.column_names)
    if not have.issuperset(("out_seq", *BLAME_NAMES)) or not blame.num_rows:
        return blame
    pieces = _matched_runs(blame.column("out_seq"), result.column("out_seq"))
    same = _same_by_rows(blame, result) if pieces is None else \
        all(_same_texts(blame.column(c), result.column(c), pieces) for c in BLAME_NAMES)
    return blame.drop_columns(list(BLAME_NAMES)) if same else blame


def _same_by_rows(blame: pa.Table, result: pa.Table) -> bool:
    """:func:`blame_names_once`'s test row by row, where the rows come in too many runs for
    :func:`_matched_runs` (a small batch's blame rows may): each blame row's output row found
    in a table of the out_seqs, its names taken and compared (NULL to NULL the same). False
    where an out_seq is NULL, not among the result rows', or there twice."""
    import numpy as np
    import pyarrow as pa

    from msq.history.recorder import BLAME_NAMES

    seqs, wanted = result.column("out_seq"), blame.column("out_seq")
    if seqs.null_count or wanted.null_count:
        return False
    places = _places(_numbers(seqs, 0).astype(np.int64, copy=False), None)
    if places is None:
        return False
    at = _look(places, _numbers(wanted, 0).astype(np.int64, copy=False), None)
    if at.min() < 0:
        return False
    rows = pa.array(at, pa.int64())
    return all(blame.column(column).equals(result.column(column).take(rows))
               for column in BLAME_NAMES)


#: At most this many runs of rows are compared by :func:`blame_names_once` (more: told apart)
_SAME_RUNS = 64


def _seq_runs(seqs: pa.ChunkedArray) -> list[tuple[int, int, int]] | None:
    """``seqs``' runs of consecutive numbers: (its first place, its first number, its length);
    None for a NULL or more than :data:`_SAME_RUNS` runs."""
    import numpy as np

    if seqs.null_count:
        return None
    numbers = _numbers(seqs, 0)
    cuts = np.flatnonzero(np.diff(numbers) != 1) + 1
    if len(cuts) >= _SAME_RUNS:
        return None
    starts, ends = [0, *cuts.tolist()], [*cuts.tolist(), len(numbers)]
    return [(a, int(numbers[a]), b - a) for a, b in zip(starts, ends, strict=True) if b > a]


def _matched_runs(mine: pa.ChunkedArray, theirs: pa.ChunkedArray,
                  ) -> list[tuple[int, int, int]] | None:
    """Where each of ``mine`` (out_seqs) is among ``theirs`` (out_seqs), as runs: (a place in
    mine, the place of its number in theirs, a length) covering each of mine once; None where
    a number of mine is not among theirs, a number of theirs is there twice, or either comes
    in too many runs."""
    runs, their_runs = _seq_runs(mine), _seq_runs(theirs)
    if runs is None or their_runs is None:
        return None
    their_runs.sort(key=lambda run: run[1])
    if any(a[1] + a[2] > b[1] for a, b in itertools.pairwise(their_runs)):
        return None  # a number twice
    pieces = []
    for place, first, length in runs:
        covered = 0
        for their_place, their_first, their_length in their_runs:
            low = max(first, their_first)
            high = min(first + length, their_first + their_length)
            if low < high:
                pieces.append((place + low - first, their_place + low - their_first, high - low))
                covered += high - low
        if covered != length:
            return None
    return pieces


def _same_texts(mine: pa.ChunkedArray, theirs: pa.ChunkedArray,
                pieces: list[tuple[int, int, int]]) -> bool:
    """Whether ``mine`` holds ``theirs``' texts and NULLs at the places ``pieces``
    (:func:`_matched_runs`) say: Arrow's equality of each piece's slices (across chunks, the
    bytes behind a NULL not read); False where their types differ."""
    return all(mine.slice(place, length).equals(theirs.slice(their_place, length))
               for place, their_place, length in pieces)


def _bench_once_select(select: str, sided: list[str]) -> tuple[str, bool]:
    """The batch's result rows' SELECT (``select``, as :func:`_unsided` made it: each side's
    columns selected as they are, ``sided``) making each row's bench name and shape NULL where
    both equal its NPU name and shape and its kind keeps both sides, with the
    column ``BENCH_SAME`` saying so (as :func:`bench_once` does after the SELECT): DuckDB then
    exports no bytes for them (its Arrow export of a text, ~85 instructions a row with its
    buffer's growth, not made and dropped). True if made so; ``select`` itself where its columns
    are not found as :func:`_unsided` writes them (:func:`bench_once` then does it)."""
    from msq.history.recorder import BENCH_SAME, BENCH_TWINS

    if any(column not in sided for pair in BENCH_TWINS for column in pair):
        return select, False
    raw = {column: _SIDED[column][0] for pair in BENCH_TWINS for column in pair}
    selected = {column: f'"{raw[column]}" AS {column}' for column in raw}
    if any(select.count(text) != 1 for text in selected.values()):
        return select, False
    # the kinds _sided keeps both sides of (neither side's alone, not NULL), and the three equal
    kinds = sorted({_SIDED[column][1] for column in raw})
    same = " AND ".join([f"kind <> '{kind}'" for kind in kinds]
                        + [f'"{raw[bench]}" = "{raw[npu]}"' for bench, npu in BENCH_TWINS])
    first, _ = BENCH_TWINS[0]
    for bench, _ in BENCH_TWINS:
        made = f'CASE WHEN {BENCH_SAME} THEN NULL ELSE "{raw[bench]}" END AS {bench}'
        if bench == first:  # the flag first: the columns after it read it by its name
            made = f"coalesce({same}, false) AS {BENCH_SAME}, {made}"
        select = select.replace(selected[bench], made)
    return select, True


def bench_once(rows: pa.Table) -> pa.Table:
    """The result rows ``rows`` as a pool worker hands them over: each row's bench name and
    shape NULL, their bytes not sent, where both equal the row's NPU name and shape (none NULL),
    and the column ``BENCH_SAME`` saying so (msq.history.recorder.BENCH_TWINS: the driver keys
    them as their NPU twins). Rows without those columns come back as they are."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from msq.history.recorder import BENCH_SAME, BENCH_TWINS

    names = rows.column_names
    if BENCH_SAME in names or not all(c in names for pair in BENCH_TWINS for c in pair):
        return rows
    same = np.ones(rows.num_rows, bool)
    for bench, npu in BENCH_TWINS:
        equal = pc.equal(rows.column(bench), rows.column(npu))
        same &= np.asarray(pc.fill_null(equal, False).to_numpy(zero_copy_only=False), bool)
    for bench, _ in BENCH_TWINS:
        at = rows.schema.get_field_index(bench)
        values, chunks, start = rows.column(at), [], 0
        for chunk in values.chunks:
            chunks.append(_dropped(chunk, same[start:start + len(chunk)]))
            start += len(chunk)
        rows = rows.set_column(at, rows.schema.field(at), pa.chunked_array(chunks, values.type))
    return rows.append_column(BENCH_SAME, pa.array(same))


def _dropped(values: pa.Array, drop: Any) -> pa.Array:
    """``values`` NULL where ``drop`` (numpy booleans) is true, the bytes of those rows gone:
    a string array's offsets made again from its kept rows' lengths and its data the kept rows'
    bytes alone (Arrow's filter of them), not a copy of every row's (``if_else``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not drop.any():
        return values
    if not pa.types.is_string(values.type):
        return pc.if_else(pa.array(drop), pa.scalar(None, values.type), values)
    from msq import db

    n = len(values)
    keep = ~drop
    valid = db.valid_mask(values)
    if valid is not None:
        keep &= valid
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset:values.offset + n + 1]
    lengths = np.where(keep, np.diff(offsets), 0)
    kept = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=kept[1:])
    data = values.filter(pa.array(keep)).buffers()[2] if kept[-1] else None
    return pa.Array.from_buffers(values.type, n, [
        pa.py_buffer(np.packbits(keep, bitorder="little")), pa.py_buffer(kept),
        data if data is not None else pa.py_buffer(b"")])


#: The column that says whose a batch's edge is (dropped once the edges are cut)
_PAIR = "hist_batch_pair"


#: A batch's blame edges (hist_blame_edges.sql's rows before its joins), each with its pair and
#: its side as a number (1 npu, 2 bench, 0 another), and each side's rows' output lines; how as
#: blame_edges has it (the ENUM blame_link: exported a byte a row, not a text)
_BATCH_EDGES = (f"SELECT pair AS {_PAIR}, CASE side WHEN 'npu' THEN 1 WHEN 'bench' THEN 2 "
                "ELSE 0 END::UTINYINT AS hist_side, consumer_row, producer_row, how, candidates "
                "FROM blame_edges")
#: The history's blame_edges.side (sql/history/schema/20_blame.sql: ENUM('bench', 'npu')), the
#: place of each in it 2 - hist_side
_EDGE_SIDES = ("bench", "npu")
#: Each output line's NPU and bench rows (what hist_blame_edges.sql and hist_row_ops.sql read)
_BATCH_LINES = "SELECT out_seq, npu_row, bench_row FROM compare_rows"
#: A side's rows are looked up in a table of their numbers' range when it has at most this many
#: more places than rows (the readers number a batch's rows 0, 1, 2, ...); else by the SQL
_DENSE_SLACK = 65_536
_NO_LINE = (1 << 63) - 1


def _batch_edges(con: Any, sql: str, lines: pa.Table) -> pa.Table:
    """blame_edges' history rows of a batch (``sql``: hist_blame_edges.sql, the recorder's
    SELECT; ``lines``: its output lines' rows, :data:`_BATCH_LINES`), each with its pair (:data:`_PAIR`), in blame_edges' order: the same rows as ``sql``
    gives, each edge's rows' first output lines (the least out_seq of compare_rows' rows with
    that row of the edge's side; NULL: none) looked up in numpy, in a table of each side's row
    numbers, not by ``sql``'s joins (~23 M instructions less a 24,500-row pair: the joins were
    ~2,000 instructions an edge); side and how as dictionaries (side's the history's ENUM's
    places, :data:`_EDGE_SIDES`). Where a side's row numbers are too sparse for such a table, or
    a side is neither npu nor bench, ``sql`` itself (:func:`_sql_edges`: texts)."""
    import numpy as np
    import pyarrow as pa

    from msq import db

    firsts = {}
    out_seqs = _numbers(lines.column("out_seq"), 0)
    with_seq = db.valid_mask(lines.column("out_seq"))
    for code, side in ((1, "npu"), (2, "bench")):
        column = lines.column(f"{side}_row")
        rows, kept = _numbers(column, 0), db.valid_mask(column)
        if with_seq is not None:
            kept = with_seq if kept is None else kept & with_seq
        table = (_first_lines(rows, out_seqs) if kept is None
                 else _first_lines(rows[kept], out_seqs[kept]))
        if table is None:
            return _sql_edges(con, sql)
        firsts[code] = table
    edges = pa.table(db.SelectStream(con, _BATCH_EDGES))
    sides = _numbers(edges.column("hist_side"), 0)
    if len(sides) and sides.min() == 0:  # a side neither npu nor bench (or NULL): its text
        return _sql_edges(con, sql)
    seqs = {}
    for column in ("consumer", "producer"):
        rows = edges.column(f"{column}_row")
        wanted, valid = _numbers(rows, 0), db.valid_mask(rows)
        found = np.full(len(wanted), -1, np.int64)  # -1 (outside a table) or _NO_LINE: none
        for code, first in firsts.items():
            on_side = sides == code
            looked = _look(first, wanted, on_side if valid is None else on_side & valid)
            found[on_side] = looked[on_side]
        seqs[f"{column}_seq"] = pa.array(found, pa.int64(),
                                         mask=(found < 0) | (found == _NO_LINE))
    # each side a place in the history's ENUM, handed over as a dictionary (a byte a row, which
    # the driver's INSERT casts ~45 instructions a row cheaper than a text)
    side = pa.DictionaryArray.from_arrays(pa.array((2 - sides).astype(np.int8, copy=False)),
                                          pa.array(_EDGE_SIDES))
    return pa.table({_PAIR: edges.column(_PAIR), "side": side, **seqs,
                     "how": edges.column("how"), "candidates": edges.column("candidates")})


def _sql_edges(con: Any, sql: str) -> pa.Table:
    """blame_edges' history rows of a batch by ``sql`` itself (hist_blame_edges.sql), each with
    its pair (:data:`_PAIR`); side and how as its texts."""
    import pyarrow as pa

    from msq import db

    if not sql.startswith(_EDGES_SELECT) and f"\n{_EDGES_SELECT}" not in sql:
        raise RuntimeError("blame_edges' history SELECT changed: see _EDGES_SELECT")
    return pa.table(db.SelectStream(con, sql.replace(
        _EDGES_SELECT, f"SELECT e.pair AS {_PAIR}, e.side, ", 1)))


#: What hist_row_ops.sql reads of a batch: each output line's NPU and bench rows, each side's
#: tensors rows' ops and each side's ops' names (a side as a number: 1 npu, 2 bench, 0 another)
_SIDE = "CASE side WHEN 'npu' THEN 1 WHEN 'bench' THEN 2 ELSE 0 END::UTINYINT AS side"
_BATCH_ROW_OPS = (f"SELECT {_SIDE}, row_seq, op_seq FROM tensors",
                  f"SELECT {_SIDE}, op_seq, op_name FROM ops")
#: hist_row_ops without rows: the result rows' SELECT gives no op; _batch_row_ops' are put in
_NO_OPS = "SELECT NULL::BIGINT AS out_seq, NULL::VARCHAR AS op_name WHERE false"


def _batch_row_ops(con: Any, lines: pa.Table,
                   ) -> Callable[[pa.ChunkedArray], pa.ChunkedArray] | None:
    """hist_row_ops.sql's op names of a batch's output lines (``lines``: their rows,
    :data:`_BATCH_LINES`) as a lookup: given the out_seq of
    rows, their op names (NULL: none), as the result rows' SELECT joins them (its LEFT JOIN
    USING (out_seq)). Made in numpy, from tables of the lines', tensors rows' and ops' numbers
    (a row or op by its number and side: number x 2, + 1 on the bench side), not by the SQL's
    joins and the result rows' join on them (~37 M instructions a 24,500-row pair, ~1/6 of the
    result rows' SELECT). None where a join would give a row more than one op (an out_seq, a
    side's row or op twice: the SQL then gives it more rows) or the numbers are too sparse for
    such tables: the SQL's then."""
    import numpy as np
    import pyarrow as pa

    from msq import db

    tensors, ops = (pa.table(db.SelectStream(con, sql)) for sql in _BATCH_ROW_OPS)
    place = _places(_numbers(lines.column("out_seq"), 0), db.valid_mask(lines.column("out_seq")))
    tensor_keys, op_keys = _side_keys(tensors, "row_seq"), _side_keys(ops, "op_seq")
    if place is None or tensor_keys is None or op_keys is None:
        return None
    tensor, op = _places(*tensor_keys), _places(*op_keys)
    if tensor is None or op is None:
        return None
    # each line's tensors row: its NPU row where it has one, else its bench row
    npu, bench = db.valid_mask(lines.column("npu_row")), db.valid_mask(lines.column("bench_row"))
    wanted = _numbers(lines.column("npu_row"), 0)
    kept = None
    if npu is not None:
        wanted = np.where(npu, wanted, _numbers(lines.column("bench_row"), 0))
        kept = None if bench is None else npu | bench
    seqs = _numbers(tensors.column("op_seq"), 0).astype(np.int64, copy=False)
    if any(len(n) and (n.max() >= _KEY_LIMIT or n.min() <= -_KEY_LIMIT) for n in (wanted, seqs)):
        return None
    line_op = np.full(lines.num_rows, -1, np.int64)
    if tensors.num_rows and ops.num_rows:
        row = _look(tensor, wanted * 2 + (0 if npu is None else ~npu), kept)
        found = row >= 0
        row[~found] = 0
        with_op = db.valid_mask(tensors.column("op_seq"))
        if with_op is not None:
            found &= with_op[row]
        line_op = _look(op, seqs[row] * 2 + (_numbers(tensors.column("side"), 0)[row] == 2),
                        found)
    names = ops.column("op_name")

    def lookup(out_seqs: pa.ChunkedArray) -> pa.ChunkedArray:
        line = _look(place, _numbers(out_seqs, 0), db.valid_mask(out_seqs))
        if not len(line) or line.min() >= 0:
            op = line_op[line]
        else:
            op = np.full(len(line), -1, np.int64)
            at = np.flatnonzero(line >= 0)
            op[at] = line_op[line[at]]
        missing = op < 0
        return names.take(pa.array(op, pa.int64(), mask=missing if missing.any() else None))

    return lookup


#: Numbers beyond this are not doubled into keys (_side_keys): the SQL's joins take them
_KEY_LIMIT = 1 << 60


def _side_keys(table: pa.Table, column: str) -> tuple[Any, Any] | None:
    """The keys of ``table``'s rows by their ``column`` number and side (_BATCH_ROW_OPS:
    number x 2, + 1 on the bench side) and which to keep (those of a side npu or bench and a
    number; None: all), for :func:`_places`; None for a number beyond :data:`_KEY_LIMIT`."""
    import numpy as np

    numbers = _numbers(table.column(column), 0).astype(np.int64, copy=False)
    if len(numbers) and (numbers.max() >= _KEY_LIMIT or numbers.min() <= -_KEY_LIMIT):
        return None
    from msq import db

    sides = _numbers(table.column("side"), 0)
    keys = numbers * 2 + (sides == 2)
    kept = db.valid_mask(table.column(column))
    if (sides == 0).any():
        kept = (sides != 0) if kept is None else kept & (sides != 0)
    return keys, kept


def _places(keys: Any, kept: Any) -> tuple[int, Any] | None:
    """Where each of ``keys`` (those ``kept``, a numpy mask; None: all) is, as (the least key, a
    table from it: a key's place ``key - least``, -1 for a number not among them); None when
    a key is there twice or the keys are too sparse for a table (:data:`_DENSE_SLACK`)."""
    import numpy as np

    at = None
    if kept is not None:
        at = np.flatnonzero(kept)
        keys = keys[at]
    if not len(keys):
        return 0, np.empty(0, np.int64)
    low, high = int(keys.min()), int(keys.max())
    if high - low + 1 > len(keys) + _DENSE_SLACK:
        return None
    table = np.full(high - low + 1, -1, np.int64)
    table[keys - low] = np.arange(len(keys)) if at is None else at
    if np.count_nonzero(table >= 0) != len(keys):  # a key twice
        return None
    return low, table


def _look(places: tuple[int, Any], keys: Any, kept: Any) -> Any:
    """The places (:func:`_places`) of ``keys`` (those ``kept``; None: all), -1 where not there."""
    import numpy as np

    low, table = places
    if kept is not None and kept.all():
        kept = None
    if kept is None and (not len(keys) or (keys.min() >= low and keys.max() < low + len(table))):
        return table[keys - low]  # every key inside the table: one gather
    inside = (keys >= low) & (keys < low + len(table))
    if kept is not None:
        inside &= kept
    found = np.full(len(keys), -1, np.int64)
    at = np.flatnonzero(inside)
    found[at] = table[keys[at] - low]
    return found


def _numbers(values: pa.ChunkedArray | pa.Array, null: Any) -> Any:
    """``values`` as one numpy array, NULL as ``null`` (one chunk without NULLs: its buffer, not
    copied)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if values.null_count:
        values = pc.fill_null(values, null)
    if isinstance(values, pa.ChunkedArray) and values.num_chunks == 1:
        values = values.chunk(0)
    return values.to_numpy(zero_copy_only=False)


def _first_lines(rows: Any, seqs: Any) -> tuple[int, Any] | None:
    """Each row number's first output line (the least of ``seqs`` of its ``rows``) as (the
    least number, a table from it: its place ``row - least``, :data:`_NO_LINE` for a number
    without a line); None when the numbers are too sparse for that (:data:`_DENSE_SLACK`)."""
    import numpy as np

    if not len(rows):
        return 0, np.empty(0, np.int64)
    low, high = int(rows.min()), int(rows.max())
    if high - low + 1 > len(rows) + _DENSE_SLACK:
        return None
    table = np.full(high - low + 1, _NO_LINE, np.int64)
    np.minimum.at(table, rows - low, seqs)
    return low, table


#: At most this many runs of rows a part is cut from, put together from slices (more: taken)
_SLICED_RUNS = 64
#: A part of at most this many chunks goes to the driver as its slices (Arrow chunks), not
#: copied into one: a batch's result rows come in ~2 runs a pair, whose copy was ~8 M
#: instructions a 24,500-row pair, and DuckDB's scan in the driver takes two chunks as one.
#: A part of more is copied (blame's rows came in 10-25 runs a pair, now one or two): the
#: driver's scan of many short chunks cost more than the copy (bench/README, "Session 19: hist").
_CHUNKED_RUNS = 4


def split_rows(rows: pa.Table, ranges: list[tuple[int, int]], key: str = "out_seq",
               shifts: dict[str, list[int]] | None = None) -> list[pa.Table]:
    """``rows`` cut by their ``key`` in ``ranges`` (first, last; inclusive), each part's rows in
    their order in ``rows``, with ``shifts[column][i]`` subtracted from each of part i's
    ``column`` (NULL stays NULL; the same type); by default its first from ``key``.

    ``rows`` is cut as it comes (the chunks of DuckDB's Arrow stream), not first copied into
    one chunk: a part is the slices of its runs of rows, copied into one only where it has more
    than :data:`_CHUNKED_RUNS` chunks (blame's rows), so the batch's rows are not held twice
    while they are cut (~55 MB of a 6-pair root batch's result rows) nor copied for nothing."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if shifts is None:
        shifts = {key: [lo for lo, _ in ranges]}
    column = rows.column(key)
    if column.null_count:
        raise ValueError(f"split_rows: NULL {key}")
    runs = _runs(np.asarray(column.to_numpy()), ranges)
    out = []
    for i, (starts, ends) in enumerate(runs):
        # the runs of consecutive rows, sliced and put together (a join's rows come in a few
        # runs: those its build side did not match last): a take of each column costs ~25 times
        # more (~50 M instructions a 24,500-row pair)
        if len(starts) <= _SLICED_RUNS:
            part = pa.concat_tables([rows.slice(int(a), int(b - a))
                                     for a, b in zip(starts, ends, strict=True)]
                                    or [rows.slice(0, 0)])
            if max((c.num_chunks for c in part.columns), default=0) > _CHUNKED_RUNS:
                part = part.combine_chunks()
        else:
            part = rows.take(pa.array(np.concatenate(
                [np.arange(a, b) for a, b in zip(starts, ends, strict=True)]))).combine_chunks()
        for name, bases in shifts.items():
            at = part.schema.get_field_index(name)
            field = part.schema.field(at)
            moved = pc.subtract(part.column(at), pa.scalar(bases[i], field.type)).cast(field.type)
            part = part.set_column(at, field, moved)
        out.append(part)
    return out


def _runs(seqs: Any, ranges: list[tuple[int, int]]) -> list[tuple[Any, Any]]:
    """For each of ``ranges`` (first, last; inclusive), the runs of consecutive places of
    ``seqs`` (numpy) within it, in order: (their starts, their ends). Where the ranges that have
    rows are in order and apart (a batch's pairs), each value's range is found once, by a binary
    search among their firsts (~2 M instructions less a pair than a pass over every row a
    range); else range by range."""
    import numpy as np

    count = len(seqs)
    firsts = np.array([lo for lo, _ in ranges], np.int64)
    lasts = np.array([hi for _, hi in ranges], np.int64)
    live = np.flatnonzero(firsts <= lasts)  # an empty range has no rows
    if not (len(live) and bool((firsts[live][1:] > lasts[live][:-1]).all())):
        return [_range_runs(np.flatnonzero((seqs >= lo) & (seqs <= hi))) for lo, hi in ranges]
    part = _owners(seqs, firsts[live], lasts[live], live)
    cuts = np.flatnonzero(part[1:] != part[:-1]) + 1
    starts = np.concatenate(([0], cuts)) if count else np.zeros(0, np.int64)
    ends = np.concatenate((cuts, [count])) if count else starts
    owner = part[starts]
    order = np.argsort(owner, kind="stable")  # each range's runs, in their order
    bounds = np.searchsorted(owner[order], np.arange(len(ranges) + 1))
    return [(starts[order[a:b]], ends[order[a:b]])
            for a, b in itertools.pairwise(bounds.tolist())]


def _owners(seqs: Any, firsts: Any, lasts: Any, live: Any) -> Any:
    """Each of ``seqs``' range: ``live[i]`` where it is in ranges[i] (``firsts``, ``lasts``:
    the live ranges', in order and apart), else -1. From a table of the values' span (one
    gather: a batch's out_seqs and pair numbers span no more values than it has rows) where
    that span has at most :data:`_DENSE_SLACK` more places than there are values, else by a
    binary search among the ranges' firsts (~25 M instructions a 6-pair root batch more)."""
    import numpy as np

    count = len(seqs)
    low = min(int(firsts[0]), int(seqs.min())) if count else int(firsts[0])
    high = max(int(lasts[-1]), int(seqs.max())) if count else int(lasts[-1])
    if high - low + 1 <= count + _DENSE_SLACK:
        table = np.full(high - low + 1, -1, np.int64)
        for at, lo, hi in zip(live.tolist(), firsts.tolist(), lasts.tolist(), strict=True):
            table[lo - low:hi - low + 1] = at
        return table[seqs - low]
    where = np.searchsorted(firsts, seqs, side="right") - 1
    found = np.maximum(where, 0)
    return np.where((where >= 0) & (seqs <= lasts[found]), live[found], -1)


def _range_runs(where: Any) -> tuple[Any, Any]:
    """The runs of consecutive places among ``where`` (ascending): (their starts, their ends)."""
    import numpy as np

    if not len(where):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cuts = np.flatnonzero(np.diff(where) != 1) + 1
    return (where[np.concatenate(([0], cuts))],
            where[np.concatenate((cuts, [len(where)])) - 1] + 1)


def remove_pair_folders(dead: Collection[int] = ()) -> None:
    """Remove the private folders of pair workers that were killed (``dead``: their pids), and
    those of any worker no longer running (a killed msq's workers die with it, their folders
    stay): only of this pid namespace, only directories of this user, never a symlink."""
    from msq.db import process_alive

    roots = {Path(tempfile.gettempdir()), Path(shared_root())}  # rendering, shared rows
    for folder in (f for root in roots for f in root.glob(f"{PAIR_FOLDER}{pid_space()}-*-*")):
        pid = folder.name[len(PAIR_FOLDER):].split("-")[1]
        if not pid.isdigit() or (int(pid) not in dead and process_alive(int(pid))):
            continue
        try:
            st = folder.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The block's msq info lines dropped (warnings still kept)."""
    logger = logging.getLogger("msq")
    level = logger.level
    logger.setLevel(max(logging.WARNING, logger.getEffectiveLevel()))
    try:
        yield
    finally:
        logger.setLevel(level)


class _Keep(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__()
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        # the message rendered now: its arguments may not pickle
        record.msg, record.args = record.getMessage(), None
        record.exc_info = record.exc_text = None
        self.records.append(record)


@contextlib.contextmanager
def _kept_logs() -> Iterator[list[logging.LogRecord]]:
    """The msq log records of the block, kept instead of printed."""
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("msq")
    saved, propagate = logger.handlers[:], logger.propagate
    logger.handlers[:] = [_Keep(records)]
    logger.propagate = False
    try:
        yield records
    finally:
        logger.handlers[:] = saved
        logger.propagate = propagate
