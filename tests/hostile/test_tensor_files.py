"""Hostile and broken tensor files in real-data mode (task "tensor", ``dump_tensor_data/``).

Decisions (docs/errors.md, "Tensor files"): a file msq must not or cannot read as a tensor (a
pickle that would run code, a dict, a truncated or object-dtype file, a name or symlink leaving
``dump_tensor_data``, something that is not a regular file) stops the whole compare: exit 1, one
line naming the file, no workbook. A file that is merely absent, or a readable tensor whose shape
disagrees with the other side, is msprobe's row-level message and the compare goes on.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from msq.errors import TensorFileError
from tests.hostile.helpers import (
    OP,
    compare,
    error_line,
    outputs,
    set_data_name,
    sides,
    tensor_file,
    tensor_pair,
)
from tests.xlsx_read import only_xlsx, rows

A = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
IN0 = f"{OP}.input.0"


class RunsCode:
    """Unpickling this would run ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def one_op(root: Path, ext: str = ".pt") -> Path:
    return tensor_pair(root, {OP: ([A], [A * 2])}, ext=ext)


def refused(cfg: Path, bad: Path, expect: str) -> None:
    """The compare stops: exit 1, one line naming ``bad`` and ``expect``, nothing written."""
    out = cfg.parent / "out"
    code, text = compare(cfg, out, "-q")
    line = error_line(text)
    assert code == 1, text
    assert line.startswith(f"msq: error: {bad}"), line
    assert expect in line, line
    assert outputs(out) == [], outputs(out)


def evil_zip(path: Path, marker: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(RunsCode(marker), protocol=2))
        archive.writestr("archive/byteorder", "little")


# ------------------------------------------------------------------------------ code in a pickle


def test_pt_whose_pickle_runs_code_is_refused_and_never_runs(tmp_path: Path) -> None:
    cfg = one_op(tmp_path)
    bad = tensor_file(cfg, "npu", f"{IN0}.pt")
    marker = tmp_path / "pwned"
    evil_zip(bad, marker)
    refused(cfg, bad, "refused to load: its pickle uses the global posix.system; only plain "
                      "tensors are accepted (this file may be malicious")
    assert not marker.exists()


def test_legacy_pickle_pt_goes_to_torch_weights_only_and_never_runs(tmp_path: Path) -> None:
    """A bare pickle (not a zip): torch's weights_only loader refuses it; one line, no code."""
    cfg = one_op(tmp_path)
    bad = tensor_file(cfg, "bench", f"{IN0}.pt")
    marker = tmp_path / "pwned"
    bad.write_bytes(pickle.dumps(RunsCode(marker), protocol=4))
    refused(cfg, bad, "torch refused to load it safely (weights_only): Unsupported operand 149; "
                      "the file may be malicious")
    assert not marker.exists()


def test_malicious_file_among_many_is_refused_by_a_pool_worker(tmp_path: Path) -> None:
    """150 pairs go to the process pool: the worker's refusal still ends the compare cleanly."""
    ops = {f"Functional.relu.{i}.forward": ([A + i], [A]) for i in range(150)}
    cfg = tensor_pair(tmp_path, ops)
    bad = tensor_file(cfg, "npu", "Functional.relu.120.forward.input.0.pt")
    marker = tmp_path / "pwned"
    evil_zip(bad, marker)
    refused(cfg, bad, "refused to load: its pickle uses the global posix.system")
    assert not marker.exists()
    import multiprocessing

    assert multiprocessing.active_children() == []


def test_npy_with_object_dtype_is_refused_and_never_unpickled(tmp_path: Path) -> None:
    cfg = one_op(tmp_path, ".npy")
    bad = tensor_file(cfg, "npu", f"{IN0}.npy")
    marker = tmp_path / "pwned"
    np.save(bad, np.array([RunsCode(marker), 1], dtype=object), allow_pickle=True)
    refused(cfg, bad, "holds an object array (dtype object), which needs a pickle to load; msq "
                      "only loads numeric .npy arrays")
    assert not marker.exists()


# ------------------------------------------------------------------------------ not a tensor


def test_pt_holding_a_dict_is_refused(tmp_path: Path) -> None:
    import torch

    cfg = one_op(tmp_path)
    bad = tensor_file(cfg, "npu", f"{IN0}.pt")
    torch.save({"weight": torch.ones(2, 3)}, bad)
    refused(cfg, bad, "holds a dict, expected a single tensor")


@pytest.mark.parametrize("keep", [0, 0.5, 0.97])
def test_truncated_pt_is_refused(tmp_path: Path, keep: float) -> None:
    cfg = one_op(tmp_path)
    bad = tensor_file(cfg, "npu", f"{IN0}.pt")
    data = bad.read_bytes()
    bad.write_bytes(data[: int(len(data) * keep)])
    refused(cfg, bad, "no zip header" if keep == 0 else "the file is truncated or corrupt")


@pytest.mark.parametrize("cut, expect", [
    (20, "not a valid .npy file (EOF: reading array header"),
    (-4, ("the .npy header needs 24 bytes of storage but only 20 are present; the file is "
          "truncated or corrupt, dump it again")),
])
def test_truncated_npy_is_refused(tmp_path: Path, cut: int, expect: str) -> None:
    cfg = one_op(tmp_path, ".npy")
    bad = tensor_file(cfg, "bench", f"{IN0}.npy")
    bad.write_bytes(bad.read_bytes()[:cut])
    refused(cfg, bad, expect)


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_something_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    """A FIFO used to hang the compare, waiting for a writer."""
    cfg = one_op(tmp_path)
    bad = tensor_file(cfg, "npu", f"{IN0}.pt")
    bad.unlink()
    bad.mkdir() if kind == "directory" else os.mkfifo(bad)
    refused(cfg, bad, "is not a regular file; expected a tensor file")


# ------------------------------------------------------------------------------ paths


@pytest.mark.parametrize("data_name", ["../../../../../etc/passwd.pt", "/etc/passwd.pt",
                                       "sub/../../x.pt"])
def test_data_name_leaving_the_tensor_directory_is_refused(tmp_path: Path, data_name: str) -> None:
    cfg = one_op(tmp_path)
    for dump_json in sides(cfg):
        set_data_name(dump_json, OP, "input_args", 0, data_name)
    tensor_dir = sides(cfg)[0].parent / "dump_tensor_data"
    refused(cfg, tensor_dir, f"tensor file name {data_name!r} from the dump leaves the tensor "
                             "directory; names must be plain file names inside dump_tensor_data")


def test_symlink_leaving_the_dump_is_refused(tmp_path: Path) -> None:
    cfg = one_op(tmp_path)
    link = tensor_file(cfg, "npu", f"{IN0}.pt")
    outside = tmp_path / "elsewhere.pt"
    os.replace(link, outside)
    link.symlink_to(outside)
    refused(cfg, link, f"resolves to {outside}, outside the tensor directory {link.parent}; "
                       "refusing to read it")


# ------------------------------------------------------------------------------ row-level outcomes


def test_row_level_outcomes_in_one_compare(tmp_path: Path) -> None:
    """Missing file, dangling symlink, a symlink inside the directory, a file whose shape
    disagrees with dump.json: msprobe's row messages; the other rows are computed."""
    ops = {f"Functional.relu.{i}.forward": ([A + i], [A]) for i in range(5)}
    cfg = tensor_pair(tmp_path, ops)
    name = "Functional.relu.{}.forward.input.0.pt".format
    tensor_file(cfg, "npu", name(0)).unlink()                        # missing on the NPU side
    tensor_file(cfg, "bench", name(1)).unlink()                      # missing on the bench side
    dangling = tensor_file(cfg, "npu", name(2))
    dangling.unlink()
    dangling.symlink_to("no-such-file.pt")
    inside = tensor_file(cfg, "bench", name(3))
    os.replace(inside, inside.with_name("real.pt"))
    inside.symlink_to("real.pt")                                     # allowed: stays inside
    from tests.hostile.helpers import save_pt

    save_pt(tensor_file(cfg, "npu", name(4)), (A + 4).reshape(3, 2))  # dump.json says [2, 3]
    code, text = compare(cfg, tmp_path / "out")
    assert code == 0, text
    got = {r["NPU Name"]: r for r in rows(only_xlsx(tmp_path / "out"))}
    for i in (0, 1, 2):
        row = got[f"Functional.relu.{i}.forward.input.0"]
        assert row["Err_message"] == f"Dump file: {name(i)} not found."
        assert [row[c] for c in ("Cosine", "MaxAbsErr", "Accuracy Reached or Not")] == \
            ["None", "None", "None"]
    assert got["Functional.relu.3.forward.input.0"]["Cosine"] == 1
    assert got["Functional.relu.3.forward.input.0"]["Accuracy Reached or Not"] == "Yes"
    shape = got["Functional.relu.4.forward.input.0"]
    assert shape["Err_message"] == "Shape of NPU and bench Tensor do not match. Skipped."
    assert [shape[c] for c in ("Cosine", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                               "Five Thousandths Err Ratio")] == ["shape unmatched"] * 5
    assert shape["Accuracy Reached or Not"] == "Unmatched"
    assert got["Functional.relu.4.forward.output.0"]["Accuracy Reached or Not"] == "Yes"


@pytest.mark.parametrize("compat", [False, True])
def test_unmatched_op_with_a_tensor_kwarg(tmp_path: Path, compat: bool) -> None:
    """1.1.0 crashes here with IndexError (spec 3.5); msq reports the op's rows as unmatched."""
    import json

    cfg = tensor_pair(tmp_path, {OP: ([A], [A])}, {"Functional.other.0.forward": ([A], [A])})
    npu = sides(cfg)[0]
    doc = json.loads(npu.read_text())
    entry = doc["data"][OP]
    weight = dict(entry["input_args"][0], data_name=f"{OP}.kwargs.weight.pt")
    entry["input_kwargs"] = {"weight": weight}
    npu.write_text(json.dumps(doc, indent=1))
    tdir = npu.parent / "dump_tensor_data"
    os.link(tdir / f"{OP}.input.0.pt", tdir / f"{OP}.kwargs.weight.pt")
    code, text = compare(cfg, tmp_path / "out", *(["--compat", "msprobe-1.1"] if compat else []))
    # no row matches: the default mode writes the outputs, then says it compared nothing (exit 1)
    assert code == (0 if compat else 1), text
    assert "Traceback" not in text
    got = [(r["NPU Name"], r["Bench Name"], r["Err_message"])
           for r in rows(only_xlsx(tmp_path / "out")) if r["NPU Name"] != "N/A"]
    api = OP.replace(".0.forward", ".forward")
    why = "." if compat else f": the bench has no {api} op."
    assert got == [(f"{OP}.input.0", "N/A", "No bench data matched" + why),
                   (f"{OP}.kwargs.weight", "N/A", "No bench data matched" + why),
                   (f"{OP}.output.0", "N/A", "No bench data matched" + why)]


# ------------------------------------------------------------------------------ one line, not a
# traceback (issue 17, item 7)


@pytest.mark.parametrize("data_name", [f"{IN0}.p\x00t", f"{OP}.in\x00put.0.pt", "\x00"],
                         ids=["in-suffix", "in-name", "alone"])
def test_nul_in_data_name_is_one_line(tmp_path: Path, data_name: str) -> None:
    cfg = one_op(tmp_path)
    for dump_json in sides(cfg):
        set_data_name(dump_json, OP, "input_args", 0, data_name)
    tensor_dir = sides(cfg)[0].parent / "dump_tensor_data"
    refused(cfg, tensor_dir, "invalid tensor file name")


@pytest.mark.parametrize("dtype", ["V4", "U2", "S4", "M8[s]", "m8[s]"])
def test_npy_of_a_non_numeric_dtype_is_refused(tmp_path: Path, dtype: str) -> None:
    cfg = one_op(tmp_path, ".npy")
    bad = tensor_file(cfg, "npu", f"{IN0}.npy")
    np.save(bad, np.zeros((2, 3), dtype=dtype))
    refused(cfg, bad, f"holds an array of dtype {np.dtype(dtype)}; msq compares numeric arrays "
                      "only (bool, integers, floats, complex)")


def _npy_header(shape: tuple[int, ...]) -> bytes:
    import struct

    text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape!r}, }}"
    text += " " * (63 - (len(text) + 10) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode()


def test_npy_over_64_dimensions_is_refused(tmp_path: Path) -> None:
    cfg = one_op(tmp_path, ".npy")
    for side in ("npu", "bench"):
        tensor_file(cfg, side, f"{IN0}.npy").write_bytes(_npy_header((1,) * 65) + bytes(4))
    bad = tensor_file(cfg, "npu", f"{IN0}.npy")
    refused(cfg, bad, "has 65 dimensions; numpy (and msq) handle at most 64")


def test_pt_over_64_dimensions_is_refused(tmp_path: Path) -> None:
    from tests.hostile import ptcraft as pc

    cfg = one_op(tmp_path)
    for side in ("npu", "bench"):
        pc.archive(tensor_file(cfg, side, f"{IN0}.pt"),
                   pc.tensor_pickle(numel=1, size=(1,) * 65, stride=(1,) * 65), bytes(4))
    bad = tensor_file(cfg, "npu", f"{IN0}.pt")
    refused(cfg, bad, "has 65 dimensions; numpy (and msq) handle at most 64")


# ------------------------------------------------------------------------------ check, then swap
# Files over 1 MiB are not read at the confinement check; once they were opened again by name
# later, so a symlink swapped in between was followed out of the directory (6 of 25 tries).
# These tests swap at the exact moment between the check and the read.

BIG = 300_000  # float32 elements: 1.2 MB, above the read-whole-file size


def _swap_for_outside_link(path: Path, outside: Path) -> None:
    path.unlink()
    path.symlink_to(outside)


@pytest.mark.parametrize("ext", [".pt", ".npy"])
def test_swap_after_the_check_never_reads_outside(tmp_path: Path, ext: str) -> None:
    from msq.tensors.meta import ChunkReader, to_array
    from msq.tensors.paths import read_confined
    from msq.tensors.reader import inspect_tensor
    from tests.hostile.helpers import save_pt

    inside = np.arange(BIG, dtype=np.float32)
    tdir = tmp_path / "dump_tensor_data"
    tdir.mkdir()
    secret = tmp_path / f"secret{ext}"
    name = f"x{ext}"
    for path, arr in ((tdir / name, inside), (secret, -inside - 7)):
        save_pt(path, arr) if ext == ".pt" else np.save(path, arr)
    found = read_confined(tdir, name)  # the check (and, for large files, the only open)
    assert found is not None
    _swap_for_outside_link(tdir / name, secret)
    meta = inspect_tensor(*found)
    assert np.array_equal(to_array(meta), inside)
    streamed = np.concatenate([c.copy() for c in ChunkReader(meta, 1 << 16).chunks()])
    assert np.array_equal(streamed, inside)
    from msq.tensors import fused

    assert np.array_equal(fused.raw_range(meta, 10, 20000), inside[10:20000])


def test_swap_before_a_pool_worker_reopens_is_refused(tmp_path: Path) -> None:
    """A large pair's metadata travels to other pool workers by pickle, without the descriptor:
    a worker reopens the file and must find the very file that was checked."""
    import pickle

    from msq.tensors.meta import ChunkReader, to_array
    from msq.tensors.paths import read_confined
    from msq.tensors.reader import inspect_tensor
    from tests.hostile.helpers import save_pt

    tdir = tmp_path / "dump_tensor_data"
    tdir.mkdir()
    save_pt(tdir / "x.pt", np.arange(BIG, dtype=np.float32))
    secret = tmp_path / "secret.pt"
    save_pt(secret, np.zeros(BIG, dtype=np.float32))
    found = read_confined(tdir, "x.pt")
    assert found is not None
    sent = pickle.dumps(inspect_tensor(*found))
    _swap_for_outside_link(tdir / "x.pt", secret)
    meta = pickle.loads(sent)
    with pytest.raises(TensorFileError, match="changed while msq was reading it"):
        to_array(meta)
    with pytest.raises(TensorFileError, match="changed while msq was reading it"):
        next(iter(ChunkReader(meta, 1 << 16).chunks()))


def _sent_to_another_machine(tdir: Path) -> bytes:
    """The pickled meta of the checked ``x.pt`` as a Ray task on another node receives it: the
    same state, but opened on a machine with another boot id."""
    import pickle

    from msq.tensors.paths import read_confined
    from msq.tensors.reader import inspect_tensor

    found = read_confined(tdir, "x.pt")
    assert found is not None
    meta = inspect_tensor(*found)
    assert meta.file is not None
    meta.file.machine = "another-node"
    return pickle.dumps(meta)


def test_a_meta_sent_to_another_machine_reads_the_same_file(tmp_path: Path) -> None:
    """A shared file system may number its devices differently on each node: on another machine
    the file is recognised by inode, size and modification time instead."""
    import pickle

    from msq.tensors.meta import ChunkReader, machine_id, to_array
    from tests.hostile.helpers import save_pt

    tdir = tmp_path / "dump_tensor_data"
    tdir.mkdir()
    save_pt(tdir / "x.pt", np.arange(BIG, dtype=np.float32))
    meta = pickle.loads(_sent_to_another_machine(tdir))
    assert meta.file.machine != machine_id()
    meta.file.dev = -1  # what the other machine saw: its device number means nothing here
    assert np.array_equal(to_array(meta), np.arange(BIG, dtype=np.float32))
    meta = pickle.loads(_sent_to_another_machine(tdir))
    meta.file.dev = -1
    assert np.array_equal(np.concatenate([c.copy() for c in ChunkReader(meta, 1 << 16).chunks()]),
                          np.arange(BIG, dtype=np.float32))


@pytest.mark.parametrize("swap", ["outside-link", "rewritten"])
def test_swap_before_another_machine_reopens_is_refused(tmp_path: Path, swap: str) -> None:
    import pickle

    from msq.tensors.meta import to_array
    from tests.hostile.helpers import save_pt

    tdir = tmp_path / "dump_tensor_data"
    tdir.mkdir()
    save_pt(tdir / "x.pt", np.arange(BIG, dtype=np.float32))
    secret = tmp_path / "secret.pt"
    save_pt(secret, np.zeros(BIG, dtype=np.float32))  # the same size
    sent = _sent_to_another_machine(tdir)
    if swap == "outside-link":
        _swap_for_outside_link(tdir / "x.pt", secret)
    else:  # another file of the same size renamed over it
        os.replace(secret, tdir / "x.pt")
    with pytest.raises(TensorFileError, match="changed while msq was reading it"):
        to_array(pickle.loads(sent))


def test_symlink_retargeted_after_the_check_is_refused(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A symlink inside the directory is checked by where it points; pointing it elsewhere
    between that check and the open must not matter: the opened file itself is checked."""
    from msq.tensors import paths
    from tests.hostile.helpers import save_pt

    tdir = tmp_path / "dump_tensor_data"
    tdir.mkdir()
    save_pt(tdir / "real.pt", np.arange(6, dtype=np.float32))
    (tdir / "x.pt").symlink_to("real.pt")
    secret = tmp_path / "secret.pt"
    save_pt(secret, np.zeros(6, dtype=np.float32))
    checked = paths.resolve_tensor_file

    def check_then_swap(tensor_dir: str, name: str) -> str | None:
        found = checked(tensor_dir, name)
        _swap_for_outside_link(tdir / name, secret)
        return found

    monkeypatch.setattr(paths, "resolve_tensor_file", check_then_swap)
    with pytest.raises(TensorFileError, match="outside the tensor directory"):
        paths.read_confined(tdir, "x.pt")
