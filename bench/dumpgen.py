"""Shared helpers of the workload generators: write dumps in msprobe 1.1.0's on-disk layout.

Layout written (as msprobe's PyTorch dumper does, see spec §1.2-1.4):

    <side>/step0/rank/dump.json         json.dump(indent=1): task, level, dump_data_dir, data
    <side>/step0/rank/stack.json        forward ops only, "File <p>, line <n>, in <f>, \\n <src>"
    <side>/step0/rank/construct.json    {} (level L1)
    <side>/step0/rank/dump_tensor_data/<data_name>.pt   torch.save of a plain contiguous CPU tensor

A workload directory holds npu/, bench/, compare.json (paths relative to the workload directory,
so both tools are run with the workload directory as cwd) and meta.json (generation parameters).
"""
from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

F32 = "torch.float32"
F16 = "torch.float16"
BF16 = "torch.bfloat16"
I64 = "torch.int64"
BOOL = "torch.bool"

# msprobe's dumper chmods data files to 0o640 and directories to 0o750.
FILE_MODE = 0o640
DIR_MODE = 0o750

SITE = "/usr/local/lib/python3.11/site-packages"


# ----------------------------------------------------------------------------------- values
def round_f32(x: float) -> float:
    return float(np.float32(x))


def round_f16(x: float) -> float:
    return float(np.float16(x))


def round_bf16(x: float) -> float:
    """Round-to-nearest-even to bfloat16, returned as a Python float."""
    a = np.array([x], dtype=np.float32)
    if not np.isfinite(a[0]):
        return float(a[0])
    bits = a.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(bits.astype(np.uint32).view(np.float32)[0])


ROUND = {F32: round_f32, F16: round_f16, BF16: round_bf16}


def scalar(typ: str, value: Any) -> dict:
    """A non-tensor argument element: {"type": ..., "value": ...}."""
    return {"type": typ, "value": value}


def int_arg(v: int) -> dict:
    return scalar("int", int(v))


def float_arg(v: float) -> dict:
    return scalar("float", float(v))


def bool_arg(v: bool) -> dict:
    return scalar("bool", bool(v))


def str_arg(v: str) -> dict:
    return scalar("str", v)


def tensor_entry(
    dtype: str,
    shape: list[int],
    mx: Any,
    mn: Any,
    mean: Any,
    norm: Any,
    requires_grad: bool,
    data_name: str | None = None,
    max_finite: float | None = None,
    min_finite: float | None = None,
) -> dict:
    """A tensor element, keys in msprobe's order.

    max_finite / min_finite: the *_except_inf_nan values, written only when Max / Min is not finite.
    """
    e = {
        "type": "torch.Tensor",
        "dtype": dtype,
        "shape": list(shape),
        "Max": mx,
        "Min": mn,
        "Mean": mean,
        "Norm": norm,
        "requires_grad": requires_grad,
    }
    if isinstance(mx, float) and not math.isfinite(mx) and max_finite is not None:
        e["Max_except_inf_nan"] = max_finite
    if isinstance(mn, float) and not math.isfinite(mn) and min_finite is not None:
        e["Min_except_inf_nan"] = min_finite
    if data_name is not None:
        e["data_name"] = data_name
    return e


def numel(shape: list[int]) -> int:
    return int(math.prod(shape)) if shape else 1


# ----------------------------------------------------------------------------------- stacks
_USER_LINES = [
    "h = self.proj(x)",
    "x = x + self.attn(self.ln1(x))",
    "x = x + self.mlp(self.ln2(x))",
    "q, k, v = self.qkv(x).chunk(3, dim=-1)",
    "att = (q @ k.transpose(-2, -1)) * self.scale",
    "out = torch.cat([a, b], dim=1)",
    "y = F.gelu(self.fc1(x))",
    "logits = self.head(self.ln_f(x))",
    "loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets)",
    "x = self.drop(tok + pos)",
]
_TEMPLATE = {
    "Functional": ("wrap_functional.py", 96, "functional_op_template", "FunctionalOPTemplate"),
    "Tensor": ("wrap_tensor.py", 61, "tensor_op_template", "TensorOPTemplate"),
    "Torch": ("wrap_torch.py", 77, "torch_op_template", "TorchOPTemplate"),
    "VF": ("wrap_vf.py", 54, "vf_op_template", "VfOPTemplate"),
    "Distributed": ("wrap_distributed.py", 76, "distributed_op_template", "DistributedOPTemplate"),
}


def stack_frames(op_name: str, k: int) -> list[str]:
    """A plausible call stack (innermost first) for forward API op number k."""
    prefix = op_name.split(".", 1)[0]
    fname, line, func, cls = _TEMPLATE.get(prefix, _TEMPLATE["Functional"])
    src = _USER_LINES[k % len(_USER_LINES)]
    layer = k % 24
    frames = [
        (f"File {SITE}/msprobe/pytorch/hook_module/{fname}, line {line}, in {func}, \n"
         f" return {cls}(op_name, hook)(*args, **kwargs)"),
        f"File /workspace/model/blocks.py, line {100 + (k * 7) % 400}, in forward, \n {src}",
        (f"File {SITE}/torch/nn/modules/module.py, line 1789, in _call_impl, \n"
         " return forward_call(*args, **kwargs)"),
        (f"File {SITE}/torch/nn/modules/module.py, line 1778, in _wrapped_call_impl, \n"
         " return self._call_impl(*args, **kwargs)"),
    ]
    if layer % 3 == 0:
        frames += [
            f"File /workspace/model/gpt.py, line {200 + layer}, in forward, \n x = block(x)",
            (f"File {SITE}/torch/nn/modules/module.py, line 1789, in _call_impl, \n"
             " return forward_call(*args, **kwargs)"),
            (f"File {SITE}/torch/nn/modules/module.py, line 1778, in _wrapped_call_impl, \n"
             " return self._call_impl(*args, **kwargs)"),
        ]
    frames += [
        "File /workspace/train.py, line 141, in train_step, \n loss = model(*batch)",
        "File /workspace/train.py, line 208, in main, \n train_step(model, batch, step)",
        "File /workspace/train.py, line 231, in <module>, \n main()",
    ]
    return frames


# ----------------------------------------------------------------------------------- writer
class RankWriter:
    """Collects one rank's ops and writes dump.json / stack.json / construct.json (+ tensors)."""

    def __init__(self, side_root: Path, task: str, level: str = "L1", step: int = 0, rank: str = ""):
        self.dir = Path(side_root) / f"step{step}" / f"rank{rank}"
        self.task = task
        self.level = level
        self.data: dict[str, dict] = {}
        self.stack: dict[str, list[str]] = {}
        self.tensor_dir = self.dir / "dump_tensor_data" if task == "tensor" else None
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.tensor_dir is not None:
            self.tensor_dir.mkdir(exist_ok=True)

    def add(self, op_name: str, entry: dict, frames: list[str] | None = None) -> None:
        if op_name in self.data:
            raise ValueError(f"duplicate op {op_name}")
        self.data[op_name] = entry
        if frames is not None:
            self.stack[op_name] = frames

    def save_tensor(self, data_name: str, tensor: Any) -> int:
        """torch.save a plain contiguous CPU tensor as msprobe does; returns the file size."""
        import torch  # statistics workloads do not need torch

        assert self.tensor_dir is not None
        path = self.tensor_dir / data_name
        torch.save(tensor.contiguous().detach(), str(path))
        os.chmod(path, FILE_MODE)
        return path.stat().st_size

    def close(self) -> None:
        top = {
            "task": self.task,
            "level": self.level,
            "dump_data_dir": str(self.tensor_dir.resolve()) if self.tensor_dir else None,
            "data": self.data,
        }
        for name, obj in (("dump.json", top), ("stack.json", self.stack), ("construct.json", {})):
            p = self.dir / name
            with open(p, "w", encoding="utf-8") as f:
                json.dump(obj, f, indent=1)
            os.chmod(p, FILE_MODE)
        for d in (self.dir, self.dir.parent):
            os.chmod(d, DIR_MODE)


# ----------------------------------------------------------------------------------- workload dir
def prepare_workload_dir(out: Path, force: bool = True) -> None:
    out = Path(out)
    for side in ("npu", "bench"):
        if (out / side).exists():
            if not force:
                raise SystemExit(f"{out / side} exists (use --force)")
            shutil.rmtree(out / side)
    out.mkdir(parents=True, exist_ok=True)


def write_compare_json(out: Path) -> Path:
    p = Path(out) / "compare.json"
    cfg = {
        "npu_path": "npu/step0/rank/dump.json",
        "bench_path": "bench/step0/rank/dump.json",
        "stack_path": "npu/step0/rank/stack.json",
        "is_print_compare_log": True,
    }
    with open(p, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)
    return p


def write_meta(out: Path, meta: dict) -> None:
    """meta.json is written last: its presence marks a complete workload."""
    with open(Path(out) / "meta.json", "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


def read_meta(out: Path) -> dict | None:
    p = Path(out) / "meta.json"
    if not p.exists():
        return None
    with open(p, encoding="utf-8") as f:
        return json.load(f)


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for fn in files:
            total += os.path.getsize(os.path.join(root, fn))
    return total


# ----------------------------------------------------------------------------------- row counting
def _rows(item: Any) -> int:
    """Rows one argument element flattens to (spec §2.2)."""
    if item is None or item == {}:
        return 1
    if isinstance(item, list):
        return sum(_rows(x) for x in item)
    if isinstance(item, dict) and "type" not in item:
        return sum(_rows(v) for v in item.values())
    return 1


def count_rows(data: dict) -> tuple[int, int]:
    """(rows, tensor rows) of a dump.json `data` map, as the compare flattens them."""
    rows = tensors = 0

    def walk_t(item: Any) -> int:
        if isinstance(item, list):
            return sum(walk_t(x) for x in item)
        if isinstance(item, dict):
            if "dtype" in item and "type" in item and item["type"] == "torch.Tensor":
                return 1
            if "type" not in item:
                return sum(walk_t(v) for v in item.values())
        return 0

    for name, e in data.items():
        parts = []
        if "forward" in name:
            parts += [e.get("input_args", [])]
            kw = e.get("input_kwargs", {})
            parts += [kw] if isinstance(kw, list) or (isinstance(kw, dict) and "type" in kw) \
                else list(kw.values())
            parts += [e.get("output", [])]
        if "backward" in name:
            parts = [e.get("input", []), e.get("output", [])]
        rows += sum(_rows(p) if not isinstance(p, list) else sum(_rows(x) for x in p) for p in parts)
        tensors += sum(walk_t(p) for p in parts)
    return rows, tensors
