"""Build small msprobe-format dumps in tests (dump.json, stack.json, construct.json).

``op`` describes a forward or backward entry; ``t`` a tensor statistic entry. Files are written as
msprobe writes them (``json.dump(indent=1)``), so non-finite floats become NaN/Infinity tokens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def t(shape: list[int] | None = None, dtype: str = "torch.float32", mx: float = 1.0,
      mn: float = -1.0, mean: float = 0.0, norm: float = 2.0, **extra: Any) -> dict[str, Any]:
    """A tensor argument entry with its statistics."""
    entry = {"type": "torch.Tensor", "dtype": dtype, "shape": shape if shape is not None else [2, 3],
             "Max": mx, "Min": mn, "Mean": mean, "Norm": norm, "requires_grad": False}
    entry.update(extra)
    return entry


def fwd(*args: Any, out: Any = None, **kwargs: Any) -> dict[str, Any]:
    """A forward entry: positional args, keyword args and outputs."""
    return {"input_args": list(args), "input_kwargs": kwargs,
            "output": out if isinstance(out, list) else [out if out is not None else t()]}


def bwd(inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
    return {"input": inputs, "output": outputs}


def write_dump(folder: Path, data: dict[str, Any], task: str = "statistics", level: str = "L1",
               stack: dict[str, list[str]] | None = None) -> Path:
    """Write dump.json (+ stack.json, construct.json) into folder; return dump.json's path."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"task": task, "level": level, "dump_data_dir": None, "data": data}
    (folder / "dump.json").write_text(json.dumps(doc, indent=1))
    stacks = stack if stack is not None else {name: [f"File model.py, line {i}, in forward, \n x()"]
                                              for i, name in enumerate(data)}
    (folder / "stack.json").write_text(json.dumps(stacks, indent=1))
    (folder / "construct.json").write_text("{}")
    return folder / "dump.json"


def write_pair(root: Path, npu: dict[str, Any], bench: dict[str, Any], **kw: Any) -> Path:
    """Write npu/ and bench/ dumps and a compare.json under root; return compare.json."""
    n = write_dump(root / "npu" / "step0" / "rank", npu, **kw)
    b = write_dump(root / "bench" / "step0" / "rank", bench, **kw)
    cfg = root / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(n), "bench_path": str(b),
                               "stack_path": str(n.parent / "stack.json"),
                               "is_print_compare_log": True}))
    return cfg
