"""Real-data metrics of one (npu, bench) tensor pair, in one chunked pass (spec §4.3).

Every metric comes out of the same pass over the two tensors: per chunk of ``chunk`` elements the
kernel zeroes matching inf/NaN positions, applies the ε shift where bench is 0, forms the relative
error in the tensor's own dtype (counting the 1‰/5‰ hits and its maximum), widens both sides to
float64 once, and takes the three dot products and the largest absolute difference. Nothing
full-size is ever allocated beyond the caller's arrays. Every elementwise value is the one
msprobe 1.1.0 computes (same dtypes, same operations, shortcuts only where they provably change
nothing), and the dot products of a tensor that fits in one chunk are the same single BLAS calls,
so such tensors get bit-identical results; larger ones differ only in the summation order of the
dot products.

The same pass also yields what blame needs (none of it changes a metric cell): the sum of
squared differences of the values the dot products see, the two sums of squares (the relative L2
error is ``sqrt(sq_diff) / sqrt(max(npu_sq, bench_sq))``) and a content hash of each side
(:mod:`msq.tensors.chash`), taken before anything in the chunk is modified.

Two behaviours (``compat``):

* ``compat=True`` — msprobe 1.1.0 exactly: the ε shift is applied in place, so Cosine and
  MaxAbsErr of float tensors are computed on shifted values, and a ``"Nan"`` Cosine (a zero-norm
  side) converts to float NaN in the accuracy rule, which then says ``Yes`` unless MaxAbsErr > 1.
* ``compat=False`` — msq's default: Cosine and MaxAbsErr use the data as dumped (ε only enters
  the relative error) and a ``"Nan"`` Cosine gives Accuracy ``No``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from msq.tensors import chash, fused
from msq.tensors.meta import ChunkReader, TensorMeta, to_array

Cell = float | str

#: Elements per chunk (measured best here): large enough that the ~35 numpy calls per chunk cost
#: little, small enough that the working set (~4 MB: inputs, float64 copies, relative error,
#: differences, mask) stays in the last-level cache.
DEFAULT_CHUNK = 1 << 17
#: Tensors above this many elements are aggregated per range of this size, the ranges merged in
#: order. The pool runs ranges on different workers; fixed boundaries keep results identical.
DEFAULT_RANGE = 1 << 23

NONE_TEXT = "None"
UNSUPPORTED = "unsupported"
NAN_TEXT = "Nan"
NA_TEXT = "N/A"
SHAPE_UNMATCHED = "shape unmatched"

MSG_NO_BENCH = "No bench data matched."
MSG_EMPTY = "This is empty data, can not compare."
MSG_SHAPE = "Shape of NPU and bench Tensor do not match. Skipped."
MSG_NANPOS = "The position of inf or nan in NPU and bench Tensor do not match."
MSG_SCALAR_0D = "This is type of scalar data, can not compare."
MSG_LEN1 = "This tensor is scalar."
MSG_COS_ZERO_NPU = "Cannot compare by Cosine Similarity, All the data is Zero in npu dump data."
MSG_COS_ZERO_BENCH = "Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data."
MSG_COS_NAN = "Cannot compare by Cosine Similarity, the dump data has NaN."
MSG_MAXREL_NAN = "Cannot compare by MaxRelativeError, the data contains nan in dump data."

_EPS64 = float(np.finfo(np.float64).eps)
_FLOAT_KINDS = (np.float16, np.float32, np.float64, np.longdouble)


class MetricResult(NamedTuple):
    """The five metric cells, Accuracy Reached or Not, Err_message and a status for one row.

    Cells are floats or the exact texts of the spec (``"None"``, ``"unsupported"``, ``"Nan"``,
    ``"N/A"``, ``"shape unmatched"``). ``err_message`` excludes the fuzzy-match suffix, which the
    caller appends. ``status`` is one of no_data, empty, shape, nanpos, scalar, ok.

    Then blame's figures (None where the pair was not read through): ``sq_diff`` the sum of
    squared differences, ``npu_sq``/``bench_sq`` the sums of squares, ``npu_hash``/``bench_hash``
    each side's content hash.
    """

    cosine: Cell
    max_abs_err: Cell
    max_rel_err: Cell
    one_thousandth: Cell
    five_thousandth: Cell
    accuracy: str
    err_message: str
    status: str
    sq_diff: float | None = None
    npu_sq: float | None = None
    bench_sq: float | None = None
    npu_hash: int | None = None
    bench_hash: int | None = None


def _r12_text(x: object) -> float:
    """msprobe's ``format_value``: round to 12 digits after the decimal point via text."""
    return float(format(float(x), ".12f"))  # type: ignore[arg-type]


#: msprobe's ``format_value`` (:func:`_r12_text`); the C extension's gives the same double for
#: every input, mostly without making the text (~0.15 against ~0.7 us; up to five a tensor pair)
r12: Callable[[object], float] = (_r12_text if fused._fused is None  # type: ignore[attr-defined]
                                  else fused._fused.r12)  # type: ignore[attr-defined]


def accuracy(cosine: Cell, max_abs_err: Cell, *, compat: bool) -> str:
    """Accuracy Reached or Not from the final Cosine and MaxAbsErr cells (spec §4.3.7).

    With ``compat=False`` a ``"Nan"`` Cosine (zero-norm side, or overflow) gives ``No`` instead of
    falling through the float comparisons as NaN.
    """
    if cosine == SHAPE_UNMATCHED:
        return "Unmatched"
    if cosine == NONE_TEXT or max_abs_err == NONE_TEXT:
        return NONE_TEXT
    if cosine == NA_TEXT or max_abs_err == NA_TEXT:
        return "No"
    if not compat and cosine == NAN_TEXT:
        return "No"
    try:
        c, m = float(cosine), float(max_abs_err)
    except ValueError:
        return NONE_TEXT
    return _numeric_accuracy(c, m)


def _fixed(cells: tuple[Cell, Cell, Cell, Cell, Cell], message: str, status: str, *,
           compat: bool) -> MetricResult:  # fmt: skip
    cos, mae, mre, r1, r5 = cells
    return MetricResult(cos, mae, mre, r1, r5, accuracy(cos, mae, compat=compat), message, status)


def no_data(error_file: str | None = None, *, compat: bool = True) -> MetricResult:
    """The NO_DATA row: no tensor on one side (``error_file`` None) or a file not found."""
    msg = MSG_NO_BENCH if not error_file else f"Dump file: {error_file} not found."
    return MetricResult(*(NONE_TEXT,) * 5, NONE_TEXT, msg, "no_data")


def _empty(compat: bool) -> MetricResult:
    row = _fixed((UNSUPPORTED, 0.0, 0.0, 0.0, 0.0), MSG_EMPTY, "empty", compat=compat)
    return row._replace(sq_diff=0.0, npu_sq=0.0, bench_sq=0.0, npu_hash=0, bench_hash=0)


def _shape(compat: bool) -> MetricResult:
    return _fixed((SHAPE_UNMATCHED,) * 5, MSG_SHAPE, "shape", compat=compat)


def _nanpos(compat: bool) -> MetricResult:
    return _fixed((NA_TEXT,) * 5, MSG_NANPOS, "nanpos", compat=compat)


def classify(npu_shape: tuple[int, ...], bench_shape: tuple[int, ...]) -> str | None:
    """The status decided by shapes alone (empty, shape, scalar) or None (look at the data)."""
    if math.prod(npu_shape) == 0:
        return "empty"
    if tuple(npu_shape) != tuple(bench_shape):
        return "shape"
    if len(npu_shape) == 0:
        return "scalar"
    return None


# ----------------------------------------------------------------------------------- kernel


@dataclass
class Stats:
    """Running aggregates of one tensor pair (or of one element range of it)."""

    numel: int = 0
    dot_nb: float | None = None
    dot_nn: float | None = None
    dot_bb: float | None = None
    amax: float = -math.inf
    rmax: float = -math.inf
    rnan: bool = False
    c1: int = 0
    c5: int = 0
    nanpos: bool = False
    zeros_seen: bool = False  # a hint for the next chunk (bench had zeros), not a result
    sq_diff: float | None = None
    npu_hash: int = 0  # content hashes (msq.tensors.chash): sums, merged in any order
    bench_hash: int = 0

    def add_hashes(self, npu: int, bench: int) -> None:
        self.npu_hash = (self.npu_hash + npu) & chash.MASK
        self.bench_hash = (self.bench_hash + bench) & chash.MASK

    def add_sq_diff(self, sq: float) -> None:
        # from the first chunk's value, as the dots, so that one chunk equals np.dot exactly
        self.sq_diff = sq if self.sq_diff is None else self.sq_diff + sq

    def add_dots(self, nb: float, nn: float, bb: float) -> None:
        # start from the first chunk's value (not 0.0 + value) so one chunk equals np.dot exactly
        self.dot_nb = nb if self.dot_nb is None else self.dot_nb + nb
        self.dot_nn = nn if self.dot_nn is None else self.dot_nn + nn
        self.dot_bb = bb if self.dot_bb is None else self.dot_bb + bb

    def merge(self, other: Stats) -> None:
        """Fold in the stats of the next element range (ranges must be merged in order)."""
        self.numel += other.numel
        if other.dot_nb is not None:
            self.add_dots(other.dot_nb, other.dot_nn, other.dot_bb)  # type: ignore[arg-type]
        self.amax = max(self.amax, other.amax)
        self.rmax = max(self.rmax, other.rmax)
        self.rnan |= other.rnan
        self.c1 += other.c1
        self.c5 += other.c5
        self.nanpos |= other.nanpos
        if other.sq_diff is not None:
            self.add_sq_diff(other.sq_diff)
        self.add_hashes(other.npu_hash, other.bench_hash)


class _Work(threading.local):
    """Scratch buffers per thread, grown on demand and reused across chunks and tensors."""

    def __init__(self) -> None:
        self.bufs: dict[tuple[str, np.dtype], np.ndarray] = {}

    def get(self, name: str, dtype: npt.DTypeLike, k: int) -> np.ndarray:
        key = (name, np.dtype(dtype))
        buf = self.bufs.get(key)
        if buf is None or buf.shape[0] < k:
            buf = self.bufs[key] = np.empty(max(k, 1), dtype=dtype)
        return buf[:k]


_WORK = _Work()


def _is_float(dtype: np.dtype) -> bool:
    return dtype.type in _FLOAT_KINDS


def _chunk(
    nc: np.ndarray, bc: np.ndarray, st: Stats, compat: bool, rel64: bool = False, base: int = 0
) -> None:
    """Fold one chunk into ``st``. ``nc``/``bc`` are writable 1-D copies; they get mutated.
    ``base``: the flat index of the chunk's first element in its tensor (for the content hash).

    Call inside ``np.errstate(all="ignore")`` (division by zero, float16 overflow are expected).
    ``rel64``: the relative error in float64 whatever the dtype (ε64 shift on float64 copies),
    as the MindSpore kernel compare computes it; msprobe's real-data compare uses the bench
    tensor's own dtype when it is a float.

    The common case costs about 20 numpy passes over the chunk. Work that msprobe does on every
    element is skipped when a cheaper aggregate proves it a no-op: a finite sum of squares proves
    there is no inf/NaN to zero, a finite maximum relative error proves bench has no zero to
    shift, and for float32 pairs the largest absolute difference is found from the float32
    differences already computed for the relative error (rounding is monotonic, so only elements
    whose rounded difference ties the chunk's maximum need the exact float64 difference).
    """
    k = nc.shape[0]
    # the hashes first: the shift and the inf/NaN zeroing below modify the chunk
    st.add_hashes(chash.hash_values(nc, base), chash.hash_values(bc, base))
    bench_float = _is_float(bc.dtype) and not rel64
    early = False
    if compat and bench_float and st.zeros_seen:
        # bench had zeros before: shift before widening, so n64/b64 and their dots are made once
        # (inf/NaN positions zeroed below are still shifted later, as msprobe orders it)
        zero = _WORK.get("mask", np.bool_, k)
        np.equal(bc, 0, out=zero)
        if zero.any():
            _shift(nc, bc, zero, np.finfo(bc.dtype).eps)
            early = True
    n64 = _WORK.get("n64", np.float64, k)
    b64 = _WORK.get("b64", np.float64, k)
    np.copyto(n64, nc, casting="unsafe")
    np.copyto(b64, bc, casting="unsafe")
    nn, bb = np.dot(n64, n64), np.dot(b64, b64)
    if not (math.isfinite(nn) and math.isfinite(bb)):
        # inf/NaN somewhere (or float64 overflow): the exact mask check of msprobe
        if _zero_inf_nan(nc, bc):
            st.nanpos = True
            return
        np.copyto(n64, nc, casting="unsafe")
        np.copyto(b64, bc, casting="unsafe")
        nn, bb = np.dot(n64, n64), np.dot(b64, b64)
    diff32: tuple[np.ndarray, float] | None = None
    if bench_float:
        zeros_first = st.zeros_seen and not compat
        rel, rmax, shifted, diff32 = _rel_native(nc, bc, n64, b64, compat, zeros_first)
        if shifted and compat:  # the ε shift reached n64/b64, so their dots are stale
            nn, bb = np.dot(n64, n64), np.dot(b64, b64)
        st.zeros_seen |= shifted or early
    else:
        rel = _rel_f64(n64, b64)
        rmax = rel.max()
    st.add_dots(np.dot(n64, b64), nn, bb)
    st.numel += k
    _fold_rel(rel, rmax, st)
    diff = _WORK.get("diff", np.float64, k)
    np.subtract(n64, b64, out=diff)
    st.add_sq_diff(np.dot(diff, diff))
    if diff32 is None:
        st.amax = max(st.amax, float(diff.max()), -float(diff.min()))
        return
    d32, m32 = diff32
    if m32 < np.float32(st.amax):  # no element can beat the running maximum
        return
    idx = np.flatnonzero(np.abs(d32) == m32)
    st.amax = max(st.amax, float(np.abs(n64[idx] - b64[idx]).max()))


def _zero_inf_nan(nc: np.ndarray, bc: np.ndarray) -> bool:
    """Zero inf/NaN positions in both chunks; True when their positions differ (NANPOS)."""
    n_inf, b_inf, n_nan, b_nan = np.isinf(nc), np.isinf(bc), np.isnan(nc), np.isnan(bc)
    if not (np.array_equal(n_inf, b_inf) and np.array_equal(n_nan, b_nan)):
        return True
    for mask in (n_inf, n_nan):
        nc[mask] = 0
        bc[mask] = 0
    return False


def _rel_native(
    nc: np.ndarray,
    bc: np.ndarray,
    n64: np.ndarray,
    b64: np.ndarray,
    compat: bool,
    zeros_first: bool = False,
) -> tuple[np.ndarray, np.floating, bool, tuple[np.ndarray, float] | None]:
    """|(n-b)/b| in the tensors' own dtype after the ε shift where bench is 0 (bench is float).

    The shift is applied in place to ``nc``/``bc`` as msprobe does; with ``compat`` it is also
    mirrored into the float64 copies. Returns the relative error and its maximum, whether a
    shift happened, and for float32 pairs the float32 differences with their largest magnitude.
    Bench zeros are looked for only when the relative error is not finite (x/0), or up front
    with ``zeros_first`` (earlier chunks had zeros, so the optimistic pass would be wasted).
    """
    k = nc.shape[0]
    rdt = np.result_type(nc, bc)
    same32 = nc.dtype == bc.dtype == np.float32
    rel = _WORK.get("rel", rdt, k)
    diff = _WORK.get("d32", rdt, k) if same32 else rel
    # ``diff`` must hold the differences of the values n64/b64 hold (for MaxAbsErr): with compat
    # the shift is mirrored into n64/b64; without, n64/b64 stay unshifted, so diff is taken before
    # any shift and the shifted difference goes straight into ``rel``.
    np.subtract(nc, bc, out=diff)
    shifted = zeros_first and _shift_zeros(nc, bc, n64, b64, compat)
    if shifted:
        np.subtract(nc, bc, out=rel)
        np.divide(rel, bc, out=rel)
    else:
        np.divide(diff, bc, out=rel)
    np.abs(rel, out=rel)
    rmax = rel.max()
    if not math.isfinite(rmax) and _shift_zeros(nc, bc, n64, b64, compat):
        shifted = True  # x/0 was inf or NaN: bench had zeros
        np.subtract(nc, bc, out=rel)
        if compat and same32:
            np.copyto(diff, rel)
        np.divide(rel, bc, out=rel)
        np.abs(rel, out=rel)
        rmax = rel.max()
    if not same32:
        return rel, rmax, shifted, None
    return rel, rmax, shifted, (diff, max(float(diff.max()), -float(diff.min())))


def _shift_zeros(
    nc: np.ndarray, bc: np.ndarray, n64: np.ndarray, b64: np.ndarray, compat: bool
) -> bool:
    """Shift where bench is 0 (mirrored into n64/b64 with ``compat``); False if there is none."""
    zero = _WORK.get("mask", np.bool_, nc.shape[0])
    np.equal(bc, 0, out=zero)
    if not zero.any():
        return False
    _shift(nc, bc, zero, np.finfo(bc.dtype).eps)
    if compat:  # masked copies are slower than full ones here
        np.copyto(n64, nc, casting="unsafe")
        np.copyto(b64, bc, casting="unsafe")
    return True


def _shift(n: np.ndarray, b: np.ndarray, zero: np.ndarray, eps: np.floating) -> None:
    """msprobe's ``b[zero] += eps; n[zero] += eps``, as plain arithmetic (masked numpy
    operations cost 10x a full pass).

    Adding ``eps * zero`` changes exactly the masked elements: elsewhere it adds 0.0, which leaves
    every value as it was except that it turns -0.0 into +0.0 in ``n`` (never observable in any
    metric: they all go through |x| or sums that start from +0.0). ``eps`` is a numpy scalar of
    the bench dtype, so ``n + eps`` promotes as in msprobe, and the unsafe cast back into ``n``'s
    dtype is what fancy-index assignment does (int npu data truncates, as there).
    """
    step = _WORK.get("step", eps.dtype, zero.shape[0])
    np.copyto(step, zero.view(np.uint8))  # 0/1; converting from uint8 is 3x faster than from bool
    np.multiply(step, eps, out=step)
    np.add(b, step, out=b, casting="unsafe")
    np.add(n, step, out=n, casting="unsafe")


def _rel_f64(n64: np.ndarray, b64: np.ndarray) -> np.ndarray:
    """Relative error when bench is not float: float64 copies, ε64 shift on the copies only."""
    k = n64.shape[0]
    zero = _WORK.get("mask", np.bool_, k)
    np.equal(b64, 0, out=zero)
    rel = _WORK.get("rel", np.float64, k)
    if zero.any():
        ns, bs = n64.copy(), b64.copy()
        _shift(ns, bs, zero, np.float64(_EPS64))
        np.subtract(ns, bs, out=rel)
        np.divide(rel, bs, out=rel)
    else:
        np.subtract(n64, b64, out=rel)
        np.divide(rel, b64, out=rel)
    np.abs(rel, out=rel)
    return rel


def _fold_rel(rel: np.ndarray, m: np.floating, st: Stats) -> None:
    if math.isnan(m):
        st.rnan = True
    else:
        st.rmax = max(st.rmax, float(m))
    mask = _WORK.get("mask", np.bool_, rel.shape[0])
    st.c1 += int(np.count_nonzero(np.less(rel, 0.001, out=mask)))
    st.c5 += int(np.count_nonzero(np.less(rel, 0.005, out=mask)))


def finish(st: Stats, *, compat: bool) -> MetricResult:
    """Turn the aggregates of a whole (>= 1-d, same-shape, non-empty) pair into the row."""
    if st.nanpos:
        return _nanpos(compat)
    return _row_of(
        st.numel, st.dot_nb, st.dot_nn, st.dot_bb, st.amax,  # type: ignore[arg-type]
        math.nan if st.rnan else st.rmax, st.c1, st.c5, compat,
        (_py(st.sq_diff), _py(st.dot_nn), _py(st.dot_bb), st.npu_hash, st.bench_hash),
    )  # fmt: skip


def _py(x: float | None) -> float | None:
    """A Python float (exact) for a numpy scalar: rows go back to the parent pickled, and a
    numpy float64 pickles ~20x slower than a float (62 against 3.5 ms for tensor_small's rows)."""
    return None if x is None else float(x)


def _row_of(
    numel: int, nb: float, nn: float, bb: float, amax: float, rmax: float, c1: int, c5: int,
    compat: bool, blame: tuple = (),
) -> MetricResult:  # fmt: skip
    """The row of a pair from its aggregates (``rmax`` NaN: the relative error had a NaN);
    ``blame``: its last fields (``sq_diff, npu_sq, bench_sq, npu_hash, bench_hash``)."""
    cos, cos_msg = _cosine(numel, float(nb), float(nn), float(bb))
    mae = r12(amax)
    if math.isnan(rmax):
        mre: Cell = NAN_TEXT
        rel_msg = MSG_MAXREL_NAN
    else:
        mre, rel_msg = r12(rmax), ""
    # Python int / int is the correctly rounded quotient, as msprobe's int64 / int is; a ratio
    # of 0 or 1 is its own rounding (most pairs: every element, or none, within the threshold)
    acc = (_numeric_accuracy(cos, mae) if type(cos) is float  # no text cell: no text to match
           else accuracy(cos, mae, compat=compat))
    return MetricResult(
        cos, mae, mre, _ratio(c1, numel), _ratio(c5, numel), acc, cos_msg + rel_msg, "ok", *blame,
    )  # fmt: skip


def _numeric_accuracy(c: float, m: float) -> str:
    """:func:`accuracy` of a float Cosine and a float MaxAbsErr (its last two tests)."""
    if c < 0.99 and m > 0.001:
        return "No"
    if c < 0.9 or m > 1:
        return "No"
    return "Yes"


def _ratio(count: int, numel: int) -> float:
    """``r12(count / numel)``."""
    if count == numel:
        return 1.0
    if count == 0:
        return 0.0
    return r12(count / numel)


def _cosine(numel: int, nb: float, nn: float, bb: float) -> tuple[Cell, str]:
    # Python floats give the IEEE results numpy gives (sqrt, *, /), without errstate overhead;
    # a*b > 0 here, and overflow yields inf/nan as in numpy.
    if numel == 1:
        return UNSUPPORTED, MSG_LEN1
    a, b = math.sqrt(nn), math.sqrt(bb)
    if a <= _EPS64 and b <= _EPS64:
        return 1.0, ""
    if a <= _EPS64:
        return NAN_TEXT, MSG_COS_ZERO_NPU
    if b <= _EPS64:
        return NAN_TEXT, MSG_COS_ZERO_BENCH
    c = nb / (a * b)
    if math.isnan(c):
        return NAN_TEXT, MSG_COS_NAN
    r = r12(c)
    if r > 0.9999:
        r = round(r, 6)
    return (1.0 if r > 0.99999 else r), ""


def compare_many(pairs: list[tuple[np.ndarray, np.ndarray]], *, compat: bool) -> list[MetricResult]:
    """Metrics of many small same-shape, non-empty, >= 1-d pairs, vectorised across the pairs.

    Per-call numpy overhead dominates small tensors, so pairs with the same dtypes are
    concatenated and every elementwise step runs once for the whole group; maxima and counts are
    per-pair ``reduceat``s and the dot products per-pair ``np.dot`` calls, so every result is the
    one :func:`compare_arrays` (and msprobe) gives. Keep the total size of ``pairs`` moderate
    (the caller batches): the group buffers are its size.

    Args:
        pairs: (npu, bench) arrays, flattened or not, of equal shapes.
        compat: msprobe 1.1.0 behaviour or msq's default.

    Returns:
        One :class:`MetricResult` per pair, in order.
    """
    out: list[MetricResult | None] = [None] * len(pairs)
    groups: dict[tuple[np.dtype, np.dtype], list[int]] = {}
    for i, (n, b) in enumerate(pairs):
        groups.setdefault((n.dtype, b.dtype), []).append(i)
    for idx in groups.values():
        for i, res in zip(idx, _group(pairs, idx, compat)):
            out[i] = res
    return out  # type: ignore[return-value]


def _group(
    pairs: list[tuple[np.ndarray, np.ndarray]], idx: list[int], compat: bool
) -> list[MetricResult]:
    ns = [_flat(pairs[i][0]) for i in idx]
    bs = [_flat(pairs[i][1]) for i in idx]
    N, B = np.concatenate(ns), np.concatenate(bs)
    sizes = [x.shape[0] for x in ns]
    starts = np.zeros(len(sizes), dtype=np.intp)
    np.cumsum(sizes[:-1], out=starts[1:])
    fast = _group_fused(N, B, starts, sizes, compat)
    if fast is not False:
        if fast is None:  # an inf or NaN: msprobe's exact per-pair path for the pairs holding one
            return _split_nonfinite(pairs, idx, N, B, starts, compat)
        return fast
    if _has_inf_nan(N) or _has_inf_nan(B):  # rare: take the exact per-pair path
        return [compare_arrays(n, b, compat=compat) for n, b in zip(ns, bs)]
    # the hashes before the shift below modifies N and B
    hashes = [(chash.hash_values(N[s : s + k]), chash.hash_values(B[s : s + k]))
              for s, k in zip(starts.tolist(), sizes)]
    bench_float = _is_float(B.dtype)
    zero = B == 0
    shift = bool(zero.any())
    N64, B64 = N.astype(np.float64), B.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if bench_float:
            if shift:
                _shift(N, B, zero, np.finfo(B.dtype).eps)
                if compat:  # the in-place shift reaches Cosine and MaxAbsErr
                    N64, B64 = N.astype(np.float64), B.astype(np.float64)
            rel = np.subtract(N, B)
            np.divide(rel, B, out=rel)
        else:
            ns64, bs64 = N64, B64
            if shift:
                ns64, bs64 = N64.copy(), B64.copy()
                _shift(ns64, bs64, zero, np.float64(_EPS64))
            rel = np.subtract(ns64, bs64)
            np.divide(rel, bs64, out=rel)
    np.abs(rel, out=rel)
    rmax = np.maximum.reduceat(rel, starts).tolist()
    c1 = np.add.reduceat(rel < 0.001, starts, dtype=np.int64).tolist()
    c5 = np.add.reduceat(rel < 0.005, starts, dtype=np.int64).tolist()
    diff = np.subtract(N64, B64)
    sq = _squares(diff, starts, sizes)
    np.abs(diff, out=diff)
    amax = np.maximum.reduceat(diff, starts).tolist()
    return _pair_rows(N64, B64, starts, sizes, sq,
                      [(a, r, x, y, hn, hb) for a, r, x, y, (hn, hb)
                       in zip(amax, rmax, c1, c5, hashes)], compat)


def _split_nonfinite(pairs: list[tuple[np.ndarray, np.ndarray]], idx: list[int],
                     N: np.ndarray, B: np.ndarray, starts: np.ndarray,
                     compat: bool) -> list[MetricResult]:  # fmt: skip
    """The rows of a group some of whose pairs hold an inf or NaN: those pairs by msprobe's exact
    per-pair path, the others as a group of their own (a pair's row depends on its own elements
    only: its maxima, counts and dot products are its own slice's). tensor_small: two groups of
    ~380 pairs, 52 of them with an inf or NaN, all ~770 went the per-pair way (~50 against
    ~8 us a pair)."""
    finite = (np.logical_and.reduceat(np.isfinite(N), starts)
              & np.logical_and.reduceat(np.isfinite(B), starts)).tolist()
    rest = [i for i, ok in zip(idx, finite) if ok]
    if not rest or len(rest) == len(idx):  # nothing to split off: as before
        return [compare_arrays(_flat(pairs[i][0]), _flat(pairs[i][1]), compat=compat)
                for i in idx]
    grouped = iter(_group(pairs, rest, compat))
    return [next(grouped) if ok else
            compare_arrays(_flat(pairs[i][0]), _flat(pairs[i][1]), compat=compat)
            for i, ok in zip(idx, finite)]


def _flat(x: np.ndarray) -> np.ndarray:
    return x if x.ndim == 1 else x.reshape(-1)


def _group_fused(N: np.ndarray, B: np.ndarray, starts: np.ndarray, sizes: list[int],
                 compat: bool) -> list[MetricResult] | None | Literal[False]:  # fmt: skip
    """:func:`_group` with the C kernel's element-wise aggregates (maxima, counts, hashes: the
    values numpy gives, see _fused.c) for float32/float32 and float16/float16 groups; the dot
    products stay the per-pair ``np.dot`` calls, so every cell is the numpy path's.

    Returns the rows; None when the group holds an inf or NaN; False when the C kernel does not
    cover it (other dtypes, not built).
    """
    offsets = np.empty(len(sizes) + 1, dtype=np.int64)
    offsets[:-1] = starts
    offsets[-1] = N.shape[0]
    got = fused.segments(N, B, offsets, compat)
    if got is None or got is False:
        return got
    if compat:  # msprobe's in-place shift reaches Cosine and MaxAbsErr (the C kernel's ns, bs)
        zero = B == 0
        if zero.any():
            N, B = N.copy(), B.copy()
            with np.errstate(over="ignore"):
                _shift(N, B, zero, np.finfo(B.dtype).eps)
    # scratch buffers reused from group to group: fresh 2 MB arrays each time cost ~2 page
    # faults a pair on tensor_small (glibc maps and unmaps blocks that large)
    k_all = N.shape[0]
    N64, B64 = _WORK.get("n64", np.float64, k_all), _WORK.get("b64", np.float64, k_all)
    diff = _WORK.get("diff", np.float64, k_all)
    np.copyto(N64, N)
    np.copyto(B64, B)
    np.subtract(N64, B64, out=diff)
    dots = fused.segment_dots(N64, B64, diff, offsets)
    if dots is None:
        return _pair_rows(N64, B64, starts, sizes, _squares(diff, starts, sizes), got, compat)
    # the same np.dot values, from one C call (fused.segment_dots): as _pair_rows makes them
    return [_row_of(k, nb, nn, bb, amax, rmax, c1, c5, compat, (sq, nn, bb, hn, hb))
            for k, (nb, nn, bb, sq), (amax, rmax, c1, c5, hn, hb) in zip(sizes, dots, got)]


def _squares(diff: np.ndarray, starts: np.ndarray, sizes: list[int]) -> list[float]:
    """Each pair's sum of squared differences (numpy's per-pair dot product of its slice)."""
    return [np.dot(diff[s : s + k], diff[s : s + k]) for s, k in zip(starts.tolist(), sizes)]


def _pair_rows(N64: np.ndarray, B64: np.ndarray, starts: np.ndarray, sizes: list[int],
               sq: list[float], aggregates: list[tuple], compat: bool) -> list[MetricResult]:
    """Each pair's row of a group (:func:`_group`, :func:`_group_fused`) from its slices of the
    float64 copies (numpy's per-pair dot products, so the cells are the exact path's), its sum of
    squared differences and its element-wise aggregates ``(max_abs, max_rel, c1, c5, npu_hash,
    bench_hash)``."""
    dot = np.dot
    rows = []
    for (s, k), sq_j, (amax, rmax, c1, c5, hn, hb) in zip(zip(starts.tolist(), sizes), sq,
                                                          aggregates):
        n64, b64 = N64[s : s + k], B64[s : s + k]
        nn, bb = float(dot(n64, n64)), float(dot(b64, b64))  # as _py: Python floats pickle fast
        rows.append(_row_of(k, dot(n64, b64), nn, bb, amax, rmax, c1, c5, compat,
                            (float(sq_j), nn, bb, hn, hb)))
    return rows


def _has_inf_nan(x: np.ndarray) -> bool:
    if not _is_float(x.dtype):
        return False
    # one BLAS pass: a finite sum of squares proves the data finite; an infinite or NaN one (data
    # with inf/NaN, or merely huge values) is confirmed with the exact elementwise test
    s = (
        np.dot(x, x)
        if x.dtype != np.float16
        else np.dot(x.astype(np.float32), x.astype(np.float32))
    )
    return not math.isfinite(s) and not bool(np.isfinite(x).all())


def _scalar(n: np.ndarray, b: np.ndarray, compat: bool) -> MetricResult:
    """0-d pair: msprobe skips the inf/NaN step, keeps native dtypes, reports ratios as Nan."""
    n, b = np.array(n), np.array(b)  # writable 0-d copies
    n0, b0 = n.copy(), b.copy()
    hashes = chash.hash_values(n0.reshape(1)), chash.hash_values(b0.reshape(1))
    blame: dict[str, float | None] = {"sq_diff": None, "npu_sq": None, "bench_sq": None}
    if n0.dtype.kind in "biuf" and b0.dtype.kind in "biuf":
        with np.errstate(all="ignore"):
            n1, b1 = float(n0.astype(np.float64)), float(b0.astype(np.float64))
            blame = {"sq_diff": (n1 - b1) ** 2, "npu_sq": n1 * n1, "bench_sq": b1 * b1}
    with np.errstate(all="ignore"):
        if _is_float(b.dtype):
            rn, rb = n, b
        else:
            rn, rb = n.astype(np.float64), b.astype(np.float64)
        zero = rb == 0
        eps = np.finfo(rb.dtype).eps
        rb[zero] += eps
        rn[zero] += eps
        rel = np.abs(np.divide(rn - rb, rb))
        if not compat:
            n, b = n0, b0
        if n.dtype == np.bool_:
            n, b = n.astype(np.float64), b.astype(np.float64)
        mae = r12(np.max(np.abs(n - b)))
        m = np.max(rel)
    if math.isnan(m):
        mre: Cell = NAN_TEXT
        msg = MSG_SCALAR_0D + MSG_MAXREL_NAN
    else:
        mre, msg = r12(m), MSG_SCALAR_0D
    return MetricResult(
        UNSUPPORTED, mae, mre, NAN_TEXT, NAN_TEXT,
        accuracy(UNSUPPORTED, mae, compat=compat), msg, "scalar",
        npu_hash=hashes[0], bench_hash=hashes[1], **blame,
    )  # fmt: skip


# ------------------------------------------------------------------------------------ entry


def _flat_chunks(
    arr: np.ndarray, chunk: int, start: int, stop: int
) -> Iterator[tuple[int, np.ndarray]]:
    flat = arr.reshape(-1)
    for s in range(start, stop, chunk):
        yield s, np.array(flat[s : min(stop, s + chunk)])  # writable copy


def array_stats(
    npu: np.ndarray, bench: np.ndarray, *, compat: bool, chunk: int = DEFAULT_CHUNK,
    rel64: bool = False,
) -> Stats:  # fmt: skip
    """Aggregates of a whole in-memory pair (same shape, >= 1-d, non-empty), chunk after chunk
    (no ranges: the dot products are summed in chunk order). ``rel64``: see :func:`_chunk`."""
    st = Stats()
    with np.errstate(all="ignore"):
        for (base, nc), (_, bc) in zip(_flat_chunks(npu, chunk, 0, npu.size),
                                       _flat_chunks(bench, chunk, 0, bench.size)):
            _chunk(nc, bc, st, compat, rel64, base)
            if st.nanpos:
                break
    return st


def compare_arrays(
    npu: np.ndarray, bench: np.ndarray, *, compat: bool, chunk: int = DEFAULT_CHUNK
) -> MetricResult:
    """All metrics of one pair of in-memory arrays (bfloat16 already widened to float32).

    Args:
        npu: the NPU tensor.
        bench: the bench tensor.
        compat: reproduce msprobe 1.1.0 exactly (True) or msq's corrected behaviour (False).
        chunk: elements per chunk; tensors up to this size match msprobe bit for bit.

    Returns:
        The :class:`MetricResult` of the row (without the fuzzy-match suffix).
    """
    npu, bench = np.asarray(npu), np.asarray(bench)
    status = classify(npu.shape, bench.shape)
    if status == "empty":
        return _empty(compat)
    if status == "shape":
        return _shape(compat)
    if status == "scalar":
        return _scalar(npu, bench, compat)
    total = Stats()
    with np.errstate(all="ignore"):
        for start in range(0, npu.size, range_size(chunk)):
            stop = min(npu.size, start + range_size(chunk))
            st = Stats()
            for (base, nc), (_, bc) in zip(
                _flat_chunks(npu, chunk, start, stop), _flat_chunks(bench, chunk, start, stop)
            ):
                _chunk(nc, bc, st, compat, base=base)
                if st.nanpos:
                    break
            total.merge(st)
            if total.nanpos:
                break
    return finish(total, compat=compat)


def range_size(chunk: int) -> int:
    """Elements per range for a chunk size: DEFAULT_RANGE rounded down to whole chunks."""
    return max(chunk, DEFAULT_RANGE // chunk * chunk)


def precheck(npu: TensorMeta, bench: TensorMeta, *, compat: bool) -> MetricResult | None:
    """The row when shapes alone decide it (empty, shape mismatch, 0-d), else None."""
    status = classify(npu.shape, bench.shape)
    if status == "empty":
        return _empty(compat)
    if status == "shape":
        return _shape(compat)
    if status == "scalar":
        return _scalar(to_array(npu), to_array(bench), compat)
    return None


def range_stats(
    npu: TensorMeta,
    bench: TensorMeta,
    start: int,
    stop: int,
    *,
    compat: bool,
    chunk: int = DEFAULT_CHUNK,
    rel64: bool = False,
) -> Stats:
    """Aggregates over the flat elements ``[start, stop)`` of a pair that passed :func:`precheck`.

    Pairs larger than one chunk go through the one-pass C kernel where it covers them
    (:mod:`msq.tensors.fused`); pairs up to one chunk keep the numpy kernel's exact BLAS dots.
    ``rel64``: see :func:`_chunk` (the C kernel works in the tensors' own dtype: not used then).
    """
    p = fused.plan(npu, bench) if npu.numel > chunk and not rel64 else None
    if p is not None:
        return _fused_range(npu, bench, start, stop, p, compat, chunk)
    st = Stats()
    n_reader, b_reader = ChunkReader(npu, chunk), ChunkReader(bench, chunk)
    with np.errstate(all="ignore"):  # once per range: errstate costs more than a small chunk
        base = start
        for nc, bc in zip(n_reader.chunks(start, stop), b_reader.chunks(start, stop)):
            _chunk(nc, bc, st, compat, rel64, base)
            if st.nanpos:
                break
            base += nc.shape[0]
    return st


def _fused_range(
    npu: TensorMeta, bench: TensorMeta, start: int, stop: int, p: fused.Plan, compat: bool,
    chunk: int,
) -> Stats:  # fmt: skip
    """:func:`range_stats` by the C kernel, one call per chunk (dots merged in chunk order, as
    the numpy kernel merges them); a chunk holding an inf or NaN is redone by the numpy kernel."""
    st = Stats()
    n_raw, b_raw = fused.raw_range(npu, start, stop), fused.raw_range(bench, start, stop)
    for s in range(0, stop - start, chunk):
        nr, br = n_raw[s : s + chunk], b_raw[s : s + chunk]
        got = fused.stats(nr, br, p, compat, start + s)
        if got is None:
            with np.errstate(all="ignore"):
                _chunk(fused.values(nr, p.npu_kind), fused.values(br, p.bench_kind), st, compat,
                       base=start + s)
            if st.nanpos:
                break
            continue
        nb, nn, bb, amax, rmax, rnan, c1, c5, _, sq, hn, hb = got
        st.add_dots(nb, nn, bb)
        st.add_sq_diff(sq)
        st.add_hashes(hn, hb)
        st.numel += nr.shape[0]
        st.amax = max(st.amax, amax)
        st.rmax = max(st.rmax, rmax)
        st.rnan |= bool(rnan)
        st.c1 += c1
        st.c5 += c5
    return st


def compare_metas(
    npu: TensorMeta, bench: TensorMeta, *, compat: bool, chunk: int = DEFAULT_CHUNK
) -> MetricResult:
    """All metrics of one pair of tensor files, streamed chunk by chunk from disk."""
    fixed = precheck(npu, bench, compat=compat)
    if fixed is not None:
        return fixed
    total = Stats()
    step = range_size(chunk)
    for start in range(0, npu.numel, step):
        total.merge(
            range_stats(npu, bench, start, min(npu.numel, start + step), compat=compat, chunk=chunk)
        )
        if total.nanpos:
            break
    return finish(total, compat=compat)
