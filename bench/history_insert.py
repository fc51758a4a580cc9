#!/usr/bin/env python3
"""Issue 15 #6: the CPU of appending one compare's rows to the history, by layout.

    python3 bench/history_insert.py HISTORY.duckdb --repeat 7

Takes the rows of the first compare in HISTORY (e.g. the `stat` workload's out/msq.duckdb:
97,395 rows), then, interleaved, appends them in one transaction to a fresh file and times the
process CPU (all DuckDB threads) of the insert, its commit and checkpoint:

- ``v3``: a plain ``result_rows`` table of names (schema version 3);
- ``v4``: the op dictionary (``insert_result_rows``: new names, then the keyed rows);
- ``v4-known``: the same when every name is already in ``names`` (a history that recorded the
  same model before: the usual case of a growing history).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from msq import db as msq_db
from msq.history import recorder

A = recorder.ALIAS


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def append(rows: object, layout: str, path: Path) -> tuple[float, float]:
    con = duckdb.connect()
    con.register("rows_in", rows)
    con.execute("CREATE TEMP VIEW hist_rows AS SELECT * FROM rows_in")
    con.execute(f"ATTACH '{path}' AS {A} (ROW_GROUP_SIZE {recorder.ROW_GROUP_ROWS})")
    con.execute(f"USE {A}")
    if layout == "v3":
        con.execute("CREATE TABLE result_rows AS SELECT 0::BIGINT AS compare_id, * "
                    "FROM temp.main.hist_rows LIMIT 0")
    else:
        msq_db.run_schema(con, "history/schema")
    con.execute("USE memory")
    if layout == "v4-known":
        recorder.insert_names(con, "hist_rows")
    con.execute("BEGIN")
    c0, t0 = cpu(), time.perf_counter()
    if layout == "v3":
        con.execute(f"INSERT INTO {A}.result_rows BY NAME "
                    "SELECT 1::BIGINT AS compare_id, * FROM hist_rows")
    else:
        recorder.insert_result_rows(con, "hist_rows", 1)
    con.execute("COMMIT")
    con.execute(f"CHECKPOINT {A}")
    c1, t1 = cpu(), time.perf_counter()
    con.close()
    return c1 - c0, t1 - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", type=Path, help="a history whose first compare gives the rows")
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    src = duckdb.connect(str(a.history), read_only=True)
    rows = src.sql("SELECT * EXCLUDE (compare_id) FROM result_rows WHERE compare_id = "
                   "(SELECT min(compare_id) FROM compares) ORDER BY out_seq").to_arrow_table()
    src.close()
    layouts = ("v3", "v4", "v4-known")
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in layouts}
    with tempfile.TemporaryDirectory(prefix="msq-hist-insert-") as tmp:
        for i in range(a.repeat):
            for layout in layouts:
                path = Path(tmp) / f"{layout}-{i}.duckdb"
                got[layout].append(append(rows, layout, path))
                size = path.stat().st_size
                os.remove(path)
            print(f"round {i + 1}: load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"{rows.num_rows} rows; medians of {a.repeat} (range); last file {size / 1e6:.1f} MB")
    for layout, xs in got.items():
        cpus, walls = [x[0] for x in xs], [x[1] for x in xs]
        print(f"{layout:9s} CPU {statistics.median(cpus):.3f} s [{min(cpus):.3f}-{max(cpus):.3f}]"
              f"  wall {statistics.median(walls):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
