"""Write small msprobe-format dumps (MindSpore or PyTorch) for the MindSpore compare tests.

A dump is built op by op from numpy arrays and Python values, in the layout msprobe's dumper
writes (spec §1.2-§1.4): ``<root>/step0/rank/dump.json`` + ``stack.json`` + ``construct.json``,
and for the tensor task ``dump_tensor_data/<data_name>`` files: ``.npy`` for MindSpore (bf16 saved
as float32, as MindSpore's dumper does) and ``.pt`` (torch.save) for PyTorch.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import openpyxl
from click.testing import CliRunner

MS_DTYPES = {"float16": "Float16", "float32": "Float32", "float64": "Float64", "int8": "Int8",
             "uint8": "UInt8", "int16": "Int16", "int32": "Int32", "int64": "Int64",
             "bool": "Bool", "complex64": "Complex64"}


@dataclass
class BF16:
    """A tensor that is bfloat16 on the device; values are rounded to bfloat16 on creation."""

    array: np.ndarray

    def __post_init__(self) -> None:
        bits = np.ascontiguousarray(self.array, dtype=np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # round to nearest even
        self.array = bits.astype(np.uint32).view(np.float32).reshape(np.shape(self.array))


@dataclass
class DumpBuilder:
    """One side's dump, built op by op; ``write()`` puts it on disk and returns dump.json."""

    root: Path
    framework: str = "mindspore"  # or "pytorch"
    task: str = "statistics"  # or "tensor"
    md5: bool = False
    rank: str = "rank"  # the rank directory: "rank" (single card) or "rank0", "rank1", ...
    data: dict[str, Any] = field(default_factory=dict)
    stack: dict[str, list[str]] = field(default_factory=dict)
    construct: dict[str, str | None] = field(default_factory=dict)

    @property
    def rank_dir(self) -> Path:
        return self.root / "step0" / self.rank

    @property
    def json_path(self) -> Path:
        return self.rank_dir / "dump.json"

    @property
    def tensor_dir(self) -> Path:
        return self.rank_dir / "dump_tensor_data"

    def op(self, name: str, inputs: list[Any] | None = None, kwargs: dict[str, Any] | None = None,
           outputs: list[Any] | None = None, *, parent: str | None = None,
           stack: list[str] | None = None) -> DumpBuilder:
        """Add one op; backward ops (name has ``backward``) use ``input``/``output`` lists."""
        inputs = inputs or []
        outputs = outputs or []
        if ".backward" in name:
            entry = {"input": [self._arg(a, f"{name}.input.{i}") for i, a in enumerate(inputs)],
                     "output": [self._arg(a, f"{name}.output.{i}") for i, a in enumerate(outputs)]}
        else:
            entry = {"input_args": [self._arg(a, f"{name}.input.{i}") for i, a in enumerate(inputs)],
                     "input_kwargs": {k: self._arg(v, f"{name}.kwargs.{k}")
                                      for k, v in (kwargs or {}).items()},
                     "output": [self._arg(a, f"{name}.output.{i}") for i, a in enumerate(outputs)]}
        self.data[name] = entry
        self.construct[name] = parent
        self.stack[name] = stack if stack is not None else [frame("train.py", 10, "main", "run()")]
        return self

    def _arg(self, value: Any, data_stem: str) -> Any:
        if isinstance(value, (np.ndarray, BF16)):
            return self._tensor(value, data_stem)
        if isinstance(value, (list, tuple)):
            return [self._arg(v, f"{data_stem}.{j}") for j, v in enumerate(value)]
        if value is None:
            return None
        return {"type": type(value).__name__, "value": value}

    def _tensor(self, value: np.ndarray | BF16, data_stem: str) -> dict[str, Any]:
        array = value.array.astype(np.float32) if isinstance(value, BF16) else value
        entry: dict[str, Any] = {
            "type": "mindspore.Tensor" if self.framework == "mindspore" else "torch.Tensor",
            "dtype": self._dtype(value), "shape": list(array.shape)}
        entry.update(stats(array))
        if self.framework == "pytorch":
            entry["requires_grad"] = False
        if self.md5:
            entry["md5"] = f"{zlib.crc32(np.ascontiguousarray(array).tobytes()):08x}"
        if self.task == "tensor":
            ext = ".npy" if self.framework == "mindspore" else ".pt"
            entry["data_name"] = data_stem + ext
            self._save(value, data_stem + ext)
        return entry

    def _dtype(self, value: np.ndarray | BF16) -> str:
        if self.framework == "mindspore":
            return "BFloat16" if isinstance(value, BF16) else MS_DTYPES[value.dtype.name]
        return "torch.bfloat16" if isinstance(value, BF16) else f"torch.{value.dtype.name}"

    def _save(self, value: np.ndarray | BF16, file_name: str) -> None:
        self.tensor_dir.mkdir(parents=True, exist_ok=True)
        path = self.tensor_dir / file_name
        if self.framework == "mindspore":
            array = value.array.astype(np.float32) if isinstance(value, BF16) else value
            np.save(path, array)
            return
        import torch

        if isinstance(value, BF16):
            tensor = torch.from_numpy(value.array.astype(np.float32)).to(torch.bfloat16)
        else:
            tensor = torch.from_numpy(np.ascontiguousarray(value))
        torch.save(tensor, path)

    def write(self) -> Path:
        self.rank_dir.mkdir(parents=True, exist_ok=True)
        doc = {"task": self.task, "level": "mix", "dump_data_dir":
               str(self.tensor_dir) if self.task == "tensor" else None, "data": self.data}
        self.json_path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        (self.rank_dir / "stack.json").write_text(json.dumps(self.stack, indent=1), encoding="utf-8")
        (self.rank_dir / "construct.json").write_text(json.dumps(self.construct, indent=1),
                                                      encoding="utf-8")
        return self.json_path


def frame(path: str, line: int, func: str, source: str) -> str:
    """One stack.json frame in msprobe's format."""
    return f"File {path}, line {line}, in {func}, \n {source}"


def stats(array: np.ndarray) -> dict[str, Any]:
    """Max/Min/Mean/Norm as msprobe's dumper writes them (float32, bool special case)."""
    if array.size == 0:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    if array.dtype == np.bool_:
        return {"Max": bool(array.any()), "Min": bool(array.all()), "Mean": None, "Norm": None}
    data = array.astype(np.float32)
    return {"Max": float(data.max()), "Min": float(data.min()), "Mean": float(data.mean()),
            "Norm": float(np.linalg.norm(data.reshape(-1)))}


def compare_json(folder: Path, npu: DumpBuilder, bench: DumpBuilder, **extra: Any) -> Path:
    """compare.json for a single-card compare of two built dumps."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"npu_path": str(npu.json_path), "bench_path": str(bench.json_path),
           "stack_path": str(npu.rank_dir / "stack.json"), "is_print_compare_log": False}
    doc.update(extra)
    path = folder / "compare.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def api_input(npu: DumpBuilder, bench: DumpBuilder) -> dict[str, Any]:
    """The Python API's input_param for two built dumps."""
    return {"npu_json_path": str(npu.json_path), "bench_json_path": str(bench.json_path),
            "stack_json_path": str(npu.rank_dir / "stack.json"), "is_print_compare_log": False}


@dataclass
class Run:
    """One CLI run: exit code, console text and the workbook rows (dicts keyed by header)."""

    exit_code: int
    output: str
    out_dir: Path
    rows: list[dict[str, Any]]
    header: list[str]

    def by_npu(self) -> dict[str, dict[str, Any]]:
        return {r["NPU Name"]: r for r in self.rows}

    def pairs(self) -> list[tuple[Any, Any]]:
        return [(r["NPU Name"], r["Bench Name"]) for r in self.rows]


def run_cli(compare: Path, out: Path, *flags: str, framework: str | None = "mindspore") -> Run:
    """``msq [-f framework] compare -i compare.json -o out FLAGS --no-history``."""
    from msq.cli import main

    argv = (["-f", framework] if framework else []) + ["compare", "-i", str(compare), "-o", str(out),
                                                       *flags, "--no-history"]
    result = CliRunner().invoke(main, argv, catch_exceptions=False)
    header, rows = read_workbook(out)
    return Run(result.exit_code, result.output, out, rows, header)


def read_workbook(out: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The compare_result_*.xlsx in ``out`` as (header, rows); empty unless there is exactly one
    (a directory compare writes one per rank pair)."""
    books = sorted(out.glob("compare_result_*.xlsx")) if out.is_dir() else []
    if len(books) != 1:
        return [], []
    sheet = openpyxl.load_workbook(books[0]).worksheets[0]
    values = [[c.value for c in row] for row in sheet.iter_rows()]
    header = [str(h) for h in values[0]]
    return header, [dict(zip(header, row)) for row in values[1:]]


def data_mapping_files(out: Path) -> list[Path]:
    return sorted(out.glob("data_mapping_*.yaml"))


# -- scenarios shared by the tests ----------------------------------------------------------------
def arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """A few small float32 arrays with fixed values."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32)
            for name, shape in (("x", (2, 3)), ("y", (2, 3)), ("w", (4, 3)), ("b", (4,)))}


def cross_framework_pair(tmp: Path, task: str = "statistics", md5: bool = False
                         ) -> tuple[DumpBuilder, DumpBuilder]:
    """MindSpore NPU ops and their PyTorch bench counterparts of spec §3.7's verified table."""
    a = arrays()
    x, y, w, b = a["x"], a["y"], a["w"], a["b"]
    npu = DumpBuilder(tmp / "npu", "mindspore", task, md5)
    bench = DumpBuilder(tmp / "bench", "pytorch", task, md5)
    for (ms_op, pt_op), (inputs, outputs) in {
        ("Functional.add.0.forward", "Torch.add.0.forward"): ([x, y], [x + y]),
        ("Mint.abs.0.forward", "Torch.abs.0.forward"): ([x], [np.abs(x)]),
        ("MintFunctional.relu.0.forward", "Functional.relu.0.forward"): ([x], [np.maximum(x, 0)]),
        ("Functional.dense.0.forward", "Functional.linear.0.forward"): ([x, w, b], [x @ w.T + b]),
        ("Tensor.__add__.0.forward", "Tensor.__add__.0.forward"): ([x, BF16(y)], [BF16(x + y)]),
        ("Cell.fc1.Dense.forward.0", "Module.fc1.Linear.forward.0"): ([x], [x @ w.T + b]),
    }.items():
        npu.op(ms_op, inputs, {}, outputs)
        bench.op(pt_op, inputs, {}, outputs)
    npu.write()
    bench.write()
    return npu, bench
