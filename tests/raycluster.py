"""A real multi-node Ray cluster on this machine, for the Ray engine's tests and benchmark.

Every node is a ``ray start`` (a head and workers joined to it on 127.0.0.1), each with its own
``msq-node`` label, so that placing a task on a node is exercised as on a real cluster. The
cluster lives in fresh network, PID and mount namespaces (``unshare``; root needed):

- network: Ray binds to loopback only (outside a namespace it binds to the machine's interface
  address), and its fixed ports cannot collide with another cluster on the machine;
- PID: the namespace's first process holds the cluster; when it dies the kernel kills every
  process in the namespace (raylets, workers, GCS). ``unshare --kill-child`` kills it when
  ``unshare`` dies, and ``unshare`` is killed when the process that started it dies
  (``PR_SET_PDEATHSIG``): a killed pytest leaks no raylet.

Drivers (``msq compare --engine ray``) run inside the same namespaces through ``nsenter``
(:meth:`LocalRayCluster.run`). ``ray stop`` is never used: it kills every Ray process on the
machine, other people's clusters included.

Standalone (the benchmark uses this)::

    python -m tests.raycluster -- msq compare ... --engine ray --ray-address 127.0.0.1:6379
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ADDRESS = "127.0.0.1:6379"
LABEL = "msq-node"
START_TIMEOUT = 180.0


@dataclass
class Node:
    """One ``ray start`` of the cluster."""

    name: str               # the value of its msq-node label
    cpus: int = 1
    memory: int = 3 << 30   # bytes of task memory Ray may hand out on this node
    object_store: int = 200 << 20


@dataclass
class LocalRayCluster:
    """Start with :meth:`start`, stop with :meth:`stop` (or use :func:`running`)."""

    nodes: Sequence[Node] = field(default_factory=lambda: (Node("head"), Node("n1")))
    root: Path | None = None
    _proc: subprocess.Popen[bytes] | None = None
    _holder: int | None = None
    _token: str | None = None

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        missing = why_unavailable()
        if missing:
            raise RuntimeError(missing)
        self.root = Path(tempfile.mkdtemp(prefix="msqray-", dir="/tmp"))
        script = self.root / "holder.sh"
        script.write_text(self._script())
        log = open(self.root / "holder.log", "wb")  # noqa: SIM115 (kept open by the child)
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **self._auth())
        self._proc = subprocess.Popen(
            ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc",
             "bash", str(script)], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env, preexec_fn=_die_with_parent)  # noqa: PLW1509
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while not (self.root / "ready").exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                text = (self.root / "holder.log").read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"the local Ray cluster did not start:\n{text}")
            time.sleep(0.1)
        self._holder = _child_of(self._proc.pid)

    def stop(self) -> None:
        """Kill the namespace's first process: the kernel ends every process in it."""
        if self._proc is not None and self._proc.poll() is None:
            # unshare's death sends its child, the namespace's first process, SIGKILL
            # (--kill-child); the kernel then kills every process left in the namespace
            self._proc.kill()
            self._proc.wait(30)
        self._proc = None
        self._holder = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def _script(self) -> str:
        assert self.root is not None
        ray = str(Path(sys.executable).with_name("ray"))
        lines = ["set -e", "ip link set lo up"]
        for i, node in enumerate(self.nodes):
            common = (f"--node-ip-address 127.0.0.1 --num-cpus {node.cpus} "
                      f"--memory {node.memory} --object-store-memory {node.object_store} "
                      f"--labels {LABEL}={node.name} --temp-dir {self.root}/ray")
            if i == 0:
                lines.append(f"{ray} start --head --port 6379 --include-dashboard=false "
                             f"--disable-usage-stats {common}")
            else:
                lines.append(f"{ray} start --address {ADDRESS} {common}")
        lines += [f"touch {self.root}/ready",
                  # the namespace's init: reap orphans until killed
                  "while :; do sleep 3600 & wait $! || true; done"]
        return "\n".join(lines) + "\n"

    # -- using it ---------------------------------------------------------------------------
    def command(self, argv: Sequence[str], cwd: Path | str | None = None) -> list[str]:
        """``argv`` wrapped to run inside the cluster's namespaces."""
        if self._holder is None:
            raise RuntimeError("the cluster is not running")
        wd = [f"--wd={cwd}"] if cwd is not None else []
        auth = [f"{k}={v}" for k, v in self._auth().items()]
        return ["nsenter", "-t", str(self._holder), "-n", "-p", "-m", *wd, "--", "env", *auth,
                *argv]

    def _auth(self) -> dict[str, str]:
        """The cluster's own token, given to its nodes and to every command run in it.

        Ray 2.59+ turns token authentication on for local clusters and keeps the token in
        ~/.ray/auth_token; whether that file exists (a user's earlier ``ray.init()``) must not
        decide whether this cluster starts. An explicit mode and token, which take precedence
        over the file, make the cluster independent of the user's home."""
        if self._token is None:
            self._token = secrets.token_hex(32)
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self._token}

    def run(self, argv: Sequence[str], cwd: Path | str | None = None, timeout: float = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(argv, cwd), capture_output=True, text=True, check=False,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL)

    def popen(self, argv: Sequence[str], cwd: Path | str | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(argv, cwd), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env,
                                stdin=subprocess.DEVNULL)

    def pids(self, cmdline_prefix: str) -> list[int]:
        """Host PIDs of the cluster's processes whose command line starts with the prefix
        (e.g. ``ray::`` for the workers, which name themselves after the task they run)."""
        if self._holder is None:
            return []
        ns = os.readlink(f"/proc/{self._holder}/ns/pid")
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                    continue
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    cmd = handle.read().replace(b"\0", b" ").decode(errors="replace")
                if cmd.startswith(cmdline_prefix):
                    found.append(int(entry))
        return found


def why_unavailable() -> str | None:
    """Why a local cluster cannot start here (None when it can)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed (pip install -e '.[ray]')"
    if os.geteuid() != 0:
        return "starting a Ray cluster in its own network namespace needs root"
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"'{tool}' is not installed"
    if not Path(sys.executable).with_name("ray").exists():
        return f"no 'ray' command beside {sys.executable}"
    return None


@contextlib.contextmanager
def running(nodes: Sequence[Node] | None = None) -> Iterator[LocalRayCluster]:
    cluster = LocalRayCluster(nodes) if nodes is not None else LocalRayCluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _child_of(pid: int) -> int:
    """The process ``unshare --fork`` started: the namespace's first process."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        children = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        if children:
            return int(children[0])
    raise RuntimeError(f"unshare ({pid}) has no child process")


def main(argv: list[str]) -> int:
    """``python -m tests.raycluster -- CMD ...``: run CMD inside a fresh two-node cluster."""
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("usage: python -m tests.raycluster -- CMD [ARG ...]", file=sys.stderr)
        return 2
    with running() as cluster:
        return subprocess.call(cluster.command(argv, os.getcwd()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
