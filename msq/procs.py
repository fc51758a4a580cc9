"""Worker processes: the one place that decides how msq starts them (the fork policy).

msq runs work on process pools in three places: reading the two dump.json files
(:mod:`msq.loader`), the tensor metrics (:mod:`msq.tensors.pool`, also for the kernel compare)
and the rank/step pairs of a directory compare (:mod:`msq.distributed`). Every pool is made
here.

``fork`` starts a worker in about a millisecond, with everything already imported, but a forked
child inherits only the thread that forked it: any lock another thread held stays locked
forever in the child. DuckDB keeps a pool of threads for every open database, so forking while
one is open is the hazard. The policy:

* no DuckDB database of msq's is open in this process: ``fork`` (msq's command line forks before
  it connects: the early tensor pool, the dump readers, the rank pairs);
* one is open (a compare's own connection while its later tensor metrics run, a kernel compare,
  or a Python caller holding compares): ``forkserver``, which forks each worker from a clean
  single-threaded server process (started once, it imports the worker's module first);
* no ``fork`` on this platform: its default (``spawn``).

Connections made by :func:`msq.db.connect` are registered here (:func:`track`); the registry
holds them weakly, so a connection counts until it is garbage.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import InvalidStateError
from typing import TYPE_CHECKING, Any, NamedTuple

# multiprocessing and the process pool are imported where a pool starts: a statistics compare
# starts none (their import is ~13 ms of its start)
if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.context import BaseContext

_OPEN: weakref.WeakSet[Any] = weakref.WeakSet()


def no_blas_threads() -> None:
    """Tell OpenBLAS to start no threads of its own, where numpy is not loaded yet (a value the
    user set is kept; a process that loaded numpy first keeps its BLAS threads).

    msq runs numpy's BLAS on one thread (msq.tensors.pool.single_threaded_blas: results must not
    depend on the core count). OpenBLAS otherwise starts a thread per core when numpy loads, and
    each spins waiting for work that never comes, in the process and again in every worker it
    starts (they inherit its environment): ~0.1 s of CPU, 10 % of a big tensor compare on two
    cores; ~1 % of a ranks x steps run's CPU (perf), whose statistics compare imports numpy
    through pyarrow and the history's keying, not msq.tensors. Called by msq's command before
    anything is imported (msq/__main__.py) and by msq.tensors' import (the Python API)."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def track(connection: Any) -> None:
    """Register a DuckDB connection: while it lives, pools start from a forkserver."""
    _OPEN.add(connection)


def start_method() -> str:
    """``fork`` when no registered DuckDB connection is alive, else ``forkserver``."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if "fork" not in methods:
        return methods[0]
    return "forkserver" if len(_OPEN) else "fork"


#: Events every fork of this process waits for first (:func:`wait_before_fork`); [True] once
#: the hook that waits is registered.
_FORK_WAITS: list[threading.Event] = []
_HOOKED: list[bool] = []


def wait_before_fork(done: threading.Event) -> None:
    """Make every fork of this process wait until ``done`` is set.

    For a thread that works with the GIL released (the C dump reader, msq.loader.EarlySides)
    started before the tensor pool forks, on the core the main thread leaves idle while it
    imports what the pool needs: a child forked while that thread holds a lock (an
    allocator's) would find it held for ever. The pool forks inside ``interrupts.deferred()``:
    a Ctrl-C does not cut the wait short."""
    if not _HOOKED and hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_wait_before_fork)
        _HOOKED.append(True)
    _FORK_WAITS[:] = [event for event in _FORK_WAITS if not event.is_set()] + [done]


def _wait_before_fork() -> None:
    for event in _FORK_WAITS:
        event.wait()


def context(preload: Sequence[str] = ()) -> BaseContext:
    """The multiprocessing context for a new pool; ``preload``: modules a forkserver imports
    before it forks workers (so that each worker does not import them again)."""
    import multiprocessing

    method = start_method()
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        if preload:
            ctx.set_forkserver_preload(list(preload))  # type: ignore[attr-defined]
        start_forkserver()
    return ctx


#: What a directory compare's pool's forkserver imports before it forks the workers: what they
#: need, imported once rather than by each at its first task (msq/worker_imports.py).
PAIR_POOL_PRELOAD = ("msq.worker_imports",)


def start_pair_pool_server() -> None:
    """Start the forkserver a directory compare's pool will fork its workers from, before the
    compare imports what it needs and opens the history: the server's imports
    (:data:`PAIR_POOL_PRELOAD`, ~620 M instructions) then run on the core this process leaves
    idle meanwhile, and the pool's workers fork as soon as the pool starts. Where the platform
    has no forkserver, nothing."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(PAIR_POOL_PRELOAD))
    start_forkserver()


def start_forkserver() -> None:
    """Start the forkserver (once a process; a no-op while it runs) without the working
    directory on its ``sys.path``. Python starts it as ``python -c ...``, which puts the working
    directory first, and before 3.13 it ignores the parent's ``sys.path``: a folder ``msq`` there
    (the source tree of a non-editable install, another version's checkout) would be the msq the
    server preloads and every worker runs. ``PYTHONSAFEPATH`` (Python 3.11+) keeps it off; the
    server is started here, under it, rather than at the pool's first task. It also starts
    with :func:`worker_memory_environment`, which its workers inherit."""
    from multiprocessing import forkserver

    wanted = {"PYTHONSAFEPATH": "1", **worker_memory_environment(os.environ)}
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


#: glibc's malloc tunables a new worker gets (glibc 2.35+ knows both; a glibc ignores a tunable
#: it does not know): malloc's memory in transparent huge pages, and a per-thread cache of up to
#: 1,024 freed chunks of each small size (glibc's default: 7), which DuckDB's C++ objects churn
#: through: ~3 % fewer instructions for a compared pair (callgrind; 256: 2.5 %, 4,096: 3.2 %).
GLIBC_WORKER_TUNABLES = {"glibc.malloc.hugetlb": "1", "glibc.malloc.tcache_count": "1024"}
#: DuckDB's jemalloc keeps the pages it frees for 5 s as lazily freed (MADV_FREE) before it
#: gives them back (its own setting gives them back at once, after its 1 s of dirty decay).
DUCKDB_LAZY_FREE = "muzzy_decay_ms:5000"


def worker_memory_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What a worker started from a new interpreter (the forkserver's) gets in its environment
    so that it faults in fewer fresh pages; values the user set are kept.

    A pool worker of a directory compare takes task after task of the same size, each faulting
    its memory in anew: ~1.3 M page faults in a root-8x8-5000 run's two workers, ~10 % of the
    run's CPU (perf). Two allocators give pages back between tasks: glibc's malloc (the C
    reader's and the workbook's buffers, numpy's and DuckDB's C++ objects) in 4 KB pages, and
    DuckDB's jemalloc, which returns what it freed a second later, so that the next task faults
    it in again. With glibc's huge pages (where the kernel's transparent huge pages are
    "madvise" or "always") and jemalloc's lazy freeing the workers fault ~54 % fewer pages
    (bench/README, "Session 26: lead"): lazily freed pages are reused without a fault, and the
    kernel takes them back when memory is short. glibc's larger cache of freed chunks
    (:data:`GLIBC_WORKER_TUNABLES`) saves a worker ~3 % of its instructions. These are read when
    a process starts, so only a new interpreter gets them: msq's own command keeps its
    allocators as they are."""
    out: dict[str, str] = {}
    users = environ.get("GLIBC_TUNABLES", "")
    ours = [f"{name}={value}" for name, value in GLIBC_WORKER_TUNABLES.items()
            if f"{name}=" not in users]
    if ours:
        out["GLIBC_TUNABLES"] = ":".join([users] * bool(users) + ours)
    if "DUCKDB_JE_MALLOC_CONF" not in environ:
        out["DUCKDB_JE_MALLOC_CONF"] = DUCKDB_LAZY_FREE
    return out


def process_pool(workers: int, *, preload: Sequence[str] = (),
                 initializer: Callable[[], object] | None = None) -> ProcessPoolExecutor:
    """A process pool started as the policy says (see the module docstring)."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=context(preload),
                               initializer=initializer)


def stop_pool(pool: ProcessPoolExecutor) -> list[int]:
    """Stop a pool at once (an interruption): drop its queue, kill its workers and every process
    they started, reap them. Returns the workers' pids (their temporaries can go now).

    For workers that ignore SIGINT and SIGTERM (:func:`msq.interrupts.ignore_in_worker`): a
    worker's task may be a whole compare, and ``shutdown(wait=True)`` would wait for it to end.
    A worker's own children (the dump readers of its compare) would outlive it: they are killed
    first.
    """
    with quiet_cancelled_future_race():
        parts = pool_parts(pool)
        pool.shutdown(wait=False, cancel_futures=True)
        return _kill(parts)


class PoolParts(NamedTuple):
    """What killing a pool's workers needs, read from the pool while it runs (private, and
    stable since Python 3.8: the executor has no public way to stop its workers)."""

    workers: list[Any]
    manager: threading.Thread | None
    results: Any
    calls: Any


def pool_parts(pool: ProcessPoolExecutor) -> PoolParts:
    """The workers started so far, the manager thread and both queues' ends of ``pool``."""
    return PoolParts(
        workers=list((getattr(pool, "_processes", None) or {}).values()),
        manager=getattr(pool, "_executor_manager_thread", None),
        results=getattr(getattr(pool, "_result_queue", None), "_writer", None),
        calls=getattr(pool, "_call_queue", None))


def kill_workers(pool: ProcessPoolExecutor, known: PoolParts, *, within: float = 10.0) -> None:
    """Kill a pool's workers and reap them without calling the pool: for a thread other than
    the one that owns the pool, when that one does not end (its ``shutdown`` waits for a task
    that does not finish). That thread's shutdown then sees its workers gone and returns.
    ``known``: the parts read while the pool ran (the pool forgets them once shut down); the
    workers started since are added. The manager thread is waited for at most ``within``
    seconds (the owner's thread goes on waiting for it)."""
    now = pool_parts(pool)
    workers = {id(w): w for w in [*known.workers, *now.workers]}
    parts = PoolParts(list(workers.values()), known.manager or now.manager,
                      known.results or now.results, known.calls or now.calls)
    with quiet_cancelled_future_race():
        _kill(parts, within=within)


@contextlib.contextmanager
def quiet_cancelled_future_race() -> Iterator[None]:
    """Drop the one traceback CPython's pool manager prints when it finds its workers killed
    after ``cancel_futures``: it sets the broken-pool error on a future already cancelled
    (InvalidStateError, in the manager thread, on Python 3.11). The pool is being stopped on
    purpose; every other thread exception still reaches the previous hook."""
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if (isinstance(args.exc_value, InvalidStateError)
                and type(args.thread).__name__ == "_ExecutorManagerThread"):
            return
        previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


def _kill(parts: PoolParts, within: float | None = None) -> list[int]:
    workers = parts.workers
    for worker in workers:
        with contextlib.suppress(OSError):  # gone already
            os.kill(worker.pid, signal.SIGSTOP)  # it starts nothing more; its children stay its
            for pid in [*descendants(worker.pid), worker.pid]:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    for worker in workers:
        worker.join(within)
    if parts.manager is not threading.current_thread():
        _end_threads(parts.manager, parts.results, parts.calls, within)
    return [w.pid for w in workers if w.pid is not None]


def _end_threads(manager: threading.Thread | None, results: Any, calls: Any,
                 within: float | None = None) -> None:
    """Wait for a pool's manager thread to see its workers gone and end, then for the feeder
    thread of its call queue (the interpreter's exit waits for that one).

    A worker killed while it wrote a result leaves the manager waiting for the rest of that
    message for ever (this process holds the pipe's other end: no end of file comes), and the
    feeder may wait to write into a call queue no worker reads any more. Both pipes' other ends
    are ours: filler bytes complete the message (it then fails to unpickle: the pool is broken,
    and the manager ends as it does for a dead worker), and the call queue is drained.
    """
    feeder = getattr(calls, "_thread", None)
    reader: Any = getattr(calls, "_reader", None)
    filler = b"\0" * 65536
    ends: list[Any] = [results, reader]
    for end in ends:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.set_blocking(end.fileno(), False)

    def unwedge() -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):  # full, closed, gone
            os.write(results.fileno(), filler)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.read(reader.fileno(), 1 << 20)

    give_up = None if within is None else time.monotonic() + within
    while manager is not None and manager.is_alive():
        if give_up is not None and time.monotonic() > give_up:
            return  # its owner's thread waits for it; the caller does not
        manager.join(0.1)
        unwedge()
    if feeder is None or not feeder.is_alive():
        return
    calls.close()  # the feeder ends once it has written what it holds (the manager is gone)
    deadline = time.monotonic() + 10
    while feeder.is_alive() and time.monotonic() < deadline:
        unwedge()
        feeder.join(0.05)
    if feeder.is_alive():  # never seen; the exit must not wait for it
        calls.cancel_join_thread()


def descendants(pid: int | None) -> list[int]:
    """Every process started by ``pid``, children first (Linux /proc; elsewhere none)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
            fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) "
            parents.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, ValueError, IndexError):  # gone meanwhile: a stopping run goes on
            continue
    found: list[int] = []
    todo = list(parents.get(pid or -1, []))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo += parents.get(child, [])
    return found


@contextlib.contextmanager
def gc_frozen() -> Iterator[None]:
    """Keep the collector of forked workers (and this process's) off the objects that exist now.

    A forked child that collects garbage inherited from its parent may destroy a DuckDB
    connection whose threads do not exist in the child: a segfault (seen in the test suite,
    where earlier compares leave connections in reference cycles). Frozen objects are never
    collected. Nested use, and a worker forked from a frozen parent, keep the outer freeze.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
