#!/usr/bin/env python3
"""The main thread's time in a compare, by stage: on-CPU ("run") and off-CPU for another reason
than the machine's load ("blocked": waiting for the GIL, a lock, a strand, an fsync), from
/proc/thread-self/schedstat, whose runqueue wait (the load's share) is left out. On a shared,
loaded machine the main thread's run time is the steadiest figure of a small compare's critical
path. Alternates the builds, one run each per round; medians.

    python3 bench/main_thread.py bench/work/llama_port --python /work/wt/base/.venv/bin/python \\
        --python .venv/bin/python --rounds 8 [-- --compat msprobe-1.1]

Each build's interpreter runs msq's own entry point (msq.__main__.run) with -vv, from the start
of the interpreter's first statement (its own start-up, ~20 ms, is not counted): the stage laps
(msq.pipeline's log lines) mark the stages.
"""
from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r'''
import logging, os, re, sys, threading, time
def _ss():
    with open("/proc/thread-self/schedstat") as f:
        a = f.read().split()
    return int(a[0]) / 1e6, int(a[1]) / 1e6
T0 = int(os.environ["MSQ_T0"])
marks = []
def mark(name):
    if threading.current_thread() is threading.main_thread():
        run, wait = _ss()
        marks.append((name, (time.monotonic_ns() - T0) / 1e6, run, wait))
def emit(self, record):  # msq's -vv log lines (msq.cli's handler): marks, not printed
    mark(re.sub(r"\s+[0-9.]+s\b.*$", "", record.getMessage())[:40])
logging.StreamHandler.emit = emit
mark("start")
import msq.__main__ as m
_leave = m.leave
def leave(code):
    mark("end")
    with open(os.environ["MSQ_MARKS"], "w") as f:
        for name, t, run, wait in marks:
            f.write(f"{t}\t{run}\t{wait}\t{name}\n")
    _leave(code)
m.leave = leave
sys.argv = ["msq"] + sys.argv[1:]
m.run()
'''

STAGES = ("start", "stage load", "stage match", "stage blame (wait)", "stage outputs",
          "stage history", "end")


def one(python: str, wdir: Path, extra: list[str], tmp: Path) -> dict[str, tuple[float, float]]:
    out, marks = tmp / "out", tmp / "marks.tsv"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    env = dict(os.environ, MSQ_MARKS=str(marks), MSQ_T0=str(time.monotonic_ns()))
    subprocess.run([os.path.abspath(python), "-c", CHILD, "compare", "compare.json", "-o", str(out), "-vv", *extra],
                   cwd=wdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    seen: dict[str, tuple[float, float, float]] = {}
    for line in marks.read_text().splitlines():
        t, run, wait, name = line.split("\t")
        key = re.sub(r"\s+", " ", name.strip())
        if key in STAGES and key not in seen:
            seen[key] = (float(t), float(run), float(wait))
    got = {}
    names = [s for s in STAGES if s in seen]
    for a, b in itertools.pairwise(names):
        (ta, ra, qa), (tb, rb, qb) = seen[a], seen[b]
        got[f"{a} -> {b}"] = (rb - ra, (tb - ta) - (rb - ra) - (qb - qa))
    (ta, ra, qa), (tb, rb, qb) = seen["start"], seen["end"]
    got["total"] = (rb - ra, (tb - ta) - (rb - ra) - (qb - qa))
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--python", action="append", required=True, help="a build's interpreter")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("extra", nargs="*", help="msq compare's other arguments (after --)")
    a = ap.parse_args()
    res: dict[str, dict[str, list[tuple[float, float]]]] = {p: {} for p in a.python}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            for py in (a.python if i % 2 == 0 else a.python[::-1]):
                for k, v in one(py, a.workdir.resolve(), a.extra, Path(tmp)).items():
                    res[py].setdefault(k, []).append(v)
            loads.append(os.getloadavg()[0])
    for py, stages in res.items():
        print(py)
        for k, v in stages.items():
            print(f"  {k:42s} run {statistics.median(x[0] for x in v):6.1f} ms  "
                  f"blocked {statistics.median(x[1] for x in v):6.1f} ms")
    print(f"{a.rounds} rounds, 1-min load {min(loads):.2f}-{max(loads):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
