"""Real-data mode: turn matched tensor rows into jobs for the tensor engine, load its results."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msq import interrupts
from msq.config import Options, SingleInput

# msq.runner imports this module to start EarlyMetrics before duckdb and pyarrow are loaded:
# they, and the tensor engine, are imported inside the functions that use them.
if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from msq.tensors.pool import Background, TensorJob

log = logging.getLogger("msq")


def _ext(data_name: str | None, fallback: str) -> str:
    if data_name and data_name != "-1" and "." in data_name:
        return "." + data_name.rsplit(".", 1)[1]
    return fallback


TENSOR_SUFFIXES = (".pt", ".npy")


class EarlyMetrics:
    """Tensor metrics started before the dumps are read, for the pairs the match will almost
    surely make: a file name present in both sides' ``dump_tensor_data``.

    Computing tensors is most of a real-data compare, and it does not need the match if the
    pairs are guessed: both runs of one model dump the same names. The pool works on these
    pairs while the dump.json files are read, loaded and matched; :func:`fill_tensor_metrics`
    then takes the rows of the pairs the match really made (a result depends only on the two
    files) and computes only the others. A guessed pair the match did not make is wasted work,
    never a wrong row; an error in the early run (an unsafe file the compare may not even need)
    only means its rows are computed again, where that error is then reported if it is real.
    """

    def __init__(self, background: Background, names: list[str], npu_dir: Path,
                 bench_dir: Path) -> None:  # fmt: skip
        self.background, self.names = background, names
        self.dirs = (npu_dir, bench_dir)

    @classmethod
    def start(cls, inp: SingleInput, opts: Options) -> EarlyMetrics | None:
        """Start on the same-named files of both tensor directories; None when there are none
        (a statistics dump), or too few for a pool to pay off."""
        npu_dir = inp.npu_json.parent / "dump_tensor_data"
        bench_dir = inp.bench_json.parent / "dump_tensor_data"
        try:
            names = sorted(_tensor_files(npu_dir) & _tensor_files(bench_dir))
        except OSError:  # not a tensor dump, or unreadable: the compare itself will say so
            return None
        if not names:
            return None
        # lazy: statistics compares never load the tensor engine (numpy: a C extension, whole)
        with interrupts.deferred():
            from msq.tensors.pool import TensorJob, start_metrics

        jobs = [TensorJob(i, name, name, str(npu_dir), str(bench_dir)) for i, name in
                enumerate(names)]  # fmt: skip
        background = start_metrics(jobs, compat=opts.is_compat, workers=opts.workers)
        if background is None:
            return None
        log.info("tensor metrics: started on %d same-named file pairs while the dumps load",
                 len(names))
        return cls(background, names, npu_dir, bench_dir)

    def take(self) -> dict[str, tuple[Any, ...]] | None:
        """The early rows by file name (see :func:`msq.tensors.pool.metrics_table`); None when
        the early run failed."""
        try:
            rows = self.background.rows()
        except Exception as exc:  # noqa: BLE001  (recomputed by the caller, errors included)
            log.debug("early tensor metrics dropped: %s", exc)
            return None
        return {self.names[row[0]]: row for row in rows}

    def cancel(self) -> None:
        self.background.cancel()


def _tensor_files(directory: Path) -> set[str]:
    with os.scandir(directory) as entries:
        return {e.name for e in entries if e.name.endswith(TENSOR_SUFFIXES) and e.is_file()}


def fill_tensor_metrics(con: duckdb.DuckDBPyConnection, npu_dir: Path, bench_dir: Path,
                        opts: Options, early: EarlyMetrics | None = None) -> None:
    """Compute metrics for every matched row that names a tensor file; fill ``tensor_metrics``.

    Files are ``<displayed name><ext>`` inside each side's dump_tensor_data (spec §4.3.1), the
    extension taken from each side's own data_name (.pt for PyTorch, .npy for MindSpore).
    Rows already computed by ``early`` are taken from it.
    """
    from msq import db  # lazy: this module loads before duckdb (see EarlyMetrics)

    with interrupts.deferred():  # C extensions: imported whole
        from msq.tensors import fused  # lazy: statistics compares never load the tensor engine
        from msq.tensors.pool import TensorJob

    # "numpy" means the C kernel was not built (no compiler at install): ~10x slower on big tensors
    log.info("tensor kernel: %s", fused.isa())

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
    table = _metrics_of(jobs, opts, early if early and early.dirs == (npu_dir, bench_dir) else None)
    table = table.rename_columns(["out_seq" if c == "job_id" else c for c in table.column_names])
    db.insert_arrow(con, "tensor_metrics", table, by_name=True)


def _metrics_of(jobs: list[TensorJob], opts: Options, early: EarlyMetrics | None) -> pa.Table:
    """The metrics table of ``jobs`` (job ids are out_seq), reusing the early rows."""
    import pyarrow as pa  # lazy: this module loads before pyarrow (see EarlyMetrics)

    with interrupts.deferred():  # C extensions: imported whole
        from msq.tensors.pool import compute_metrics, metrics_table  # lazy: the tensor engine

    got = early.take() if early is not None else None
    if got is None:
        return compute_metrics(jobs, compat=opts.is_compat, workers=opts.workers)
    # the early rows are picked as Python rows, then made one table: a pyarrow take() would
    # import pyarrow.compute (~0.15 s of CPU: its kernels' library and ~300 wrappers)
    reused_ids: list[int] = []
    reused_rows: list[tuple[Any, ...]] = []
    rest = []
    for job in jobs:
        same = job.npu_file is not None and job.npu_file == job.bench_file
        row = got.get(job.npu_file) if same and job.npu_file is not None else None
        if row is None:
            rest.append(job)
        else:
            reused_rows.append((len(reused_ids), *row[1:]))
            reused_ids.append(job.job_id)
    reused = metrics_table(reused_rows, reused_ids)
    if not rest:
        return reused
    computed = compute_metrics(rest, compat=opts.is_compat, workers=opts.workers)
    return pa.concat_tables([reused, computed])
