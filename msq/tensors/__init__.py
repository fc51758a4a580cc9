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
import os
import sys
from typing import Any

# The engine runs numpy's BLAS on one thread (pool.single_threaded_blas: results must not depend
# on the core count). Imported before numpy (msq's command line), it tells OpenBLAS so up front:
# OpenBLAS otherwise starts a thread per core when numpy loads, and each spins ~0.1 s waiting for
# work that never comes, in the parent and again in every worker (~0.1 s of CPU, 10 % of a big
# tensor compare on two cores). A value the user set is kept; a process that loaded numpy first
# keeps its BLAS threads (the kernel still pins them to one while it runs).
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

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
