"""What a directory compare's pool worker imports, imported once by the pool's forkserver.

:func:`msq.distributed.run_jobs`'s pool preloads this module (``set_forkserver_preload``): the
forkserver imports it before it forks the workers, which then start with it imported rather
than each importing it at its first task. A worker imported ~1,000 M instructions of modules at
its first task (callgrind: msq.distributed for the task's pickled PairJob, msq.pipeline, the
exporters, duckdb with importlib.metadata, numpy, pyarrow), each worker again, at the run's
start; these are ~620 M of it, paid once. pyarrow is left to the workers: its import starts
jemalloc's background thread, and a process is not forked while another of its threads may
hold a lock (msq/procs.py).
"""

from __future__ import annotations

import importlib

from msq.opening import import_duckdb
from msq.procs import no_blas_threads

#: Imported in this order, after duckdb; none of them imports pyarrow or starts a thread
#: (tests/test_procs.py checks it).
MODULES = ("msq.distributed", "msq.pipeline", "msq.export.outputs", "msq.export.xlsx", "numpy")


def preload() -> None:
    """Import what a pool worker needs (duckdb first, without importlib.metadata: see there;
    numpy without OpenBLAS's threads, which the workers inherit: see no_blas_threads)."""
    no_blas_threads()
    import_duckdb()
    for name in MODULES:
        importlib.import_module(name)


preload()
