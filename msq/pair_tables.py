"""One rank x step pair of a directory compare, computed into tables (the worker's half).

:func:`compute_pair` runs the compare pipeline of one pair up to its result: the workbook rows
(``result_<mode>``), their colours (``marks``), each row's op (what the history records), the
settings row, the summary counts and, in the default mode, the pair's blame (its rows, thresholds
and dataflow edges). It writes nothing but the ``-lm`` mapping file (which the
pair's own compare reads back); the driver (:mod:`msq.run_writer`) writes the workbooks, CSV,
Parquet, advisor files and the history from these tables, the same way for every engine. It runs
in a process-pool worker (``--engine local``) or as a Ray task (``--engine ray``): everything it
returns pickles, Arrow tables travel as Arrow.

Log records of the pair (warnings about its dumps) are kept and handed to the driver, which
logs them in pair order: both engines print the same lines, and a Ray worker's lines are not lost.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msq import interrupts
from msq.errors import InputError, MsqError

if TYPE_CHECKING:
    import pyarrow as pa

    from msq.config import Options
    from msq.distributed import PairJob

log = logging.getLogger("msq")

#: The counts and the advisor finding of a pair (the CompareResult fields the driver copies).
SUMMARY_FIELDS = ("rows", "matched", "unmatched_npu", "unmatched_bench", "red", "yellow",
                  "suspect_line", "suspect", "advice", "suspect_row", "failing", "first_red",
                  "compat", "suspect_reason", "unmatched_reasons", "nothing_compared")


@dataclass
class PairTables:
    """What one pair's compare produced, for the driver to write and record."""

    mode: str
    framework: str
    started: float                      # time.time() when the pair's compare started
    summary: dict[str, Any]             # SUMMARY_FIELDS
    result: pa.Table                    # result_<mode>: the output rows, out_seq order
    marks: pa.Table | None              # marks (red / yellow and the rules); None in md5 mode
    settings: pa.Table                  # the one settings row (stack, cross_framework, ...)
    row_ops: pa.Table | None            # hist_row_ops: out_seq -> op_name (history, html)
    blame: Any = None                   # msq.blame.summary.BlameSummary (None: blame is off)
    blame_tables: dict[str, pa.Table] = field(default_factory=dict)  # BLAME_TABLES, with blame
    logs: list[logging.LogRecord] = field(default_factory=list)
    node: str = ""                      # where it ran (set by the Ray engine)


@dataclass
class PairFailure:
    """A pair that failed for its own reasons (a broken dump): reported, the others go on."""

    message: str
    logs: list[logging.LogRecord] = field(default_factory=list)
    node: str = ""


def compute_pair(job: PairJob, opts: Options, output_dir: Path) -> PairTables | PairFailure:
    """Compare one pair into tables; a failure of the pair's own comes back as PairFailure."""
    with _kept_logs() as records:
        try:
            tables = _compute(job, opts, output_dir)
        except MsqError as err:
            return PairFailure(f"{job.title}: {err}", records)
    tables.logs = records
    return tables


def _compute(job: PairJob, opts: Options, output_dir: Path) -> PairTables:
    from msq import db
    from msq.config import SingleInput
    from msq.pipeline import compute
    from msq.tensors_bridge import EarlyMetrics

    inp = SingleInput(job.npu[0], job.bench[0], job.npu[1])
    if not inp.npu_json.is_file() or not inp.bench_json.is_file():
        raise InputError(f"{inp.npu_json} / {inp.bench_json}: both must be dump.json files")
    started = time.time()
    early = con = None
    try:
        with interrupts.deferred():  # a Ctrl-C while the pool starts stops it once it is held
            early = EarlyMetrics.start(inp, opts)
        con, mode, framework, result = compute(inp, opts, output_dir, job.suffix, early)
        return PairTables(
            mode=mode, framework=framework, started=started,
            summary={name: getattr(result, name) for name in SUMMARY_FIELDS},
            result=_arrow(con, f"SELECT * FROM result_{mode}"),
            marks=_arrow(con, "SELECT * FROM marks") if mode != "md5" else None,
            settings=_arrow(con, "SELECT * FROM settings"),
            # each row's op: the history's rows and the HTML report's are keyed by it
            row_ops=_arrow(con, db.sql_file("history/record/hist_row_ops.sql").body)
            if opts.record or "html" in opts.formats else None,
            blame=result.blame,
            blame_tables=_blame_tables(con) if result.blame is not None else {})
    finally:
        if early is not None:
            early.cancel()
        if con is not None:
            con.close()


#: A pair's blame, as the driver's outputs and history read it: its rows and thresholds (the
#: ``blame`` view and sql/history/record/hist_blame_rows.sql read them) and its dataflow edges
#: already in the history's shape (their SQL needs the pair's ``compare_rows``).
BLAME_TABLES = {"blame_rows": "SELECT * FROM blame_rows",
                "blame_params": "SELECT * FROM blame_params",
                "hist_blame_edges": "history/record/hist_blame_edges.sql"}


def _blame_tables(con: Any) -> dict[str, pa.Table]:
    from msq import db

    return {name: _arrow(con, db.sql_file(sql).body if sql.endswith(".sql") else sql)
            for name, sql in BLAME_TABLES.items()}


def _arrow(con: Any, sql: str) -> pa.Table:
    # a cursor: the connection may still hold an unfinished result (DuckDB 2 refuses new work)
    return con.cursor().sql(sql).to_arrow_table()


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
