"""Recording one compare into the history database.

Recording happens from a second connection (a cursor) of the compare's in-memory database, in a
thread (:class:`Recorder`) started once the rows are matched: the history file is ATTACHed, its
schema checked and its views loaded while the result is computed; the output rows are written
with one ``INSERT ... SELECT`` once the result exists, blame's rows once blame is done, while the
outputs are being written; once they exist the compare's metadata row follows and the one
transaction commits. The file is then detached so that other processes can take their turn. The
rows to insert come from the views of ``sql/history/record/``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from msq import db, interrupts
from msq.errors import HistoryError, SqlFileError
from msq.history import schema
from msq.history.store import (
    Aborted,
    FileState,
    first_lines,
    free_bytes,
    is_lock_error,
    lock_timeout,
    open_error,
    remove_failed_creation,
    resolve_db_path,
    with_lock_retry,
)
from msq.version import VERSION

if TYPE_CHECKING:
    from msq.config import Options, SingleInput
    from msq.result import CompareResult

log = logging.getLogger("msq")

ALIAS = "msq_history"
ROW_GROUP_ROWS = 32_768
#: A compare of at most ROW_GROUP_ROWS rows fills none of those: all its rows were compressed at
#: COMMIT, after the outputs (tensor_small's 15k rows: ~65 ms CPU, one core idle). In row groups
#: of this many most are written during the inserts, beside the workbook (see Recorder._attach).
SMALL_ROW_GROUP_ROWS = 8_192
#: Full row groups an insert holds in memory before DuckDB compresses and writes them (see
#: Recorder._attach).
WRITE_BUFFER_ROW_GROUPS = 1
# Above this many output rows the history is written after the outputs, not alongside them:
# the workbook of 500,000 rows takes ~13 s here, and another process waiting for the file
# (a multi-rank compare) must get it well inside its 60 s.
OVERLAP_MAX_ROWS = 500_000
# The rows' history columns are selected inside the insert. Computing them first into a
# temporary table beside blame (up to 2026-12-02) cost more than it overlapped: on the 100k-row
# statistics bench, default mode, whole CLI interleaved, 11 pairs: slower in 10 (~0.2-0.7 s,
# +0.2-1 s CPU); no different under --compat (bench/README, "The history recorder's staging copy").

#: A history row takes at least this many bytes on disk, however well DuckDB compresses it
#: (~60-250 measured): a record that cannot fit even so is refused before it writes.
MIN_BYTES_PER_ROW = 16
#: ...plus this much for the compares row, the schema of a new file and DuckDB's own blocks.
SPARE_BYTES = 1 << 20

_RANK = re.compile(r"^rank(\d*)$")
_STEP = re.compile(r"^step(\d+)$")


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
    return dt.datetime.now(dt.UTC)


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


def compare_row(ctx: RecordContext, con: duckdb.DuckDBPyConnection | bool) -> dict[str, Any]:
    """The ``compares`` row of one compare (without its id); ``con``: the compare's connection
    (its settings row says whether it crossed frameworks), or that flag itself (a directory
    compare's pair, recorded by the driver)."""
    rank, step = parse_rank_step(Path(ctx.inp.npu_json))
    cross = con if isinstance(con, bool) else db.scalar(con, "SELECT cross_framework FROM settings")
    res, opts = ctx.result, ctx.opts
    return {
        "started_at": dt.datetime.fromtimestamp(ctx.started, dt.UTC),
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
        "msq_version": VERSION, "output_dir": _abs(ctx.output_dir),
        "files": [_abs(f) for f in res.files], "n_rows": res.rows, "n_matched": res.matched,
        "n_npu_only": res.unmatched_npu, "n_bench_only": res.unmatched_bench,
        "n_red": res.red, "n_yellow": res.yellow,
        "suspect_line": None if res.suspect_line == "NA" else int(res.suspect_line),
        "suspect": None if res.suspect == "NA" else res.suspect,
    }


class Recorder:
    """Records one compare into the history file from a thread, while its outputs are written.

    Inserting every output row costs about a second per 100,000 rows and runs on one core, as
    does most of writing the workbook; DuckDB releases the GIL, so the two overlap. The history's
    own part (attach, schema, views) runs while the result is computed, the output rows go in
    once it exists (:meth:`result_ready`), blame's once it is done (:meth:`tables_complete`);
    the ``compares`` row, which names the files written and the time taken, follows once
    :meth:`finish` hands it over, and only then is the transaction committed.
    :meth:`abort` (the outputs failed, or Ctrl-C) rolls it back: the file is left as it was.

    The file's lock is taken early only when it is free and the compare is not huge
    (``overlap``): another process then waits for this one's outputs too, which must stay well
    inside its timeout. Otherwise, and when another process holds the file, the rows go in
    after the outputs, and the wait (up to the timeout) starts only then, as it always did.

    A record that fails leaves the file as it found it, in size too (DuckDB keeps the blocks of
    a rolled-back insert in the file: a full disk stayed full), and a file it created is removed
    again (:class:`~msq.history.store.FileState`). The commit is the point of no return: an
    abort or a Ctrl-C that comes after it has begun lets it complete (:mod:`msq.interrupts`).

    The thread owns its own connection (a cursor of the compare's database), where the
    ``hist_result`` view lives; the main thread does not touch that connection.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, mode: str, path: Path,
                 timeout: float | None = None, overlap: bool = True, rows: int = 0) -> None:
        self.path = path
        self.compare_id: int | None = None
        self._overlap = overlap
        self._mode, self._rows = mode, rows
        self._cursor = con.cursor()
        # reads blame's rows for the record when its tables came after the record's first read
        # of the compare's database (see _insert_blame)
        self._side = con.cursor()
        self._timeout = lock_timeout(timeout)
        self._row: dict[str, Any] | None = None
        self._go = threading.Event()    # set when the compares row is handed over (or on abort)
        # set when the result and marks are tables (or later, or on abort): the recorder starts
        # once the rows are matched (msq.pipeline), it prepares the history meanwhile
        self._result = threading.Event()
        # set when the compare's blame tables exist (or on abort): blame may still be computed
        # when the result is, its rows go in meanwhile
        self._tables = threading.Event()
        self._stop = threading.Event()  # set on abort
        self._gate = threading.Lock()   # the thread's commit against the main thread's abort
        self._committing = False
        self._done = threading.Event()  # the thread's last act (see interrupts.wait_for)
        self._before: FileState | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="msq-history", daemon=True)
        self._thread.start()

    def finish(self, row: dict[str, Any]) -> int:
        """Hand over the ``compares`` row (the outputs exist), wait for the commit.

        Returns:
            The new ``compare_id``.
        """
        self._row = row
        self.tables_complete()
        self._go.set()
        try:
            interrupts.wait_for(self._done)
        except KeyboardInterrupt:
            if self._stop_unless_committing():
                raise
            # the commit had begun: the compare is complete (the signal is held, see
            # interrupts.settle); let the commit end
            with interrupts.deferred():
                interrupts.wait_for(self._done)
        if self._error is not None:
            raise self._error
        assert self.compare_id is not None
        log.info("recorded compare %d (%d rows) in %s", self.compare_id,
                 row.get("n_rows", 0), self.path)
        return self.compare_id

    def result_ready(self) -> None:
        """The result and marks are tables now: their rows may go in (blame may still run)."""
        self._result.set()

    def tables_complete(self) -> None:
        """Every table of the compare exists now (its blame too): their rows may go in."""
        self._result.set()
        self._tables.set()

    def abort(self) -> None:
        """Stop recording and roll back, leaving the history file as it was (unless the commit
        has begun: then it completes); return once the thread has ended."""
        with interrupts.deferred():
            if self._stop_unless_committing() and not self._done.is_set():
                with contextlib.suppress(duckdb.Error):  # the thread may have closed it just now
                    self._cursor.interrupt()
            interrupts.wait_for(self._done)

    def _stop_unless_committing(self) -> bool:
        with self._gate:
            if self._committing:
                return False
            self._stop.set()
        self.tables_complete()
        self._go.set()
        return True

    # -- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        self._t0, self._cpu = time.perf_counter(), time.thread_time()
        try:
            self.compare_id = self._record()
        except BaseException as err:  # noqa: BLE001 (re-raised in the main thread by finish())
            self._error = err
        finally:
            self._cursor.close()  # drops the temp view hist_result with it
            self._side.close()
            self._done.set()

    def _record(self) -> int:
        if not self.path.parent.is_dir():
            raise HistoryError(f"{self.path}: its folder does not exist; create it or choose "
                               "another --db")
        # in the compare's database, before the record's transaction; each row's op as a table
        # of this connection: the names and the rows read it (each join of the view ~25 ms on
        # 100,000 rows, made now while the result is computed instead of twice at the end)
        prepare_ops(self._cursor, table=True)
        created = not os.path.lexists(self.path)
        try:
            self._attach()
        except BaseException:
            if created:  # e.g. a disk too full for DuckDB's header: an empty file, refused later
                remove_failed_creation(self.path)
            raise
        try:
            self._before = FileState.of(self.path, created)
            compare_id = self._write()
            self._checkpoint()
            self._lap("checkpoint")
            return compare_id
        finally:
            with contextlib.suppress(duckdb.Error):  # a database invalidated by a failed write
                self._cursor.execute(f"DETACH {ALIAS}")

    def _attach(self) -> None:
        cur = self._cursor

        # DuckDB compresses and writes an insert's full row groups while it runs only once it
        # holds this many of them (5 by default, 163,840 rows here: a 100,000-row compare then
        # waited for its COMMIT, after the outputs, to be compressed: ~0.2 s CPU of stat's 0.3).
        # One: each is written as soon as it is full, while the outputs are written. A global
        # setting: the compare's own database is in memory, where nothing is written.
        cur.execute(f"SET write_buffer_row_group_count = {WRITE_BUFFER_ROW_GROUPS}")

        def attach() -> None:
            # Row groups of 32,768 rows (not 122,880): a 100,000-row compare then fills whole
            # row groups, which DuckDB compresses and writes while the INSERT runs (alongside
            # the workbook) instead of all at COMMIT. Any row group size reads the same; this
            # costs ~10 % more disk. A smaller compare's in row groups of 8,192 (its tables'
            # last partial ones are left to the COMMIT: tensor_small's ~65 -> ~20 ms CPU after
            # the outputs, the file ~12 % larger; rows of several sizes in one table read alike)
            # an absolute name: DuckDB gives "md:", "s3://", ":memory:" ... a meaning of their own
            cur.execute(f"ATTACH {db.quote_str(self.path.absolute())} AS {ALIAS} "
                        f"(ROW_GROUP_SIZE {row_group_rows(self._rows)})")

        while self._overlap and not self._go.is_set():
            try:
                attach()
                return
            except duckdb.IOException as err:
                if not is_lock_error(err):
                    raise open_error(self.path, err) from None
            except duckdb.Error as err:
                raise open_error(self.path, err) from None
            self._go.wait(0.2)  # held by another process: look again until the outputs exist
        self._go.wait()
        if self._stop.is_set():
            raise Aborted
        with_lock_retry(attach, self.path, self._timeout, self._stop)

    def _write(self) -> int:
        cur, path = self._cursor, self.path
        assert self._before is not None
        home = db.scalar(cur, "SELECT current_database()")
        # DuckDB begins a transaction in each database at its first use, and there it sees the
        # tables that exist then. So the history's side (schema, views) comes first, inside the
        # history alone, while the compare is computed; the compare's database is read once its
        # result exists (self._result), and blame's rows, if blame came later, are read through
        # another connection (_insert_blame).
        try:
            cur.execute(f"USE {ALIAS}")
            cur.execute("BEGIN TRANSACTION")
            self._before.fresh = schema.ensure_schema(cur, ALIAS, path) is None
            schema.load_views(cur)
            self._wait(self._result)
            self._check_space()
            compare_id = int(db.scalar(cur, "SELECT coalesce(max(compare_id), 0) + 1 "
                                          f"FROM {ALIAS}.compares"))
            self._lap("prepared")
            # the new names from the names alone: the whole row's query took longer to plan
            # than to run on a small compare (~25 ms of llama_port's 1,209 rows); both queries
            # inline, not views (a view is planned once more when it is created)
            names_sql = ""
            if self._blame_pending():
                # blame still runs: the names go in first, read through the side connection, so
                # that this transaction reads the compare's database (and sees its tables) only
                # after them; by then blame has mostly ended and its rows are read directly
                # (streamed they cost ~0.09 s CPU more on stat, the names ~0.02 s)
                self._insert_names_streamed()
            else:
                # the result's names columns, without hist_result's join of the marks (~0.01 s
                # CPU of a 100k-row compare)
                names_sql = names_query(f'(SELECT out_seq, kind, "NPU Name", "Bench Name" '
                                        f"FROM result_{self._mode})")
            # only now the compare's database: a USE begins this transaction there too (its
            # snapshot taken then, before blame's tables when blame still ran: they were streamed
            # in, ~0.06 s CPU more at the record's end, in 7 of 8 runs of stat)
            cur.execute(f'USE "{home}"')
            rows_sql = prepare_rows(cur, self._mode, ops=False)
            insert_result_rows(cur, f"(\n{rows_sql}\n)", compare_id,
                               names=f"(\n{names_sql}\n)" if names_sql else None,
                               new_names=bool(names_sql), texts=self._mode != "md5")
            self._lap("result rows")
            self._wait(self._tables)
            self._lap("blame ready")
            self._insert_blame(compare_id)
            _insert_compare(cur, compare_id, self._wait_for_row())
            self._lap("compares row")
            self._before_commit()
            self._pass_gate()
            cur.execute("COMMIT")
            self._lap("commit")
            return compare_id
        except BaseException as err:
            _rollback(cur, home)
            self._before.restore(path)
            if isinstance(err, duckdb.Error) and not self._stop.is_set():
                raise HistoryError(f"{path}: could not record the compare ({first_lines(err)}); "
                                   "the outputs were written, the history was left unchanged"
                                   ) from err
            raise

    def _blame_pending(self) -> bool:
        """Blame has started (its parameters are in) and its tables are not complete yet."""
        if self._tables.is_set():
            return False
        return bool(db.scalar(self._side, "SELECT count(*) FROM blame_params"))

    def _insert_names_streamed(self) -> None:
        """The new names of the compare's rows, from its result read by the side connection
        (an Arrow C stream; this connection's own table ``hist_row_ops`` gives the ops): this
        transaction does not read the compare's database for them."""
        cur = self._cursor
        result = db.SelectStream(self._side, f'SELECT out_seq, kind, "NPU Name", "Bench Name" '
                                 f"FROM result_{self._mode}")
        cur.register("hist_names_stream", result)
        try:
            insert_names(cur, f"(\n{names_query('hist_names_stream')}\n)")
        finally:
            cur.unregister("hist_names_stream")
        self._lap("names")

    def _lap(self, step: str) -> None:
        # -vv: when each step of the recording ended, and its thread's CPU since the last
        now, cpu = time.perf_counter(), time.thread_time()
        log.debug("history: %-13s at %.2fs (%.2fs CPU)", step, now - self._t0, cpu - self._cpu)
        self._cpu = cpu

    def _wait(self, event: threading.Event) -> None:
        event.wait()
        if self._stop.is_set():
            raise Aborted

    def _insert_blame(self, compare_id: int) -> None:
        """Blame's rows and edges, when the compare has blame. Its tables may have come after
        this transaction's first read of the compare's database (blame ran longer than the
        result): then this transaction does not see them, and they are read through the side
        connection instead, streamed into the insert (an Arrow C stream; no pyarrow)."""
        cur = self._cursor
        source = cur
        found = prepare_blame(cur)
        if not found:
            found = prepare_blame(self._side)
            source = self._side
        for table, sql in found:
            if source is cur:
                insert_blame_table(cur, table, f"(\n{sql}\n)", compare_id)
                continue
            cur.register("hist_blame_stream", db.SelectStream(self._side, sql))
            try:
                if table == "blame_rows":  # read four times (names, terms, runs, rows): held once
                    cur.execute("CREATE OR REPLACE TEMP TABLE hist_blame AS "
                                "SELECT * FROM hist_blame_stream")
                    insert_blame_table(cur, table, "temp.hist_blame", compare_id)
                    cur.execute("DROP TABLE temp.hist_blame")
                else:
                    insert_blame_table(cur, table, "hist_blame_stream", compare_id)
            finally:
                cur.unregister("hist_blame_stream")
        self._lap("blame rows" if source is cur else "blame streamed")

    def _check_space(self) -> None:
        """Refuse a record that cannot fit on the disk even at DuckDB's best compression, before
        it writes: a record that fills the disk fails every other writer there meanwhile."""
        need = self._rows * MIN_BYTES_PER_ROW + SPARE_BYTES
        free = free_bytes(self.path.parent)
        if free is not None and free < need:
            raise HistoryError(f"{self.path}: not enough free space to record this compare "
                               f"({self._rows} rows need at least {need / 1e6:.1f} MB, "
                               f"{free / 1e6:.1f} MB free); the outputs were written, the history "
                               "was left unchanged; free some space or choose another --db")

    def _checkpoint(self) -> None:
        """Write the committed record into the file itself, now rather than at some later open.

        Should that fail (a full disk: DuckDB then invalidates the database), the record exists
        only in the write-ahead log, and the file holds the blocks written so far. Both are
        undone while the lock is held (:meth:`FileState.undo_commit`): the history is left as
        it was, and the disk gets its space back.
        """
        assert self._before is not None
        try:
            self._cursor.execute(f"CHECKPOINT {ALIAS}")
        except duckdb.Error as err:
            if not self._before.undo_commit(self.path):
                log.warning("%s: the compare is recorded in the write-ahead log, but it could not "
                            "be written into the file (%s); DuckDB completes it when the file is "
                            "next opened with space to spare", self.path, first_lines(err))
                return
            raise HistoryError(f"{self.path}: could not record the compare ({first_lines(err)}); "
                               "the outputs were written, the history was left unchanged"
                               ) from err

    def _wait_for_row(self) -> dict[str, Any]:
        self._go.wait()
        if self._stop.is_set() or self._row is None:
            raise Aborted
        return self._row

    def _before_commit(self) -> None:
        # the last point where an abort still leaves the file unchanged
        if self._stop.is_set():
            raise Aborted

    def _pass_gate(self) -> None:
        """Past this point the record commits whatever happens in the main thread."""
        with self._gate:
            if self._stop.is_set():
                raise Aborted
            self._committing = True
            interrupts.settle()


def row_group_rows(rows: int) -> int:
    """The history's row group size for recording a compare of ``rows`` output rows."""
    return ROW_GROUP_ROWS if rows > ROW_GROUP_ROWS else SMALL_ROW_GROUP_ROWS


def start_recording(con: duckdb.DuckDBPyConnection, mode: str, db_opt: str | Path | None,
                    output_dir: Path, rows: int) -> Recorder:
    """Start recording one compare into its history database (``--db``, see
    :func:`resolve_db_path`).

    Called once the rows are matched: the history is prepared while the result is computed, and
    the output rows are inserted in a thread while the outputs are written (for compares of up
    to ``OVERLAP_MAX_ROWS`` rows); the record is committed only once they exist
    (:meth:`Recorder.finish`).
    """
    return Recorder(con, mode, resolve_db_path(db_opt, output_dir),
                    overlap=rows <= OVERLAP_MAX_ROWS, rows=rows)


def _insert_compare(cur: duckdb.DuckDBPyConnection, compare_id: int,
                    row: dict[str, Any]) -> None:
    cols = ["compare_id", *row]
    cur.execute(f"INSERT INTO {ALIAS}.compares ({', '.join(cols)}) "
                f"VALUES ({', '.join('?' for _ in cols)})", [compare_id, *row.values()])


# The compare's names with their keys, in the temporary table hist_keys of the recorder's
# connection: each distinct name once, with the positions it takes (out_seq * 3 + slot: op, NPU,
# bench name within a row), its key (the history's, or the next ones after the largest in the
# order of their first position: docs/schema.md, "names") and whether it is new to the history.
# The rows then get their keys from these positions, joined on out_seq (integers), not by three
# joins on the names of the history's whole dictionary (~0.04 s CPU less on a 100k-row compare).
_NEW_NAMES = f"""
CREATE OR REPLACE TEMP TABLE hist_keys AS
WITH seen AS (
  SELECT name, min(pos) AS first, list(pos) AS positions
  FROM (SELECT out_seq * 3 + slot AS pos, name
        FROM (SELECT out_seq, unnest([0, 1, 2]) AS slot,
                     unnest([op_name, npu_name, bench_name]) AS name FROM {{rows}}))
  WHERE name IS NOT NULL GROUP BY name
), known AS (
  SELECT s.*, h.name_id FROM seen s LEFT JOIN {ALIAS}.names h ON h.name = s.name
)
SELECT name, first, positions, name_id IS NULL AS new,
       coalesce(name_id, (SELECT coalesce(max(name_id), 0) FROM {ALIAS}.names)
                + (row_number() OVER (PARTITION BY name_id IS NULL ORDER BY first))::INTEGER)
         AS name_id
FROM known
"""
_INSERT_NEW_NAMES = (f"INSERT INTO {ALIAS}.names SELECT name_id, name FROM hist_keys WHERE new "
                     "ORDER BY name_id")
#: The columns of result_rows the history keeps as keys into its ``terms`` (schema version 8:
#: ``<column>_id`` in result_data; docs/schema.md): the shapes (:data:`RESULT_CLASS_COLUMNS`'
#: texts too in versions 8 to 11)
RESULT_TERMS = ("npu_shape", "bench_shape")
#: result_rows' and blame_rows' columns kept as term keys in versions 8 to 11 and 8 to 10
RESULT_TERMS_8 = ("kind", "npu_dtype", "bench_dtype", "npu_shape", "bench_shape", "result",
                  "verdict", "err_message", "mark", "mark_rules")
BLAME_TERMS = ("io", "role", "direction", "err_kind", "floor_source", "verdict", "link")
#: result_rows' bench-side columns and their NPU-side twins. A pool worker sends a row's bench
#: name and shape NULL (their bytes not sent) where both equal their NPU twins, none NULL (~99.98 %
#: of a ranks x steps run's rows), and says so in :data:`BENCH_SAME` (a boolean column): the
#: driver takes the NPU side's keys there (msq.history.run_recorder), the history stores the same
#: keys. ~1.3 MB less Arrow a 24,500-row pair to write into /dev/shm, map and key. (The dtypes
#: are sent whole: the driver's classes read them as texts, and making a text back costs more
#: than its lookup.)
BENCH_TWINS = (("bench_name", "npu_name"), ("bench_shape", "npu_shape"))
#: The result rows' column that says a row's bench side was sent as its NPU side (see
#: :data:`BENCH_TWINS`; not a history column: the driver drops it)
BENCH_SAME = "bench_same"
#: blame_rows' names, those of its output row (the result row of its out_seq). A pool worker
#: leaves both columns out of a pair's blame rows where every row's are its output row's (a
#: ranks x steps run's every row: ~1.8 MB of Arrow a 24,500-row pair); the driver then takes
#: the keys its output rows' names got (msq.history.run_recorder._Names.key_blame).
BLAME_NAMES = ("op_name", "npu_name")
#: result_rows' columns the history keeps together, each distinct combination of them once in
#: ``result_classes`` (schema version 12: ``result_data.class_id``, its key; docs/schema.md)
RESULT_CLASS_COLUMNS = ("kind", "npu_dtype", "bench_dtype", "result", "verdict", "failing",
                        "err_message", "mark", "mark_rules", "severity")


def _same_class(columns: tuple[str, ...]) -> str:
    """``c`` and ``r`` (two relations' aliases) of the same class: every one of ``columns``
    equal, NULL to NULL."""
    return " AND ".join(f"c.{c} IS NOT DISTINCT FROM r.{c}" for c in columns)


# A compare's classes (of result_classes or blame_classes: the table and its columns) the history
# lacks, keyed after the largest in the order of their first row (as run_recorder._Classes keys
# them)
_NEW_CLASSES = f"""
INSERT INTO {ALIAS}.{{table}}
SELECT (SELECT coalesce(max(class_id), 0) FROM {ALIAS}.{{table}})
         + (row_number() OVER (ORDER BY first))::INTEGER, {{columns}}
FROM (SELECT {{columns}}, min(out_seq) AS first FROM {{rows}} GROUP BY ALL) r
WHERE NOT EXISTS (SELECT 1 FROM {ALIAS}.{{table}} c WHERE {{same}})
"""


def insert_classes(con: duckdb.DuckDBPyConnection, rows: str, table: str,
                   columns: tuple[str, ...]) -> None:
    """The classes (combinations of ``columns``) of the relation ``rows`` that the history's
    ``table`` lacks, keyed into it. Inside the caller's transaction."""
    con.execute(_NEW_CLASSES.format(table=table, columns=", ".join(columns), rows=rows,
                                    same=_same_class(columns)))


# The rows with their names' keys (0: NULL, the absent side), from hist_keys' positions.
_KEYED_ROWS = f"""
INSERT INTO {ALIAS}.result_data BY NAME
SELECT ?::BIGINT AS compare_id,
       r.* EXCLUDE (op_name, npu_name, bench_name{{texts}}, {{terms}},
                    {", ".join(RESULT_CLASS_COLUMNS)}),
       coalesce(k.op_id, 0) AS op_id, coalesce(k.npu_id, 0) AS npu_id,
       coalesce(k.bench_id, 0) AS bench_id, {{term_ids}}{{texts_id}}, c.class_id
FROM {{rows}} r
{{texts_join}}
LEFT JOIN {ALIAS}.result_classes c ON {_same_class(RESULT_CLASS_COLUMNS)}
LEFT JOIN (SELECT pos // 3 AS out_seq, max(name_id) FILTER (pos % 3 = 0) AS op_id,
                  max(name_id) FILTER (pos % 3 = 1) AS npu_id,
                  max(name_id) FILTER (pos % 3 = 2) AS bench_id
           FROM (SELECT unnest(positions) AS pos, name_id FROM hist_keys)
           GROUP BY ALL) k USING (out_seq)
{{term_joins}}
"""

# A compare's terms the history lacks, keyed after the largest in their sorted order (as
# run_recorder._Terms keys them); read from the rows' term columns alone (the rows' other
# columns are not computed for it)
_NEW_TERMS = f"""
INSERT INTO {ALIAS}.terms
SELECT (SELECT coalesce(max(term_id), 0) FROM {ALIAS}.terms)
         + (row_number() OVER (ORDER BY term))::INTEGER, term
FROM (SELECT DISTINCT unnest([{{terms}}]) AS term FROM {{rows}}) u
WHERE term IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {ALIAS}.terms h WHERE h.term = u.term)
"""

# A compare's lists of texts (result_data.texts_id, schema version 10) the history lacks, keyed
# after the largest in the order of their first row (as run_recorder._Texts keys them). DuckDB
# compares lists member by member, a NULL member equal to a NULL member (so does the join of
# _KEYED_ROWS).
_NEW_TEXTS = f"""
INSERT INTO {ALIAS}.texts
SELECT (SELECT coalesce(max(texts_id), 0) FROM {ALIAS}.texts)
         + (row_number() OVER (ORDER BY out_seq))::INTEGER, texts
FROM (SELECT out_seq, texts FROM {{rows}} WHERE texts IS NOT NULL
      QUALIFY row_number() OVER (PARTITION BY texts ORDER BY out_seq) = 1) u
WHERE NOT EXISTS (SELECT 1 FROM {ALIAS}.texts h WHERE h.texts = u.texts)
"""


def _keyed_terms(rows: str, columns: tuple[str, ...]) -> dict[str, str]:
    """What :data:`_KEYED_ROWS` and :data:`_KEYED_BLAME` take of ``columns`` (of ``rows``,
    their alias in the query): their list, their keys as ``<column>_id`` and the joins to
    ``terms`` that find them."""
    return {"terms": ", ".join(columns),
            "term_ids": ", ".join(f"t_{c}.term_id AS {c}_id" for c in columns),
            "term_joins": "\n".join(f"LEFT JOIN {ALIAS}.terms t_{c} ON t_{c}.term = {rows}.{c}"
                                    for c in columns)}


def insert_terms(con: duckdb.DuckDBPyConnection, rows: str, columns: tuple[str, ...]) -> None:
    """The terms of ``columns`` of the relation ``rows`` that the history lacks, keyed into its
    ``terms``. Inside the caller's transaction."""
    con.execute(_NEW_TERMS.format(terms=", ".join(columns), rows=rows))


# Blame's rows (schema version 6: blame_rows is a view of blame_runs and blame_data): the names
# they hold that the history does not yet (op_name, npu_name and via, schema version 13; none when
# the compare's output rows went in first: a blame row is an output row, its via another's name),
# keyed after the largest in the order of their first row (op, NPU name, via within a row); their
# reasons likewise into reasons (schema version 13); then what every row of the compare shares,
# once; then the rows, with their names' and reasons' keys.
_NEW_BLAME_NAMES = f"""
INSERT INTO {ALIAS}.names
SELECT (SELECT coalesce(max(name_id), 0) FROM {ALIAS}.names)
         + (row_number() OVER (ORDER BY out_seq, slot))::INTEGER, name
FROM (SELECT out_seq, unnest([0, 1, 2]) AS slot, unnest([op_name, npu_name, via]) AS name
      FROM {{rows}}) u
WHERE name IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {ALIAS}.names h WHERE h.name = u.name)
QUALIFY row_number() OVER (PARTITION BY name ORDER BY out_seq, slot) = 1
"""
_NEW_REASONS = f"""
INSERT INTO {ALIAS}.reasons
SELECT (SELECT coalesce(max(reason_id), 0) FROM {ALIAS}.reasons)
         + (row_number() OVER (ORDER BY out_seq))::INTEGER, reason
FROM (SELECT out_seq, reason FROM {{rows}} u
      WHERE reason IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM {ALIAS}.reasons h WHERE h.reason = u.reason)
      QUALIFY row_number() OVER (PARTITION BY reason ORDER BY out_seq) = 1)
"""
_BLAME_RUN = f"""
INSERT INTO {ALIAS}.blame_runs
SELECT ?::BIGINT, run_id, floor_factor, amp_limit, noise_source FROM {{rows}} LIMIT 1
"""
#: blame_rows' columns that blame_runs holds, once a compare
BLAME_RUN_COLUMNS = ("run_id", "floor_factor", "amp_limit", "noise_source")
#: blame_rows' columns the history keeps together, each distinct combination of them once in
#: ``blame_classes`` (schema version 11: ``blame_data.class_id``, its key; docs/schema.md)
BLAME_CLASS_COLUMNS = ("io", "role", "direction", "is_module", "collective", "err_kind",
                       "floor_source", "verdict", "link")
_KEYED_BLAME = f"""
INSERT INTO {ALIAS}.blame_data BY NAME
SELECT ?::BIGINT AS compare_id,
       r.* EXCLUDE (op_name, npu_name, reason, via, {", ".join(BLAME_RUN_COLUMNS)},
                    {", ".join(BLAME_CLASS_COLUMNS)}),
       coalesce(o.name_id, 0) AS op_id, coalesce(n.name_id, 0) AS npu_id, c.class_id,
       coalesce(rs.reason_id, 0) AS reason_id, coalesce(v.name_id, 0) AS via_id
FROM {{rows}} r
LEFT JOIN {ALIAS}.names o ON o.name = r.op_name
LEFT JOIN {ALIAS}.names n ON n.name = r.npu_name
LEFT JOIN {ALIAS}.names v ON v.name = r.via
LEFT JOIN {ALIAS}.reasons rs ON rs.reason = r.reason
LEFT JOIN {ALIAS}.blame_classes c ON {_same_class(BLAME_CLASS_COLUMNS)}
"""


def insert_blame_table(con: duckdb.DuckDBPyConnection, table: str, rows: str,
                       compare_id: int) -> None:
    """Append one compare's rows of the history table ``table`` (``blame_rows`` or
    ``blame_edges``, as ``prepare_blame``'s SELECTs give them: the relation ``rows``) to the
    attached history; ``blame_rows`` goes into its storage, ``blame_runs``, ``blame_classes``
    and ``blame_data``. Inside the caller's transaction."""
    if table != "blame_rows":
        con.execute(f"INSERT INTO {ALIAS}.{table} BY NAME SELECT ?::BIGINT AS compare_id, * "
                    f"FROM {rows}", [compare_id])
        return
    con.execute(_NEW_BLAME_NAMES.format(rows=rows))
    con.execute(_NEW_REASONS.format(rows=rows))
    insert_classes(con, rows, "blame_classes", BLAME_CLASS_COLUMNS)
    con.execute(_BLAME_RUN.format(rows=rows), [compare_id])
    con.execute(_KEYED_BLAME.format(rows=rows), [compare_id])


def names_query(source: str) -> str:
    """The names of each output row (``hist_row_names``) from ``source``, the result's rows
    (out_seq, kind, "NPU Name", "Bench Name"), with each row's op (``hist_row_ops``, a table of
    the recorder's connection: :func:`prepare_ops`)."""
    names_sql = db.sql_file("history/record/hist_row_names.sql").body
    # the names query reads hist_result: here the result's names and each row's op
    return (f"WITH hist_result AS (SELECT s.*, o.op_name FROM {source} s "
            f"LEFT JOIN hist_row_ops o USING (out_seq))\n{names_sql}")


def insert_names(con: duckdb.DuckDBPyConnection, names: str) -> None:
    """The names of one compare's rows (the relation ``names``: out_seq, op_name, npu_name,
    bench_name) keyed into the temporary table ``hist_keys``, the new ones inserted into the
    history's ``names``. Inside the caller's transaction."""
    con.execute(_NEW_NAMES.format(rows=names))
    con.execute(_INSERT_NEW_NAMES)


def insert_result_rows(con: duckdb.DuckDBPyConnection, rows: str, compare_id: int,
                       names: str | None = None, new_names: bool = True,
                       texts: bool = True) -> None:
    """Append one compare's output rows (the relation ``rows``, in ``result_rows``' shape
    without compare_id) to the attached history: new names into ``names``, new terms into
    ``terms`` and new classes into ``result_classes`` (schema version 12), the rows with their
    names', terms' and class's keys into ``result_data``. Inside the
    caller's transaction. The rows' lists of texts go into ``texts``, the rows holding their
    keys (schema version 10; ``texts``: False for rows without the column, md5 mode's).

    ``names``: a cheaper relation of the rows' names alone (out_seq, op_name, npu_name,
    bench_name) to find the new ones in; ``rows`` by default. ``new_names``: False when the
    caller has keyed them already (:func:`insert_names`, on this connection)."""
    if new_names:
        insert_names(con, names or rows)
    insert_terms(con, rows, RESULT_TERMS)
    insert_classes(con, rows, "result_classes", RESULT_CLASS_COLUMNS)
    keyed = {"texts": "", "texts_id": "", "texts_join": ""}
    if texts:
        con.execute(_NEW_TEXTS.format(rows=rows))
        keyed = {"texts": ", texts", "texts_id": ", t_texts.texts_id",
                 "texts_join": f"LEFT JOIN {ALIAS}.texts t_texts ON t_texts.texts = r.texts"}
    con.execute(_KEYED_ROWS.format(rows=rows, **keyed, **_keyed_terms("r", RESULT_TERMS)),
                [compare_id])
    con.execute("DROP TABLE IF EXISTS temp.hist_keys")


def prepare_ops(con: duckdb.DuckDBPyConnection, table: bool = False,
                macros: bool = True) -> None:
    """The history macros and the view ``hist_row_ops`` (each output row's op) in ``con``'s
    database: they need the matched rows only. Outside the record's transaction, which may write
    to the history file alone.

    ``table``: ``hist_row_ops`` as a temporary table of ``con`` instead (its rows computed now,
    once; the matched rows do not change after this). ``macros``: False where the database has
    them already (a pool worker's kept one: msq.pair_tables.WorkerDatabase)."""
    if macros:
        db.run_schema(con, "history/record/macros")
    ops = db.sql_file("history/record/hist_row_ops.sql")
    if not table:
        db.create_view(con, ops)
        return
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {ops.name} AS {ops.body}")
    except duckdb.Error as err:
        raise SqlFileError(f"{ops.origin}: {err}") from err


def prepare_rows(con: duckdb.DuckDBPyConnection, mode: str, ops: bool = True) -> str:
    """Create the view ``temp.hist_result`` of the compare's rows; return the SELECT to insert.

    The result and marks are tables by now (materialised once for every reader), so the view
    costs nothing to bind; it is temporary, private to ``con``, the recorder's own connection.
    ``ops``: create what :func:`prepare_ops` does first (False: done already).
    """
    if ops:
        prepare_ops(con)
    # statistics: the rows of stat_result, its cells as plain columns; those of result_statistics
    # where that is a table (--compat's, a user's --sql-dir result: stat_result is a view then)
    cells = "_cells" if mode == "statistics" and db.has_table(con, "result_statistics") else ""
    source = db.sql_file(f"history/record/hist_source_{mode}{cells}.sql")
    try:
        con.execute(f"CREATE OR REPLACE TEMP VIEW hist_result AS {source.body}")
    except duckdb.Error as err:
        raise SqlFileError(f"{source.origin}: {err}") from err
    return db.sql_file(f"history/record/hist_rows_{mode}.sql").body


def prepare_blame(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """``(history table, SELECT)`` of the compare's blame rows and edges; none when the compare
    has no blame (``--compat msprobe-1.1``, ``--no-blame``)."""
    if not db.has_table(con, "blame_rows", batched=True):
        return []
    return [(table, db.sql_file(f"history/record/hist_{table}.sql").body)
            for table in ("blame_rows", "blame_edges")]


def _rollback(con: duckdb.DuckDBPyConnection, home: str) -> None:
    for statement in ("ROLLBACK", f'USE "{home}"'):
        try:
            con.execute(statement)
        except duckdb.Error:
            pass
