"""MindSpore kernel (static graph) dump compare (spec §8): ``compare_kernel``.

The import is lazy so that metric worker processes, which import ``msq.mindspore.kernel.metrics``,
do not pay for DuckDB, Arrow and xlsxwriter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from msq.mindspore.kernel.compare import compare_kernel

__all__ = ["compare_kernel"]


def __getattr__(name: str) -> Any:
    if name == "compare_kernel":
        from msq.mindspore.kernel.compare import compare_kernel

        return compare_kernel
    raise AttributeError(f"module 'msq.mindspore.kernel' has no attribute {name!r}")
