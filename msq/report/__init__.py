"""The HTML report: one self-contained file showing where the error enters and how it spreads.

Two entry points, one payload builder (:mod:`msq.report.payload`) over the history's row shape:

- :func:`write_compare_report`: ``msq compare ... --format html``, from the compare's own
  connection while its outputs are written;
- :func:`write_history_report`: ``msq report --db HISTORY``, one compare or a whole directory run
  from the history database.

The page (:mod:`msq.report.page`) works offline from a file:// URL: the chart library (uPlot,
vendored in ``assets/``), the page's script and the data are inline. See docs/report.md.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from msq.errors import ExportError
from msq.report import page, payload
from msq.report.source import ReportSource, history_source, live_source

if TYPE_CHECKING:
    import duckdb

    from msq.config import Options
    from msq.result import CompareResult

__all__ = ["write_compare_report", "write_history_report"]
log = logging.getLogger("msq")


def write_compare_report(con: duckdb.DuckDBPyConnection, mode: str, path: Path, opts: Options,
                         result: CompareResult) -> None:
    """Write the report of the compare whose connection is ``con`` (``--format html``).

    Args:
        con: the compare's connection (its result and marks tables exist).
        mode: statistics, md5 or tensor.
        path: the HTML file to write.
        opts: the compare's options.
        result: its counts and advisor finding.
    """
    source = live_source(con, mode, result, opts)
    try:
        _write(source, path)
    finally:
        source.close()


def write_history_report(db_path: Path, path: Path, *, compare_id: int | None = None,
                         label: str | None = None, timeout: float | None = None) -> int:
    """Write the report of one compare or one run from the history database (``msq report``).

    Args:
        db_path: the history database.
        path: the HTML file to write.
        compare_id: one compare (``--compare``).
        label: one run: the newest compare of each step and rank with this label (``--label``).
        timeout: seconds to wait for a locked database.

    Returns:
        How many compares the report shows.
    """
    source = history_source(db_path, compare_id, label, timeout)
    try:
        _write(source, path)
        return len(source.compares)
    finally:
        source.close()


def _write(source: ReportSource, path: Path) -> None:
    started = time.perf_counter()
    data = payload.build(source)
    try:
        page.write(data, path)
    except OSError as err:
        raise ExportError(f"{path}: cannot write the report ({err.strerror}); check the folder "
                          "exists and is writable, or choose another -o") from None
    log.debug("report: %d rows, %.1f MB in %.2fs", data.rows, path.stat().st_size / 1e6,
              time.perf_counter() - started)
