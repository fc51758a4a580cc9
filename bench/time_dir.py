#!/usr/bin/env python3
"""Time ``msq compare compare.json -o OUT`` on a workload folder that already exists.

    python3 bench/time_dir.py bench/work/llama_port --repeat 5
    python3 bench/time_dir.py bench/work/stat --repeat 5 --msq-args "--compat msprobe-1.1"
    python3 bench/time_dir.py bench/work/root-8x8-5000 --repeat 1 --keep-history
    python3 bench/time_dir.py /shared/work/stat --runs /tmp/me/runs --discard   # read-only workload

Each run as bench/run.py runs msq (warm page cache, /usr/bin/time -v, the process tree's summed
RSS polled every 100 ms), each into a fresh output folder, so each records into a new history
unless --keep-history (then every run records into bench/work/<name>/history.duckdb, and the
runs show how the history grows). Prints each run and the median of wall and CPU time, with the
1-min load average before each run; appends every run to bench/work/results.jsonl. msq's bytecode
is compiled first, in the build that --msq runs (an installed msq has it; PYTHONDONTWRITEBYTECODE
would otherwise make every run compile msq from source).
"""
from __future__ import annotations

import argparse
import compileall
import os
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # bench/run.py: run_tool, the same measurement


def build_python(cmd: list[str]) -> str | None:
    """The interpreter of the msq that ``cmd`` runs: ``python -m msq...`` itself, or the
    ``#!`` line of an ``msq`` console script; None when neither tells."""
    exe = shutil.which(cmd[0]) or cmd[0]
    if "-m" in cmd[1:2] or Path(exe).name.startswith("python"):
        return exe
    try:
        first = Path(exe).read_bytes()[:256].split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    return first[2:].decode().strip() or None


def compile_build(cmd: list[str]) -> None:
    """Byte-compile the msq package the measured build imports (not this checkout's, unless
    that is the build): an uncompiled build pays compilation on every timed run."""
    python = build_python(cmd)
    if python is None:
        compileall.compile_dir(str(run.REPO / "msq"), quiet=1)
        return
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = ("import compileall, os, msq; "
            "compileall.compile_dir(os.path.dirname(msq.__file__), quiet=1)")
    subprocess.run([python, "-c", code], env=env, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path, help="folder with compare.json and the dumps")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--msq-args", default="", help='e.g. "--compat msprobe-1.1"')
    ap.add_argument("--msq", help="msq command prefix (default: <repo>/.venv/bin/msq)")
    ap.add_argument("--keep-history", action="store_true",
                    help="record every run into one history (WORKDIR/history.duckdb)")
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--runs", type=Path,
                    help="folder for each run's logs and outputs (default: WORKDIR/runs); the "
                         "workload folder is then only read")
    ap.add_argument("--pss", action="store_true",
                    help="also the peak of the tree's PSS plus /dev/shm's growth (the machine's "
                         "memory; costs the poller a page-table walk a process a poll: on "
                         "root-8x8-5000 +1.5-2.5 s of the run's wall, ~10 %%, so time runs "
                         "without it and measure memory with it)")
    ap.add_argument("--discard", action="store_true",
                    help="delete each run's folder once it is timed (a ranks x steps run "
                         "writes ~0.6 GB)")
    a = ap.parse_args(argv)
    wdir = a.workdir.resolve()
    base = shlex.split(a.msq) if a.msq else run.default_msq_cmd()
    compile_build(base)
    extra = shlex.split(a.msq_args)
    if a.keep_history:
        extra += ["--db", str(wdir / "history.duckdb")]
    results = []
    for i in range(a.repeat):
        res = run.run_tool("msq", wdir.name, wdir, base, extra, a.timeout, runs=a.runs,
                           pss=a.pss)
        if a.discard and res.get("run_dir"):
            shutil.rmtree(res["run_dir"], ignore_errors=True)
        results.append(res)
        run.append_result(res)
        print(f"run {i + 1}: {run.run_line(res)}", flush=True)
        if a.keep_history:
            db = wdir / "history.duckdb"
            print(f"        history {db.stat().st_size / 1e6:.1f} MB", flush=True)
    ok = [r for r in results if r.get("rc") == 0]
    if ok:
        print(f"median of {len(ok)}: wall {statistics.median(r['wall_s'] for r in ok):.3f} s, "
              f"cpu {statistics.median(r.get('cpu_s', 0) for r in ok):.2f} s "
              f"(tree {statistics.median(r.get('tree_cpu_s', 0) for r in ok):.2f} s), peak tree RSS "
              f"{max(r['peak_tree_rss_mb'] for r in ok):.0f} MB (max); "
              f"load {min(r['loadavg_before'] for r in ok):.2f}-"
              f"{max(r['loadavg_before'] for r in ok):.2f}; nproc {os.cpu_count()}")
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
