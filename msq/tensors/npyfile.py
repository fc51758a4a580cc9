"""Read a ``.npy`` tensor file (MindSpore dumps) without pickles: header parse, then mmap or bytes."""

from __future__ import annotations

import io

import numpy as np
from numpy.lib import format as npformat

from msq.errors import TensorFileError
from msq.tensors.meta import (
    TensorFile,
    TensorMeta,
    check_extent,
    check_shape,
    open_tensor,
    to_array,
)

#: numpy header parsing stops at a 10,000-byte header (``max_header_size``); read a bit more
_HEADER_BYTES = 1 << 16


def inspect_npy(path: str, data: bytes | TensorFile | None = None) -> TensorMeta:
    """Parse a ``.npy`` header and return where the array's elements are.

    Args:
        path: the ``.npy`` file.
        data: the whole file when the caller already read it (small files), the open file
            (large ones, see ``paths.read_confined``), or None to open ``path``.

    Returns:
        The array's :class:`TensorMeta` (small files carry their bytes in ``data``).

    Raises:
        TensorFileError: not a .npy file, a dtype that is not numeric (object, structured, text,
            bytes, datetime), more dimensions than numpy handles, or truncated.
    """
    try:
        if data is None:
            data = open_tensor(path)
    except OSError as exc:
        raise TensorFileError(f"{path}: cannot read tensor file ({exc.strerror or exc})") from exc
    if isinstance(data, TensorFile):
        opened, size = data, data.size
        dtype, shape, fortran, offset = _header(path, io.BytesIO(data.pread(_HEADER_BYTES, 0)))
        data = None
    else:
        opened, size = None, len(data)
        dtype, shape, fortran, offset = _header(path, io.BytesIO(data))
    strides: tuple[int, ...] | None = None
    if fortran and len(shape) > 1:
        steps: list[int] = []
        step = 1
        for d in shape:
            steps.append(step)
            step *= d
        strides = tuple(steps)
    meta = TensorMeta(path, dtype, False, shape, strides, offset, data, opened)
    check_extent(meta, size - offset, "the .npy header")
    return meta


def _header(path: str, stream: io.BytesIO) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    try:
        version = npformat.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran, dtype = npformat.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except ValueError as exc:
        raise TensorFileError(
            f"{path}: not a valid .npy file ({exc}); expected a numpy array dump"
        ) from None
    if dtype.hasobject:
        raise TensorFileError(
            f"{path}: holds an object array (dtype {dtype}), which needs a pickle to load; "
            "msq only loads numeric .npy arrays"
        )
    if dtype.names is not None or dtype.subdtype is not None:
        raise TensorFileError(
            f"{path}: holds a structured array (dtype {dtype}); expected a numeric array"
        )
    if dtype.kind not in _NUMERIC_KINDS:
        raise TensorFileError(
            f"{path}: holds an array of dtype {dtype}; msq compares numeric arrays only "
            "(bool, integers, floats, complex)"
        )
    check_shape(path, tuple(shape), "array", dtype.itemsize)
    return dtype, tuple(shape), bool(fortran), stream.tell()


_NUMERIC_KINDS = "biufc"  # bool, signed, unsigned, float, complex (not V, U, S, M, m, O)


def load_npy(path: str) -> np.ndarray:
    """The array in a ``.npy`` file, read-only (a memory map for large files)."""
    return to_array(inspect_npy(path))
