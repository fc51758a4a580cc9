"""The C dump reader keeps nothing of a dump once its tables are gone.

A directory compare's pool worker reads two dump.json files a pair, for dozens of pairs: a
reference the reader kept would grow the worker by the dump's columns every pair (it did: ~12 MB
a 5,000-op pair). The columns are Python bytes objects, so tracemalloc sees them.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from msq.flatten import C_PADDING, flatten_c
from msq.jsonio import read_padded
from tests.dumps import fwd, t, write_dump

pytestmark = pytest.mark.skipif(C_PADDING is None, reason="msq._flatten is not built")


def _read_and_drop(path: Path) -> int:
    """Read the dump in C, drop the result; return the bytes its columns took meanwhile."""
    buf = read_padded(path, "dump.json", C_PADDING or 0)
    assert buf is not None
    out = flatten_c(buf, False)
    assert not isinstance(out, str), out
    size = out.ops.nbytes + out.rows.nbytes  # msq.flatten.Columns: the C reader's buffers
    del buf, out
    gc.collect()
    return size


def test_reading_a_dump_keeps_none_of_its_columns(tmp_path: Path) -> None:
    data = {f"Functional.op_{i}.0.forward": fwd(t(mx=float(i)), out=t(mn=-float(i)))
            for i in range(2000)}
    path = write_dump(tmp_path, data)
    _read_and_drop(path)  # first call: whatever the module caches once
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        size = 0
        for _ in range(3):
            size = _read_and_drop(path)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert size > 200_000  # the columns are large enough to see
    # a leak keeps all of them, three times; a few KB of interpreter noise is allowed
    assert kept < size // 10, (kept, size)
