"""One exception tree for msq. Every message names the file or value and says what to do next.

The CLI turns any :class:`MsqError` into one line on stderr and the exit status below; the library
never prints tracebacks for user mistakes.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # msq.result is light, but this module is the root of every import
    from msq.result import CompareResults, FailedPair


class ExitStatus(IntEnum):
    """Process exit codes: CI scripts can tell "msq broke" from "the model broke"."""

    OK = 0
    ERROR = 1
    USAGE = 2
    ACCURACY_GATE = 3
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports Ctrl-C)


class MsqError(Exception):
    """Base of every error msq reports to a user (exit status 1)."""

    exit_status: ExitStatus = ExitStatus.ERROR


class UsageError(MsqError):
    """A flag, option or parameter that cannot be honoured (exit status 2)."""

    exit_status = ExitStatus.USAGE


class InputError(MsqError):
    """compare.json or the paths it names are wrong."""


class DumpError(MsqError):
    """A dump file (dump.json, stack.json, construct.json, mapping YAML) is malformed."""


class TensorFileError(MsqError):
    """A tensor file (.pt/.npy) is unsafe or unreadable in a way that must stop the compare."""


class SqlFileError(MsqError):
    """A shipped or user SQL file failed to load."""


class ExportError(MsqError):
    """An output could not be written."""


class NothingComparedError(InputError):
    """The default mode compared nothing: no row has a counterpart (the outputs, which say why
    each row is unmatched, are written; ``results`` holds what the compare produced)."""

    def __init__(self, message: str, results: list[object] | None = None) -> None:
        super().__init__(message)
        self.results = results or []


class PairsFailedError(InputError):
    """Rank (and step) pairs of a directory compare failed (``failed``, a list of
    :class:`msq.result.FailedPair`): the other pairs are written and recorded, and ``results``
    (a :class:`msq.result.CompareResults`; empty when every pair failed) holds them."""

    def __init__(self, message: str, results: CompareResults, failed: list[FailedPair]) -> None:
        super().__init__(message)
        self.results = results
        self.failed = failed


class HistoryError(MsqError):
    """The history database cannot be used (wrong schema version, locked, ...)."""


# Control characters (line breaks, terminal escape sequences) from a dump must not reach a
# terminal raw: an op name could otherwise split an error line or retitle the user's window.
_UNPRINTABLE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x09}
_UNPRINTABLE.update({0x0A: " ", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def printable(text: str) -> str:
    """``text`` for one terminal line: line breaks become spaces, other control characters
    ``\\xNN`` escapes."""
    return text.translate(_UNPRINTABLE)


_UNPRINTABLE_KEEP_LINES = {c: s for c, s in _UNPRINTABLE.items() if c != 0x0A}


def printable_lines(text: str) -> str:
    """``text`` for a terminal, line breaks kept (CSV printed by ``msq sql``): every other
    control character becomes a ``\\xNN`` escape, so a dump's text cannot drive the terminal."""
    return text.translate(_UNPRINTABLE_KEEP_LINES)
