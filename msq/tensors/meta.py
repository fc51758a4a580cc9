"""Where a tensor's elements live in its file, and how to get them out without copying the file.

A :class:`TensorMeta` is what the readers (``ptfile``, ``npyfile``) produce after parsing only the
file's header: element dtype, shape, element strides and the byte offset of element 0. Small files
are read whole (one ``read`` call is cheaper than an mmap for a few KiB) and keep their bytes in
``data``; larger ones keep the descriptor that was opened (and checked) first, a
:class:`TensorFile`, and are reached through ``np.memmap`` or streamed chunk by chunk with
``preadv`` on it: a large file is never opened again by name in the process that checked it.
"""

from __future__ import annotations

import functools
import io
import math
import os
import socket
import stat
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from msq import cext
from msq.errors import TensorFileError

# open + fstat + read + close of a small file in one call (msq/tensors/_fused.c, POSIX only);
# without it os.open and os.read
_read_small = getattr(cext.load("msq.tensors._fused"), "read_small", None)
if os.environ.get("MSQ_NO_FUSED"):  # troubleshooting: msq's C tensor code off (as fused.py)
    _read_small = None

#: Files up to this size are read into memory in one call instead of being memory-mapped.
SMALL_FILE_BYTES = 1 << 20
#: The most dimensions a numpy array can have (numpy 2: 64; numpy 1: 32).
MAX_DIMS = 64 if int(np.__version__.split(".")[0]) >= 2 else 32
#: Descriptors of large files kept open at once per process; beyond this the oldest is closed
#: and reopened when next needed (and must then be the same file, see TensorFile).
MAX_KEPT_FILES = 256


class TensorFile:
    """A large tensor file, open: the descriptor that the confinement check opened.

    Opening a file again by name after it was checked would follow whatever symlink was swapped
    in since (issue 17: 6 of 25 tries read outside ``dump_tensor_data``). In the process that
    opened it every read goes through this descriptor. A TensorMeta that travels to another pool
    worker (pickled: descriptors do not cross processes), or whose descriptor was closed to stay
    under MAX_KEPT_FILES, reopens the path and must find the very same file, else
    TensorFileError: on the same machine the same device and inode; on another machine (a Ray
    task on another node, over a shared file system, which numbers its devices per machine) the
    same inode, size and modification time.
    """

    __slots__ = ("__weakref__", "_fd", "dev", "ino", "machine", "mtime_ns", "path", "size")

    def __init__(self, path: str, fd: int, st: os.stat_result) -> None:
        self.path, self.size, self.dev, self.ino = path, st.st_size, st.st_dev, st.st_ino
        self.mtime_ns, self.machine = st.st_mtime_ns, machine_id()
        self._fd: int | None = None
        self._keep(fd)

    def __getstate__(self) -> tuple[str, int, int, int, int, str]:
        return self.path, self.size, self.dev, self.ino, self.mtime_ns, self.machine

    def __setstate__(self, state: tuple[str, int, int, int, int, str]) -> None:
        self.path, self.size, self.dev, self.ino, self.mtime_ns, self.machine = state
        self._fd = None

    def fileno(self) -> int:
        """The kept descriptor (reopened and verified first when it is not held here)."""
        if self._fd is None:
            self._keep(self._reopen())
        assert self._fd is not None
        return self._fd

    def reader(self) -> io.FileIO:
        """A file object on a duplicate of the descriptor, for mmap; the caller closes it."""
        return io.FileIO(os.dup(self.fileno()), "rb", closefd=True)

    def pread(self, n: int, offset: int) -> bytes:
        """Up to ``n`` bytes at ``offset`` (fewer only at the end of the file)."""
        fd, parts, got = self.fileno(), [], 0
        while got < n:
            part = os.pread(fd, n - got, offset + got)
            if not part:
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def close(self) -> None:
        _KEPT.pop(id(self), None)
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110  (interpreter shutdown: the module may be gone)
            pass

    def _keep(self, fd: int) -> None:
        while len(_KEPT) >= MAX_KEPT_FILES:
            oldest = _KEPT.pop(next(iter(_KEPT)))()
            if oldest is not None:
                oldest.close()
        self._fd = fd
        _KEPT[id(self)] = weakref.ref(self)

    def _reopen(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise TensorFileError(f"{self.path}: cannot read tensor file ({exc.strerror})") from exc
        st = os.fstat(fd)
        if self.machine == machine_id():
            same = (st.st_dev, st.st_ino) == (self.dev, self.ino)
        else:
            same = (st.st_ino, st.st_size, st.st_mtime_ns) == (self.ino, self.size, self.mtime_ns)
        if not same:
            os.close(fd)
            raise TensorFileError(
                f"{self.path}: changed while msq was reading it (the name now leads to another "
                "file); refusing to read it"
            )
        return fd


@functools.cache
def machine_id() -> str:
    """This kernel's boot id (the host name where there is none): processes that share it see
    one file system through the same device numbers."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return socket.gethostname()


_KEPT: dict[int, weakref.ref[TensorFile]] = {}  # id -> file holding a descriptor, oldest first


@dataclass(eq=False, slots=True)
class TensorMeta:
    """Location and layout of one tensor's elements inside a file.

    Attributes:
        path: the file.
        dtype: element dtype as stored (byte order included); bfloat16 is stored as ``uint16``.
        bf16: True when the elements are bfloat16 (``dtype`` is then ``uint16``).
        shape: logical shape.
        strides: element strides, or None when the elements are C-contiguous.
        offset: byte offset of element 0 in the file (or in ``data``).
        data: the whole file when it was small enough to read eagerly, else None.
        file: the open file when ``data`` is None (None only for metas built by hand from a
            path, which is then opened by name).
    """

    path: str
    dtype: np.dtype
    bf16: bool
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    offset: int
    data: bytes | None = None
    file: TensorFile | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def value_dtype(self) -> np.dtype:
        """Dtype of the arrays handed to the metrics (bfloat16 widened to float32, native order)."""
        if self.bf16:
            return np.dtype(np.float32)
        return self.dtype.newbyteorder("=")

    @property
    def span(self) -> int:
        """Number of storage elements from element 0 to the last element reached (inclusive)."""
        if self.numel == 0:
            return 0
        if self.strides is None:
            return self.numel
        return 1 + sum((d - 1) * s for d, s in zip(self.shape, self.strides))


def _raw_base(meta: TensorMeta) -> np.ndarray:
    """1-D read-only array of the ``span`` storage elements starting at element 0."""
    span = meta.span
    if meta.data is not None:
        return np.frombuffer(meta.data, dtype=meta.dtype, count=span, offset=meta.offset)
    if span == 0:
        return np.empty(0, dtype=meta.dtype)
    with open_data(meta) as fh:
        return np.memmap(fh, dtype=meta.dtype, mode="r", offset=meta.offset, shape=(span,))


def open_data(meta: TensorMeta) -> io.FileIO:
    """A file object on the tensor's file (a duplicate of its kept descriptor); close it after."""
    if meta.file is None:
        return io.FileIO(meta.path, "rb")
    return meta.file.reader()


def bf16_to_f32(raw: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Widen bfloat16 bit patterns (uint16) to float32 exactly (what ``tensor.float()`` does)."""
    wide = np.empty(raw.shape, np.uint32) if out is None else out.view(np.uint32)
    np.copyto(wide, raw, casting="unsafe")
    np.left_shift(wide, 16, out=wide)
    return wide.view(np.float32)


def to_array(meta: TensorMeta, *, native: bool = True) -> np.ndarray:
    """The tensor as a numpy array: a zero-copy view when possible, else a materialised copy.

    bfloat16 becomes float32 (a copy); non-native byte order is converted (a copy); a strided
    layout is returned as a strided view over the map (callers needing contiguity copy it).
    ``native=False`` keeps the stored dtype as it is (byte order, bfloat16 as ``uint16``): a view.
    """
    base = _raw_base(meta)
    if meta.strides is None:
        arr = base.reshape(meta.shape)
    else:
        item = base.dtype.itemsize
        arr = np.lib.stride_tricks.as_strided(
            base, shape=meta.shape, strides=tuple(s * item for s in meta.strides), writeable=False
        )
    if not native:
        return arr
    if meta.bf16:
        return bf16_to_f32(np.ascontiguousarray(arr))
    if not arr.dtype.isnative:
        return arr.astype(arr.dtype.newbyteorder("="))
    return arr


def flat_array(meta: TensorMeta) -> np.ndarray:
    """``to_array(meta).reshape(-1)``: a tensor read whole (contiguous, native, not bfloat16)
    is viewed flat straight from its bytes, without the shaped view in between (22k small files
    on tensor_small's workers)."""
    if meta.data is not None and meta.strides is None and not meta.bf16 and meta.dtype.isnative:
        return np.frombuffer(meta.data, dtype=meta.dtype, count=math.prod(meta.shape),
                             offset=meta.offset)
    return to_array(meta).reshape(-1)


class ChunkReader:
    """Streams the C-order flattening of a tensor as native-dtype chunks in a reused buffer.

    Each yielded chunk is a writable 1-D array of ``value_dtype`` valid until the next one is
    requested. Contiguous file-backed tensors are read with ``readinto`` (no page-fault storm, no
    full-size temporary); in-memory tensors are sliced; strided layouts are gathered chunk by
    chunk from the storage map, so no reader ever holds more than a chunk of converted values.
    """

    def __init__(self, meta: TensorMeta, chunk: int) -> None:
        self.meta = meta
        self.chunk = max(1, chunk)
        size = min(self.chunk, max(meta.numel, 1))
        self.buf = np.empty(size, dtype=meta.value_dtype)
        converts = meta.bf16 or not meta.dtype.isnative
        self._raw = np.empty(size, dtype=meta.dtype) if converts else None

    def chunks(self, start: int = 0, stop: int | None = None) -> Iterator[np.ndarray]:
        """Yield chunks covering the flat elements ``[start, stop)``."""
        stop = self.meta.numel if stop is None else min(stop, self.meta.numel)
        if start >= stop:
            return
        if self.meta.strides is None and self.meta.data is None:
            yield from self._file_chunks(start, stop)
            return
        base = _raw_base(self.meta)
        for s in range(start, stop, self.chunk):
            k = min(self.chunk, stop - s)
            if self.meta.strides is None:
                raw = base[s : s + k]
            else:
                raw = base[_storage_index(self.meta.shape, self.meta.strides, s, s + k)]
            yield self._convert(raw, k)

    def _convert(self, raw: np.ndarray, k: int) -> np.ndarray:
        out = self.buf[:k]
        if self.meta.bf16:
            return bf16_to_f32(raw, out=out)
        np.copyto(out, raw)
        return out

    def _file_chunks(self, start: int, stop: int) -> Iterator[np.ndarray]:
        item = self.meta.dtype.itemsize
        with open_data(self.meta) as fh:
            fd = fh.fileno()
            at = self.meta.offset + start * item
            if hasattr(os, "posix_fadvise"):  # ask for the whole range now: disk reads overlap work
                os.posix_fadvise(fd, at, (stop - start) * item, os.POSIX_FADV_WILLNEED)
            for s in range(start, stop, self.chunk):
                k = min(self.chunk, stop - s)
                raw = self.buf[:k] if self._raw is None else self._raw[:k]
                _read_exact(fd, memoryview(raw).cast("B"), at, self.meta)  # type: ignore[arg-type]
                at += k * item
                yield raw if self._raw is None else self._convert(raw, k)


def _read_exact(fd: int, view: memoryview, offset: int, meta: TensorMeta) -> None:
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if not n:
            raise TensorFileError(
                f"{meta.path}: the file ends before the tensor data does (expected {meta.numel} "
                f"elements of {meta.dtype}); it is truncated, dump it again"
            )
        got += n


def _storage_index(
    shape: tuple[int, ...], strides: tuple[int, ...], start: int, stop: int
) -> np.ndarray:
    """Storage element index of each flat C-order position in ``[start, stop)``."""
    flat = np.arange(start, stop, dtype=np.int64)
    index = np.zeros(stop - start, dtype=np.int64)
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim > 1 and stride:
            index += (flat % dim) * stride
        flat //= max(dim, 1)
    return index


def check_shape(path: str, shape: tuple[int, ...], what: str, itemsize: int = 1) -> None:
    """Refuse a shape numpy cannot hold: more than MAX_DIMS dimensions, or (empty or not) more
    bytes than it can address once the zero dimensions are left out (numpy refuses an empty
    float32 array of shape (0, 2**61) too: it sizes the other dimensions in bytes)."""
    if len(shape) > MAX_DIMS:
        raise TensorFileError(
            f"{path}: the {what} has {len(shape)} dimensions; numpy (and msq) handle at most "
            f"{MAX_DIMS}"
        )
    if math.prod(d for d in shape if d > 0) * max(itemsize, 1) >= 1 << 62:
        raise TensorFileError(
            f"{path}: the {what} shape {shape} has more elements than numpy can address; "
            "the file is corrupt"
        )


def check_extent(meta: TensorMeta, available: int, what: str) -> None:
    """Refuse a layout that would read outside the ``available`` bytes of its storage."""
    if any(d < 0 for d in meta.shape) or (meta.strides and any(s < 0 for s in meta.strides)):
        raise TensorFileError(
            f"{meta.path}: negative size or stride in {what}; the file is corrupt"
        )
    need = meta.span * meta.dtype.itemsize
    if need > available:
        raise TensorFileError(
            f"{meta.path}: {what} needs {need} bytes of storage but only {available} are present; "
            "the file is truncated or corrupt, dump it again"
        )


def open_fd(path: str, *, nofollow: bool = False) -> int:
    """``os.open`` for reading a tensor file (raises OSError: FileNotFoundError; ELOOP for a
    symlink with ``nofollow``)."""
    # O_NONBLOCK: opening a FIFO named like a tensor file would otherwise wait for a writer
    # forever; it is then refused as not a regular file (no effect on regular files).
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK | (os.O_NOFOLLOW if nofollow else 0))


def take_fd(path: str, fd: int) -> bytes | TensorFile:
    """The file behind the open descriptor ``fd``: its bytes if it is at most SMALL_FILE_BYTES
    long (``fd`` is then closed), else a :class:`TensorFile` that keeps ``fd``.

    Raises:
        TensorFileError: not a regular file (``fd`` is closed).
    """
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TensorFileError(f"{path}: is not a regular file; expected a tensor file")
        size = st.st_size
        if size > SMALL_FILE_BYTES:
            opened = TensorFile(path, fd, st)
            fd = -1  # kept
            return opened
        data = os.read(fd, size)
        while len(data) < size:  # short reads: only on exotic filesystems
            more = os.read(fd, size - len(data))
            if not more:
                break
            data += more
        return data
    finally:
        if fd >= 0:
            os.close(fd)


def open_tensor(path: str, *, nofollow: bool = False) -> bytes | TensorFile:
    """Open ``path``: the whole file if small, else the open :class:`TensorFile`.

    Raises:
        OSError: as :func:`open_fd`.
        TensorFileError: the path is not a regular file.
    """
    if _read_small is not None:
        # the C extension opens as open_fd does and reads a small regular file in one call;
        # anything else comes back as the open descriptor
        got = _read_small(path, nofollow, SMALL_FILE_BYTES)
        return got if isinstance(got, bytes) else take_fd(path, got)
    return take_fd(path, open_fd(path, nofollow=nofollow))


def open_tensor_at(dirfd: int, name: str, path: str) -> bytes | TensorFile:
    """:func:`open_tensor` of the plain file name ``name`` in the open directory ``dirfd``
    (``path``: the same file by its path, named in messages), without following a symlink.

    Raises:
        OSError: as :func:`open_fd` with ``nofollow``.
        TensorFileError: the path is not a regular file.
    """
    if _read_small is not None:
        got = _read_small(name, True, SMALL_FILE_BYTES, dirfd)
        return got if isinstance(got, bytes) else take_fd(path, got)
    return take_fd(path, os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW, dir_fd=dirfd))


def read_small(path: str, *, nofollow: bool = False) -> bytes | None:
    """The whole file if it is at most SMALL_FILE_BYTES long, else None (open, fstat, read)."""
    opened = open_tensor(path, nofollow=nofollow)
    if isinstance(opened, TensorFile):
        opened.close()
        return None
    return opened
