"""Which framework a dump comes from, and whether a compare crosses frameworks (spec §3.7)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from msq.config import Options

_MS_PREFIXES = ("Cell.", "Mint.", "MintFunctional.", "Primitive.", "Jit.")
_PT_FILE_LINE = re.compile(r'"data_name":\s*".*\.pt"')


def looks_like_mindspore(doc: dict[str, Any]) -> bool:
    """True when the dump's op names or tensor types are MindSpore's."""
    for op_name, entry in list(doc.get("data", {}).items())[:50]:
        if op_name.startswith(_MS_PREFIXES):
            return True
        if isinstance(entry, dict) and '"mindspore.Tensor"' in str(entry).replace("'", '"'):
            return True
    return False


def bench_has_pt_files(bench_json: Path) -> bool:
    """1.1.0's cross-framework test under -dm: a line naming a .pt data file in the bench dump."""
    with open(bench_json, encoding="utf-8", errors="replace") as handle:
        return any(_PT_FILE_LINE.search(line) for line in handle)


def resolve_framework(opts: Options, npu_looks_mindspore: bool) -> str:
    """The NPU side's framework: as given, else told by the dump itself (MindSpore names/types)."""
    if opts.framework != "pytorch" or opts.api_mapping or opts.cell_mapping:
        return "mindspore" if (opts.api_mapping or opts.cell_mapping) else opts.framework
    return "mindspore" if npu_looks_mindspore else "pytorch"


def is_cross_framework(opts: Options, bench_json: Path, api_map: bool, cell_map: bool) -> bool:
    """MindSpore vs PyTorch dtype names are translated only in a cross-framework compare (§3.7)."""
    if opts.data_mapping is not None:
        return bench_has_pt_files(bench_json)
    return api_map or cell_map
