"""Readers for the JSON files of a dump: dump.json, stack.json, construct.json, compare.json.

msprobe writes dump.json with Python's ``json.dump``, so non-finite floats appear as the bare tokens
``NaN``, ``Infinity`` and ``-Infinity``; Python's decoder accepts them and keeps key order, which
matters because op order is execution order. Every failure becomes a :class:`DumpError` that names
the file, the line and the column.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from msq.errors import DumpError, InputError, UsageError

log = logging.getLogger("msq")

# A dump.json is loaded whole; past this size msq refuses it with a clear message instead of risking
# an out-of-memory kill on a 24 GB machine (Python objects take ~10x the file size).
# MSQ_MAX_JSON_BYTES overrides it, read at each call.
MAX_JSON_BYTES = 1 << 30
# The two dump.json of one compare together: a compare holds its rows in memory (the flattened
# rows, DuckDB's tables of pairs, results and the workbook's), measured at ~16x the dumps' bytes
# at the peak for the densest dumps (tiny ops, ~110 bytes a row; bench/README.md, issue 17 #8).
# 80 MiB keeps that peak under 1.5 GB; MSQ_MAX_DUMP_BYTES overrides it, read at each call.
MAX_DUMP_BYTES = 80 << 20
DUMP_TASKS = ("tensor", "statistics")


def max_json_bytes() -> int:
    """The size limit: ``MSQ_MAX_JSON_BYTES`` when set, else :data:`MAX_JSON_BYTES`."""
    return _limit("MSQ_MAX_JSON_BYTES", MAX_JSON_BYTES)


def max_dump_bytes() -> int:
    """The limit on both dump.json of a compare: ``MSQ_MAX_DUMP_BYTES``, else :data:`MAX_DUMP_BYTES`."""
    return _limit("MSQ_MAX_DUMP_BYTES", MAX_DUMP_BYTES)


def _limit(variable: str, default: int) -> int:
    raw = os.environ.get(variable)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value <= 0:
        raise UsageError(f"{variable} must be a positive number of bytes, got {raw!r}")
    return value


def check_pair_size(npu: Path, bench: Path) -> None:
    """Refuse a compare whose two dump.json hold more than :func:`max_dump_bytes` together,
    on their sizes, before either is read (after each file's own checks: found, not empty, under
    :func:`max_json_bytes`)."""
    size = checked_size(npu, "dump.json") + checked_size(bench, "dump.json")
    limit = max_dump_bytes()
    if size > limit:
        raise DumpError(
            f"{npu} and {bench}: the two dump.json hold {_mib(size)} together, above msq's "
            f"{_mib(limit)} limit for one compare (its memory peaks at ~16x that); dump fewer "
            "steps/ranks per file, or raise MSQ_MAX_DUMP_BYTES if memory allows")


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def _size_text(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{int(n):,} bytes"


def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file, turning every failure into a one-line error that names the file."""
    return _parse(path, what)[0]


def checked_size(path: Path, what: str) -> int:
    """The size of a JSON file msq may read: it exists, is a file, not empty, within the limit."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        # compare.json is the command's own argument; the other files are named inside it
        where = "the command line" if what == "compare.json" else "compare.json"
        raise InputError(f"{path}: {what} not found; check the path in {where}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read {what}: {err.strerror}") from None
    if path.is_dir():
        raise InputError(f"{path}: expected a {what} file, found a directory")
    if size == 0:
        raise DumpError(f"{path}: {what} is empty; re-run the dump or point to the right file")
    limit = max_json_bytes()
    if size > limit:
        raise DumpError(
            f"{path}: {what} is {_size_text(size)}, above msq's {_size_text(limit)} limit; "
            "dump fewer steps/ranks per file, or raise MSQ_MAX_JSON_BYTES if memory allows"
        )
    return size


def read_padded(path: Path, what: str, padding: int,
                make: Callable[[int, int], Any] | None = None) -> Any:
    """The file's bytes and ``padding`` zero bytes more, for the C reader (which parses in
    place); None when the file changed while it was read (the Python reader then reads it).

    ``make(size, padding)`` gives the writable buffer (msq.flatten.input_buffer: its first
    ``size`` bytes not zeroed first, as bytearray's are); a bytearray without it.
    """
    size = checked_size(path, what)
    buf = make(size, padding) if make is not None else bytearray(size + padding)
    try:
        with open(path, "rb", buffering=0) as handle, memoryview(buf) as view:
            got = 0
            while got < size:
                n = handle.readinto(view[got:size])
                if not n:
                    break
                got += n
    except OSError as err:
        raise InputError(f"{path}: cannot read {what}: {err.strerror}") from None
    return buf if got == size else None


def _parse(path: Path, what: str) -> tuple[Any, str]:
    """The parsed document and its text."""
    checked_size(path, what)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as err:
        raise InputError(f"{path}: cannot read {what}: {err.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DumpError(f"{path}: {what} is not UTF-8 text (bad byte at line {line}); "
                        "it may be truncated or not a JSON file") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise DumpError(f"{path}: malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}"
                        "; the file may be truncated or hand-edited") from None
    except RecursionError:
        raise DumpError(f"{path}: JSON nested too deeply to be a dump file") from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        raise DumpError(f"{path}: {what} holds an integer of more than "
                        f"{sys.get_int_max_str_digits()} digits{_line_of(text, _LONG_INT)}; "
                        "no dump holds such a number: the file is damaged or not a dump") from None
    if "\\ud" in text or "\\uD" in text:
        _check_surrogates(path, what, text, doc)
    return doc, text


_LONG_INT = re.compile(rf"[0-9]{{{sys.get_int_max_str_digits() + 1},}}")
_LONE_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
                             r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _line_of(text: str, pattern: re.Pattern[str]) -> str:
    match = pattern.search(text)
    return f" at line {text.count(chr(10), 0, match.start()) + 1}" if match else ""


def _check_surrogates(path: Path, what: str, text: str, doc: Any) -> None:
    """A \\udXXX escape without its pair decodes to a string no UTF-8 writer (Arrow, DuckDB, the
    workbook) can store; refuse it here, by line, rather than fail later without a name."""
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise DumpError(f"{path}: {what} holds an unpaired UTF-16 surrogate escape "
                        f"(\\ud800-\\udfff){_line_of(text, _LONE_SURROGATE)}, which is not text; "
                        "fix or remove that string") from None
    except (RecursionError, ValueError):
        pass


def read_dump(path: Path) -> dict[str, Any]:
    """Read and shape-check a dump.json: an object with ``task`` and an object ``data``."""
    doc, text = _parse(path, "dump.json")
    if not isinstance(doc, dict):
        raise DumpError(f"{path}: expected a JSON object with 'task' and 'data', "
                        f"found a {type(doc).__name__}; is this a msprobe dump.json?")
    if "data" not in doc:
        raise DumpError(f"{path}: no 'data' key; is this a msprobe dump.json?")
    if not isinstance(doc["data"], dict):
        raise DumpError(f"{path}: 'data' must be an object of op name -> entry, "
                        f"found a {type(doc['data']).__name__}")
    _warn_duplicate_ops(path, text, doc["data"])
    task = doc.get("task")
    if task in ("overflow_check", "free_benchmark"):
        raise DumpError(f"{path}: task '{task}' dumps are not comparable; "
                        "compare dumps taken with task 'statistics' or 'tensor'")
    if task not in DUMP_TASKS:
        raise DumpError(f"{path}: unknown task {task!r}; expected one of: statistics, tensor")
    return doc


def _warn_duplicate_ops(path: Path, text: str, data: dict[str, Any]) -> None:
    """Warn about an op name that ``data`` holds twice (Python's json, like msprobe, keeps the
    last entry, at the first one's position, and drops the other without a word).

    msprobe writes ``json.dump(indent=1)``: every op name opens a line indented by two spaces, so
    counting those lines proves a file in that layout has no duplicate for almost nothing. Any
    other layout, or a count that differs, is parsed again keeping the key pairs.
    """
    if text.startswith('{\n "') and text.count('\n  "') == len(data):
        return
    dups: dict[int, dict[str, int]] = {}

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            counts: dict[str, int] = {}
            for key, _ in pairs:
                counts[key] = counts.get(key, 0) + 1
            dups[id(obj)] = {k: n for k, n in counts.items() if n > 1}
        return obj

    try:
        again = json.loads(text, object_pairs_hook=pairs_hook)
    except (ValueError, RecursionError):
        return
    repeated = dups.get(id(again.get("data"))) if isinstance(again, dict) else None
    for name, count in (repeated or {}).items():
        log.warning("%s: op '%s' appears %d times in 'data'; msq (like msprobe) compares only its "
                    "last entry; re-dump, or remove the stale entries", path, name, count)


def read_stack(path: Path) -> dict[str, str]:
    """Read stack.json as op name -> the Python repr of its frame list (the cell text msprobe writes)."""
    return {op: repr(frames) for op, frames in check_stack(path).items()}


def check_stack(path: Path) -> dict[str, list[Any]]:
    """Read stack.json and check its shape (op name -> list of frames); return it parsed."""
    doc = read_json(path, "stack.json")
    if not isinstance(doc, dict):
        raise DumpError(f"{path}: expected an object of op name -> list of frames, "
                        f"found a {type(doc).__name__}")
    for op, frames in doc.items():
        if not isinstance(frames, list):
            raise DumpError(f"{path}: entry '{op}': expected a list of frames, "
                            f"found a {type(frames).__name__}")
    return doc


def read_construct(path: Path) -> dict[str, Any]:
    """Read construct.json (op name -> parent op name or null)."""
    doc = read_json(path, "construct.json")
    if not isinstance(doc, dict):
        raise DumpError(f"{path}: expected an object of op name -> parent, found a {type(doc).__name__}")
    return doc
