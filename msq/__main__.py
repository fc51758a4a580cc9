"""The ``msq`` command (and ``python -m msq``).

SIGINT and SIGTERM are taken over before anything else is imported: a Ctrl-C while Python loads
click, DuckDB or pyarrow is an interruption like any other (exit 130, one line), not a
traceback (see msq/interrupts.py).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from msq import interrupts


def run() -> None:
    """Entry point of the ``msq`` console script and of ``python -m msq``."""
    interrupts.install()
    try:
        from msq.cli import interrupted_line, main
    except KeyboardInterrupt:
        sys.stderr.write("msq: interrupted; no partial output was kept\n")
        raise SystemExit(130) from None
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
