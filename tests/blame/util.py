"""Helpers for blame tests: a compare's connection with its blame tables, from two dump.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from msq.blame.compute import run_blame
from msq.config import Options, SingleInput
from msq.highlight import write_windows
from msq.pipeline import pair_rows, prepare
from msq.tensors_bridge import fill_tensor_metrics


def blame_con(npu_json: Path, bench_json: Path, bands: pa.Table | None = None,
              **opts: Any) -> duckdb.DuckDBPyConnection:
    """The compare's connection up to its blame tables (no outputs written)."""
    options = Options(record=False, **opts)
    inp = SingleInput(npu_json, bench_json, None)
    con, mode, framework, npu, bench = prepare(inp, options)
    pair_rows(con, inp, options, framework, npu_json.parent, "")
    if mode == "tensor":
        fill_tensor_metrics(con, npu.tensor_dir, bench.tensor_dir, options, None)
    write_windows(con, options.is_compat)
    run_blame(con, mode, npu_json, bench_json, bands=bands,
              noise_source="test" if bands is not None else None)
    return con


def rows(con: duckdb.DuckDBPyConnection, sql: str, *params: Any) -> list[dict[str, Any]]:
    cur = con.execute(sql, list(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def edges(con: duckdb.DuckDBPyConnection, side: str = "npu") -> dict[str, dict[str, Any]]:
    """Consumer row name -> its edge (producer name, how, candidates)."""
    got = rows(con, """
        SELECT c.disp_name AS consumer, p.disp_name AS producer, e.how, e.candidates
        FROM blame_edges e
        JOIN tensors c ON c.side = e.side AND c.row_seq = e.consumer_row
        LEFT JOIN tensors p ON p.side = e.side AND p.row_seq = e.producer_row
        WHERE e.side = ?""", side)
    return {r["consumer"]: r for r in got}


def verdicts(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """NPU row name -> its blame row."""
    return {r["npu_name"]: r for r in rows(con, "SELECT * FROM blame_rows")}


def local_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r["npu_name"] for r in rows(
        con, "SELECT npu_name FROM blame_rows WHERE verdict = 'local' ORDER BY out_seq")]
