#!/usr/bin/env python3
"""Generate a huge statistics dump of tiny ops (issue 17 #8): N ops a side, one small tensor each.

    python3 bench/gen_tiny.py --ops 1000000 --out bench/work/tiny1m

``{npu,bench}/step0/rank/dump.json`` (about 200 bytes an op: 1e6 ops are ~200 MB a side, the size
the hardening probe used) and ``compare.json``. Every op is ``Functional.relu.<i>.forward`` with
one float32 input of shape [4] and a null output; the NPU side's statistics are the bench side's
plus a small offset on every 1000th op, so a few rows are marked. Written in pieces (the generator
itself stays small in memory). Standard library only.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def write_side(path: Path, ops: int, npu: bool) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write('{\n "task": "statistics",\n "level": "L1",\n "dump_data_dir": null,\n "data": {')
        for i in range(ops):
            shift = 0.5 if npu and i % 1000 == 0 else 0.0
            op = {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4],
                                  "Max": 1.5 + shift, "Min": -0.5, "Mean": 0.25, "Norm": 2.0,
                                  "requires_grad": False}],
                  "input_kwargs": {}, "output": [None]}
            f.write(("\n" if i == 0 else ",\n") + f'  "Functional.relu.{i}.forward": '
                    + json.dumps(op, separators=(",", ":")))
        f.write("\n }\n}\n")
    return path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    t0 = time.time()
    sizes = {side: write_side(a.out / side / "step0" / "rank" / "dump.json", a.ops, side == "npu")
             for side in ("npu", "bench")}
    (a.out / "compare.json").write_text(json.dumps(
        {"npu_path": "npu/step0/rank/dump.json", "bench_path": "bench/step0/rank/dump.json"},
        indent=1) + "\n")
    meta = {"generator": "bench/gen_tiny.py", "ops": a.ops, "dump_json_bytes": sizes,
            "gen_seconds": round(time.time() - t0, 1)}
    (a.out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{a.out}: {a.ops} ops a side, dump.json {sizes['npu'] / 1e6:.0f} MB / "
          f"{sizes['bench'] / 1e6:.0f} MB, {meta['gen_seconds']} s")


if __name__ == "__main__":
    main()
