#!/usr/bin/env python3
"""Where one rank x step pair's time and memory go: the worker's half and the driver's half.

    python bench/pair_costs.py --ops 5000 --repeat 3
    python bench/pair_costs.py --stages --ops 200 --work /tmp/me    # where a pair's CPU goes

One pair of bench/gen_stat.py statistics dumps (--ops ops a side) is computed, rendered and
turned into history rows (msq/pair_tables.py: what a Ray task or pool worker does), once per
output format (and in a pool worker's kept database against a new one each pair), and published and recorded by the driver (msq/run_writer.py), each --repeat
times; the median seconds (wall and this process's CPU), the bytes the worker sends back (files,
and the history rows as Arrow) and the history database's growth per pair are printed. These
figures feed docs/scale.md.

``--stages``: only where one pair's CPU goes in a pool worker's kept database, by stage (each
stage's thread CPU, from the thread that runs it: the strands' DuckDB queries run on their own
threads with one DuckDB thread, so each is counted once), the median of --repeat pairs. Run it
at two sizes (e.g. --ops 200 and --ops 5000) to tell a pair's fixed cost from its per-row cost.
``--work``: where the generated dumps and results.jsonl go (default bench/work).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stages", action="store_true", help="only the stage breakdown")
    ap.add_argument("--work", type=Path, default=HERE / "work")
    a = ap.parse_args(argv)

    from gen_root import generate_root

    from msq.config import Options
    from msq.distributed import discover_jobs
    from msq.pair_tables import compute_pair
    from msq.run_writer import RunWriter

    base = a.work / f"pair-{a.ops}"
    if not (base / "meta.json").is_file():
        generate_root(base, 1, 1, a.ops)
    job = discover_jobs(base / "npu", base / "bench", False)[0]
    dump_bytes = sum(os.path.getsize(p) for p in (job.npu[0], job.bench[0]))
    row: dict[str, object] = {"bench": "pair_costs", "ops": a.ops,
                              "dump_json_bytes": dump_bytes, "load": round(os.getloadavg()[0], 2)}
    if a.stages:
        row["bench"] = "pair_stages"
        row.update(stage_costs(job, a.repeat))
        return _report(row, a.work)
    for fmt in ("xlsx", "csv", "parquet", "history"):
        record = fmt == "history"
        out = Path(tempfile.mkdtemp(prefix="pair-costs-"))
        opts = Options(workers=1, record=record, formats=("parquet",) if record else (fmt,),
                       auto_analyze=False)
        writer = RunWriter(out, opts)
        spent, cpu, sizes = [], [], []
        if record:  # the empty history's size, subtracted below
            writer.con.execute("CHECKPOINT msq_history")
            sizes.append((out / "msq.duckdb").stat().st_size)
        wrote = wrote_cpu = 0.0
        tables = None
        for i in range(a.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            tables = compute_pair(job, opts, base)
            spent.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            t0, c0 = time.perf_counter(), time.process_time()
            writer.write(job, tables)  # type: ignore[arg-type]
            if i == a.repeat - 1:  # the pairs still held (a few share a transaction)
                writer.commit()
            wrote += time.perf_counter() - t0
            wrote_cpu += time.process_time() - c0
        if record:
            writer.con.execute("CHECKPOINT msq_history")
            sizes.append((out / "msq.duckdb").stat().st_size)
        writer.close()
        shutil.rmtree(out)
        assert tables is not None and not hasattr(tables, "message"), tables
        row["rows"] = tables.summary["rows"]
        row[f"compute_{fmt}_s"] = round(statistics.median(spent), 3)
        row[f"compute_{fmt}_cpu_s"] = round(statistics.median(cpu), 3)
        # the driver's time a pair: every pair's write and the commits, over the pairs
        row[f"driver_{fmt}_s"] = round(wrote / a.repeat, 3)
        row[f"driver_{fmt}_cpu_s"] = round(wrote_cpu / a.repeat, 3)
        row[f"{fmt}_bytes"] = sum(len(data) for _, data in tables.files)
        if record:
            row["history_arrow_bytes"] = sum(t.nbytes for t in tables.history.values())
            row["history_bytes_per_pair"] = (sizes[-1] - sizes[0]) // a.repeat
            row.update(handoff_costs(job, opts, base, tables))
    row.update(kept_costs(job, base, a.repeat))
    # the history runs above include a Parquet file; subtract it to get the rows alone
    row["history_rows_s"] = round(float(row["compute_history_s"])  # type: ignore[arg-type]
                                  - float(row["compute_parquet_s"]), 3)  # type: ignore[arg-type]
    return _report(row, a.work)


def _report(row: dict[str, object], work: Path) -> int:
    print(json.dumps(row))
    with open(work / "results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
    return 0


#: The stages :func:`stage_costs` times: (label, module, function); a materialised view is timed
#: under ``view:<name>`` (msq.db.materialize, on whichever strand runs it)
STAGES = (("read", "msq.pipeline", "read_sides"), ("load", "msq.pipeline", "load_sides"),
          ("match", "msq.pipeline", "pair_rows"), ("windows", "msq.pipeline", "write_windows"),
          ("summary", "msq.pipeline", "summarize"), ("workbook", "msq.export.outputs", "write_outputs"),
          ("history_rows", "msq.pair_tables", "_history_rows"))


def stage_costs(job: object, repeat: int) -> dict[str, object]:
    """Thread CPU milliseconds of one pair by stage, in a pool worker's kept database (the
    first pair, which opens it, left out); ``pair_cpu_ms``: the whole process's CPU a pair;
    ``other_ms``: what no stage holds (the catalog's views, the pair's set-up, Python); a stage
    inside another (``view:op_keys`` in ``match``) is counted once there."""
    import importlib
    import resource
    import threading

    from msq.config import Options
    from msq.pair_tables import WorkerDatabase, compute_pair

    spent: dict[str, float] = {}
    lock = threading.Lock()

    depth = threading.local()

    def timed(label: str, func: object) -> object:
        def run(*args: object, **kwargs: object) -> object:
            t0 = time.thread_time()
            outer = getattr(depth, "n", 0) == 0  # not inside another stage (match holds op_keys)
            depth.n = getattr(depth, "n", 0) + 1
            try:
                return func(*args, **kwargs)  # type: ignore[operator]
            finally:
                depth.n -= 1
                name = f"view:{args[1]}" if label == "view" else label
                took = time.thread_time() - t0
                with lock:
                    spent[name] = spent.get(name, 0.0) + took
                    if outer:
                        spent["staged"] = spent.get("staged", 0.0) + took
        return run

    saved = []
    for label, module, name in (*STAGES, ("view", "msq.db", "materialize"),
                                ("reset", "msq.pair_tables", "WorkerDatabase.reset")):
        owner: object = importlib.import_module(module)
        attr = name
        if "." in name:
            cls, attr = name.split(".")
            owner = getattr(owner, cls)
        saved.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, timed(label, getattr(owner, attr)))
    # the pipeline calls these by the names it imported
    from msq import pipeline
    for label, module, name in STAGES:
        if module != "msq.pipeline" and hasattr(pipeline, name):
            saved.append((pipeline, name, getattr(pipeline, name)))
            setattr(pipeline, name, getattr(importlib.import_module(module), name))
    opts = Options(workers=1, record=True, formats=("xlsx",))
    folder = Path(tempfile.mkdtemp(prefix="pair-stages-"))
    runs: list[dict[str, float]] = []
    try:
        compute_pair(job, opts, folder, kept=True)  # type: ignore[arg-type]  (opens it)
        for _ in range(repeat):
            spent.clear()
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            compute_pair(job, opts, folder, kept=True)  # type: ignore[arg-type]
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            runs.append({**spent, "pair_cpu": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime})
    finally:
        for owner, attr, func in reversed(saved):
            setattr(owner, attr, func)
        WorkerDatabase.discard()
        shutil.rmtree(folder)
    out: dict[str, object] = {}
    for key in runs[-1]:
        out[f"{key}_ms"] = round(1000 * statistics.median(r.get(key, 0.0) for r in runs), 1)
    out["other_ms"] = round(float(out.pop("pair_cpu_ms")) - float(out.pop("staged_ms")), 1)  # type: ignore[arg-type]
    out["pair_cpu_ms"] = round(1000 * statistics.median(r["pair_cpu"] for r in runs), 1)
    return out


def kept_costs(job: object, base: Path, repeat: int) -> dict[str, float]:
    """CPU seconds and minor page faults of one pair computed as a pool worker computes it:
    in the worker's kept database (msq.pair_tables.WorkerDatabase, opened by the first pair,
    whose cost is left out) against a new database each pair; workbook and history rows."""
    import resource

    from msq.config import Options
    from msq.pair_tables import WorkerDatabase, compute_pair

    opts = Options(workers=1, record=True, formats=("xlsx",))
    out: dict[str, float] = {}
    for label, kept in (("new", False), ("kept", True)):
        folder = Path(tempfile.mkdtemp(prefix="pair-costs-"))
        compute_pair(job, opts, folder, kept=kept)  # type: ignore[arg-type]  (opens it)
        cpu, faults = [], []
        for _ in range(repeat):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            compute_pair(job, opts, folder, kept=kept)  # type: ignore[arg-type]
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
            faults.append(r1.ru_minflt - r0.ru_minflt)
        shutil.rmtree(folder)
        out[f"compute_{label}_db_cpu_s"] = round(statistics.median(cpu), 3)
        out[f"compute_{label}_db_minflt"] = int(statistics.median(faults))
    WorkerDatabase.discard()
    return out


def handoff_costs(job: object, opts: object, base: Path, tables: object) -> dict[str, float]:
    """CPU seconds to hand one pair from a pool worker to the driver (both sides, in this
    process; the pipe's own copies left out): pickled whole (before session 9), and left in a
    shared folder (the rows as Arrow IPC, msq.pair_tables.compute_pair_shared) with only the
    rest pickled."""
    import pickle

    from msq.pair_tables import compute_pair, leave_rows, shared_root

    c0 = time.process_time()
    pickle.loads(pickle.dumps(tables))
    pickled = time.process_time() - c0
    folder = tempfile.mkdtemp(prefix="pair-costs-", dir=shared_root())
    shared = compute_pair(job, opts, base, folder)  # type: ignore[arg-type]
    c0 = time.process_time()
    leave_rows(shared, folder)  # type: ignore[arg-type]
    back = pickle.loads(pickle.dumps(shared))
    back.take_shared()
    left = time.process_time() - c0
    return {"handoff_pickle_cpu_s": round(pickled, 4), "handoff_shared_cpu_s": round(left, 4)}


if __name__ == "__main__":
    sys.exit(main())
