#!/usr/bin/env python3
"""Where one rank x step pair's time and memory go: the worker's half and the driver's half.

    python bench/pair_costs.py --ops 5000 --repeat 3

One pair of bench/gen_stat.py statistics dumps (--ops ops a side) is computed into its tables
(msq/pair_tables.py: what a Ray task or pool worker does) and written by the driver
(msq/run_writer.py) once per output format and with the history, each --repeat times; the median
seconds, the size of the tables the worker sends back (Arrow IPC), and the history database's
growth per pair are printed. These figures feed docs/scale.md.
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

    import pyarrow as pa
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
    opts = Options(workers=1, record=False)
    times, tables = [], None
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        tables = compute_pair(job, opts, base)
        times.append(time.perf_counter() - t0)
    assert tables is not None and not hasattr(tables, "message"), tables
    sink = pa.BufferOutputStream()
    for table in (tables.result, tables.marks, tables.settings):
        if table is not None:
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
    row = {"bench": "pair_costs", "ops": a.ops, "rows": tables.summary["rows"],
           "dump_json_bytes": dump_bytes, "compute_s": round(statistics.median(times), 3),
           "tables_bytes": sink.getvalue().size, "load": round(os.getloadavg()[0], 2)}
    for fmt in ("xlsx", "csv", "parquet", "history"):
        record = fmt == "history"
        out = Path(tempfile.mkdtemp(prefix="pair-costs-"))
        wopts = Options(workers=1, record=record, formats=("csv",) if record else (fmt,),
                        auto_analyze=False)
        writer = RunWriter(out, wopts)
        spent, sizes = [], []
        for _ in range(a.repeat):
            tabs = compute_pair(job, Options(workers=1, record=record), base)
            t0 = time.perf_counter()
            writer.write(job, tabs)  # type: ignore[arg-type]
            spent.append(time.perf_counter() - t0)
            if record:
                writer.con.execute("CHECKPOINT msq_history")
                sizes.append((out / "msq.duckdb").stat().st_size)
        writer.close()
        if not record:
            files = list(out.glob(f"*.{fmt}"))
            row[f"{fmt}_bytes"] = sum(f.stat().st_size for f in files) // max(1, len(files))
        shutil.rmtree(out)
        row[f"write_{fmt}_s"] = round(statistics.median(spent), 3)
        if record and len(sizes) > 1:
            row["history_bytes_per_pair"] = (sizes[-1] - sizes[0]) // (len(sizes) - 1)
    # the history write above includes a CSV; subtract it to get the record alone
    row["record_s"] = round(row["write_history_s"] - row["write_csv_s"], 3)
    print(json.dumps(row))
    with open(HERE / "work" / "results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
