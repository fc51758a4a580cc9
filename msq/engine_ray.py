"""``--engine ray``: the pairs of a directory compare as tasks on a Ray cluster.

Every rank x step pair is one Ray task that computes the pair and renders its files and history
rows (the same function the local engine runs in its process pool); the driver (this process)
publishes the files and records the rows, as the local engine does, so both give the same files
and history rows.

- **Order.** Tasks are submitted in pair order with a bounded number in flight (the driver holds
  only their results) and their results are taken in pair order, so the history's compare ids are
  those of the local engine, whatever finishes first.
- **Faults.** A task whose worker process or node dies is run again by Ray (``max_retries``); the
  driver takes exactly one result per pair, so no pair is recorded twice. A pair that fails for its
  own reasons (a broken dump) comes back as an error text, is reported and does not stop the rest.
- **Memory.** Each task declares the memory it needs to Ray (:func:`pair_memory`), so a node runs
  only as many pairs at once as its memory allows; the figure is an upper bound of the measured
  peak (docs/scale.md).
- **Locality.** ``place`` maps a path prefix to a node (the value of its ``msq-node`` label,
  ``ray start --labels msq-node=NAME``): a pair whose NPU rank directory lies under the prefix runs
  on that node, where its node-local dump is. Without a mapping any node runs any pair (shared
  file system).

Ray is imported only here, and only when this engine runs.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msq.config import is_real_data
from msq.errors import UsageError

if TYPE_CHECKING:
    from msq.config import Options
    from msq.distributed import PairJob
    from msq.pair_tables import PairFailure, PairTables

log = logging.getLogger("msq")

NODE_LABEL = "msq-node"
#: Seconds to wait for the head's port to answer before giving up on --ray-address.
CONNECT_TIMEOUT = 10.0
#: At most this many pairs in flight (their results wait in the object stores for the driver).
MAX_IN_FLIGHT = 128
#: Ray runs a task again this many times when its worker process or node dies.
MAX_RETRIES = 3
#: Measured peak of one statistics pair: ~170 MB for a tiny one, ~370 MB with 2 x 5 MB of
#: dump.json, ~650 MB with 2 x 20 MB (docs/scale.md); declared with a margin.
BASE_MEMORY = 256 << 20
MEMORY_PER_DUMP_BYTE = 16
#: A tensor batch or range task streams its tensors chunk by chunk (msq/tensors/pool.py): a few
#: chunks of memory whatever the tensor size, plus the interpreter and numpy.
TENSOR_TASK_MEMORY = 384 << 20


@dataclass(frozen=True)
class RayOptions:
    """Where the cluster is and which node holds which dumps."""

    address: str | None = None
    place: tuple[tuple[str, str], ...] = ()   # (absolute path prefix, msq-node label value)

    @classmethod
    def build(cls, address: str | None, place: Any) -> RayOptions:
        return cls(address or None, parse_place(place))


def parse_place(place: Any) -> tuple[tuple[str, str], ...]:
    """``PREFIX=NODE`` texts (CLI) or a ``{prefix: node}`` mapping (API) -> (prefix, node) pairs,
    the prefixes absolute, the longest first (the most specific wins)."""
    if not place:
        return ()
    items: list[tuple[Any, Any]]
    if isinstance(place, dict):
        items = list(place.items())
    elif isinstance(place, (list, tuple)):
        items = []
        for entry in place:
            if not isinstance(entry, str) or "=" not in entry:
                raise UsageError(f"--ray-place {entry!r}: expected PREFIX=NODE, e.g. "
                                 "/local/dumps/node3=node3")
            items.append(tuple(entry.rsplit("=", 1)))  # type: ignore[arg-type]
    else:
        raise UsageError(f"ray_place must map path prefixes to node names, got {place!r}")
    pairs = []
    for prefix, node in items:
        if not isinstance(prefix, (str, Path)) or not str(prefix) or not isinstance(node, str) \
                or not node:
            raise UsageError(f"ray place {prefix!r}={node!r}: both the path prefix and the node "
                             "name must be non-empty")
        pairs.append((os.path.abspath(prefix), node))
    return tuple(sorted(pairs, key=lambda p: len(p[0]), reverse=True))


def node_for(path: Path, place: Sequence[tuple[str, str]]) -> str | None:
    """The node that holds ``path`` (an NPU rank directory), or None: any node."""
    text = os.path.abspath(path)
    for prefix, node in place:
        if text == prefix or text.startswith(prefix.rstrip(os.sep) + os.sep):
            return node
    return None


def pair_memory(files: Sequence[Path | None]) -> int:
    """Bytes of memory to declare for a pair task reading ``files`` (both dump.json files)."""
    size = 0
    for path in files:
        if path is not None:
            try:
                size += os.path.getsize(path)
            except OSError:
                pass  # a node-local file the driver cannot see: the base figure
    return BASE_MEMORY + MEMORY_PER_DUMP_BYTE * size


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--engine ray needs Ray: pip install 'msq[ray]' (or -e '.[ray]') on the "
                         "driver and on every node of the cluster") from None
    return ray


def connect(ray: Any, address: str | None) -> None:
    """Join the cluster at ``address`` (else ``$RAY_ADDRESS``, else a cluster started on this
    machine by ``ray start``, else a new local one)."""
    if ray.is_initialized():
        return
    _check_reachable(address)
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING,
                 configure_logging=True)
    except (ConnectionError, ValueError, RuntimeError) as err:
        where = address or os.environ.get("RAY_ADDRESS") or "this machine"
        raise UsageError(f"cannot join the Ray cluster at {where} ({str(err).splitlines()[0]}); "
                         "check --ray-address, or start one with 'ray start --head'") from None


def _check_reachable(address: str | None) -> None:
    """Fail in seconds when nothing listens at HOST:PORT (Ray itself keeps retrying for minutes)."""
    if not address or "://" in address or ":" not in address:
        return  # auto, $RAY_ADDRESS, a client address: Ray decides
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT):
            pass
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise UsageError(f"cannot join the Ray cluster at {address} ({reason}); check "
                         "--ray-address, or start one with 'ray start --head'") from None


def check_nodes(ray: Any, place: Sequence[tuple[str, str]]) -> None:
    """Every node named in ``place`` must be alive in the cluster."""
    if not place:
        return
    alive = {n.get("Labels", {}).get(NODE_LABEL) for n in ray.nodes() if n.get("Alive")}
    missing = sorted({node for _, node in place} - alive)
    if missing:
        raise UsageError(f"--ray-place names node(s) {', '.join(missing)}, but no live node of the "
                         f"cluster has the label {NODE_LABEL}=<name>; start each node with "
                         f"'ray start ... --labels {NODE_LABEL}=<name>'")


def window(ray: Any) -> int:
    """Pairs in flight: two per CPU of the cluster, at most MAX_IN_FLIGHT. The driver takes
    the pairs one at a time, in order (publishing files, appending history rows), so more tasks
    in flight than that would only fill the object stores with results waiting for it."""
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(4, min(2 * cpus, MAX_IN_FLIGHT))


def run_pairs(jobs: Sequence[PairJob], opts: Options, output_dir: Path, ray_opts: RayOptions,
              idle: Callable[[], None] = lambda: None,
              ) -> Iterator[tuple[PairJob, PairTables | PairFailure]]:
    """Run every pair as one Ray task; yield (job, its tables or failure) in job order.
    ``idle()`` is called before a wait for the next pair that lasts (the driver commits the
    pairs it holds, msq.pair_tables.IDLE_SECONDS).

    A task whose process or node died is retried by Ray; one that still fails, or fails for its
    own reasons, yields a :class:`PairFailure`.
    """
    ray = import_ray()
    connect(ray, ray_opts.address)
    check_nodes(ray, ray_opts.place)
    remote = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False)(compute_pair)
    level = logging.getLogger("msq").getEffectiveLevel()
    opts_ref = ray.put(opts)
    pending: deque[tuple[PairJob, Any]] = deque()
    limit = window(ray)
    try:
        for job in jobs:
            options, sub = task_options(job, ray_opts.place)
            pending.append((job, remote.options(**options).remote(job, opts_ref, output_dir,
                                                                    level, sub)))
            if len(pending) >= limit:
                yield _take(ray, pending.popleft(), idle)
        while pending:
            yield _take(ray, pending.popleft(), idle)
    finally:
        for _, ref in pending:  # stopped (Ctrl-C, an error writing outputs): drop the rest
            ray.cancel(ref, force=True)


def compute_pair(job: PairJob, opts: Options, output_dir: Path, level: int,
                 sub_options: dict[str, Any]) -> PairTables | PairFailure:
    """The Ray task of one pair (its workers show as ``ray::compute_pair``).

    A statistics or md5 pair runs in the task on its one CPU. A real-data pair's tensors are
    split into batches (and a large tensor into element ranges), each one more Ray task
    (``sub_options``: the pair's node, their memory), so one rank's tensors spread over the
    cluster; the ranges do not depend on the worker count, so the cells are those of the
    local engine.
    """
    import ray

    from msq.pair_tables import compute_pair as compute

    logging.getLogger("msq").setLevel(level)
    if is_tensor_pair(job):
        from msq.tensors.pool import executor_factory

        cpus = max(2, int(ray.cluster_resources().get("CPU", 1)))
        with executor_factory(lambda workers: RayExecutor(ray, sub_options)):
            out = compute(job, replace(opts, workers=cpus), output_dir)
    else:
        out = compute(job, replace(opts, workers=1), output_dir)
    context = ray.get_runtime_context()
    out.node = str(context.get_node_labels().get(NODE_LABEL) or context.get_node_id()[:12])
    return out


def is_tensor_pair(job: PairJob) -> bool:
    """A real-data pair (its NPU rank directory holds dump_tensor_data)."""
    return is_real_data(job.npu[0])


class RayExecutor(Executor):
    """A concurrent.futures executor whose tasks are Ray tasks (for msq.tensors.pool)."""

    def __init__(self, ray: Any, options: dict[str, Any]) -> None:
        self._ray, self._options = ray, options
        self._remotes: dict[Callable[..., Any], Any] = {}
        self._refs: list[Any] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        remote = self._remotes.get(fn)
        if remote is None:
            remote = self._ray.remote(num_cpus=1, max_retries=MAX_RETRIES,
                                      retry_exceptions=False)(fn)
            self._remotes[fn] = remote
        ref = remote.options(**self._options).remote(*args, **kwargs)
        self._refs.append(ref)
        log.debug("tensor task %d: %s", len(self._refs), getattr(fn, "__name__", fn))
        return ref.future()  # type: ignore[no-any-return]

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            for ref in self._refs:
                self._ray.cancel(ref, force=True)
        self._refs.clear()


def _take(ray: Any, entry: tuple[PairJob, Any],
          idle: Callable[[], None]) -> tuple[PairJob, PairTables | PairFailure]:
    from msq.pair_tables import IDLE_SECONDS, PairFailure

    job, ref = entry
    ready, _ = ray.wait([ref], timeout=IDLE_SECONDS)
    if not ready:
        idle()
    try:
        return job, ray.get(ref)
    except ray.exceptions.RayTaskError as err:  # a bug in msq, or a failure Ray reports
        return job, PairFailure(f"{job.title}: {_first_line(err)}")
    except ray.exceptions.RayError as err:  # retries used up: worker/node lost, out of memory
        return job, PairFailure(f"{job.title}: the Ray task failed: {_first_line(err)}")


def _first_line(err: BaseException) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(err).__name__


def task_options(job: PairJob, place: Sequence[tuple[str, str]]
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ray options of one pair's task, and of its tensor tasks (a real-data pair): the memory
    each needs, and the node that holds the pair's dumps when they are node-local.

    A real-data pair's own task takes no CPU: it waits on its tensor tasks, which take one
    each, so pairs waiting for their tensors can never hold every CPU of the cluster.
    """
    node = node_for(job.npu[0].parent, place)
    where = {"label_selector": {NODE_LABEL: node}} if node is not None else {}
    tensor = is_tensor_pair(job)
    options = {"memory": pair_memory((job.npu[0], job.bench[0])), "num_cpus": 0 if tensor else 1,
               **where}
    return options, {"memory": TENSOR_TASK_MEMORY, **where}
