"""-am and -cm: MindSpore op names read as PyTorch's for matching (spec §3.7).

The built-in MindSpore->PyTorch API table, a user's cell YAML: both become rows of the
``mappings`` table; the renaming itself is the SQL view ``ms_match_names``. Displayed names stay
the original MindSpore names. A user's api YAML (``-am FILE``) is :mod:`msq.mindspore.api_user`.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from importlib import resources
from pathlib import Path

import duckdb
import yaml

from msq.config import Options
from msq.mappings import load_mapping_rows, read_yaml
from msq.mindspore.api_user import load_user_api_mapping

log = logging.getLogger("msq")


@lru_cache(maxsize=1)
def builtin_api_table() -> tuple[tuple[str, str], ...]:
    """The shipped MindSpore->PyTorch API table (from msprobe 1.1.0, Apache-2.0)."""
    text = (resources.files("msq") / "data" / "ms_to_pt_api.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    return tuple((str(k), str(v)) for k, v in doc.items())


def cell_mapping_pairs(path: Path) -> list[tuple[str, str]]:
    """A -cm YAML: ``{cell_name}.{Class}: {module_name}.{Class}`` entries.

    A file that is not such a mapping, or an entry that is not two names, is reported and left
    out: the default Cell -> Module rule still applies, so nothing is lost.
    """
    doc = read_yaml(path, "cell mapping YAML")
    if doc is None:
        log.warning("%s: the cell mapping YAML is empty; only the Cell -> Module rule applies", path)
        return []
    if not isinstance(doc, dict):
        log.warning("%s: a cell mapping must be a YAML mapping such as 'fc1.Dense: fc1.Linear', "
                    "found a %s; only the Cell -> Module rule applies", path, type(doc).__name__)
        return []
    pairs = []
    for key, value in doc.items():
        if not isinstance(key, str) or not isinstance(value, str) or not key or not value:
            log.warning("%s: entry %r: %r: both sides must be names such as fc1.Dense and "
                        "fc1.Linear; the entry is ignored", path, key, value)
            continue
        pairs.append((key, value))
    return pairs


def warn_unknown_cells(con: duckdb.DuckDBPyConnection, path: Path,
                       pairs: list[tuple[str, str]]) -> None:
    """One warning per cell YAML entry whose cell (or module) is not in its dump."""
    keys = {side: {row[0] for row in con.execute(
        "SELECT DISTINCT regexp_extract(op_name, ?, 1) FROM ops WHERE side = ?",
        [rf"^{prefix}\.(.+)\.(forward|backward)\.\d+$", side]).fetchall()}
        for side, prefix in (("npu", "Cell"), ("bench", "Module"))}
    for cell, module in pairs:
        if cell not in keys["npu"]:
            log.warning("%s: entry '%s: %s': the NPU dump has no cell Cell.%s.forward.<n>; "
                        "check the cell path and class name", path, cell, module, cell)
        elif module not in keys["bench"]:
            log.warning("%s: entry '%s: %s': the bench dump has no module Module.%s.forward.<n>; "
                        "check the module path and class name", path, cell, module, module)


def apply_ms_mappings(con: duckdb.DuckDBPyConnection, opts: Options) -> None:
    """Load -am/-cm mappings as rows and rewrite the NPU match names with ``ms_match_names``."""
    if opts.api_mapping:
        load_mapping_rows(con, "api", list(builtin_api_table()))
        if not isinstance(opts.api_mapping, bool):
            load_user_api_mapping(con, Path(opts.api_mapping))
    if opts.cell_mapping and not isinstance(opts.cell_mapping, bool):
        pairs = cell_mapping_pairs(Path(opts.cell_mapping))
        load_mapping_rows(con, "cell", pairs)
        warn_unknown_cells(con, Path(opts.cell_mapping), pairs)
    con.execute("""
        UPDATE tensors SET match_name = m.match_name
        FROM ms_match_names m
        WHERE tensors.side = 'npu' AND tensors.row_seq = m.row_seq""")
