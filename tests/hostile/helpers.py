"""Write hostile dumps to disk and run msq on them, the way a user would.

``cli`` runs ``msq compare`` in-process (click's runner) and returns the exit status and what it
printed; ``outputs`` lists what a compare left in its output folder, hidden files included, so a
test can prove that a refused compare left nothing behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from msq.cli import main
from tests.dumps import fwd, t, write_dump, write_pair

OP = "Functional.relu.0.forward"


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``msq`` with ``args``; exit status and output (stdout and stderr). No traceback, ever."""
    result = CliRunner().invoke(main, list(args), env=env)
    assert "Traceback" not in result.output, result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def compare(cfg: Path, out: Path, *flags: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    return cli("compare", str(cfg), "-o", str(out), "--no-history", *flags, env=env)


def error_line(text: str) -> str:
    """The one ``msq: error:`` line; fails unless the output is exactly that one line."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("msq: error: "), text
    return lines[0]


def outputs(out: Path) -> list[str]:
    """Every file a compare left in ``out`` (hidden and temporary files too)."""
    if not out.exists():
        return []
    return sorted(p.name for p in out.iterdir())


def sides(cfg: Path) -> tuple[Path, Path]:
    doc = json.loads(cfg.read_text())
    return Path(doc["npu_path"]), Path(doc["bench_path"])


def good_pair(root: Path) -> Path:
    """A one-op statistics pair that compares cleanly; tests then damage one file."""
    data = {OP: fwd(t(), out=t())}
    return write_pair(root, data, data)


# ------------------------------------------------------------------------------ real-data dumps


def tensor_arg(name: str, arr: Any, ext: str = ".pt") -> dict[str, Any]:
    """The dump.json entry of a saved tensor (statistics of ``arr``, ``data_name`` = name + ext)."""
    import numpy as np

    a = np.asarray(arr, dtype=np.float64)
    dtype = "torch.float32" if ext == ".pt" else "Float32"
    kind = "torch.Tensor" if ext == ".pt" else "mindspore.Tensor"
    return {"type": kind, "dtype": dtype, "shape": list(np.shape(arr)),
            "Max": float(a.max()), "Min": float(a.min()), "Mean": float(a.mean()),
            "Norm": float(np.sqrt((a * a).sum())), "requires_grad": False,
            "data_name": name + ext}


def save_pt(path: Path, arr: Any) -> None:
    import numpy as np
    import torch

    torch.save(torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)), path)


def tensor_side(folder: Path, ops: dict[str, tuple[list[Any], list[Any]]], ext: str = ".pt") -> Path:
    """A task=tensor dump: each op's inputs and outputs saved under dump_tensor_data."""
    import numpy as np

    tdir = folder / "dump_tensor_data"
    tdir.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {}
    for op, (inputs, outs) in ops.items():
        entry: dict[str, Any] = {"input_args": [], "input_kwargs": {}, "output": []}
        for key, io, arrays in (("input_args", "input", inputs), ("output", "output", outs)):
            for i, arr in enumerate(arrays):
                name = f"{op}.{io}.{i}"
                if ext == ".pt":
                    save_pt(tdir / (name + ext), arr)
                else:
                    np.save(tdir / (name + ext), np.asarray(arr, dtype=np.float32))
                entry[key].append(tensor_arg(name, arr, ext))
        data[op] = entry
    return write_dump(folder, data, task="tensor")


def tensor_pair(root: Path, npu: dict[str, tuple[list[Any], list[Any]]],
                bench: dict[str, tuple[list[Any], list[Any]]] | None = None,
                ext: str = ".pt") -> Path:
    n = tensor_side(root / "npu" / "step0" / "rank", npu, ext)
    b = tensor_side(root / "bench" / "step0" / "rank", bench if bench is not None else npu, ext)
    cfg = root / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(n), "bench_path": str(b),
                               "stack_path": str(n.parent / "stack.json")}))
    return cfg


def tensor_file(cfg: Path, side: str, name: str) -> Path:
    npu, bench = sides(cfg)
    return (npu if side == "npu" else bench).parent / "dump_tensor_data" / name


def set_data_name(dump_json: Path, op: str, key: str, index: int, data_name: str) -> None:
    doc = json.loads(dump_json.read_text())
    doc["data"][op][key][index]["data_name"] = data_name
    dump_json.write_text(json.dumps(doc, indent=1))


def hidden_leftovers(out: Path) -> list[str]:
    return [n for n in outputs(out) if n.startswith(".") or n.endswith(".tmp")]


def env_without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}
