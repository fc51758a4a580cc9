"""Generate and verify the fault cases of tests/data/faults with msprobe 1.1.0's own dumper.

    bench/.venv-msprobe/bin/python bench/dumpers/make_faults.py            # every case
    bench/.venv-msprobe/bin/python bench/dumpers/make_faults.py --only stat_fwd md5_fwd
    bench/.venv-msprobe/bin/python bench/dumpers/make_faults.py --verify-only   # re-check committed

Each case folder gets npu/, bench/, bench_noise/ (msprobe layout, written by llama_side.py, one
process per side and rank), compare.json (npu vs bench), compare_noise.json (bench vs
bench_noise) and case.json (the injected ops as msprobe names them, how it was generated, what
the verification saw). Verification, per case:
- exact first-divergence (faultcheck.py): the ops that differ while their inputs are equal must be
  exactly the injected ones (for two sources in one run: the first one against bench, the second
  one against a counterfactual npu run with only the first fault, not committed);
- the noise run really differs from bench (real thread-count nondeterminism);
- msprobe's own compare (CLI) runs on compare.json and compare_noise.json; its row count, result
  counts and advisor line are recorded.
Takes ~12 min (each side imports torch, transformers and msprobe: ~25 s).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import faultcheck

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PY = sys.executable
MSPROBE = str(Path(PY).parent / "msprobe")
SIDE = HERE / "llama_side.py"
STACK_FRAMES = 1  # the model line that called the op; see llama_side.sanitize_stacks
BENCH_THREADS, NOISE_THREADS = 2, 1

SILU_FAULT = {"op": "Functional.silu.1.forward", "kind": "noise", "size": 0.10}
CASES: dict[str, dict[str, Any]] = {
    "stat_fwd": {
        "desc": "statistics mode; forward fault: the output of the layer-1 MLP activation "
                "(Functional.silu.1) gets 10% relative L2 noise",
        "task": "statistics", "faults": [SILU_FAULT]},
    "tensor_fwd": {
        "desc": "the stat_fwd fault in tensor mode (forward records only: data_mode [forward], "
                "to keep the .pt files small)",
        "task": "tensor", "data_mode": "forward", "faults": [SILU_FAULT]},
    "md5_fwd": {
        "desc": "the stat_fwd fault in md5 mode (summary_mode md5)",
        "task": "statistics", "summary_mode": "md5", "faults": [SILU_FAULT]},
    "stat_bwd": {
        "desc": "statistics mode; backward fault: the gradient that the layer-0 SwiGLU product "
                "(Tensor.__mul__.11, silu(gate) * up) sends to its first operand gets 15% "
                "relative L2 noise; the forward pass is untouched",
        "task": "statistics",
        "faults": [{"op": "Tensor.__mul__.11.backward", "index": 0, "kind": "noise",
                    "size": 0.15}]},
    "stat_two_sources": {
        "desc": "statistics mode; two independent forward faults: layer-0 k_proj "
                "(Functional.linear.1) output scaled by 1.12 (a wrong scale), and layer-1 "
                "post-attention RMSNorm rsqrt (Torch.rsqrt.3) output with 15% relative L2 noise",
        "task": "statistics",
        "faults": [{"op": "Functional.linear.1.forward", "kind": "scale", "size": 0.12},
                   {"op": "Torch.rsqrt.3.forward", "kind": "noise", "size": 0.15}]},
    "dist_tp_stat": {
        "desc": "2 ranks (torch.distributed gloo, CPU), tensor-parallel MLP in both layers "
                "(down_proj partial sums all_reduce'd in forward, MLP input grads in backward: "
                "Distributed.all_reduce rows); fault on rank 1 only: the layer-0 down_proj "
                "(Functional.linear.6) output, the op just before Distributed.all_reduce.0, gets "
                "10% relative L2 noise; rank 0 inherits it through the all_reduce",
        "task": "statistics", "world": 2,
        "faults": [{"op": "Functional.linear.6.forward", "rank": 1, "kind": "noise",
                    "size": 0.10}]},
    "port_bf16": {
        "desc": "fault-free mixed-precision port: npu forward under torch.autocast(cpu, "
                "bfloat16), bench float32, same weights and inputs; no injection",
        "task": "statistics", "amp": "bf16", "faults": []},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def side_argv(case: dict[str, Any], case_dir: Path, dump_path: str, threads: int,
              faults: list[dict[str, Any]], amp: str | None) -> list[str]:
    argv = [PY, str(SIDE), "--cwd", str(case_dir), "--dump-path", dump_path,
            "--preset", "faults", "--task", case["task"],
            "--data-mode", case.get("data_mode", "all"),
            "--summary-mode", case.get("summary_mode", "statistics"),
            "--threads", str(threads), "--world", str(case.get("world", 1)),
            "--stack-frames", str(STACK_FRAMES)]
    if faults:
        argv += ["--faults", json.dumps(faults)]
    if amp:
        argv += ["--amp", amp]
    return argv


def run_side(argv: list[str], world: int, log: Path) -> None:
    """Run one side: one process, or one process per rank (gloo over 127.0.0.1)."""
    procs = []
    port = free_port()
    with log.open("w") as out:
        for rank in range(world):
            env = dict(os.environ)
            if world > 1:
                env.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=str(port))
            procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT))
        codes = [p.wait(timeout=900) for p in procs]
    if any(codes):
        raise SystemExit(f"side failed ({codes}): {' '.join(argv)}\n{log.read_text()[-3000:]}")


def display(argv: list[str]) -> str:
    """The command as a reader runs it from the repo root."""
    shown = ["bench/.venv-msprobe/bin/python" if a == PY else a for a in argv]
    shown = [os.path.relpath(a, REPO) if a.startswith(str(REPO)) else a for a in shown]
    return " ".join(f"'{a}'" if any(c in a for c in " {}\"[],") else a for a in shown)


def rank_dirs(root: Path) -> dict[str, Path]:
    return {d.name: d for d in sorted((root / "step0").iterdir()) if d.is_dir()}


def tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def compare_json(world: int, npu: str, bench: str) -> dict[str, Any]:
    if world > 1:
        return {"npu_path": f"{npu}/step0", "bench_path": f"{bench}/step0",
                "is_print_compare_log": True}
    return {"npu_path": f"{npu}/step0/rank/dump.json", "bench_path": f"{bench}/step0/rank/dump.json",
            "stack_path": f"{npu}/step0/rank/stack.json", "is_print_compare_log": True}


def msprobe_compare(case_dir: Path, cfg: str, out: Path) -> dict[str, Any]:
    """Run msprobe's own compare CLI; summarise its workbook(s) and advisor file(s)."""
    from openpyxl import load_workbook

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    t0 = time.time()
    proc = subprocess.run([MSPROBE, "-f", "pytorch", "compare", "-i", cfg, "-o", str(out)],
                          check=False, cwd=case_dir, capture_output=True, text=True,
                          timeout=900)
    summary: dict[str, Any] = {"cmd": f"msprobe -f pytorch compare -i {cfg} -o OUT",
                               "rc": proc.returncode, "wall_s": round(time.time() - t0, 1),
                               "workbooks": []}
    for xlsx in sorted(out.glob("compare_result_*.xlsx")):
        ws = load_workbook(xlsx, read_only=True).active
        rows = list(ws.iter_rows(values_only=True))
        head = list(rows[0])
        col = next(head.index(h) for h in ("Result", "Accuracy Reached or Not") if h in head)
        counts: dict[str, int] = {}
        for r in rows[1:]:
            counts[str(r[col])] = counts.get(str(r[col]), 0) + 1
        name = xlsx.name.rsplit("_", 1)[0]
        summary["workbooks"].append({"file": name, "rows": len(rows) - 1, col_name(head[col]): counts})
    summary["advisor"] = [a.read_text().splitlines()[:2] for a in sorted(out.glob("advisor_*.txt"))]
    if proc.returncode != 0:
        raise SystemExit(f"msprobe compare failed in {case_dir}:\n{proc.stderr[-3000:]}")
    return summary


def col_name(header: Any) -> str:
    return str(header).replace(" ", "_")


def injected_rows(case: dict[str, Any], npu: dict[str, Path], bench: dict[str, Path],
                  task: str, logs: Path) -> list[dict[str, Any]]:
    """case.json's record of each injected op: msprobe names, rank, size, measured effect."""
    out = []
    for f in case["faults"]:
        rank_name = f"rank{f['rank']}" if "rank" in f else "rank"
        n_data, b_data = faultcheck.load(npu[rank_name]), faultcheck.load(bench[rank_name])
        op, index = f["op"], int(f.get("index", 0))
        direction = op.rsplit(".", 1)[1]
        row = f"{op}.output.{index}"
        n_leaf, b_leaf = n_data[op]["output"][index], b_data[op]["output"][index]
        measured: dict[str, Any] = {}
        if task == "tensor":
            measured["rel_l2"] = tensor_rel_l2(npu[rank_name], bench[rank_name], n_leaf, b_leaf)
        elif "Norm" in n_leaf:
            measured = {f"{k}_rel_diff": round(v, 6)
                        for k, v in faultcheck.rel_err(n_leaf, b_leaf).items()}
        else:
            measured = {"md5_npu": n_leaf.get("md5"), "md5_bench": b_leaf.get("md5")}
        measured.update(injection_log(logs, f))
        out.append({"op": op, "rank": f.get("rank"), "direction": direction,
                    "rows": [row], "kind": f["kind"], "size": f["size"],
                    "what": fault_text(f), "measured": measured})
    return out


def injection_log(logs: Path, f: dict[str, Any]) -> dict[str, Any]:
    """The relative L2 error the npu side printed when it injected this fault."""
    for line in (logs / "npu.log").read_text().splitlines():
        if line.startswith("FAULT "):
            hit = json.loads(line[6:])
            if hit["op"] == f["op"] and hit["rank"] == f.get("rank", hit["rank"]):
                return {"rel_l2_at_injection": round(hit["rel_l2"], 6)}
    raise SystemExit(f"{f['op']}: the npu log has no FAULT line for it; was it injected?")


def fault_text(f: dict[str, Any]) -> str:
    target = "output" if f["op"].endswith(".forward") else "gradient (grad_input)"
    if f["kind"] == "scale":
        return f"{target} {f.get('index', 0)} multiplied by {1 + f['size']:g}"
    return (f"{target} {f.get('index', 0)} + {f['size']:g} * rms * N(0,1) "
            f"(relative L2 error ~{f['size']:g})")


def tensor_rel_l2(n_dir: Path, b_dir: Path, n_leaf: dict[str, Any],
                  b_leaf: dict[str, Any]) -> float:
    import torch

    a = torch.load(n_dir / "dump_tensor_data" / n_leaf["data_name"], weights_only=True).double()
    b = torch.load(b_dir / "dump_tensor_data" / b_leaf["data_name"], weights_only=True).double()
    return round(float((a - b).norm() / b.norm()), 6)


def expected_local(case: dict[str, Any], world: int) -> list[tuple[str, str]]:
    return [(f"rank{f['rank']}" if world > 1 else "rank", f["op"]) for f in case["faults"]]


def as_pairs(hits: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(h["rank"], h["op"]) for h in hits]


def build_case(name: str, out_root: Path, work: Path) -> dict[str, Any]:
    case = CASES[name]
    world = int(case.get("world", 1))
    case_dir = out_root / name
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    logs = work / name
    logs.mkdir(parents=True, exist_ok=True)
    sides = {
        "npu": side_argv(case, case_dir, "npu", BENCH_THREADS, case["faults"], case.get("amp")),
        "bench": side_argv(case, case_dir, "bench", BENCH_THREADS, [], None),
        "bench_noise": side_argv(case, case_dir, "bench_noise", NOISE_THREADS, [], None),
    }
    for side, argv in sides.items():
        print(f"[{name}] {side}: {display(argv)}", flush=True)
        run_side(argv, world, logs / f"{side}.log")
    counterfactual = None
    if len(case["faults"]) > 1:  # the first fault alone, for the second one's check
        cf_dir = work / name / "counterfactual"
        if cf_dir.exists():
            shutil.rmtree(cf_dir)
        cf_dir.mkdir(parents=True)
        counterfactual = side_argv(case, cf_dir, "npu", BENCH_THREADS, case["faults"][:1], None)
        print(f"[{name}] counterfactual: {display(counterfactual)}", flush=True)
        run_side(counterfactual, world, logs / "counterfactual.log")
    for cfg_name, (npu, bench) in (("compare.json", ("npu", "bench")),
                                   ("compare_noise.json", ("bench", "bench_noise"))):
        (case_dir / cfg_name).write_text(json.dumps(compare_json(world, npu, bench), indent=1) + "\n")
    doc = {
        "case": name,
        "desc": case["desc"],
        "model": model_record(),
        "msprobe_config": {"task": case["task"], "level": "L1",
                           "data_mode": [case.get("data_mode", "all")],
                           **({"summary_mode": case.get("summary_mode", "statistics")}
                              if case["task"] == "statistics" else {})},
        "world": world,
        "sides": {
            "npu": {"threads": BENCH_THREADS, "amp": case.get("amp"),
                    "faults": [dict(f) for f in case["faults"]]},
            "bench": {"threads": BENCH_THREADS, "dtype": "float32"},
            "bench_noise": {"threads": NOISE_THREADS, "dtype": "float32",
                            "what": "the bench run with torch.set_num_threads(1) instead of 2: "
                                    "real run-to-run noise (CPU GEMM/elementwise kernels split "
                                    "and reduce differently)"},
        },
        "generated_by": {
            "command": f"bench/.venv-msprobe/bin/python bench/dumpers/make_faults.py --only {name}",
            "sides": {k: display(v) for k, v in sides.items()},
            "counterfactual_npu": (display(counterfactual).replace(str(work), "$WORK")
                                   if counterfactual else None),
            "stack_json": f"paths replaced by $SITE_PACKAGES/, $PYTHON_STDLIB/, $REPO/; each "
                          f"entry cut to its {STACK_FRAMES} innermost caller frame(s) (msprobe's "
                          f"own wrapper frame dropped)",
        },
    }
    (case_dir / "case.json").write_text(json.dumps(doc, indent=1) + "\n")
    return verify_case(name, out_root, work, counterfactual_dir=(work / name / "counterfactual"
                                                               if counterfactual else None))


def model_record() -> dict[str, Any]:
    import msprobe  # noqa: F401
    import torch
    import transformers

    sys.path.insert(0, str(HERE))
    from llama_side import PRESETS

    p = dict(PRESETS["faults"])
    return {"class": "transformers.LlamaForCausalLM (random init, attn sdpa)",
            "config": {k: v for k, v in p.items() if k not in ("seq", "batch")},
            "batch": p["batch"], "seq": p["seq"], "model_seed": 1234, "data_seed": 7,
            "step": "one training step: forward, cross-entropy loss (labels = input_ids), "
                    "backward, all inside PrecisionDebugger.start()/stop()",
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "msprobe": "1.1.0", "python": sys.version.split()[0]}}


def verify_case(name: str, out_root: Path, work: Path,
                counterfactual_dir: Path | None = None) -> dict[str, Any]:
    case = CASES[name]
    world = int(case.get("world", 1))
    case_dir = out_root / name
    doc = json.loads((case_dir / "case.json").read_text())
    npu, bench = rank_dirs(case_dir / "npu"), rank_dirs(case_dir / "bench")
    noise = rank_dirs(case_dir / "bench_noise")
    ver: dict[str, Any] = {}
    if case.get("amp"):
        ver["note"] = ("bf16 vs fp32: dtypes differ, so the exact check is not meaningful; "
                       "msprobe 1.1.0 does not match bf16 with fp32 (N/A rows)")
    else:
        hits = faultcheck.local_ops(npu, bench)
        ver["local_ops_npu_vs_bench"] = hits
        want = expected_local(case, world)[:1] if len(case["faults"]) > 1 else \
            expected_local(case, world)
        if as_pairs(hits) != want:
            raise SystemExit(f"{name}: ops that differ with equal inputs {as_pairs(hits)}, "
                             f"expected {want}")
        if counterfactual_dir is not None:
            cf = rank_dirs(counterfactual_dir / "npu")
            hits2 = faultcheck.local_ops(npu, cf)
            ver["local_ops_npu_vs_counterfactual"] = hits2
            if as_pairs(hits2) != expected_local(case, world)[1:]:
                raise SystemExit(f"{name}: against the first-fault-only run {as_pairs(hits2)}, "
                                 f"expected {expected_local(case, world)[1:]}")
        elif "local_ops_npu_vs_counterfactual" in doc.get("verification", {}):  # --verify-only
            kept = doc["verification"]["local_ops_npu_vs_counterfactual"]
            ver["local_ops_npu_vs_counterfactual"] = kept
    noise_hits = faultcheck.local_ops(bench, noise)
    differing = count_differing(bench, noise)
    if differing == 0:
        raise SystemExit(f"{name}: bench_noise is identical to bench: no noise")
    ver["noise"] = {"rows_differing": differing,
                    "ops_differing_with_equal_inputs": len(noise_hits),
                    "first": [h["op"] for h in noise_hits[:5]]}
    ver["msprobe"] = {
        "compare.json": msprobe_compare(case_dir, "compare.json", work / name / "msprobe_compare"),
        "compare_noise.json": msprobe_compare(case_dir, "compare_noise.json",
                                              work / name / "msprobe_noise"),
    }
    if (work / name / "npu.log").exists():
        doc["injected"] = injected_rows(case, npu, bench, case["task"], work / name)
    else:  # --verify-only in a fresh work dir: keep the injection-time figures
        doc["injected"] = doc.get("injected", [])
    doc["expected_local"] = [{"rank": f.get("rank"), "op": f["op"]} for f in case["faults"]]
    doc["verification"] = ver
    doc["sizes_bytes"] = {side: tree_bytes(case_dir / side)
                          for side in ("npu", "bench", "bench_noise")}
    doc["sizes_bytes"]["case"] = tree_bytes(case_dir)
    (case_dir / "case.json").write_text(json.dumps(doc, indent=1) + "\n")
    local = as_pairs(ver.get("local_ops_npu_vs_bench", []))
    print(f"[{name}] ok: differing with equal inputs {local}; noise rows differing {differing}; "
          f"size {doc['sizes_bytes']['case']:,} B", flush=True)
    return doc


def count_differing(a: dict[str, Path], b: dict[str, Path]) -> int:
    """Rows (tensor/argument leaves of the dumps) whose signature differs."""
    n = 0
    for rank, a_dir in a.items():
        la, lb = faultcheck.rows(a_dir), faultcheck.rows(b[rank])
        n += sum(x != y for x, y in zip(la, lb))
    return n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(REPO / "tests" / "data" / "faults"))
    p.add_argument("--only", nargs="*", choices=sorted(CASES), help="cases (default: all)")
    p.add_argument("--work", default=None, help="logs, msprobe outputs (default: a temp dir)")
    p.add_argument("--verify-only", action="store_true", help="re-verify existing case folders")
    args = p.parse_args()
    out_root = Path(args.out).resolve()
    work = Path(args.work or tempfile.mkdtemp(prefix="faults_"))
    for name in args.only or list(CASES):
        if args.verify_only:
            verify_case(name, out_root, work)
        else:
            build_case(name, out_root, work)
    print(f"work dir (logs, msprobe outputs): {work}")


if __name__ == "__main__":
    main()
