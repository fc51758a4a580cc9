#!/usr/bin/env python3
"""Pairs per second of a directory compare: --engine local vs --engine ray, and Ray's cost per task.

    python bench/ray_bench.py --pairs 64,256,1024 --ops 12

For each pair count N a dump root of N rank pairs (one step, N ranks; bench/gen_root.py, --ops ops
a side) is compared once by ``msq compare`` with each engine. The Ray runs use a real two-node
cluster on this machine (tests/raycluster.py: a head and a second node on loopback, 1 CPU each,
so both engines have the machine's 2 cores). Then a probe driver times Ray alone: N empty tasks
submitted and taken in order as the engine does (same options: 1 CPU, declared memory), which is
the per-task overhead the engine adds to a pair.

Needs root (network namespace) and Ray (pip install -e '.[ray]'). Results are printed and appended
to bench/work/results.jsonl. Note the load average: on a shared machine the figures move.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from gen_root import generate_root

from tests.raycluster import ADDRESS, running

MSQ = [sys.executable, "-m", "msq.cli"]

PROBE = textwrap.dedent("""
    import sys, time, ray
    from msq.engine_ray import BASE_MEMORY
    n = int(sys.argv[1])
    ray.init(address="{address}", log_to_driver=False)
    @ray.remote(num_cpus=1, max_retries=3)
    def noop(i):
        return i
    ray.get([noop.remote(i) for i in range(8)])      # warm the workers
    window = max(4, 2 * int(ray.cluster_resources()["CPU"]))
    t0 = time.perf_counter()
    pending, todo = [], iter(range(n))
    for i in todo:
        pending.append(noop.options(memory=BASE_MEMORY).remote(i))
        if len(pending) >= window:
            ray.get(pending.pop(0))
    ray.get(pending)
    print(time.perf_counter() - t0)
""")


def load() -> float:
    return os.getloadavg()[0]


def workload(n: int, ops: int) -> Path:
    base = HERE / "work" / f"ray-root-{n}-{ops}"
    if not (base / "meta.json").is_file():
        generate_root(base, n, 1, ops)
    return base


def timed(argv: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr[-3000:]}")
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", default="64,256,1024", help="comma-separated pair counts")
    ap.add_argument("--ops", type=int, default=12, help="ops a side per pair")
    ap.add_argument("--formats", default="xlsx", help="--format of both runs")
    a = ap.parse_args(argv)
    counts = [int(x) for x in a.pairs.split(",")]
    rows = []
    with running() as cluster:
        probe = cluster.root / "probe.py"  # type: ignore[operator]
        probe.write_text(PROBE.format(address=ADDRESS))
        for n in counts:
            base = workload(n, a.ops)
            args = ["compare", "compare.json", "--format", a.formats, "-q"]
            out = base.parent / f"{base.name}-out"
            shutil.rmtree(out, ignore_errors=True)
            before = load()
            t_local = timed([*MSQ, *args, "-o", str(out / "local")], base)
            t_ray = timed(cluster.command([*MSQ, *args, "-o", str(out / "ray"), "--engine", "ray",
                                           "--ray-address", ADDRESS], base), base)
            noop = subprocess.run(cluster.command([sys.executable, str(probe), str(n)], base),
                                  capture_output=True, text=True, check=True)
            t_task = float(noop.stdout.strip().splitlines()[-1])
            row = {"bench": "ray", "pairs": n, "ops": a.ops, "formats": a.formats,
                   "local_s": round(t_local, 2), "ray_s": round(t_ray, 2),
                   "local_pairs_per_s": round(n / t_local, 1),
                   "ray_pairs_per_s": round(n / t_ray, 1),
                   "ray_task_ms": round(1000 * t_task / n, 2),
                   "load_before": round(before, 2), "load_after": round(load(), 2),
                   "date": time.strftime("%Y-%m-%d %H:%M")}
            rows.append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(out, ignore_errors=True)
    with open(HERE / "work" / "results.jsonl", "a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    print(f"\n{'pairs':>6} {'local s':>8} {'ray s':>8} {'local p/s':>10} {'ray p/s':>8} "
          f"{'task ms':>8} {'load':>9}")
    for r in rows:
        print(f"{r['pairs']:>6} {r['local_s']:>8} {r['ray_s']:>8} {r['local_pairs_per_s']:>10} "
              f"{r['ray_pairs_per_s']:>8} {r['ray_task_ms']:>8} "
              f"{r['load_before']:>4}/{r['load_after']:<4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
