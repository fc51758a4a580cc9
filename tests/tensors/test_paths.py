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
