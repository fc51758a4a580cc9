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
import sys
import time
from pathlib import Path

from msq.tensors.pool import TensorJob, compute_metrics

SHAPES = [(16,), (4, 16), (32, 16), (8, 32, 4), (64, 64), (128,)]


def _write_small(root: Path, count: int) -> list[TensorJob]:
    npu, bench = root / "npu", root / "bench"
    names = [f"Functional.op{i}.0.forward.output.0.pt" for i in range(count)]
    if not (bench / names[-1]).exists():
        import torch

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
        import torch

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
    )
    for compat in (True, False):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            compute_metrics(jobs, compat=compat, workers=args.workers, progress=False)
            times.append(time.perf_counter() - t0)
        best = min(times)
        print(
            f"{args.what} compat={compat}: best {best:.3f}s of {[round(t, 3) for t in times]}  "
            f"{len(jobs) / best:,.0f} rows/s  {nbytes / best / 1e9:.2f} GB/s",
            file=sys.stdout,
        )


if __name__ == "__main__":
    main()
