"""Content hash of a tensor, computed in the metrics pass (blame links inputs to outputs by it).

The hash of a tensor is a sum over its 32-bit words ``w_t`` (t = 0, 1, ... in C order)::

    H = sum_t  M(t // HASH_BLOCK) * R[t % HASH_BLOCK] * w_t   (mod 2**64)

``R`` is a fixed table of 32-bit constants and ``M`` a 64-bit mix (splitmix64) of the block number.
Being a sum of per-word terms, the hash of a tensor is the sum of the hashes of its chunks and
element ranges, whatever worker computed them and in whatever order they are merged; the C kernel
(``_fused.c``) computes the very same numbers in its single pass.

Words: float32 values, and bfloat16 and float16 values widened to float32, give their float32 bits
(what the C kernel sees); other dtypes give their storage bytes as 32-bit words (an 8-byte element
is two words, a 1- or 2-byte element one word). Equal content of equal dtype gives equal hashes;
different content gives different hashes except with a chance of about 2**-32 or less per pair.
It identifies content; it is not a cryptographic digest.
"""

from __future__ import annotations

import numpy as np

HASH_BLOCK = 4096
MASK = (1 << 64) - 1


def _fmix32(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def _table() -> np.ndarray:
    j = np.arange(HASH_BLOCK, dtype=np.uint32)
    with np.errstate(over="ignore"):
        return _fmix32(j * np.uint32(0x9E3779B9) + np.uint32(0x7F4A7C15)).astype(np.uint64)


R64 = _table()


def block_mult(q: int) -> int:
    """splitmix64 of the block number: the weight of a block's sum."""
    z = (q + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


_M0 = block_mult(0)


def words_per_element(dtype: np.dtype) -> int:
    """How many hash words one element of ``dtype`` (as the metrics see it) gives."""
    if dtype in (np.float16, np.float32) or dtype.itemsize < 4:
        return 1
    return max(1, dtype.itemsize // 4)


def words(values: np.ndarray) -> np.ndarray:
    """The hash words of a contiguous 1-D array of values (see the module docstring)."""
    dt = values.dtype
    if dt == np.float32:
        return values.view(np.uint32)
    if dt == np.float16:
        return values.astype(np.float32).view(np.uint32)
    if dt.itemsize % 4 == 0:
        return np.ascontiguousarray(values).view(np.uint32)
    raw = np.ascontiguousarray(values).view(f"u{dt.itemsize}" if dt.itemsize in (1, 2) else "u1")
    return raw.astype(np.uint32)


def hash_words(w: np.ndarray, base: int = 0) -> int:
    """The hash of the words ``w`` standing at word positions ``base, base + 1, ...``."""
    k = int(w.shape[0])
    if k == 0:
        return 0
    w64 = w.astype(np.uint64)
    if base == 0 and k <= HASH_BLOCK:  # the common small tensor: one block, one dot
        return (_M0 * int(np.dot(w64, R64[:k]))) & MASK
    j0, q = base % HASH_BLOCK, base // HASH_BLOCK
    total = 0
    first = min(k, HASH_BLOCK - j0)
    total += block_mult(q) * int(np.dot(w64[:first], R64[j0 : j0 + first]))
    q += 1
    full = (k - first) // HASH_BLOCK
    if full:
        sums = w64[first : first + full * HASH_BLOCK].reshape(full, HASH_BLOCK) @ R64
        for s in sums.tolist():
            total += block_mult(q) * s
            q += 1
    rest = first + full * HASH_BLOCK
    if rest < k:
        total += block_mult(q) * int(np.dot(w64[rest:], R64[: k - rest]))
    return total & MASK


def hash_values(values: np.ndarray, first_element: int = 0) -> int:
    """The hash of a contiguous 1-D array of values starting at flat element ``first_element``."""
    return hash_words(words(values), first_element * words_per_element(values.dtype))

