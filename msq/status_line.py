"""The one status line msq draws on stderr (the tensor metrics' progress), kept off log lines.

A progress line is redrawn in place (``\\r``, no newline); a log line written meanwhile would
continue it. So the progress line is drawn only through :func:`show`, and the CLI's log handler
calls :func:`break_line` before each record: the record starts on a line of its own and the
progress line is drawn again below it on its next update.
"""

from __future__ import annotations

import sys
import threading

_lock = threading.Lock()
_open = False  # a status line is on screen, without its newline


def show(text: str, done: bool = False) -> None:
    """Draw ``text`` as the status line (in place of the last one); ``done`` ends the line."""
    global _open
    with _lock:
        sys.stderr.write("\r" + text + ("\n" if done else ""))
        sys.stderr.flush()
        _open = not done


def break_line() -> None:
    """End an open status line, so that what is written next starts a line of its own."""
    global _open
    with _lock:
        if _open:
            sys.stderr.write("\n")
            sys.stderr.flush()
            _open = False
