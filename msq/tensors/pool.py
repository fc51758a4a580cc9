"""Compute the real-data metrics of many tensor pairs on all cores, with bounded memory.

Scheduling: jobs are cut, in order, into batches of small tasks (a few dozen pairs each, so the
per-task IPC cost is amortised). A worker computes every pair of a batch whose tensors have at
most ``range_elems`` elements; a larger pair is handed back to the parent, which splits it into
fixed ``range_elems`` element ranges, farms the ranges out, and merges their aggregates in range
order. Range boundaries do not depend on the worker count, so results are identical whatever the
machine. Every worker streams its tensors chunk by chunk, so memory stays at a few chunks per
worker whatever the dump size.

Workers are processes, started as :mod:`msq.procs` decides; a handful of small jobs is computed
in the calling process instead, where a pool would cost more than it saves. What a job's row is
comes from a :class:`Measure`: msprobe's real-data metrics by default, the kernel compare's own.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import logging
import os
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Executor,
    Future,
    ProcessPoolExecutor,
    wait,
)
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from threadpoolctl import ThreadpoolController

from msq import interrupts, procs, status_line
from msq.errors import TensorFileError
from msq.tensors.meta import TensorFile, TensorMeta, flat_array, read_small
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
from msq.tensors.paths import directories_held, read_confined
from msq.tensors.reader import inspect_tensor

if TYPE_CHECKING:
    import pyarrow as pa

#: Pairs per task: at least BATCH_JOBS, at most MAX_BATCH_JOBS, about 8 tasks per worker; and
#: at least two tasks per worker when the jobs are few (a few dozen large pairs: each worker
#: opens its share at once, instead of one opening 64 while the other, done with the rest, waits
#: for the ranges of the 64; tensor_big's 68 pairs were one task of 64 and one of 4).
BATCH_JOBS = 64
MAX_BATCH_JOBS = 1024


def _batch_size(jobs: int, workers: int) -> int:
    size = min(MAX_BATCH_JOBS, max(BATCH_JOBS, jobs // (workers * 8)))
    return max(1, min(size, -(-jobs // (2 * workers))))
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

#: After a Ctrl-C, how long the main thread lets the pool's thread stop the pool before it kills
#: the workers itself, and then how long it waits for that thread at most (seconds).
KILL_GRACE = 2.0
ABANDON_AFTER = 15.0

log = logging.getLogger("msq")

#: Makes the executor of a pool run from its worker count instead of a process pool: the Ray
#: engine runs a real-data pair's batches and ranges as Ray tasks (:func:`executor_factory`).
_executor: Callable[[int], Executor] | None = None

METRIC_COLUMNS = ("cosine", "max_abs_err", "max_rel_err", "one_thousandth", "five_thousandth")
#: What blame reads (see MetricResult): squared-difference and square sums, content hashes.
BLAME_FLOATS = ("sq_diff", "npu_sq", "bench_sq")
BLAME_HASHES = ("npu_hash", "bench_hash")


@functools.cache
def _schema() -> pa.Schema:
    import pyarrow as pa  # lazy: workers never load pyarrow (the table is built in the parent)

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
        + [pa.field(name, pa.float64()) for name in BLAME_FLOATS]
        + [pa.field(name, pa.uint64()) for name in BLAME_HASHES]
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


class SameNamedJobs(Sequence[TensorJob]):
    """The jobs of files named alike on both sides, ``TensorJob(i, names[i], names[i], npu_dir,
    bench_dir)`` for each position i, made as they are read: a forked worker makes those of its
    own slice (:func:`_run_inherited`), and the early run's 11k are not made before the pool
    forks (~5 ms of the main thread, on one core, before the pool computes anything)."""

    def __init__(self, names: list[str], npu_dir: str, bench_dir: str) -> None:
        self.names, self.dirs = names, (npu_dir, bench_dir)

    def __len__(self) -> int:
        return len(self.names)

    @overload
    def __getitem__(self, index: int) -> TensorJob: ...
    @overload
    def __getitem__(self, index: slice) -> list[TensorJob]: ...
    def __getitem__(self, index: int | slice) -> TensorJob | list[TensorJob]:
        npu_dir, bench_dir = self.dirs
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.names))
            return [TensorJob(i, self.names[i], self.names[i], npu_dir, bench_dir)
                    for i in range(start, stop, step)]
        i = range(len(self.names))[index]
        return TensorJob(i, self.names[i], self.names[i], npu_dir, bench_dir)


# ------------------------------------------------------------------------------ worker side

_BLAS: list[ThreadpoolController] = []


def single_threaded_blas() -> contextlib.AbstractContextManager[object]:
    """numpy's BLAS (OpenBLAS) pinned to one thread while the kernel runs (threadpoolctl).

    OpenBLAS splits a long dot product across threads, which changes its summation order: the
    same pair of tensors would then get different last bits on machines with different core
    counts, and two workers each spinning two BLAS threads on two cores only fight. msq
    parallelises across tensors and ranges instead, so results are identical whatever the
    machine or the worker count.
    """
    if not _BLAS:  # finding the loaded BLAS libraries costs a few ms: once per process
        _BLAS.append(ThreadpoolController())
    return _BLAS[0].limit(limits=1, user_api="blas")


_Row = tuple  # (job_id, cos, mae, mre, r1, r5, accuracy, err_message, status, sq_diff, npu_sq,
#                bench_sq, npu_hash, bench_hash)


def locate(directory: str | None, name: str) -> tuple[str, bytes | TensorFile | None] | None:
    """Find a tensor file: ``name`` confined to ``directory`` (a path when ``directory`` is None).

    Returns:
        None when there is no such file, else what :func:`msq.tensors.reader.inspect_tensor`
        takes: the path, and the whole file when it is small, else the descriptor the
        confinement check opened (read through it, never the name again: issue 17).
    """
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


class Opened(NamedTuple):
    """A pair whose elements must be read: both layouts, and what its measure keeps for the end."""

    npu: TensorMeta
    bench: TensorMeta
    context: object = None


class Measure:
    """How the pool turns one job into its row.

    This class makes the real-data compare's rows: msprobe's metrics, accuracy and messages
    (:class:`MetricResult`). Another compare brings its own subclass with its own checks and
    finishing step (the MindSpore kernel compare: ``msq.mindspore.kernel.metrics``), and the
    pool, the path confinement, the readers and the one-pass metrics kernel stay the same. A
    measure is sent to the workers: keep it small and picklable.
    """

    #: the relative error in float64 for every dtype, with the ε64 shift (the C kernel, which
    #: works in the tensors' own dtype, is then not used)
    rel64 = False
    #: pairs above ``HANDOFF_ELEMS`` may be split into element ranges run on several workers
    split = True

    def __init__(self, compat: bool) -> None:
        self.compat = compat

    def open(self, job: TensorJob) -> _Row | Opened:
        """The job's row when it is decided without reading elements, else the opened pair."""
        if job.npu_file is None or job.bench_file is None:
            return _row(job.job_id, no_data(None, compat=self.compat))
        npu = locate(job.npu_dir, job.npu_file)
        bench = locate(job.bench_dir, job.bench_file)
        if npu is None or bench is None:
            return _row(job.job_id, no_data(job.data_name or job.npu_file, compat=self.compat))
        n_meta, b_meta = inspect_tensor(*npu), inspect_tensor(*bench)
        decided = precheck(n_meta, b_meta, compat=self.compat)
        return _row(job.job_id, decided) if decided is not None else Opened(n_meta, b_meta)

    def small(self, items: list[tuple[int, Opened]]) -> list[_Row]:
        """Rows of pairs of at most ``SMALL_ELEMS`` elements, vectorised across the pairs."""
        if not items:
            return []
        arrays = [(flat_array(o.npu), flat_array(o.bench)) for _, o in items]
        results = compare_many(arrays, compat=self.compat)
        return [_row(job_id, r) for (job_id, _), r in zip(items, results)]

    def finish(self, job_id: int, st: Stats, opened: Opened) -> _Row:
        """The row of a pair from its aggregates (whole, or merged from its ranges in order)."""
        return _row(job_id, finish(st, compat=self.compat))

    def stats(self, opened: Opened, start: int, stop: int, chunk: int) -> Stats:
        """Aggregates over the flat elements ``[start, stop)`` of an opened pair."""
        return range_stats(opened.npu, opened.bench, start, stop, compat=self.compat, chunk=chunk,
                           rel64=self.rel64)


def _run_batch(
    jobs: Sequence[TensorJob], measure: Measure, chunk: int, range_elems: int
) -> tuple[list[_Row], list[tuple[int, Opened]]]:
    """Compute a batch; pairs above ``HANDOFF_ELEMS`` come back unfinished, to be run as ranges.

    Small pairs are collected and computed together by :meth:`Measure.small` (one set of numpy
    calls per group instead of per pair); medium ones are streamed one by one.
    """
    rows: list[_Row] = []
    big: list[tuple[int, Opened]] = []
    small: list[tuple[int, Opened]] = []
    small_elems = 0
    with single_threaded_blas(), directories_held():
        for job in jobs:
            opened = measure.open(job)
            if not isinstance(opened, Opened):
                rows.append(opened)
                continue
            numel = opened.npu.numel
            if measure.split and numel > min(range_elems, HANDOFF_ELEMS):
                big.append((job.job_id, opened))
            elif numel <= SMALL_ELEMS:
                small.append((job.job_id, opened))
                small_elems += numel
                if small_elems >= GROUP_ELEMS:
                    rows.extend(measure.small(small))
                    small, small_elems = [], 0
            else:
                rows.append(measure.finish(job.job_id, measure.stats(opened, 0, numel, chunk),
                                           opened))
        rows.extend(measure.small(small))
    return rows, big


#: The job lists of the pools running in this process, by a key of each, while they run: a
#: worker forked from this process has them (:func:`_run_inherited`).
_INHERITED: dict[int, Sequence[TensorJob]] = {}


def _run_inherited(key: int, start: int, stop: int, measure: Measure, chunk: int,
                   range_elems: int, pack: bool) -> tuple[object, list[tuple[int, Opened]]]:
    """:func:`_run_batch` (:func:`_run_batch_packed` with ``pack``) of the jobs ``[start,
    stop)`` of the list ``key`` of :data:`_INHERITED`, in a worker forked while it was there:
    the task carries two numbers instead of its jobs (tensor_small: ~10 ms of pickling in the
    parent's feeder thread, holding the GIL while the main thread imports and loads, and ~5 ms
    of unpickling in the workers)."""
    jobs = _INHERITED.get(key)
    if jobs is None:  # not forked from the pool's process after all: never seen
        raise RuntimeError("tensor pool: a worker without its parent's jobs")
    run = _run_batch_packed if pack else _run_batch
    return run(jobs[start:stop], measure, chunk, range_elems)


def _run_range(measure: Measure, opened: Opened, start: int, stop: int, chunk: int) -> Stats:
    with single_threaded_blas():
        return measure.stats(opened, start, stop, chunk)


# ------------------------------------------------------------------------------ parent side


def default_workers() -> int:
    """All cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


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
        # through status_line: a log line written meanwhile starts on a line of its own
        status_line.show(f"msq: tensor metrics {done}/{total} ({pct}%)", done=done >= total)


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
    rows = _compute(jobs, Measure(compat), workers, progress, chunk, range_elems)
    return metrics_table(rows, [job.job_id for job in jobs])


def measure_rows(
    jobs: Iterable[TensorJob],
    measure: Measure,
    *,
    workers: int | None = None,
    progress: Progress = None,
    chunk: int = DEFAULT_CHUNK,
    range_elems: int | None = None,
) -> list[tuple]:
    """:func:`compute_metrics` with another compare's :class:`Measure`: its rows, in job order.

    Returns:
        One row per job, as ``measure`` makes them, each starting with the job's ``job_id``.
    """
    jobs = list(jobs)
    rows = _compute(jobs, measure, workers, progress, chunk, range_elems)
    rows.sort(key=lambda r: r[0])
    return [(jobs[r[0]].job_id, *r[1:]) for r in rows]


def _compute(jobs: list[TensorJob], measure: Measure, workers: int | None, progress: Progress,
             chunk: int, range_elems: int | None) -> list[_Row]:  # fmt: skip
    """Every job's row, keyed by its position: in this process, or on a pool when it pays."""
    range_elems = _range_elems(chunk, range_elems)
    bar = _Progress(len(jobs), progress)
    numbered, workers = _numbered(jobs), _workers(workers)
    if not _pool_pays(numbered, workers):
        return _compute_inline(numbered, measure, chunk, range_elems, bar)
    run = None
    try:
        with interrupts.deferred():  # a Ctrl-C while the pool starts: closed once held
            run = _PoolRun(numbered, measure, chunk, range_elems, workers, bar)
        return run.drive()
    finally:
        if run is not None:
            run.close()


def _range_elems(chunk: int, range_elems: int | None) -> int:
    return range_size(chunk) if range_elems is None else max(chunk, range_elems // chunk * chunk)


def _numbered(jobs: Sequence[TensorJob]) -> Sequence[TensorJob]:
    # internally a job is known by its position, so duplicate or sparse ids need no care; jobs
    # numbered so already are kept (the early run's 11k: ~20 ms before its pool starts)
    if isinstance(jobs, SameNamedJobs):
        return jobs
    if all(job.job_id == i for i, job in enumerate(jobs)):
        return jobs
    return [job._replace(job_id=i) for i, job in enumerate(jobs)]


def _workers(workers: int | None) -> int:
    return default_workers() if workers is None else max(1, workers)


def _pool_pays(jobs: Sequence[TensorJob], workers: int) -> bool:
    """False when one worker is asked for, or the jobs are too few and small for a pool."""
    return workers > 1 and not _fits_inline(jobs)


class Background:
    """Metrics being computed by a worker pool while the caller does other work.

    The pool's processes are forked in :func:`start_metrics` itself, in the calling thread; a
    daemon thread then only waits for results and hands out the range tasks of large pairs.
    That thread alone shuts the pool down or kills its workers (one owner: the main thread
    asks, :meth:`cancel`); the main thread kills the workers itself only when that thread has
    not ended a while after a Ctrl-C.
    """

    def __init__(self, run: _PoolRun, ids: Sequence[int],
                 then: Callable[[list[_Row]], object] | None = None,
                 each: Callable[[list[_Row]], object] | None = None) -> None:  # fmt: skip
        self._run, self._ids, self._then, self._each = run, ids, then, each
        self._rows: list[_Row] | None = None
        self._made: object = None
        self._error: BaseException | None = None
        self._done = threading.Event()  # the thread's last act (see interrupts.wait_for)
        # the rows are in (or the run failed and the pool is closed): what rows() waits for;
        # the pool's shutdown (its workers' exits: 10-30 ms) then goes on in this thread
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._drive, name="msq-metrics", daemon=True)
        self._thread.start()

    def _drive(self) -> None:
        try:
            self._rows = self._run.drive(self._each)
            if self._then is not None:
                # what the caller makes of the rows, made here while the caller still works
                self._made = self._then(self._rows)
            self._ready.set()
        except BaseException as exc:  # noqa: BLE001  (handed to result(); a thread must not raise)
            self._error = exc
        finally:
            try:
                self._run.close()
            except BaseException as exc:  # noqa: BLE001  (the events below must be set)
                if not self._ready.is_set():
                    self._error = self._error or exc
                log.debug("tensor pool: closing failed: %r", exc)
            finally:
                self._ready.set()  # after a failure only once the pool is closed, as before
                self._done.set()

    def result(self) -> pa.Table:
        """Wait for every job; the table of :func:`compute_metrics`. Raises what a worker raised.
        Not for a packed run (``start_metrics(pack=True)``: see there)."""
        rows = self.rows()
        if any(isinstance(row, Packed) for row in rows):
            raise TypeError("a packed run's rows make no table here (start_metrics: pack)")
        return metrics_table(rows, self._ids)

    def rows(self) -> list[_Row]:
        """Wait for every job; their rows as :func:`metrics_table` takes them (``row[0]``: the
        job's position in the jobs started). Raises what a worker raised."""
        interrupts.wait_for(self._ready)
        if self._error is not None:
            raise self._error
        assert self._rows is not None
        return self._rows

    def made(self) -> object:
        """Wait for every job; what ``then`` (of :func:`start_metrics`) returned for the rows.
        Raises what a worker, or ``then``, raised."""
        self.rows()
        return self._made

    def cancel(self) -> None:
        """Stop handing out work and wait for the tasks already running (each is short); the
        results are dropped. Waiting here, not at interpreter exit, keeps Ctrl-C handling in the
        caller's hands; a second Ctrl-C does not cut the wait short. After a Ctrl-C (before
        or during this wait) the running tasks are not waited for: the pool's thread kills the
        workers, and if it has not ended ``KILL_GRACE`` seconds later (it waits in the pool's
        shutdown for a task that does not end), this thread kills them; after
        ``ABANDON_AFTER`` more seconds it stops waiting (the thread is a daemon)."""
        self._run.cancel()
        with interrupts.deferred():
            asked = forced = 0.0
            while not self._done.wait(0.1):
                if interrupts.received() is None:
                    continue
                now = time.monotonic()
                if not asked:
                    asked = now
                    self._run.request_kill()
                elif not forced and now - asked > KILL_GRACE:
                    forced = now
                    log.debug("tensor pool: its thread has not stopped it; killing the workers")
                    self._run.kill_workers()
                elif forced and now - forced > ABANDON_AFTER:
                    log.warning("tensor pool: its thread did not end; not waiting for it")
                    return


def start_metrics(
    jobs: Iterable[TensorJob],
    *,
    compat: bool,
    workers: int | None = None,
    progress: Progress = None,
    chunk: int = DEFAULT_CHUNK,
    range_elems: int | None = None,
    then: Callable[[list[_Row]], object] | None = None,
    each: Callable[[list[_Row]], object] | None = None,
    pack: bool = False,
) -> Background | None:
    """:func:`compute_metrics` in the background, or None when the jobs are so few and small
    that a pool would cost more than it saves, or when only one worker is allowed: the caller
    then computes them when it needs them. ``then(rows)``, if given, runs in the background
    thread once every row is in (rows as :meth:`Background.rows` gives them); its result is
    :meth:`Background.made`. ``each(rows)``, if given, runs there too, on the rows of each
    batch as it comes in (while the workers compute the others): ``then`` can then build on
    what it made instead of taking every row at the end. ``jobs``: a list is not copied again
    as :class:`SameNamedJobs` (see there).

    ``pack``: each batch's rows come back packed by its worker (:class:`Packed`, with the
    columns of :func:`metrics_table` and ``name``, the NPU file): ``each`` then gets a
    :class:`Packed`, and ``then`` (and :meth:`Background.rows`) a list of them and of the rows
    of the large pairs (merged from their ranges here), as tuples. Only for jobs whose ids are
    their positions (else the rows come as rows)."""
    jobs = jobs if isinstance(jobs, SameNamedJobs) else list(jobs)
    numbered, workers = _numbered(jobs), _workers(workers)
    pack = pack and numbered is jobs
    if not _pool_pays(numbered, workers):
        return None
    bar = _Progress(len(jobs), progress)
    background = None
    try:
        with interrupts.deferred():  # the pool starts whole; a Ctrl-C meanwhile stops it
            run = _PoolRun(numbered, Measure(compat), chunk, _range_elems(chunk, range_elems),
                           workers, bar, pack=pack)
            ids = range(len(jobs)) if isinstance(jobs, SameNamedJobs) else \
                [job.job_id for job in jobs]
            background = Background(run, ids, then, each)
    except BaseException:
        if background is not None:
            background.cancel()
        raise
    return background


def _fits_inline(jobs: Sequence[TensorJob]) -> bool:
    if len(jobs) > INLINE_JOBS:
        return False
    total = 0
    for job in jobs:
        for d, f in ((job.npu_dir, job.npu_file), (job.bench_dir, job.bench_file)):
            if f is None:
                continue
            try:
                total += os.stat(os.path.join(d, f) if d is not None else f).st_size
            except (OSError, ValueError):  # ValueError: a NUL in the name, refused when read
                continue
    return total <= INLINE_BYTES


def _compute_inline(
    jobs: Sequence[TensorJob], measure: Measure, chunk: int, range_elems: int, bar: _Progress
) -> list[_Row]:
    rows, big = _run_batch(jobs, measure, chunk, range_elems)
    bar.advance(len(rows))
    for job_id, opened in big:  # same ranges as the pool would use: same results
        numel = opened.npu.numel
        parts = [_run_range(measure, opened, start, min(numel, start + range_elems), chunk)
                 for start in range(0, numel, range_elems)]
        rows.append(_merge(measure, job_id, parts, opened))
        bar.advance(1)
    return rows


#: How much lower the workers' scheduling priority is than the compare's own (``nice``).
WORKER_NICE = int(os.environ.get("MSQ_WORKER_NICE", "0"))


def _worker_start(owner: int) -> None:
    interrupts.ignore_in_worker(owner)
    # what the worker inherited lives until it exits: its collections walk only its own objects
    # (a collection of the forked heap also writes into every inherited object's header, so
    # copies those pages)
    gc.freeze()
    if WORKER_NICE:
        os.nice(WORKER_NICE)


class _PoolRun:
    """One pool computing a list of jobs: batches first, then the ranges of the large pairs.

    The constructor starts the workers (as :mod:`msq.procs` decides: forked, all of them at the
    first submit, or from a forkserver) and submits every batch; :meth:`drive` collects results,
    submitting ranges as large pairs come back, until every job has its row.
    """

    def __init__(self, jobs: Sequence[TensorJob], measure: Measure, chunk: int, range_elems: int,
                 workers: int, bar: _Progress, pack: bool = False) -> None:  # fmt: skip
        self.measure, self.chunk, self.range_elems, self.bar = measure, chunk, range_elems, bar
        self.pack = pack  # batches come back as Packed (see start_metrics)
        self.pending: dict[Future, tuple] = {}
        self.partial: dict[int, tuple[Opened, list[Stats | None]]] = {}
        self.cancelled = False
        # asked by another thread (Background.cancel after a Ctrl-C): close() kills the workers
        self.killing = False
        # cancelled by cancel(): wakes drive() at once, even while every task still runs
        self.wake: Future = Future()
        self.parts: procs.PoolParts | None = None
        # workers ignore SIGINT and SIGTERM from their first instruction (started with the
        # signals blocked, see interrupts.workers_forked): Ctrl-C reaches the whole process
        # group, and the parent alone decides what stops (it cancels the queue; running tasks
        # are short and finish)
        self.pool: Executor = (
            _executor(workers) if _executor is not None else procs.process_pool(
                workers, initializer=functools.partial(_worker_start, os.getpid()),
                preload=sorted({__name__, type(measure).__module__})))
        # forked workers (all at the first submit) have the jobs: each task names its slice
        self.key = _inherit(self.pool, jobs)
        try:
            with interrupts.workers_forked():
                # enough tasks to keep every worker busy to the end, few enough to amortise IPC
                size = _batch_size(len(jobs), workers)
                for s in range(0, len(jobs), size):
                    if self.key is not None:
                        fut = self.pool.submit(_run_inherited, self.key, s, s + size, measure,
                                               chunk, range_elems, pack)
                    else:
                        fut = self.pool.submit(_run_batch_packed if pack else _run_batch,
                                               jobs[s : s + size], measure, chunk, range_elems)
                    self.pending[fut] = ("batch",)
            if isinstance(self.pool, ProcessPoolExecutor):  # what kill_workers() needs
                self.parts = procs.pool_parts(self.pool)
        except BaseException:
            self.cancel()
            self.close()
            raise

    def drive(self, each: Callable[[list[_Row]], object] | None = None) -> list[_Row]:
        """Every job's row (in no particular order); ``each(rows)`` is called on the rows of
        each batch as it comes in."""
        rows: list[_Row] = []
        batches = sum(1 for kind in self.pending.values() if kind[0] == "batch")
        try:
            while self.pending and not self.cancelled:
                done, _ = wait([*self.pending, self.wake], return_when=FIRST_COMPLETED)
                for fut in done:
                    if fut is self.wake:
                        continue
                    kind = self.pending.pop(fut)
                    self._collect(fut, kind, rows, each)
                    batches -= kind[0] == "batch"
                    if batches == 0 and kind[0] == "batch" and self.pending and not self.pack:
                        # every range is handed out: while the workers compute them, load
                        # pyarrow, which the parent needs for the rows' table (else it loads
                        # after the last range, ~30 ms with a core idle)
                        _schema()
        except BaseException:
            self.cancel()
            raise
        if self.cancelled:
            raise CancelledError("tensor metrics cancelled")
        return rows

    def _collect(self, fut: Future, kind: tuple, rows: list[_Row],
                 each: Callable[[list[_Row]], object] | None = None) -> None:
        if kind[0] == "batch":
            got, big = fut.result()
            if each is not None:
                each(got)
            if isinstance(got, Packed):
                rows.append(got)  # type: ignore[arg-type]  # see start_metrics: pack
                self.bar.advance(got.n_rows)
            else:
                rows.extend(got)
                self.bar.advance(len(got))
            for job_id, opened in big:
                self._submit_ranges(job_id, opened)
            return
        _, job_id, index = kind
        opened, parts = self.partial[job_id]
        parts[index] = fut.result()
        if all(p is not None for p in parts):
            rows.append(_merge(self.measure, job_id, parts, opened))  # type: ignore[arg-type]
            del self.partial[job_id]
            self.bar.advance(1)

    def _submit_ranges(self, job_id: int, opened: Opened) -> None:
        numel = opened.npu.numel
        starts = list(range(0, numel, self.range_elems))
        self.partial[job_id] = (opened, [None] * len(starts))
        for index, start in enumerate(starts):
            stop = min(numel, start + self.range_elems)
            fut = self.pool.submit(_run_range, self.measure, opened, start, stop, self.chunk)
            self.pending[fut] = ("range", job_id, index)

    def cancel(self) -> None:
        """Drop the queued tasks (:meth:`close` then waits only for the running ones); any
        thread may call it."""
        self.cancelled = True
        for fut in list(self.pending):
            fut.cancel()
        self.wake.cancel()

    def request_kill(self) -> None:
        """From another thread than the pool's: stop, and let :meth:`close` kill the workers
        instead of waiting for the running tasks."""
        self.killing = True
        self.cancel()

    def kill_workers(self) -> None:
        """From another thread than the pool's, when the pool's thread does not end after
        :meth:`request_kill` (its shutdown waits for a task that does not end): kill and reap
        the workers without calling the pool; the pool's thread then sees them gone."""
        if isinstance(self.pool, ProcessPoolExecutor) and self.parts is not None:
            procs.kill_workers(self.pool, self.parts)

    def kill(self) -> None:
        """Stop at once (an interruption): the running tasks are not waited for; the workers
        are killed (they ignore the signal, and a batch can run for seconds)."""
        self.cancel()
        try:
            if isinstance(self.pool, ProcessPoolExecutor):
                procs.stop_pool(self.pool)
        finally:
            self._release()

    def close(self) -> None:
        """Shut the pool down (by the thread that drove it): kill its workers after a Ctrl-C
        or when asked to, else wait for the running tasks."""
        if self.killing or (self.cancelled and interrupts.received()):
            self.kill()
            return
        # one shutdown, waiting: a shutdown(wait=False) first would make this one return at
        # once and leave the workers unjoined
        try:
            self.pool.shutdown(wait=True, cancel_futures=self.cancelled)
        finally:
            self._release()

    def _release(self) -> None:
        if self.key is not None:
            _INHERITED.pop(self.key, None)


def _inherit(pool: Executor, jobs: Sequence[TensorJob]) -> int | None:
    """Put ``jobs`` where the workers ``pool`` is about to fork will find them (its first
    submit forks them all, from this process); their key. None for any other pool (a
    forkserver's or spawned workers, Ray tasks): its tasks carry their jobs."""
    if not isinstance(pool, ProcessPoolExecutor) or getattr(pool, "_processes", None):
        return None
    context = getattr(pool, "_mp_context", None)
    if context is None or context.get_start_method(allow_none=False) != "fork":
        return None
    key = id(jobs)
    _INHERITED[key] = jobs
    return key


@contextlib.contextmanager
def executor_factory(make: Callable[[int], Executor]) -> Iterator[None]:
    """Within the block, pool runs submit their batches and ranges to ``make(workers)``."""
    global _executor
    saved, _executor = _executor, make
    try:
        yield
    finally:
        _executor = saved


def _merge(measure: Measure, job_id: int, parts: list[Stats], opened: Opened) -> _Row:
    total = Stats()
    for part in parts:
        total.merge(part)
    return measure.finish(job_id, total, opened)


def metrics_table(rows: list[_Row], ids: Sequence[int]) -> pa.Table:
    """The table of :func:`compute_metrics` from job rows whose ``row[0]`` is a position in
    ``ids`` (the job ids); sorted by it (the list is sorted in place)."""
    import pyarrow as pa  # lazy: as in _schema

    schema = _schema()
    rows.sort(key=lambda r: r[0])
    # column by column (zip(*rows)), not row by row: ~3x faster for the 11k rows of tensor_small
    columns = list(zip(*rows)) if rows else [()] * 14
    cols: dict[str, list] = {"job_id": [ids[i] for i in columns[0]]}
    for name, cells in zip(METRIC_COLUMNS, columns[1:6]):
        cols[name] = [None if isinstance(c, str) else float(c) for c in cells]
        cols[f"{name}_text"] = [c if isinstance(c, str) else None for c in cells]
    cols["accuracy"], cols["err_message"], cols["status"] = map(list, columns[6:9])
    for name, cells in zip(BLAME_FLOATS + BLAME_HASHES, columns[9:14]):
        cols[name] = list(cells)
    return pa.table(cols, schema=schema)


# ------------------------------------------------------------------------------ packed rows
#: A column as msq.flatten.Columns holds it (the Arrow C stream's input, msq/_flatten.c
#: ``arrow_stream``): (name, kind, length, null count, validity bitmap | None, data, offsets | None).
CColumn = tuple[str, str, int, int, "bytes | None", bytes, "bytes | None"]


class Packed(NamedTuple):
    """A batch's rows as the columns of :func:`metrics_table` (and ``name``), packed by the
    worker that computed them (:func:`pack_rows`): the parent then unpickles a few buffers
    instead of a tuple per row, and hands them to DuckDB without pyarrow (tensor_small: pyarrow's
    import, ~20 ms, and the table of 11k rows from Python lists, ~14 ms, both holding the GIL
    while the main thread imports and loads the dumps)."""

    columns: tuple[CColumn, ...]
    n_rows: int


def _bitmap(valid: list[bool]) -> bytes:
    """Arrow's validity bitmap: bit i (least significant first) of byte i // 8 is valid[i]."""
    bits = "".join(["1" if v else "0" for v in reversed(valid)]) or "0"
    return int(bits, 2).to_bytes((len(valid) + 7) // 8, "little")


def _null_column(name: str, kind: str, n: int) -> CColumn:
    """A column of ``n`` nulls."""
    return (name, kind, n, n, bytes((n + 7) // 8), bytes(4 * (n + 1)) if kind == "str" else
            bytes(8 * n), bytes(4 * (n + 1)) if kind == "str" else None)


def _f64_column(name: str, cells: list[Any]) -> CColumn:
    try:  # every cell a number (as float() takes it): one C call
        return (name, "f64", len(cells), 0, None, array("d", cells).tobytes(), None)
    except TypeError:
        pass
    nulls = cells.count(None)
    if nulls == len(cells):
        return _null_column(name, "f64", nulls)
    return (name, "f64", len(cells), nulls, _bitmap([c is not None for c in cells]),
            array("d", [0.0 if c is None else c for c in cells]).tobytes(), None)


def _u64_column(name: str, cells: list[Any]) -> CColumn:
    try:  # no null
        return (name, "u64", len(cells), 0, None, array("Q", cells).tobytes(), None)
    except TypeError:
        pass
    nulls = cells.count(None)
    return (name, "u64", len(cells), nulls, _bitmap([c is not None for c in cells]),
            array("Q", [0 if c is None else c for c in cells]).tobytes(), None)


def _str_column(name: str, cells: list[Any]) -> CColumn:
    n = len(cells)
    if n and isinstance(cells[0], str) and cells.count(cells[0]) == n:  # one text throughout
        one = cells[0].encode()
        return (name, "str", n, 0, None, one * n,
                array("i", range(0, (n + 1) * len(one), len(one)) if one else [0] * (n + 1)
                      ).tobytes())
    nulls = cells.count(None)
    if nulls == n:
        return _null_column(name, "str", n)
    if nulls:
        encoded = [b"" if c is None else c.encode() for c in cells]
    else:
        encoded = list(map(str.encode, cells))
    data = b"".join(encoded)
    if len(data) >= 1 << 31:  # int32 offsets (what pyarrow's string type holds too)
        raise OverflowError(f"{name}: {len(data)} bytes of text in one batch")
    offsets = array("i", [0, *itertools.accumulate(map(len, encoded))]).tobytes()
    return (name, "str", n, nulls,
            _bitmap([c is not None for c in cells]) if nulls else None, data, offsets)


def pack_rows(rows: list[_Row], names: Callable[[int], str | None]) -> Packed:
    """Job rows whose ``row[0]`` is the job's id, as the columns of :func:`metrics_table`, cell
    for cell (a float metric cell in ``<metric>``, a text one in ``<metric>_text``; None a
    null), sorted by job id, then ``name``: ``names(job_id)``. The rows are sorted in place."""
    rows.sort(key=lambda r: r[0])
    columns = list(zip(*rows)) if rows else [()] * 14
    out: list[CColumn] = [("job_id", "i64", len(rows), 0, None,
                           array("q", columns[0]).tobytes(), None)]
    for metric, cells in zip(METRIC_COLUMNS, columns[1:6]):
        try:  # no text cell (most columns): every cell as float() takes it, no text
            out.append((metric, "f64", len(cells), 0, None, array("d", cells).tobytes(), None))
            out.append(_null_column(f"{metric}_text", "str", len(cells)))
            continue
        except TypeError:
            pass
        out.append(_f64_column(metric, [None if isinstance(c, str) else float(c) for c in cells]))
        out.append(_str_column(f"{metric}_text",
                               [c if isinstance(c, str) else None for c in cells]))
    for metric, cells in zip(("accuracy", "err_message", "status"), columns[6:9]):
        out.append(_str_column(metric, list(cells)))
    for metric, cells in zip(BLAME_FLOATS, columns[9:12]):
        out.append(_f64_column(metric, list(cells)))
    for metric, cells in zip(BLAME_HASHES, columns[12:14]):
        out.append(_u64_column(metric, list(cells)))
    out.append(_str_column("name", list(map(names, columns[0]))))
    return Packed(tuple(out), len(rows))


def _run_batch_packed(
    jobs: Sequence[TensorJob], measure: Measure, chunk: int, range_elems: int
) -> tuple[Packed, list[tuple[int, Opened]]]:
    """:func:`_run_batch` with its rows packed (:func:`pack_rows`, ``name`` the NPU file)."""
    rows, big = _run_batch(jobs, measure, chunk, range_elems)
    files = {job.job_id: job.npu_file for job in jobs}
    return pack_rows(rows, files.__getitem__), big
