"""Exact first-divergence check of two msprobe dumps of the same API sequence.

An op "differs locally" when one of its outputs differs while all of its inputs are equal. Equal
means: the same exact statistics (dtype, shape, Max, Min, Mean, Norm) in statistics mode, the same
md5 (+ dtype, shape) in md5 mode, bit-identical tensor content in tensor mode. What counts as an
input of an op:
- forward op: its input_args and input_kwargs;
- backward op `X.N.backward`: its `input` (the incoming gradients) AND the inputs and outputs of
  `X.N.forward` (the tensors autograd saved for it);
- Distributed op: also the same op's inputs on every other rank (a collective mixes ranks).
So on a fault-free path nothing differs; the injected op is the first op that differs locally
(inputs equal, outputs not), and nothing downstream of it does (its inputs differ).

Stdlib + torch (tensor mode only). Used by make_faults.py; runnable on its own:
    python bench/dumpers/faultcheck.py NPU_RANK_DIR BENCH_RANK_DIR
"""
from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Leaf = tuple[str, str]  # (path inside the entry, signature)


def load(rank_dir: Path) -> dict[str, Any]:
    """dump.json's `data` of one rank directory (msprobe's NaN/Infinity tokens accepted)."""
    doc = json.loads((rank_dir / "dump.json").read_text())
    data: dict[str, Any] = doc["data"]
    return data


def _leaves(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict) and "type" in node:
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, f"{path}.{i}")


STAT_KEYS = ("type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "md5", "value")


def _signature(leaf: dict[str, Any], rank_dir: Path) -> str:
    sig = {k: leaf[k] for k in STAT_KEYS if k in leaf}
    if "data_name" in leaf:  # tensor mode: the bytes themselves
        sig["sha"] = _tensor_sha(rank_dir / "dump_tensor_data" / leaf["data_name"])
    return json.dumps(sig, sort_keys=True)


_SHA_CACHE: dict[Path, str] = {}


def _tensor_sha(path: Path) -> str:
    if path not in _SHA_CACHE:
        import torch

        t = torch.load(path, weights_only=True)
        if t.dtype == torch.bfloat16:
            t = t.float()
        _SHA_CACHE[path] = hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()
    return _SHA_CACHE[path]


def io_leaves(data: dict[str, Any], op: str, rank_dir: Path) -> tuple[list[Leaf], list[Leaf]]:
    """(inputs, outputs) of one dump entry as (path, signature) pairs."""
    entry = data[op]
    ins = [(p, _signature(x, rank_dir)) for key in ("input_args", "input_kwargs", "input")
           for p, x in _leaves(entry.get(key), key)]
    outs = [(p, _signature(x, rank_dir)) for p, x in _leaves(entry.get("output"), "output")]
    if op.endswith(".backward"):
        fwd = op[: -len("backward")] + "forward"
        if fwd in data:
            f_ins, f_outs = io_leaves(data, fwd, rank_dir)
            ins += [("saved." + p, s) for p, s in f_ins + f_outs]
    return ins, outs


def rows(rank_dir: Path) -> list[Leaf]:
    """Every row of a dump (as msprobe's compare flattens it) with its signature."""
    data = load(rank_dir)
    return [(f"{op}{p}", _signature(x, rank_dir)) for op, entry in data.items()
            for p, x in _leaves(entry, "")]


def local_ops(npu: dict[str, Path], bench: dict[str, Path]) -> list[dict[str, Any]]:
    """Every op that differs locally, in dump order per rank. npu/bench: rank name -> rank dir."""
    n_data = {r: load(d) for r, d in npu.items()}
    b_data = {r: load(d) for r, d in bench.items()}
    found = []
    for rank in sorted(npu):
        nd, bd = n_data[rank], b_data[rank]
        if list(nd) != list(bd):
            raise SystemExit(f"rank {rank}: the two dumps do not have the same API sequence")
        for op in nd:
            n_in, n_out = io_leaves(nd, op, npu[rank])
            b_in, b_out = io_leaves(bd, op, bench[rank])
            if op.startswith("Distributed."):
                for peer in sorted(npu):
                    if peer != rank and op in n_data[peer]:
                        n_in += io_leaves(n_data[peer], op, npu[peer])[0]
                        b_in += io_leaves(b_data[peer], op, bench[peer])[0]
            if n_in == b_in and n_out != b_out:
                differing = [p for (p, s), (_, t) in zip(n_out, b_out) if s != t]
                found.append({"rank": rank, "op": op, "outputs": differing})
    return found


def rel_err(npu_leaf: dict[str, Any], bench_leaf: dict[str, Any]) -> dict[str, float]:
    """Relative differences of the statistics of one tensor row (for the reports)."""
    out = {}
    for key in ("Max", "Min", "Mean", "Norm"):
        a, b = npu_leaf.get(key), bench_leaf.get(key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b != 0:
            out[key] = abs(a - b) / abs(b)
    return out


def main() -> None:
    npu, bench = Path(sys.argv[1]), Path(sys.argv[2])
    for hit in local_ops({"": npu}, {"": bench}):
        print(hit["op"], hit["outputs"])


if __name__ == "__main__":
    main()
