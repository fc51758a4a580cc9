"""Tensor files that cost far more than their size (issue 17, item 5).

Decisions (docs/errors.md, "Tensor files"):

* a compressed zip member is refused before anything is inflated: torch.save never compresses,
  so a deflated member means the archive was rewritten, and a 64 KB file could inflate to GBs;
  this holds for files torch's own loader would read too (they are checked first);
* a layout may not name more elements than its storage holds, beyond a fixed allowance for
  broadcast views (``expand``: stride 0): a 1 KB file with stride 0 and size 2**40 would
  otherwise keep the compare busy for hours. The work on a file is bounded by its size.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msq.errors import TensorFileError
from msq.tensors.meta import to_array as load_array
from msq.tensors.reader import inspect_tensor, load_tensor
from tests.hostile import ptcraft as pc
from tests.hostile.helpers import OP, compare, error_line, outputs, tensor_file, tensor_pair

A = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
IN0 = f"{OP}.input.0.pt"
MSQ = [sys.executable, "-m", "msq.cli"]
EXAMPLES = int(os.environ.get("MSQ_FUZZ_EXAMPLES", "100"))
COMPRESSED = ("is compressed (zip method 8); torch.save never compresses its members, so the "
              "file was rewritten by another tool: save the tensor again with torch.save")


def refused(cfg: Path, bad: Path, expect: str) -> None:
    out = cfg.parent / "out"
    code, text = compare(cfg, out, "-q")
    line = error_line(text)
    assert code == 1, text
    assert line.startswith(f"msq: error: {bad}: "), line
    assert expect in line, line
    assert outputs(out) == []


# ------------------------------------------------------------------------------ compression


def test_deflate_bomb_is_refused_before_inflating(tmp_path: Path) -> None:
    """64 KB on disk, 64 MiB of zeros inflated (the report: 1 MB -> 1 GiB, 2.2 GB peak)."""
    cfg = tensor_pair(tmp_path, {OP: ([A], [A])})
    bad = tensor_file(cfg, "npu", IN0)
    n = 16 << 20
    pc.bomb_archive(bad, pc.tensor_pickle(numel=n, size=(n,), stride=(1,)), 4 * n)
    assert bad.stat().st_size < 100_000
    refused(cfg, bad, f"member archive/data/0 {COMPRESSED}")


def test_deflated_pickle_is_refused(tmp_path: Path) -> None:
    cfg = tensor_pair(tmp_path, {OP: ([A], [A])})
    bad = tensor_file(cfg, "bench", IN0)
    pc.write_members(bad, pc.members(bad), deflated=lambda name: name.endswith("data.pkl"))
    root = pc.members(bad)[0][0].split("/")[0]
    refused(cfg, bad, f"member {root}/data.pkl {COMPRESSED}")


def test_compressed_member_is_refused_before_torch_sees_the_file(tmp_path: Path) -> None:
    """A torch name the fast path does not model sends the file to torch.load(weights_only),
    which inflates whatever it is given: the members are checked first."""
    bad = tmp_path / "x.pt"
    n = 1 << 20
    unknown = pc.glob("torch", "nothing") + pc.POP
    payload = pc.tensor_pickle(numel=n, size=(n,), stride=(1,), prefix=unknown)
    pc.bomb_archive(bad, payload, 4 * n)
    with pytest.raises(TensorFileError, match=re.escape(f"member archive/data/0 {COMPRESSED}")):
        inspect_tensor(str(bad))


def test_stored_members_still_read(tmp_path: Path) -> None:
    """What torch writes (stored members) is unaffected, small and large."""
    import torch

    for n in (7, 400_000):
        path = tmp_path / f"t{n}.pt"
        torch.save(torch.arange(n, dtype=torch.float32), path)
        assert np.array_equal(load_tensor(str(path)), np.arange(n, dtype=np.float32))


# ------------------------------------------------------------------------------ element count


def stride0(path: Path, size: tuple[int, ...], stored: int = 1) -> None:
    """A 1 KB file: ``stored`` float32 elements, a layout of ``size`` with every stride 0."""
    pc.archive(path, pc.tensor_pickle(numel=stored, size=size, stride=(0,) * len(size)),
               np.ones(stored, np.float32).tobytes())


def test_stride_zero_layout_with_a_huge_size_is_refused_at_once(tmp_path: Path) -> None:
    """The report: two 1.2 KB files that ran for hours. Run as a real process with a timeout,
    so that the old behaviour fails this test instead of hanging the suite."""
    cfg = tensor_pair(tmp_path, {OP: ([A], [A])})
    n = 1 << 40
    for side in ("npu", "bench"):
        stride0(tensor_file(cfg, side, IN0), (n,))
        dump = json.loads((cfg.parent / side / "step0/rank/dump.json").read_text())
        dump["data"][OP]["input_args"][0]["shape"] = [n]  # the dump agrees: no help there
        (cfg.parent / side / "step0/rank/dump.json").write_text(json.dumps(dump))
    out = tmp_path / "out"
    proc = subprocess.run([*MSQ, "compare", str(cfg), "-o", str(out), "--no-history", "-q"],
                          capture_output=True, text=True, timeout=120, check=False)
    line = error_line(proc.stdout + proc.stderr)
    assert proc.returncode == 1, proc.stderr
    bad = tensor_file(cfg, "npu", IN0)
    assert line.startswith(f"msq: error: {bad}: "), line
    assert (f"the tensor layout names {n} elements (shape ({n},), strides (0,)) but its storage "
            "holds 1") in line, line
    assert outputs(out) == []


@pytest.mark.parametrize("size, stride, stored", [
    ((1 << 25,), (0,), 1),          # above the broadcast allowance
    ((4096, 4096, 2), (0, 1, 0), 4096),
    ((1 << 19, 1 << 19), (1, 1), 1 << 20),  # overlapping rows of a real 4 MiB storage
])
def test_overlapping_layouts_beyond_the_allowance_are_refused(
    tmp_path: Path, size: tuple[int, ...], stride: tuple[int, ...], stored: int
) -> None:
    path = tmp_path / "x.pt"
    pc.archive(path, pc.tensor_pickle(numel=stored, size=size, stride=stride),
               np.ones(stored, np.float32).tobytes())
    with pytest.raises(TensorFileError, match="msq reads at most 16777216 elements"):
        inspect_tensor(str(path))


def test_a_broadcast_view_within_the_allowance_reads_like_torch(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "x.pt"
    t = torch.arange(4096.0).expand(4096, 4096)  # 16 Mi elements from 4 Ki stored
    torch.save(t, path)
    assert np.array_equal(load_tensor(str(path)), t.numpy())


def test_huge_stride_of_a_size_one_dimension_is_harmless(tmp_path: Path) -> None:
    """A size-1 dimension's stride is never used to step: any value reads as torch reads it."""
    path = tmp_path / "x.pt"
    pc.archive(path, pc.tensor_pickle(numel=3, size=(1, 3), stride=(1 << 62, 1)),
               np.arange(3, dtype=np.float32).tobytes())
    assert load_tensor(str(path)).tolist() == [[0.0, 1.0, 2.0]]


def test_sizes_beyond_64_bits_are_refused_in_one_line(tmp_path: Path) -> None:
    """torch sizes and strides are 64-bit; a 5,000-digit one once reached an error message whose
    formatting raised (Python limits int-to-text conversion)."""
    path = tmp_path / "x.pt"
    pc.archive(path, pc.tensor_pickle(numel=1, size=(10**5000,), stride=(0,)), bytes(4))
    with pytest.raises(TensorFileError, match="a tensor size that is not a tuple of 64-bit"):
        inspect_tensor(str(path))


def test_empty_tensor_with_a_huge_stride_reads_as_empty(tmp_path: Path) -> None:
    """No element to step to, so no stride is ever used (torch reads it as an empty tensor); a
    stride of 2**61 elements once overflowed numpy's byte strides (OverflowError, a traceback;
    found by the fuzz test below at 20,000 examples)."""
    path = tmp_path / "x.pt"
    pc.archive(path, pc.tensor_pickle(numel=0, size=(0, 2, 0), stride=(0, 1 << 61, 0)), b"")
    arr = load_tensor(str(path))
    assert arr.shape == (0, 2, 0) and arr.size == 0


@pytest.mark.parametrize("suffix", [".pt", ".npy"])
def test_empty_tensor_too_large_for_numpy_in_bytes_is_refused_in_one_line(
        tmp_path: Path, suffix: str) -> None:
    """Shape (0, 0, 2**61) of float32: no element, but numpy sizes the other dimensions in bytes
    (2**63) and refuses it (ValueError, a traceback, before this check counted bytes)."""
    path = tmp_path / f"x{suffix}"
    if suffix == ".pt":
        pc.archive(path, pc.tensor_pickle(numel=0, size=(0, 0, 1 << 61), stride=(0, 0, 1)), b"")
    else:
        header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': (0, 0, {1 << 61}), }}"
        header += " " * (63 - (10 + len(header)) % 64) + "\n"
        path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                         + header.encode())
    with pytest.raises(TensorFileError, match="has more elements than numpy can address"):
        inspect_tensor(str(path))


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 6) | st.integers(-2, 2**64), min_size=0, max_size=4),
       st.lists(st.integers(0, 6) | st.integers(-2, 2**64), min_size=0, max_size=4),
       st.integers(-1, 40) | st.integers(-2, 2**64), st.integers(0, 64))
def test_fuzz_layouts_cost_what_their_storage_holds(size: list[int], stride: list[int],
                                                    offset: int, stored: int) -> None:
    """Any size, stride and offset over a storage of ``stored`` elements: refused in one
    TensorFileError, or read, and then never more than the storage (or the broadcast allowance)."""
    from msq.tensors.meta import ChunkReader
    from msq.tensors.ptfile import MAX_REPEATED_ELEMS

    payload = pc.tensor_pickle(numel=stored, offset=offset, size=tuple(size), stride=tuple(stride))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in (("a/data.pkl", payload), ("a/byteorder", b"little"),
                           ("a/data/0", np.arange(stored, dtype=np.float32).tobytes())):
            z.writestr(name, data)
    try:
        meta = inspect_tensor("x.pt", out.getvalue())
    except TensorFileError:
        return
    assert meta.numel <= max(stored, MAX_REPEATED_ELEMS)
    if meta.numel <= 4096:
        arr = np.asarray(load_array(meta))
        assert arr.shape == tuple(size)
        chunks = [c.copy() for c in ChunkReader(meta, 1000).chunks()]
        assert np.array_equal(np.concatenate(chunks) if chunks else arr.reshape(-1),
                              arr.reshape(-1))


def test_stored_member_claiming_more_bytes_than_it_has_is_refused(tmp_path: Path) -> None:
    """A stored member's two sizes must agree: the larger one would let a layout read past the
    member's bytes."""
    import zlib

    path = tmp_path / "x.pt"
    payload = pc.tensor_pickle(numel=1000, size=(1000,), stride=(1,))
    stored, raw = zipfile.ZIP_STORED, bytes(8)
    pc.raw_zip(path, [("a/data.pkl", stored, payload, len(payload), zlib.crc32(payload)),
                      ("a/byteorder", stored, b"little", 6, zlib.crc32(b"little")),
                      ("a/data/0", stored, raw, 4000, zlib.crc32(raw))])
    with pytest.raises(TensorFileError, match="member a/data/0 is stored but gives two different"):
        inspect_tensor(str(path))
