"""What a directory compare's pool worker imports, imported once by the pool's forkserver.

:func:`msq.distributed.run_jobs`'s pool preloads this module (``set_forkserver_preload``): the
forkserver imports it before it forks the workers, which then start with it imported rather
than each importing it at its first task. A worker imported ~1,000 M instructions of modules at
its first task (callgrind: msq.distributed for the task's pickled PairJob, msq.pipeline, the
exporters, duckdb with importlib.metadata, numpy, pyarrow), each worker again, at the run's
start; they are paid once here (the server ~1,170 M, a worker's first task ~0).

pyarrow's import starts the background thread of its jemalloc, and a process is not forked
while another of its threads may hold a lock (msq/procs.py): the server imports it with that
thread turned off (:func:`import_pyarrow`). Arrow's default memory pool (mimalloc) is not
jemalloc, whose thread only purges jemalloc's own pages: the workers allocate as before.
"""

from __future__ import annotations

import importlib
import os

from msq.opening import import_duckdb
from msq.procs import no_blas_threads

#: Imported in this order, after duckdb; none of them starts a thread (tests/test_procs.py
#: checks it).
MODULES = ("msq.distributed", "msq.pipeline", "msq.export.outputs", "msq.export.xlsx", "numpy")
#: What a worker's first task imported still (after :data:`MODULES`; ~340 M instructions):
#: pyarrow (with pydoc and sysconfig for pyarrow.compute's docstrings), numpy.ma (pyarrow's
#: ``pa.array`` of numpy arrays) and msq.sql with importlib.readers (the task's SQL files).
LATER = ("pyarrow", "pyarrow.compute", "pyarrow.ipc", "numpy.ma", "msq.sql", "importlib.readers")
#: jemalloc's options variable for the copy linked into Arrow (read once, when Arrow's jemalloc
#: starts: at pyarrow's import); later options win over earlier ones and over Arrow's own.
ARROW_JEMALLOC_CONF = "JE_ARROW_MALLOC_CONF"
NO_THREAD = "background_thread:false"


def preload() -> None:
    """Import what a pool worker needs (duckdb first, without importlib.metadata: see there;
    numpy without OpenBLAS's threads, which the workers inherit: see no_blas_threads)."""
    no_blas_threads()
    import_duckdb()
    for name in MODULES:
        importlib.import_module(name)
    import_pyarrow()
    for name in LATER:
        importlib.import_module(name)


def import_pyarrow() -> None:
    """Import pyarrow without the background thread its jemalloc starts (the process stays
    single-threaded, so that it can fork); the option is this process's only while pyarrow
    loads, so that the workers' own children get the environment they had."""
    user = os.environ.get(ARROW_JEMALLOC_CONF)
    os.environ[ARROW_JEMALLOC_CONF] = f"{user},{NO_THREAD}" if user else NO_THREAD
    try:
        importlib.import_module("pyarrow")
    finally:
        if user is None:
            del os.environ[ARROW_JEMALLOC_CONF]
        else:
            os.environ[ARROW_JEMALLOC_CONF] = user


preload()
