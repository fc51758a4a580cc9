#!/usr/bin/env python3
"""Issue 15 #6: record N runs of one workload into one history and time its queries as it grows.

    python3 bench/history_growth.py bench/work/root-8x8-5000 --runs 20 --db /work/t6/history.duckdb

Each run is a whole `msq compare compare.json -o OUT --db DB --label runNN` (bench/run.py's
measurement: warm cache, /usr/bin/time, the tree's CPU and RSS); its output folder is removed
afterwards, so only the history stays. After the runs named by --measure-after, the script
times a fixed set of `msq sql` queries (whole CLI, median of --query-repeat) and the history's
size on disk, and appends one JSON line per measurement to bench/work/history_growth.jsonl.
Re-run with --queries-only to time the queries on an existing history (e.g. on a quiet
machine after the recording ran under load).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # bench/run.py: run_tool, append_result, run_line

RESULTS = run.REPO / "bench" / "work" / "history_growth.jsonl"


def queries(op: str) -> dict[str, str]:
    """The README's questions, asked of every run at once."""
    return {
        # README: where each rank first goes wrong, for every run, step and rank
        "first_divergence": "SELECT label, step, rank, out_seq, npu_name, reason "
                            "FROM first_divergence ORDER BY label, step, rank",
        # README: one op across all rank-steps and every labelled run
        "op_trend_one_op": "SELECT label, step, rank, max_diff, max_rel_pct, mark FROM op_trend "
                           f"WHERE npu_name = '{op}' ORDER BY label, step, rank",
        # target 5's question on the big history: one op across two labelled runs
        "op_trend_two_runs": "SELECT label, step, rank, max_diff, max_rel_pct, mark FROM op_trend "
                             f"WHERE npu_name = '{op}' AND label IN ('run01', 'run02') "
                             "ORDER BY label, step, rank",
        # a query over every row of every run
        "all_runs_by_label": "SELECT label, count(*) AS rows, count(mark) AS marked, "
                             "max(abs(max_diff)) AS worst FROM op_trend GROUP BY label ORDER BY label",
        # the runs table itself, as `msq sql` users start
        "runs": "SELECT count(*) FROM runs",
    }


def time_query(msq: list[str], db: Path, sql: str, repeat: int) -> dict:
    walls, cpus = [], []
    out = ""
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run([*msq, "sql", "--db", str(db), sql], capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if p.returncode != 0:
            return {"error": p.stderr.strip()[-400:], "rc": p.returncode}
        out = p.stdout
    return {"median_s": round(statistics.median(walls), 3), "min_s": round(min(walls), 3),
            "max_s": round(max(walls), 3), "cpu_s": round(statistics.median(cpus), 3),
            "out_lines": out.count("\n")}


def pick_op(msq: list[str], db: Path) -> str:
    p = subprocess.run([*msq, "sql", "--db", str(db), "--format", "csv",
                        "SELECT npu_name FROM result_rows ORDER BY out_seq LIMIT 1 OFFSET 100"],
                       capture_output=True, text=True, check=False)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or len(lines) < 2:
        raise SystemExit(f"cannot pick an op from {db}: {p.stderr.strip()[-300:]}")
    return lines[-1].strip().strip('"')


def measure(msq: list[str], db: Path, runs_done: int, repeat: int, op: str | None = None) -> dict:
    op = op or pick_op(msq, db)
    rec: dict = {"when": datetime.now(UTC).isoformat(timespec="seconds"),
                 "runs": runs_done, "db_mb": round(db.stat().st_size / 1e6, 1),
                 "wal_mb": round(db.with_suffix(".duckdb.wal").stat().st_size / 1e6, 1)
                 if db.with_suffix(".duckdb.wal").exists() else 0.0,
                 "load_before": round(os.getloadavg()[0], 2), "op": op, "queries": {}}
    for name, sql in queries(op).items():
        rec["queries"][name] = time_query(msq, db, sql, repeat)
    rec["load_after"] = round(os.getloadavg()[0], 2)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--db", type=Path, required=True, help="the history that grows")
    ap.add_argument("--msq", help="msq command prefix (default: <repo>/.venv/bin/msq)")
    ap.add_argument("--measure-after", default="1,2,5,10,15,20",
                    help="comma-separated run counts after which to time the queries")
    ap.add_argument("--query-repeat", type=int, default=3)
    ap.add_argument("--queries-only", action="store_true")
    ap.add_argument("--op", help="the op of the one-op queries (default: the 101st row's npu_name)")
    ap.add_argument("--timeout", type=float, default=3600.0)
    a = ap.parse_args(argv)
    wdir, db = a.workdir.resolve(), a.db.resolve()
    msq = a.msq.split() if a.msq else run.default_msq_cmd()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)

    def record(rec: dict) -> None:
        with RESULTS.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)

    if a.queries_only:
        record(measure(msq, db, -1, a.query_repeat, a.op))
        return 0
    db.parent.mkdir(parents=True, exist_ok=True)
    done = {int(x) for x in a.measure_after.split(",") if x}
    start = 1
    if db.exists():  # resume: continue the label numbering of the runs already recorded
        p = subprocess.run([*msq, "sql", "--db", str(db), "--format", "csv",
                            "SELECT count(DISTINCT label) FROM compares"], capture_output=True, text=True, check=False)
        start = int(p.stdout.splitlines()[-1].strip().strip('"')) + 1 if p.returncode == 0 else 1
    for i in range(start, a.runs + 1):
        res = run.run_tool("msq", wdir.name, wdir, msq,
                           ["--db", str(db), "--label", f"run{i:02d}"], a.timeout)
        res["history_runs"] = i
        res["history_mb"] = round(db.stat().st_size / 1e6, 1) if db.exists() else None
        run.append_result(res)
        print(f"run {i}: {run.run_line(res)}; history {res['history_mb']} MB", flush=True)
        if res.get("rc") != 0:
            print(f"run {i} failed (rc {res.get('rc')}); stopping", file=sys.stderr)
            return 1
        shutil.rmtree(Path(res["run_dir"]) / "out", ignore_errors=True)  # keep only the history:
        # 64 workbooks a run, 20 runs, would fill this machine's disk
        if i in done:
            record(measure(msq, db, i, a.query_repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
