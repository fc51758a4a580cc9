"""The ``msq`` command (and ``python -m msq``).

SIGINT and SIGTERM are taken over before anything else is imported: a Ctrl-C while Python loads
click, DuckDB or pyarrow is an interruption like any other (exit 130, one line), not a
traceback (see msq/interrupts.py).
"""

from __future__ import annotations

import sys

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
    finally:
        # the exit status is decided: Python's teardown puts the default handlers back, and a
        # Ctrl-C then would turn it into "killed by SIGINT"
        interrupts.ignore_from_now()


if __name__ == "__main__":
    run()
