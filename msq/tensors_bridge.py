"""Real-data mode: turn matched tensor rows into jobs for the tensor engine, load its results."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb

from msq.config import Options


def _ext(data_name: str | None, fallback: str) -> str:
    if data_name and data_name != "-1" and "." in data_name:
        return "." + data_name.rsplit(".", 1)[1]
    return fallback


def fill_tensor_metrics(con: duckdb.DuckDBPyConnection, npu_dir: Path, bench_dir: Path,
                        opts: Options) -> None:
    """Compute metrics for every matched row that names a tensor file; fill ``tensor_metrics``.

    Files are ``<displayed name><ext>`` inside each side's dump_tensor_data (spec §4.3.1), the
    extension taken from each side's own data_name (.pt for PyTorch, .npy for MindSpore).
    """
    from msq.tensors import fused
    from msq.tensors.pool import TensorJob, compute_metrics

    # "numpy" means the C kernel was not built (no compiler at install): ~10x slower on big tensors
    logging.getLogger("msq").info("tensor kernel: %s", fused.isa())

    rows = con.execute("""
        SELECT r.out_seq, n.disp_name, b.disp_name, n.data_name, b.data_name
        FROM compare_rows r
        JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
        JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
        WHERE r.kind = 'matched' AND n.data_name <> '-1'
        ORDER BY r.out_seq""").fetchall()
    jobs = []
    for out_seq, npu_name, bench_name, npu_data, bench_data in rows:
        npu_ext = _ext(npu_data, ".pt")
        jobs.append(TensorJob(job_id=out_seq, npu_file=npu_name + npu_ext,
                              bench_file=bench_name + _ext(bench_data, npu_ext),
                              npu_dir=str(npu_dir), bench_dir=str(bench_dir), data_name=npu_data))
    table = compute_metrics(jobs, compat=opts.is_compat, workers=opts.workers)
    table = table.rename_columns(["out_seq" if c == "job_id" else c for c in table.column_names])
    con.register("_metrics", table)
    con.execute("INSERT INTO tensor_metrics BY NAME SELECT * FROM _metrics")
    con.unregister("_metrics")
