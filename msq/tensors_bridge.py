"""Real-data mode: turn matched tensor rows into jobs for the tensor engine, load its results."""

from __future__ import annotations

import itertools
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msq import cext, interrupts
from msq.config import Options, SingleInput

# msq.runner imports this module to start EarlyMetrics before duckdb and pyarrow are loaded:
# they, and the tensor engine, are imported inside the functions that use them.
if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from msq.flatten import Columns
    from msq.tensors.pool import Background

log = logging.getLogger("msq")


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
        # both folders scanned in a thread while the pool's modules are imported (_Scan)
        scan = _Scan.begin(npu_dir, bench_dir)
        try:
            names = [] if scan is not None else sorted(_tensor_files(npu_dir) &
                                                       _tensor_files(bench_dir))
        except OSError:  # not a tensor dump, or unreadable: the compare itself will say so
            return None
        if scan is None and not names:
            return None
        # lazy: statistics compares never load the tensor engine (numpy: a C extension, whole)
        with interrupts.deferred():
            from msq.tensors.pool import SameNamedJobs, start_metrics
        if scan is not None:
            try:
                names = scan.names()
            except OSError:  # as above
                return None
            if not names:
                return None

        # TensorJob(i, name, name, npu_dir, bench_dir), each made by the worker that runs it
        jobs = SameNamedJobs(names, str(npu_dir), str(bench_dir))
        # the early rows become one table in the pool's thread, batch by batch as they come
        # in, while the dumps still load and the workers compute the other batches; packed by
        # the workers when DuckDB can read them without pyarrow (_PackedTable)
        packed = _columns() is not None
        early = _PackedTable(names) if packed else _EarlyTable(names)
        background = start_metrics(jobs, compat=opts.is_compat, workers=opts.workers,
                                   then=early.table, each=early.add, pack=packed)
        if background is None:
            return None
        log.info("tensor metrics: started on %d same-named file pairs while the dumps load",
                 len(names))
        return cls(background, names, npu_dir, bench_dir)

    def table(self) -> pa.Table | Columns | None:
        """The early rows as :func:`msq.tensors.pool.metrics_table` makes them, with the file
        name of each in a last column ``name`` (a pyarrow table, or the same columns as
        :class:`msq.flatten.Columns`, which DuckDB reads as it reads the table); None when the
        early run failed."""
        try:
            return self.background.made()  # type: ignore[return-value]
        except Exception as exc:  # noqa: BLE001  (recomputed by the caller, errors included)
            log.debug("early tensor metrics dropped: %s", exc)
            return None

    def cancel(self) -> None:
        self.background.cancel()


def _early_table(names: list[str], rows: list[tuple[Any, ...]]) -> pa.Table:
    """:meth:`EarlyMetrics.table` of the early run's rows (in the pool's thread)."""
    with interrupts.deferred():  # C extensions: imported whole
        import pyarrow as pa  # lazy: this module loads before pyarrow (see the top)

        from msq.tensors.pool import metrics_table

    # every job has its row: sorted by position, row i is the file names[i]
    return metrics_table(rows, list(range(len(names)))).append_column(
        "name", pa.array(names, pa.string()))


class _EarlyTable:
    """:func:`_early_table`, made batch by batch in the pool's thread as the rows come in: at
    the end only the last batch's part is left (tensor_small: ~15 ms of table for 11k rows, in
    series with the wait of the main thread, now ~1 ms). The pieces are the same rows in the
    same order: batches are runs of consecutive jobs; when they are not (a large pair's row is
    merged from its ranges, after its batch), the table is made from all the rows as before."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.parts: list[tuple[int, int, pa.Table]] = []  # (first job, last job, its rows)
        self.count = 0

    def add(self, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        with interrupts.deferred():  # C extensions: imported whole
            import pyarrow as pa  # lazy: as in _early_table

            from msq.tensors.pool import metrics_table

        ids = sorted(row[0] for row in rows)
        table = metrics_table(list(rows), list(range(len(self.names)))).append_column(
            "name", pa.array([self.names[i] for i in ids], pa.string()))
        self.parts.append((ids[0], ids[-1], table))
        self.count += len(rows)

    def table(self, rows: list[tuple[Any, ...]]) -> pa.Table:
        import pyarrow as pa  # lazy: as in _early_table (loaded by add, or here)

        parts = sorted(self.parts, key=lambda part: part[0])
        if self.count != len(rows) or not parts or any(
                a[1] >= b[0] for a, b in itertools.pairwise(parts)):
            return _early_table(self.names, rows)
        return pa.concat_tables([part[2] for part in parts])


class _PackedTable:
    """The early table from the batches the workers packed (msq.tensors.pool.Packed: the same
    columns, cell for cell, as :func:`_early_table` makes from the rows), as
    :class:`msq.flatten.Columns`, one record batch per batch: DuckDB reads them through the
    Arrow C stream, and neither pyarrow is imported (~20 ms of the pool's thread, holding the
    GIL while the main thread imports and loads) nor a Python object made per cell in this
    process (~14 ms for tensor_small's 11k rows). The rows of large pairs, merged from their
    ranges here, are packed here into one more batch. The order of the rows does not matter:
    the compare joins them by name (:func:`fill_from_jobs`)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def add(self, packed: object) -> None:
        pass  # packed already: nothing to do per batch

    def table(self, items: list[Any]) -> Columns:
        from msq.tensors.pool import Packed, pack_rows

        batches = [item.columns for item in items if isinstance(item, Packed)]
        rows = [item for item in items if not isinstance(item, Packed)]
        if rows or not batches:
            batches.append(pack_rows(rows, self.names.__getitem__).columns)
        columns = _columns()
        assert columns is not None  # checked before the run was packed
        return columns(batches)


def _columns() -> Any:
    """msq.flatten.Columns where the C reader is built (DuckDB reads the packed columns through
    its Arrow stream; msq.cext never loads a build older than its source), else None."""
    from msq.flatten import Columns, _c

    return Columns if _c is not None else None


class _Scan:
    """The names both tensor folders share, read in a thread by the C extension
    (``_fused.tensor_names``: the same names as :func:`_tensor_files`, the GIL released while
    it reads) while the main thread imports the tensor pool's modules; the one core the main
    thread uses until the pool forks read them before (tensor_small: ~16 ms of its ~150). A
    fork waits for the thread (msq.procs.wait_before_fork)."""

    def __init__(self, names: Any, dirs: tuple[Path, Path]) -> None:
        self._scan, self._dirs = names, dirs
        self._found: list[str] = []
        self._error: BaseException | None = None
        self._done = threading.Event()  # the thread's last act (see interrupts.wait_for)
        thread = threading.Thread(target=self._run, name="msq-scan", daemon=True)
        thread.start()
        from msq.procs import wait_before_fork

        wait_before_fork(self._done)

    @classmethod
    def begin(cls, npu_dir: Path, bench_dir: Path) -> _Scan | None:
        """The scan begun; None without the C extension, or when either folder is missing (a
        statistics dump: nothing of the tensor engine is imported then)."""
        if not (npu_dir.is_dir() and bench_dir.is_dir()):
            return None
        _fused = cext.load("msq.tensors._fused")  # C: no numpy
        if _fused is None:
            return None
        names = getattr(_fused, "tensor_names", None)  # POSIX only
        return cls(names, (npu_dir, bench_dir)) if names is not None else None

    def _run(self) -> None:
        _map_numpy()
        try:
            npu, bench = (self._scan(os.fspath(d)) for d in self._dirs)
            self._found = sorted(npu & bench)
        except BaseException as err:  # noqa: BLE001 (raised in the main thread by names())
            self._error = err
        finally:
            self._done.set()

    def names(self) -> list[str]:
        """The shared names, sorted (OSError as :func:`_tensor_files` raises it)."""
        interrupts.wait_for(self._done)
        if self._error is not None:
            raise self._error
        return self._found


def _map_numpy() -> None:
    """Map numpy's C core (``numpy/_core/_multiarray_umath``, with the OpenBLAS it links) in this
    thread, the GIL released under ctypes, while the main thread imports the pool's other modules
    (concurrent.futures.process first): its ``import numpy`` then finds the library loaded
    (~3 ms less of the main thread, which the fork waits for; as msq.__main__ maps DuckDB's).
    Nothing happens where the file is not found or does not load (the import reports it)."""
    try:
        import ctypes
        import importlib.util
        from importlib.machinery import EXTENSION_SUFFIXES

        spec = importlib.util.find_spec("numpy")  # the package's folder: numpy is not imported
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            for suffix in EXTENSION_SUFFIXES:
                path = os.path.join(folder, "_core", "_multiarray_umath" + suffix)
                if os.path.isfile(path):
                    ctypes.CDLL(path)  # never unloaded (ctypes does not dlclose)
                    return
    except (ImportError, OSError, ValueError):
        pass


def _tensor_files(directory: Path) -> set[str]:
    with os.scandir(directory) as entries:
        return {e.name for e in entries if e.name.endswith(TENSOR_SUFFIXES) and e.is_file()}


def _ext_sql(col: str, fallback: str) -> str:
    """A file extension from a data_name (SQL): ``'.'`` and what follows its last dot, else
    ``fallback`` (an SQL expression) when it is NULL, empty, ``-1`` or has no dot. The names
    ending in ``.pt`` or ``.npy`` (every dump's) are answered first, without splitting the name
    into a list (tensor_small's 2 x 11k names: ~4 ms of the main thread, the pool done)."""
    return (f"CASE WHEN ends_with({col}, '.pt') THEN '.pt' WHEN ends_with({col}, '.npy') "
            f"THEN '.npy' WHEN {col} IS NOT NULL AND {col} NOT IN ('', '-1') AND contains({col}, "
            f"'.') THEN '.' || string_split({col}, '.')[-1] ELSE {fallback} END")


#: Every matched row that names a tensor file: its position and both files (see
#: fill_tensor_metrics), in output order.
_JOBS_SQL = f"""
    WITH r AS (
      SELECT r.out_seq, n.disp_name AS npu_name, b.disp_name AS bench_name,
             n.data_name AS npu_data, b.data_name AS bench_data,
             {_ext_sql("n.data_name", "'.pt'")} AS npu_ext
      FROM compare_rows r
      JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
      JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
      WHERE r.kind = 'matched' AND n.data_name <> '-1')
    SELECT out_seq, npu_name || npu_ext AS npu_file,
           bench_name || {_ext_sql("bench_data", "npu_ext")} AS bench_file, npu_data
    FROM r"""


def fill_tensor_metrics(con: duckdb.DuckDBPyConnection, npu_dir: Path, bench_dir: Path,
                        opts: Options, early: EarlyMetrics | None = None) -> None:
    """Compute metrics for every matched row that names a tensor file; fill ``tensor_metrics``.

    Files are ``<displayed name><ext>`` inside each side's dump_tensor_data (spec §4.3.1), the
    extension taken from each side's own data_name (.pt for PyTorch, .npy for MindSpore).
    Rows already computed by ``early`` are taken from it (see :func:`fill_from_jobs`).
    """
    with interrupts.deferred():  # C extensions: imported whole
        from msq.tensors import fused  # lazy: statistics compares never load the tensor engine

    # "numpy" means the C kernel was not built (no compiler at install): ~10x slower on big tensors
    log.info("tensor kernel: %s", fused.isa())
    con.execute(f"CREATE OR REPLACE TEMP TABLE _msq_jobs AS {_JOBS_SQL}")
    try:
        fill_from_jobs(con, "_msq_jobs", npu_dir, bench_dir, opts,
                       early if early is not None and early.dirs == (npu_dir, bench_dir) else None)
    finally:
        con.execute("DROP TABLE _msq_jobs")


def fill_from_jobs(con: duckdb.DuckDBPyConnection, jobs: str, npu_dir: Path, bench_dir: Path,
                   opts: Options, early: EarlyMetrics | None) -> None:
    """Fill ``tensor_metrics`` with a row for each job of the table ``jobs`` (``out_seq``,
    ``npu_file``, ``bench_file``: names in ``npu_dir`` and ``bench_dir``, ``npu_data``: the NPU
    data_name), in ``out_seq`` order.

    A job whose two files have one name that ``early`` computed gets that row, joined in DuckDB
    (tensor_small: 15k rows, and no Python loop over them); the others are computed here.
    """
    from msq import db  # lazy: this module loads before duckdb (see EarlyMetrics)

    with interrupts.deferred():  # C extensions: imported whole
        from msq.tensors.pool import TensorJob, compute_metrics

    rest_sql = f"SELECT out_seq, npu_file, bench_file, npu_data FROM {jobs}"
    early_rows = early.table() if early is not None else None
    if early_rows is not None:
        con.register("_msq_early", early_rows)
        try:
            # a job has an early row (one: the names are distinct) or is one of the rest
            inserted = con.execute(f"""
                INSERT INTO tensor_metrics BY NAME
                SELECT j.out_seq, e.* EXCLUDE (job_id, name)
                FROM {jobs} j JOIN _msq_early e ON e.name = j.npu_file
                WHERE j.npu_file = j.bench_file
                ORDER BY j.out_seq""").fetchall()[0][0]
            if inserted == db.scalar(con, f"SELECT count(*) FROM {jobs}"):
                return  # no rest (tensor_small: its query ~3 ms of the main thread, pool done)
            rest = con.execute(f"""
                {rest_sql} j
                WHERE j.npu_file IS DISTINCT FROM j.bench_file
                   OR NOT EXISTS (SELECT 1 FROM _msq_early e WHERE e.name = j.npu_file)
                ORDER BY out_seq""").fetchall()
        finally:
            con.unregister("_msq_early")
        if not rest:
            return
    else:
        rest = con.execute(f"{rest_sql} ORDER BY out_seq").fetchall()
    table = compute_metrics(
        [TensorJob(job_id=out_seq, npu_file=npu_file, bench_file=bench_file,
                   npu_dir=str(npu_dir), bench_dir=str(bench_dir), data_name=npu_data)
         for out_seq, npu_file, bench_file, npu_data in rest],
        compat=opts.is_compat, workers=opts.workers)
    table = table.rename_columns(["out_seq" if c == "job_id" else c for c in table.column_names])
    db.insert_arrow(con, "tensor_metrics", table, by_name=True)
