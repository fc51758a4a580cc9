#!/usr/bin/env python3
"""Blame's cost (issue 13: at most +15 % on the whole compare): ``msq compare compare.json -o OUT``
with blame and with ``--no-blame``, interleaved, on workload folders that already exist.

    python3 bench/blame_cost.py bench/work/stat bench/work/tensor_small bench/work/tensor_big
    python3 bench/blame_cost.py bench/work/stat --repeat 5 --wait-idle 600

Each run as bench/run.py runs msq (warm page cache, /usr/bin/time -v, the process tree's summed
RSS polled every 100 ms, a fresh output folder and history). The order is blame, no blame, blame,
... per workload, so that a change of load hits both alike. Prints each run, then per workload the
median wall and CPU (user+sys) time of each mode, the peak RSS, the 1-min load average before
the runs, and what blame adds. Appends every run to bench/work/results.jsonl. Wall figures only
mean something at a load average below 1 on the machine's cores; CPU time is the steadier one.
"""
from __future__ import annotations

import argparse
import compileall
import shlex
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # bench/run.py: run_tool, the same measurement

MODES = {"blame": [], "no-blame": ["--no-blame"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdirs", type=Path, nargs="+", help="folders with compare.json and dumps")
    ap.add_argument("--repeat", type=int, default=3, help="runs per mode (default 3)")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="before each run wait (at most SECONDS) for the 1-min load < 0.7")
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--msq", help="msq command prefix (default: <repo>/.venv/bin/msq)")
    a = ap.parse_args(argv)
    compileall.compile_dir(str(run.REPO / "msq"), quiet=1)
    base = shlex.split(a.msq) if a.msq else run.default_msq_cmd()
    failed = False
    summary = []
    for wdir in (w.resolve() for w in a.workdirs):
        runs: dict[str, list[dict]] = {m: [] for m in MODES}
        for i in range(a.repeat):
            for mode, extra in MODES.items():
                run.wait_idle(a.wait_idle)
                res = run.run_tool("msq", wdir.name, wdir, base, extra, a.timeout)
                res["blame_cost_mode"] = mode
                run.append_result(res)
                print(f"  {wdir.name} {mode:8s} run {i + 1}: {run.run_line(res)}", flush=True)
                if res.get("rc") == 0:
                    runs[mode].append(res)
                else:
                    failed = True
        med = {m: (statistics.median(r["wall_s"] for r in rs),
                   statistics.median(r.get("cpu_s", 0.0) for r in rs),
                   max(r["peak_tree_rss_mb"] for r in rs),
                   [r["loadavg_before"] for r in rs]) for m, rs in runs.items() if rs}
        if len(med) == 2:
            summary.append((wdir.name, med))
    for name, med in summary:
        (bw, bc, br, bl), (nw, nc, nr, nl) = med["blame"], med["no-blame"]
        loads = bl + nl
        print(f"{name}: wall {bw:.2f} s vs {nw:.2f} s --no-blame ({(bw / nw - 1) * 100:+.0f} %), "
              f"CPU {bc:.2f} s vs {nc:.2f} s ({(bc / nc - 1) * 100:+.0f} %), peak RSS "
              f"{br:.0f} / {nr:.0f} MB, load {min(loads):.2f}-{max(loads):.2f} "
              f"(medians of {len(bl)} / {len(nl)} interleaved runs)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
