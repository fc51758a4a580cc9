"""Real-data mode: turn matched tensor rows into jobs for the tensor engine, load its results."""

from __future__ import annotations

from pathlib import Path

import duckdb

from msq.config import Options


def fill_tensor_metrics(con: duckdb.DuckDBPyConnection, npu_dir: Path, bench_dir: Path,
                        opts: Options) -> None:
    """Compute metrics for every matched row that names a tensor file; fill ``tensor_metrics``."""
    from msq.tensors.pool import compute_metrics

    jobs = con.execute("""
        SELECT r.out_seq, n.disp_name, b.disp_name, n.data_name, b.data_name
        FROM compare_rows r
        JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
        JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
        WHERE r.kind = 'matched' AND n.data_name <> '-1'
        ORDER BY r.out_seq""").fetchall()
    table = compute_metrics(jobs, npu_dir=npu_dir, bench_dir=bench_dir, compat=opts.is_compat,
                            workers=opts.workers)
    con.register("_metrics", table)
    con.execute("INSERT INTO tensor_metrics BY NAME SELECT * FROM _metrics")
    con.unregister("_metrics")
