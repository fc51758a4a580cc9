"""Confine tensor file names taken from a dump to that side's ``dump_tensor_data`` directory.

File names come from dump.json (``data_name``, or a row name + ``.pt``), i.e. from the data being
compared, so they are untrusted: a name must not climb out with ``..``, be absolute, or reach a
symlink whose target lies outside the directory. A name that is fine but absent is not an error
here: it is reported as missing so the metrics layer can write msprobe's NO_DATA row.
"""

from __future__ import annotations

import os
from pathlib import Path

from msq.errors import TensorFileError

TENSOR_DIR_NAME = "dump_tensor_data"


def tensor_dir_for(dump_json: str | os.PathLike[str]) -> Path:
    """The tensor directory of a side: ``<dirname(dump.json)>/dump_tensor_data`` (spec §1.2)."""
    return Path(dump_json).parent / TENSOR_DIR_NAME


def resolve_tensor_file(tensor_dir: str | os.PathLike[str], name: str) -> Path | None:
    """The path of ``name`` inside ``tensor_dir``, or None when no such file exists.

    Args:
        tensor_dir: the side's ``dump_tensor_data`` directory.
        name: a file name from the dump, e.g. ``Functional.linear.0.forward.input.0.pt``.

    Returns:
        The file's path (as given under ``tensor_dir``, not the symlink target), or None when
        nothing exists under that name (a dangling symlink inside the directory counts as missing).

    Raises:
        TensorFileError: the name is empty, absolute, contains ``..`` or a NUL, or resolves (through
            a symlink) to a place outside ``tensor_dir``, or names something that is not a file.
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise TensorFileError(f"{tensor_dir}: invalid tensor file name {name!r} in the dump")
    parts = name.replace("\\", "/").split("/")
    if os.path.isabs(name) or name.startswith(("/", "\\")) or any(p in ("", ".", "..") for p in parts):
        raise TensorFileError(
            f"{tensor_dir}: tensor file name {name!r} from the dump leaves the tensor directory; "
            "names must be plain file names inside dump_tensor_data"
        )
    root = Path(tensor_dir)
    path = root.joinpath(*parts)
    if not os.path.lexists(path):
        return None
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise TensorFileError(
            f"{path}: is a symlink to {real}, outside the tensor directory {real_root}; "
            "refusing to read it"
        )
    if not os.path.exists(real):
        return None
    if not os.path.isfile(real):
        raise TensorFileError(f"{path}: is not a regular file; expected a tensor file")
    return path
