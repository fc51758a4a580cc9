"""Compute the real-data metrics of many tensor pairs on all cores, with bounded memory.

Scheduling: jobs are cut, in order, into batches of small tasks (a few dozen pairs each, so the
per-task IPC cost is amortised). A worker computes every pair of a batch whose tensors have at
most ``range_elems`` elements; a larger pair is handed back to the parent, which splits it into
fixed ``range_elems`` element ranges, farms the ranges out, and merges their aggregates in range
order. Range boundaries do not depend on the worker count, so results are identical whatever the
machine. Every worker streams its tensors chunk by chunk, so memory stays at a few chunks per
worker whatever the dump size.

Workers are processes (``fork`` on Linux, so nothing is re-imported); a handful of small jobs is
computed in the calling process instead, where a pool would cost more than it saves.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Executor,
    Future,
    ProcessPoolExecutor,
    wait,
)
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from msq.errors import TensorFileError
from msq.tensors import blas
from msq.tensors.meta import TensorMeta, read_small, to_array
from msq.tensors.metrics import (
    DEFAULT_CHUNK,
    MetricResult,
    Stats,
    compare_many,
    finish,
    no_data,
    precheck,
    range_size,
    range_stats,
)
from msq.tensors.paths import read_confined
from msq.tensors.reader import inspect_tensor

if TYPE_CHECKING:
    import pyarrow as pa

#: Pairs per task: at least BATCH_JOBS, at most MAX_BATCH_JOBS, about 8 tasks per worker.
BATCH_JOBS = 64
MAX_BATCH_JOBS = 1024
#: Pairs up to this many elements are computed together, vectorised across the pairs...
SMALL_ELEMS = 1 << 16
#: ...in groups of about this many elements (bounds the group buffers).
GROUP_ELEMS = 1 << 18
#: Pairs above this many elements go back to the parent and run as tasks of their own (one per
#: range), so that large pairs spread over all workers instead of queueing in one batch.
HANDOFF_ELEMS = 1 << 20
#: At most this many jobs whose files total at most INLINE_BYTES are computed without a pool.
INLINE_JOBS = 64
INLINE_BYTES = 64 << 20

#: Makes the executor of a pool run from its worker count instead of a process pool: the Ray
#: engine runs a real-data pair's batches and ranges as Ray tasks (:func:`executor_factory`).
_executor: Callable[[int], Executor] | None = None

METRIC_COLUMNS = ("cosine", "max_abs_err", "max_rel_err", "one_thousandth", "five_thousandth")


@functools.cache
def _schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [pa.field("job_id", pa.int64(), nullable=False)]
        + [
            f
            for m in METRIC_COLUMNS
            for f in (pa.field(m, pa.float64()), pa.field(f"{m}_text", pa.string()))
        ]
        + [
            pa.field("accuracy", pa.string()),
            pa.field("err_message", pa.string()),
            pa.field("status", pa.string()),
        ]
    )


def __getattr__(name: str) -> object:
    # SCHEMA is built on first use: pyarrow is not imported by the workers, nor before a
    # compare needs it (the pool starts before the heavy imports; see tensors_bridge.py)
    if name == "SCHEMA":
        return _schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


Progress = bool | Callable[[int, int], None] | None


class TensorJob(NamedTuple):
    """One row to compute.

    Attributes:
        job_id: the caller's key for the row (returned in ``job_id``).
        npu_file: NPU tensor file name (inside ``npu_dir``), or a path when ``npu_dir`` is None;
            None when the row has no real data (unmatched, non-tensor argument): NO_DATA row
            "No bench data matched.".
        bench_file: same for the bench side.
        npu_dir: the NPU side's ``dump_tensor_data`` directory; names are confined to it.
        bench_dir: same for the bench side.
        data_name: the NPU Data_name cell, named in "Dump file: <data_name> not found." when either
            file is missing (msprobe reports a missing bench file under the NPU name); defaults
            to ``npu_file``.
    """

    job_id: int
    npu_file: str | None
    bench_file: str | None
    npu_dir: str | None = None
    bench_dir: str | None = None
    data_name: str | None = None


# ------------------------------------------------------------------------------ worker side

_Row = tuple  # (job_id, cos, mae, mre, r1, r5, accuracy, err_message, status)


def _locate(directory: str | None, name: str) -> tuple[str, bytes | None] | None:
    if directory is not None:
        return read_confined(directory, name)
    try:
        return name, read_small(name)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TensorFileError(f"{name}: cannot read tensor file ({exc.strerror})") from exc


def _row(job_id: int, r: MetricResult) -> _Row:
    return (job_id, *r)


def _open_job(job: TensorJob, compat: bool) -> MetricResult | tuple[TensorMeta, TensorMeta]:
    """The row when it is decided without reading elements, else both tensors' metas."""
    if job.npu_file is None or job.bench_file is None:
        return no_data(None, compat=compat)
    npu = _locate(job.npu_dir, job.npu_file)
    bench = _locate(job.bench_dir, job.bench_file)
    if npu is None or bench is None:
        return no_data(job.data_name or job.npu_file, compat=compat)
    n_meta, b_meta = inspect_tensor(*npu), inspect_tensor(*bench)
    decided = precheck(n_meta, b_meta, compat=compat)
    return decided if decided is not None else (n_meta, b_meta)


def _run_batch(
    jobs: Sequence[TensorJob], compat: bool, chunk: int, range_elems: int
) -> tuple[list[_Row], list[tuple[int, TensorMeta, TensorMeta]]]:
    """Compute a batch; pairs above ``HANDOFF_ELEMS`` come back unfinished, to be run as ranges.

    Small pairs are collected and computed together by :func:`compare_many` (one set of numpy
    calls per group instead of per pair); medium ones are streamed one by one.
    """
    rows: list[_Row] = []
    big: list[tuple[int, TensorMeta, TensorMeta]] = []
    small: list[tuple[int, np.ndarray, np.ndarray]] = []
    small_elems = 0
    with blas.single_threaded():
        for job in jobs:
            opened = _open_job(job, compat)
            if isinstance(opened, MetricResult):
                rows.append(_row(job.job_id, opened))
                continue
            n_meta, b_meta = opened
            numel = n_meta.numel
            if numel > min(range_elems, HANDOFF_ELEMS):
                big.append((job.job_id, n_meta, b_meta))
            elif numel <= SMALL_ELEMS:
                small.append((job.job_id, to_array(n_meta), to_array(b_meta)))
                small_elems += numel
                if small_elems >= GROUP_ELEMS:
                    rows.extend(_run_small(small, compat))
                    small, small_elems = [], 0
            else:
                st = range_stats(n_meta, b_meta, 0, numel, compat=compat, chunk=chunk)
                rows.append(_row(job.job_id, finish(st, compat=compat)))
        rows.extend(_run_small(small, compat))
    return rows, big


def _run_small(small: list[tuple[int, np.ndarray, np.ndarray]], compat: bool) -> list[_Row]:
    if not small:
        return []
    results = compare_many([(n, b) for _, n, b in small], compat=compat)
    return [_row(job_id, r) for (job_id, _, _), r in zip(small, results)]


def _run_range(
    n_meta: TensorMeta, b_meta: TensorMeta, start: int, stop: int, compat: bool, chunk: int
) -> Stats:
    with blas.single_threaded():
        return range_stats(n_meta, b_meta, start, stop, compat=compat, chunk=chunk)


# ------------------------------------------------------------------------------ parent side


def default_workers() -> int:
    """All cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _mp_context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else methods[0])


class _Progress:
    def __init__(self, total: int, progress: Progress) -> None:
        self.total, self.done, self.last = total, 0, 0.0
        self.callback: Callable[[int, int], None] | None = None
        if callable(progress):
            self.callback = progress
        elif progress or (progress is None and sys.stderr.isatty()):
            self.callback = self._bar

    def advance(self, n: int) -> None:
        self.done += n
        if self.callback is not None:
            self.callback(self.done, self.total)

    def _bar(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        pct = 100 * done // max(total, 1)
        sys.stderr.write(f"\rmsq: tensor metrics {done}/{total} ({pct}%)")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def compute_metrics(
    jobs: Iterable[TensorJob],
    *,
    compat: bool,
    workers: int | None = None,
    progress: Progress = None,
    chunk: int = DEFAULT_CHUNK,
    range_elems: int | None = None,
) -> pa.Table:
    """Compute the real-data metrics of every job, in parallel.

    Args:
        jobs: the rows to compute (see :class:`TensorJob`); job ids need not be contiguous.
        compat: msprobe 1.1.0 behaviour (True) or msq's default (False); see ``docs/tensors.md``.
        workers: processes to use; default all cores. 1 computes everything in this process.
        progress: None shows a progress line on stderr when it is a TTY; True/False force it
            on/off; a callable gets ``(done, total)`` after each finished batch or tensor.
        chunk: elements per kernel chunk (tensors up to this size match msprobe bit for bit).
        range_elems: pairs above this many elements are split into ranges of this size (rounded
            to whole chunks; default ``DEFAULT_RANGE``), run on different workers and merged in
            order, so results do not depend on ``workers``.

    Returns:
        An Arrow table with one row per job, in input order: ``job_id`` (int64), for each metric
        ``cosine, max_abs_err, max_rel_err, one_thousandth, five_thousandth`` a float64 column
        (null when the cell is text) and ``<metric>_text`` (the text, else null), then
        ``accuracy``, ``err_message`` (without the fuzzy-match suffix) and ``status``
        (no_data / empty / shape / nanpos / scalar / ok).

    Raises:
        TensorFileError: a tensor file is unsafe, corrupt or unreadable; the compare stops.
    """
    jobs = list(jobs)
    range_elems = _range_elems(chunk, range_elems)
    bar = _Progress(len(jobs), progress)
    numbered, workers = _numbered(jobs), _workers(workers)
    if not _pool_pays(numbered, workers):
        rows = _compute_inline(numbered, compat, chunk, range_elems, bar)
    else:
        run = _PoolRun(numbered, compat, chunk, range_elems, workers, bar)
        try:
            rows = run.drive()
        finally:
            run.close()
    return _to_table(rows, [job.job_id for job in jobs])


def _range_elems(chunk: int, range_elems: int | None) -> int:
    return range_size(chunk) if range_elems is None else max(chunk, range_elems // chunk * chunk)


def _numbered(jobs: list[TensorJob]) -> list[TensorJob]:
    # internally a job is known by its position, so duplicate or sparse ids need no care
    return [job._replace(job_id=i) for i, job in enumerate(jobs)]


def _workers(workers: int | None) -> int:
    return default_workers() if workers is None else max(1, workers)


def _pool_pays(jobs: list[TensorJob], workers: int) -> bool:
    """False when one worker is asked for, or the jobs are too few and small for a pool."""
    return workers > 1 and not _fits_inline(jobs)


class Background:
    """Metrics being computed by a worker pool while the caller does other work.

    The pool's processes are forked in :func:`start_metrics` itself, in the calling thread; a
    daemon thread then only waits for results and hands out the range tasks of large pairs.
    """

    def __init__(self, run: _PoolRun, ids: list[int]) -> None:
        self._run, self._ids = run, ids
        self._rows: list[_Row] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drive, name="msq-metrics", daemon=True)
        self._thread.start()

    def _drive(self) -> None:
        try:
            self._rows = self._run.drive()
        except BaseException as exc:  # noqa: BLE001  (handed to result(); a thread must not raise)
            self._error = exc
        finally:
            self._run.close()

    def result(self) -> pa.Table:
        """Wait for every job; the table of :func:`compute_metrics`. Raises what a worker raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._rows is not None
        return _to_table(self._rows, self._ids)

    def cancel(self) -> None:
        """Stop handing out work and wait for the tasks already running (each is short); the
        results are dropped. Waiting here, not at interpreter exit, keeps Ctrl-C handling in the
        caller's hands."""
        self._run.cancel()
        self._thread.join()


def start_metrics(
    jobs: Iterable[TensorJob],
    *,
    compat: bool,
    workers: int | None = None,
    progress: Progress = None,
    chunk: int = DEFAULT_CHUNK,
    range_elems: int | None = None,
) -> Background | None:
    """:func:`compute_metrics` in the background, or None when the jobs are so few and small
    that a pool would cost more than it saves, or when only one worker is allowed: the caller
    then computes them when it needs them."""
    jobs = list(jobs)
    numbered, workers = _numbered(jobs), _workers(workers)
    if not _pool_pays(numbered, workers):
        return None
    bar = _Progress(len(jobs), progress)
    run = _PoolRun(numbered, compat, chunk, _range_elems(chunk, range_elems), workers, bar)
    return Background(run, [job.job_id for job in jobs])


def _fits_inline(jobs: list[TensorJob]) -> bool:
    if len(jobs) > INLINE_JOBS:
        return False
    total = 0
    for job in jobs:
        for d, f in ((job.npu_dir, job.npu_file), (job.bench_dir, job.bench_file)):
            if f is None:
                continue
            try:
                total += os.stat(os.path.join(d, f) if d is not None else f).st_size
            except OSError:
                continue
    return total <= INLINE_BYTES


def _compute_inline(
    jobs: list[TensorJob], compat: bool, chunk: int, range_elems: int, bar: _Progress
) -> list[_Row]:
    rows, big = _run_batch(jobs, compat, chunk, range_elems)
    bar.advance(len(rows))
    for job_id, n_meta, b_meta in big:  # same ranges as the pool would use: same results
        parts = [
            _run_range(n_meta, b_meta, start, min(n_meta.numel, start + range_elems), compat, chunk)
            for start in range(0, n_meta.numel, range_elems)
        ]
        rows.append(_row(job_id, _merge(parts, compat)))
        bar.advance(1)
    return rows


class _PoolRun:
    """One pool computing a list of jobs: batches first, then the ranges of the large pairs.

    The constructor forks the workers (``fork`` start method: all of them at the first submit)
    and submits every batch; :meth:`drive` collects results, submitting ranges as large pairs
    come back, until every job has its row.
    """

    def __init__(self, jobs: list[TensorJob], compat: bool, chunk: int, range_elems: int,
                 workers: int, bar: _Progress) -> None:  # fmt: skip
        self.compat, self.chunk, self.range_elems, self.bar = compat, chunk, range_elems, bar
        self.pending: dict[Future, tuple] = {}
        self.partial: dict[int, list[Stats | None]] = {}
        self.cancelled = False
        # workers ignore SIGINT: Ctrl-C reaches the whole process group, and the parent alone
        # decides what stops (it cancels the queue; running tasks are short and finish)
        self.pool = (
            _executor(workers) if _executor is not None else ProcessPoolExecutor(
                max_workers=workers, mp_context=_mp_context(), initializer=_ignore_sigint)
        )
        try:
            # enough tasks to keep every worker busy to the end, few enough to amortise IPC
            size = min(MAX_BATCH_JOBS, max(BATCH_JOBS, len(jobs) // (workers * 8)))
            for s in range(0, len(jobs), size):
                fut = self.pool.submit(_run_batch, jobs[s : s + size], compat, chunk, range_elems)
                self.pending[fut] = ("batch",)
        except BaseException:
            self.cancel()
            raise

    def drive(self) -> list[_Row]:
        rows: list[_Row] = []
        try:
            while self.pending and not self.cancelled:
                done, _ = wait(self.pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    self._collect(fut, self.pending.pop(fut), rows)
        except BaseException:
            self.cancel()
            raise
        if self.cancelled:
            raise CancelledError("tensor metrics cancelled")
        return rows

    def _collect(self, fut: Future, kind: tuple, rows: list[_Row]) -> None:
        if kind[0] == "batch":
            got, big = fut.result()
            rows.extend(got)
            self.bar.advance(len(got))
            for job_id, n_meta, b_meta in big:
                self._submit_ranges(job_id, n_meta, b_meta)
            return
        _, job_id, index = kind
        parts = self.partial[job_id]
        parts[index] = fut.result()
        if all(p is not None for p in parts):
            rows.append(_row(job_id, _merge(parts, self.compat)))  # type: ignore[arg-type]
            del self.partial[job_id]
            self.bar.advance(1)

    def _submit_ranges(self, job_id: int, n_meta: TensorMeta, b_meta: TensorMeta) -> None:
        starts = list(range(0, n_meta.numel, self.range_elems))
        self.partial[job_id] = [None] * len(starts)
        for index, start in enumerate(starts):
            stop = min(n_meta.numel, start + self.range_elems)
            fut = self.pool.submit(_run_range, n_meta, b_meta, start, stop, self.compat, self.chunk)
            self.pending[fut] = ("range", job_id, index)

    def cancel(self) -> None:
        """Drop the queued tasks (:meth:`close` then waits only for the running ones)."""
        self.cancelled = True
        for fut in list(self.pending):
            fut.cancel()

    def close(self) -> None:
        # one shutdown, waiting: a shutdown(wait=False) first would make this one return at
        # once and leave the workers unjoined
        self.pool.shutdown(wait=True, cancel_futures=self.cancelled)


@contextlib.contextmanager
def executor_factory(make: Callable[[int], Executor]) -> Iterator[None]:
    """Within the block, pool runs submit their batches and ranges to ``make(workers)``."""
    global _executor
    saved, _executor = _executor, make
    try:
        yield
    finally:
        _executor = saved


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _merge(parts: list[Stats], compat: bool) -> MetricResult:
    total = Stats()
    for part in parts:
        total.merge(part)
    return finish(total, compat=compat)


def _to_table(rows: list[_Row], ids: list[int]) -> pa.Table:
    import pyarrow as pa

    schema = _schema()
    rows.sort(key=lambda r: r[0])
    cols: dict[str, list] = {name: [] for name in schema.names}
    for row in rows:
        cols["job_id"].append(ids[row[0]])
        for name, cell in zip(METRIC_COLUMNS, row[1:6]):
            if isinstance(cell, str):
                cols[name].append(None)
                cols[f"{name}_text"].append(cell)
            else:
                cols[name].append(float(cell))
                cols[f"{name}_text"].append(None)
        cols["accuracy"].append(row[6])
        cols["err_message"].append(row[7])
        cols["status"].append(row[8])
    return pa.table(cols, schema=schema)
