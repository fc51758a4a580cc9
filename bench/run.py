#!/usr/bin/env python3
"""Benchmark msq against msprobe 1.1.0 on generated workloads.

    python3 bench/run.py stat                     # statistics: 20,000 ops / ~100k rows per side
    python3 bench/run.py tensor-big               # real data: >= 2 GiB of .pt per side
    python3 bench/run.py tensor-small             # real data: 5,000 ops / ~10k tensor rows per side
    python3 bench/run.py all                      # the three, in that order
    options: --only msq|msprobe, --regen, --ops N, --gb X, --repeat N, --warmup N, --timeout S,
             --msq "CMD", --msprobe "CMD", --extra-args "ARGS" (appended to both commands),
             --msq-args "ARGS" / --msprobe-args "ARGS" (one tool only), --wait-idle S

Each workload lives in bench/work/<name>/ (generated on first use, or when its parameters change,
or with --regen). Each tool is run as a subprocess with the workload directory as cwd:

    msq:     <repo>/.venv/bin/msq compare compare.json -o OUT
    msprobe: bench/.venv-msprobe/bin/msprobe -f pytorch compare -i compare.json -o OUT

under /usr/bin/time -v (wall clock, max RSS of the largest process) while a poller samples the
summed RSS of the whole process tree from /proc every 100 ms (children included: msprobe's
real-data mode runs a multiprocessing pool). The page cache is warmed by reading every input file
before each run, so both tools see the same (warm) cache. A failing tool is reported, not fatal.
Results are appended to bench/work/results.jsonl; logs and outputs stay in
bench/work/<name>/runs/<tool>-<timestamp>/.

This script needs only the standard library; the generators run with --gen-python (default:
bench/.venv-msprobe/bin/python, which has numpy and torch).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from statistics import median as _median

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "work"
MSPROBE_VENV = BENCH / ".venv-msprobe"

WORKLOADS = {
    # name: (generator argv, size flag, default size, speed unit)
    "stat": (["gen_stat.py"], "--ops", 20000, "rows/s"),
    "tensor-big": (["gen_tensor.py", "big"], "--gb", 2.0, "MB/s"),
    "tensor-small": (["gen_tensor.py", "small"], "--ops", 5000, "rows/s"),
}


# ------------------------------------------------------------------------------ helpers
def default_msq_cmd() -> list[str]:
    exe = REPO / ".venv" / "bin" / "msq"
    if exe.exists():
        return [str(exe)]
    py = REPO / ".venv" / "bin" / "python"
    return [str(py if py.exists() else sys.executable), "-c",
            "import sys; from msq.cli import main; sys.exit(main())"]


def default_msprobe_cmd() -> list[str]:
    return [str(MSPROBE_VENV / "bin" / "msprobe")]


def tool_argv(tool: str, base: list[str], out: str, extra: list[str]) -> list[str]:
    if tool == "msq":
        return base + ["compare", "compare.json", "-o", out] + extra
    return base + ["-f", "pytorch", "compare", "-i", "compare.json", "-o", out] + extra


def read_meta(wdir: Path) -> dict | None:
    p = wdir / "meta.json"
    if not p.exists():
        return None
    with open(p, encoding="utf-8") as f:
        return json.load(f)


def ensure_workload(name: str, size, regen: bool, gen_python: str) -> dict:
    gen, flag, _default, _unit = WORKLOADS[name]
    wdir = WORK / name.replace("-", "_")
    meta = read_meta(wdir)
    key = "gb" if flag == "--gb" else "ops"
    if meta is not None and not regen and meta.get("params", {}).get(key) == size:
        return meta
    why = "forced" if regen else ("absent" if meta is None else "parameters changed")
    print(f"[gen] {name}: generating into {wdir} ({why})", flush=True)
    t0 = time.time()
    cmd = [gen_python, str(BENCH / gen[0])] + gen[1:] + [flag, str(size), "--out", str(wdir)]
    subprocess.run(cmd, check=True)
    print(f"[gen] {name}: done in {time.time() - t0:.1f} s", flush=True)
    meta = read_meta(wdir)
    assert meta is not None
    return meta


def warm_cache(wdir: Path) -> None:
    buf = bytearray(1 << 22)
    for side in ("npu", "bench"):
        for root, _d, files in os.walk(wdir / side):
            for fn in files:
                with open(os.path.join(root, fn), "rb", buffering=0) as f:
                    while f.readinto(buf):
                        pass


def _ppid_map() -> dict[int, list[int]]:
    """parent pid -> child pids, from /proc/<pid>/stat (no /proc/.../children on this kernel)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                st = f.read()
        except OSError:
            continue
        # field 4 (ppid) follows the ")" closing the command name
        rest = st[st.rindex(b")") + 2:].split()
        kids.setdefault(int(rest[1]), []).append(int(d))
    return kids


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, IndexError, ValueError):
        return 0


def _pss_kb(pid: int) -> int:
    """The process's proportional share of its anonymous and file-backed pages (a library
    mapped by three processes counts a third in each), less /dev/shm's (counted once in
    :func:`_shm_kb`)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["Pss_Anon"].split()[0]) + int(fields["Pss_File"].split()[0])
    except (OSError, KeyError, IndexError, ValueError):
        return 0


def _shm_kb() -> int:
    """/dev/shm's used size: where msq's pool workers hand each pair's files and rows over
    (memory that no process's RSS holds until it is mapped)."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize // 1024


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_ticks(pid: int) -> tuple[int, int] | None:
    """(start time, user + system ticks) of the process itself (not its children)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            st = f.read()
    except OSError:
        return None
    rest = st[st.rindex(b")") + 2:].split()
    # fields 14, 15 (utime, stime) and 22 (starttime), counted from 1 with pid first
    return int(rest[19]), int(rest[11]) + int(rest[12])


class TreePoller(threading.Thread):
    """Peak of the summed RSS of a process and all its descendants (polled), and the CPU time
    of every process seen in the tree.

    The CPU figure is needed beside /usr/bin/time's: time counts only the children msq itself
    waits for, and a directory compare's pool workers are forked by a forkserver (msq/procs.py:
    the driver holds a DuckDB connection), which reaps them; their CPU never reaches msq's
    rusage. Here each process's own user+system time is taken at its last poll (a process that
    lives less than the poll interval, or the last 100 ms of one, is missed)."""

    def __init__(self, pid: int, interval: float = 0.1, pss: bool = False):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_kb = 0
        #: ``pss``: also the peak of the tree's PSS plus /dev/shm's growth since the start, the
        #: machine's memory the run holds (the summed RSS counts each shared library once a
        #: process and misses the handover folders on /dev/shm); reading smaps_rollup costs
        #: the kernel a page-table walk a process a poll, so it is asked for
        self.pss, self.peak_pss_kb, self._shm0 = pss, 0, _shm_kb()
        self.peak_procs = 0
        self.cpu: dict[tuple[int, int], int] = {}  # (pid, start time) -> ticks last seen
        self._halt = threading.Event()

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu.values()) / _TICK

    def run(self) -> None:
        while not self._halt.is_set():
            kids = _ppid_map()
            todo, seen = [self.pid], []
            while todo:
                p = todo.pop()
                seen.append(p)
                todo.extend(kids.get(p, []))
            total = sum(_rss_kb(p) for p in seen)
            for p in seen:
                ticks = _cpu_ticks(p)
                if ticks is not None:
                    self.cpu[(p, ticks[0])] = ticks[1]
            if total > self.peak_kb:
                self.peak_kb, self.peak_procs = total, len(seen)
            if self.pss:
                held = sum(_pss_kb(p) for p in seen) + max(0, _shm_kb() - self._shm0)
                self.peak_pss_kb = max(self.peak_pss_kb, held)
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def parse_time_v(text: str) -> dict:
    out = {}
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if m:
        out["maxrss_kb"] = int(m.group(1))
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text)
    if m:
        parts = [float(x) for x in m.group(1).split(":")]
        secs = 0.0
        for x in parts:
            secs = secs * 60 + x
        out["time_wall_s"] = secs
    for key, pat in (("user_s", r"User time \(seconds\): ([\d.]+)"),
                     ("sys_s", r"System time \(seconds\): ([\d.]+)")):
        m = re.search(pat, text)
        if m:
            out[key] = float(m.group(1))
    return out


def run_tool(tool: str, name: str, wdir: Path, base: list[str], extra: list[str],
             timeout: float, runs: Path | None = None, pss: bool = False) -> dict:
    """``runs``: where the run's folder (logs, ``out``) goes; default ``wdir/runs``. A shared
    workload folder can stay read-only when several people time it at once. ``pss``: also
    the peak memory as PSS + /dev/shm (:class:`TreePoller`)."""
    # microseconds: a compare of under a second ran twice in the same second's folder
    ts = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    rdir = (runs if runs is not None else wdir / "runs") / f"{tool}-{ts}"
    rdir.mkdir(parents=True)
    out = rdir / "out"
    out.mkdir()
    argv = tool_argv(tool, base, str(out), extra)
    timev = rdir / "time-v.txt"
    have_time = Path("/usr/bin/time").exists()
    full = (["/usr/bin/time", "-v", "-o", str(timev)] if have_time else []) + argv
    (rdir / "cmd.txt").write_text(f"# cwd: {wdir}\n{shlex.join(argv)}\n")
    warm_cache(wdir)
    load_before = os.getloadavg()[0]
    print(f"[run] {name} / {tool}: {shlex.join(argv)}", flush=True)
    res = {"workload": name, "tool": tool, "cmd": shlex.join(argv), "run_dir": str(rdir),
           "date": datetime.now().isoformat(timespec="seconds"), "nproc": os.cpu_count()}
    with open(rdir / "stdout.txt", "wb") as so, open(rdir / "stderr.txt", "wb") as se:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(full, cwd=wdir, stdout=so, stderr=se)
        except OSError as e:
            res.update(rc=None, error=f"cannot start: {e}")
            return res
        poller = TreePoller(proc.pid, pss=pss)
        poller.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            res["error"] = f"timeout after {timeout:.0f} s"
        wall = time.perf_counter() - t0
        poller.stop()
    res.update(rc=rc, wall_s=round(wall, 3), peak_tree_rss_mb=round(poller.peak_kb / 1024, 1),
               tree_cpu_s=round(poller.cpu_s, 2),
               **({"peak_pss_shm_mb": round(poller.peak_pss_kb / 1024, 1)} if pss else {}),
               loadavg_before=round(load_before, 2), loadavg_after=round(os.getloadavg()[0], 2))
    if have_time and timev.exists():
        tv = parse_time_v(timev.read_text(errors="replace"))
        if "maxrss_kb" in tv:
            res["maxrss_mb"] = round(tv["maxrss_kb"] / 1024, 1)
        for k in ("user_s", "sys_s"):
            if k in tv:
                res[k] = tv[k]
        if "user_s" in tv and "sys_s" in tv:
            res["cpu_s"] = round(tv["user_s"] + tv["sys_s"], 2)
    res["outputs"] = sorted(p.name for p in out.iterdir())
    if rc != 0 and "error" not in res:
        tail = (rdir / "stderr.txt").read_text(errors="replace").strip().splitlines()[-5:]
        res["error"] = f"exit {rc}: " + " | ".join(tail)[-400:]
    return res


def append_result(res: dict) -> None:
    """One run's figures, appended to bench/work/results.jsonl (made on a fresh checkout)."""
    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / "results.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(res) + "\n")


def run_line(res: dict) -> str:
    """One run's figures in a line: exit status, wall, CPU (time's and the tree's), peak RSS,
    load before/after, and the error if any."""
    return (f"rc={res.get('rc')} wall {res.get('wall_s')} s, cpu {res.get('cpu_s')} s "
            f"(tree {res.get('tree_cpu_s')} s), peak tree RSS {res.get('peak_tree_rss_mb')} MB, "
            + (f"peak PSS + /dev/shm {res['peak_pss_shm_mb']} MB, " if "peak_pss_shm_mb" in res
               else "")
            + f"load {res.get('loadavg_before')}/{res.get('loadavg_after')}"
            + (f"  {res['error']}" if res.get("error") else ""))


def wait_idle(limit: float) -> None:
    t0 = time.time()
    while limit > 0 and os.getloadavg()[0] >= 0.7 and time.time() - t0 < limit:
        time.sleep(5)


def speed(res: dict, meta: dict, unit: str) -> str:
    if res.get("rc") != 0 or not res.get("wall_s"):
        return "-"
    if unit == "MB/s":
        return f"{meta['total_bytes'] / 1e6 / res['wall_s']:.0f} MB/s"
    return f"{meta['rows']['npu'] / res['wall_s']:.0f} rows/s"


def median(values: list[float]) -> float | None:
    return _median(values) if values else None


def print_table(name: str, meta: dict, results: list[dict], unit: str) -> None:
    size = meta["total_bytes"]
    rows = meta.get("rows", {}).get("npu")
    print(f"\n== {name}: {meta['ops']['npu']} ops/side, {rows} npu rows, "
          f"both dumps {size / 1e6:.1f} MB ({size / 2**30:.2f} GiB)")
    hdr = (f"{'tool':8s} {'status':7s} {'wall s':>9s} {'cpu s':>9s} {'peak RSS MB':>12s} "
           f"{'maxRSS MB':>10s} {'speed':>14s} {'load':>9s}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        status = "ok" if r.get("rc") == 0 else ("FAILED" if r.get("rc") is not None else "ERROR")
        nan = float("nan")
        load = f"{r.get('loadavg_before', nan):.1f}/{r.get('loadavg_after', nan):.1f}"
        print(f"{r['tool']:8s} {status:7s} {r.get('wall_s', nan):9.2f} {r.get('cpu_s', nan):9.2f} "
              f"{r.get('peak_tree_rss_mb', nan):12.1f} {r.get('maxrss_mb', nan):10.1f} "
              f"{speed(r, meta, unit):>14s} {load:>9s}")
        if r.get("error"):
            print(f"         {r['error'][:300]}")
    print("(peak RSS = polled sum over the process tree; maxRSS = largest single process, "
          "time -v; load = 1-min load average before/after)")
    wall = {t: median([r["wall_s"] for r in results if r["tool"] == t and r.get("rc") == 0])
            for t in ("msq", "msprobe")}
    rss = {t: median([r["peak_tree_rss_mb"] for r in results
                      if r["tool"] == t and r.get("rc") == 0]) for t in ("msq", "msprobe")}
    if wall["msq"] and wall["msprobe"]:
        # medians of each tool's runs (it was the last run of each, which one slow run skews)
        print(f"ratio msprobe/msq (medians): wall x{wall['msprobe'] / wall['msq']:.1f}, "
              f"peak RSS x{rss['msprobe'] / max(rss['msq'], 1e-9):.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("workload", choices=list(WORKLOADS) + ["all"])
    ap.add_argument("--only", choices=["msq", "msprobe"])
    ap.add_argument("--regen", action="store_true", help="regenerate the workload")
    ap.add_argument("--ops", type=int, help="ops per side (stat, tensor-small)")
    ap.add_argument("--gb", type=float, help="GiB of .pt per side (tensor-big)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per tool (default 1)")
    ap.add_argument("--warmup", type=int, default=0, metavar="N",
                    help="runs per tool before its timed ones, not recorded (default 0): the "
                         "first runs after another tool's are slower on this VM")
    ap.add_argument("--timeout", type=float, default=7200.0, help="per run, seconds")
    ap.add_argument("--msq", help="msq command prefix (default: <repo>/.venv/bin/msq)")
    ap.add_argument("--msprobe", help="msprobe command prefix (default: bench/.venv-msprobe/bin/msprobe)")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="before each run wait (at most SECONDS) for the 1-min load average < 0.7")
    ap.add_argument("--extra-args", default="", help="extra arguments appended to both commands")
    ap.add_argument("--msq-args", default="",
                    help='extra arguments for msq only, e.g. "--compat msprobe-1.1"')
    ap.add_argument("--msprobe-args", default="", help="extra arguments for msprobe only")
    ap.add_argument("--gen-python", default=str(MSPROBE_VENV / "bin" / "python"),
                    help="python with numpy+torch for the generators")
    a = ap.parse_args(argv)

    if not Path(a.gen_python).exists():
        a.gen_python = sys.executable
    names = list(WORKLOADS) if a.workload == "all" else [a.workload]
    tools = [a.only] if a.only else ["msprobe", "msq"]
    bases = {"msq": shlex.split(a.msq) if a.msq else default_msq_cmd(),
             "msprobe": shlex.split(a.msprobe) if a.msprobe else default_msprobe_cmd()}
    extra = shlex.split(a.extra_args)
    WORK.mkdir(exist_ok=True)
    rc = 0
    for name in names:
        _gen, flag, default, unit = WORKLOADS[name]
        size = (a.gb if flag == "--gb" else a.ops) or default
        meta = ensure_workload(name, size, a.regen, a.gen_python)
        wdir = WORK / name.replace("-", "_")
        results = []
        for tool in tools:
            if tool == "msq" or Path(bases["msprobe"][0]).exists():
                for _ in range(a.warmup):
                    warm = run_tool(tool, name, wdir, bases[tool], extra + shlex.split(
                        a.msq_args if tool == "msq" else a.msprobe_args), a.timeout)
                    print(f"[run] {name} / {tool}: warm-up, not recorded: rc={warm.get('rc')} "
                          f"wall={warm.get('wall_s')} s", flush=True)
            for _ in range(a.repeat):
                if tool == "msprobe" and not Path(bases["msprobe"][0]).exists():
                    res = {"workload": name, "tool": tool, "rc": None,
                           "error": "msprobe venv missing: run bash bench/setup_msprobe.sh"}
                else:
                    wait_idle(a.wait_idle)
                    own = shlex.split(a.msq_args if tool == "msq" else a.msprobe_args)
                    res = run_tool(tool, name, wdir, bases[tool], extra + own, a.timeout)
                res["workload_meta"] = {k: meta.get(k) for k in
                                        ("params", "ops", "rows", "tensor_rows", "total_bytes")}
                results.append(res)
                with open(WORK / "results.jsonl", "a", encoding="utf-8") as f:
                    f.write(json.dumps(res) + "\n")
                if res.get("rc") != 0:
                    rc = 1
                print(f"[run] {name} / {tool}: rc={res.get('rc')} wall={res.get('wall_s')} s "
                      f"peak_tree_rss={res.get('peak_tree_rss_mb')} MB", flush=True)
        print_table(name, meta, results, unit)
    # keep only the newest runs' outputs around (they can be large): drop all but 3 per tool
    for name in names:
        runs = WORK / name.replace("-", "_") / "runs"
        if runs.exists():
            for tool in ("msq", "msprobe"):
                old = sorted(runs.glob(f"{tool}-*"))[:-3]
                for d in old:
                    shutil.rmtree(d, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
