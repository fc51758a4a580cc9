"""Benchmark workload (issue 15 target 4): a bf16-vs-fp32 port of a random-init 4-layer Llama.

    bench/.venv-msprobe/bin/python bench/dumpers/llama_port.py            # -> bench/work/llama_port
    bench/.venv-msprobe/bin/python bench/dumpers/llama_port.py --noise    # + an fp32 noise run

Both sides are written by msprobe 1.1.0's own dumper (statistics, L1, one training step) through
llama_side.py: npu = the forward under torch.autocast(cpu, bfloat16), bench = float32, same weights
and inputs. stack.json keeps every frame (paths replaced by placeholders). The folder gets
compare.json (npu vs bench) and, with --noise, bench_noise/ (float32, 1 thread instead of 2) and
compare_noise.json. Prints the row count (rows of the result table: tensor and argument entries of
the npu dump.json) and the sizes. Not committed: bench/work/ is git-ignored.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import faultcheck


def side(out: Path, dump_path: str, threads: int, amp: str | None, args: argparse.Namespace) -> None:
    argv = [sys.executable, str(HERE / "llama_side.py"), "--cwd", str(out), "--dump-path", dump_path,
            "--preset", "bench", "--layers", str(args.layers), "--threads", str(threads)]
    if amp:
        argv += ["--amp", amp]
    t0 = time.time()
    log = out / f"{dump_path}.log"
    with log.open("w") as f:
        rc = subprocess.run(argv, check=False, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc:
        raise SystemExit(f"{dump_path} side failed (rc {rc}); see {log}")
    print(f"{dump_path}: {time.time() - t0:.0f} s", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(REPO / "bench" / "work" / "llama_port"))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--amp", default="bf16", choices=["bf16", "fp16"],
                   help="npu autocast dtype (msprobe 1.1.0 pairs fp16 with fp32, not bf16)")
    p.add_argument("--noise", action="store_true", help="also write an fp32 noise run")
    args = p.parse_args()
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    side(out, "npu", 2, args.amp, args)
    side(out, "bench", 2, None, args)
    pairs = [("compare.json", "npu", "bench")]
    if args.noise:
        side(out, "bench_noise", 1, None, args)
        pairs.append(("compare_noise.json", "bench", "bench_noise"))
    for name, npu, bench in pairs:
        cfg = {"npu_path": f"{npu}/step0/rank/dump.json", "bench_path": f"{bench}/step0/rank/dump.json",
               "stack_path": f"{npu}/step0/rank/stack.json", "is_print_compare_log": True}
        (out / name).write_text(json.dumps(cfg, indent=1) + "\n")
    for s in ["npu", "bench"] + (["bench_noise"] if args.noise else []):
        rank = out / s / "step0" / "rank"
        ops = len(faultcheck.load(rank))
        rows = len(faultcheck.rows(rank))
        sizes = {f.name: f.stat().st_size for f in sorted(rank.glob("*.json"))}
        print(f"{s}: {ops} ops, {rows} rows, " + ", ".join(f"{k} {v:,} B" for k, v in sizes.items()))
    print(f"compare: cd {out} && msq compare compare.json -o OUT")


if __name__ == "__main__":
    main()
