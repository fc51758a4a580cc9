#!/usr/bin/env python3
"""Does this DuckDB re-plan a prepared statement at each EXECUTE? (bench/README, "Session 13: pairs")

    python bench/duckdb_prepared.py

A pool worker plans the same SQL again for every pair (~0.25 s of a 24,500-row pair's ~0.87 s
CPU). Preparing each materialisation once per worker (``PREPARE m AS INSERT INTO t SELECT ...``,
then ``EXECUTE m`` per pair on emptied tables) would pay it once, if EXECUTE reused the plan.
This probe prints, for a few statements, whether DuckDB's profiler saw the optimizer run during
an EXECUTE (it runs only when the statement is bound again), and the CPU of EXECUTE against the
same query sent as text. With DuckDB 2.0.1 every statement that scans a table is bound and
optimised again at each EXECUTE, even inside the transaction that prepared it (so not because
the catalog changed); statements without a table (VALUES, a table function) are not.

Were a plan ever reused across pairs, it would carry the table statistics of the moment it was
prepared: the optimizer's statistics propagation drops a table filter those statistics call
always true and replaces a scan whose filter they call always false by an empty result (DuckDB
src/optimizer/statistics/operator/propagate_get.cpp), so a later pair's rows outside the first
pair's ranges would be lost or let through. Only a plan made while the tables have no statistics
(DuckDB gives none for a table with rows not yet committed in the preparing transaction:
src/function/table/table_scan.cpp, TableScanStatistics) could be reused safely. Re-run this on a
DuckDB upgrade: if EXECUTE stops re-planning, the idea comes back with that condition.
"""
from __future__ import annotations

import json
import os
import tempfile
import time

import duckdb

JOINS = " UNION ALL ".join(f"SELECT a.x, b.y FROM t a JOIN t b ON a.x = b.x + {i} WHERE a.x < 50"
                           for i in range(40))
STATEMENTS = {
    "table_scan": "SELECT x FROM t WHERE x < 5",
    "forty_joins": JOINS,
    "insert_select": f"INSERT INTO o {JOINS}",
    "values": "SELECT * FROM (VALUES (1), (2)) v(x) WHERE x < 5",
    "table_function": "SELECT * FROM range(3) WHERE range < 2",
}


def main() -> int:
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute("CREATE TABLE t AS SELECT range::INT AS x, range::VARCHAR AS y FROM range(100)")
    con.execute("CREATE TABLE o (x INT, y VARCHAR)")
    profile = os.path.join(tempfile.mkdtemp(prefix="msq-prepared-"), "profile.json")
    print(f"DuckDB {duckdb.__version__}")
    for name, sql in STATEMENTS.items():
        con.execute(f"PREPARE {name} AS {sql}")
        con.execute("SET enable_profiling = 'json'; SET profiling_mode = 'detailed'; "
                    f"SET profiling_output = '{profile}'")
        con.execute(f"EXECUTE {name}")
        optimised = _optimised(profile)
        con.execute("SET enable_profiling = 'no_output'")
        in_txn = _optimised_in_transaction(con, name, profile)
        execute = _cpu_ms(con, f"EXECUTE {name}")
        text = _cpu_ms(con, sql)
        print(f"{name:15} re-planned at EXECUTE: {optimised!s:5} (in its own transaction: "
              f"{in_txn!s:5})  EXECUTE {execute:6.2f} ms CPU, as text {text:6.2f} ms")
    os.unlink(profile)
    os.rmdir(os.path.dirname(profile))
    return 0


def _optimised_in_transaction(con: duckdb.DuckDBPyConnection, name: str, profile: str) -> bool:
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(f"PREPARE {name}_txn AS {STATEMENTS[name]}")
        con.execute("SET enable_profiling = 'json'; SET profiling_mode = 'detailed'; "
                    f"SET profiling_output = '{profile}'")
        con.execute(f"EXECUTE {name}_txn")
        return _optimised(profile)
    finally:
        con.execute("SET enable_profiling = 'no_output'")
        con.execute("ROLLBACK")


def _optimised(profile: str) -> bool:
    """Whether the profiled query ran the optimizer (it has a total time only then)."""
    with open(profile) as f:
        return bool(json.load(f).get("optimizer", {}).get("total_time"))


def _cpu_ms(con: duckdb.DuckDBPyConnection, sql: str, runs: int = 30) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        con.execute(sql)
        best = min(best, time.process_time() - start)
    return best * 1000


if __name__ == "__main__":
    raise SystemExit(main())
