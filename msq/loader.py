"""Read one side's dump.json into Arrow tables (ops and flattened rows), both sides in parallel.

Parsing and flattening are pure Python and take most of a large statistics compare; the two sides
are independent, so a large compare reads them in two processes. Only the Arrow tables come back:
the parsed JSON never lives in the parent.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msq import interrupts, procs
from msq.config import tensor_folder
from msq.flatten import (
    C_PADDING,
    Columns,
    Flattener,
    constant_column,
    flatten_c,
    input_buffer,
    sequence_column,
)
from msq.jsonio import check_pair_size, read_dump, read_padded
from msq.mindspore.detect import looks_like_mindspore
from msq.procs import gc_frozen

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("msq")

# Below this many bytes of dump.json in total, a second process costs more than it saves.
PARALLEL_BYTES = 4 << 20
# Above this many bytes of dump.json in total, the C reader reads the sides one after the other:
# each side's parse holds ~2-3x its file in memory at its peak, and the two peaks must not add up.
SEQUENTIAL_BYTES = 256 << 20


@dataclass
class SideData:
    """One side of a compare, flattened."""

    side: str
    path: Path
    task: str
    has_md5: bool          # spec §1.5: an md5 key directly in an op's argument lists (the
                           # bench side is read only in the default mode, which refuses a mix)
    looks_mindspore: bool  # MindSpore op names or tensor types
    ops: Columns | pa.Table   # Columns from the C reader: loaded without pyarrow
    rows: Columns | pa.Table

    @property
    def tensor_dir(self) -> Path:
        return tensor_folder(self.path)

    def release(self) -> None:
        """Let go of the read columns once a database holds them: a batch's pairs are read
        before any is loaded, and their columns (~20 MB a 24,500-row root pair) would stay
        in the worker through the whole batch (msq.pipeline.compute_batch)."""
        self.ops = self.rows = Columns([])


def _has_md5(data: dict[str, Any]) -> bool:
    for entry in data.values():
        if not isinstance(entry, dict):
            continue
        for key, value in entry.items():
            if isinstance(value, list) and any(isinstance(e, dict) and "md5" in e for e in value):
                return True
            if key == "input_kwargs" and isinstance(value, dict) and "md5" in value:
                return True
    return False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cycle collector while a dump is parsed and flattened.

    Parsing and flattening allocate millions of dicts, lists and tuples and free none of them until
    the end, so every collection walks them all again: ~1.3 s of a 3 s read of a 20 MB dump.json.
    They hold no reference cycles, so reference counting frees them without the collector.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_side(side: str, path: Path, compat: bool) -> SideData:
    """Parse and flatten one dump.json: by the C reader, else (it gave up on something unusual,
    or is not built) by the Python reader, which has the exact warnings and error messages."""
    fast = _read_side_c(side, path, compat)
    if fast is not None:
        return fast
    with gc_paused():
        return _read_side(side, path, compat)


def _read_side_c(side: str, path: Path, compat: bool, quiet: bool = False) -> SideData | None:
    if C_PADDING is None:
        return None
    buf = read_padded(path, "dump.json", C_PADDING, input_buffer)
    if buf is None:
        return None
    out = flatten_c(buf, compat)
    del buf
    if isinstance(out, str):
        if not quiet:
            log.debug("%s: read by the Python reader (the C reader found %s)", path, out)
        return None
    n_ops, n_rows = out.ops.num_rows, out.rows.num_rows
    ops = out.ops.select(["op_name", "n_rows", "n_input_args", "n_input", "n_output",
                          "row_key", "n_in_rows", "n_out_rows", "struct_key"]) \
        .with_columns([constant_column("side", side, n_ops), sequence_column("op_seq", n_ops, "i32")])
    rows = out.rows.with_columns([constant_column("side", side, n_rows),
                                  sequence_column("row_seq", n_rows)],
                                 {"side": (None, (side,), 1 if n_rows else 0)})
    return SideData(side, path, out.task, (side == "npu" or not compat) and out.has_md5,
                    out.looks_mindspore, ops, rows)


def _read_side(side: str, path: Path, compat: bool) -> SideData:
    doc = read_dump(path)
    task = str(doc.get("task"))
    flat = Flattener(side, str(path), real_data=task == "tensor", fix_direction=not compat)
    names: list[str] = []
    counts: list[int] = []
    lengths: list[tuple[int, int, int]] = []
    keys: list[tuple[str, int, int, str]] = []
    for seq, (op_name, entry) in enumerate(doc["data"].items()):
        names.append(op_name)
        count = flat.add_op(seq, op_name, entry)
        counts.append(count)
        lengths.append((_length(entry.get("input_args")), _length(entry.get("input")),
                        _length(entry.get("output"))))
        keys.append(_op_key(flat.buf.rows[len(flat.buf.rows) - count:]))
    n_args, n_input, n_output = zip(*lengths) if lengths else ((), (), ())
    row_keys, n_in_rows, n_out_rows, struct_keys = zip(*keys) if keys else ((), (), (), ())
    import pyarrow as pa  # the Python reader's path only: the C reader's needs none

    ops = pa.table({"side": pa.array([side] * len(names), pa.string()),
                    "op_seq": pa.array(range(len(names)), pa.int32()),
                    "op_name": pa.array(names, pa.string()),
                    "n_rows": pa.array(counts, pa.int32()),
                    "n_input_args": pa.array(n_args, pa.int32()),
                    "n_input": pa.array(n_input, pa.int32()),
                    "n_output": pa.array(n_output, pa.int32()),
                    "row_key": pa.array(row_keys, pa.string()),
                    "n_in_rows": pa.array(n_in_rows, pa.int32()),
                    "n_out_rows": pa.array(n_out_rows, pa.int32()),
                    "struct_key": pa.array(struct_keys, pa.string())})
    return SideData(side, path, task, (side == "npu" or not compat) and _has_md5(doc["data"]),
                    looks_like_mindspore(doc), ops, flat.buf.to_arrow())


def _op_key(rows: list[tuple[Any, ...]]) -> tuple[str, int, int, str]:
    """An op's ``row_key`` (its rows' disp_name in order, joined by U+001F), and its rows whose
    io is input and output: the ops columns op_keys reads instead of aggregating the rows
    (msq.pipeline.pair_rows), as the C reader makes them; and its ``struct_key``, its rows'
    dtype, shape and md5 in order (:func:`_key_field` each: msq.pipeline.op_pairs_select)."""
    return ("\x1f".join(r[3] for r in rows), sum(r[4] == "input" for r in rows),
            sum(r[4] == "output" for r in rows),
            "".join(_key_field(r[6]) + _key_field(r[7]) + _key_field(r[8]) for r in rows))


def _key_field(text: str | None) -> str:
    """A field of a struct_key: "-" for None, else its UTF-8 length, ":" and the text."""
    return "-" if text is None else f"{len(text.encode('utf-8', 'surrogatepass'))}:{text}"


def _length(value: Any) -> int:
    """How many arguments a list of the entry holds, as 1.1.0 counts them: ``len(value or [])``."""
    try:
        return len(value or [])
    except TypeError:  # a number where a list belongs: the flattener has refused it already
        return 0


def _pair_bytes(npu: Path, bench: Path) -> int:
    """Both dump.json files' size (0 when one cannot be read: the reading reports it)."""
    try:
        return npu.stat().st_size + bench.stat().st_size
    except OSError:
        return 0


def _parallel_c(size: int) -> bool:
    """A pair of ``size`` bytes is read at once, by the C reader in two threads."""
    return C_PADDING is not None and PARALLEL_BYTES <= size < SEQUENTIAL_BYTES \
        and (os.cpu_count() or 1) >= 2


class EarlySides:
    """Both sides of a large single-card compare read by the C reader in threads, begun by
    msq.runner while msq.pipeline and duckdb are imported: the imports hold one core, the other
    was idle (stat, 2 x 20 MB: the read, ~0.13 s on two cores, overlaps the ~0.15 s of imports).

    :func:`read_sides` takes the sides when asked for the same files; on anything unusual (the C
    reader gives up, an error, a pair too large) nothing is kept and :func:`read_sides` reads
    as it always did, with its own errors, warnings and fallbacks. Only what reading does is
    done early: :func:`check_pair_size` first, no process, no DuckDB.
    """

    def __init__(self, npu: Path, bench: Path, compat: bool) -> None:
        self.key = (npu, bench, compat)
        self._sides: tuple[SideData, SideData] | None = None
        self._done = threading.Event()  # the thread's last act (see interrupts.wait_for)
        self._thread = threading.Thread(target=self._read, name="msq-early-read", daemon=True)
        self._thread.start()
        procs.wait_before_fork(self._done)  # begun before the tensor pool forks: see there

    def _read(self) -> None:
        npu, bench, compat = self.key
        try:
            check_pair_size(npu, bench)
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="msq-read") as pool:
                bench_job = pool.submit(_read_side_c, "bench", bench, compat, True)
                npu_side = _read_side_c("npu", npu, compat, True)
                bench_side = bench_job.result()
            if npu_side is not None and bench_side is not None:
                self._sides = (npu_side, bench_side)
        except Exception:  # noqa: BLE001 (read_sides reads again, and reports it)
            self._sides = None
        finally:
            self._done.set()

    def take(self, npu: Path, bench: Path, compat: bool) -> tuple[SideData, SideData] | None:
        """The sides read, when they are of these files (waits for the read to end)."""
        with interrupts.deferred():  # the C reader cannot be stopped: its end is waited for
            interrupts.wait_for(self._done)
        sides, self._sides = self._sides, None
        return sides if self.key == (npu, bench, compat) else None


_early: EarlySides | None = None


#: A pair of dump.json files up to this size is read before the tensor pool forks (msq.runner),
#: while the main thread imports the pool's modules (~75 ms) on the other core; the fork waits
#: for the read (tensor_small: 2 x 4.3 MB, ~45 ms of CPU). A larger pair is read after the fork.
BEFORE_FORK_BYTES = 16 << 20


def start_early_read(npu: Path, bench: Path, compat: bool, before_fork: bool = False) -> None:
    """Begin reading both sides now (:class:`EarlySides`), when :func:`read_sides` would read
    them at once by the C reader; :func:`read_sides` takes them, :func:`drop_early_read` ends it.
    ``before_fork``: only when the pair is at most BEFORE_FORK_BYTES."""
    global _early
    size = _pair_bytes(npu, bench)
    if _early is None and _parallel_c(size) and (not before_fork or size <= BEFORE_FORK_BYTES):
        _early = EarlySides(npu, bench, compat)


def drop_early_read() -> None:
    """Wait for an early read that was not taken (the compare failed before) and drop it."""
    global _early
    early, _early = _early, None
    if early is not None:
        early.take(*early.key)


def _take_early(npu: Path, bench: Path, compat: bool) -> tuple[SideData, SideData] | None:
    global _early
    early, _early = _early, None
    return early.take(npu, bench, compat) if early is not None else None


def read_sides(npu: Path, bench: Path, compat: bool) -> tuple[SideData, SideData]:
    """Both sides; in two processes when the dumps are large and two cores are free."""
    check_pair_size(npu, bench)  # before anything is read: the compare's memory grows with both
    early = _take_early(npu, bench, compat)
    if early is not None:
        log.debug("dump.json: both sides read while msq.pipeline was imported")
        return early
    size = _pair_bytes(npu, bench)
    if _parallel_c(size):
        # the C reader releases the GIL: a thread reads the bench side meanwhile
        # (the waits for that thread run whole: a Thread.join cut by Ctrl-C marks the thread
        # ended on Python 3.11, and the interpreter may exit while it is inside the C reader)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="msq-read")
        try:
            bench_job = pool.submit(read_side, "bench", bench, compat)
            try:
                npu_side = read_side("npu", npu, compat)
            finally:
                with interrupts.deferred():
                    bench_side = interrupts.result_of(bench_job)
            return npu_side, bench_side
        finally:
            with interrupts.deferred():
                pool.shutdown(wait=True)
    if C_PADDING is not None or size < PARALLEL_BYTES or (os.cpu_count() or 1) < 2:
        return read_side("npu", npu, compat), read_side("bench", bench, compat)
    with gc_frozen():
        return _read_in_two_processes(npu, bench, compat)


def _read_in_two_processes(npu: Path, bench: Path, compat: bool) -> tuple[SideData, SideData]:
    """One process per side (started as :mod:`msq.procs` decides), each sending its tables back
    through its own pipe.

    Not a process pool: a pool's worker killed mid-task can leave the pool's queues locked,
    and its shutdown then waits for ever. Here the parent alone decides: the workers ignore
    Ctrl-C (it reaches the whole process group), and on any failure or interruption the parent
    kills them at once (a read of a large dump takes many seconds) and reaps them.
    """
    context: Any = procs.context(preload=[__name__])  # typeshed: BaseContext has no Process
    workers: list[tuple[Any, Any]] = []
    try:
        with interrupts.workers_forked():
            for side, path in (("npu", npu), ("bench", bench)):
                receiver, sender = context.Pipe(duplex=False)
                proc = context.Process(target=_read_to_pipe, args=(sender, side, path, compat, os.getpid()),
                                       name=f"msq-read-{side}", daemon=True)
                proc.start()
                sender.close()
                workers.append((proc, receiver))
        npu_data, bench_data = (_receive(proc, receiver) for proc, receiver in workers)
        return npu_data, bench_data
    finally:
        with interrupts.deferred():
            for proc, receiver in workers:
                if proc.is_alive():
                    proc.kill()
                proc.join()
                receiver.close()


def _read_to_pipe(sender: Any, side: str, path: Path, compat: bool, owner: int) -> None:
    interrupts.ignore_in_worker(owner)
    try:
        outcome: tuple[str, Any] = ("ok", read_side(side, path, compat))
    except BaseException as err:  # noqa: BLE001 (handed to the parent, which raises it)
        outcome = ("error", err)
    try:
        sender.send(outcome)
    except Exception:  # noqa: BLE001 (an error that does not pickle: its text still goes back)
        sender.send(("error", RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]}")))
    sender.close()


def _receive(proc: Any, receiver: Any) -> SideData:
    try:
        kind, value = receiver.recv()
    except EOFError:  # the worker died without an answer: the OOM killer, mostly
        from concurrent.futures.process import BrokenProcessPool  # imported with the workers

        raise BrokenProcessPool(f"{proc.name} exited with status {proc.exitcode}") from None
    if kind == "error":
        raise value
    return value  # type: ignore[no-any-return]
