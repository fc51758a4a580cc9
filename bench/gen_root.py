#!/usr/bin/env python3
"""Generate a dump root of statistics dumps: ``{npu,bench}/step<S>/rank<R>/{dump,stack,construct}.json``.

    python bench/gen_root.py --ranks 64 --steps 4 --ops 30 --out bench/work/root-64x4

Every rank x step pair is a bench/gen_stat.py workload of --ops ops per side, with its own seed
(--seed + 1000 * step + rank), so no two pairs hold the same numbers: a pair compared under another
pair's name shows. ``compare.json`` points at the two roots (one ``msq compare`` compares every
step and rank). Deterministic for given arguments. Needs numpy only.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_stat


def generate_root(out: Path, ranks: int, steps: int, ops: int, seed: int = 20261201,
                  red: float = 0.05, yellow: float = 0.1) -> dict:
    """Write the dump root into ``out`` (replacing its npu/ and bench/); return its meta data."""
    t0 = time.time()
    out = Path(out)
    for side in ("npu", "bench"):
        if (out / side).exists():
            shutil.rmtree(out / side)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gen-root-", dir=out) as tmp:
        for step in range(steps):
            for rank in range(ranks):
                work = Path(tmp) / f"{step}-{rank}"
                gen_stat.generate(work, ops, seed + 1000 * step + rank, red, yellow,
                                  overflow=0.0, extra=1, bwd_frac=0.4)
                for side in ("npu", "bench"):
                    dest = out / side / f"step{step}"
                    dest.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(work / side / "step0" / "rank"), str(dest / f"rank{rank}"))
                shutil.rmtree(work)
    (out / "compare.json").write_text(json.dumps({"npu_path": "npu", "bench_path": "bench"},
                                                 indent=1) + "\n")
    meta = {"workload": "root", "generator": "bench/gen_root.py", "ranks": ranks, "steps": steps,
            "ops": ops, "seed": seed, "red": red, "yellow": yellow,
            "gen_seconds": round(time.time() - t0, 2)}
    (out / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--ops", type=int, default=5000, help="ops per side of each pair")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    meta = generate_root(a.out, a.ranks, a.steps, a.ops, a.seed)
    print(f"wrote {a.out}: {a.ranks} ranks x {a.steps} steps, {a.ops} ops a side, "
          f"{meta['gen_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
