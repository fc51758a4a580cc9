"""NPY-mode tensor metrics of a kernel compare (spec §8.3, formulas of §4.3.4).

The pairs run on msq's tensor engine (:mod:`msq.tensors`): its process pool, its path
confinement and safe ``.npy`` reader, and its one-pass metrics kernel. What is the kernel
compare's own is :class:`KernelMeasure`: the checks (messages ending in ``\\n``), numpy's
statistics of each array, and the finishing step that turns the aggregates into cells.

Differences from the PyTorch real-data path: both arrays are taken as float64 *before* any
metric (the engine's ``rel64``), so the ε shift used for the relative error never reaches Cosine
or MaxAbsErr, whatever the dtype.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from msq.tensors.meta import TensorMeta, to_array
from msq.tensors.metrics import Stats, array_stats
from msq.tensors.pool import Measure, Opened, TensorJob, locate, measure_rows
from msq.tensors.reader import inspect_tensor

CHUNK = 1 << 20
"""Elements per chunk: a float64 chunk pair plus temporaries stays within a few tens of MB."""

FLOAT64_EPS = float(np.finfo(np.float64).eps)
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

SideStats = tuple[str | None, str | None, float | None, float | None, float | None,
                  float | None, bool]
Metrics = tuple[float | None, str | None, float | None, float | None, str | None,
                float | None, float | None, str]
EMPTY_STATS: SideStats = (None, None, None, None, None, None, False)
NO_METRICS: Metrics = (None, None, None, None, None, None, None, "")
#: A measured pair: both sides' statistics, the check message, computed, then the metrics.
MetricRow = tuple[object, ...]


def r12(value: float) -> float:
    """Round to 12 digits after the decimal point, as 1.1.0's ``format_value`` does."""
    return float(format(value, ".12f"))


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


def _cosine(st: Stats, size: int) -> tuple[float | None, str | None, str]:
    """(value, label, message) of the Cosine column."""
    with np.errstate(all="ignore"):  # an overflowing product gives NaN, reported as such
        return _cosine_cell(st, size)


def _cosine_cell(st: Stats, size: int) -> tuple[float | None, str | None, str]:
    if size == 1:
        return None, "unsupported", MSG_LENGTH_ONE
    norm_n, norm_b = np.sqrt(0.0 + (st.dot_nn or 0.0)), np.sqrt(0.0 + (st.dot_bb or 0.0))
    if norm_n <= FLOAT64_EPS and norm_b <= FLOAT64_EPS:
        return 1.0, None, ""
    if norm_n <= FLOAT64_EPS:
        return None, "Nan", MSG_NPU_ZERO
    if norm_b <= FLOAT64_EPS:
        return None, "Nan", MSG_BENCH_ZERO
    cos = (0.0 + (st.dot_nb or 0.0)) / (norm_n * norm_b)
    if np.isnan(cos):
        return None, "Nan", MSG_COS_NAN
    value = r12(cos)
    if value > 0.9999:
        value = round(value, 6)
    return (1.0 if value > 0.99999 else value), None, ""


def finish(st: Stats, size: int) -> Metrics | None:
    """The metric cells of a pair from its aggregates; None if inf/nan positions differ."""
    if st.nanpos:
        return None
    cosine, cosine_label, message = _cosine(st, size)
    if st.rnan:
        max_rel, rel_label = None, "Nan"
        message += MSG_REL_NAN
    else:
        max_rel, rel_label = r12(max(0.0, st.rmax)), None
    return (cosine, cosine_label, r12(max(0.0, st.amax)), max_rel, rel_label,
            r12(st.c1 / size), r12(st.c5 / size), message)


def pair_metrics(npu: np.ndarray, bench: np.ndarray) -> Metrics | None:
    """Cosine, MaxAbsErr, MaxRelativeErr and the two ratios; None if inf/nan positions differ."""
    return finish(array_stats(npu, bench, compat=False, chunk=CHUNK, rel64=True), npu.size)


class KernelMeasure(Measure):
    """The kernel compare's measure on the tensor engine: a row per pair of ``.npy`` files.

    A job names each side's file relative to its dump root (``npu_dir``/``bench_dir``, where the
    engine confines it), or None when that side has no file. Pairs are never split into ranges,
    so the dot products are summed chunk after chunk, as 1.1.0 sums them within one array.
    """

    rel64 = True
    split = False

    def __init__(self) -> None:
        super().__init__(compat=False)

    def open(self, job: TensorJob) -> MetricRow | Opened:
        npu = _load(job.npu_dir, job.npu_file)
        bench = _load(job.bench_dir, job.bench_file)
        arrays = [None if side is None else to_array(side, native=False) for side in (npu, bench)]
        head = (*side_stats(arrays[0]), *side_stats(arrays[1]))
        message = check_message(arrays[0], arrays[1])
        if message:
            return (job.job_id, *head, message, False, *NO_METRICS)
        assert npu is not None and bench is not None
        return Opened(npu, bench, head)

    def small(self, items: list[tuple[int, Opened]]) -> list[MetricRow]:
        return [self.finish(job_id, self.stats(o, 0, o.npu.numel, CHUNK), o) for job_id, o in items]

    def finish(self, job_id: int, st: Stats, opened: Opened) -> MetricRow:
        head = opened.context
        assert isinstance(head, tuple)
        metrics = finish(st, opened.npu.numel)
        if metrics is None:
            return (job_id, *head, MSG_NANPOS, False, *NO_METRICS)
        return (job_id, *head, "", True, *metrics)


def _load(root: str | None, name: str | None) -> TensorMeta | None:
    """The layout of ``root/name`` (a path confined to the root); None when there is no file."""
    if name is None or root is None:
        return None
    found = locate(root, name)
    return None if found is None else inspect_tensor(*found)


def worker_count(requested: int | None = None) -> int:
    """All usable cores, never 0 (1.1.0 computed ``(cpus + 1) // 4`` and divided by it)."""
    if requested is not None:
        return max(1, int(requested))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def measure_all(jobs: Sequence[TensorJob], workers: int | None = None) -> list[MetricRow]:
    """Measure every pair on the tensor engine's pool (in process when too few to pay), in job
    order; each row starts with its job's ``job_id``."""
    return measure_rows(jobs, KernelMeasure(), workers=worker_count(workers), progress=False,
                        chunk=CHUNK)
