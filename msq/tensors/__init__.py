"""Real-data (tensor) engine: safe .pt/.npy readers, one-pass metrics, process pool.

Public entry points (imported lazily, so ``import msq.tensors`` stays cheap):

* :func:`msq.tensors.pool.compute_metrics` and :class:`msq.tensors.pool.TensorJob`
* :func:`msq.tensors.reader.load_tensor` / :func:`msq.tensors.reader.inspect_tensor`
* :func:`msq.tensors.metrics.compare_arrays`
* :func:`msq.tensors.paths.tensor_dir_for`

See ``docs/tensors.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

from msq import procs

# imported before numpy (msq's command line, a Python caller), it tells OpenBLAS to start no
# threads of its own (procs.no_blas_threads says why)
procs.no_blas_threads()

_EXPORTS = {
    "compute_metrics": "msq.tensors.pool",
    "TensorJob": "msq.tensors.pool",
    "load_tensor": "msq.tensors.reader",
    "inspect_tensor": "msq.tensors.reader",
    "compare_arrays": "msq.tensors.metrics",
    "tensor_dir_for": "msq.tensors.paths",
}

__all__ = [
    "TensorJob",
    "compare_arrays",
    "compute_metrics",
    "inspect_tensor",
    "load_tensor",
    "tensor_dir_for",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'msq.tensors' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
