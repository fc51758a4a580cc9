"""The C dump reader keeps nothing of a dump once its tables are gone.

A directory compare's pool worker reads two dump.json files a pair, for dozens of pairs: a
reference the reader kept would grow the worker by the dump's columns every pair (it did: ~12 MB
a 5,000-op pair). Small columns are Python bytes objects, which tracemalloc sees; large ones
(and the dump's own bytes) are the reader's Buffers, whose bytes msq._flatten.live_bytes counts.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from msq import flatten as flatten_mod
from msq.flatten import C_PADDING, flatten_c
from msq.jsonio import read_padded
from tests.dumps import fwd, t, write_dump

pytestmark = pytest.mark.skipif(C_PADDING is None, reason="msq._flatten is not built")


def _read_and_drop(path: Path) -> int:
    """Read the dump in C, drop the result; return the bytes its columns took meanwhile."""
    buf = read_padded(path, "dump.json", C_PADDING or 0, flatten_mod.input_buffer)
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
    live = flatten_mod._c.live_bytes()
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
    assert flatten_mod._c.live_bytes() == live  # every Buffer freed


def test_the_readers_buffers_are_counted_while_alive(tmp_path: Path) -> None:
    """live_bytes sees the reader's Buffers (so the test above would see one kept)."""
    path = write_dump(tmp_path, {f"Functional.op_{i}.0.forward": fwd(t(mx=float(i)))
                                 for i in range(2000)})
    live = flatten_mod._c.live_bytes()
    buf = read_padded(path, "dump.json", C_PADDING or 0, flatten_mod.input_buffer)
    assert flatten_mod._c.live_bytes() - live == len(buf)
    out = flatten_c(buf, False)
    del buf
    assert not isinstance(out, str)
    assert flatten_mod._c.live_bytes() - live > 200_000  # the large columns
    del out
    gc.collect()
    assert flatten_mod._c.live_bytes() == live


def test_a_reads_large_blocks_are_kept_for_the_next_read(tmp_path: Path) -> None:
    """A dump's bytes and yyjson's document of it are blocks kept for the next read (the
    kernel maps and zeroes a new block page by page: ~1,500 page faults a 5 MB dump each), at
    most four of them, however many dumps are read; a dump read into a kept block gives the
    same columns as the first read of it."""
    big = write_dump(tmp_path / "big", {f"Functional.op_{i}.0.forward": fwd(t(mx=float(i)), out=t())
                                        for i in range(3000)})
    small = write_dump(tmp_path / "small", {"Functional.op_0.0.forward": fwd(t(), out=t())})

    def columns(path: Path) -> list[object]:
        buf = read_padded(path, "dump.json", C_PADDING or 0, flatten_mod.input_buffer)
        out = flatten_c(buf, False)
        del buf
        assert not isinstance(out, str)
        return [out.ops.to_pylist(), out.rows.to_pylist()]

    first = columns(big)
    count, kept = flatten_mod._c.kept_blocks()
    assert 2 <= count <= 4 and kept >= 2 * big.stat().st_size  # its bytes and its document
    for _ in range(5):
        assert columns(big) == first
        columns(small)
    count, again = flatten_mod._c.kept_blocks()
    assert count <= 4 and again == kept  # the same blocks taken again, none added
