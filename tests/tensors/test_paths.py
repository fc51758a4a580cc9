"""Tensor file names from a dump stay inside the side's dump_tensor_data directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from msq.errors import TensorFileError
from msq.tensors.paths import read_confined, resolve_tensor_file, tensor_dir_for


@pytest.fixture
def tensor_dir(tmp_path: Path) -> Path:
    d = tmp_path / "rank" / "dump_tensor_data"
    d.mkdir(parents=True)
    (d / "a.pt").write_bytes(b"x")
    (tmp_path / "secret.pt").write_bytes(b"s")
    return d


def test_tensor_dir_is_next_to_dump_json(tmp_path: Path) -> None:
    assert (
        tensor_dir_for(tmp_path / "step0" / "rank" / "dump.json")
        == tmp_path / "step0" / "rank" / "dump_tensor_data"
    )


def test_plain_name_resolves(tensor_dir: Path) -> None:
    assert resolve_tensor_file(tensor_dir, "a.pt") == str(tensor_dir / "a.pt")
    assert read_confined(tensor_dir, "a.pt") == (str(tensor_dir / "a.pt"), b"x")


def test_missing_file_is_reported_not_raised(tensor_dir: Path) -> None:
    assert resolve_tensor_file(tensor_dir, "nope.pt") is None
    assert read_confined(tensor_dir, "nope.pt") is None


@pytest.mark.parametrize(
    "name",
    [
        "../secret.pt",
        "../../rank/dump_tensor_data/a.pt",
        "/etc/passwd",
        "sub/../../secret.pt",
        "..",
        ".",
        "",
        "a\x00.pt",
        "..\\secret.pt",
    ],
)
def test_escaping_names_are_refused(tensor_dir: Path, name: str) -> None:
    with pytest.raises(TensorFileError):
        resolve_tensor_file(tensor_dir, name)
    with pytest.raises(TensorFileError):
        read_confined(tensor_dir, name)


def test_symlink_leaving_the_directory_is_refused(tensor_dir: Path) -> None:
    os.symlink(tensor_dir.parent.parent / "secret.pt", tensor_dir / "link.pt")
    with pytest.raises(TensorFileError, match="outside the tensor directory"):
        resolve_tensor_file(tensor_dir, "link.pt")
    with pytest.raises(TensorFileError, match="outside the tensor directory"):
        read_confined(tensor_dir, "link.pt")


def test_symlink_inside_the_directory_is_followed(tensor_dir: Path) -> None:
    os.symlink("a.pt", tensor_dir / "alias.pt")
    assert read_confined(tensor_dir, "alias.pt") == (str(tensor_dir / "alias.pt"), b"x")


def test_directory_symlink_escape_is_refused(tensor_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.pt").write_bytes(b"b")
    os.symlink(outside, tensor_dir / "sub")
    with pytest.raises(TensorFileError, match="outside the tensor directory"):
        resolve_tensor_file(tensor_dir, "sub/b.pt")


def test_dangling_symlink_inside_counts_as_missing(tensor_dir: Path) -> None:
    os.symlink("gone.pt", tensor_dir / "dangling.pt")
    assert resolve_tensor_file(tensor_dir, "dangling.pt") is None
    assert read_confined(tensor_dir, "dangling.pt") is None


def test_a_directory_is_not_a_tensor_file(tensor_dir: Path) -> None:
    (tensor_dir / "d.pt").mkdir()
    with pytest.raises(TensorFileError, match="not a regular file"):
        read_confined(tensor_dir, "d.pt")


def _outcome(tensor_dir: Path, name: str) -> object:
    try:
        got = read_confined(tensor_dir, name)
    except TensorFileError as exc:
        return ("error", str(exc))
    if got is None:
        return None
    path, data = got
    return (path, data if isinstance(data, bytes) else ("file", data.size))


def test_names_opened_in_a_held_directory_give_what_their_paths_give(tensor_dir: Path,
                                                                     tmp_path: Path) -> None:
    """directories_held (the pool's batches): a plain name is opened in the directory opened
    once, not by its path; every outcome is the same: the bytes, a large file kept open, a
    missing file, a symlink inside (followed) or out (refused), a directory, a FIFO, escaping
    names, a directory that does not exist."""
    from msq.tensors.meta import SMALL_FILE_BYTES
    from msq.tensors.paths import directories_held

    (tensor_dir / "big.pt").write_bytes(b"b" * (SMALL_FILE_BYTES + 1))
    os.symlink("a.pt", tensor_dir / "in.pt")
    os.symlink(tmp_path / "secret.pt", tensor_dir / "out.pt")
    os.symlink("gone.pt", tensor_dir / "dangling.pt")
    (tensor_dir / "d.pt").mkdir()
    os.mkfifo(tensor_dir / "fifo.pt")
    names = ["a.pt", "big.pt", "in.pt", "out.pt", "dangling.pt", "d.pt", "fifo.pt", "none.pt",
             "../secret.pt", "sub/a.pt", ".."]
    dirs = [tensor_dir, tmp_path / "absent" / "dump_tensor_data"]
    want = [_outcome(d, n) for d in dirs for n in names]
    with directories_held():
        got = [_outcome(d, n) for d in dirs for n in names]
        with directories_held():  # nested: the outer block's descriptors
            assert [_outcome(d, n) for d in dirs for n in names] == want
    assert got == want
    assert want[0] == (str(tensor_dir / "a.pt"), b"x") and want[len(names) + 0] is None
