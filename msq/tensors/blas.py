"""Pin numpy's OpenBLAS to one thread while the kernel runs.

OpenBLAS splits a long ``ddot`` across threads, which changes its summation order: the same pair
of tensors would then get different last bits on machines with different core counts, and two
worker processes each spinning two BLAS threads on two cores only fight. msq parallelises across
tensors and ranges instead, so the kernel runs BLAS single-threaded everywhere (parent and
workers), which keeps results identical whatever the machine or worker count.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterator

_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)
_GETTERS = (
    "scipy_openblas_get_num_threads64_",
    "openblas_get_num_threads64_",
    "openblas_get_num_threads",
)

_api: tuple[Callable[[int], None], Callable[[], int]] | None | bool = False


def _find_api() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    global _api
    if _api is not False:
        return _api  # type: ignore[return-value]
    import numpy  # noqa: F401  (numpy's BLAS must be loaded before looking for it)

    _api = None
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            libs = {line.split()[-1] for line in fh if "openblas" in line.lower() and "/" in line}
    except OSError:
        return None
    for lib in sorted(libs):
        try:
            dll = ctypes.CDLL(lib)
        except OSError:
            continue
        setter = next((getattr(dll, s) for s in _SETTERS if hasattr(dll, s)), None)
        getter = next((getattr(dll, g) for g in _GETTERS if hasattr(dll, g)), None)
        if setter is not None and getter is not None:
            getter.restype = ctypes.c_int
            _api = (lambda n, f=setter: f(ctypes.c_int(n)), getter)  # type: ignore[misc]
            break
    return _api  # type: ignore[return-value]


def set_threads(n: int) -> int | None:
    """Set OpenBLAS's thread count; return the previous one (None when OpenBLAS is not found)."""
    api = _find_api()
    if api is None:
        return None
    setter, getter = api
    previous = int(getter())
    setter(n)
    return previous


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run the body with OpenBLAS pinned to one thread, then restore the previous count."""
    previous = set_threads(1)
    try:
        yield
    finally:
        if previous is not None and previous != 1:
            set_threads(previous)
