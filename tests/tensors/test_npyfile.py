"""The .npy reader: header parse + mmap/bytes, no pickles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from msq.errors import TensorFileError
from msq.tensors.meta import ChunkReader
from msq.tensors.npyfile import inspect_npy, load_npy
from msq.tensors.reader import load_tensor


@pytest.mark.parametrize(
    "arr",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.arange(12, dtype=np.float16),
        np.array(2.5),
        np.zeros((0, 3)),
        np.array([True, False]),
        np.arange(6, dtype=">i4"),
        np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        np.arange(5, dtype=np.complex64),
    ],
    ids=["f32", "f16", "0d", "empty", "bool", "big-endian", "fortran", "complex"],
)
def test_npy_roundtrip(tmp_path: Path, arr: np.ndarray) -> None:
    path = tmp_path / "a.npy"
    np.save(path, arr)
    got = load_tensor(str(path))
    assert got.shape == arr.shape and np.array_equal(got, arr)
    assert got.dtype == arr.dtype.newbyteorder("=")
    flat = [c.copy() for c in ChunkReader(inspect_npy(str(path)), 5).chunks()]
    if arr.size:
        assert np.array_equal(np.concatenate(flat), arr.reshape(-1))


def test_large_npy_is_memory_mapped(tmp_path: Path) -> None:
    arr = np.arange(400_000, dtype=np.float32)
    path = tmp_path / "big.npy"
    np.save(path, arr)
    meta = inspect_npy(str(path))
    assert meta.data is None
    assert np.array_equal(load_npy(str(path)), arr)


def test_object_array_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(TensorFileError, match="object array"):
        load_npy(str(path))


@pytest.mark.parametrize("size", [400_000, 100])
def test_truncated_npy_is_a_clear_error(tmp_path: Path, size: int) -> None:
    path = tmp_path / "t.npy"
    np.save(path, np.arange(size, dtype=np.float64))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TensorFileError, match="truncated"):
        load_npy(str(path))


def test_garbage_npy_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "g.npy"
    path.write_bytes(b"not numpy at all")
    with pytest.raises(TensorFileError, match="not a valid .npy"):
        load_npy(str(path))
