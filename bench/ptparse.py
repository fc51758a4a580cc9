"""A/B the ``.pt`` header parse of msq source trees on a workload's tensor files.

    python3 bench/ptparse.py [--workload tensor_small] [--rounds 7] SRC [SRC ...]

Each SRC is a directory holding an ``msq`` package, e.g. a commit unpacked with
``git archive <commit> msq | tar -x -C /tmp/a`` (the parse needs no compiled extension). Each round
runs, for every SRC in turn, a fresh child process that imports msq from SRC, reads every ``.pt``
file of both sides into memory first (untimed; the pool reads files up to 1 MiB whole) and then
times ``inspect_tensor(path, data)`` over all of them: zip directory, data.pkl unpickling (its
stub cache starts empty, as in a fresh worker), layout. Interleaving the sources spreads the
machine's noise over all of them. Prints per SRC the median wall and CPU microseconds per file
and what that is for the whole workload, with the load average before and after.

The pseudo-SRC ``zipfile`` times Python's zipfile instead: open the archive, read data.pkl and
byteorder, look up the storage member (no unpickling, no layout), the part ``_Zip`` replaces.

Files over 1 MiB (tensor-big) are parsed from their open descriptor instead; ``--large`` times
those (the in-memory one-pass parser, now dropped, never applied to them).

Used for issue 11's "second hand-written zip parser" decision; see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent

CHILD = r"""
import json, os, sys, time
if sys.argv[1] == "zipfile":
    import io, zipfile
    items = [open(p, "rb").read() for p in json.load(sys.stdin)]

    def parse(d):
        with zipfile.ZipFile(io.BytesIO(d)) as z:
            pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
            z.read(pkl), z.read(pkl[:-8] + "byteorder"), z.getinfo(pkl[:-8] + "data/0")
    for d in items[:50]:
        parse(d)
    w0, c0 = time.perf_counter(), time.process_time()
    for d in items:
        parse(d)
    w1, c1 = time.perf_counter(), time.process_time()
    print(json.dumps({"n": len(items), "wall": w1 - w0, "cpu": c1 - c0}))
    sys.exit(0)
sys.path.insert(0, sys.argv[1])
import msq
from msq.tensors.meta import open_tensor, SMALL_FILE_BYTES
from msq.tensors.reader import inspect_tensor
assert msq.__file__.startswith(sys.argv[1]), msq.__file__
large = sys.argv[2] == "large"
files = [p for p in json.load(sys.stdin)]
if large:
    items = [(p, None) for p in files]
else:
    items = [(p, open(p, "rb").read()) for p in files]
for p, d in items[:50]:  # import-time and first-call costs out of the timing
    inspect_tensor(p, d)
from msq.tensors import ptfile
ptfile._STUB_CACHE.clear()
w0, c0 = time.perf_counter(), time.process_time()
for p, d in items:
    inspect_tensor(p, d if d is not None else open_tensor(p))
w1, c1 = time.perf_counter(), time.process_time()
print(json.dumps({"n": len(items), "wall": w1 - w0, "cpu": c1 - c0}))
"""


def tensor_files(workload: Path, large: bool) -> list[str]:
    files = []
    for side in ("npu", "bench"):
        for root, _dirs, names in os.walk(workload / side):
            for name in names:
                if name.endswith(".pt"):
                    path = os.path.join(root, name)
                    if (os.path.getsize(path) > (1 << 20)) == large:
                        files.append(path)
    return sorted(files)


def run_child(src: str, files: list[str], large: bool) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, src, "large" if large else "small"],
                          input=json.dumps(files), capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="+", help="directories holding an msq package")
    ap.add_argument("--workload", default="tensor_small", help="bench/work/<name> (default tensor_small)")
    ap.add_argument("--work", default=str(BENCH / "work"), help="workload root (default bench/work)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--large", action="store_true", help="time the files over 1 MiB instead")
    args = ap.parse_args(argv)
    files = tensor_files(Path(args.work) / args.workload, args.large)
    if not files:
        print(f"no {'large' if args.large else 'small'} .pt files in {args.workload}")
        return 1
    load0 = os.getloadavg()[0]
    got: dict[str, list[dict]] = {src: [] for src in args.src}
    for _ in range(args.rounds):
        for src in args.src:
            where = src if src == "zipfile" else os.path.abspath(src)
            got[src].append(run_child(where, files, args.large))
    load1 = os.getloadavg()[0]
    print(f"{len(files)} files ({args.workload}, {'> 1 MiB' if args.large else '<= 1 MiB'}), "
          f"{args.rounds} rounds, load average {load0:.2f} -> {load1:.2f}")
    for src, runs in got.items():
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        spread = min(r["wall"] for r in runs), max(r["wall"] for r in runs)
        print(f"  {src}: {wall / len(files) * 1e6:6.2f} us/file wall ({spread[0]:.3f}-"
              f"{spread[1]:.3f} s), {cpu / len(files) * 1e6:6.2f} us/file CPU; "
              f"whole workload {wall:.3f} s wall, {cpu:.3f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
