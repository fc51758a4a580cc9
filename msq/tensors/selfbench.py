"""Quick throughput check of the tensor engine (not a test; numbers go to docs/tensors.md).

    python -m msq.tensors.selfbench small --dir /tmp/msq-small --count 10000
    python -m msq.tensors.selfbench big --dir /tmp/msq-big --mib 2048

``small`` writes ``count`` pairs of small fp32 tensors (6 shapes, 16 to 4096 elements) and reports
rows/s; ``big`` writes one fp32 pair of ``mib`` MiB per side and reports GB/s (bytes of both
sides / wall time). Files are written once with torch.save (torch needed) and reused.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from msq.tensors.pool import TensorJob, compute_metrics, default_workers

SHAPES = [(16,), (4, 16), (32, 16), (8, 32, 4), (64, 64), (128,)]


def _write_small(root: Path, count: int) -> list[TensorJob]:
    npu, bench = root / "npu", root / "bench"
    names = [f"Functional.op{i}.0.forward.output.0.pt" for i in range(count)]
    if not (bench / names[-1]).exists():
        import torch  # lazy: torch is optional (only to write the bench files)

        npu.mkdir(parents=True, exist_ok=True)
        bench.mkdir(parents=True, exist_ok=True)
        g = torch.Generator().manual_seed(0)
        for i, name in enumerate(names):
            b = torch.randn(SHAPES[i % len(SHAPES)], generator=g)
            torch.save(b + 0.001 * torch.randn(b.shape, generator=g), npu / name)
            torch.save(b, bench / name)
    return [TensorJob(i, n, n, str(npu), str(bench)) for i, n in enumerate(names)]


def _write_big(root: Path, mib: int) -> list[TensorJob]:
    name = "Functional.big.0.forward.output.0.pt"
    npu, bench = root / "npu", root / "bench"
    if not (npu / name).exists():
        import torch  # lazy: torch is optional (only to write the bench files)

        npu.mkdir(parents=True, exist_ok=True)
        bench.mkdir(parents=True, exist_ok=True)
        g = torch.Generator().manual_seed(1)
        b = torch.randn(mib << 18, generator=g)  # 4-byte elements
        b[::7] = 0.0  # zeros in bench exercise the ε shift
        torch.save(b, bench / name)
        b.add_(torch.randn(b.shape, generator=g).mul_(0.001))
        torch.save(b, npu / name)
    return [TensorJob(0, name, name, str(npu), str(bench))]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("what", choices=["small", "big"])
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--mib", type=int, default=2048)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    jobs = (
        _write_small(args.dir, args.count)
        if args.what == "small"
        else _write_big(args.dir, args.mib)
    )
    nbytes = sum(
        os.path.getsize(os.path.join(d, f))
        for j in jobs
        for d, f in ((j.npu_dir, j.npu_file), (j.bench_dir, j.bench_file))
        if d is not None and f is not None
    )
    for compat in (True, False):
        runs = []
        for _ in range(args.repeat):
            p0, c0 = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            compute_metrics(jobs, compat=compat, workers=args.workers, progress=False)
            wall = time.perf_counter() - t0
            runs.append(
                (wall, _cpu(resource.RUSAGE_SELF) - p0, _cpu(resource.RUSAGE_CHILDREN) - c0)
            )
        wall, parent, children = min(runs)
        # what the run takes when the cores are not shared with other work
        free = max(parent + children / (args.workers or default_workers()), parent) + 0.1
        print(
            f"{args.what} compat={compat}: wall {wall:.2f}s (best of {args.repeat}), "
            f"cpu parent {parent:.2f}s workers {children:.2f}s | "
            f"wall: {len(jobs) / wall:,.0f} rows/s {nbytes / wall / 1e9:.2f} GB/s | "
            f"idle-box estimate {free:.2f}s: {len(jobs) / free:,.0f} rows/s {nbytes / free / 1e9:.2f} GB/s"
        )


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


if __name__ == "__main__":
    main()
