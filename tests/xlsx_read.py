"""Read an msq/msprobe workbook back with openpyxl (values and row fills)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openpyxl


def rows(path: Path) -> list[dict[str, Any]]:
    """Data rows as dicts keyed by header, with a ``_fill`` key (red/yellow/None)."""
    ws = openpyxl.load_workbook(path).worksheets[0]
    it = ws.iter_rows()
    header = [c.value for c in next(it)]
    out = []
    for row in it:
        record = {h: c.value for h, c in zip(header, row)}
        fills = {c.fill.fgColor.rgb for c in row if c.fill is not None and c.fill.fill_type == "solid"}
        record["_fill"] = {"FFFF0000": "red", "00FFFF00": "yellow"}.get(fills.pop()) if fills else None
        out.append(record)
    return out


def only_xlsx(folder: Path) -> Path:
    files = sorted(folder.glob("compare_result*.xlsx"))
    assert len(files) == 1, files
    return files[0]
