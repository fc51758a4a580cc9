"""The driver's half of a directory compare: every output and the history, from the pairs' tables.

The engines (a local process pool, or Ray tasks) compute each rank x step pair into a
:class:`~msq.pair_tables.PairTables`; :class:`RunWriter` takes them in pair order and, with one
DuckDB connection, registers each pair's Arrow tables under the names the exporters read
(``result_<mode>``, ``marks``, ``settings``, and blame's ``blame_rows``, ``blame_params``,
``hist_blame_edges``), writes the workbook, CSV/Parquet and advisor file (and blame's sheet and
files) with the same code as a single-card compare, and records the pair in the history.

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
from msq.blame.export import write_blame_outputs
from msq.blame.ranks import RankBlame
from msq.blame.summary import summarize_recorded
from msq.config import Options, SingleInput
from msq.export.outputs import write_outputs
from msq.history import RecordContext, compare_row, parse_rank_step, resolve_db_path
from msq.history.recorder import ALIAS
from msq.history.run_recorder import RunRecorder
from msq.pipeline import new_result, report_writer
from msq.result import CompareResult

if TYPE_CHECKING:
    from msq.distributed import PairJob
    from msq.pair_tables import PairTables

log = logging.getLogger("msq")


class RunWriter:
    """Writes the outputs and history records of a directory compare's pairs, one at a time."""

    def __init__(self, output_dir: Path, opts: Options) -> None:
        self.output_dir, self.opts = output_dir, opts
        self.con = db.connect(threads=opts.workers)
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
        """Write one pair's outputs and record it; a pair stopped half-way leaves no file."""
        # a Ctrl-C held while the previous pair committed stops the run before this pair
        interrupts.unsettle()
        mode = tables.mode
        # paths, rank and step from the driver's job: a Ray worker's working directory is not ours
        inp = SingleInput(job.npu[0], job.bench[0], job.npu[1])
        result = new_result(mode, inp)
        result.title = job.title
        for name, value in tables.summary.items():
            setattr(result, name, value)
        names = {f"result_{mode}": tables.result, "settings": tables.settings}
        if tables.marks is not None:
            names["marks"] = tables.marks
        if tables.row_ops is not None:
            names["hist_row_ops"] = tables.row_ops
        names.update(tables.blame_tables)  # blame_rows, blame_params, hist_blame_edges
        result.blame = tables.blame
        for name, table in names.items():
            # tables, not registered views: the exporters also read through cursors
            self.con.register("_pair_in", table)
            self.con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _pair_in')
            self.con.unregister("_pair_in")
        if tables.blame_tables:  # the blame sheet, files and HTML report read the view blame
            db.create_view(self.con, db.sql_file("compare/blame/blame.sql"))
        try:
            if result.rows == 0:
                log.warning("Can`t match any op: no rows to compare; no workbook written")
            else:
                stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(tables.started))
                write_outputs(self.con, mode, self.output_dir, self.opts, job.suffix, stamp,
                              result, report_writer(self.con, mode, self.opts, result))
                if result.blame is not None:
                    write_blame_outputs(self.con, self.output_dir, self.opts, job.suffix, stamp,
                                        result)
            if self.history is not None:
                ctx = RecordContext(inp, self.opts, result, self.output_dir, tables.started,
                                    tables.framework)
                result.history_id = self.history.record(mode, compare_row(ctx, self.con),
                                                        blame=bool(tables.blame_tables))
                result.history_db = Path(os.path.abspath(self.history.path))
        except BaseException:
            with interrupts.deferred():  # whole: a second Ctrl-C must not keep half of them
                for path in result.files:  # written, but the pair is not recorded: drop them
                    Path(path).unlink(missing_ok=True)
            raise
        finally:
            self.con.execute("DROP VIEW IF EXISTS blame")  # a pair without blame has none
            for name in names:
                self.con.execute(f'DROP TABLE "{name}"')
        result.seconds = time.time() - tables.started
        # the pair is written and recorded: a Ctrl-C held meanwhile stops the run now (and
        # signals are no longer held while the next pair is awaited)
        interrupts.unsettle()
        return result

    def close(self) -> None:
        if self.history is not None:
            self.history.close()
        self.con.close()
