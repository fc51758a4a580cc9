"""MindSpore dumps: detection, the built-in MindSpore->PyTorch API table and -am/-cm mappings.

The mappings are rows of the ``mappings`` table; the renaming itself is the SQL view
``ms_match_names`` (spec §3.7). Displayed names stay the original MindSpore names.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import yaml

from msq.config import Options
from msq.errors import DumpError
from msq.mappings import load_mapping_rows, read_yaml

_MS_PREFIXES = ("Cell.", "Mint.", "MintFunctional.", "Primitive.", "Jit.")
_PT_FILE_LINE = re.compile(r'"data_name":\s*".*\.pt"')


@lru_cache(maxsize=1)
def builtin_api_table() -> tuple[tuple[str, str], ...]:
    """The shipped MindSpore->PyTorch API table (from msprobe 1.1.0, Apache-2.0)."""
    text = (resources.files("msq") / "data" / "ms_to_pt_api.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    return tuple((str(k), str(v)) for k, v in doc.items())


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


def cell_mapping_pairs(path: Path) -> list[tuple[str, str]]:
    """A -cm YAML: ``{cell_name}.{Class}: {module_name}.{Class}`` entries."""
    doc = read_yaml(path, "cell mapping YAML")
    if not isinstance(doc, dict):
        raise DumpError(f"{path}: a cell mapping must be a YAML mapping such as "
                        f"'fc1.Dense: fc1.Linear', found a {type(doc).__name__}")
    return [(str(k), str(v)) for k, v in doc.items()]


def apply_ms_mappings(con: duckdb.DuckDBPyConnection, opts: Options) -> None:
    """Load -am/-cm mappings as rows and rewrite the NPU match names with ``ms_match_names``."""
    if opts.api_mapping:
        load_mapping_rows(con, "api", list(builtin_api_table()))
        if not isinstance(opts.api_mapping, bool):
            from msq.ms_api_user import load_user_api_mapping

            load_user_api_mapping(con, Path(opts.api_mapping))
    if opts.cell_mapping and not isinstance(opts.cell_mapping, bool):
        load_mapping_rows(con, "cell", cell_mapping_pairs(Path(opts.cell_mapping)))
    con.execute("""
        UPDATE tensors SET match_name = m.match_name
        FROM ms_match_names m
        WHERE tensors.side = 'npu' AND tensors.row_seq = m.row_seq""")
