"""The one-pass C kernel (msq.tensors._fused) against the numpy kernel, and its pipeline glue.

The numpy kernel is the reference (it reproduces msprobe's numpy operations, and is checked
against msprobe's golden outputs in test_pool.py). The C kernel must give exactly the same maxima
and counts, dot products equal up to summation order, and the same bits from its AVX-512, its
AVX2 and its portable loop (on a CPU without AVX-512 the first two are the same loop).
"""

from __future__ import annotations

import errno
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch  # noqa: TID253  (tests write real .pt files)

from msq.errors import TensorFileError
from msq.tensors import fused
from msq.tensors.meta import TensorMeta
from msq.tensors.metrics import (
    DEFAULT_CHUNK,
    Stats,
    _chunk,
    compare_arrays,
    compare_many,
    compare_metas,
)
from msq.tensors.reader import inspect_tensor

KINDS = {"f32": fused.F32, "bf16": fused.BF16, "f16": fused.F16}


@pytest.fixture(autouse=True)
def _restore_loop() -> object:
    yield
    if fused.available():
        fused._fused.use_isa("avx512")


LOOPS = ("avx512", "avx2", "generic")


def test_kernel_is_built() -> None:
    # CI installs with a compiler: a missing extension would silently cost 10x in tensor mode
    assert fused.available(), "msq.tensors._fused was not built (pip install -e . compiles it)"
    assert fused.isa() in LOOPS


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
def test_loops_can_be_chosen_and_capped_by_the_cpu() -> None:
    best = fused.isa()
    fused._fused.use_isa("generic")
    assert fused.isa() == "generic"
    fused._fused.use_isa("avx2")
    assert fused.isa() == ("avx2" if best != "generic" else "generic")
    fused._fused.use_generic(False)
    assert fused.isa() == best
    with pytest.raises(ValueError, match="unknown loop"):
        fused._fused.use_isa("sse9")


def _raw(values: np.ndarray, kind: int) -> np.ndarray:
    """Storage as the readers hand it over: float32, float16, or uint16 bits for bfloat16."""
    if kind == fused.F32:
        return values.astype(np.float32)
    if kind == fused.F16:
        return values.astype(np.float16)
    bits = values.astype(np.float32).view(np.uint32) >> 16  # truncate to bfloat16
    return bits.astype(np.uint16)


def _numpy_stats(n_raw: np.ndarray, b_raw: np.ndarray, nk: int, bk: int, compat: bool) -> Stats:
    st = Stats()
    with np.errstate(all="ignore"):
        _chunk(fused.values(n_raw, nk), fused.values(b_raw, bk), st, compat)
    return st


def _plan(nk: int, bk: int) -> fused.Plan:
    rdt = np.float16 if bk == fused.F16 else np.float32
    return fused.Plan(nk, bk, float(np.finfo(rdt).eps), float(rdt(0.001)), float(rdt(0.005)))


def _every_loop(n_raw: np.ndarray, b_raw: np.ndarray, p: fused.Plan, compat: bool,
                base: int = 0) -> tuple | None:  # fmt: skip
    """The kernel's result, the same bits from every loop (None alike when one is None)."""
    got = []
    for loop in LOOPS:
        fused._fused.use_isa(loop)
        got.append(fused.stats(n_raw, b_raw, p, compat, base))
    fused._fused.use_isa("avx512")
    assert got[0] == got[1] == got[2], dict(zip(LOOPS, got))
    return got[0]


_both_loops = _every_loop


def _assert_same(got: tuple, st: Stats) -> None:
    nb, nn, bb, amax, rmax, rnan, c1, c5, _, sq, hn, hb = got
    assert (amax, rmax, bool(rnan), c1, c5) == (st.amax, st.rmax, st.rnan, st.c1, st.c5)
    # blame's content hashes are integers: the same whichever kernel; sums up to their order
    assert (hn, hb) == (st.npu_hash, st.bench_hash)
    for mine, ref in ((nb, st.dot_nb), (nn, st.dot_nn), (bb, st.dot_bb), (sq, st.sq_diff)):
        assert math.isclose(mine, ref, rel_tol=1e-12, abs_tol=1e-300)


def _pair(rng: np.random.Generator, k: int, scale: float, noise: float, zeros: float):
    b = rng.standard_normal(k) * scale
    b[rng.random(k) < zeros] = 0.0
    n = b + rng.standard_normal(k) * scale * noise
    n[rng.random(k) < zeros / 2] = 0.0
    return n, b


PAIRS = [("f32", "f32"), ("bf16", "bf16"), ("f16", "f16"), ("bf16", "f32"), ("f32", "bf16")]


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize(("nk", "bk"), PAIRS)
def test_matches_numpy_kernel(nk: str, bk: str, compat: bool) -> None:
    rng = np.random.default_rng(hash((nk, bk, compat)) % 2**32)
    p = _plan(KINDS[nk], KINDS[bk])
    top = 3.0 if "f16" in (nk, bk) else 30.0  # float16 overflows at 65504
    for trial in range(60):
        k = int(rng.integers(1, 3000)) if trial % 4 else int(rng.integers(1, 20))  # tails
        scale = 10 ** rng.uniform(-7, top)
        n, b = _pair(rng, k, scale, 10 ** rng.uniform(-6, 0.5), float(rng.uniform(0, 0.6)))
        n_raw, b_raw = _raw(n, KINDS[nk]), _raw(b, KINDS[bk])
        st = _numpy_stats(n_raw, b_raw, KINDS[nk], KINDS[bk], compat)
        if st.nanpos or not (np.isfinite(fused.values(n_raw, KINDS[nk])).all()):
            continue  # float16 overflow in the cast: the None case is tested below
        got = _both_loops(n_raw, b_raw, p, compat)
        assert got is not None
        _assert_same(got, st)


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
@pytest.mark.parametrize("compat", [True, False])
def test_float16_rounding_edges(compat: bool) -> None:
    """Differences that overflow float16, subnormals, ties: every rounding as numpy's float16."""
    edge = np.array(
        [65504, -65504, 65472, 6.1035e-05, 5.96e-08, 1e-7, 0.000977, 2049, 2050, 1.0, -1.0, 0.0],
        dtype=np.float16,
    )
    rng = np.random.default_rng(7)
    n = rng.choice(edge, 4001)
    b = rng.choice(edge, 4001)
    # every finite float16 pattern once, against a fixed partner
    every = np.arange(0, 1 << 16, dtype=np.uint16).view(np.float16)
    every = every[np.isfinite(every)]
    n = np.concatenate([n, every, np.full(every.shape, np.float16(0.5))])
    b = np.concatenate([b, np.full(every.shape, np.float16(0.25)), every])
    n_raw, b_raw = n, b
    st = _numpy_stats(n_raw, b_raw, fused.F16, fused.F16, compat)
    got = _both_loops(n_raw, b_raw, _plan(fused.F16, fused.F16), compat)
    _assert_same(got, st)
    assert st.rmax == math.inf  # the set does overflow the float16 relative error


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("side", ["npu", "bench"])
def test_inf_or_nan_is_reported_not_computed(bad: float, side: str) -> None:
    n = np.linspace(-1, 1, 33, dtype=np.float32)
    b = n.copy()
    (n if side == "npu" else b)[17] = bad
    assert _both_loops(n, b, _plan(fused.F32, fused.F32), True) is None


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize(("nk", "bk"), PAIRS)
def test_every_loop_gives_the_same_bits_at_every_length_and_offset(
    nk: str, bk: str, compat: bool
) -> None:
    """Lengths around the 8- and 16-element steps, hash offsets on and off the 16-word grid
    (4088: the first 8 words close a hash block), bench zeros, and an inf in the 16-wide body
    or in the tail: every loop returns the same tuple, or None."""
    rng = np.random.default_rng(sum(map(ord, nk + bk)) + compat)
    p = _plan(KINDS[nk], KINDS[bk])
    for k in [*range(1, 41), 255, 1000, 4099]:
        n, b = _pair(rng, k, 2.0, 1e-2, 0.3)
        n_raw, b_raw = _raw(n, KINDS[nk]), _raw(b, KINDS[bk])
        for base in (0, 8, 4088, 4096 * 5 + 8):
            got = _every_loop(n_raw, b_raw, p, compat, base)
            assert got is not None
        for at in {0, k // 2, k - 1}:
            bad_n = n_raw.copy()
            bad_n[at] = _raw(np.array([np.inf]), KINDS[nk])[0]
            assert _every_loop(bad_n, b_raw, p, compat) is None
            bad_b = b_raw.copy()
            bad_b[at] = _raw(np.array([np.nan]), KINDS[bk])[0]
            assert _every_loop(n_raw, bad_b, p, compat, 8) is None


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize(("nk", "bk"), PAIRS)
def test_signed_zeros_subnormals_and_extremes_give_the_same_bits(
    nk: str, bk: str, compat: bool
) -> None:
    """The AVX-512 loop's fused multiply-adds (exact: a float product fits a double), its masked
    epsilon shift (a -0 npu element stays -0 where the portable step makes it +0) and its
    magnitude maximum (vrangepd) against the portable loop, bit for bit: -0 and +0 on both sides
    against zero and non-zero partners, subnormals, the largest and smallest normals."""
    f = np.float16 if "f16" in (nk, bk) else np.float32
    info = np.finfo(f)
    tiny_sub = float(np.nextafter(f(0), f(1)))
    edge = np.array([-0.0, 0.0, tiny_sub, -tiny_sub, float(info.tiny), -float(info.tiny),
                     float(info.max), -float(info.max), 1.0, -1.0, 3.0e-3, -0.5])
    rng = np.random.default_rng(sum(map(ord, nk + bk)) + 2 * compat)
    p = _plan(KINDS[nk], KINDS[bk])
    for k in (16, 33, 1000, 4099):
        n, b = rng.choice(edge, k), rng.choice(edge, k)
        n[: min(k, 16)] = -0.0  # a whole 16-wide step of -0 against every partner
        n_raw, b_raw = _raw(n, KINDS[nk]), _raw(b, KINDS[bk])
        got = _every_loop(n_raw, b_raw, p, compat)
        if got is None:  # the largest values overflow the sums of squares only in float16
            continue
        st = _numpy_stats(n_raw, b_raw, KINDS[nk], KINDS[bk], compat)
        if not st.nanpos:
            _assert_same(got, st)


def _save(path: Path, values: np.ndarray, dtype: torch.dtype) -> TensorMeta:
    torch.save(torch.from_numpy(values).to(dtype), path)
    return inspect_tensor(str(path), None)


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_large_pt_files_give_the_numpy_kernels_cells(
    tmp_path: Path, dtype: torch.dtype, compat: bool
) -> None:
    """End to end through .pt files (mmap path), several chunks, zeros in bench, an inf at the
    same position on both sides in one chunk (that chunk falls back to numpy)."""
    rng = np.random.default_rng(3)
    k = 5 * DEFAULT_CHUNK + 1234  # > 1 MiB even in 2-byte dtypes: memory-mapped, not read whole
    n, b = _pair(rng, k, 2.0, 1e-3, 0.2)
    n, b = n.astype(np.float32), b.astype(np.float32)
    n[DEFAULT_CHUNK + 5] = b[DEFAULT_CHUNK + 5] = np.inf
    nm, bm = _save(tmp_path / "n.pt", n, dtype), _save(tmp_path / "b.pt", b, dtype)
    assert nm.data is None and fused.plan(nm, bm) is not None  # really the mmap + C path
    got = compare_metas(nm, bm, compat=compat)
    ref = compare_arrays(
        torch.from_numpy(n).to(dtype).float().numpy() if dtype == torch.bfloat16
        else torch.from_numpy(n).to(dtype).numpy(),
        torch.from_numpy(b).to(dtype).float().numpy() if dtype == torch.bfloat16
        else torch.from_numpy(b).to(dtype).numpy(),
        compat=compat,
    )  # fmt: skip
    assert got[1:8] == ref[1:8]
    assert math.isclose(got.cosine, ref.cosine, abs_tol=2e-12)
    # blame's figures: hashes exactly, sums of squares up to summation order
    assert (got.npu_hash, got.bench_hash) == (ref.npu_hash, ref.bench_hash)
    for name in ("sq_diff", "npu_sq", "bench_sq"):
        assert math.isclose(getattr(got, name), getattr(ref, name), rel_tol=1e-12)


def test_nanpos_in_a_later_chunk(tmp_path: Path) -> None:
    k = 2 * DEFAULT_CHUNK + 10
    n = np.ones(k, dtype=np.float32)
    b = n.copy()
    n[DEFAULT_CHUNK + 3] = np.nan
    nm, bm = _save(tmp_path / "n.pt", n, torch.float32), _save(tmp_path / "b.pt", b, torch.float32)
    assert compare_metas(nm, bm, compat=True).status == "nanpos"


def test_unsupported_layouts_take_the_numpy_kernel(tmp_path: Path) -> None:
    f64 = _save(tmp_path / "d.pt", np.ones(10, np.float64), torch.float64)
    f32 = _save(tmp_path / "f.pt", np.ones(10, np.float32), torch.float32)
    f16 = _save(tmp_path / "h.pt", np.ones(10, np.float32), torch.float16)
    torch.save(torch.ones(4, 6).t(), tmp_path / "t.pt")
    strided = inspect_tensor(str(tmp_path / "t.pt"), None)
    assert fused.plan(f64, f64) is None
    assert fused.plan(f16, f32) is None  # float16 against float32: numpy's promotion rules
    assert fused.plan(strided, strided) is None
    assert (fused.plan(f32, f32) is not None) == fused.available()


def test_truncated_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    meta = _save(tmp_path / "n.pt", np.ones(1 << 19, np.float32), torch.float32)
    size = os.path.getsize(meta.path)
    os.truncate(meta.path, size - 4096)
    with pytest.raises(TensorFileError, match="truncated"):
        fused.raw_range(meta, 0, meta.numel)


def test_msq_no_fused_forces_numpy() -> None:
    code = "from msq.tensors import fused; print(fused.isa())"
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "MSQ_NO_FUSED": "1"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "numpy"


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_small_groups_by_the_c_kernel_give_the_numpy_groups_rows(
    dtype: type, compat: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compare_many's groups take maxima, counts and hashes from the C kernel (segments) and
    keep numpy's dot products: every field of every row as the all-numpy group gives it, with
    bench zeros (the epsilon shift), all-zero sides, one-element pairs and float16 overflow."""
    rng = np.random.default_rng(11 + compat)
    pairs = []
    for k in [1, 2, 7, 8, 15, 16, 17, 33, 300, 4095, 4097, 9000]:
        n, b = _pair(rng, k, 3.0 if dtype == np.float16 else 50.0, 1e-2, 0.25)
        pairs.append((n.astype(dtype), b.astype(dtype)))
    pairs.append((np.zeros(20, dtype), np.zeros(20, dtype)))
    pairs.append((np.ones(20, dtype), np.zeros(20, dtype)))
    if dtype == np.float16:  # differences and quotients overflow float16
        pairs.append((np.array([60000, -60000, 1], dtype), np.array([-60000, 1e-3, 0], dtype)))
    got = compare_many([(n.copy(), b.copy()) for n, b in pairs], compat=compat)
    assert fused.segments(pairs[0][0], pairs[0][1], np.array([0, 1]), compat) not in (None, False)
    monkeypatch.setattr(fused, "_fused", None)  # the all-numpy group
    want = compare_many([(n.copy(), b.copy()) for n, b in pairs], compat=compat)
    assert got == want


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
def test_small_group_with_an_inf_takes_the_exact_per_pair_path() -> None:
    n = np.linspace(-1, 1, 40, dtype=np.float32)
    b = n.copy()
    n[3] = b[3] = np.inf  # same position: zeroed by msprobe's check, the row is computed
    assert fused.segments(n, b, np.array([0, 20, 40]), False) is None
    rows = compare_many([(n[:20].copy(), b[:20].copy()), (n[20:].copy(), b[20:].copy())],
                        compat=False)
    assert rows[0] == compare_arrays(n[:20].copy(), b[:20].copy(), compat=False)
    assert rows[1].status == "ok"


@pytest.mark.skipif(not hasattr(fused._fused, "read_small"), reason="C kernel not built, or not POSIX")
def test_small_files_are_read_in_one_call_as_os_open_and_os_read_would(tmp_path: Path) -> None:
    """``_fused.read_small`` (meta.open_tensor's common case): a small regular file whole, any
    other file as its open descriptor, the errors of os.open with the path."""
    read_small = fused._fused.read_small
    small = tmp_path / "small.pt"
    small.write_bytes(bytes(range(256)) * 40)
    assert read_small(str(small), True, 1 << 20) == small.read_bytes()
    fd = read_small(str(small), True, 100)  # larger than asked: the descriptor, open
    assert isinstance(fd, int) and os.fstat(fd).st_size == 10240
    os.close(fd)
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    assert read_small(str(empty), True, 1 << 20) == b""
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    fd = read_small(str(fifo), True, 1 << 20)  # not regular: the descriptor (O_NONBLOCK: no wait)
    assert isinstance(fd, int)
    os.close(fd)
    link = tmp_path / "link.pt"
    link.symlink_to(small)
    with pytest.raises(OSError) as refused:
        read_small(str(link), True, 1 << 20)
    assert refused.value.errno == errno.ELOOP
    assert refused.value.filename == str(link)
    assert read_small(str(link), False, 1 << 20) == small.read_bytes()
    with pytest.raises(FileNotFoundError) as missing:
        read_small(str(tmp_path / "absent.pt"), True, 1 << 20)
    assert missing.value.filename == str(tmp_path / "absent.pt")
    # a name in an open directory (openat: paths.directories_held): the same outcomes
    dirfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_small("small.pt", True, 1 << 20, dirfd) == small.read_bytes()
        fd = read_small("small.pt", True, 100, dirfd)
        assert isinstance(fd, int) and os.fstat(fd).st_size == 10240
        os.close(fd)
        with pytest.raises(OSError) as refused:
            read_small("link.pt", True, 1 << 20, dirfd)
        assert refused.value.errno == errno.ELOOP and refused.value.filename == "link.pt"
        with pytest.raises(FileNotFoundError):
            read_small("absent.pt", True, 1 << 20, dirfd)
    finally:
        os.close(dirfd)


def test_r12_in_c_is_the_text_rounding_bit_for_bit() -> None:
    """_fused.r12 (a fast path by IEEE division away from ties, else the very functions format()
    and float() use) against float(format(x, '.12f')), bit for bit: ties of the 12th decimal
    and their neighbours, zeros of both signs, subnormals, huge, inf, NaN, random bit patterns."""
    import math
    import random
    import struct

    from msq.tensors import _fused
    from msq.tensors.metrics import _r12_text

    rng = random.Random(12)
    values = [0.0, -0.0, 1.0, -1.0, 0.5e-12, -0.5e-12, 1.5e-12, 2.5e-12, 5e-324, -5e-324, 1e300,
              -1.7976931348623157e308, math.inf, -math.inf, math.nan, -math.nan, 1.0999511627776,
              0.9999999999995, 1 / 3]
    values += [rng.uniform(-1.2, 1.2) for _ in range(20000)]
    values += [rng.uniform(-1, 1) * 10.0 ** rng.randint(-20, 20) for _ in range(20000)]
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
               for _ in range(20000)]
    for _ in range(20000):  # (k + 0.5) * 1e-12 and two ulps either side
        tie = (rng.randint(-1_100_000_000_000, 1_100_000_000_000) + 0.5) / 1e12
        below = math.nextafter(math.nextafter(tie, -math.inf), -math.inf)
        values += [below, math.nextafter(below, math.inf), tie, math.nextafter(tie, math.inf),
                   math.nextafter(math.nextafter(tie, math.inf), math.inf)]
    values += [k / 1e12 for k in range(-20000, 20000)]
    bits = struct.Struct("<d").pack
    wrong = [v for v in values if bits(_fused.r12(v)) != bits(_r12_text(v))]
    assert wrong == []
    assert _fused.r12(np.float32(0.1)) == _r12_text(np.float32(0.1))


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
def test_segment_dots_are_numpys_dot_products_bit_for_bit() -> None:
    """fused.segment_dots (small pairs' four dot products in one C call through numpy's own BLAS
    ddot): each value the np.dot of the same slices, bit for bit, at many lengths, with signed
    zeros, subnormals, huge values and cancellations; found with this numpy (scipy-openblas)."""
    rng = np.random.default_rng(7)
    sizes = [*range(1, 40), 63, 64, 65, 255, 256, 257, 1000, 4096, 65536]
    k = sum(sizes)
    n = rng.standard_normal(k) * np.exp(rng.uniform(-30, 30, k))
    b = n * (1 + rng.standard_normal(k) * 1e-6)
    n[::17] = -0.0
    b[::13] = 5e-324
    n[5::101] = 1e300
    b[7::103] = -1e300
    d = n - b
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    got = fused.segment_dots(n, b, d, offsets)
    assert got is not None, "numpy's ddot was not found: small pairs call np.dot from Python"
    with np.errstate(over="ignore", invalid="ignore"):
        for (s, e), row in zip(zip(offsets[:-1].tolist(), offsets[1:].tolist()), got):
            x, y, z = n[s:e], b[s:e], d[s:e]
            want = np.array([np.dot(x, y), np.dot(x, x), np.dot(y, y), np.dot(z, z)])
            assert np.array(row).tobytes() == want.tobytes()
    # one and two elements, every sign of zero against every kind of value
    vals = [-0.0, 0.0, 5e-324, -5e-324, -1.0, 3.0, 1e300, -1e300]
    pairs = [(a, c) for a in vals for c in vals]
    x = np.array([v for a, c in pairs for v in (a, c, a)])
    y = np.array([v for a, c in pairs for v in (c, a, -c)])
    offsets = np.array([i for j in range(len(pairs)) for i in (3 * j, 3 * j + 1)]
                       + [3 * len(pairs)], dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        z = x - y
        got = fused.segment_dots(x, y, z, offsets)
        for (s, e), row in zip(zip(offsets[:-1].tolist(), offsets[1:].tolist()), got):
            p, q, r = x[s:e], y[s:e], z[s:e]
            want = np.array([np.dot(p, q), np.dot(p, p), np.dot(q, q), np.dot(r, r)])
            assert np.array(row).tobytes() == want.tobytes(), (p, q)
    with pytest.raises(ValueError):
        fused._fused.segment_dots(n, b, d, np.array([0, k + 1], dtype=np.int64))
    with pytest.raises(ValueError):
        fused._fused.segment_dots(n, b, d, np.array([3, 3], dtype=np.int64))


def test_ddots_check_sees_another_summation_order_and_needs_no_numpy_random() -> None:
    """The values fused._ddot_agrees checks numpy's ddot with (fused._mixed_values): a sum of
    their products in another order differs in its bits at most lengths it checks, so a ddot
    that is not numpy's is refused; they are computed without numpy.random, which each pool
    worker imported for this check alone (~10 ms of CPU)."""
    sizes = [*range(5, 70), 127, 128, 129, 1000, 4099]
    x = fused._mixed_values(sum(sizes), 1) * np.float64(1e3)
    y = fused._mixed_values(x.shape[0], 1 << 40)
    assert len(set(x.tolist())) == x.shape[0] and (x < 0).any() and (x > 0).any()
    start, differ = 0, 0
    for size in sizes:
        a, c = x[start:start + size], y[start:start + size]
        differ += np.dot(a, c).tobytes() != np.dot(a[::-1].copy(), c[::-1].copy()).tobytes()
        start += size
    assert differ > len(sizes) // 2
    code = ("import sys, numpy as np; from msq.tensors import fused; "
            "r = fused.segment_dots(*[np.ones(4) for _ in range(3)], np.array([0, 4])); "
            "print(r is not None or not fused.available(), 'numpy.random' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False"]


@pytest.mark.skipif(not fused.available(), reason="C kernel not built")
@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_group_with_some_inf_or_nan_pairs_gives_every_pairs_exact_row(dtype: type,
                                                                          compat: bool) -> None:
    """The pairs of a small group holding an inf or NaN take msprobe's per-pair path, the others
    stay a group (metrics._split_nonfinite): every row (pickled bytes) as compare_arrays gives
    it pair by pair, whatever is where (same positions, other positions, one side, bench zeros)."""
    import pickle

    rng = np.random.default_rng(3 + compat)
    pairs = []
    for j in range(60):
        n, b = _pair(rng, int(rng.integers(1, 400)), 3.0, 1e-2, 0.25)
        n, b = n.astype(dtype), b.astype(dtype)
        if j % 7 == 3:
            n[0] = b[0] = np.inf  # same position: zeroed by msprobe's check
        elif j % 7 == 5 and n.shape[0] > 2:
            n[1] = np.nan  # other positions: the position check fails
            b[2] = np.nan
        elif j % 11 == 0:
            b[-1] = -np.inf
        pairs.append((n, b))
    got = compare_many([(n.copy(), b.copy()) for n, b in pairs], compat=compat)
    want = [compare_arrays(n.copy(), b.copy(), compat=compat) for n, b in pairs]
    assert [pickle.dumps(r) for r in got] == [pickle.dumps(r) for r in want]
    assert sum(r.status == "ok" for r in got) > 40
