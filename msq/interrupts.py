"""Ctrl-C and SIGTERM: a compare stops within seconds and leaves nothing half-done.

The CLI calls :func:`install`: SIGINT and SIGTERM then raise ``KeyboardInterrupt`` in the main
thread, as Python's own SIGINT handler does, except in two states the library sets:

* :func:`deferred`: work that must not be cut (importing a C extension, starting worker
  processes, the cleanup after an interruption) runs whole; a signal meanwhile is raised when
  it ends.
* :func:`settle`: a compare has begun to commit its record, so it is complete. An interruption
  now would report "interrupted" for a compare that was recorded; the signal is held until the
  next compare begins (:func:`unsettle` raises it then) or the command ends.

Whatever the state, a signal whose ``KeyboardInterrupt`` lands where Python cannot raise it (a
weakref callback or a ``__del__``: Python prints "Exception ignored in ..." with a traceback
and goes on, the interruption lost) is delivered again, to be raised where it can
(:func:`_unraisable`, ``sys.unraisablehook``).

And whatever the state, a signal that arrives while a module is being imported is delivered
again once the import is over: a ``KeyboardInterrupt`` inside a C extension's module
initialisation (DuckDB's nanobind enums) aborts the process (SIGABRT: no exit 130, workers
orphaned). The known C imports also run :func:`deferred`; this covers every other lazy import.

Worker processes never see a signal: they are forked with SIGINT and SIGTERM blocked
(:func:`workers_forked`) and ignore them from their first instruction (:func:`ignore_in_worker`),
so a worker never dies holding a queue's lock (which hung the parent's pool), and the parent
alone decides what stops. Without :func:`install` (the Python API) all of this changes nothing:
Python's own handler raises.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from typing import Any, TypeVar

T = TypeVar("T")

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_installed = False
_received: int | None = None   # the first signal of this command
_pending = False               # a signal arrived while deferred or settled
_shield_depth = 0
_settled = False


def install() -> Callable[[], None]:
    """Handle SIGINT and SIGTERM as described above; returns a function that restores the
    previous handlers. A signal whose handler is not the default (SIGINT ignored in a background
    job) is left as it is; outside the main thread nothing is installed."""
    global _installed, _received, _pending, _shield_depth, _settled
    _received, _pending, _shield_depth, _settled = None, False, 0, False
    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    previous: dict[int, Any] = {}
    hook = sys.unraisablehook
    hooked = False  # this call put _unraisable in (its restore takes it out)
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            # already ours: msq's entry point installs it before the imports (msq/__main__.py)
            if signal.getsignal(signum) is defaults[signum]:
                previous[signum] = signal.signal(signum, _handler)
        _installed = any(signal.getsignal(s) is _handler for s in SIGNALS)
        if _installed and hook is not _unraisable:
            _hooks.append(hook)
            sys.unraisablehook = _unraisable
            hooked = True

    def restore() -> None:
        global _installed
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if hooked and sys.unraisablehook is _unraisable:
            sys.unraisablehook = _hooks.pop()
        _installed = False

    return restore


def _handler(signum: int, frame: Any) -> None:
    global _received, _pending
    if _received is None:
        _received = signum
    if _shield_depth or _settled:
        _pending = True
        return
    if _importing(frame):
        _deliver_again(signum)
        return
    raise KeyboardInterrupt


def _unraisable(info: Any) -> None:
    """``sys.unraisablehook`` while installed: a ``KeyboardInterrupt`` raised by :func:`_handler`
    inside a weakref callback or a ``__del__`` (which Python cannot raise: it reports it here
    and goes on) is delivered again, not printed; anything else goes to the hook before ours.
    Seen at load: Ctrl-C landing in a WeakSet's ``_remove`` let the compare run to its end with
    a traceback on stderr (test_ctrl_c_at_random_moments)."""
    if info.exc_type is KeyboardInterrupt and _installed:
        _deliver_again(_received or signal.SIGINT)
        return
    (_hooks[-1] if _hooks else sys.__unraisablehook__)(info)


#: the unraisable hooks :func:`install` replaced (restored by its restore function)
_hooks: list[Callable[[Any], None]] = []


def _importing(frame: Any) -> bool:
    """Whether ``frame`` runs inside an import (importlib's frames are on its stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _deliver_again(signum: int) -> None:
    """Send ``signum`` to this process again shortly (the handler then runs again: raising,
    once the import is over)."""
    def again() -> None:
        if signal.getsignal(signum) is _handler:  # not after the command ended (restored)
            os.kill(os.getpid(), signum)

    timer = threading.Timer(0.05, again)
    timer.daemon = True
    timer.start()


def received() -> int | None:
    """The first signal received since :func:`install` (SIGINT or SIGTERM), if any."""
    return _received


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Run the block whole, and raise a signal that arrived meanwhile once it ends.

    For what must not be cut: importing a C extension (a KeyboardInterrupt inside duckdb's
    module initialisation makes nanobind abort or hang the process), starting worker processes
    until the caller holds them, and the cleanup after an interruption (rolling the history
    back, reaping workers), where the signal raised at the end is the one being handled. Not
    raised once the compare is settled (:func:`settle`). In the main thread only.
    """
    global _shield_depth, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _shield_depth += 1
    try:
        yield
    finally:
        _shield_depth -= 1
    if _pending and _installed and not _settled and not _shield_depth:
        _pending = False
        raise KeyboardInterrupt


def settle() -> None:
    """The compare under way is complete (its record commits now): hold signals until
    :func:`unsettle`. Any thread may call it."""
    global _settled
    _settled = True


def unsettle() -> None:
    """A compare begins: signals are raised again, and one held since the last compare
    completed is raised now."""
    global _settled, _pending
    _settled = False
    if _pending and _installed and not _shield_depth:
        _pending = False
        raise KeyboardInterrupt


@contextlib.contextmanager
def workers_forked() -> Iterator[None]:
    """Fork worker processes inside this block: they start with SIGINT and SIGTERM blocked.

    A Ctrl-C reaches the whole process group; a worker that ran the parent's handler could die
    before its own start-up code ran, or while holding a queue's lock. Threads started here
    (a pool's manager) keep the signals blocked too. A signal meanwhile is raised in the parent
    when the block ends (:func:`deferred`), once every worker started is known to the caller.
    """
    with deferred():  # the main thread still runs a handler for a signal another thread took
        if not hasattr(signal, "pthread_sigmask"):
            yield
            return
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def ignore_in_worker(owner: int | None = None) -> None:
    """A worker's first act: ignore SIGINT and SIGTERM (the parent stops it), then unblock them
    (see :func:`workers_forked`); and die with ``owner``, the process that made its pool
    (:func:`die_with`)."""
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    if owner is not None:
        die_with(owner)


_PR_SET_PDEATHSIG = 1


def die_with(owner: int) -> None:
    """End this worker process when ``owner`` (the process that made its pool) dies (Linux;
    elsewhere nothing).

    A worker ignores Ctrl-C, and a pool's worker waits on its queue for ever: an owner killed
    or aborted would leave its workers behind (the dump readers of a killed rank-pair worker,
    the tensor workers of an msq killed with SIGKILL). A worker forked by its owner asks the
    kernel (``PR_SET_PDEATHSIG``; its parent is the owner's thread that forked it, which in msq
    outlives the pool); a worker forked by a forkserver has the forkserver for parent, which
    lives as long as any of its workers: a thread waits on the owner's pidfd instead.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        if os.getppid() == owner:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL),
                                                    0, 0, 0)
            if os.getppid() != owner:  # the owner died before the request took effect
                os._exit(1)
            return
        watched = os.pidfd_open(owner)
    except ProcessLookupError:  # the owner is gone already
        os._exit(1)
    except (OSError, AttributeError):  # no prctl or pidfd here: the owner's kill covers it
        return
    threading.Thread(target=_end_with, args=(watched,), name="msq-owner", daemon=True).start()


def _end_with(watched: int) -> None:
    select.select([watched], [], [])  # readable once the process has ended
    os.kill(os.getpid(), signal.SIGKILL)


def ignore_from_now() -> None:
    """The process is exiting with its status decided: ignore SIGINT and SIGTERM (Python's
    teardown would otherwise restore their default action, death by signal)."""
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def wait_for(done: threading.Event) -> None:
    """Wait until ``done`` is set, Ctrl-C still raising in the main thread.

    Not ``Thread.join``: on Python 3.11 a join interrupted by ``KeyboardInterrupt`` marks the
    still-running thread as stopped (bpo-45274's fix releases the thread's own lock), and the
    interpreter then exits while that thread is inside DuckDB (SIGABRT). In short waits: a
    signal the kernel hands to another thread runs Python's handler in the main thread only
    when the main thread wakes up.
    """
    while not done.wait(0.1):
        pass


def result_of(future: Future[T]) -> T:
    """``future.result()``, Ctrl-C still raising in the main thread (in short waits, as
    :func:`wait_for`)."""
    while not future.done():
        wait([future], timeout=0.1)
    return future.result()
