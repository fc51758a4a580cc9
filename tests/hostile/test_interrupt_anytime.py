"""Ctrl-C (and SIGTERM) at any moment of a real-data compare (issue 17, item 3).

The probe sent 85 Ctrl-Cs at random moments to a compare of bench/gen_tensor.py's small tensor
workload: 2 hung (the dump readers' pool: a worker forked with msq's SIGINT handler died, and
the pool's shutdown waited for ever) and 3 aborted with SIGABRT (Python 3.11: a
``Thread.join(timeout)`` interrupted by KeyboardInterrupt marks the running history thread
stopped, and the interpreter exits in the middle of a DuckDB call; the compare was committed
although msq said "interrupted").

Here the same workload (fewer ops: still above the size where both dumps are read by two
processes), and the signal goes to the whole process group, as a terminal's Ctrl-C does. Random
moments would need many runs to hit the short windows of the two failures, so the moments are
drawn inside the phases where they lie (:data:`PHASES`), plus some over the whole run. Every signal must end the run within a few seconds:

* exit 130 and the one line (or exit 0 when the compare had already committed its record: it
  is complete), no traceback, no process left;
* no temporary file, any workbook complete; no history row for an interrupted compare, and the
  history file, if any, opens.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import duckdb
import pytest

from msq.loader import PARALLEL_BYTES
from tests.hostile.helpers import outputs
from tests.hostile.test_interrupt import assert_group_gone, group

ROOT = Path(__file__).parents[2]
MSQ = [sys.executable, "-m", "msq"]
LINE = {signal.SIGINT: "msq: interrupted; no partial output was kept",
        signal.SIGTERM: "msq: interrupted (SIGTERM); no partial output was kept"}
SECONDS_TO_STOP = 5.0


def seconds_to_stop() -> float:
    """:data:`SECONDS_TO_STOP`, the promise (issue 17: "exit 130 within a few seconds"), on a
    machine with a core for each runnable process. Only an oversubscribed one gets more: what
    a signal must let finish (a C extension's import, a worker's start) takes longer there in
    proportion; at most twice the promise. (Measured at load 17 with msq pinned to one core
    beside three busy loops: at most 4.1 s for a directory compare, 1.1 s for a tensor one.)"""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return min(2 * SECONDS_TO_STOP, SECONDS_TO_STOP * max(1.0, load))


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench/gen_tensor.py small, 2500 ops a side (~5,500 tensor files each)."""
    out = tmp_path_factory.mktemp("tensor_small")
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_tensor.py"), "small", "--ops",
                    "2500", "--out", str(out)], check=True, capture_output=True, timeout=600)
    dumps = sum(p.stat().st_size for p in out.glob("*/step0/rank/dump.json"))
    assert dumps > PARALLEL_BYTES, "the dumps must be large enough to be read in two processes"
    return out / "compare.json"


def catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for ``signum`` (msq's own, once it runs)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:"))
                 .split()[1], 16)
    return bool(caught >> (signum - 1) & 1)


def kill_and_expect_no_survivors(proc: subprocess.Popen[str], seen: str = "") -> None:
    """SIGKILL msq (started in its own group), then every process it started must end with it:
    within 30 s its stderr reaches EOF, within 10 s more its process group is empty."""
    os.kill(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=30)  # EOF: every process holding msq's stderr has ended
    except subprocess.TimeoutExpired:
        left = group(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"processes outlived msq by 30 s: {left}\n{seen}")
    assert_group_gone(proc.pid)


def start(cfg: Path, out: Path, db: Path, *flags: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([*MSQ, "compare", str(cfg), "-o", str(out),
                             "--db", str(db), "-vv", *flags],
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    deadline = time.monotonic() + 30
    while not catches(proc.pid, signal.SIGTERM):  # msq's handlers are in place
        assert time.monotonic() < deadline and proc.poll() is None, "msq never started"
        time.sleep(0.005)
    return proc


def wait_for_line(proc: subprocess.Popen[str], text: str) -> list[str]:
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return seen
    pytest.fail(f"msq ended before {text!r}: {''.join(seen)}")


def stop(proc: subprocess.Popen[str], signum: int, seen: list[str]) -> tuple[int, str, float]:
    """Signal the whole group; status, stderr, seconds to exit. A hang is a failure, with the
    stacks of every thread (faulthandler on SIGABRT) in the message."""
    os.killpg(proc.pid, signum)
    sent = time.monotonic()
    try:
        _, rest = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGABRT)
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGKILL)
        _, rest = proc.communicate()
        pytest.fail(f"msq hung after {signal.Signals(signum).name}:\n{''.join(seen)}{rest}")
    took = time.monotonic() - sent
    assert_group_gone(proc.pid)
    return proc.returncode, "".join(seen) + rest, took


def history_rows(db: Path) -> int:
    if not db.exists():
        return 0
    con = duckdb.connect(str(db), read_only=True)  # it opens: not damaged
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        return con.execute("SELECT count(*) FROM compares").fetchall()[0][0] if tables else 0
    finally:
        con.close()


def check(status: int, err: str, took: float, out: Path, db: Path, signum: int) -> str:
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    assert took < seconds_to_stop(), f"{took:.1f} s from the signal to the exit:\n{err}"
    assert [n for n in outputs(out) if n.startswith(".") or n.endswith(".tmp")] == []
    for book in out.glob("compare_result_*.xlsx"):
        assert zipfile.ZipFile(book).testzip() is None  # complete, or absent
    if status == 0:  # the signal came once the record was committing: the compare is complete
        assert history_rows(db) == 1, err
        assert len([n for n in outputs(out) if n.startswith(("compare_result_", "advisor_"))]) == 2
        return "completed"
    assert status == 130, err
    assert err.rstrip().splitlines()[-1] == LINE[signum], err
    assert history_rows(db) == 0, "an interrupted compare was recorded"
    return "interrupted"


# phase -> (the log line that starts it, at most this many seconds after it to signal (less when
# the phase is shorter here: :func:`phase_seconds`), whether some signal must interrupt the
# compare: inside the commit window a completed compare is right)
PHASES = {
    # the reader processes and the tensor pool at work (the hang)
    "reading the dumps": ("tensor metrics: started", 2.0, True),
    # matching, metrics, the workbook written while the history thread inserts the rows
    "writing and recording": ("compare mode:", 3.0, True),
    # the main thread waiting for the history thread's commit (the abort); -vv's stage times:
    # the outputs are written, the commit comes next
    "the commit": ("stage outputs", 0.6, False),
}
TRIALS = 3
RECORDED = "recorded compare"  # -vv's line once the history thread has committed


@pytest.fixture(scope="module")
def phase_seconds(workload: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """Seconds from each phase's first line to the commit, timed on one whole compare of the
    workload on this machine now. A phase's signals are drawn inside that span: with a fixed
    window, a faster msq (the C workbook writer) ended "writing and recording" before every
    signal of a test run, and the test failed for a compare that had simply finished."""
    tmp = tmp_path_factory.mktemp("calibrate")
    proc = start(workload, tmp / "out", tmp / "h.duckdb")
    assert proc.stderr is not None
    began = time.monotonic()
    seen: dict[str, float] = {}
    for text in proc.stderr:
        for phase, (line, _, _) in PHASES.items():
            if line in text and phase not in seen:
                seen[phase] = time.monotonic()
        if RECORDED in text:
            committed = time.monotonic()
            break
    else:
        pytest.fail(f"the calibration compare never committed (exit {proc.wait()})")
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert set(seen) == set(PHASES), f"phases never logged: {set(PHASES) - set(seen)}"
    return {phase: committed - at for phase, at in seen.items()} | {"any moment":
                                                                    committed - began}


def moment(rng: random.Random, trial: int, span: float) -> float:
    """Trial ``trial``'s delay: stratified over ``span`` (the first third, the second, the
    last), so the first trial lands early in the phase however the draws fall."""
    return span * (trial + rng.random()) / TRIALS


@pytest.mark.parametrize("phase", [*PHASES, "any moment"])
def test_ctrl_c_at_random_moments(workload: Path, tmp_path: Path, phase: str,
                                  phase_seconds: dict[str, float]) -> None:
    rng = random.Random(f"{phase}-{os.getpid()}-{time.time()}")
    outcomes = []
    for trial in range(TRIALS):
        out, db = tmp_path / f"out{trial}", tmp_path / f"h{trial}.duckdb"
        proc = start(workload, out, db)
        if phase == "any moment":
            seen: list[str] = []
            time.sleep(moment(rng, trial, 1.2 * phase_seconds[phase]))
        else:
            line, window, _ = PHASES[phase]
            seen = wait_for_line(proc, line)
            time.sleep(moment(rng, trial, min(window, phase_seconds[phase])))
        outcomes.append(check(*stop(proc, signal.SIGINT, seen), out, db, signal.SIGINT))
    if PHASES.get(phase, ("", 0, True))[2]:
        assert "interrupted" in outcomes, outcomes


def test_sigterm_is_handled_the_same_way(workload: Path, tmp_path: Path) -> None:
    rng = random.Random()
    for trial, phase in enumerate(PHASES):
        out, db = tmp_path / f"out{trial}", tmp_path / f"h{trial}.duckdb"
        proc = start(workload, out, db)
        line, window, _ = PHASES[phase]
        seen = wait_for_line(proc, line)
        time.sleep(rng.uniform(0, window))
        check(*stop(proc, signal.SIGTERM, seen), out, db, signal.SIGTERM)


def test_workers_die_with_a_killed_msq(workload: Path, tmp_path: Path) -> None:
    """msq killed outright (SIGKILL, the OOM killer, a crash) while its dump readers and tensor
    workers run: they end with it (before, they finished their tasks, then waited on a dead
    queue for ever, reparented to init)."""
    out, db = tmp_path / "out", tmp_path / "h.duckdb"
    proc = start(workload, out, db)
    seen = wait_for_line(proc, "tensor metrics: started")
    time.sleep(random.uniform(0, 1.0))
    kill_and_expect_no_survivors(proc, "".join(seen))
