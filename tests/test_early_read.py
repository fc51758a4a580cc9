"""Both sides read while msq.pipeline is imported (msq.loader.EarlySides, started by msq.runner):
the compare takes exactly what read_sides would have read, and anything unusual leaves nothing
(read_sides then reads as it always did)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from msq import loader
from msq.flatten import C_PADDING
from msq.runner import run_from_compare_json
from tests.dumps import fwd, t, write_pair
from tests.test_flatten import same_table

pytestmark = pytest.mark.skipif(C_PADDING is None, reason="the C dump reader is not built")


def _pair(tmp_path: Path, ops: int = 40) -> tuple[Path, Path]:
    data = {f"Functional.relu.{i}.forward": fwd(t(mx=1.0 + i), out=t(mx=2.0 + i))
            for i in range(ops)}
    bench = {name: fwd(t(mx=1.0 + i), out=t(mx=2.5 + i)) for i, name in enumerate(data)}
    cfg = json.loads(write_pair(tmp_path, data, bench).read_text())
    return Path(cfg["npu_path"]), Path(cfg["bench_path"])


def _same_sides(got: tuple[loader.SideData, loader.SideData],
                want: tuple[loader.SideData, loader.SideData]) -> None:
    for a, b in zip(got, want):
        assert (a.side, a.path, a.task, a.has_md5, a.looks_mindspore) == \
            (b.side, b.path, b.task, b.has_md5, b.looks_mindspore)
        same_table(a.ops, b.ops)
        same_table(a.rows, b.rows)


@pytest.mark.parametrize("compat", [False, True])
def test_early_sides_are_what_read_sides_reads(tmp_path: Path, compat: bool) -> None:
    npu, bench = _pair(tmp_path)
    early = loader.EarlySides(npu, bench, compat)
    got = early.take(npu, bench, compat)
    assert got is not None
    _same_sides(got, (loader.read_side("npu", npu, compat), loader.read_side("bench", bench, compat)))
    assert early.take(npu, bench, compat) is None  # taken once


def test_read_sides_takes_the_early_read_of_its_files_only(tmp_path: Path) -> None:
    npu, bench = _pair(tmp_path)
    loader._early = loader.EarlySides(npu, bench, False)
    try:
        assert loader.read_sides(npu, bench, True) is not None  # another mode: read again
        assert loader._early is None  # dropped, not kept for a later compare
        loader._early = loader.EarlySides(npu, bench, False)
        early = loader._early
        sides = loader.read_sides(npu, bench, False)
        assert loader._early is None
        assert early.take(npu, bench, False) is None  # read_sides took it
        _same_sides(sides, (loader.read_side("npu", npu, False),
                            loader.read_side("bench", bench, False)))
    finally:
        loader.drop_early_read()


def test_nothing_kept_where_the_c_reader_gives_up(tmp_path: Path) -> None:
    npu, bench = _pair(tmp_path)
    # a lone surrogate escape: the C reader leaves it to the Python reader (and its messages)
    bench.write_text('{"task": "statistics", "data": {"A.\\ud800.forward": {}}}')
    assert loader.EarlySides(npu, bench, False).take(npu, bench, False) is None
    missing = tmp_path / "nowhere" / "dump.json"
    assert loader.EarlySides(npu, missing, False).take(npu, missing, False) is None


def test_a_large_pair_is_read_early_by_the_cli_path(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """msq.runner starts the early read for a pair the C reader reads in two threads (>= 4 MB),
    the compare takes it, and its outputs are those of a compare read the usual way."""
    ops = 6000  # ~2.5 MB a side
    npu, bench = _pair(tmp_path, ops)
    assert npu.stat().st_size + bench.stat().st_size >= loader.PARALLEL_BYTES
    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(npu), "bench_path": str(bench)}))
    with caplog.at_level(logging.DEBUG, logger="msq"):
        early = run_from_compare_json(cfg, tmp_path / "a", record=False)
    assert "both sides read while msq.pipeline was imported" in caplog.text
    assert loader._early is None
    # the same compare without an early read (the API path: msq.pipeline.compare)
    from msq.pipeline import compare

    plain = compare({"npu_json_path": str(npu), "bench_json_path": str(bench)}, tmp_path / "b",
                    record=False)
    got, want = early[0], plain
    assert (got.rows, got.matched, got.red, got.yellow, got.suspect) == \
        (want.rows, want.matched, want.red, want.yellow, want.suspect)
    shutil.rmtree(tmp_path / "a")
    shutil.rmtree(tmp_path / "b")


def test_a_fork_waits_for_an_early_read_begun_before_it(tmp_path: Path) -> None:
    """A pair of at most BEFORE_FORK_BYTES is read before the tensor pool forks (msq.runner):
    every fork of the process waits until the read has ended (msq.procs.wait_before_fork),
    never forking while the C reader's threads run; a larger pair is not begun then."""
    import os
    import threading
    import time

    from msq import procs

    npu, bench = _pair(tmp_path, 6000)
    size = npu.stat().st_size + bench.stat().st_size
    assert loader.PARALLEL_BYTES <= size <= loader.BEFORE_FORK_BYTES
    gate = threading.Event()
    procs.wait_before_fork(gate)  # a read that has not ended: the fork below must wait
    threading.Timer(0.3, gate.set).start()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert gate.is_set() and time.monotonic() - started >= 0.25
    loader.start_early_read(npu, bench, False, before_fork=True)
    early = loader._early
    assert early is not None and early._done in procs._FORK_WAITS
    pid = os.fork()  # waits for the read
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert early._done.is_set()
    loader.drop_early_read()
    big = loader.BEFORE_FORK_BYTES
    try:
        loader.BEFORE_FORK_BYTES = size - 1
        loader.start_early_read(npu, bench, False, before_fork=True)
        assert loader._early is None
    finally:
        loader.BEFORE_FORK_BYTES = big
