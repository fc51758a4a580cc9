"""One entry point for tensor files: ``.pt`` (torch.save) or ``.npy``, chosen by suffix."""

from __future__ import annotations

import numpy as np

from msq.errors import TensorFileError
from msq.tensors.meta import TensorFile, TensorMeta, to_array
from msq.tensors.npyfile import inspect_npy
from msq.tensors.ptfile import inspect_pt


def inspect_tensor(path: str, data: bytes | TensorFile | None = None) -> TensorMeta:
    """Parse a tensor file's header (``.pt``/``.pth`` or ``.npy``) and return its layout.

    ``data`` is what ``paths.read_confined`` opened: the whole file (small files) or the open
    file (large ones), which is then the only way the file is read; None opens ``path``.
    """
    if type(path) is str and path.endswith(".pt"):  # most files: no lowered copy of the path
        return inspect_pt(path, data)
    lower = str(path).lower()
    if lower.endswith((".pt", ".pth")):
        return inspect_pt(str(path), data)
    if lower.endswith(".npy"):
        return inspect_npy(str(path), data)
    raise TensorFileError(f"{path}: unknown tensor file type; expected a .pt or .npy file")


def load_tensor(path: str) -> np.ndarray:
    """The tensor in ``path`` as a read-only numpy array (bfloat16 widened to float32)."""
    return to_array(inspect_tensor(path))
