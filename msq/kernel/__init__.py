"""MindSpore kernel (static graph) dump compare (spec §8): ``compare_kernel``."""

from msq.kernel.compare import compare_kernel

__all__ = ["compare_kernel"]
