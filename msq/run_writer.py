"""The driver's half of a directory compare: every pair's files published, its history recorded.

The engines (a local process pool, or Ray tasks) compute each rank x step pair into a
:class:`~msq.pair_tables.PairTables`: its output files already rendered (bytes, by the same
exporters as a single-card compare) and its history rows (Arrow). :class:`RunWriter` takes them
in pair order, publishes each file under its name (atomically, never over another file: a taken
name gets ``_2``, ...), and appends the rows to the history: no DuckDB query of the pair runs
here, so the driver keeps pace with the workers.

The history is written here only (msq/history/run_recorder.py): attached once for the whole run;
no worker opens the database. A few pairs share a transaction (:data:`BATCH_PAIRS`): it commits
once it holds that many, when the driver starts waiting for the next pair
(:meth:`RunWriter.commit`, the engines' ``idle``), and when the run ends or stops (Ctrl-C
included). So a stopped run keeps exactly the pairs whose files it published, and ``--resume``
finds them (:meth:`RunWriter.recorded`). A pair that cannot be recorded loses its files, and
the pairs before it in the transaction are recorded again and committed without it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msq import db, interrupts
from msq.blame.ranks import RankBlame
from msq.blame.summary import summarize_recorded_many
from msq.config import Options, SingleInput
from msq.export.outputs import place_file
from msq.history import RecordContext, compare_row, parse_rank_step, resolve_db_path
from msq.history.recorder import ALIAS
from msq.history.run_recorder import RunRecorder
from msq.pipeline import new_result
from msq.result import CompareResult

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from msq.distributed import PairJob
    from msq.pair_tables import PairTables

log = logging.getLogger("msq")

#: DuckDB's memory limit in the driver (it appends each pair's rows, ~20 MB of Arrow a 24,000-row
#: pair with blame, a few pairs a transaction; what does not fit is written to the file as it
#: is appended). 384 MB let its cache of written blocks hold ~300 MB more than 160 MB does on
#: root-8x8-5000, for no CPU saved (bench/README "Session 19: lead")
DRIVER_MEMORY = "160MB"

#: DuckDB's compressions the driver does not try on the history's columns: ALP (and ALP-RD) on
#: its DOUBLE columns (23 a pair's row; statistics that are neither decimals nor alike) was
#: ~50 M of the ~760 M instructions recording a 24,500-row pair cost, to keep the file ~7 %
#: smaller (RLE, constant and uncompressed remain; bench/README, "Session 16: hist")
DRIVER_SKIPS_COMPRESSION = "alp,alprd"

#: Pairs recorded in one transaction at most. A 24,500-row pair committed alone writes its ~20 MB
#: of rows into the WAL (~0.12 s CPU), and the checkpoint writes them again, compressed; four
#: pairs' rows fill the history's row groups, which DuckDB writes straight into the file,
#: compressed, once: 0.26 -> 0.17 s CPU a pair (bench/README, "Session 8: pairs").
BATCH_PAIRS = 4


@dataclass
class _Held:
    """A pair appended to the open transaction, kept until it commits: its rows are appended
    again if a later pair of the transaction fails (DuckDB then drops the whole transaction)."""

    result: CompareResult
    rows: dict[str, pa.Table]
    row: dict[str, Any]


class RunWriter:
    """Publishes the files and records the history rows of a directory compare's pairs, one at
    a time."""

    def __init__(self, output_dir: Path, opts: Options) -> None:
        self.output_dir, self.opts = output_dir, opts
        # one DuckDB thread with the local engine: the pool's workers fill the cores, and a
        # second thread of the driver's appends only competed with them (0.185 -> 0.15 s CPU a
        # 24,500-row pair, four pairs a transaction; bench/README, "Session 8: pairs")
        self.con = db.connect(threads=opts.workers if opts.engine == "ray" else 1)
        # DuckDB keeps the history's written blocks cached up to 80 % of the RAM: the driver
        # grew to ~0.9 GB on 64 pairs of 24,000 rows, beside two busy workers. Its blocks are
        # in the file already, so a cap only drops them from the cache.
        self.con.execute(f"SET memory_limit = '{DRIVER_MEMORY}'")
        self.con.execute(f"SET disabled_compression_methods = '{DRIVER_SKIPS_COMPRESSION}'")
        # its blocks (the appended row groups, the checkpoint's compression buffers) are kept
        # for the next transaction's, not faulted in anew each time (~50,000 page faults of a
        # root-8x8-5000 run; bench/README "Session 26: lead")
        db.keep_blocks(self.con, DRIVER_MEMORY)
        self.history: RunRecorder | None = None
        self._held: list[_Held] = []  # the pairs of the open transaction
        self.commits = 0  # transactions committed (-vv's driver line)
        self._closed = False
        if opts.record:
            self.history = RunRecorder(self.con, resolve_db_path(opts.db, output_dir))

    def recorded(self, jobs: list[PairJob]) -> set[str]:
        """NPU dump paths of the jobs this run already recorded (``--resume``)."""
        return self.history.recorded(self.output_dir, self.opts) if self.history else set()

    def recorded_blame(self, jobs: list[PairJob]) -> list[tuple[RankBlame, str]]:
        """The blame the history keeps of the jobs this run already recorded (``--resume``),
        each with its run id, in compare order."""
        if self.history is None:
            return []
        ids = self.history.recorded_ids(self.output_dir, self.opts)
        of_job = {str(job.npu[0].absolute()): job for job in jobs}
        # every skipped pair's blame in one query a figure (one compare at a time: ~0.07 s each,
        # ~5 s for a 64-pair run resumed at its end)
        summaries = summarize_recorded_many(self.con, ALIAS, [ids[k] for k in of_job if k in ids])
        found: list[tuple[int, RankBlame, str]] = []
        for job in jobs:
            compare_id = ids.get(str(job.npu[0].absolute()))
            recorded = None if compare_id is None else summaries.get(compare_id)
            if compare_id is not None and recorded is not None:
                summary, run_id = recorded
                rank, step = parse_rank_step(job.npu[0])
                summary.rank = rank
                found.append((compare_id, RankBlame(rank, step, summary, job.title), run_id))
        return [(part, run_id) for _, part, run_id in sorted(found, key=lambda f: f[0])]

    def write(self, job: PairJob, tables: PairTables) -> CompareResult:
        """Publish one pair's files and append its rows to the open transaction (committed with
        the next :data:`BATCH_PAIRS` pairs at most, see :meth:`commit`); a pair stopped
        half-way leaves no file, and the pairs before it are kept."""
        # a Ctrl-C held while the previous pairs committed stops the run before this pair
        interrupts.unsettle()
        mode = tables.mode
        # paths, rank and step from the driver's job: a Ray worker's working directory is not ours
        inp = SingleInput(job.npu[0], job.bench[0], job.npu[1])
        result = new_result(mode, inp)
        result.title = job.title
        for name, value in tables.summary.items():
            setattr(result, name, value)
        result.blame = tables.blame
        try:
            if result.rows == 0:
                log.warning("Can`t match any op: no rows to compare; no workbook written")
            for name, data in tables.files:
                path = place_file(self.output_dir / name, data)
                result.files.append(path)
                if name.startswith("blame"):
                    log.info("Blame is in %s", path)
            if self.history is not None:
                ctx = RecordContext(inp, self.opts, result, self.output_dir, tables.started,
                                    tables.framework)
                row = compare_row(ctx, tables.cross_framework)
                if not self._held:
                    self.history.begin()
                result.history_id = self.history.append(tables.history, row)
                result.history_db = Path(os.path.abspath(self.history.path))
                self._held.append(_Held(result, tables.history, row))
        except BaseException:
            with interrupts.deferred():  # whole: a second Ctrl-C must not keep half of them
                _remove_files(result)  # written, but the pair is not recorded: drop them
                if self.history is not None and self._held and self._held[-1].result is result:
                    self._held.pop()
                self._record_again()
            raise
        result.seconds = time.time() - tables.started
        if len(self._held) >= BATCH_PAIRS:
            self.commit()
        return result

    def commit(self) -> None:
        """Commit the pairs appended since the last commit (then a Ctrl-C held meanwhile stops
        the run). The engines call it when they start waiting for the next pair."""
        self._commit()
        interrupts.unsettle()

    def _commit(self) -> None:
        if self.history is None or not self._held:
            return
        held, self._held = self._held, []
        try:
            self.history.commit()
            self.commits += 1
        except BaseException:
            with interrupts.deferred():
                self.history.rollback()
                for pair in held:
                    _remove_files(pair.result)
            raise
        for pair in held:
            log.info("recorded compare %d (%d rows) in %s", pair.result.history_id,
                     pair.row.get("n_rows", 0), self.history.path)

    def _record_again(self) -> None:
        """After a pair failed to record (or was stopped): the transaction is dropped, and the
        pairs held in it appended again and committed, with the compare ids they were given;
        if that fails too, their files go as well."""
        if self.history is None:
            return
        self.history.rollback()
        held, self._held = self._held, []
        if not held:
            return
        try:
            self.history.begin()
            for pair in held:
                # the same compare id as before: appended in the same order onto the same
                # committed history (the driver holds the file's lock for the whole run)
                self.history.append(pair.rows, pair.row)
                self._held.append(pair)
        except BaseException:
            self.history.rollback()
            for pair in held:
                _remove_files(pair.result)
            self._held = []
            raise
        self._commit()

    def close(self, *, beside: bool = False) -> Closing | None:
        """Commit the pairs still held (also after an error or a Ctrl-C: their files are
        published), then checkpoint and detach the history; a second call does nothing.

        ``beside``: the checkpoint and detach (~0.2-0.4 s of a 64-pair run's end, with the pool's
        workers idle) run in a thread, while the caller weighs the run's blame on the other
        core; the returned :class:`Closing` waits for them (and raises their error). The held
        pairs are committed before this returns, either way."""
        if self._closed:
            return None
        self._closed = True
        try:
            with interrupts.deferred():  # whole: the held pairs are committed, or dropped
                self._commit()
        except BaseException:
            self._release()
            raise
        if not beside:
            self._release()
            return None
        return Closing(self._release)

    def _release(self) -> None:
        try:
            if self.history is not None:
                self.history.close()
        finally:
            self.con.close()


class Closing:
    """:meth:`RunWriter.close`'s checkpoint and detach, running in a thread (DuckDB releases
    the GIL); :meth:`wait` joins it and raises its error."""

    def __init__(self, work: Callable[[], None]) -> None:
        self._error: BaseException | None = None

        def run() -> None:
            try:
                work()
            except BaseException as err:  # noqa: BLE001 (raised again by wait)
                self._error = err

        with interrupts.deferred():  # the thread started and its handle held, or neither
            self._thread = threading.Thread(target=run, name="msq-history-close")
            self._thread.start()

    def wait(self) -> None:
        """Until the history is checkpointed and detached (whole: a Ctrl-C meanwhile is raised
        after); then its error, if any."""
        with interrupts.deferred():
            self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def _remove_files(result: CompareResult) -> None:
    for path in result.files:
        Path(path).unlink(missing_ok=True)
