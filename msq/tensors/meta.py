"""Where a tensor's elements live in its file, and how to get them out without copying the file.

A :class:`TensorMeta` is what the readers (``ptfile``, ``npyfile``) produce after parsing only the
file's header: element dtype, shape, element strides and the byte offset of element 0. Small files
are read whole (one ``read`` call is cheaper than an mmap for a few KiB) and keep their bytes in
``data``; larger ones are reached through ``np.memmap`` or streamed chunk by chunk with ``readinto``.
"""

from __future__ import annotations

import io
import math
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from msq.errors import TensorFileError

#: Files up to this size are read into memory in one call instead of being memory-mapped.
SMALL_FILE_BYTES = 1 << 20


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
    """

    path: str
    dtype: np.dtype
    bf16: bool
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    offset: int
    data: bytes | None = None

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
    return np.memmap(meta.path, dtype=meta.dtype, mode="r", offset=meta.offset, shape=(span,))


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
        with open(self.meta.path, "rb", buffering=0) as fh:
            first = self.meta.offset + start * item
            if hasattr(os, "posix_fadvise"):  # ask for the whole range now: disk reads overlap work
                os.posix_fadvise(fh.fileno(), first, (stop - start) * item, os.POSIX_FADV_WILLNEED)
            fh.seek(first)
            for s in range(start, stop, self.chunk):
                k = min(self.chunk, stop - s)
                raw = self.buf[:k] if self._raw is None else self._raw[:k]
                _read_exact(fh, memoryview(raw).cast("B"), self.meta)  # type: ignore[arg-type]
                yield raw if self._raw is None else self._convert(raw, k)


def _read_exact(fh: io.RawIOBase, view: memoryview, meta: TensorMeta) -> None:
    got = 0
    while got < len(view):
        n = fh.readinto(view[got:])
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


def read_small(path: str, *, nofollow: bool = False) -> bytes | None:
    """The whole file if it is at most SMALL_FILE_BYTES long, else None (open, fstat, read).

    Raises:
        OSError: as ``os.open`` does (FileNotFoundError; ELOOP for a symlink with ``nofollow``).
        TensorFileError: the path is not a regular file.
    """
    # O_NONBLOCK: opening a FIFO named like a tensor file would otherwise wait for a writer
    # forever; it is then refused below as not a regular file (no effect on regular files).
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (os.O_NOFOLLOW if nofollow else 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TensorFileError(f"{path}: is not a regular file; expected a tensor file")
        size = st.st_size
        if size > SMALL_FILE_BYTES:
            return None
        data = os.read(fd, size)
        while len(data) < size:  # short reads: only on exotic filesystems
            more = os.read(fd, size - len(data))
            if not more:
                break
            data += more
        return data
    finally:
        os.close(fd)


def file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError as exc:
        raise TensorFileError(f"{path}: cannot stat tensor file ({exc.strerror})") from exc
