"""Confine tensor file names taken from a dump to that side's ``dump_tensor_data`` directory.

File names come from dump.json (``data_name``, or a row name + ``.pt``), i.e. from the data being
compared, so they are untrusted: a name must not climb out with ``..``, be absolute, or reach a
symlink whose target lies outside the directory. A name that is fine but absent is not an error
here: it is reported as missing so the metrics layer can write msprobe's NO_DATA row.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from msq.errors import TensorFileError
from msq.tensors.meta import TensorFile, open_fd, open_tensor, open_tensor_at, take_fd

TENSOR_DIR_NAME = "dump_tensor_data"


def tensor_dir_for(dump_json: str | os.PathLike[str]) -> Path:
    """The tensor directory of a side: ``<dirname(dump.json)>/dump_tensor_data`` (spec §1.2)."""
    return Path(dump_json).parent / TENSOR_DIR_NAME


def resolve_tensor_file(tensor_dir: str | os.PathLike[str], name: str) -> str | None:
    """The path of ``name`` inside ``tensor_dir``, or None when no such file exists.

    Args:
        tensor_dir: the side's ``dump_tensor_data`` directory.
        name: a file name from the dump, e.g. ``Functional.linear.0.forward.input.0.pt``.

    Returns:
        The file's path (as given under ``tensor_dir``, not the symlink target), or None when
        nothing exists under that name (a dangling symlink inside the directory counts as missing).

    Raises:
        TensorFileError: the name is empty, absolute, contains ``..`` or a NUL, or resolves (through
            a symlink) to a place outside ``tensor_dir``, or names something that is not a file.
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise TensorFileError(f"{tensor_dir}: invalid tensor file name {name!r} in the dump")
    plain = "/" not in name and "\\" not in name
    if not plain:
        parts = name.replace("\\", "/").split("/")
        if (
            name.startswith(("/", "\\"))
            or os.path.isabs(name)
            or any(p in ("", ".", "..") for p in parts)
        ):
            raise TensorFileError(
                f"{tensor_dir}: tensor file name {name!r} from the dump leaves the tensor directory; "
                "names must be plain file names inside dump_tensor_data"
            )
        name = os.path.join(*parts)
    elif name in (".", ".."):
        raise TensorFileError(f"{tensor_dir}: invalid tensor file name {name!r} in the dump")
    path = os.path.join(os.fspath(tensor_dir), name)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TensorFileError(f"{path}: cannot access tensor file ({exc.strerror})") from exc
    if plain and stat.S_ISREG(st.st_mode):
        return path  # a plain file directly in the directory: nothing to resolve
    real_root = _real_dir(os.fspath(tensor_dir))
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise TensorFileError(
            f"{path}: resolves to {real}, outside the tensor directory {real_root}; "
            "refusing to read it"
        )
    if not os.path.exists(real):
        return None
    if not os.path.isfile(real):
        raise TensorFileError(f"{path}: is not a regular file; expected a tensor file")
    return path


_POSIX = os.sep == "/" and os.altsep is None


@functools.lru_cache(maxsize=64)
def _real_dir(directory: str) -> str:
    return os.path.realpath(directory)


class _Dirs(threading.local):
    opened: dict[str, int] | None = None


_DIRS = _Dirs()


@contextlib.contextmanager
def directories_held() -> Iterator[None]:
    """Within the block, :func:`read_confined` opens a plain name relative to its directory,
    opened once (at its first name) and closed at the block's end: the kernel walks the file's
    name alone, not the directory's whole path again for each file (~0.7 us a file, 22k files
    on tensor_small). What a name opens is the same: the file of that name in the directory the
    path named when the block first used it. Nested blocks share the outer one's; per thread."""
    if _DIRS.opened is not None:
        yield
        return
    opened: dict[str, int] = {}
    _DIRS.opened = opened
    try:
        yield
    finally:
        _DIRS.opened = None
        for fd in opened.values():
            if fd >= 0:
                os.close(fd)


def _held_dir(root: str) -> int:
    """The descriptor of the directory ``root`` held by :func:`directories_held`, or -1 (no
    block, or the directory cannot be opened: the caller opens by path, and says why)."""
    opened = _DIRS.opened
    if opened is None:
        return -1
    fd = opened.get(root)
    if fd is None:
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (OSError, ValueError):
            fd = -1
        opened[root] = fd
    return fd


def read_confined(
    tensor_dir: str | os.PathLike[str], name: str
) -> tuple[str, bytes | TensorFile] | None:
    """Locate ``name`` in ``tensor_dir`` and open it, in as few system calls as possible.

    A plain name is opened directly with ``O_NOFOLLOW``: success proves a regular file inside the
    directory, so the usual case costs one open. A symlink (or a name with separators) goes
    through :func:`resolve_tensor_file`'s checks, is opened, and then the opened file itself is
    checked to lie inside the directory (the link may have been retargeted in between). Either
    way the descriptor that passed is the one every later read uses: a large file comes back as
    an open :class:`~msq.tensors.meta.TensorFile`, never to be reopened by name here.

    Returns:
        None when the file is missing, else ``(path, data)`` where ``data`` is the whole file if it
        is small (see ``meta.SMALL_FILE_BYTES``), else the open file.

    Raises:
        TensorFileError: as :func:`resolve_tensor_file`, or the file cannot be read.
    """
    if (
        isinstance(name, str)
        and name
        and "/" not in name
        and "\\" not in name
        and "\x00" not in name
        and name not in (".", "..")
    ):
        root = os.fspath(tensor_dir)
        # os.path.join, ~1 us less a file on POSIX (22k files on tensor_small's workers)
        path = (root + "/" + name if _POSIX and root and not root.endswith("/")
                else os.path.join(root, name))
        dirfd = _held_dir(root)
        try:
            return path, (open_tensor(path, nofollow=True) if dirfd < 0
                          else open_tensor_at(dirfd, name, path))
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise TensorFileError(f"{path}: cannot read tensor file ({exc.strerror})") from exc
    found = resolve_tensor_file(tensor_dir, name)
    if found is None:
        return None
    try:
        fd = open_fd(found)
    except FileNotFoundError:
        return None  # the link was removed since: as missing as before
    except OSError as exc:
        raise TensorFileError(f"{found}: cannot read tensor file ({exc.strerror})") from exc
    try:
        _check_opened(fd, os.fspath(tensor_dir), found)
    except BaseException:
        os.close(fd)
        raise
    return found, take_fd(found, fd)


def _check_opened(fd: int, tensor_dir: str, path: str) -> None:
    """Refuse the open descriptor ``fd`` unless its file lies inside ``tensor_dir``."""
    real_root = _real_dir(tensor_dir)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")  # Linux: where the descriptor really points
    except OSError:  # no /proc: the name must still resolve to the descriptor's file
        real = os.path.realpath(path)
        st = os.fstat(fd)
        try:
            same = os.path.samestat(st, os.stat(real))
        except OSError:
            same = False
        if not same:
            raise TensorFileError(
                f"{path}: changed while msq was reading it (the name now leads to another "
                "file); refusing to read it"
            ) from None
    if os.path.commonpath([real_root, real]) != real_root:
        raise TensorFileError(
            f"{path}: resolves to {real}, outside the tensor directory {real_root}; "
            "refusing to read it"
        )
