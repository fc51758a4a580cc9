"""Multi-card and multi-step compares: rank (and step) directories paired, each pair a compare.

Ranks and steps are independent jobs: msq runs them in a process pool (one machine) and reports a
failing pair without losing the others. ``--compat msprobe-1.1`` keeps 1.1.0's rules: its rank-name
pattern (which rejects rank10 and above), string order, abort on a stray entry or a failing pair.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from msq import interrupts
from msq.blame.run import finish_run, resume_run, start_run
from msq.blame.summary import unpack_blame
from msq.config import Options, SingleInput, is_real_data, options_from_kwargs
from msq.db import remove_stale_temporaries
from msq.errors import InputError, NothingComparedError, PairsFailedError, UsageError
from msq.export.outputs import OUTPUT_NAMES, ensure_output_dir
from msq.pair_tables import (
    IDLE_SECONDS,
    PairFailure,
    PairTables,
    compute_pair,
    compute_pairs_shared,
    remove_pair_folders,
)
from msq.procs import PAIR_POOL_PRELOAD, gc_frozen, process_pool, stop_pool
from msq.result import CompareResult, CompareResults, FailedPair, failed_message
from msq.run_writer import RunWriter

log = logging.getLogger("msq")

_COMPAT_RANK = re.compile(r"^rank(?:0|[0-9][1-9]*)?$")
_RANK = re.compile(r"^rank(\d*)$")
_STEP = re.compile(r"^step(\d+)$")


@dataclass
class PairJob:
    """One rank pair to compare."""

    npu: tuple[Path, Path | None]    # dump.json, stack.json
    bench: tuple[Path, Path | None]
    suffix: str
    title: str


def _rank_number(name: str) -> int:
    digits = _RANK.match(name)
    return int(digits.group(1)) if digits and digits.group(1) else -1


def list_ranks(step_dir: Path, compat: bool) -> list[str]:
    """Rank directory names of a step directory, in pairing order."""
    try:
        entries = sorted(os.listdir(step_dir))
    except OSError as err:
        raise InputError(f"{step_dir}: cannot list the step directory: {err.strerror}") from None
    if compat:
        for name in entries:
            if not _COMPAT_RANK.match(name):
                raise InputError(f"{step_dir}: contains '{name}', which is not a rank directory "
                                 "(msprobe 1.1 accepts rank, rank0-rank9 style names only); "
                                 "remove it or compare without --compat")
        return entries
    ranks = []
    for name in entries:
        if _RANK.match(name) and (step_dir / name).is_dir():
            ranks.append(name)
        else:
            log.warning("%s: skipping '%s': not a rank directory", step_dir, name)
    return sorted(ranks, key=_rank_number)


def pick_files(rank_dir: Path, compat: bool) -> tuple[Path, Path | None]:
    """The dump.json and stack.json of a rank directory."""
    if not compat:
        dump, stack = rank_dir / "dump.json", rank_dir / "stack.json"
        if not dump.is_file():
            raise InputError(f"{rank_dir}: no dump.json; is this a msprobe rank directory?")
        return dump, (stack if stack.is_file() else None)
    jsons = [rank_dir / n for n in sorted(os.listdir(rank_dir)) if n.endswith(".json")]
    dumps = [p for p in jsons if p.name != "construct.json" and "stack" not in str(p)]
    stacks = [p for p in jsons if "stack" in str(p)]
    if not jsons or not dumps:
        raise InputError(f"{rank_dir}: no dump file found; expected dump.json")
    # 1.1.0 takes the first json whose path holds "stack", else the last json it saw
    return dumps[0], (stacks[0] if stacks else jsons[-1])


def pair_ranks(npu_step: Path, bench_step: Path, compat: bool, prefix: str = "") -> list[PairJob]:
    """Pair the rank directories of two step directories (spec §7)."""
    npu_ranks, bench_ranks = list_ranks(npu_step, compat), list_ranks(bench_step, compat)
    if compat:
        if len(npu_ranks) != len(bench_ranks):
            raise InputError(f"{npu_step} has {len(npu_ranks)} ranks but {bench_step} has "
                             f"{len(bench_ranks)}; compare matching runs or pair the ranks "
                             "yourself with msq.compare()")
        pairs = list(zip(npu_ranks, bench_ranks))
    else:
        pairs = _pair_by_number(npu_step, bench_step, npu_ranks, bench_ranks)
    jobs = []
    for npu_rank, bench_rank in pairs:
        npu = pick_files(npu_step / npu_rank, compat)
        bench = pick_files(bench_step / bench_rank, compat)
        jobs.append(PairJob(npu, bench, f"{prefix}_{npu_rank}-{bench_rank}",
                            f"{prefix.lstrip('_') + ' ' if prefix else ''}{npu_rank}-{bench_rank}"))
    return jobs


def _pair_by_number(npu_step: Path, bench_step: Path, npu_ranks: list[str],
                    bench_ranks: list[str]) -> list[tuple[str, str]]:
    if not npu_ranks or not bench_ranks:
        raise InputError(f"no rank directories in {npu_step if not npu_ranks else bench_step}; "
                         "point npu_path/bench_path at a step directory (holding rank0, rank1, ...)")
    bench_by_num = {_rank_number(r): r for r in bench_ranks}
    npu_by_num = {_rank_number(r): r for r in npu_ranks}
    common = [n for n in sorted(npu_by_num) if n in bench_by_num]
    if len(npu_ranks) != len(bench_ranks) or len(common) != len(npu_ranks):
        if not common:
            if len(npu_ranks) == len(bench_ranks):
                log.warning("rank names differ between %s and %s: pairing them in order",
                            npu_step, bench_step)
                return list(zip(npu_ranks, bench_ranks))
            raise InputError(f"{npu_step} has ranks {npu_ranks} and {bench_step} has {bench_ranks}: "
                             "no rank in common; pair them yourself with msq.compare()")
        only = sorted(set(npu_by_num) ^ set(bench_by_num))
        log.warning("ranks %s are present on one side only (%s vs %s): comparing the %d ranks in "
                    "common", ", ".join(f"rank{n}" for n in only), npu_step, bench_step, len(common))
    return [(npu_by_num[n], bench_by_num[n]) for n in common]


def discover_jobs(npu_dir: Path, bench_dir: Path, compat: bool) -> list[PairJob]:
    """A step directory (rank dirs inside), a dump root (step dirs inside) or a rank directory."""
    if (npu_dir / "dump.json").is_file() and (bench_dir / "dump.json").is_file():
        return [PairJob(pick_files(npu_dir, False), pick_files(bench_dir, False), "", "")]
    npu_steps = _steps(npu_dir)
    if npu_steps and not compat:
        bench_steps = _steps(bench_dir)
        common = [s for s in npu_steps if s in bench_steps]
        missing = sorted(set(npu_steps) ^ set(bench_steps))
        if missing:
            log.warning("steps %s are present on one side only; comparing %d common steps",
                        ", ".join(missing), len(common))
        if not common:
            raise InputError(f"{npu_dir} and {bench_dir} have no step directory in common")
        jobs = []
        for step in common:
            jobs += pair_ranks(npu_dir / step, bench_dir / step, compat, prefix=f"_{step}")
        return jobs
    return pair_ranks(npu_dir, bench_dir, compat)


def _steps(root: Path) -> list[str]:
    names = [n for n in os.listdir(root) if _STEP.match(n) and (root / n).is_dir()]
    return sorted(names, key=lambda n: int(n[4:]))


def run_jobs(jobs: list[PairJob], output_dir: Path, opts: Options,
             then: Callable[[list[CompareResult]], None] | None = None) -> CompareResults:
    """Compare rank pairs on the chosen engine; this process publishes every output and writes
    every history record.

    A failing pair is reported and the others go on (they are written and recorded); the
    results' ``failed`` lists it, and a run where every pair failed raises
    :class:`PairsFailedError`. In compat mode (1.1.0's rule) the first failure stops the run.
    ``opts.resume`` skips the pairs this run already recorded (a failed pair was not).
    ``then(results)``: run once every pair is recorded, while the history file is checkpointed
    and detached in a thread (the run's end: the pool's workers are done, a core is free).
    """
    writer = RunWriter(output_dir, opts)
    remove_pair_folders()  # left by the workers of a killed msq
    closing = None
    resumed = False
    try:
        if opts.resume:
            todo = _unrecorded(jobs, writer)
            resumed = len(todo) < len(jobs)
            # the skipped pairs still count in the run's blame (first local source over ranks)
            resume_run(opts, writer.recorded_blame([j for j in jobs if j not in todo]))
            jobs = todo
        results: list[CompareResult] = []
        failures: list[FailedPair] = []
        waited = wrote = 0.0
        mark = time.perf_counter()
        # the engine calls writer.commit when it starts waiting for the next pair: the pairs
        # the writer holds are committed (a few share a transaction) while nothing else is done
        for job, out in _outcomes(jobs, output_dir, opts, writer.commit):
            now = time.perf_counter()
            waited += now - mark
            try:
                result = _take(job, out, writer, opts)
            finally:
                if isinstance(out, PairTables):
                    out.release()  # the files its pool worker left that were not published
            if isinstance(result, FailedPair):
                failures.append(result)
            else:
                results.append(result)
            mark = time.perf_counter()
            wrote += mark - now
        writer.commit()
        # which side set the pace: the engine (waiting) or this process (writing)
        log.debug("driver: %d pairs, %.1f s waiting for results, %.1f s writing and recording "
                  "(%d history transactions)", len(jobs), waited, wrote, writer.commits)
        closing = writer.close(beside=True)
    finally:
        writer.close()  # nothing when closed above
    try:
        if failures and not results:
            raise PairsFailedError(
                f"every rank pair{' not recorded before (--resume)' if resumed else ''} failed; "
                f"first: {failures[0].message}", CompareResults(), failures)
        if then is not None:
            # every pair is recorded: the run's own outputs (its blame) are written whole and
            # the run is then complete, as a single compare is once its outputs exist; a Ctrl-C
            # meanwhile, or while the history is checkpointed, is held (it had left the run's
            # blame file behind a run reported as interrupted)
            with interrupts.deferred():
                then(results)
                interrupts.settle()
    finally:
        if closing is not None:
            closing.wait()
    return CompareResults(results, failures)


def _take(job: PairJob, out: PairTables | PairFailure, writer: RunWriter,
          opts: Options) -> CompareResult | FailedPair:
    """Log what the pair logged, then write it; a failed pair's failure instead."""
    for record in out.logs:
        if log.isEnabledFor(record.levelno):
            log.handle(record)
    if isinstance(out, PairFailure):
        if opts.is_compat:
            raise InputError(out.message)
        log.error("pair failed: %s", out.message)
        return _failed(job, out.message)
    if out.node:
        log.info("pair %s ran on node %s", job.title or job.npu[0], out.node)
    return writer.write(job, out)


def _failed(job: PairJob, message: str) -> FailedPair:
    # a pair's failure names the pair first (``<title>: <reason>``): the reason alone is kept
    prefix = f"{job.title}: "
    reason = message.removeprefix(prefix)
    return FailedPair(job.title, os.path.abspath(job.npu[0]), os.path.abspath(job.bench[0]),
                      reason)


def _unrecorded(jobs: list[PairJob], writer: Any) -> list[PairJob]:
    done = writer.recorded(jobs)
    todo = [j for j in jobs if str(j.npu[0].absolute()) not in done]
    log.warning("resuming: %d of %d pairs already recorded in %s", len(jobs) - len(todo),
                len(jobs), writer.history.path if writer.history else "the history")
    return todo


def _outcomes(jobs: list[PairJob], output_dir: Path, opts: Options,
              idle: Callable[[], None]) -> Iterator[tuple[PairJob, PairTables | PairFailure]]:
    """Each job's tables (or failure), in job order, from the chosen engine; ``idle()`` is called
    before a wait for the next pair that lasts (:data:`msq.pair_tables.IDLE_SECONDS`)."""
    if opts.engine == "ray":
        from msq.engine_ray import RayOptions, run_pairs

        yield from run_pairs(jobs, opts, output_dir,
                             RayOptions.build(opts.ray_address, opts.ray_place), idle)
        return
    tensor_mode = any(is_real_data(j.npu[0]) for j in jobs)
    workers = 1 if tensor_mode or opts.is_compat else \
        min(len(jobs), opts.workers or os.cpu_count() or 1)
    if workers <= 1:  # in this process (a real-data pair's tensors use the tensor pool)
        for job in jobs:
            idle()  # the next pair is computed here, seconds of it: commit the pairs held first
            yield job, compute_pair(job, opts, output_dir)
        return
    # workers ignore SIGINT and SIGTERM (forked with them blocked): a Ctrl-C reaches the whole
    # process group, and this process alone decides what stops
    with gc_frozen():
        pool = process_pool(workers, preload=PAIR_POOL_PRELOAD,
                            initializer=partial(interrupts.ignore_in_worker, os.getpid()))
        pending: deque[tuple[list[PairJob], Future[list[PairTables | PairFailure]]]] = deque()
        # one DuckDB thread a pair, as a Ray task has: the workers already fill the cores
        pair_opts = replace(opts, workers=1)
        try:
            # a task is a batch of pairs (compared through one set of queries where they can be)
            for batch in batches(jobs, workers):
                with interrupts.workers_forked():  # a bounded window, as below
                    pending.append((batch, pool.submit(compute_pairs_shared, batch, pair_opts,
                                                       output_dir)))
                if len(pending) >= 2 * workers:
                    yield from _batch_outcomes(*pending.popleft(), idle)
            while pending:
                yield from _batch_outcomes(*pending.popleft(), idle)
        except BaseException:  # interrupted, or the run stops (GeneratorExit): stop the pairs
            with interrupts.deferred():  # whole: a second Ctrl-C must not leave workers behind
                killed = stop_pool(pool)
                # a killed pair may have been writing its -lm mapping, or its files
                remove_stale_temporaries(output_dir, OUTPUT_NAMES, dead=killed)
                remove_pair_folders(killed)
            raise
        pool.shutdown(wait=True)


#: Pairs a pool task compares at once (msq.pair_tables.compute_pairs_shared): a batch's fixed
#: cost (~980 M instructions, mostly DuckDB binding and planning its queries) is paid once a
#: batch. Seven 24,500-row root pairs a task (bench/README "Session 28: mem": -1.4 % of the
#: tasks' instructions against six; an eighth pair adds ~110 MB a worker, the tree's peak then
#: at the 2 GB target's edge).
BATCH_PAIRS = 7
#: The dump.json bytes (both sides of every pair) a batch holds at most: its pairs' rows are in
#: one worker's database at once, so a batch's memory grows with its total, not its largest
#: pair (a root-8x8-5000 pair: 10.3 MB (9.8 MiB), ~24,500 rows, ~40-60 MB more of a worker's
#: peak each). Sized to hold BATCH_PAIRS such pairs: at 64 MiB they fitted six (root-8x8-5000
#: ran 6 x 10, 2, 2; tree peak ~1.47 GB), at 72 MiB seven (7 x 8, 4, 4; ~1.59 GB).
#: A pair above it goes alone: its fixed cost is a small part of its own.
BATCH_MAX_BYTES = 72 << 20


def batches(jobs: list[PairJob], workers: int) -> Iterator[list[PairJob]]:
    """The jobs in order, cut into pool tasks: up to :data:`BATCH_PAIRS` consecutive pairs a
    task, fewer where the pairs are few (every worker gets a share: at most a quarter of a
    worker's share a task) or large (at most :data:`BATCH_MAX_BYTES` of dump.json a task, as
    many as of the median pair fit; a larger pair alone), and the last tasks smaller
    (:func:`_tail_sizes`)."""
    sizes = [_pair_bytes(job) for job in jobs]
    size = max(1, min(BATCH_PAIRS, len(jobs) // (4 * workers), _pairs_fitting(sizes)))
    tail = _tail_sizes(size, workers, len(jobs))
    head = len(jobs) - sum(tail)
    yield from _cut(jobs[:head], size, sizes[:head])
    start = head
    for n in tail:
        yield from _cut(jobs[start:start + n], n, sizes[start:start + n])
        start += n


def _pairs_fitting(sizes: list[int]) -> int:
    """How many pairs of the median pair's dump.json bytes a task holds: the task size the
    bytes allow, known before the jobs are cut, so that the tail is cut from whole tasks (at 64
    MB, root-8x8-5000's 9.8 MB pairs went in tasks of six although seven were asked for: its
    64 pairs in 6 x 9, 2, 4, 4, one worker four pairs more than the other)."""
    held = sorted(n for n in sizes if n <= BATCH_MAX_BYTES)
    median = held[len(held) // 2] if held else 0
    return BATCH_MAX_BYTES // median if median else BATCH_PAIRS


def _tail_sizes(size: int, workers: int, njobs: int) -> list[int]:
    """The last tasks' sizes, so that the workers finish together: a worker that takes its
    last task of ``size`` pairs while another takes a smaller one idles for the difference at
    the run's end, and the driver records that task's pairs alone after both are done
    (root-8x8-5000: a 6-pair task is ~1.6 s of a worker). The pairs left after whole rounds of
    full tasks (a task a worker) go in one task a worker, none more than half a task (rounded
    up; more tasks, a multiple of the workers, if they are more): root-8x8-5000's 64 pairs in
    tasks of six as 6 x 10, 2, 2. Where no pairs are left, or they would make single-pair
    tasks, the last ``workers`` tasks hold half as many pairs. No single-pair tasks after them:
    each task pays a fixed cost (~500 M instructions, DuckDB preparing its statements), and two
    more tasks cost root-8x8-5000 more than the closer finish saved (bench/README, "Session
    27: lead")."""
    if size == 1:
        return []
    half = (size + 1) // 2
    rest = njobs % (size * workers)
    tasks = workers * -(-rest // (half * workers))
    if rest and rest >= 2 * tasks:
        tail = [rest // tasks + (i < rest % tasks) for i in range(tasks)]
    else:
        tail = [half] * workers
    return tail if sum(tail) * 2 <= njobs else []


def _cut(jobs: list[PairJob], size: int, sizes: list[int]) -> Iterator[list[PairJob]]:
    """``jobs`` in order, up to ``size`` a task and :data:`BATCH_MAX_BYTES` of dump.json a task
    (a pair above it alone); ``sizes``: each job's :func:`_pair_bytes`."""
    batch: list[PairJob] = []
    held = 0
    for job, nbytes in zip(jobs, sizes, strict=True):
        if size == 1 or nbytes > BATCH_MAX_BYTES:
            if batch:
                yield batch
                batch, held = [], 0
            yield [job]
            continue
        if batch and held + nbytes > BATCH_MAX_BYTES:
            yield batch
            batch, held = [], 0
        batch.append(job)
        held += nbytes
        if len(batch) == size:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def _pair_bytes(job: PairJob) -> int:
    try:
        return os.path.getsize(job.npu[0]) + os.path.getsize(job.bench[0])
    except OSError:
        return BATCH_MAX_BYTES + 1  # compared alone: its own compare reports the error


def _batch_outcomes(batch: list[PairJob], future: Future[list[PairTables | PairFailure]],
                    idle: Callable[[], None],
                    ) -> Iterator[tuple[PairJob, PairTables | PairFailure]]:
    """Each pair of a pool task's batch with its outcome, in job order."""
    outs = _result(future, idle)
    for job, out in zip(batch, outs, strict=True):
        yield job, _taken(job, out)


def _result(future: Future[Any], idle: Callable[[], None]) -> Any:
    """A pool task's outcome (a batch's pairs'); ``idle()`` first once it has been awaited
    :data:`msq.pair_tables.IDLE_SECONDS`."""
    deadline = time.monotonic() + IDLE_SECONDS
    while not future.done() and time.monotonic() < deadline:
        wait([future], timeout=0.1)  # short: Ctrl-C raises between the waits
    if not future.done():
        idle()
    return interrupts.result_of(future)


def _taken(job: PairJob, out: PairTables | PairFailure) -> PairTables | PairFailure:
    """A pool pair's outcome with the history rows its worker left in shared memory mapped in
    (:func:`msq.pair_tables.compute_pair_shared`); a pair whose rows cannot be read fails."""
    if isinstance(out, PairTables) and out.shared:
        folder = out.shared
        try:
            out.take_shared(keep=True)
        except OSError as err:  # pyarrow's ArrowIOError and ArrowInvalid are OSError, ValueError
            return PairFailure(f"{job.title}: could not read the pair's rows from {folder}: {err}",
                               out.logs)
        except ValueError as err:
            return PairFailure(f"{job.title}: could not read the pair's rows from {folder}: {err}",
                               out.logs)
    return out


def run_dir_compare(npu_dir: Path, bench_dir: Path, output_dir: Path,
                    opts: Options) -> CompareResults:
    """Compare directories (CLI directory mode)."""
    ensure_output_dir(output_dir)
    if opts.data_mapping is not None:
        log.warning("-dm applies to single-card compares only; ignored for directories")
        opts.data_mapping = None
    if opts.is_compat and (opts.api_mapping or opts.cell_mapping or opts.layer_mapping):
        # 1.1.0's directory compare passes none of the MindSpore mappings on
        log.warning("--compat msprobe-1.1: -am/-cm/-lm are ignored for directories, as in 1.1.0")
        opts.api_mapping = opts.cell_mapping = opts.layer_mapping = None
    jobs = discover_jobs(npu_dir, bench_dir, opts.is_compat)
    if not jobs:
        raise InputError(f"nothing to compare in {npu_dir} and {bench_dir}")
    return run_pair_jobs(jobs, output_dir, opts)


def run_pair_jobs(jobs: list[PairJob], output_dir: Path, opts: Options) -> CompareResults:
    """Check the output folder and the history file, then compare the pairs."""
    ensure_output_dir(output_dir)
    if opts.record:
        from msq.history import check_target

        check_target(opts.db, output_dir)
    elif opts.resume:
        raise UsageError("--resume skips the pairs recorded in the history; it cannot be used "
                         "with --no-history")
    # the run's id (and noise bands) for every rank and step; a no-op when msq.runner started it
    start_run(opts, output_dir, _noise_dispatch)
    # every rank and step weighed together, while the history file is checkpointed
    return run_jobs(jobs, output_dir, opts,
                    lambda results: finish_run(results, output_dir, opts))


def _noise_dispatch(inp: Any, output_dir: Path, opts: Options) -> list[CompareResult]:
    """A reference noise run given to :func:`compare_distributed`: directories, or one card."""
    if isinstance(inp, SingleInput):
        from msq.pipeline import run_compare

        return [run_compare(inp, output_dir, opts)]
    return run_dir_compare(inp.npu_dir, inp.bench_dir, output_dir, opts)


def compare_distributed(npu_dump_dir: str | os.PathLike[str], bench_dump_dir: str | os.PathLike[str],
                        output_path: str | os.PathLike[str], **kwargs: Any) -> CompareResults:
    """Compare every rank pair of two step directories (msprobe's ``compare_distributed``).

    Args:
        npu_dump_dir: NPU step directory (holding rank0, rank1, ...) or a dump root of steps.
        bench_dump_dir: bench directory of the same kind.
        output_path: output directory.
        **kwargs: ``stack_mode``, ``auto_analyze``, ``fuzzy_match``, ``compat``, ``workers``, ...

    Returns:
        One :class:`CompareResult` per compared pair (a :class:`CompareResults`, whose
        ``failed`` is empty: a failed pair raises).

    Raises:
        PairsFailedError: a pair could not be compared (a broken dump): the others are written
            and recorded; its ``results`` hold them, its ``failed`` the failed pairs.
        NothingComparedError: the default mode matched no row in a pair (every pair is written).
    """
    if "suffix" in kwargs:
        raise UsageError("argument 'suffix' is not supported by compare_distributed")
    opts = options_from_kwargs(kwargs.pop("stack_mode", False), kwargs.pop("auto_analyze", True),
                               kwargs.pop("fuzzy_match", False), kwargs)
    npu, bench = Path(npu_dump_dir), Path(bench_dump_dir)
    for path in (npu, bench):
        if not path.is_dir():
            raise InputError(f"{path}: not a directory; compare_distributed takes step directories")
    results = run_dir_compare(npu, bench, Path(output_path), opts)
    unpack_blame(results)  # the caller's to change or dump: plain lists, not PackedRows
    if results.failed:  # not a pass either: the pairs compared are kept, in the exception
        raise PairsFailedError(failed_message(results.failed, len(results)), results,
                               list(results.failed))
    empty = [r for r in results if r.nothing_compared]
    if empty:  # not a pass: the caller must not read it as one
        raise NothingComparedError(f"{empty[0].title}: {empty[0].nothing_compared}"
                                   + (f" (and {len(empty) - 1} more pairs)" if len(empty) > 1 else ""),
                                   list(results))
    return results
