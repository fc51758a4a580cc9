"""Blame in a compare run: before the compares (the run's id, the reference noise run), in each
compare (the pipeline's hook), and after them (every rank and step weighed together, the JSON).

A *run* is one ``msq compare`` (or one API call): a single compare, or every rank and step of a
directory compare. Its compares share a ``run_id``, the scope of the history's ``blame_rank``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from msq import db
from msq.blame import noise
from msq.blame.compute import run_batch_blame, run_blame
from msq.blame.ranks import RankBlame, combine, new_run_id, write_json
from msq.blame.summary import BlameSummary, summarize

if TYPE_CHECKING:
    import pyarrow as pa

    from msq.config import Options, SingleInput
    from msq.result import CompareResult

log = logging.getLogger("msq")


@dataclass
class BlameRun:
    """What every compare of a run shares: its id and the reference noise run's bands."""

    run_id: str
    bands: pa.Table | None = None
    noise_source: str | None = None
    #: ``--resume``: the pairs an earlier, stopped run of this compare recorded (and this one
    #: skips), as the history keeps their blame; weighed with the new ones
    earlier: list[RankBlame] = field(default_factory=list)
    #: this run is a reference noise run: each compare's summary carries its rows' bands
    #: (msq.blame.noise.bands_of), which no other run reads (~0.03 s CPU of 50,000 rows fetched
    #: into Python on a 100,000-row compare)
    bands_wanted: bool = False


def blame_on(opts: Options) -> bool:
    """Blame runs in the default mode, unless ``--no-blame``."""
    return bool(opts.blame) and not opts.is_compat


def start_run(opts: Options, output_dir: Path, dispatch: noise.Dispatch) -> None:
    """Give the run its id and, when one is named, the reference noise run's bands (a noise
    compare.json is compared now with ``dispatch``, into ``output_dir/noise``). Idempotent."""
    if not blame_on(opts) or opts.blame_run is not None:
        return
    run = BlameRun(new_run_id())
    if opts.noise is not None:
        bands = noise.run_reference(Path(opts.noise), output_dir, opts, dispatch)
        run.bands, run.noise_source = bands, str(opts.noise)
    elif opts.noise_label is not None:
        run.bands = noise.from_history(opts.db, output_dir, opts.noise_label)
        run.noise_source = f"history label {opts.noise_label}"
    opts.blame_run = run


def blame_compare(con: duckdb.DuckDBPyConnection, mode: str, inp: SingleInput,
                  opts: Options, views_made: Collection[str] = ()) -> BlameSummary | None:
    """The pipeline's hook: blame of one compare (its tables stay in ``con`` for the outputs
    and the history); None when blame is off. ``row_error`` is a table by now.
    ``views_made``: blame's views created with the database (see :func:`run_blame`)."""
    if not blame_on(opts):
        return None
    from msq.history.recorder import parse_rank_step  # lazy: the history package is heavy

    run = opts.blame_run or BlameRun(new_run_id())
    rank, step = parse_rank_step(Path(inp.npu_json))
    run_blame(con, mode, Path(inp.npu_json), Path(inp.bench_json), run_id=run.run_id,
              bands=noise.bands_for(run.bands, rank, step), noise_source=run.noise_source,
              user_dirs=[Path(opts.sql_dir)] if opts.sql_dir else [], row_error_table=True,
              views_made=views_made)
    summary = summarize(con, bands=run.bands_wanted)
    summary.rank = rank
    return summary


def batch_blame(con: duckdb.DuckDBPyConnection, mode: str, dumps: list[tuple[int, Path, Path]],
                opts: Options, views_made: Collection[str] = (), all_names: bool = True) -> bool:
    """Blame of a batch of pairs (msq.pipeline.compute_batch), once for all of them
    (:func:`msq.blame.compute.run_batch_blame`); False when blame is off. ``dumps``: each pair's
    number, NPU and bench dump.json. Each pair's summary then comes of its own rows
    (msq.blame.summary.summarize_batch). The run has no noise bands (the batch refuses them).
    ``all_names``: see :func:`msq.blame.compute.run_batch_blame`."""
    if not blame_on(opts):
        return False
    run = opts.blame_run or BlameRun(new_run_id())
    if run.bands is not None:
        raise ValueError("a batch of pairs has no noise bands")
    run_batch_blame(con, mode, dumps, run_id=run.run_id, views_made=views_made,
                    all_names=all_names or run.bands_wanted)
    return True


class PendingBlame:
    """Blame of one compare, computed on its own cursor in a thread while the pipeline
    materialises the result views (:func:`start_blame`; the thread is :class:`msq.db.Beside`).

    Both are mostly one-threaded DuckDB queries (a 100,000-row compare is one row group), and
    DuckDB releases the GIL: on two cores blame's SQL runs beside the verdicts and result views
    instead of after them. Blame reads only the tables in place when it starts (``compare_rows``,
    ``tensors``, ``ops``, ``row_error``, ``tensor_metrics``) and writes only its own.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, mode: str, inp: SingleInput,
                 opts: Options, views_made: Collection[str] = ()) -> None:
        def blame(cursor: duckdb.DuckDBPyConnection) -> BlameSummary | None:
            started = time.perf_counter()
            summary = blame_compare(cursor, mode, inp, opts, views_made)
            log.debug("stage blame      %.2fs (in its own thread)", time.perf_counter() - started)
            return summary

        self._beside = db.Beside(con, blame, "blame")

    def result(self) -> BlameSummary | None:
        """Wait for blame (Ctrl-C still raising) and return its summary, or raise its error;
        the thread has ended either way."""
        return self._beside.result()

    def cancel(self) -> None:
        """Stop blame's query and wait for the thread (the compare failed or was interrupted):
        its connection must not outlive the compare's."""
        self._beside.stop()


def start_blame(con: duckdb.DuckDBPyConnection, mode: str, inp: SingleInput,
                opts: Options, views_made: Collection[str] = ()) -> PendingBlame | None:
    """Start blame of one compare in a thread (see :class:`PendingBlame`); None when blame is
    off. ``row_error`` must be a table by now."""
    if not blame_on(opts):
        return None
    return PendingBlame(con, mode, inp, opts, views_made)


def resume_run(opts: Options, earlier: list[tuple[RankBlame, str]]) -> None:
    """``--resume``: the run goes on under the run id its recorded pairs have (so that the
    history's view blame weighs old and new pairs as one run) and takes their blame with it."""
    if not blame_on(opts) or opts.blame_run is None or not earlier:
        return
    opts.blame_run.run_id = earlier[-1][1]  # the newest recorded pair's run
    opts.blame_run.earlier = [part for part, _ in earlier]
    log.info("blame: resuming run %s with the blame of %d recorded pairs", earlier[-1][1],
             len(earlier))


def finish_run(results: list[CompareResult], output_dir: Path, opts: Options,
               stamp: str | None = None) -> None:
    """Weigh the run's compares together, write ``blame_<stamp>.json`` and hand the run's blame
    to every result (the console prints it). ``stamp``: the time in the file's name (a single
    compare gives its own, which its other files carry; else the time now)."""
    from msq.history.recorder import parse_rank_step

    earlier = opts.blame_run.earlier if opts.blame_run is not None else []
    parts = earlier + [RankBlame(*parse_rank_step(Path(r.npu_path)), r.blame, r.title)
                       for r in results if r.blame is not None]
    # in step and rank order, whichever pairs this run compared and which it resumed
    parts.sort(key=lambda p: (-1 if p.step is None else p.step, -1 if p.rank is None else p.rank))
    if not parts:
        return
    run_id = opts.blame_run.run_id if opts.blame_run is not None else None
    run = combine(parts, run_id)
    stamp = stamp or time.strftime("%Y%m%d%H%M%S")
    # absolute, as the result names the compare's other files
    path = write_json(run, Path(os.path.abspath(output_dir)) / f"blame_{stamp}.json")
    log.debug("blame: the run's local sources are in %s", path)
    for result in results:
        result.run_blame, result.blame_json = run, path

