"""The one-pass C kernel (``_fused.c``) for tensors larger than one chunk: plan, mapping, fallback.

The numpy kernel in :mod:`msq.tensors.metrics` makes about twenty passes over every chunk; the C
kernel reads each element pair once, straight from the page cache (the file is memory-mapped, no
copy), and returns the same aggregates. Elementwise results (maxima, counts) are identical; the
dot products are summed in the kernel's own fixed order, so Cosine may differ from a single BLAS
call in the last bits. That is why only pairs larger than one chunk take this path: those are
summed per chunk by the numpy kernel too, while pairs up to one chunk keep numpy's exact BLAS
results (bit-identical to msprobe 1.1.0).

Covered: float32, bfloat16 and float16 tensors, C-contiguous, native byte order, with float16
paired with float16 and float32/bfloat16 with float32/bfloat16. Anything else, a chunk holding an
inf or NaN (msprobe's position check), or a build without the extension goes through numpy.
"""

from __future__ import annotations

import mmap
import os
from typing import Any, Literal, NamedTuple

import numpy as np

from msq import cext
from msq.errors import TensorFileError
from msq.tensors.meta import TensorMeta, bf16_to_f32, open_data

# None when built without a C compiler (or from an older _fused.c): the numpy kernel does all
# the work
_fused: Any = cext.load("msq.tensors._fused")
if os.environ.get("MSQ_NO_FUSED"):  # troubleshooting: force the numpy kernel everywhere
    _fused = None

F32, BF16, F16 = 0, 1, 2


def available() -> bool:
    """True when the C kernel was built (``pip install`` compiles it where a compiler exists)."""
    return _fused is not None


def isa() -> str:
    """Which loop the C kernel runs here ("avx2", "generic"), or "numpy" when it is not built."""
    return _fused.isa() if _fused is not None else "numpy"


class Plan(NamedTuple):
    """Arguments of ``_fused.stats`` for one pair of tensors."""

    npu_kind: int
    bench_kind: int
    eps: float  # machine epsilon of the bench dtype (the ε shift where bench is 0)
    t1: float  # 0.001 and 0.005 in the dtype the relative error is computed in
    t5: float


def _kind(meta: TensorMeta) -> int | None:
    if meta.strides is not None or not meta.dtype.isnative:
        return None
    if meta.bf16:
        return BF16
    if meta.dtype == np.float32:
        return F32
    if meta.dtype == np.float16:
        return F16
    return None


def plan(npu: TensorMeta, bench: TensorMeta) -> Plan | None:
    """The kernel's arguments for this pair, or None when the numpy kernel must do it."""
    if _fused is None:
        return None
    nk, bk = _kind(npu), _kind(bench)
    if nk is None or bk is None or (nk == F16) != (bk == F16):
        return None
    rdt = np.float16 if bk == F16 else np.float32  # bfloat16 is widened to float32 first
    return Plan(nk, bk, float(np.finfo(rdt).eps), float(rdt(0.001)), float(rdt(0.005)))


def stats(npu_raw: np.ndarray, bench_raw: np.ndarray, p: Plan, compat: bool,
          base: int = 0) -> tuple | None:
    """``(dot_nb, dot_nn, dot_bb, max_abs, max_rel, rel_nan, c1, c5, had_zero, sq_diff,
    npu_hash, bench_hash)`` of raw storage slices, or None when they hold an inf or NaN.

    ``base``: the flat index of the slices' first element in the tensor (for the content hash).
    """
    return _fused.stats(npu_raw, bench_raw, p.npu_kind, p.bench_kind, compat, p.eps, p.t1, p.t5,
                        base)


def segments(npu: np.ndarray, bench: np.ndarray, offsets: np.ndarray,
             compat: bool) -> list[tuple] | None | Literal[False]:  # fmt: skip
    """Element-wise aggregates of small pairs stored back to back: pair ``j`` is elements
    ``offsets[j]:offsets[j + 1]`` of both 1-D arrays (float32 with float32, or float16 with
    float16; bfloat16 already widened), each hashed as a whole tensor.

    Returns:
        ``[(max_abs, max_rel, c1, c5, npu_hash, bench_hash), ...]`` per pair; None when an element
        is inf or NaN (the caller then takes msprobe's exact per-pair path); False when the C
        kernel does not cover these dtypes or is not built.
    """
    if _fused is None or npu.dtype != bench.dtype:
        return False
    rdt: type[np.floating]
    if npu.dtype == np.float32:
        kind, rdt = F32, np.float32
    elif npu.dtype == np.float16:
        kind, rdt = F16, np.float16
    else:
        return False
    if not (npu.flags.c_contiguous and bench.flags.c_contiguous and npu.dtype.isnative):
        return False
    eps, t1, t5 = float(np.finfo(rdt).eps), float(rdt(0.001)), float(rdt(0.005))
    return _fused.segments(npu, bench, np.ascontiguousarray(offsets, dtype=np.int64), kind,
                           compat, eps, t1, t5)  # fmt: skip


#: numpy's ddot as the C extension calls it: None until looked for, then True or False.
_DDOT: list[bool] = []
#: The ILP64 CBLAS names numpy's wheels link (scipy-openblas: prefix scipy_, suffix 64_).
DDOT_NAMES = ("scipy_cblas_ddot64_", "cblas_ddot64_")


def _find_ddot() -> bool:
    """Give the C extension the very ddot numpy's own extension calls for np.dot of float64
    vectors: the symbol looked up through numpy's extension (so resolved in the library it is
    linked to), then checked bit for bit against np.dot on vectors of many lengths (self
    products included); anything else (another BLAS, no BLAS, no such symbol) keeps np.dot."""
    if _fused is None:
        return False
    try:
        import ctypes

        from numpy._core import _multiarray_umath as umath  # type: ignore[attr-defined]

        lib = ctypes.CDLL(umath.__file__)
    except (ImportError, OSError, AttributeError):
        return False
    for name in DDOT_NAMES:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            continue
        _fused.set_ddot(ctypes.cast(fn, ctypes.c_void_p).value or 0)
        if _ddot_agrees():
            return True
        _fused.set_ddot(0)
    return False


def _mixed_values(count: int, seed: int) -> np.ndarray:
    """``count`` float64 values of every sign, full 53-bit mantissas and exponents spread over
    2^-4..2^11 (splitmix64 of the positions): sums of their products round at nearly every
    step, so a different order of summation shows in the bits. Computed, not drawn: importing
    numpy.random took ~10 ms of CPU in each pool worker (its first small group checks ddot)."""
    z = np.arange(count, dtype=np.uint64) + np.uint64(seed)
    z = z * np.uint64(0x9E3779B97F4A7C15)  # arrays wrap silently modulo 2^64
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    unit = (z >> np.uint64(11)).astype(np.float64) * np.float64(2.0 ** -53)  # [0, 1)
    return (unit * 2.0 - 1.0) * np.ldexp(1.0, (z & np.uint64(15)).astype(np.int64) - 4)


def _ddot_agrees() -> bool:
    sizes = [*range(1, 70), 127, 128, 129, 1000, 4099]
    x = _mixed_values(sum(sizes), 1) * np.float64(1e3)
    y = _mixed_values(x.shape[0], 1 << 40)
    x[:3] = -0.0  # a one-element -0.0 product is numpy's -0.0; a sum of them its +0.0
    y[2] = 5e-324
    d = x - y
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    got = _fused.segment_dots(x, y, d, offsets)
    for (s, e), row in zip(zip(offsets[:-1].tolist(), offsets[1:].tolist()), got):
        n, b, t = x[s:e], y[s:e], d[s:e]
        want = (np.dot(n, b), np.dot(n, n), np.dot(b, b), np.dot(t, t))
        if np.array(row).tobytes() != np.array(want, dtype=np.float64).tobytes():
            return False
    return True


def segment_dots(n64: np.ndarray, b64: np.ndarray, diff: np.ndarray,
                 offsets: np.ndarray) -> list[tuple[float, float, float, float]] | None:
    """Per segment ``j`` (elements ``offsets[j]:offsets[j + 1]``, all non-empty) of three
    contiguous float64 arrays: ``(n.b, n.n, b.b, diff.diff)``, each exactly the np.dot of those
    slices (numpy's own BLAS function, see :func:`_find_ddot`); None where that function is not
    available (the caller calls np.dot)."""
    if not _DDOT:
        _DDOT.append(_find_ddot())
    if not _DDOT[0]:
        return None
    return _fused.segment_dots(n64, b64, diff, offsets)


def values(raw: np.ndarray, kind: int) -> np.ndarray:
    """A writable copy of raw storage as the values the numpy kernel expects."""
    return bf16_to_f32(raw) if kind == BF16 else np.array(raw)


def raw_range(meta: TensorMeta, start: int, stop: int) -> np.ndarray:
    """Read-only raw storage elements ``[start, stop)`` of a contiguous tensor, without copying.

    In-memory files are sliced; others are memory-mapped (the kernel then reads the page cache
    directly: no read() copy, no buffer). The map lives as long as the returned array.
    """
    item = meta.dtype.itemsize
    count = stop - start
    first = meta.offset + start * item
    if meta.data is not None:
        return np.frombuffer(meta.data, dtype=meta.dtype, count=count, offset=first)
    base = first - first % mmap.ALLOCATIONGRANULARITY
    with open_data(meta) as fh:  # the descriptor the reader kept: never the name again
        if os.fstat(fh.fileno()).st_size < first + count * item:
            # touching a mapped page past the end of the file would kill the process (SIGBUS)
            raise TensorFileError(
                f"{meta.path}: the file ends before the tensor data does (expected {meta.numel} "
                f"elements of {meta.dtype}); it is truncated, dump it again"
            )
        # (MAP_POPULATE and read() into a buffer were both measured slower here: 0.8 and 1.3 s
        # of system time for 4.4 GB, against 0.5 s for faulting pages in as the kernel reads)
        mm = mmap.mmap(fh.fileno(), first - base + count * item, access=mmap.ACCESS_READ,
                       offset=base)  # fmt: skip
    if hasattr(mm, "madvise"):  # read ahead of the kernel
        mm.madvise(mmap.MADV_SEQUENTIAL)
    return np.frombuffer(mm, dtype=meta.dtype, count=count, offset=first - base)
