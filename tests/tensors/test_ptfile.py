"""The torch-free .pt reader agrees with torch.load and refuses anything but a plain tensor."""

from __future__ import annotations

import glob
import io
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch  # noqa: TID253  (tests write and cross-check real .pt files)

from msq.errors import TensorFileError
from msq.tensors import ptfile
from msq.tensors.meta import ChunkReader
from msq.tensors.ptfile import inspect_pt, load_pt
from msq.tensors.reader import inspect_tensor, load_tensor
from tests.conftest import GOLDEN


def expected(path: str | Path) -> np.ndarray:
    t = torch.load(path, weights_only=True, map_location="cpu").detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def save(tmp_path: Path, obj: object, name: str = "t.pt") -> str:
    path = tmp_path / name
    torch.save(obj, path)
    return str(path)


DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.complex64,
    torch.complex128,
    torch.uint16,
    torch.uint32,
    torch.uint64,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_matches_torch(tmp_path: Path, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(3)
    base = torch.randn(3, 5, generator=g, dtype=torch.float64) * 50
    if dtype.is_complex:
        t = torch.complex(base, -base).to(dtype)
    elif dtype == torch.bool:
        t = base > 0
    elif dtype.is_floating_point:
        t = base.to(dtype)
    else:
        t = base.abs().to(torch.int64).to(dtype)
    path = save(tmp_path, t)
    assert same(load_pt(path), expected(path))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.tensor(3.25),  # 0-d
        lambda: torch.tensor(7, dtype=torch.int64),
        lambda: torch.zeros(0),  # empty
        lambda: torch.zeros(3, 0, 2),
        lambda: torch.arange(12.0).reshape(3, 4).t(),  # transposed: non-contiguous strides
        lambda: torch.arange(40.0).reshape(5, 8)[1:4, 2:7],  # slice view: storage offset + strides
        lambda: torch.arange(20.0)[5:9],  # offset, contiguous
        lambda: torch.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
        lambda: torch.arange(10.0).bfloat16().reshape(2, 5).t(),
        lambda: torch.ones(4, requires_grad=True),
        lambda: torch.nn.Parameter(torch.arange(6.0)),
        lambda: torch.arange(6.0).expand(3, 6),  # zero stride
    ],
    ids=[
        "0d",
        "0d-int",
        "empty",
        "empty-3d",
        "transposed",
        "slice",
        "offset",
        "permute",
        "bf16-transposed",
        "requires-grad",
        "parameter",
        "expand",
    ],
)
def test_layouts_match_torch(tmp_path: Path, make) -> None:
    path = save(tmp_path, make())
    assert same(load_pt(path), expected(path))


def test_chunked_stream_of_strided_tensor(tmp_path: Path) -> None:
    t = torch.arange(7 * 11, dtype=torch.float32).reshape(7, 11).t()
    path = save(tmp_path, t)
    meta = inspect_pt(path)
    assert meta.strides is not None
    got = np.concatenate([c.copy() for c in ChunkReader(meta, 5).chunks()])
    assert same(got, expected(path).reshape(-1))


def test_large_file_is_memory_mapped_and_streams(tmp_path: Path) -> None:
    t = torch.arange(300_000, dtype=torch.float32) / 7  # 1.2 MB: above the read-whole-file size
    path = save(tmp_path, t)
    meta = inspect_pt(path)
    assert meta.data is None
    arr = load_pt(path)
    assert isinstance(arr, np.memmap) or isinstance(arr.base, np.memmap)
    assert same(np.asarray(arr), expected(path))
    chunks = [c.copy() for c in ChunkReader(meta, 65536).chunks(1000, 250_000)]
    assert same(np.concatenate(chunks), expected(path)[1000:250_000])


def test_big_endian_archive(tmp_path: Path) -> None:
    src = save(tmp_path, torch.arange(6, dtype=torch.float32) * 1.5, "le.pt")
    dst = tmp_path / "be.pt"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("/byteorder"):
                data = b"big"
            elif "/data/" in info.filename:
                data = np.frombuffer(data, "<f4").astype(">f4").tobytes()
            zout.writestr(info.filename, data)
    got = load_pt(str(dst))
    assert got.dtype == np.float32 and got.tolist() == [0.0, 1.5, 3.0, 4.5, 6.0, 7.5]


def golden_files(case: str) -> list[str]:
    return sorted(
        glob.glob(str(GOLDEN / case / "*" / "step0" / "rank" / "dump_tensor_data" / "*.pt"))
    )


@pytest.mark.golden
@pytest.mark.parametrize("case", ["mlp_tensor_L1", "tfm_tensor_L1"])
def test_every_golden_pt_matches_torch(case: str) -> None:
    files = golden_files(case)
    assert len(files) > 100
    for path in files:
        assert same(load_tensor(path), expected(path)), path


# ------------------------------------------------------------------------------ refusals


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _EvalEvil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (eval, (f"open({self.marker!r}, 'w').close()",))


def _archive(path: Path, payload: bytes, storage: bytes = b"") -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", storage)
        z.writestr("archive/version", "3\n")


@pytest.mark.parametrize("evil", [_Evil, _EvalEvil], ids=["os.system", "builtins.eval"])
def test_malicious_pickle_is_refused_and_never_runs(tmp_path: Path, evil: type) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    _archive(path, pickle.dumps(evil(str(marker)), protocol=2))
    with pytest.raises(TensorFileError, match="refused"):
        inspect_pt(str(path))
    assert not marker.exists()


def test_malicious_global_inside_a_tensor_pickle_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    # a real tensor pickle whose requires_grad slot is replaced by a reduce to os.system
    good = io.BytesIO()
    torch.save(torch.ones(2), good)
    with zipfile.ZipFile(good) as z:
        storage = z.read("archive/data/0")
    payload = (
        b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
        b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x02tQK\x00K\x02\x85K\x01\x85cos\nsystem\n"
        b"X" + len(f"touch {marker}").to_bytes(4, "little") + f"touch {marker}".encode() + b"\x85R"
        b"ccollections\nOrderedDict\n)RtR."
    )
    path = tmp_path / "evil2.pt"
    _archive(path, payload, storage)
    with pytest.raises(TensorFileError, match="os.system"):
        inspect_pt(str(path))
    assert not marker.exists()


def test_dict_instead_of_tensor_is_refused(tmp_path: Path) -> None:
    path = save(tmp_path, {"w": torch.ones(3)})
    with pytest.raises(TensorFileError, match="dict, expected a single tensor"):
        inspect_pt(path)


@pytest.mark.parametrize("obj", [[torch.ones(2)], 3.5, "text"], ids=["list", "float", "str"])
def test_non_tensor_objects_are_refused(tmp_path: Path, obj: object) -> None:
    path = save(tmp_path, obj)
    with pytest.raises(TensorFileError, match="expected a single tensor"):
        inspect_pt(path)


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95, 0.999])
def test_truncated_pt_is_a_clear_error(tmp_path: Path, keep: float) -> None:
    path = Path(save(tmp_path, torch.arange(1000, dtype=torch.float32)))
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(TensorFileError, match=r"truncated|corrupt"):
        load_pt(str(path))


def test_truncated_large_pt_is_a_clear_error(tmp_path: Path) -> None:
    path = Path(save(tmp_path, torch.arange(400_000, dtype=torch.float32)))
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)
    with pytest.raises(TensorFileError, match=r"truncated|corrupt"):
        load_pt(str(path))


def test_not_a_zip_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "x.pt"
    path.write_bytes(b"hello, not a tensor")
    with pytest.raises(TensorFileError, match="not a torch.save archive"):
        inspect_pt(str(path))


def test_unknown_torch_global_falls_back_to_weights_only_torch_load(tmp_path: Path) -> None:
    # legacy (non-zip) serialisation is not parsed by the fast path: torch's safe loader reads it
    path = tmp_path / "legacy.pt"
    torch.save(torch.arange(5.0), path, _use_new_zipfile_serialization=False)
    assert load_pt(str(path)).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_quantized_tensor_goes_to_torch_and_is_refused_cleanly(tmp_path: Path) -> None:
    q = torch.quantize_per_tensor(torch.arange(4.0), 0.5, 0, torch.quint8)
    path = save(tmp_path, q)
    with pytest.raises(TensorFileError, match="cannot be compared|refused"):
        load_pt(path)


def test_stub_cache_returns_same_layout_for_same_pickle(tmp_path: Path) -> None:
    a = save(tmp_path, torch.ones(4, 4), "a.pt")
    b = save(tmp_path, torch.zeros(4, 4), "b.pt")
    ma, mb = inspect_pt(a), inspect_pt(b)
    assert ma.shape == mb.shape == (4, 4)
    assert load_pt(a).sum() == 16 and load_pt(b).sum() == 0
    assert ptfile._STUB_CACHE  # shared parse of identical data.pkl bytes


def test_reader_does_not_import_torch(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = save(tmp_path, torch.arange(3.0))
    code = (
        "import sys; from msq.tensors.reader import load_tensor; "
        f"a = load_tensor({path!r}); assert a.tolist() == [0.0, 1.0, 2.0]; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_suffix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"")
    with pytest.raises(TensorFileError, match="unknown tensor file type"):
        inspect_tensor(str(path))


def test_layout_larger_than_its_storage_is_refused(tmp_path: Path) -> None:
    src = save(tmp_path, torch.arange(8, dtype=torch.float32), "full.pt")
    dst = tmp_path / "short.pt"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info.filename, data[:12] if info.filename.endswith("/data/0") else data)
    with pytest.raises(TensorFileError, match="needs 32 bytes of storage but only 12"):
        load_pt(str(dst))


def test_zip64_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # torch writes zip64 records for files above 4 GiB; shrink zipfile's limits to get them small
    src = save(tmp_path, torch.arange(300_000, dtype=torch.float32), "src.pt")
    for size in (300_000, 12):
        dst = tmp_path / f"z64_{size}.pt"
        with zipfile.ZipFile(src) as zin:
            members = [(i.filename, zin.read(i)) for i in zin.infolist()]
        monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 8)
        monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
            for name, data in members:
                zout.writestr(name, data[: size * 4] if name.endswith("/data/0") else data)
        monkeypatch.undo()
        with open(dst, "rb") as fh:
            assert b"PK\x06\x06" in fh.read()  # a zip64 end-of-directory record
        if size == 12:
            with pytest.raises(TensorFileError, match="truncated or corrupt"):
                load_pt(str(dst))
        else:
            assert same(load_pt(str(dst)), expected(src))


def _outcome(path: str, data: bytes) -> tuple:
    """What inspect_pt makes of the bytes: the layout, or the error's type and text."""
    try:
        m = inspect_pt(path, data)
    except Exception as exc:  # noqa: BLE001  (the outcome is compared, whatever it is)
        return (type(exc).__name__, str(exc))
    return (str(m.dtype), m.bf16, m.shape, m.strides, m.offset, m.data is data)


def test_c_zip_directory_reader_agrees_with_the_python_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C reading of a small archive's directory (_fused.pt_members) gives the Python reader's
    layout for real torch.save files, and for damaged copies (random bytes overwritten, cut
    short) the same layout or the same error: anything unusual goes back to the Python reader."""
    if ptfile._pt_members is None:
        pytest.skip("C extension not built")
    files = [
        save(tmp_path, torch.randn(3, 5), "a.pt"),
        save(tmp_path, torch.randn(7).to(torch.bfloat16), "b.pt"),
        save(tmp_path, torch.arange(6, dtype=torch.int64).reshape(2, 3).t(), "c.pt"),
        save(tmp_path, torch.tensor(2.5, dtype=torch.float16), "d.pt"),
        save(tmp_path, torch.nn.Parameter(torch.ones(4)), "e.pt"),
        save(tmp_path, torch.zeros(0, 3), "f.pt"),
    ]
    rng = np.random.default_rng(5)
    for path in files:
        data = Path(path).read_bytes()
        variants = [data] + [data[: int(rng.integers(1, len(data)))] for _ in range(15)]
        for _ in range(120):
            spoilt = bytearray(data)
            for at in rng.integers(0, len(data), int(rng.integers(1, 4))):
                spoilt[at] = int(rng.integers(0, 256))
            variants.append(bytes(spoilt))
        with_c = [_outcome(path, v) for v in variants]
        assert ptfile._pt_members(data) is not None  # a plain archive: really the C reading
        monkeypatch.setattr(ptfile, "_pt_members", None)
        assert [_outcome(path, v) for v in variants] == with_c
        monkeypatch.undo()
