"""Ctrl-C while msq stops its tensor pool: it ends within seconds, whatever the pool's state.

Once, in a full suite at load ~10, test_interrupt.py's test_interrupt_during_tensor_metrics hung:
msq had the SIGINT and waited 15 min, its two pool workers idle (one reading the call pipe, one
waiting for its lock). The pool's own thread and the main thread could both be stopping the pool
then (the rows are handed over before the pool's shutdown, and the main thread's kill path ran
``stop_pool`` beside that shutdown), and the main thread's wait for the pool's thread had no
bound: whatever held that thread up held the Ctrl-C too. Now only the pool's thread stops the
pool, and the main thread's wait is bounded: after a Ctrl-C it asks that thread to kill the
workers, and kills them itself if the thread has not ended soon after.

Each case runs the pool in a process of its own (real workers, real signals, msq's handlers),
under a generous timeout: a hang fails the test, a fixed build ends in a second or two.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.hostile.test_interrupt import assert_group_gone

#: Far more than a stop needs (about a second at load 10); only a hang reaches it.
HUNG = 60.0

PRELUDE = """
import multiprocessing, os, signal, sys, threading, time
from msq import interrupts
interrupts.install()
from msq.tensors import pool
root, n = sys.argv[1], int(sys.argv[2])
jobs = [pool.TensorJob(i, f"t{i}.npy", f"t{i}.npy", root + "/npu", root + "/bench")
        for i in range(n)]

def sigint_in(seconds):
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.daemon = True
    timer.start()
"""


def tensor_dirs(root: Path, n: int, numel: int) -> Path:
    """``n`` pairs of ``numel`` float32 elements (hard links to one file a side)."""
    for side, seed in (("npu", 1), ("bench", 2)):
        d = root / side
        d.mkdir(parents=True)
        np.save(d / "one.npy", np.random.default_rng(seed).standard_normal(numel, np.float32))
        for i in range(n):
            os.link(d / "one.npy", d / f"t{i}.npy")
    return root


def run(script: str, root: Path, n: int, *args: str) -> tuple[str, float]:
    """Run ``PRELUDE + script`` in a process group of its own; its stdout and seconds taken.
    Fails on a hang (stacks of every process of the group are printed first) or on a process
    left behind."""
    proc = subprocess.Popen([sys.executable, "-c", PRELUDE + script, str(root), str(n), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    started = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=HUNG)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"hung after Ctrl-C: {out}")
    took = time.monotonic() - started
    assert_group_gone(proc.pid)
    assert "Traceback" not in out and proc.returncode == 0, out
    return out, took


def test_ctrl_c_while_the_pool_waits_for_a_worker_that_does_not_finish(tmp_path: Path) -> None:
    """Deterministic: the compare cancels its pool (an error elsewhere, or its end) while a
    worker's task does not end (the worker is stopped: SIGSTOP, as a debugger or a thrashing
    machine would hold it), then the user presses Ctrl-C. The pool's shutdown waits for that
    task; the Ctrl-C used to be held until it ended, for ever here."""
    root = tensor_dirs(tmp_path, 64, 300_000)
    script = """
bg = pool.start_metrics(jobs, compat=False, workers=2, progress=False)
for worker in multiprocessing.active_children():
    os.kill(worker.pid, signal.SIGSTOP)  # both: whichever holds a task, or the queue's lock
sigint_in(1.0)
try:
    with interrupts.deferred():  # as the compare's cleanup runs it
        bg.cancel()
        print("cancelled", interrupts.received() == signal.SIGINT, flush=True)
except KeyboardInterrupt:  # the Ctrl-C, raised once the cleanup is over
    print("interrupted")
interrupts.ignore_from_now()
"""
    out, took = run(script, root, 64)
    assert out.split() == ["cancelled", "True", "interrupted"]
    assert took < HUNG / 2


@pytest.mark.slow
def test_ctrl_c_at_random_moments_around_the_pools_end(tmp_path: Path) -> None:
    """A stress: Ctrl-C at random moments of a short pool's run, most of them around its end,
    where the rows are handed over and the pool's thread shuts the pool down while the main
    thread goes on, is interrupted and stops the pool. Every run ends, leaving no process."""
    n = 48
    root = tensor_dirs(tmp_path, n, 200_000)
    script = """
delay, then_s = float(sys.argv[3]), float(sys.argv[4])
def then(rows):
    time.sleep(then_s)  # the early table's making, which holds the pool's thread
    return len(rows)
sigint_in(delay)
bg = None
try:
    with interrupts.deferred():
        bg = pool.start_metrics(jobs, compat=False, workers=2, progress=False, then=then)
    bg.made()
    time.sleep(2)
    print("finished")
except KeyboardInterrupt:
    print("interrupted")
finally:
    if bg is not None:
        try:
            with interrupts.deferred():
                bg.cancel()
        except KeyboardInterrupt:
            print("interrupted while cancelling")
interrupts.ignore_from_now()
"""
    rng = random.Random(11)
    seen: Counter[str] = Counter()
    for _ in range(24):
        delay = rng.uniform(0.0, 0.6)
        out, took = run(script, root, n, f"{delay:.4f}", str(rng.choice([0.0, 0.002, 0.02])))
        seen[out.strip()] += 1
        assert took < HUNG / 2
    assert seen["interrupted"] > 0, seen
