"""NPY-mode tensor metrics of a kernel compare (spec §8.3, formulas of §4.3.4).

Differences from the PyTorch real-data path: both arrays are flattened to float64 *before* any
metric, so the ε shift used for the relative error never reaches Cosine or MaxAbsErr; the check
messages end with ``\\n``. Arrays are read with ``np.load(mmap_mode="r", allow_pickle=False)``
and the metrics are accumulated chunk by chunk, so memory stays at a few chunks per worker.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from msq.errors import TensorFileError

CHUNK = 1 << 20
"""Elements per chunk: a float64 chunk pair plus temporaries stays within a few tens of MB."""

POOL_MIN_JOBS = 64
"""Below this many pairs the process pool costs more than it saves; compute in process."""

FLOAT64_EPS = float(np.finfo(np.float64).eps)
THOUSANDTH, FIVE_THOUSANDTHS = 0.001, 0.005
NUMERIC_KINDS = "biuf"

MSG_NOT_NDARRAY = "Dump file is not ndarray.\n"
MSG_EMPTY = "This is empty data, can not compare.\n"
MSG_SCALAR = "This is type of scalar data, can not compare.\n"
MSG_SHAPE = "Shape of NPU and bench Tensor do not match.\n"
MSG_DTYPE = "Dtype of NPU and bench Tensor do not match. Skipped.\n"
MSG_NANPOS = "The position of inf or nan in NPU and bench Tensor do not match.\n"
MSG_LENGTH_ONE = "This tensor is scalar."
MSG_NPU_ZERO = "Cannot compare by Cosine Similarity, All the data is Zero in npu dump data."
MSG_BENCH_ZERO = "Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data."
MSG_COS_NAN = "Cannot compare by Cosine Similarity, the dump data has NaN."
MSG_REL_NAN = "Cannot compare by MaxRelativeError, the data contains nan in dump data."


@dataclass(frozen=True)
class PairJob:
    """One pair to measure: its key in ``k10_npy_pairs`` and the two files (None = absent)."""

    rank: int
    step: int
    compare_key: str
    local_index: int
    npu_path: str | None
    bench_path: str | None
    npu_root: str
    bench_root: str


SideStats = tuple[str | None, str | None, float | None, float | None, float | None,
                  float | None, bool]
Metrics = tuple[float | None, str | None, float | None, float | None, str | None,
                float | None, float | None, str]
EMPTY_STATS: SideStats = (None, None, None, None, None, None, False)
NO_METRICS: Metrics = (None, None, None, None, None, None, None, "")


def r12(value: float) -> float:
    """Round to 12 digits after the decimal point, as 1.1.0's ``format_value`` does."""
    return float(format(value, ".12f"))


def load_npy(path: str | None, root_real: str) -> np.ndarray | None:
    """Memory-map one ``.npy``; None when there is no file. Refuses paths leaving the root."""
    if not path:
        return None
    real = os.path.realpath(path)
    if not (real == root_real or real.startswith(root_real + os.sep)):
        raise TensorFileError(f"{path} resolves to {real}, outside the dump root {root_real}; "
                              "msq does not follow links out of a dump. Copy the file into the "
                              "dump or replace the link.")
    if not os.path.isfile(real):
        return None
    try:
        array = np.load(real, mmap_mode="r", allow_pickle=False)
    except ValueError as err:
        raise TensorFileError(f"{path}: cannot be read without unpickling Python objects ({err});"
                              " msq never unpickles dump files. Re-dump the tensor as a numeric "
                              "array.") from err
    except OSError as err:
        raise TensorFileError(f"{path}: not a readable .npy file ({err}); re-dump it or remove "
                              "it from the dump directory.") from err
    # A plain view of the mapping: numpy's memmap subclass costs a hook on every result.
    return array.view(np.ndarray) if isinstance(array, np.memmap) else array


def _scalar(value: np.generic) -> float:
    return float(value)


def side_stats(array: np.ndarray | None) -> SideStats:
    """Dtype name, shape text and numpy max/min/mean/L2 of the raw array (empty cells if none)."""
    if array is None:
        return EMPTY_STATS
    dtype, shape = str(array.dtype), str(array.shape)
    if array.size == 0 or array.dtype.kind not in NUMERIC_KINDS:
        return (dtype, shape, None, None, None, None, False)
    with np.errstate(all="ignore"):
        return (dtype, shape, _scalar(np.max(array)), _scalar(np.min(array)),
                _scalar(np.mean(array)), _scalar(np.linalg.norm(array)), array.dtype.kind == "b")


def check_message(npu: np.ndarray | None, bench: np.ndarray | None) -> str:
    """The messages that stop a pair before its metrics (spec §8.3), '' when it can be measured."""
    if npu is None or bench is None:
        return MSG_NOT_NDARRAY
    if npu.size == 0 or bench.size == 0:
        return MSG_EMPTY
    message = ""
    if npu.ndim == 0 or bench.ndim == 0:
        message += MSG_SCALAR
    if npu.shape != bench.shape:
        message += MSG_SHAPE
    if npu.dtype != bench.dtype:
        message += MSG_DTYPE
    for array in (npu, bench):
        if not message and array.dtype.kind not in NUMERIC_KINDS:
            message += f"Dtype {array.dtype} is not numeric, can not compare.\n"
    return message


@dataclass
class _Sums:
    """Running totals of the one-pass metrics."""

    dot: float = 0.0
    npu_sq: float = 0.0
    bench_sq: float = 0.0
    max_abs: float = 0.0
    max_rel: float = 0.0
    rel_nan: bool = False
    below_1: int = 0
    below_5: int = 0


def _chunks(npu: np.ndarray, bench: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    flat_n, flat_b = npu.reshape(-1), bench.reshape(-1)
    for start in range(0, flat_n.size, CHUNK):
        yield (flat_n[start:start + CHUNK].astype(np.float64),
               flat_b[start:start + CHUNK].astype(np.float64))


def _add_chunk(sums: _Sums, x: np.ndarray, y: np.ndarray) -> bool:
    """Fold one float64 chunk pair into ``sums``; False when inf/nan positions differ."""
    bad_x, bad_y = ~np.isfinite(x), ~np.isfinite(y)
    if bad_x.any() or bad_y.any():
        if not (np.array_equal(np.isinf(x), np.isinf(y))
                and np.array_equal(np.isnan(x), np.isnan(y))):
            return False
        x[bad_x] = 0.0
        y[bad_y] = 0.0
    sums.dot += float(x @ y)
    sums.npu_sq += float(x @ x)
    sums.bench_sq += float(y @ y)
    sums.max_abs = max(sums.max_abs, float(np.max(np.abs(x - y))))
    # The relative error shifts zeros of the bench by ε64 on both sides; Cosine and MaxAbsErr
    # above have already seen the unshifted values.
    zero = y == 0
    y[zero] += FLOAT64_EPS
    x[zero] += FLOAT64_EPS
    rel = np.abs((x - y) / y)
    chunk_max = float(np.max(rel))
    if np.isnan(chunk_max):
        sums.rel_nan = True
    else:
        sums.max_rel = max(sums.max_rel, chunk_max)
    sums.below_1 += int(np.count_nonzero(rel < THOUSANDTH))
    sums.below_5 += int(np.count_nonzero(rel < FIVE_THOUSANDTHS))
    return True


def _cosine(sums: _Sums, size: int) -> tuple[float | None, str | None, str]:
    """(value, label, message) of the Cosine column."""
    if size == 1:
        return None, "unsupported", MSG_LENGTH_ONE
    norm_n, norm_b = np.sqrt(sums.npu_sq), np.sqrt(sums.bench_sq)
    if norm_n <= FLOAT64_EPS and norm_b <= FLOAT64_EPS:
        return 1.0, None, ""
    if norm_n <= FLOAT64_EPS:
        return None, "Nan", MSG_NPU_ZERO
    if norm_b <= FLOAT64_EPS:
        return None, "Nan", MSG_BENCH_ZERO
    cos = sums.dot / (norm_n * norm_b)
    if np.isnan(cos):
        return None, "Nan", MSG_COS_NAN
    value = r12(cos)
    if value > 0.9999:
        value = round(value, 6)
    return (1.0 if value > 0.99999 else value), None, ""


def pair_metrics(npu: np.ndarray, bench: np.ndarray) -> Metrics | None:
    """Cosine, MaxAbsErr, MaxRelativeErr and the two ratios; None if inf/nan positions differ."""
    sums = _Sums()
    with np.errstate(all="ignore"):
        for x, y in _chunks(npu, bench):
            if not _add_chunk(sums, x, y):
                return None
        cosine, cosine_label, message = _cosine(sums, npu.size)
    if sums.rel_nan:
        max_rel, rel_label = None, "Nan"
        message += MSG_REL_NAN
    else:
        max_rel, rel_label = r12(sums.max_rel), None
    return (cosine, cosine_label, r12(sums.max_abs), max_rel, rel_label,
            r12(sums.below_1 / npu.size), r12(sums.below_5 / npu.size), message)


MetricRow = tuple[object, ...]


def measure(job: PairJob) -> MetricRow:
    """Everything ``kernel_npy_metrics`` holds about one pair."""
    npu = load_npy(job.npu_path, job.npu_root)
    bench = load_npy(job.bench_path, job.bench_root)
    message = check_message(npu, bench)
    metrics: Metrics | None = NO_METRICS
    if not message:
        assert npu is not None and bench is not None
        metrics = pair_metrics(npu, bench)
        if metrics is None:
            message, metrics = MSG_NANPOS, NO_METRICS
    return (job.rank, job.step, job.compare_key, job.local_index, *side_stats(npu),
            *side_stats(bench), message, not message, *metrics)


def worker_count(requested: int | None = None) -> int:
    """All usable cores, never 0 (1.1.0 computed ``(cpus + 1) // 4`` and divided by it)."""
    if requested is not None:
        return max(1, int(requested))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def measure_all(jobs: Sequence[PairJob], workers: int | None = None) -> list[MetricRow]:
    """Measure every pair, in job order, on a process pool when it is worth it."""
    count = worker_count(workers)
    if count == 1 or len(jobs) < POOL_MIN_JOBS:
        return [measure(job) for job in jobs]
    # forkserver: the parent holds DuckDB threads, and forking a threaded process can deadlock.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    chunk = max(1, min(64, len(jobs) // (count * 4)))
    with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
        return list(pool.map(measure, jobs, chunksize=chunk))
