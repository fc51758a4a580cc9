"""The driver's half of a directory compare: every pair's files published, its history recorded.

The engines (a local process pool, or Ray tasks) compute each rank x step pair into a
:class:`~msq.pair_tables.PairTables`: its output files already rendered (bytes, by the same
exporters as a single-card compare) and its history rows (Arrow). :class:`RunWriter` takes them
in pair order, publishes each file under its name (atomically, never over another file: a taken
name gets ``_2``, ...), and appends the rows to the history: no DuckDB query of the pair runs
here, so the driver keeps pace with the workers.

The history is written here only (msq/history/run_recorder.py): attached once for the whole run,
one transaction per pair, so a stopped run keeps exactly the pairs it finished and ``--resume``
finds them (:meth:`RunWriter.recorded`); no worker opens the database.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from msq import db, interrupts
from msq.blame.ranks import RankBlame
from msq.blame.summary import summarize_recorded
from msq.config import Options, SingleInput
from msq.export.outputs import place_file
from msq.history import RecordContext, compare_row, parse_rank_step, resolve_db_path
from msq.history.recorder import ALIAS
from msq.history.run_recorder import RunRecorder
from msq.pipeline import new_result
from msq.result import CompareResult

if TYPE_CHECKING:
    from msq.distributed import PairJob
    from msq.pair_tables import PairTables

log = logging.getLogger("msq")

#: DuckDB's memory limit in the driver (it appends each pair's rows, ~20 MB of Arrow a 24,000-row
#: pair with blame, in one transaction)
DRIVER_MEMORY = "384MB"


class RunWriter:
    """Publishes the files and records the history rows of a directory compare's pairs, one at
    a time."""

    def __init__(self, output_dir: Path, opts: Options) -> None:
        self.output_dir, self.opts = output_dir, opts
        self.con = db.connect(threads=opts.workers)
        # DuckDB keeps the history's written blocks cached up to 80 % of the RAM: the driver
        # grew to ~0.9 GB on 64 pairs of 24,000 rows, beside two busy workers. Its blocks are
        # in the file already, so a cap only drops them from the cache.
        self.con.execute(f"SET memory_limit = '{DRIVER_MEMORY}'")
        self.history: RunRecorder | None = None
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
        found: list[tuple[int, RankBlame, str]] = []
        for job in jobs:
            compare_id = ids.get(str(job.npu[0].absolute()))
            recorded = None if compare_id is None else summarize_recorded(self.con, ALIAS,
                                                                          compare_id)
            if compare_id is not None and recorded is not None:
                summary, run_id = recorded
                rank, step = parse_rank_step(job.npu[0])
                summary.rank = rank
                found.append((compare_id, RankBlame(rank, step, summary, job.title), run_id))
        return [(part, run_id) for _, part, run_id in sorted(found, key=lambda f: f[0])]

    def write(self, job: PairJob, tables: PairTables) -> CompareResult:
        """Publish one pair's files and record it; a pair stopped half-way leaves no file."""
        # a Ctrl-C held while the previous pair committed stops the run before this pair
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
                result.history_id = self.history.record(
                    tables.history, compare_row(ctx, tables.cross_framework))
                result.history_db = Path(os.path.abspath(self.history.path))
        except BaseException:
            with interrupts.deferred():  # whole: a second Ctrl-C must not keep half of them
                for path in result.files:  # written, but the pair is not recorded: drop them
                    Path(path).unlink(missing_ok=True)
            raise
        result.seconds = time.time() - tables.started
        # the pair is written and recorded: a Ctrl-C held meanwhile stops the run now (and
        # signals are no longer held while the next pair is awaited)
        interrupts.unsettle()
        return result

    def close(self) -> None:
        if self.history is not None:
            self.history.close()
        self.con.close()
