#!/usr/bin/env python3
"""Generate the statistics-mode benchmark workload (msprobe 1.1.0 L1 dump format, task=statistics).

    python bench/gen_stat.py --ops 20000 --out bench/work/stat

Per side: ~OPS ops (forward APIs in execution order, then the backward records of those with a
gradient in reverse order, as a training step dumps them), ~5 rows per op, ~20 MB dump.json for
20,000 ops. A mix of Functional/Torch/Tensor/VF/Distributed APIs with positional and keyword
arguments, non-tensor arguments (int, float, bool, str, slice, torch.Size, torch.dtype, null, {}),
nested lists, tuple outputs, fp32/fp16/bf16/int64/bool tensors, 0-d tensors, -inf statistics.

The npu side is the bench side with perturbed statistics: every float statistic gets a small
relative noise; a fraction of ops get a moderate (--yellow) or large (--red) error on their
outputs' Max, and a few (--overflow) an inf/nan Max, so that yellow/red rows occur. The npu side has
--extra ops that the bench side lacks (Functional.hardtanh) and the bench side as many that the
npu side lacks (Tensor.flatten); the two counts are equal so msprobe's queue matching is not
truncated (spec §3.1).

Deterministic for a given (--seed, --ops, fractions). Needs numpy only.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dumpgen as dg
from dumpgen import BF16, BOOL, F16, F32, I64

FLOATS = (F32, F16, BF16)


class T:
    """A tensor placeholder in an op template; `kind` shapes its statistics."""

    __slots__ = ("dtype", "kind", "rg", "shape")

    def __init__(self, dtype: str, shape: list[int], rg: bool = True, kind: str = "normal"):
        self.dtype, self.shape, self.rg, self.kind = dtype, list(shape), rg, kind


# ---------------------------------------------------------------------------------- templates
# Each builder: (rng, dtype) -> (input_args, input_kwargs, output). Dimensions are drawn per op.
def _dims(r: np.random.Generator) -> tuple[int, int, int]:
    return (int(r.choice([1, 2, 4, 8])), int(r.choice([128, 256, 512, 1024, 2048])),
            int(r.choice([256, 512, 768, 1024, 2048, 4096])))


def b_linear(r, dt):
    B, S, H = _dims(r)
    O = int(r.choice([H, 3 * H, 4 * H]))
    return ([T(dt, [B, S, H], bool(r.random() < 0.5)), T(dt, [O, H]), T(dt, [O])], {},
            [T(dt, [B, S, O])])


def b_relu(r, dt):
    B, S, H = _dims(r)
    return [T(dt, [B, S, H])], {"inplace": dg.bool_arg(False)}, [T(dt, [B, S, H], kind="relu")]


def b_gelu(r, dt):
    B, S, H = _dims(r)
    return [T(dt, [B, S, H])], {"approximate": dg.str_arg("none")}, [T(dt, [B, S, H], kind="relu")]


def b_layer_norm(r, dt):
    B, S, H = _dims(r)
    return ([T(dt, [B, S, H]), [dg.int_arg(H)], T(dt, [H], kind="ones"), T(dt, [H], kind="zeros"),
             dg.float_arg(1e-05)], {}, [T(dt, [B, S, H], kind="normed")])


def b_dropout(r, dt):
    B, S, H = _dims(r)
    return ([T(dt, [B, S, H])],
            {"p": dg.float_arg(0.1), "training": dg.bool_arg(True), "inplace": dg.bool_arg(False)},
            [T(dt, [B, S, H])])


def b_softmax(r, dt):
    B, S, _ = _dims(r)
    h = int(r.choice([8, 16, 32]))
    return ([T(dt, [B, h, S, S])],
            {"dim": dg.int_arg(-1), "_stacklevel": dg.int_arg(3), "dtype": None},
            [T(dt, [B, h, S, S], kind="prob")])


def b_torch_softmax(r, dt):
    B, S, _ = _dims(r)
    # positional dtype is dumped as {} (spec: all-None row)
    return [T(dt, [B, S, 10]), dg.int_arg(1), {}], {}, [T(dt, [B, S, 10], kind="prob")]


def b_sdpa(r, dt):
    B, S, _ = _dims(r)
    h, d = int(r.choice([8, 16, 32])), int(r.choice([64, 128]))
    q = [B, h, S, d]
    return ([T(dt, q), T(dt, q), T(dt, q)],
            {"attn_mask": None, "dropout_p": dg.float_arg(0.0), "is_causal": dg.bool_arg(True)},
            [T(dt, q)])


def b_embedding(r, dt):
    B, S, H = _dims(r)
    V = int(r.choice([32000, 50257, 65536]))
    return ([T(I64, [B, S], False, kind="ids"), T(dt, [V, H]), None, None, dg.float_arg(2.0),
             dg.bool_arg(False), dg.bool_arg(False)], {}, [T(dt, [B, S, H])])


def b_cross_entropy(r, dt):
    B, S, _ = _dims(r)
    V = int(r.choice([32000, 50257]))
    return ([T(F32, [B * S, V]), T(I64, [B * S], False, kind="ids")],
            {"reduction": dg.str_arg("mean")}, [T(F32, [], kind="scalar")])


def b_matmul(r, dt):
    B, S, _ = _dims(r)
    h, d = int(r.choice([8, 16, 32])), int(r.choice([64, 128]))
    return [T(dt, [B, h, S, d]), T(dt, [B, h, d, S])], {}, [T(dt, [B, h, S, S])]


def b_cat(r, dt):
    B, S, H = _dims(r)
    n = int(r.integers(2, 4))
    return ([[T(dt, [B, S, H]) for _ in range(n)]], {"dim": dg.int_arg(-1)},
            [T(dt, [B, S, n * H])])


def b_split(r, dt):
    B, S, H = _dims(r)
    return ([T(dt, [B, S, 2 * H]), [dg.int_arg(H), dg.int_arg(H)]], {"dim": dg.int_arg(-1)},
            [T(dt, [B, S, H]), T(dt, [B, S, H])])


def b_add(r, dt):
    B, S, H = _dims(r)
    return [T(dt, [B, S, H]), T(dt, [B, S, H])], {}, [T(dt, [B, S, H])]


def b_add_(r, dt):
    B, S, H = _dims(r)
    return [T(dt, [B, S, H]), T(dt, [B, S, H])], {"alpha": dg.int_arg(1)}, [T(dt, [B, S, H])]


def b_mul_scalar(r, dt):
    B, S, H = _dims(r)
    return [T(dt, [B, S, H]), dg.float_arg(0.125)], {}, [T(dt, [B, S, H])]


def b_view(r, dt):
    B, S, H = _dims(r)
    h = 16
    return ([T(dt, [B, S, H]), dg.int_arg(B), dg.int_arg(S), dg.int_arg(h), dg.int_arg(H // h)],
            {}, [T(dt, [B, S, h, H // h])])


def b_transpose(r, dt):
    B, S, H = _dims(r)
    h = 16
    return ([T(dt, [B, S, h, H // h]), dg.int_arg(1), dg.int_arg(2)], {},
            [T(dt, [B, h, S, H // h])])


def b_reshape(r, dt):
    B, S, H = _dims(r)
    return ([T(dt, [B, S, H]), dg.scalar("torch.Size", [B * S, H])], {}, [T(dt, [B * S, H])])


def b_getitem(r, dt):
    B, S, H = _dims(r)
    return ([T(dt, [B, S, H]),
             [dg.scalar("slice", [None, None, None]), dg.scalar("slice", [None, S // 2, None])]],
            {}, [T(dt, [B, S // 2, H])])


def b_contiguous(r, dt):
    B, S, H = _dims(r)
    return [T(dt, [B, S, H])], {}, [T(dt, [B, S, H])]


def b_to(r, dt):
    B, S, H = _dims(r)
    return ([T(dt, [B, S, H])], {"dtype": dg.scalar("torch.dtype", "torch.float32")},
            [T(F32, [B, S, H])])


def b_masked_fill(r, dt):
    B, S, _ = _dims(r)
    h = int(r.choice([8, 16]))
    return ([T(dt, [B, h, S, S]), T(BOOL, [1, 1, S, S], False, kind="mask"),
             dg.float_arg(-math.inf)], {}, [T(dt, [B, h, S, S], kind="masked")])


def b_max(r, dt):
    B, S, H = _dims(r)
    return ([T(dt, [B, S, H])], {"dim": dg.int_arg(-1)},
            [T(dt, [B, S]), T(I64, [B, S], False, kind="ids")])


def b_gt(r, dt):
    B, S, H = _dims(r)
    return [T(dt, [B, S, H]), dg.float_arg(0.0)], {}, [T(BOOL, [B, S, H], False, kind="mask")]


def b_where(r, dt):
    B, S, H = _dims(r)
    return ([T(BOOL, [B, S, H], False, kind="mask"), T(dt, [B, S, H]), T(dt, [B, S, H])], {},
            [T(dt, [B, S, H])])


def b_tanh(r, dt):
    B, S, H = _dims(r)
    return [T(dt, [B, S, H])], {}, [T(dt, [B, S, H], kind="prob")]


def b_sum(r, dt):
    B, S, H = _dims(r)
    return ([T(dt, [B, S, H])],
            {"dim": dg.int_arg(-1), "keepdim": dg.bool_arg(True),
             "dtype": dg.scalar("torch.dtype", "torch.float32")},
            [T(F32, [B, S, 1])])


def b_lstm(r, dt):
    B, S, H = _dims(r)
    H = min(H, 1024)
    w = [T(F32, [4 * H, H]), T(F32, [4 * H, H]), T(F32, [4 * H]), T(F32, [4 * H])]
    return ([T(F32, [S, B, H]), [T(F32, [1, B, H], False, "zeros"), T(F32, [1, B, H], False, "zeros")],
             w, dg.bool_arg(True), dg.int_arg(1), dg.float_arg(0.0), dg.bool_arg(True),
             dg.bool_arg(False), dg.bool_arg(True)], {},
            [T(F32, [S, B, H]), T(F32, [1, B, H]), T(F32, [1, B, H])])


def b_all_reduce(r, dt):
    _b, _s, H = _dims(r)
    return [T(F32, [H, H], False)], {"op": None}, [T(F32, [H, H], False), None]


def b_conv2d(r, dt):
    B = int(r.choice([1, 2, 4, 8, 16]))
    C, O = int(r.choice([32, 64, 128, 256])), int(r.choice([64, 128, 256, 512]))
    HW, k = int(r.choice([14, 28, 56, 112])), int(r.choice([1, 3]))
    s = int(r.choice([1, 2]))
    pair = lambda v: [dg.int_arg(v), dg.int_arg(v)]
    return ([T(dt, [B, C, HW, HW], bool(r.random() < 0.3)), T(dt, [O, C, k, k]), T(dt, [O]),
             pair(s), pair(k // 2), pair(1), dg.int_arg(1)], {},
            [T(dt, [B, O, HW // s, HW // s])])


def b_batch_norm(r, dt):
    B, C, HW = int(r.choice([2, 4, 8])), int(r.choice([64, 128, 256])), int(r.choice([14, 28, 56]))
    return ([T(dt, [B, C, HW, HW]), T(F32, [C], False), T(F32, [C], False, kind="ones"),
             T(dt, [C], kind="ones"), T(dt, [C], kind="zeros"), dg.bool_arg(True),
             dg.float_arg(0.1), dg.float_arg(1e-05)], {}, [T(dt, [B, C, HW, HW], kind="normed")])


def b_permute(r, dt):
    B, S, H = _dims(r)
    h = 16
    return ([T(dt, [B, S, h, H // h]), dg.int_arg(0), dg.int_arg(2), dg.int_arg(1), dg.int_arg(3)],
            {}, [T(dt, [B, h, S, H // h])])


def b_pad(r, dt):
    B, C, HW = int(r.choice([2, 4, 8])), int(r.choice([64, 128])), int(r.choice([28, 56]))
    return ([T(dt, [B, C, HW, HW]), [dg.int_arg(1)] * 4],
            {"mode": dg.str_arg("constant"), "value": dg.float_arg(0.0)},
            [T(dt, [B, C, HW + 2, HW + 2])])


def b_interpolate(r, dt):
    B, C, HW = int(r.choice([2, 4, 8])), int(r.choice([64, 128])), int(r.choice([14, 28]))
    return ([T(dt, [B, C, HW, HW])],
            {"size": None, "scale_factor": dg.float_arg(2.0), "mode": dg.str_arg("nearest"),
             "align_corners": None, "recompute_scale_factor": None, "antialias": dg.bool_arg(False)},
            [T(dt, [B, C, 2 * HW, 2 * HW])])


def b_expand(r, dt):
    B, S, H = _dims(r)
    return ([T(dt, [1, S, H]), dg.int_arg(B), dg.int_arg(-1), dg.int_arg(-1)], {},
            [T(dt, [B, S, H])])


# (op prefix.api, weight, builder)
TEMPLATES = [
    ("Functional.linear", 9, b_linear),
    ("Functional.conv2d", 13, b_conv2d),
    ("Functional.batch_norm", 4, b_batch_norm),
    ("Functional.pad", 3, b_pad),
    ("Functional.interpolate", 1, b_interpolate),
    ("Tensor.permute", 5, b_permute),
    ("Tensor.expand", 1, b_expand),
    ("Functional.relu", 2, b_relu),
    ("Functional.gelu", 2, b_gelu),
    ("Functional.layer_norm", 6, b_layer_norm),
    ("Functional.dropout", 5, b_dropout),
    ("Functional.softmax", 4, b_softmax),
    ("Functional.scaled_dot_product_attention", 3, b_sdpa),
    ("Functional.embedding", 1, b_embedding),
    ("Functional.cross_entropy", 1, b_cross_entropy),
    ("Torch.softmax", 1, b_torch_softmax),
    ("Torch.matmul", 4, b_matmul),
    ("Torch.cat", 2, b_cat),
    ("Torch.split", 2, b_split),
    ("Torch.where", 1, b_where),
    ("Torch.tanh", 1, b_tanh),
    ("Tensor.__add__", 6, b_add),
    ("Tensor.add_", 2, b_add_),
    ("Tensor.__mul__", 3, b_mul_scalar),
    ("Tensor.view", 9, b_view),
    ("Tensor.transpose", 4, b_transpose),
    ("Tensor.reshape", 3, b_reshape),
    ("Tensor.__getitem__", 2, b_getitem),
    ("Tensor.contiguous", 1, b_contiguous),
    ("Tensor.to", 1, b_to),
    ("Tensor.masked_fill", 1, b_masked_fill),
    ("Tensor.max", 1, b_max),
    ("Tensor.__gt__", 1, b_gt),
    ("Tensor.sum", 1, b_sum),
    ("VF.lstm", 0.3, b_lstm),
    ("Distributed.all_reduce", 0.5, b_all_reduce),
]
EXTRA_NPU = ("Functional.hardtanh", b_relu)   # npu-only API
EXTRA_BENCH = ("Tensor.flatten", b_contiguous)  # bench-only API


# ---------------------------------------------------------------------------------- statistics
def bench_stats(t: T, r: np.random.Generator, grad: bool) -> tuple:
    """(Max, Min, Mean, Norm) of a bench tensor, as msprobe would record them."""
    n = dg.numel(t.shape)
    if n == 0:
        return None, None, None, None
    if t.dtype == BOOL:
        return True, False, None, None
    if t.dtype == I64:
        hi = float(r.integers(1, 50000))
        return hi, 0.0, dg.round_f32(hi * r.uniform(0.4, 0.6)), dg.round_f32(hi * 0.58 * math.sqrt(n))
    rnd = dg.ROUND[t.dtype]
    s = 10 ** r.uniform(-5, -2) if grad else 10 ** r.uniform(-1.5, 0.7)
    if t.kind == "scalar" or not t.shape:
        v = rnd(s * r.uniform(1, 10))
        return v, v, v, v
    k = t.kind
    if k == "zeros" and not grad:
        return 0.0, 0.0, 0.0, 0.0
    if k == "ones" and not grad:
        return 1.0, 1.0, 1.0, dg.round_f32(math.sqrt(n))
    mx = s * r.uniform(2, 5)
    mn = -s * r.uniform(2, 5)
    mean = s * r.normal(0, 0.05)
    norm = s * math.sqrt(n) * r.uniform(0.6, 1.1)
    if not grad:
        if k == "relu":
            mn, mean = 0.0, s * r.uniform(0.2, 0.5)
        elif k == "prob":
            mx, mn, mean = r.uniform(0.3, 1.0), r.uniform(0, 1e-3), 1.0 / max(2, t.shape[-1])
            norm = math.sqrt(n) * mean * r.uniform(1, 3)
        elif k == "normed":
            mean = r.normal(0, 1e-8)
            norm = math.sqrt(n) * r.uniform(0.95, 1.0)
        elif k == "masked":
            return rnd(mx), -math.inf, -math.inf, math.inf
    return rnd(mx), rnd(mn), rnd(mean), dg.round_f32(norm)


def npu_stats(t: T, st: tuple, r: np.random.Generator, level: str) -> tuple:
    """Perturb bench statistics for the npu side. level: ok | yellow | red | overflow."""
    mx, mn, mean, norm = st
    if t.dtype not in FLOATS or mx is None or isinstance(mx, bool):
        return st
    rnd = dg.ROUND[t.dtype]
    eps = 1e-4 if t.dtype == F32 else 2e-3

    def jit(v):
        if not math.isfinite(v) or v == 0.0:
            return v
        return rnd(v * (1.0 + eps * r.normal()))

    same_scalar = mx == mn == mean == norm
    mx2, mn2 = jit(mx), jit(mn)
    norm2 = norm if not math.isfinite(norm) else dg.round_f32(norm * (1.0 + eps * r.normal()))
    mean2 = mean if not math.isfinite(mean) else rnd(mean + abs(mx) * eps * 0.1 * r.normal())
    if level == "yellow":
        mx2 = rnd(mx + abs(mx) * r.uniform(0.15, 0.45))
    elif level == "red":
        mx2 = rnd(mx + abs(mx) * r.uniform(0.6, 3.0) + 0.05)
    elif level == "overflow":
        mx2 = math.inf if r.random() < 0.5 else math.nan
    if same_scalar and level == "ok":
        mn2 = mean2 = norm2 = mx2
    return mx2, mn2, mean2, norm2


def materialize(spec, r: np.random.Generator, grad: bool, level: str):
    """Turn a template structure into (bench_json, npu_json), sharing one draw of statistics."""
    if isinstance(spec, T):
        st = bench_stats(spec, r, grad)
        nst = npu_stats(spec, st, r, level)
        rg = spec.rg and not grad
        # *_except_inf_nan: the finite extreme (masked_fill -inf rows; npu overflow rows)
        mn_fin = dg.ROUND[spec.dtype](-abs(st[0]) * 0.9) if st[1] == -math.inf else None
        mx_fin = st[0] if isinstance(st[0], float) and math.isfinite(st[0]) else None
        b = dg.tensor_entry(spec.dtype, spec.shape, *st, requires_grad=rg, min_finite=mn_fin)
        n = dg.tensor_entry(spec.dtype, spec.shape, *nst, requires_grad=rg, max_finite=mx_fin,
                            min_finite=mn_fin)
        return b, n
    if isinstance(spec, list):
        pairs = [materialize(x, r, grad, level) for x in spec]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if isinstance(spec, dict) and spec and "type" not in spec:  # kwargs dict
        pairs = {k: materialize(v, r, grad, level) for k, v in spec.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    # non-tensor element, null or {}: identical on both sides (fresh copies)
    return (dict(spec) if isinstance(spec, dict) else spec), (dict(spec) if isinstance(spec, dict) else spec)


def grad_spec(args, outputs):
    """Backward record: input = grads of float outputs, output = grads of the top-level args."""
    gin = [T(o.dtype, o.shape, False) for o in _flat(outputs) if o.dtype in FLOATS]
    gout = []
    for a in args:
        if isinstance(a, T):
            gout.append(T(a.dtype, a.shape, False) if a.dtype in FLOATS and a.rg else None)
        elif isinstance(a, list) and a and all(isinstance(x, T) for x in a):
            gout.extend(T(x.dtype, x.shape, False) if x.dtype in FLOATS and x.rg else None for x in a)
    while gout and gout[-1] is None:
        gout.pop()
    return gin, gout


def _flat(x):
    if isinstance(x, T):
        yield x
    elif isinstance(x, list):
        for y in x:
            yield from _flat(y)


# ---------------------------------------------------------------------------------- generation
def generate(out: Path, ops: int, seed: int, red: float, yellow: float, overflow: float,
             extra: int, bwd_frac: float) -> dict:
    t0 = time.time()
    r = np.random.default_rng(seed)
    dg.prepare_workload_dir(out)
    npu_w = dg.RankWriter(out / "npu", "statistics")
    bench_w = dg.RankWriter(out / "bench", "statistics")

    names = [t[0] for t in TEMPLATES]
    weights = np.array([t[1] for t in TEMPLATES], dtype=float)
    weights /= weights.sum()
    builders = {t[0]: t[2] for t in TEMPLATES}
    base_ops = ops - extra  # ops per side excluding the side-only extras
    n_fwd = max(1, round(base_ops / (1.0 + bwd_frac)))
    choice = r.choice(len(names), size=n_fwd, p=weights)
    dtypes = r.choice([F32, F16, BF16], size=n_fwd, p=[0.75, 0.15, 0.10])
    levels = r.choice(["ok", "yellow", "red", "overflow"], size=n_fwd * 2,
                      p=[1 - red - yellow - overflow, yellow, red, overflow])
    counters: dict[str, int] = {}
    fwd = []  # (name, args, kwargs, outputs)
    for i in range(n_fwd):
        api = names[choice[i]]
        args, kwargs, outs = builders[api](r, str(dtypes[i]))
        c = counters.get(api, 0)
        counters[api] = c + 1
        fwd.append((f"{api}.{c}", args, kwargs, outs))
    # which forward ops get a backward record (those with a differentiable input + float output)
    bwd = []
    for name, args, _kw, outs in reversed(fwd):
        gin, gout = grad_spec(args, outs)
        if gin and any(g is not None for g in gout):
            bwd.append((name, gin, gout))
    want_bwd = base_ops - n_fwd
    if len(bwd) > want_bwd:
        keep = np.sort(r.choice(len(bwd), size=want_bwd, replace=False))
        bwd = [bwd[k] for k in keep]

    # positions of the side-only extra ops (within the forward part, away from both ends)
    def spots(k, offset):
        return {int(n_fwd * (j + offset) / (k + 1)) for j in range(1, k + 1)}

    npu_extra_at = spots(extra, 0.0)
    bench_extra_at = spots(extra, 0.37)
    extra_count = {"npu": 0, "bench": 0}

    def add_extra(side: str, k: int):
        api, builder = EXTRA_NPU if side == "npu" else EXTRA_BENCH
        args, kwargs, outs = builder(r, F32)
        c = extra_count[side]
        extra_count[side] += 1
        name = f"{api}.{c}.forward"
        (b_in, n_in) = materialize(args, r, False, "ok")
        (b_kw, n_kw) = materialize(kwargs, r, False, "ok")
        (b_out, n_out) = materialize(outs, r, False, "ok")
        if side == "npu":
            npu_w.add(name, {"input_args": n_in, "input_kwargs": n_kw, "output": n_out},
                      dg.stack_frames(name, k))
        else:
            bench_w.add(name, {"input_args": b_in, "input_kwargs": b_kw, "output": b_out},
                        dg.stack_frames(name, k))

    li = 0
    for i, (name, args, kwargs, outs) in enumerate(fwd):
        if i in npu_extra_at:
            add_extra("npu", i)
        if i in bench_extra_at:
            add_extra("bench", i)
        lvl = str(levels[li])
        li += 1
        b_in, n_in = materialize(args, r, False, "ok")
        b_kw, n_kw = materialize(kwargs, r, False, "ok")
        b_out, n_out = materialize(outs, r, False, lvl)
        op = f"{name}.forward"
        frames = dg.stack_frames(op, i)
        bench_w.add(op, {"input_args": b_in, "input_kwargs": b_kw, "output": b_out}, frames)
        npu_w.add(op, {"input_args": n_in, "input_kwargs": n_kw, "output": n_out}, frames)
    for name, gin, gout in bwd:
        lvl = str(levels[li % len(levels)])
        li += 1
        b_gi, n_gi = materialize(gin, r, True, "ok")
        b_go, n_go = materialize(gout, r, True, lvl)
        op = f"{name}.backward"
        bench_w.add(op, {"input": b_gi, "output": b_go})
        npu_w.add(op, {"input": n_gi, "output": n_go})

    npu_w.close()
    bench_w.close()
    dg.write_compare_json(out)
    sizes = {s: (out / s / "step0/rank/dump.json").stat().st_size for s in ("npu", "bench")}
    rows = {s: dg.count_rows(w.data) for s, w in (("npu", npu_w), ("bench", bench_w))}
    meta = {
        "workload": "stat",
        "generator": "bench/gen_stat.py",
        "params": {"ops": ops, "seed": seed, "red": red, "yellow": yellow, "overflow": overflow,
                   "extra": extra, "bwd_frac": bwd_frac},
        "ops": {"npu": len(npu_w.data), "bench": len(bench_w.data)},
        "rows": {s: v[0] for s, v in rows.items()},
        "tensor_rows": {s: v[1] for s, v in rows.items()},
        "forward_ops": n_fwd,
        "backward_ops": len(bwd),
        "dump_json_bytes": sizes,
        "total_bytes": dg.dir_bytes(out / "npu") + dg.dir_bytes(out / "bench"),
        "gen_seconds": round(time.time() - t0, 2),
    }
    dg.write_meta(out, meta)
    return meta


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=20000, help="ops per side (default 20000)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "work" / "stat")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--red", type=float, default=0.45, help="fraction of ops with a large output error")
    ap.add_argument("--yellow", type=float, default=0.37, help="fraction with a moderate output error")
    ap.add_argument("--overflow", type=float, default=0.002, help="fraction with an inf/nan output Max")
    ap.add_argument("--extra", type=int, default=5, help="side-only ops on each side")
    ap.add_argument("--bwd-frac", type=float, default=0.4,
                    help="backward records per forward op (default 0.4)")
    a = ap.parse_args(argv)
    meta = generate(a.out, a.ops, a.seed, a.red, a.yellow, a.overflow, a.extra, a.bwd_frac)
    print(f"wrote {a.out}: ops npu={meta['ops']['npu']} bench={meta['ops']['bench']}, dump.json "
          f"{meta['dump_json_bytes']['npu'] / 1e6:.1f} MB / {meta['dump_json_bytes']['bench'] / 1e6:.1f} MB, "
          f"rows {meta['rows']['npu']} / {meta['rows']['bench']}, {meta['gen_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
