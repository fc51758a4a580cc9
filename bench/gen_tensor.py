#!/usr/bin/env python3
"""Generate the real-data (task=tensor) benchmark workloads in msprobe 1.1.0's dump format.

    python bench/gen_tensor.py big   --gb 2    --out bench/work/tensor_big
    python bench/gen_tensor.py small --ops 5000 --out bench/work/tensor_small

big:   >= GB GiB of .pt files per side, each big tensor 16-64 MB (fp32 mostly, some fp16 and
       bf16), few ops (linear / gelu / relu / add / mul / layer_norm / zero_ forward records and
       linear / add backward records); relu outputs are half zeros, zero_ outputs all zeros.
small: ~OPS ops per side (forward + backward records), ~2 tensors of a few KB each per op
       (fp32, fp16, bf16, int64, bool, 0-d), non-tensor args, a few tensor kwargs, -inf at the
       same positions on both sides, a few npu-only / bench-only ops.

The npu tensors are the bench tensors plus noise: small for most ops, larger for a fraction of
ops (so the real-data highlight rules fire). Tensors are written with torch.save of a plain
contiguous CPU tensor (torch.from_numpy), as msprobe's dumper does; statistics in dump.json are
computed with torch the way the dumper computes them. Deterministic for given arguments.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch  # noqa: TID253  (a benchmark tool, not part of msq)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dumpgen as dg
from dumpgen import BF16, BOOL, F16, F32, I64

TORCH_DT = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16, I64: torch.int64,
            BOOL: torch.bool}
ESIZE = {F32: 4, F16: 2, BF16: 2, I64: 8, BOOL: 1}
NOISE = {"ok": 1e-4, "yellow": 3e-4, "red": 0.6}

torch.set_num_threads(2)


class TS:
    """Tensor spec inside an op template. kind: normal|relu|zeros|ones|ids|mask|scalar|masked."""

    __slots__ = ("dtype", "kind", "level", "rg", "shape")

    def __init__(self, dtype, shape, kind="normal", rg=True, level=None):
        self.dtype, self.shape, self.kind, self.rg, self.level = dtype, list(shape), kind, rg, level


# ------------------------------------------------------------------------------ tensor data
def make_pair(ts: TS, level: str, r: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(bench, npu) tensors for one spec. Float data is drawn in float32 then cast."""
    n = dg.numel(ts.shape)
    shape = tuple(ts.shape)
    lvl = ts.level or level
    if ts.dtype == I64:
        b = r.integers(0, 32000, size=n, dtype=np.int64).reshape(shape)
        return torch.from_numpy(b), torch.from_numpy(b.copy())
    if ts.dtype == BOOL:
        b = (r.random(n, dtype=np.float32) < 0.5).reshape(shape)
        return torch.from_numpy(b), torch.from_numpy(b.copy())
    if ts.kind == "zeros":
        b = np.zeros(n, dtype=np.float32)
        nn = b.copy() if lvl == "ok" else (r.standard_normal(n, dtype=np.float32) * 1e-3)
    elif ts.kind == "ones":
        b = np.ones(n, dtype=np.float32)
        nn = b.copy()
    else:
        b = r.standard_normal(n, dtype=np.float32)
        if ts.kind == "scalar":
            b = np.abs(b) + 1.0
        nn = r.standard_normal(n, dtype=np.float32)
        nn *= NOISE[lvl]
        nn += b
        if ts.kind == "relu":
            np.maximum(b, 0, out=b)
            np.maximum(nn, 0, out=nn)
        elif ts.kind == "masked":  # -inf at the same (upper-triangle-like) positions on both sides
            m = (np.arange(n) % 7) == 3
            b[m] = -np.inf
            nn[m] = -np.inf
    tb = torch.from_numpy(b.reshape(shape))
    tn = torch.from_numpy(nn.reshape(shape))
    if ts.dtype != F32:
        tb, tn = tb.to(TORCH_DT[ts.dtype]), tn.to(TORCH_DT[ts.dtype])
    return tb, tn


def _finite_ext(t: torch.Tensor, op: str) -> float:
    nan = torch.isnan(t)
    if int(nan.sum()) == t.numel():
        return float("nan")
    fin = torch.isfinite(t)
    vals = t[fin] if int(fin.sum()) > 0 else t[~nan]
    return (vals.max() if op == "max" else vals.min()).item()


def tensor_json(t: torch.Tensor, rg: bool, data_name: str) -> dict:
    """dump.json element for a tensor, statistics as msprobe's dumper computes them."""
    dtype = str(t.dtype)
    if t.numel() == 0:
        st = (None, None, None, None)
    elif t.dtype == torch.bool:
        st = (bool(t.any()), bool(t.all()), None, None)
    elif t.dim() == 0:
        v = t.item()
        st = (v, v, v, v)
    else:
        x = t if (t.is_floating_point() and t.dtype != torch.float64) else t.float()
        st = (x.max().item(), x.min().item(), x.mean().item(), x.norm().item())
    mx_f = _finite_ext(t, "max") if isinstance(st[0], float) and not math.isfinite(st[0]) else None
    mn_f = _finite_ext(t, "min") if isinstance(st[1], float) and not math.isfinite(st[1]) else None
    return dg.tensor_entry(dtype, list(t.shape), *st, requires_grad=rg, data_name=data_name,
                           max_finite=mx_f, min_finite=mn_f)


class Emitter:
    """Materialises op templates on both sides: saves .pt files, builds dump.json entries."""

    def __init__(self, out: Path, r: np.random.Generator):
        self.npu = dg.RankWriter(out / "npu", "tensor")
        self.bench = dg.RankWriter(out / "bench", "tensor")
        self.r = r
        self.pt_bytes = {"npu": 0, "bench": 0}
        self.n_tensors = 0
        self.k = 0

    def _mat(self, spec, op, path, level, sides, grad):
        """Returns {side: json} for one element; path = data_name parts after the op name."""
        if isinstance(spec, TS):
            tb, tn = make_pair(spec, level, self.r)
            name = ".".join([op] + path) + ".pt"
            res = {}
            for side, t in (("bench", tb), ("npu", tn)):
                if side not in sides:
                    continue
                w = self.bench if side == "bench" else self.npu
                self.pt_bytes[side] += w.save_tensor(name, t)
                res[side] = tensor_json(t, spec.rg and not grad, name)
            self.n_tensors += 1
            return res
        if isinstance(spec, list):
            parts = [self._mat(x, op, path + [str(i)], level, sides, grad) for i, x in enumerate(spec)]
            return {s: [p[s] for p in parts] for s in sides}
        return {s: (dict(spec) if isinstance(spec, dict) else spec) for s in sides}

    def forward(self, api_n: str, args, kwargs, outs, level="ok", sides=("npu", "bench")):
        op = f"{api_n}.forward"
        a = [self._mat(x, op, ["input", str(i)], "ok", sides, False) for i, x in enumerate(args)]
        kw = {}
        for key, v in kwargs.items():
            kw[key] = self._mat(v, op, ["kwargs", key], "ok", sides, False)
        o = [self._mat(x, op, ["output", str(i)], level, sides, False) for i, x in enumerate(outs)]
        frames = dg.stack_frames(op, self.k)
        self.k += 1
        for side in sides:
            w = self.bench if side == "bench" else self.npu
            w.add(op, {"input_args": [x[side] for x in a],
                       "input_kwargs": {k2: v2[side] for k2, v2 in kw.items()},
                       "output": [x[side] for x in o]}, frames)

    def backward(self, api_n: str, gin, gout, level="ok", sides=("npu", "bench")):
        op = f"{api_n}.backward"
        i = [self._mat(x, op, ["input", str(j)], "ok", sides, True) for j, x in enumerate(gin)]
        o = [self._mat(x, op, ["output", str(j)], level, sides, True) for j, x in enumerate(gout)]
        for side in sides:
            w = self.bench if side == "bench" else self.npu
            w.add(op, {"input": [x[side] for x in i], "output": [x[side] for x in o]})

    def close(self):
        self.npu.close()
        self.bench.close()


# ------------------------------------------------------------------------------ big workload
def gen_big(out: Path, gb: float, seed: int, red: float, yellow: float) -> dict:
    r = np.random.default_rng(seed)
    dg.prepare_workload_dir(out)
    em = Emitter(out, r)
    target = int(gb * 2**30)
    counters: dict[str, int] = {}

    def name(api):
        c = counters.get(api, 0)
        counters[api] = c + 1
        return f"{api}.{c}"

    def tokens(H, es):  # B*S so that one [B, S, H] activation is 16..64 MB
        mb = r.uniform(16, 64)
        t = int(mb * 2**20 / (H * es)) // 256 * 256
        return max(256, t)

    kinds = ["linear", "gelu", "add", "relu", "mul", "layer_norm", "zero_", "linear_bwd", "add_bwd"]
    probs = np.array([3, 1, 2, 1, 1, 1, 0.4, 2, 1], dtype=float)
    probs /= probs.sum()
    i = 0
    while em.pt_bytes["bench"] < target:
        dt = str(r.choice([F32, F16, BF16], p=[0.7, 0.15, 0.15]))
        es = ESIZE[dt]
        H = int(r.choice([2048, 4096])) if es == 4 else 4096
        B = 4
        S = tokens(H, es) // B
        act = [B, S, H]
        # error level on a fixed schedule (few ops: a random draw could give none of a kind)
        u = (i * 0.6180339887) % 1.0
        lvl = "red" if u < red else ("yellow" if u < red + yellow else "ok")
        kind = str(r.choice(kinds, p=probs)) if i > 0 else "linear"
        i += 1
        if kind == "linear":
            em.forward(name("Functional.linear"), [TS(dt, act, rg=False), TS(dt, [H, H]), TS(dt, [H])],
                       {}, [TS(dt, act)], lvl)
        elif kind == "gelu":
            em.forward(name("Functional.gelu"), [TS(dt, act)], {"approximate": dg.str_arg("none")},
                       [TS(dt, act)], lvl)
        elif kind == "relu":
            em.forward(name("Functional.relu"), [TS(dt, act)], {"inplace": dg.bool_arg(False)},
                       [TS(dt, act, "relu")], lvl)
        elif kind == "add":
            em.forward(name("Tensor.__add__"), [TS(dt, act), TS(dt, act)], {}, [TS(dt, act)], lvl)
        elif kind == "mul":
            em.forward(name("Tensor.__mul__"), [TS(dt, act), dg.float_arg(0.5)], {}, [TS(dt, act)], lvl)
        elif kind == "layer_norm":
            em.forward(name("Functional.layer_norm"),
                       [TS(dt, act), [dg.int_arg(H)], TS(dt, [H], "ones"), TS(dt, [H], "zeros"),
                        dg.float_arg(1e-05)], {}, [TS(dt, act)], lvl)
        elif kind == "zero_":
            em.forward(name("Tensor.zero_"), [TS(dt, act, "zeros")], {}, [TS(dt, act, "zeros")], "ok")
        elif kind == "linear_bwd":
            n = name("Functional.linear")
            em.backward(n, [TS(dt, act)], [TS(dt, [H]), TS(dt, act), TS(dt, [H, H])], lvl)
        elif kind == "add_bwd":
            n = name("Tensor.__add__")
            em.backward(n, [TS(dt, act)], [TS(dt, act), TS(dt, act)], lvl)
    em.close()
    return _finish(out, em, "tensor-big", {"gb": gb, "seed": seed, "red": red, "yellow": yellow})


# ------------------------------------------------------------------------------ small workload
def gen_small(out: Path, ops: int, seed: int, red: float, yellow: float, extra: int) -> dict:
    r = np.random.default_rng(seed)
    dg.prepare_workload_dir(out)
    em = Emitter(out, r)
    counters: dict[str, int] = {}

    def small_shape():
        return [int(r.choice([4, 8, 16])), int(r.choice([32, 64, 128]))]  # 0.5-8 KB in fp32

    def pick_dt():
        return str(r.choice([F32, F16, BF16], p=[0.8, 0.1, 0.1]))

    # (api, weight, builder(dt, shape) -> (args, kwargs, outs, grad_in, grad_out or None))
    def relu(dt, s):
        return [TS(dt, s)], {"inplace": dg.bool_arg(False)}, [TS(dt, s, "relu")], [TS(dt, s)], [TS(dt, s)]

    def add(dt, s):
        return [TS(dt, s), TS(dt, s)], {}, [TS(dt, s)], [TS(dt, s)], [TS(dt, s), TS(dt, s)]

    def mul(dt, s):
        return [TS(dt, s), dg.float_arg(0.5)], {}, [TS(dt, s)], [TS(dt, s)], [TS(dt, s)]

    def linear(dt, s):
        o = int(r.choice([16, 32, 64]))
        return ([TS(dt, s, rg=False), TS(dt, [o, s[1]]), TS(dt, [o])], {}, [TS(dt, [s[0], o])],
                [TS(dt, [s[0], o])], [TS(dt, [o]), None, TS(dt, [s[1], o])])

    def linear_kw(dt, s):  # tensor kwargs: rows named ...forward.kwargs.weight
        o = int(r.choice([16, 32]))
        return ([TS(dt, s, rg=False)], {"weight": TS(dt, [o, s[1]]), "bias": TS(dt, [o])},
                [TS(dt, [s[0], o])], None, None)

    def view(dt, s):
        return ([TS(dt, s), dg.int_arg(s[0] * 2), dg.int_arg(s[1] // 2)], {},
                [TS(dt, [s[0] * 2, s[1] // 2])], [TS(dt, [s[0] * 2, s[1] // 2])], [TS(dt, s)])

    def cat(dt, s):
        return ([[TS(dt, s), TS(dt, s)]], {"dim": dg.int_arg(0)}, [TS(dt, [2 * s[0], s[1]])],
                [TS(dt, [2 * s[0], s[1]])], [TS(dt, s), TS(dt, s)])

    def sum_(dt, s):
        return ([TS(dt, s)], {"dim": dg.int_arg(1), "keepdim": dg.bool_arg(True)},
                [TS(dt, [s[0], 1])], None, None)

    def gt(dt, s):
        return [TS(dt, s), dg.float_arg(0.0)], {}, [TS(BOOL, s, "mask", rg=False)], None, None

    def masked_fill(dt, s):
        return ([TS(F32, s), TS(BOOL, s, "mask", rg=False), dg.float_arg(-math.inf)], {},
                [TS(F32, s, "masked")], None, None)

    def embedding(dt, s):
        return ([TS(I64, [s[0]], "ids", rg=False), TS(F32, [64, s[1]]), None, None,
                 dg.float_arg(2.0), dg.bool_arg(False), dg.bool_arg(False)], {},
                [TS(F32, [s[0], s[1]])], [TS(F32, [s[0], s[1]])], [TS(F32, [64, s[1]])])

    def cross_entropy(dt, s):
        return ([TS(F32, s), TS(I64, [s[0]], "ids", rg=False)], {"reduction": dg.str_arg("mean")},
                [TS(F32, [], "scalar")], [TS(F32, [], "scalar")], [TS(F32, s)])

    def layer_norm(dt, s):
        return ([TS(dt, s), [dg.int_arg(s[1])], TS(dt, [s[1]], "ones"), TS(dt, [s[1]], "zeros"),
                 dg.float_arg(1e-05)], {}, [TS(dt, s)], [TS(dt, s)],
                [TS(dt, s), TS(dt, [s[1]]), TS(dt, [s[1]])])

    table = [("Functional.relu", 9, relu), ("Tensor.__add__", 2, add), ("Tensor.__mul__", 8, mul),
             ("Functional.linear", 1.5, linear), ("Functional.linear", 0.3, linear_kw),
             ("Tensor.view", 6, view), ("Torch.cat", 0.5, cat), ("Tensor.sum", 3, sum_),
             ("Tensor.__gt__", 2, gt), ("Tensor.masked_fill", 0.5, masked_fill),
             ("Functional.embedding", 0.3, embedding), ("Functional.cross_entropy", 0.3, cross_entropy),
             ("Functional.layer_norm", 0.5, layer_norm)]
    w = np.array([t[1] for t in table], dtype=float)
    w /= w.sum()

    # forward ops first; backward records (reverse order) for ~70% of those that have one.
    base = ops - extra
    n_fwd = int(base / 1.6)
    plan = []
    for _ in range(n_fwd):
        api, _w, b = table[int(r.choice(len(table), p=w))]
        args, kwargs, outs, gin, gout = b(pick_dt(), small_shape())
        c = counters.get(api, 0)
        counters[api] = c + 1
        plan.append((f"{api}.{c}", args, kwargs, outs, gin, gout))
    bwd = [(p[0], p[4], p[5]) for p in reversed(plan) if p[4] is not None]
    want_bwd = base - n_fwd
    if len(bwd) > want_bwd:
        keep = np.sort(r.choice(len(bwd), size=want_bwd, replace=False))
        bwd = [bwd[k] for k in keep]
    levels = r.choice(["ok", "yellow", "red"], size=len(plan) + len(bwd),
                      p=[1 - red - yellow, yellow, red])
    npu_at = {int(n_fwd * j / (extra + 1)) for j in range(1, extra + 1)}
    bench_at = {int(n_fwd * (j + 0.4) / (extra + 1)) for j in range(1, extra + 1)}
    ex = {"npu": 0, "bench": 0}
    for i, (n, args, kwargs, outs, _gi, _go) in enumerate(plan):
        if i in npu_at:  # npu-only API (no tensor kwargs: msprobe 1.1.0 would crash, spec §3.5)
            s = small_shape()
            em.forward(f"Functional.hardtanh.{ex['npu']}", [TS(F32, s)], {}, [TS(F32, s)],
                       sides=("npu",))
            ex["npu"] += 1
        if i in bench_at:
            s = small_shape()
            em.forward(f"Tensor.flatten.{ex['bench']}", [TS(F32, s)], {}, [TS(F32, [s[0] * s[1]])],
                       sides=("bench",))
            ex["bench"] += 1
        em.forward(n, args, kwargs, outs, str(levels[i]))
    for j, (n, gin, gout) in enumerate(bwd):
        em.backward(n, gin, gout, str(levels[len(plan) + j]))
    em.close()
    return _finish(out, em, "tensor-small",
                   {"ops": ops, "seed": seed, "red": red, "yellow": yellow, "extra": extra})


def _finish(out: Path, em: Emitter, workload: str, params: dict) -> dict:
    dg.write_compare_json(out)
    rows = {s: dg.count_rows(w.data) for s, w in (("npu", em.npu), ("bench", em.bench))}
    meta = {
        "workload": workload,
        "generator": "bench/gen_tensor.py",
        "params": params,
        "ops": {"npu": len(em.npu.data), "bench": len(em.bench.data)},
        "rows": {s: v[0] for s, v in rows.items()},
        "tensor_rows": {s: v[1] for s, v in rows.items()},
        "pt_bytes": em.pt_bytes,
        "total_bytes": dg.dir_bytes(out / "npu") + dg.dir_bytes(out / "bench"),
    }
    return meta


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="kind", required=True)
    here = Path(__file__).resolve().parent / "work"
    pb = sub.add_parser("big", help=">= GB GiB of 16-64 MB tensors per side")
    pb.add_argument("--gb", type=float, default=2.0, help="GiB of .pt per side (default 2)")
    pb.add_argument("--out", type=Path, default=here / "tensor_big")
    pb.add_argument("--red", type=float, default=0.1)
    pb.add_argument("--yellow", type=float, default=0.15)
    ps = sub.add_parser("small", help="many small tensors")
    ps.add_argument("--ops", type=int, default=5000, help="ops per side (default 5000)")
    ps.add_argument("--out", type=Path, default=here / "tensor_small")
    ps.add_argument("--red", type=float, default=0.05)
    ps.add_argument("--yellow", type=float, default=0.1)
    ps.add_argument("--extra", type=int, default=3, help="side-only ops on each side")
    for p in (pb, ps):
        p.add_argument("--seed", type=int, default=20261129)
    a = ap.parse_args(argv)
    t0 = time.time()
    if a.kind == "big":
        meta = gen_big(a.out, a.gb, a.seed, a.red, a.yellow)
    else:
        meta = gen_small(a.out, a.ops, a.seed, a.red, a.yellow, a.extra)
    meta["gen_seconds"] = round(time.time() - t0, 2)
    dg.write_meta(a.out, meta)
    print(f"wrote {a.out}: ops npu={meta['ops']['npu']} bench={meta['ops']['bench']}, rows "
          f"{meta['rows']['npu']} ({meta['tensor_rows']['npu']} tensors) / {meta['rows']['bench']}, "
          f".pt {meta['pt_bytes']['npu'] / 2**30:.2f} / {meta['pt_bytes']['bench'] / 2**30:.2f} GiB, "
          f"{meta['gen_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
