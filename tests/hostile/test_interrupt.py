"""Interrupted runs: Ctrl-C (SIGINT) in the middle of a compare leaves no partial output, no
leftover process and no damaged history database.

The compares run as real processes under ``timeout -s INT``. To interrupt at a known stage, the
test waits for msq's log line of that stage and then sends SIGINT to ``timeout``, which forwards it
to msq and to the whole process group (the pool workers too), exactly as its own timer would.
The large real-data dump costs almost no disk: every NPU tensor file is a hard link to one 8 MB
file, every bench tensor file to another, so the compare reads ~3 GB from the page cache.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from tests.dumps import fwd, t, write_dump, write_pair
from tests.hostile.helpers import OP, cli, outputs, save_pt, tensor_arg
from tests.xlsx_read import only_xlsx, rows

MSQ = [sys.executable, "-m", "msq.cli"]
pytestmark = pytest.mark.skipif(not Path("/usr/bin/timeout").exists() and
                                not Path("/bin/timeout").exists(), reason="needs coreutils timeout")


def big_tensor_side(folder: Path, n_ops: int, numel: int, seed: int) -> Path:
    tdir = folder / "dump_tensor_data"
    tdir.mkdir(parents=True)
    arr = np.random.default_rng(seed).standard_normal(numel).astype(np.float32)
    source = tdir / "_one.pt"
    save_pt(source, arr)
    entry = tensor_arg("x", arr[:4])
    entry["shape"] = [numel]
    data: dict[str, Any] = {}
    for i in range(n_ops):
        op = f"Functional.relu.{i}.forward"
        os.link(source, tdir / f"{op}.input.0.pt")
        data[op] = {"input_args": [dict(entry, data_name=f"{op}.input.0.pt")],
                    "input_kwargs": {}, "output": []}
    source.unlink()
    return write_dump(folder, data, task="tensor")


def big_tensor_pair(root: Path, n_ops: int = 200, numel: int = 2_000_000) -> Path:
    npu = big_tensor_side(root / "npu" / "step0" / "rank", n_ops, numel, 1)
    bench = big_tensor_side(root / "bench" / "step0" / "rank", n_ops, numel, 2)
    cfg = root / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(npu), "bench_path": str(bench)}))
    return cfg


def _processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every process, from /proc (no ps needed)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if fields[0] != "Z":  # a zombie has exited already
            out.append((int(entry), int(fields[1]), int(fields[2])))
    return out


def children(pid: int) -> list[int]:
    return [p for p, parent, _ in _processes() if parent == pid]


def group(pgid: int) -> list[int]:
    return [p for p, _, grp in _processes() if grp == pgid]


def assert_group_gone(pgid: int, within: float = 10.0) -> None:
    """Every process of the group ``pgid`` ends within ``within`` seconds (workers are reaped
    shortly after msq exits)."""
    deadline = time.monotonic() + within
    while group(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group(pgid) == [], f"processes left behind: {group(pgid)}"


def interrupt(args: list[str], when: str, workers: bool = False, delay: float = 0.0,
              budget: float = 120) -> tuple[int, str, float]:
    """Run ``msq compare args -v`` under ``timeout -s INT``; once ``when`` is logged (and, with
    ``workers``, once msq has child processes) and ``delay`` seconds later, SIGINT. Returns
    status, stderr, and seconds from SIGINT to exit."""
    proc = subprocess.Popen(
        ["timeout", "-s", "INT", str(int(budget)), *MSQ, "compare", *args, "-v"],
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if when in line:
            break
    else:
        proc.wait()
        pytest.fail(f"msq ended before {when!r}: {''.join(seen)}")
    if workers:
        msq_pid = children(proc.pid)[0]
        deadline = time.monotonic() + 60
        while not children(msq_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert children(msq_pid), "msq never started its workers"
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    try:
        rest = proc.stderr.read()
        status = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("msq hung after SIGINT")
    took = time.monotonic() - sent
    assert_group_gone(proc.pid, 30)
    return status, "".join(seen) + rest, took


def history(db: Path) -> list[tuple[int, int, int]]:
    """(compare_id, n_rows, rows stored) of every compare; opening it proves it is not damaged."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("""
            SELECT c.compare_id, c.n_rows, count(r.out_seq)
            FROM compares c LEFT JOIN result_rows r USING (compare_id)
            GROUP BY ALL ORDER BY 1""").fetchall()
    finally:
        con.close()


def assert_interrupted(status: int, err: str) -> None:
    assert status == 130, err
    assert "Traceback" not in err, err
    assert err.rstrip().splitlines()[-1] == "msq: interrupted; no partial output was kept"


def small_first_compare(root: Path, db: Path) -> None:
    """One complete compare recorded in ``db`` before the interrupted one."""
    data = {OP: fwd(t(), out=t())}
    code, text = cli("compare", str(write_pair(root, data, data)), "-o", str(root / "out"),
                     "--db", str(db), "-q")
    assert code == 0, text
    assert history(db) == [(1, 2, 2)]


@pytest.mark.slow
def test_interrupt_during_tensor_metrics(tmp_path: Path) -> None:
    """The main case: a large real-data compare, SIGINT while the pool computes metrics.

    The signal goes when msq logs ``tensor kernel:``: the dumps are loaded and matched, and the
    main thread waits for the pool, which has seconds of work left. (It used to go at ``tensor
    metrics: started``, when the pool has just started and the main thread imports DuckDB and
    pyarrow: the signal then fell inside a C extension's initialisation now and then, which
    aborted (nanobind, SIGABRT) or lost it (the compare ran to the end, exit 0). Imports are
    shielded since (msq/interrupts.py), and test_interrupt_anytime.py covers that moment.)
    """
    db = tmp_path / "history.duckdb"
    small_first_compare(tmp_path / "first", db)
    # 2,000 hard links to one 8 MB tensor per side: several seconds of work for the C kernel
    cfg = big_tensor_pair(tmp_path / "big", n_ops=2000)
    out = tmp_path / "out"
    status, err, took = interrupt([str(cfg), "-o", str(out), "--db", str(db), "--workers", "2"],
                                  "tensor kernel:", workers=True)
    assert_interrupted(status, err)
    assert outputs(out) == []            # no workbook, no advisor, no temporary file
    assert history(db) == [(1, 2, 2)]    # opens; holds only the complete compare
    assert took < 45, f"{took:.1f} s from SIGINT to exit"


@pytest.mark.slow
def test_interrupt_while_loading_in_two_processes(tmp_path: Path) -> None:
    """Dumps above 4 MB are read by two processes: both stop, nothing is written."""
    data = {f"Functional.op{i}.0.forward": fwd(t(), t(), out=[t(), t()]) for i in range(2200)}
    cfg = write_pair(tmp_path, data, data)
    assert sum(p.stat().st_size for p in tmp_path.glob("*/step0/rank/dump.json")) > 4 << 20
    out = tmp_path / "out"
    status, err, _ = _interrupt_loading(cfg, out)
    assert_interrupted(status, err)
    assert outputs(out) == []


@pytest.mark.slow
def test_interrupt_inside_a_duckdb_query(tmp_path: Path) -> None:
    """Right after loading, msq is inside DuckDB (matching, rule views): Ctrl-C there surfaced as
    RuntimeError("Query interrupted") with a traceback and exit 1. 15,000 ops (60k rows): the
    work in DuckDB after that line must outlast the delay on a fast machine (12k rows once ended
    in 0.4 s, before the signal came, and the test saw exit 0)."""
    data = {f"Functional.op{i}.0.forward": fwd(t(), t(), out=[t(), t()]) for i in range(15000)}
    cfg = write_pair(tmp_path, data, data)
    out = tmp_path / "out"
    status, err, _ = interrupt([str(cfg), "-o", str(out), "--no-history"],
                               "compare mode: statistics", delay=0.1)
    assert_interrupted(status, err)
    assert outputs(out) == []


def _interrupt_loading(cfg: Path, out: Path) -> tuple[int, str, float]:
    """Nothing is logged before loading ends: wait for the loader's two processes instead (the
    Python reader's: the C reader takes a fraction of a second, in threads)."""
    proc = subprocess.Popen(["timeout", "-s", "INT", "120", *MSQ, "compare", str(cfg), "-o",
                             str(out), "--no-history", "-v"],
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "MSQ_NO_C_READER": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kids = children(proc.pid)
        if kids and len(children(kids[0])) >= 2:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the loader processes never started")
    os.kill(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    assert proc.stderr is not None
    err = proc.stderr.read()
    status = proc.wait(timeout=60)
    assert_group_gone(proc.pid, 30)
    assert "compare mode" not in err, err  # it was stopped while loading
    return status, err, time.monotonic() - sent


def test_interrupt_inside_the_history_transaction(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic: Ctrl-C (a real SIGINT) when the compare's output rows and its compares row
    are in the history transaction but not committed. The history thread waits until the main
    thread has been interrupted; the transaction rolls back; the workbook, complete, stays."""
    from msq import history as hist

    db = tmp_path / "history.duckdb"
    small_first_compare(tmp_path / "first", db)
    real = hist.Recorder._before_commit
    seen: list[list[tuple[Any, ...]]] = []

    def interrupted_before_commit(self: hist.Recorder) -> None:
        seen.append(self._cursor.execute(
            f"SELECT (SELECT count(*) FROM {hist.ALIAS}.compares), "
            f"(SELECT count(*) FROM {hist.ALIAS}.result_rows)").fetchall())
        os.kill(os.getpid(), signal.SIGINT)
        assert self._stop.wait(30), "the main thread never aborted the recording"
        real(self)

    monkeypatch.setattr(hist.Recorder, "_before_commit", interrupted_before_commit)
    data = {OP: fwd(t(mx=3.0), out=t())}
    out = tmp_path / "out"
    code, text = cli("compare", str(write_pair(tmp_path / "second", data, {OP: fwd(t(), out=t())})),
                     "-o", str(out), "--db", str(db), "-q")
    assert seen == [[(2, 4)]]  # both rows of the second compare were in, uncommitted
    assert code == 130 and text.strip() == "msq: interrupted; no partial output was kept"
    assert history(db) == [(1, 2, 2)]
    assert len(rows(only_xlsx(out))) == 2  # written before the history commit, complete
    assert [n for n in outputs(out) if n.startswith(".") or n.endswith(".tmp")] == []


def test_interrupt_while_the_workbook_is_written_rolls_the_history_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the workbook is written and the history thread holds its transaction open:
    no partial workbook, and the history file as it was."""
    from msq import history as hist
    from msq.export import outputs as out_mod

    db = tmp_path / "history.duckdb"
    small_first_compare(tmp_path / "first", db)
    real_wait = hist.Recorder._wait_for_row
    rows_in = threading.Event()

    def wait_for_row(self: hist.Recorder) -> dict[str, Any]:
        rows_in.set()  # the output rows are inserted; the compares row is awaited
        return real_wait(self)

    def write_xlsx(*args: Any, **kwargs: Any) -> int:
        assert rows_in.wait(30), "the history thread never inserted the rows"
        raise KeyboardInterrupt  # as the SIGINT handler does, in the middle of the workbook

    monkeypatch.setattr(hist.Recorder, "_wait_for_row", wait_for_row)
    monkeypatch.setattr(out_mod, "write_xlsx", write_xlsx)
    data = {OP: fwd(t(mx=3.0), out=t())}
    out = tmp_path / "out"
    code, text = cli("compare", str(write_pair(tmp_path / "second", data, data)),
                     "-o", str(out), "--db", str(db), "-q")
    assert code == 130 and text.strip() == "msq: interrupted; no partial output was kept"
    assert history(db) == [(1, 2, 2)]
    assert outputs(out) == []


@pytest.mark.slow
def test_a_killed_worker_is_one_line(tmp_path: Path) -> None:
    """The OOM killer taking a loader process (the Python reader's): BrokenProcessPool was a
    traceback."""
    data = {f"Functional.op{i}.0.forward": fwd(t(), t(), out=[t(), t()]) for i in range(2200)}
    cfg = write_pair(tmp_path, data, data)
    out = tmp_path / "out"
    proc = subprocess.Popen([*MSQ, "compare", str(cfg), "-o", str(out), "--no-history", "-q"],
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "MSQ_NO_C_READER": "1"})
    deadline = time.monotonic() + 60
    while not children(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(children(proc.pid)[0], signal.SIGKILL)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 1
    assert err.strip() == ("msq: error: a worker process died (killed by the system, most often "
                           "for lack of memory); free memory, compare smaller dumps, or use fewer "
                           "--workers")
    assert outputs(out) == []


def test_a_signal_while_duckdb_is_preloaded_is_an_interruption() -> None:
    """Ctrl-C (a real SIGINT) at the very start, while ``run`` starts the thread that maps
    DuckDB's library: exit 130 and the one line, not a traceback (``preload_duckdb`` once ran
    before the start's ``try``; test_ctrl_c_at_random_moments hit it under load)."""
    script = (
        "import os, signal, sys\n"
        "import msq.__main__ as entry\n"
        "real = entry.preload_duckdb\n"
        "def preload():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    real()\n"
        "entry.preload_duckdb = preload\n"
        "sys.argv = ['msq', '--version']\n"
        "entry.run()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert_interrupted(done.returncode, done.stderr)
    assert done.stdout == ""  # stopped before the command ran


def test_a_signal_inside_an_import_waits_for_the_import(tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM while a module is imported outside any deferred block (a C extension's
    init aborts the process on a KeyboardInterrupt, DuckDB's under load) lets the import finish,
    then interrupts."""
    (tmp_path / "slow_init.py").write_text(
        "import os, signal, sys\nos.kill(os.getpid(), int(sys.argv[1]))\n"
        "import time\ntime.sleep(0.3)\nFINISHED = True\n")
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from msq import interrupts\n"
        "interrupts.install()\n"
        "try:\n"
        "    import slow_init\n"
        "    time.sleep(10)\n"
        "    print('not interrupted')\n"
        "except KeyboardInterrupt:\n"
        "    module = sys.modules.get('slow_init')\n"
        "    print('interrupted after the import', getattr(module, 'FINISHED', False),\n"
        "          interrupts.received())\n")
    # (the signal delivered again may come at any moment once the import is over: nothing is
    # printed before it, or it would cut that line at load)
    for signum, done in _each_signal(script):
        assert done.stdout.splitlines() == [f"interrupted after the import True {int(signum)}"], \
            done.stdout + done.stderr


def test_a_signal_inside_a_weakref_callback_still_interrupts() -> None:
    """Ctrl-C or SIGTERM whose KeyboardInterrupt lands in a weakref callback (Python cannot
    raise it there: it printed "Exception ignored in ..." with a traceback and the compare ran
    on, seen at load in a WeakSet's _remove) is delivered again and interrupts the code after
    it, with nothing printed."""
    script = (
        "import os, signal, sys, time, weakref\n"
        "from msq import interrupts\n"
        "interrupts.install()\n"
        "class Held: pass\n"
        "def gone(_):\n"
        "    os.kill(os.getpid(), int(sys.argv[1]))\n"
        "    for _ in range(100_000): pass  # the handler runs here, inside the callback\n"
        "held = Held()\n"
        "ref = weakref.ref(held, gone)\n"
        "try:\n"
        "    del held\n"
        "    time.sleep(10)\n"
        "    print('not interrupted')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted after the callback', interrupts.received())\n")
    for signum, done in _each_signal(script):
        assert done.stdout.splitlines() == [f"interrupted after the callback {int(signum)}"], \
            done.stdout + done.stderr
        assert done.stderr == ""


def _each_signal(script: str) -> Iterator[tuple[signal.Signals, subprocess.CompletedProcess[str]]]:
    """``script`` run in a new Python with SIGINT, then SIGTERM, as its argument (the number it
    sends itself): each signal and how that run ended."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        yield signum, subprocess.run([sys.executable, "-c", script, str(int(signum))],
                                     capture_output=True, text=True, timeout=60, check=False)
