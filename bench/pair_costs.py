#!/usr/bin/env python3
"""Where one rank x step pair's time and memory go: the worker's half and the driver's half.

    python bench/pair_costs.py --ops 5000 --repeat 3

One pair of bench/gen_stat.py statistics dumps (--ops ops a side) is computed, rendered and
turned into history rows (msq/pair_tables.py: what a Ray task or pool worker does), once per
output format (and in a pool worker's kept database against a new one each pair), and published and recorded by the driver (msq/run_writer.py), each --repeat
times; the median seconds (wall and this process's CPU), the bytes the worker sends back (files,
and the history rows as Arrow) and the history database's growth per pair are printed. These
figures feed docs/scale.md.
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
    a = ap.parse_args(argv)

    from gen_root import generate_root

    from msq.config import Options
    from msq.distributed import discover_jobs
    from msq.pair_tables import compute_pair
    from msq.run_writer import RunWriter

    base = HERE / "work" / f"pair-{a.ops}"
    if not (base / "meta.json").is_file():
        generate_root(base, 1, 1, a.ops)
    job = discover_jobs(base / "npu", base / "bench", False)[0]
    dump_bytes = sum(os.path.getsize(p) for p in (job.npu[0], job.bench[0]))
    row: dict[str, object] = {"bench": "pair_costs", "ops": a.ops,
                              "dump_json_bytes": dump_bytes, "load": round(os.getloadavg()[0], 2)}
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
    print(json.dumps(row))
    with open(HERE / "work" / "results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
    return 0


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
