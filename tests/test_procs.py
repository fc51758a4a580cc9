"""The fork policy (msq/procs.py): fork only while no DuckDB connection of msq's is alive."""

from __future__ import annotations

import gc
import multiprocessing
import os
import weakref
from pathlib import Path

import numpy as np
import pytest

from msq import db, procs
from msq.tensors.pool import TensorJob, compute_metrics


@pytest.fixture(autouse=True)
def no_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start from a process with no live connection (earlier tests in this worker may keep one)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(procs, "_OPEN", weakref.WeakSet())


def test_fork_without_a_connection_forkserver_with_one() -> None:
    assert procs.start_method() == "fork"
    con = db.connect()
    assert procs.start_method() == "forkserver"
    del con
    gc.collect()
    assert procs.start_method() == "fork"


def _parent_pid() -> int:
    return os.getppid()


def test_pool_workers_start_as_the_policy_says() -> None:
    with procs.process_pool(1) as pool:
        assert pool.submit(_parent_pid).result() == os.getpid()  # forked by this process
    con = db.connect()
    try:
        with procs.process_pool(1) as pool:  # forked by a forkserver: not this process
            assert pool.submit(_parent_pid).result() != os.getpid()
    finally:
        con.close()


def test_the_tensor_pool_gives_the_same_rows_from_a_forkserver(tmp_path: Path) -> None:
    """A compare's later tensor metrics run while its connection lives: from a forkserver."""
    rng = np.random.default_rng(0)
    for side in ("npu", "bench"):
        (tmp_path / side).mkdir()
    jobs = []
    for i in range(80):
        x = rng.standard_normal(2000).astype(np.float32)
        np.save(tmp_path / "npu" / f"t{i}.npy", x)
        np.save(tmp_path / "bench" / f"t{i}.npy", x * np.float32(1.001))
        jobs.append(TensorJob(i, f"t{i}.npy", f"t{i}.npy", str(tmp_path / "npu"),
                              str(tmp_path / "bench")))
    forked = compute_metrics(jobs, compat=False, workers=2, progress=False)
    con = db.connect()
    try:
        served = compute_metrics(jobs, compat=False, workers=2, progress=False)
    finally:
        con.close()
    assert served.equals(forked)


def test_forked_workers_never_collect_the_parents_objects() -> None:
    """Rank pairs and dump readers run in forked workers; a worker that collected a DuckDB
    connection inherited from the parent (its threads absent in the child) segfaulted. The
    parent's objects are frozen while workers run, and a nested freeze (a reader pool inside a
    rank-pair worker) keeps the outer one instead of unfreezing everything at its end."""
    assert gc.get_freeze_count() == 0
    with procs.gc_frozen():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with procs.gc_frozen():
            pass
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == 0


def _half_a_result() -> None:
    """Write the start of a result message into the pool's result pipe, then hang: as a worker
    killed in the middle of sending its result leaves that pipe."""
    import struct
    import time
    from multiprocessing.queues import SimpleQueue

    queue = next(o for o in gc.get_objects() if isinstance(o, SimpleQueue))
    os.write(queue._writer.fileno(), struct.pack("!i", 1 << 20) + b"\x80\x04")  # type: ignore[attr-defined]
    time.sleep(600)


def test_stop_pool_ends_with_a_worker_killed_in_mid_result() -> None:
    """The pool's manager thread waits for the rest of that message (this process holds the
    pipe's other end: no end of file); stop_pool must still end, and quickly."""
    import threading
    import time

    pool = procs.process_pool(2)
    pool.submit(_half_a_result)
    time.sleep(1)  # the message is half-written
    done = threading.Event()
    stopper = threading.Thread(target=lambda: (procs.stop_pool(pool), done.set()), daemon=True)
    started = time.monotonic()
    stopper.start()
    assert done.wait(30), "stop_pool hung on the manager thread"
    assert time.monotonic() - started < 5
    stopper.join()
    gc.collect()  # nothing of this pool runs on into the next test


def test_a_process_that_stopped_a_pool_with_queued_work_exits() -> None:
    """Tasks with large arguments fill the call queue's pipe while the worker is busy; after
    stop_pool the queue's feeder thread waited to write into it for ever, and the interpreter's
    exit waited for the feeder (seen: Ctrl-C on the 11k-file tensor workload hung)."""
    import subprocess
    import sys

    script = (
        "import time\n"
        "from msq import procs\n"
        "pool = procs.process_pool(1)\n"
        "pool.submit(time.sleep, 600)\n"
        "for _ in range(8):\n"
        "    pool.submit(len, bytes(300_000))\n"
        "time.sleep(2)\n"
        "procs.stop_pool(pool)\n"
        "print('stopped', flush=True)\n")
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=60, check=False)
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"the process did not exit: {hung.stdout!r}")
    assert done.returncode == 0 and done.stdout == "stopped\n", done.stdout + done.stderr


def test_the_cancelled_future_race_is_quiet_and_nothing_else_is() -> None:
    """CPython's pool manager, finding its workers killed after cancel_futures, sets an error on
    a cancelled future (InvalidStateError) and prints a traceback over msq's 'interrupted'
    line (seen in test_ctrl_c_at_random_moments). Inside stop_pool that one is dropped; any
    other exception of a thread, or that one outside stop_pool, still reaches the hook."""
    import threading
    from concurrent.futures import InvalidStateError

    class _ExecutorManagerThread(threading.Thread):  # the name CPython's manager thread has
        pass

    def raise_in(thread_class: type[threading.Thread], error: Exception) -> None:
        def boom() -> None:
            raise error
        thread = thread_class(target=boom)
        thread.start()
        thread.join()

    seen: list[str] = []
    saved = threading.excepthook
    threading.excepthook = lambda args: seen.append(
        f"{type(args.exc_value).__name__}: {args.exc_value}")
    try:
        with procs.quiet_cancelled_future_race():
            raise_in(_ExecutorManagerThread, InvalidStateError("CANCELLED: <Future>"))
            assert seen == []
            raise_in(_ExecutorManagerThread, ValueError("a real bug"))
            raise_in(threading.Thread, InvalidStateError("elsewhere"))
        raise_in(_ExecutorManagerThread, InvalidStateError("after"))
    finally:
        threading.excepthook = saved
    assert seen == ["ValueError: a real bug", "InvalidStateError: elsewhere",
                    "InvalidStateError: after"]


def test_pool_workers_run_this_msq_not_a_folder_named_msq_in_the_working_directory(
        tmp_path: Path) -> None:
    """A directory compare's pool (a forkserver: the history is open) run from a folder holding
    another ``msq`` package (a source tree, another version's checkout): the server and its
    workers import the installed msq, as the command itself does, not that folder's."""
    import json
    import subprocess
    import sys

    from tests.dumps import fwd, t, write_dump

    work = tmp_path / "work"
    (work / "msq").mkdir(parents=True)
    # an importable package: a preload that imports it keeps it for every worker forked after
    # (a workers' own import goes by the parent's sys.path, which has no working directory)
    (work / "msq" / "__init__.py").write_text("")
    for name in ("pair_tables", "worker_imports"):
        (work / "msq" / f"{name}.py").write_text(
            "raise RuntimeError('the msq of the working directory was imported')\n")
    for side in ("npu", "bench"):
        for rank in (0, 1):
            write_dump(tmp_path / side / f"rank{rank}",
                       {"Functional.relu.0.forward": fwd(t(), out=t(mx=2.0 + rank))})
    compare_json = tmp_path / "compare.json"
    compare_json.write_text(json.dumps({"npu_path": str(tmp_path / "npu"),
                                        "bench_path": str(tmp_path / "bench")}))
    command = Path(sys.executable).with_name("msq")  # the console script: no cwd on its path
    done = subprocess.run([str(command), "compare", str(compare_json), "-o",
                           str(tmp_path / "out"), "--format", "csv", "--workers", "2"],
                          cwd=work, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "working directory was imported" not in done.stderr, done.stderr
    assert "2 compares" in done.stdout + done.stderr
    assert len(list((tmp_path / "out").glob("compare_result_*.csv"))) == 2


def test_worker_memory_environment_keeps_the_users_values() -> None:
    env = procs.worker_memory_environment
    ours = "glibc.malloc.hugetlb=1:glibc.malloc.tcache_count=1024"
    assert env({}) == {"GLIBC_TUNABLES": ours, "DUCKDB_JE_MALLOC_CONF": "muzzy_decay_ms:5000"}
    assert env({"GLIBC_TUNABLES": "glibc.malloc.tcache_count=20"})["GLIBC_TUNABLES"] == \
        "glibc.malloc.tcache_count=20:glibc.malloc.hugetlb=1"
    assert env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})["GLIBC_TUNABLES"] == \
        f"glibc.malloc.arena_max=2:{ours}"
    assert env({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0:glibc.malloc.tcache_count=7",
                "DUCKDB_JE_MALLOC_CONF": "dirty_decay_ms:0"}) == {}


def _memory_of_a_worker() -> tuple[str | None, str | None, int]:
    """This worker's allocator settings, and its huge pages after it fills 64 MB from malloc."""
    block = bytearray(64 << 20)
    block[::4096] = bytes([1]) * len(block[::4096])
    with open("/proc/self/smaps_rollup") as f:
        huge = next(int(line.split()[1]) for line in f if line.startswith("AnonHugePages:"))
    return os.environ.get("GLIBC_TUNABLES"), os.environ.get("DUCKDB_JE_MALLOC_CONF"), huge


def test_forkserver_workers_ask_for_huge_pages_and_lazy_freeing() -> None:
    """A directory compare's pool workers (from the forkserver: the history is open) start
    with glibc's huge pages and jemalloc's lazy freeing (procs.worker_memory_environment), and
    malloc's memory is backed by huge pages where the kernel gives them on request. This
    process's own environment is as it was."""
    import subprocess
    import sys

    code = ("import os\n"
            "from msq import db, procs\n"
            "from tests.test_procs import _memory_of_a_worker\n"
            "con = db.connect()\n"
            "with procs.process_pool(1) as pool:\n"
            "    print(*pool.submit(_memory_of_a_worker).result())\n"
            "print(os.environ.get('GLIBC_TUNABLES'), os.environ.get('DUCKDB_JE_MALLOC_CONF'))\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLIBC_TUNABLES", "DUCKDB_JE_MALLOC_CONF")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, env=env,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    worker, parent = done.stdout.splitlines()
    tunables, jemalloc, huge_kb = worker.split()
    assert (tunables, jemalloc) == ("glibc.malloc.hugetlb=1:glibc.malloc.tcache_count=1024",
                                    "muzzy_decay_ms:5000")
    assert parent == "None None"
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.is_file() and "[never]" not in thp.read_text():
        assert int(huge_kb) >= 32 << 10  # most of the 64 MB


@pytest.mark.parametrize("early", [True, False])
def test_directory_pool_workers_start_with_what_they_need_imported(early: bool) -> None:
    """A directory compare's pool workers (from the forkserver: the history is open) start with
    msq's compare, duckdb, numpy and pyarrow imported once by the forkserver
    (msq/worker_imports.py), not each at its first task; the forkserver started no thread
    (pyarrow's jemalloc starts one: turned off there) and imported no importlib.metadata, and
    the workers' environment has not the option that turned it off. The same when the command
    started the server before it opened the history (``early``: msq.runner.run_directories)."""
    import json
    import subprocess
    import sys

    code = ("import json, os, sys\n"
            "from msq import db, procs\n"
            "from msq.procs import PAIR_POOL_PRELOAD\n"
            + "procs.start_pair_pool_server()\n" * early +
            "con = db.connect()\n"
            "probe = ('(sorted(__import__(\"sys\").modules), '\n"
            "         'len(__import__(\"os\").listdir(\"/proc/%d/task\" % __import__(\"os\").getppid())), '\n"
            "         '__import__(\"os\").environ.get(\"JE_ARROW_MALLOC_CONF\"))')\n"
            "with procs.process_pool(1, preload=PAIR_POOL_PRELOAD) as pool:\n"
            "    print(json.dumps(pool.submit(eval, probe).result()))\n")
    env = {name: value for name, value in os.environ.items() if name != "JE_ARROW_MALLOC_CONF"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, check=False, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    modules, server_threads, arrow_conf = json.loads(done.stdout)
    assert {"msq.distributed", "msq.pair_tables", "msq.pipeline", "msq.export.xlsx", "duckdb",
            "numpy", "pyarrow", "pyarrow.compute", "msq.sql"} <= set(modules)
    assert "importlib.metadata" not in modules
    assert server_threads == 1
    assert arrow_conf is None


def test_pyarrow_is_imported_without_its_jemalloc_thread_and_the_users_option_kept() -> None:
    """msq.worker_imports.import_pyarrow: no thread of Arrow's jemalloc in the process, and a
    JE_ARROW_MALLOC_CONF the user set is there again afterwards (its options also applied:
    ``narenas:2`` here)."""
    import subprocess
    import sys

    code = ("import os\n"
            "from msq.worker_imports import import_pyarrow\n"
            "import_pyarrow()\n"
            "print(len(os.listdir('/proc/self/task')), os.environ['JE_ARROW_MALLOC_CONF'])\n")
    env = {**os.environ, "JE_ARROW_MALLOC_CONF": "narenas:2", "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, check=False, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "narenas:2"]


def test_a_directory_compare_starts_its_pools_server_first_where_it_will_use_it(
        tmp_path: Path) -> None:
    """msq.runner starts the pair pool's forkserver before it imports the compare and opens the
    history where msq.distributed will fork the pairs' workers from it: statistics dumps, more
    than one worker, this machine's engine, a history; not for tensor dumps (the pairs run in
    this process), --compat, one worker, --no-history (fork: no connection is open) or ray."""
    from msq.config import DirInput, options_from_kwargs
    from msq.runner import _pair_pool_ahead

    for rank in ("step0/rank0", "step0/rank1"):
        (tmp_path / "npu" / rank).mkdir(parents=True)
    inp = DirInput(tmp_path / "npu", tmp_path / "bench")

    def ahead(**kwargs: object) -> bool:
        return _pair_pool_ahead(inp, options_from_kwargs(False, True, False,
                                                         {"workers": 2, **kwargs}))

    assert ahead()
    assert not ahead(workers=1)
    assert not ahead(record=False)
    assert not ahead(engine="ray")
    assert not ahead(compat="msprobe-1.1")
    assert not _pair_pool_ahead(DirInput(inp.npu_dir, inp.bench_dir, extra={"has_rank_id": True}),
                                options_from_kwargs(False, True, False, {"workers": 2}))
    (tmp_path / "npu" / "step0" / "rank1" / "dump_tensor_data").mkdir()
    assert not ahead()
