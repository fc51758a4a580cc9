"""msq: accuracy compare of model dumps (msprobe-compatible), on DuckDB.

Public API: :func:`compare` and :func:`compare_distributed` take msprobe's parameters.
"""

from __future__ import annotations

from typing import Any

from msq.version import VERSION as __version__

__all__ = ["__version__", "compare", "compare_distributed"]


def compare(*args: Any, **kwargs: Any) -> Any:
    """See :func:`msq.pipeline.compare`."""
    from msq.pipeline import compare as _compare  # lazy: import msq stays light (no duckdb)

    return _compare(*args, **kwargs)


def compare_distributed(*args: Any, **kwargs: Any) -> Any:
    """See :func:`msq.distributed.compare_distributed`."""
    from msq.distributed import compare_distributed as _compare_distributed  # lazy: as above

    return _compare_distributed(*args, **kwargs)
