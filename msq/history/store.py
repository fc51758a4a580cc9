"""Where the history database is, waiting for its lock, and the check made before a compare.

DuckDB lets one process at a time open a file for writing; a process that finds the file locked
waits with backoff (``MSQ_DB_TIMEOUT`` seconds, default 60) instead of failing.
"""

from __future__ import annotations

import logging
import os
import random
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

try:
    import fcntl
except ImportError:  # not POSIX: files a failed creation left are not removed
    fcntl = None  # type: ignore[assignment]

import duckdb

from msq import interrupts
from msq.errors import HistoryError, UsageError

log = logging.getLogger("msq")

DB_FILE = "msq.duckdb"
DEFAULT_TIMEOUT = 60.0
T = TypeVar("T")


class Aborted(Exception):
    """The compare stopped (an error or Ctrl-C in the main thread): roll the history back."""


def resolve_db_path(db_opt: str | Path | None, output_dir: Path | None = None) -> Path:
    """The history file: ``db_opt`` (``--db`` / ``db=``), else ``$MSQ_DB``, else ``msq.duckdb``.

    Args:
        db_opt: the path given by the user, if any.
        output_dir: the compare's output directory (the default's folder); the working directory
            when None (``msq sql``, ``msq runs``).

    Returns:
        The database path (not necessarily existing).
    """
    chosen = db_opt or os.environ.get("MSQ_DB")
    if chosen:
        return Path(chosen)
    return (output_dir or Path(".")) / DB_FILE


def lock_timeout(timeout: float | None = None) -> float:
    """Seconds to wait for a locked database: the argument, else ``$MSQ_DB_TIMEOUT``, else 60."""
    if timeout is not None:
        return timeout
    raw = os.environ.get("MSQ_DB_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"MSQ_DB_TIMEOUT must be a number of seconds, got {raw!r}") from None
    if value < 0:
        raise UsageError(f"MSQ_DB_TIMEOUT must be 0 or more seconds, got {raw!r}")
    return value


def is_lock_error(err: BaseException) -> bool:
    text = str(err)
    return "Could not set lock" in text or "Conflicting lock" in text


def first_lines(err: BaseException) -> str:
    """DuckDB's message up to its first blank line (drops the LINE/caret excerpt), on one line."""
    head = str(err).strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in head.splitlines() if line.strip())


def with_lock_retry(action: Callable[[], T], path: Path, timeout: float,
                    stop: threading.Event | None = None) -> T:
    """Run ``action`` (open or ATTACH ``path``), retrying while another process holds its lock.

    Args:
        action: opens the database; raises duckdb.IOException when the file is locked.
        path: the database, for messages.
        timeout: seconds to keep trying.
        stop: set by another thread to give up waiting (raises ``Aborted``).

    Returns:
        What ``action`` returned.
    """
    deadline = time.monotonic() + timeout
    delay = 0.05
    waited = False
    while True:
        try:
            return action()
        except duckdb.IOException as err:
            if not is_lock_error(err):
                raise open_error(path, err) from None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HistoryError(
                    f"{path}: the history database is still locked by another process after "
                    f"{timeout:g} s ({first_lines(err)}); try again later, raise MSQ_DB_TIMEOUT, "
                    "or record elsewhere with --db / skip with --no-history") from None
            if not waited:
                log.info("%s: another process is using the history database; waiting up to %g s",
                         path, timeout)
                waited = True
            # jitter keeps two waiting processes from retrying in lockstep
            pause = min(remaining, delay * random.uniform(0.5, 1.0))
            if stop is None:
                time.sleep(pause)
            elif stop.wait(pause):
                raise Aborted
            delay = min(delay * 2, 1.0)
        except duckdb.Error as err:
            raise open_error(path, err) from None


def open_error(path: Path, err: BaseException) -> HistoryError:
    text = first_lines(err)
    if "not a valid DuckDB database" in text:
        return HistoryError(f"{path}: exists but is not a DuckDB database; choose another --db")
    return HistoryError(f"{path}: cannot open the history database: {text}")


def check_target(db_opt: str | Path | None, output_dir: Path) -> None:
    """A history file that cannot be created would fail the run after the whole compare (the
    outputs written, exit 1): find out before it starts. Schema and locks are checked later, when
    the file is opened."""

    path = resolve_db_path(db_opt, output_dir)
    try:
        _check_db_file(path)
    except OSError as err:  # e.g. a name too long for the file system
        raise HistoryError(f"{str(path)[:200]}: cannot use it as the history database "
                           f"({err.strerror}); choose another --db, or --no-history") from None


def _check_db_file(path: Path) -> None:
    if path.is_file() and path.stat().st_size == 0 and remove_failed_creation(path):
        # DuckDB refuses an empty file for good: one a failed creation (a full disk) left
        log.info("%s: removed an empty file left where the history was to be created", path)
    if path.exists():
        if not path.is_file():
            raise HistoryError(f"{path}: is not a file; choose another --db")
        try:
            with open(path, "rb") as handle:
                magic = handle.read(12)[8:]
        except OSError as err:
            raise HistoryError(f"{path}: cannot read the history database ({err.strerror}); "
                               "choose another --db, or --no-history") from None
        if magic != b"DUCK":  # DuckDB's file header: 8 bytes of checksum, then "DUCK"
            if locked_by_another_process(path):
                # another msq (or DuckDB) is creating it right now: it holds the file's lock
                # from before the header is written; opening it later waits for that lock
                return
            raise HistoryError(f"{path}: exists but is not a DuckDB database; choose another --db")
        return
    if not path.parent.is_dir():
        raise HistoryError(f"{path}: its folder does not exist; create it or choose another --db")
    try:
        with interrupts.deferred(), tempfile.NamedTemporaryFile(dir=path.parent,
                                                               prefix=".msq-write-test-"):
            pass  # whole: a Ctrl-C in between would leave the probe behind
    except OSError as err:
        raise HistoryError(f"{path}: cannot create the history database there ({err.strerror}); "
                           "choose another --db, or --no-history") from None


# --------------------------------------------------------------------------------------------
# what a failed record leaves behind


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged writer may still use on ``folder``'s file system (None: unknown)."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


@dataclass
class FileState:
    """The history file as a record found it, with its lock held: what a failed record restores.

    DuckDB keeps the blocks of a rolled-back insert inside the file (a record that failed on a
    full disk left the file grown to fill it), and never shrinks a file. Everything the file
    held before the record lies within its size then, so cutting it back is safe while the lock
    is held; a file the record created, and that held nothing before, is removed instead.
    """

    size: int
    created: bool       # the record's ATTACH created the file
    wal_clean: bool     # no write-ahead log (or an empty one): it will hold this record alone
    fresh: bool = False  # no history in it before this record (set once the schema is read)

    @classmethod
    def of(cls, path: Path, created: bool) -> FileState:
        try:
            wal_size = _wal(path).stat().st_size
        except FileNotFoundError:
            wal_size = 0
        return cls(path.stat().st_size, created, wal_size == 0)

    def restore(self, path: Path) -> None:
        """After a rollback, with the lock still held: the file back to what it was."""
        try:
            if self.created and self.fresh:
                path.unlink(missing_ok=True)
                _wal(path).unlink(missing_ok=True)
            elif path.stat().st_size > self.size:
                os.truncate(path, self.size)
        except OSError as err:
            log.warning("%s: could not give back the space of the failed record (%s)", path,
                        err.strerror)

    def undo_commit(self, path: Path) -> bool:
        """A commit whose checkpoint failed exists only in the write-ahead log (the file's
        header still names the state before it): dropping the log undoes it. Only when the log
        held nothing else; False when it cannot be undone."""
        if not self.wal_clean:
            return False
        try:
            _wal(path).unlink(missing_ok=True)
        except OSError:
            return False
        self.restore(path)
        return True


#: What :func:`_open_locked` gives when another process holds the file's lock.
_HELD = -1


def _open_locked(path: Path) -> int | None:
    """``path`` opened for writing with the lock DuckDB takes on its files, taken without
    waiting: the descriptor (closing it releases the lock), ``_HELD`` when another process
    holds the lock, None when the file cannot be opened (or there is no fcntl)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # DuckDB holds its files this way
    except OSError:
        os.close(fd)
        return _HELD
    return fd


def locked_by_another_process(path: Path) -> bool:
    """Whether another process holds the lock DuckDB takes on its files (a history file being
    created holds it before its header is written). Probed by taking that lock for a moment."""
    fd = _open_locked(path)
    if fd is not None and fd != _HELD:
        os.close(fd)  # releases the probe's lock
    return fd == _HELD


def remove_failed_creation(path: Path) -> bool:
    """Remove a history file that a creation left without DuckDB's header (a full disk): DuckDB
    refuses such a file for good. Only a regular file that no process holds; True if removed."""
    fd = _open_locked(path)
    if fd is None or fd == _HELD:  # held: being created right now by another process
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or os.pread(fd, 12, 0)[8:12] == b"DUCK":
            return False
        if os.stat(path, follow_symlinks=False).st_ino != st.st_ino:
            return False
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
