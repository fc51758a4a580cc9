"""The kernel (MindSpore static graph) compare pipeline (spec §8).

discover directories -> Arrow tables ``kernel_npy_files`` / ``kernel_stat_rows`` in DuckDB ->
pairing views (``sql/kernel/k10_*``) -> NPY metrics on the tensor engine (msq/tensors) ->
``kernel_npy_metrics``
-> result views (``sql/kernel/k20_*``) -> one xlsx per (rank, step), by msq's own writer.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from msq import db
from msq.errors import ExportError, InputError
from msq.export.xlsx import SheetSpec, write_xlsx
from msq.mindspore.kernel import metrics
from msq.mindspore.kernel.discover import STATISTIC_FILE, DumpDir, Mode, Root, discover, npy_files
from msq.mindspore.kernel.statcsv import read_statistic_csv
from msq.tensors.pool import TensorJob

log = logging.getLogger("msq.kernel")

SIDES = ("npu", "bench")

NPY_FILES = pa.schema([
    ("side", pa.string()), ("rank", pa.int32()), ("step", pa.int32()), ("seq", pa.int64()),
    ("name", pa.string()), ("compare_key", pa.string()), ("ts", pa.int64()),
])
STAT_ROWS = pa.schema([
    ("side", pa.string()), ("rank", pa.int32()), ("step", pa.int32()), ("seq", pa.int64()),
    ("name", pa.string()), ("compare_key", pa.string()), ("ts", pa.int64()),
    ("dtype", pa.string()), ("shape", pa.string()), ("max", pa.float32()),
    ("min", pa.float32()), ("mean", pa.float32()), ("norm", pa.float32()),
])
_SIDE_STATS = [("dtype", pa.string()), ("shape", pa.string()), ("max", pa.float64()),
               ("min", pa.float64()), ("mean", pa.float64()), ("norm", pa.float64()),
               ("bool", pa.bool_())]
NPY_METRICS = pa.schema([
    ("rank", pa.int32()), ("step", pa.int32()), ("compare_key", pa.string()),
    ("local_index", pa.int64()),
    *[(f"npu_{name}", kind) for name, kind in _SIDE_STATS],
    *[(f"bench_{name}", kind) for name, kind in _SIDE_STATS],
    ("check_message", pa.string()), ("computed", pa.bool_()),
    ("cosine", pa.float64()), ("cosine_label", pa.string()), ("max_abs", pa.float64()),
    ("max_rel", pa.float64()), ("max_rel_label", pa.string()),
    ("one_thousandth", pa.float64()), ("five_thousandths", pa.float64()),
    ("metric_message", pa.string()),
])
RESULT_VIEWS = {Mode.NPY: "k20_npy_result", Mode.STATISTIC: "k20_stat_result"}


@dataclass(frozen=True)
class Job:
    """One (rank, step) present on both sides, in one mode."""

    rank: int
    step: int
    mode: Mode
    npu_dirs: tuple[DumpDir, ...]
    bench_dirs: tuple[DumpDir, ...]


def parse_ids(values: Iterable[int | str] | None, key: str) -> list[int] | None:
    """``rank_id`` / ``step_id`` as a list of integers; None or [] means all."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InputError(f"{key} must be a list of integers such as [0, 1], got {values!r}.")
    ids = []
    for value in values:
        if isinstance(value, bool) or not (isinstance(value, int) or
                                           (isinstance(value, str) and value.isdigit())):
            raise InputError(f"{key} holds {value!r}; it must be a list of integers such as "
                             "[0, 1] ([] = all).")
        ids.append(int(value))
    return ids


def _side_mode(dirs: Sequence[DumpDir], side: str, rank: int, step: int) -> Mode | None:
    for folder in dirs:
        if folder.mode is Mode.EMPTY:
            log.warning("skipped %s: it holds neither *.npy files nor %s", folder.path,
                        STATISTIC_FILE)
    modes = {folder.mode for folder in dirs} - {Mode.EMPTY}
    if len(modes) == 1:
        return modes.pop()
    if not modes:
        log.warning("rank %d step %d skipped: the %s dump has no *.npy files or %s", rank, step,
                    side, STATISTIC_FILE)
    else:
        log.warning("rank %d step %d skipped: the %s dump mixes directories of *.npy files and "
                    "of %s (%s)", rank, step, side, STATISTIC_FILE,
                    ", ".join(str(folder.path) for folder in dirs))
    return None


def plan(npu: dict[tuple[int, int], list[DumpDir]],
         bench: dict[tuple[int, int], list[DumpDir]]) -> list[Job]:
    """The (rank, step) pairs to compare, in sorted order; logs why any other is skipped."""
    for key in sorted(set(npu) ^ set(bench)):
        side = "npu" if key in npu else "bench"
        log.warning("rank %d step %d skipped: only the %s dump has it", *key, side)
    jobs = []
    for rank, step in sorted(set(npu) & set(bench)):
        npu_mode = _side_mode(npu[(rank, step)], "npu", rank, step)
        bench_mode = _side_mode(bench[(rank, step)], "bench", rank, step)
        if npu_mode is None or bench_mode is None:
            continue
        if npu_mode is not bench_mode:
            log.error("rank %d step %d skipped: NPU mode %s is not bench mode %s", rank, step,
                      npu_mode.value, bench_mode.value)
            continue
        jobs.append(Job(rank, step, npu_mode, tuple(npu[(rank, step)]),
                        tuple(bench[(rank, step)])))
    return jobs


def _npy_table(jobs: Sequence[Job], roots: dict[str, Root]) -> pa.Table:
    columns: dict[str, list[object]] = {name: [] for name in NPY_FILES.names}
    for side in SIDES:
        seq = 0
        for job in (j for j in jobs if j.mode is Mode.NPY):
            for folder in (job.npu_dirs if side == "npu" else job.bench_dirs):
                for path, parsed in npy_files(roots[side], folder.path):
                    row = (side, job.rank, job.step, seq, path, parsed.compare_key,
                           parsed.timestamp)
                    for name, value in zip(NPY_FILES.names, row):
                        columns[name].append(value)
                    seq += 1
    return pa.table(columns, schema=NPY_FILES)


def _stat_table(jobs: Sequence[Job], roots: dict[str, Root]) -> pa.Table:
    parts = []
    for side in SIDES:
        seq = 0
        for job in (j for j in jobs if j.mode is Mode.STATISTIC):
            for folder in (job.npu_dirs if side == "npu" else job.bench_dirs):
                roots[side].check_inside(folder.path / STATISTIC_FILE)
                rows = read_statistic_csv(folder.path / STATISTIC_FILE)
                count = rows.num_rows
                head = pa.table({"side": pa.array([side] * count, pa.string()),
                                 "rank": pa.array([job.rank] * count, pa.int32()),
                                 "step": pa.array([job.step] * count, pa.int32()),
                                 "seq": pa.array(range(seq, seq + count), pa.int64())})
                seq += count
                parts.append(pa.Table.from_arrays([*head.columns, *rows.columns],
                                                  schema=STAT_ROWS))
    return pa.concat_tables(parts) if parts else STAT_ROWS.empty_table()


def _connect(tables: dict[str, pa.Table]) -> duckdb.DuckDBPyConnection:
    con = db.connect()
    for name, table in tables.items():
        db.insert_arrow(con, name, table, create=True)
    db.load_views(con, ["kernel"])
    return con


def _measure(con: duckdb.DuckDBPyConnection, roots: dict[str, Root],
             workers: int | None) -> None:
    """The NPY pairs' metrics on the tensor engine -> ``kernel_npy_metrics``."""
    pairs = con.execute("SELECT rank, step, compare_key, local_index, npu_name, bench_name "
                        "FROM k10_npy_pairs ORDER BY rank, step, row_order").fetchall()
    # each file by its path below its side's dump root, to which the engine confines it
    npu_root, bench_root = str(roots["npu"].path), str(roots["bench"].path)
    jobs = [TensorJob(i, _below(npu, npu_root), _below(bench, bench_root), npu_root, bench_root)
            for i, (_, _, _, _, npu, bench) in enumerate(pairs)]
    rows = [(*pair[:4], *row[1:]) for pair, row in zip(pairs, metrics.measure_all(jobs, workers))]
    columns = list(zip(*rows)) if rows else [() for _ in NPY_METRICS.names]
    table = pa.Table.from_arrays([pa.array(values, kind) for values, kind in
                                  zip(columns, NPY_METRICS.types)], schema=NPY_METRICS)
    db.insert_arrow(con, "kernel_npy_metrics", table)


def _below(path: str | None, root: str) -> str | None:
    return os.path.relpath(path, root) if path else None


def _materialize(con: duckdb.DuckDBPyConnection, jobs: Sequence[Job]) -> None:
    """Compute each result view once for all (rank, step); the workbooks then read slices."""
    for mode in {job.mode for job in jobs}:
        view = RESULT_VIEWS[mode]
        con.execute(f"CREATE TABLE {view}_rows AS SELECT * FROM {view} "
                    "ORDER BY rank, step, row_order")


def _write(con: duckdb.DuckDBPyConnection, job: Job, out: Path) -> Path | None:
    view = f"{RESULT_VIEWS[job.mode]}_rows"
    count = con.execute(f"SELECT count(*) FROM {view} WHERE rank = ? AND step = ?",
                        [job.rank, job.step]).fetchone()
    if not count or not count[0]:
        log.warning("rank %d step %d skipped: no tensor to compare", job.rank, job.step)
        return None
    rows = int(count[0])
    headers = [row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()
               if row[0] not in ("rank", "step", "row_order")]
    query = (f"SELECT row_order AS out_seq, * EXCLUDE (rank, step, row_order) FROM {view} "
             f"WHERE rank = {int(job.rank)} AND step = {int(job.step)}")
    stamp = time.strftime("%Y%m%d%H%M%S")
    path = out / f"compare_result_{job.rank}_{job.step}_{stamp}.xlsx"
    try:
        sheets = write_xlsx(con, SheetSpec(query, headers, headers, None, pandas_style=True), path,
                            mode=0o640)
    except OSError as err:
        raise ExportError(f"cannot write {path}: {err}; check the output directory's free "
                          "space and permissions.") from err
    if sheets > 1:
        log.warning("%s: %d rows, continued on further sheets (Sheet2, ...)", path, rows)
    log.info("Compare rank: %d step: %d finish. Compare result: %s.", job.rank, job.step, path)
    return path


def _output_dir(output_dir: str | os.PathLike[str]) -> Path:
    out = Path(os.path.abspath(os.fspath(output_dir)))
    try:
        out.mkdir(mode=0o750, parents=True, exist_ok=True)
    except OSError as err:
        raise ExportError(f"cannot create the output directory {out}: {err.strerror}; choose "
                          "a writable directory.") from err
    if not out.is_dir():
        raise ExportError(f"output path {out} is not a directory; choose a directory.")
    return out


def compare_kernel(npu_root: str | os.PathLike[str], bench_root: str | os.PathLike[str],
                   output_dir: str | os.PathLike[str], *,
                   rank_ids: Iterable[int] | None = None, step_ids: Iterable[int] | None = None,
                   workers: int | None = None) -> list[Path]:
    """Compare two MindSpore kernel (static graph) dumps, one workbook per (rank, step).

    Args:
        npu_root: dump root of the side under test (holds ``rank_*`` or device-id directories).
        bench_root: dump root of the reference side.
        output_dir: where ``compare_result_{rank}_{step}_{YYYYmmddHHMMSS}.xlsx`` files go
            (created if missing).
        rank_ids: ranks to compare (compare.json ``rank_id``); None or empty = all.
        step_ids: steps to compare (compare.json ``step_id``); None or empty = all.
        workers: processes for the NPY metrics; default all usable cores (at least 1).

    Returns:
        The written workbooks in (rank, step) order. Skipped directories and (rank, step)
        pairs are logged as warnings on the ``msq.kernel`` logger.
    """
    roots = {"npu": Root.of(npu_root, "npu"), "bench": Root.of(bench_root, "bench")}
    ranks, steps = parse_ids(rank_ids, "rank_id"), parse_ids(step_ids, "step_id")
    out = _output_dir(output_dir)
    jobs = plan(discover(roots["npu"], ranks, steps), discover(roots["bench"], ranks, steps))
    if not jobs:
        log.warning("nothing to compare: no (rank, step) has usable dumps on both sides")
        return []
    empty_metrics = NPY_METRICS.empty_table()
    con = _connect({"kernel_npy_files": _npy_table(jobs, roots),
                    "kernel_stat_rows": _stat_table(jobs, roots),
                    "kernel_npy_metrics": empty_metrics})
    try:
        if any(job.mode is Mode.NPY for job in jobs):
            _measure(con, roots, workers)
        _materialize(con, jobs)
        return [path for job in jobs if (path := _write(con, job, out)) is not None]
    finally:
        con.close()
