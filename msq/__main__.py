"""The ``msq`` command (and ``python -m msq``).

SIGINT and SIGTERM are taken over before anything else is imported: a Ctrl-C while Python loads
click, DuckDB or pyarrow is an interruption like any other (exit 130, one line), not a
traceback (see msq/interrupts.py).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading

from msq import interrupts, procs


def run() -> None:
    """Entry point of the ``msq`` console script and of ``python -m msq``."""
    interrupts.install()
    procs.no_blas_threads()  # before anything imports numpy
    try:  # a Ctrl-C from here on is an interruption too, the library's thread start included
        preload_duckdb()
        from msq import runner
        from msq.cli import interrupted_line, main
    except KeyboardInterrupt:
        sys.stderr.write("msq: interrupted; no partial output was kept\n")
        raise SystemExit(130) from None
    runner.KEEP_UNTIL_EXIT = True  # leave() ends the process with os._exit: see there
    try:
        main(prog_name="msq")
    except KeyboardInterrupt:  # between the command's end and the exit: click would say "Aborted!"
        sys.stderr.write(interrupted_line(interrupts.received()) + "\n")
        raise SystemExit(130) from None
    except SystemExit as done:
        leave(done.code)
        raise
    finally:
        # the exit status is decided: Python's teardown puts the default handlers back, and a
        # Ctrl-C then would turn it into "killed by SIGINT"
        interrupts.ignore_from_now()


def preload_duckdb() -> None:
    """Map DuckDB's shared library (``_duckdb``, ~50 MB) in a thread while click and msq are
    imported: every msq command uses DuckDB, and the dynamic linker's ~10 ms (relocations, C++
    static initialisers) run with the GIL released under ctypes, where ``import _duckdb`` holds
    it (the main thread's imports stood still meanwhile). The import then finds the library
    loaded and only creates the module (~6 ms). A process forking meanwhile waits for the thread
    first (``os.register_at_fork``): a child forked while another thread holds the dynamic
    linker's lock would hang at its first ``dlopen``. Nothing happens where ``_duckdb`` is not
    a top-level extension module (duckdb < 1.4) or ctypes cannot load it (the import then
    loads it as before)."""
    try:
        from importlib.machinery import EXTENSION_SUFFIXES
        from importlib.util import find_spec

        spec = find_spec("_duckdb")
    except (ImportError, ValueError):
        return
    origin = spec.origin if spec is not None else None
    if not origin or not origin.endswith(tuple(EXTENSION_SUFFIXES)):
        return
    thread = threading.Thread(target=_load_library, args=(origin,), name="msq-dlopen",
                              daemon=True)
    thread.start()
    os.register_at_fork(before=thread.join)


def _load_library(path: str) -> None:
    try:
        ctypes.CDLL(path)  # never unloaded (ctypes does not dlclose)
    except OSError:  # the import loads it, and reports what is wrong
        pass


def leave(code: object) -> None:
    """End the process with the command's exit status, skipping the interpreter's teardown.

    The command has returned: every output and the history are written, closed and renamed into
    place. What Python would still do is free every object and unload DuckDB, pyarrow and numpy
    (~0.1 s of a small compare), which the OS does at once. The ``atexit`` handlers still run
    (logging, multiprocessing's, a coverage tool's). Returns (the caller exits the usual way)
    while a thread that is not a daemon still runs, or with ``MSQ_SLOW_EXIT`` set.
    """
    if os.environ.get("MSQ_SLOW_EXIT") or any(
            t is not threading.main_thread() and not t.daemon and t.is_alive()
            for t in threading.enumerate()):
        opening = sys.modules.get("msq.opening")
        if opening is not None:  # the databases kept for os._exit: freed while Python runs
            opening.drop_kept()
        return
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("text"): the text goes to stderr, as Python does
        sys.stderr.write(f"{code}\n")
        status = 1
    interrupts.ignore_from_now()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: what Python's own exit reports as 120
            status = status or 120
    os._exit(status & 0xFF)


if __name__ == "__main__":
    run()
