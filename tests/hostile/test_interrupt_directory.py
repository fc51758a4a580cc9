"""Ctrl-C (and SIGTERM) during a directory compare (issue 17, item 3, on the driver's path).

A directory compare computes its rank pairs in worker processes (each pair a whole compare, with
its own dump-reader processes for large dumps) and the driver writes each pair's outputs and
records it, a few pairs a transaction. A signal to the whole process group, as a terminal's Ctrl-C
sends, must end the run within seconds: exit 130 and the one line, no process left (the pair
workers ignore the signal and are killed by the driver, their readers with them: before, the
pool's shutdown waited for the running pairs to finish), no temporary file, and every output in
the folder belongs to a pair the history recorded (the pairs finished before the signal are kept,
as ``--resume`` expects).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import tempfile
import time
from pathlib import Path

import duckdb
import pytest

from msq.loader import PARALLEL_BYTES
from tests.dumps import fwd, t, write_dump
from tests.hostile.helpers import outputs
from tests.hostile.test_interrupt_anytime import (
    LINE,
    group,
    kill_and_expect_no_survivors,
    seconds_to_stop,
    start,
    stop,
    wait_for_line,
)

RANKS = 4
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four rank pairs of statistics dumps large enough to be read by two processes each
    (without the C reader)."""
    root = tmp_path_factory.mktemp("ranks")
    data = {f"Functional.op{i}.0.forward": fwd(t(), t(), out=[t(), t()]) for i in range(4800)}
    for side in ("npu", "bench"):
        for rank in range(RANKS):
            write_dump(root / side / "step0" / f"rank{rank}", data)
    assert (root / "npu" / "step0" / "rank0" / "dump.json").stat().st_size > PARALLEL_BYTES
    cfg = root / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(root / "npu" / "step0"),
                               "bench_path": str(root / "bench" / "step0")}))
    return cfg


def recorded_files(db: Path) -> list[str]:
    if not db.exists():
        return []
    con = duckdb.connect(str(db), read_only=True)  # it opens: not damaged
    try:
        if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'compares'"
                           ).fetchall()[0][0]:
            return []
        return sorted(Path(f).name for (files,) in
                      con.execute("SELECT files FROM compares").fetchall() for f in files)
    finally:
        con.close()


def check(status: int, err: str, took: float, out: Path, db: Path, signum: int) -> int:
    """The run stopped as promised; returns how many pairs it recorded."""
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    assert took < seconds_to_stop(), f"{took:.1f} s from the signal to the exit:\n{err}"
    left = outputs(out)
    assert [n for n in left if n.startswith(".") or n.endswith(".tmp")] == [], left
    files = recorded_files(db)
    # the run's own output (its blame, written once every pair is recorded): there exactly when
    # the run completed, never behind a run reported as interrupted
    run_files = [n for n in left if n.startswith("blame_") and n.endswith(".json")]
    # the outputs of the recorded pairs, all there, and nothing else
    assert sorted(n for n in left if n not in run_files) == files, err
    pairs = len(files) // 2
    if status == 0:  # every pair had been recorded when the signal came
        assert pairs == RANKS, err
        assert len(run_files) == 1, (left, err)
    else:
        assert status == 130, err
        assert err.rstrip().splitlines()[-1] == LINE[signum], err
        assert run_files == [], (left, err)
    return pairs


def pair_workers_busy(pgid: int, readers: int = 0) -> bool:
    """msq, its forkserver and resource tracker, two pair workers (and ``readers`` dump-reader
    processes or more: only without the C reader, which reads both sides in threads)."""
    return len(group(pgid)) >= 5 + readers


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_pairs_are_computed(workload: Path, tmp_path: Path, signum: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """... and the killed workers' private folders (where each renders its pair's files,
    msq/pair_tables.py) are gone too."""
    out, db = tmp_path / "out", tmp_path / "h.duckdb"
    # short: the forkserver's socket goes in there too (AF_UNIX paths end at 108 bytes)
    private = Path(tempfile.mkdtemp(prefix="msq-t"))
    monkeypatch.setenv("TMPDIR", str(private))
    proc = start(workload, out, db, "--workers", "2")
    deadline = time.monotonic() + 120
    while not pair_workers_busy(proc.pid):
        assert time.monotonic() < deadline and proc.poll() is None, "the pairs never started"
        time.sleep(0.01)
    time.sleep(random.uniform(0, 1))
    try:
        check(*stop(proc, signum, []), out, db, signum)
        assert [p.name for p in private.iterdir() if p.name.startswith("msq-pair-")] == []
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_pairs_recorded_before_ctrl_c_are_kept(workload: Path, tmp_path: Path) -> None:
    out, db = tmp_path / "out", tmp_path / "h.duckdb"
    proc = start(workload, out, db, "--workers", "2")
    seen = wait_for_line(proc, "recorded compare 1 ")
    assert check(*stop(proc, signal.SIGINT, seen), out, db, signal.SIGINT) >= 1


def test_a_ctrl_c_once_the_runs_blame_is_written_lets_the_run_complete(
        workload: Path, tmp_path: Path) -> None:
    """Every pair is recorded and the run's blame file written (msq.blame.run.finish_run logs
    its name): the run is complete, as a single compare once its outputs exist. A Ctrl-C now
    (while the history is checkpointed) is held: exit 0 with every output, not an
    "interrupted" run that leaves the run's blame file behind."""
    out, db = tmp_path / "out", tmp_path / "h.duckdb"
    proc = start(workload, out, db, "--workers", "2")
    seen = wait_for_line(proc, "blame: the run's local sources are in")
    status, err, took = stop(proc, signal.SIGINT, seen)
    assert check(status, err, took, out, db, signal.SIGINT) == RANKS
    assert status == 0, err


def test_workers_die_with_a_killed_msq(workload: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """msq killed outright (SIGKILL, the OOM killer, a crash) while its pairs are computed: the
    pair workers (children of a forkserver, which outlives msq while they run) and their dump
    readers (here processes: the Python reader) end too, instead of finishing their pairs and
    waiting on a dead queue for ever."""
    monkeypatch.setenv("MSQ_NO_C_READER", "1")
    out, db = tmp_path / "out", tmp_path / "h.duckdb"
    proc = start(workload, out, db, "--workers", "2")
    deadline = time.monotonic() + 120
    while not pair_workers_busy(proc.pid, readers=1):
        assert time.monotonic() < deadline and proc.poll() is None, "the pairs never started"
        time.sleep(0.01)
    time.sleep(random.uniform(0, 1))
    kill_and_expect_no_survivors(proc)
