"""Dispatch a compare.json: one card, many cards/steps, or a MindSpore kernel dump."""

from __future__ import annotations

import gc
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msq import interrupts
from msq.config import (
    DirInput,
    Options,
    SingleInput,
    holds_real_data,
    options_from_kwargs,
    parse_compare_json,
)
from msq.errors import UsageError
from msq.result import CompareResult, CompareResults
from msq.tensors_bridge import EarlyMetrics

if TYPE_CHECKING:
    from msq.opening import EarlyDatabase

log = logging.getLogger("msq")

#: Set by the ``msq`` command (msq/__main__.py), whose process ends with ``os._exit`` once the
#: command returned: a single card's database is then kept until the exit
#: (msq.opening.EarlyDatabase.keep) instead of being torn down as the compare returns (~7 ms of
#: a small compare's main thread: freeing every table, view and the catalog, which the OS does
#: at once).
KEEP_UNTIL_EXIT = False


def run_from_compare_json(compare_json: Path, output_dir: Path, *, framework: str | None = None,
                          stack_mode: bool = False, auto_analyze: bool = True,
                          fuzzy_match: bool = False, **kwargs: Any) -> CompareResults:
    """Run what compare.json asks for; return one result per compare performed (and, for
    directories, the pairs that failed: ``failed``)."""
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if framework:
        kwargs["framework"] = framework
    opts = options_from_kwargs(stack_mode, auto_analyze, fuzzy_match, kwargs)
    # an explicit -f pytorch refuses the MindSpore mappings; without -f the dump decides
    if framework == "pytorch" and (opts.api_mapping or opts.cell_mapping):
        raise UsageError("-am and -cm map MindSpore names; use them with -f mindspore")
    inp = parse_compare_json(compare_json)
    if opts.noise is not None:
        # blame's reference noise run, compared first (one card or directories, as here);
        # without one the compare starts its blame itself, after the early tensor start
        from msq.blame.run import start_run  # lazy: duckdb and pyarrow

        start_run(opts, output_dir, dispatch)
    return dispatch(inp, output_dir, opts)


def dispatch(inp: SingleInput | DirInput, output_dir: Path, opts: Options) -> CompareResults:
    """Compare one card, or directories (ranks and steps, or kernel dumps)."""
    if isinstance(inp, SingleInput) and opts.engine == "ray":
        # one pair on the cluster: a real-data pair's tensors go out as Ray tasks
        from msq.distributed import PairJob, run_pair_jobs

        job = PairJob((inp.npu_json, inp.stack_json), (inp.bench_json, None), "", "")
        return run_pair_jobs([job], output_dir, opts)
    if isinstance(inp, SingleInput):
        return CompareResults([run_single_card(inp, output_dir, opts)])
    return run_directories(inp, output_dir, opts)


def run_single_card(inp: SingleInput, output_dir: Path, opts: Options) -> CompareResult:
    """One card. A real-data dump's tensor metrics start first (see tensors_bridge.py), so that
    the worker pool already computes while msq.pipeline, duckdb and pyarrow are imported."""
    early: EarlyMetrics | None = None
    opened: EarlyDatabase | None = None
    try:
        # a small pair's dumps are read (by the C reader, in threads) while the pool's modules
        # are imported, on the core that is idle until the pool forks; the fork waits for the
        # read (msq/loader.py, EarlySides: ~16 ms less wall on tensor_small)
        with interrupts.deferred():  # the thread started and its handle held, or neither
            from msq.loader import start_early_read

            start_early_read(inp.npu_json, inp.bench_json, opts.is_compat, before_fork=True)
        with interrupts.deferred():  # a Ctrl-C while the pool starts stops it once it is held
            early = EarlyMetrics.start(inp, opts)
        # the compare's database opens on the other core while msq.pipeline is imported
        # (msq/opening.py), once no process forks any more: after the pool's start, and only
        # with the C dump reader (the Python one forks its readers for large dumps)
        with interrupts.deferred():  # the thread started and its handle held, or neither
            from msq.flatten import C_PADDING  # lazy, as msq.pipeline (it imports both anyway)
            from msq.opening import start_opening

            if C_PADDING is not None:
                opened = start_opening(opts, keep=KEEP_UNTIL_EXIT)
        # a larger pair's dumps are read (by the C reader, in threads) while msq.pipeline is
        # imported: the imports hold one core (msq/loader.py, EarlySides; a no-op once begun)
        with interrupts.deferred():  # the thread started and its handle held, or neither
            start_early_read(inp.npu_json, inp.bench_json, opts.is_compat)
        with interrupts.deferred():  # a Ctrl-C inside duckdb's initialisation aborts Python
            from msq.opening import import_duckdb

            import_duckdb()  # without importlib.metadata (see there)
            from msq.pipeline import run_compare  # lazy: duckdb and pyarrow load once the pool runs

        if KEEP_UNTIL_EXIT:
            # what is loaded now lives until the process exits: the collections still to come
            # walk only the compare's own objects (a full one over the imported modules took
            # ~12 ms of the tensor pool's thread as the early rows came in, on tensor_small)
            gc.freeze()
        result = run_compare(inp, output_dir, opts, early=early, opened=opened)
        if opened is not None:
            opened.keep()  # the msq command's process ends with os._exit: no teardown first
        return result
    finally:
        from msq.loader import drop_early_read

        drop_early_read()  # a no-op once the compare took it
        if opened is not None:
            opened.close()  # a no-op once the compare took it
        if early is not None:
            early.cancel()


def run_directories(inp: DirInput, output_dir: Path, opts: Any) -> CompareResults:
    """Directory inputs: kernel dumps when rank_id is given, else ranks (and steps)."""
    if _pair_pool_ahead(inp, opts):
        with interrupts.deferred():  # the server started and its handle held, or neither
            from msq.procs import start_pair_pool_server

            start_pair_pool_server()
    with interrupts.deferred():  # as in run_single_card
        from msq.opening import import_duckdb

        import_duckdb()
    if inp.extra.get("has_rank_id"):
        with interrupts.deferred():
            from msq.mindspore.kernel import compare_kernel  # lazy: as run_compare (duckdb)

        if opts.engine == "ray":
            log.warning("--engine ray does not apply to MindSpore kernel dumps (rank_id): "
                        "comparing them on this machine")
        files = compare_kernel(inp.npu_dir, inp.bench_dir, output_dir, rank_ids=inp.rank_id or None,
                               step_ids=inp.step_id or None)
        return CompareResults([CompareResult(mode="kernel", files=list(files))])
    with interrupts.deferred():
        from msq.distributed import run_dir_compare  # lazy: as run_compare (duckdb)

    return run_dir_compare(inp.npu_dir, inp.bench_dir, output_dir, opts)


def _pair_pool_ahead(inp: DirInput, opts: Options) -> bool:
    """Whether the ranks' pairs will run on a pool forked by a forkserver (the history is open
    when the pool starts: msq/procs.py), as msq.distributed decides: statistics dumps (no
    dump_tensor_data beside a rank's dump.json), not --compat, more than one worker, this
    machine's engine; and a history recorded. Its server then starts at once
    (procs.start_pair_pool_server). A rank folder holding no pair (one rank) only costs the
    server's imports, on a core idle meanwhile."""
    if inp.extra.get("has_rank_id") or opts.engine == "ray" or opts.is_compat or not opts.record:
        return False
    if (opts.workers or os.cpu_count() or 1) <= 1:
        return False
    return not holds_real_data(inp.npu_dir)
