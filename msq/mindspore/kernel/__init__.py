"""MindSpore kernel (static graph) dump compare (spec §8): ``compare_kernel``.

The import is lazy so that the tensor engine's workers, which import
``msq.mindspore.kernel.metrics``, do not pay for DuckDB and Arrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from msq.mindspore.kernel.compare import compare_kernel

__all__ = ["compare_kernel"]


def __getattr__(name: str) -> Any:
    if name == "compare_kernel":
        from msq.mindspore.kernel.compare import compare_kernel  # lazy: see the docstring

        return compare_kernel
    raise AttributeError(f"module 'msq.mindspore.kernel' has no attribute {name!r}")
