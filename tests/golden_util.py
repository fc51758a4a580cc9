"""Helpers to run msq on a golden case and compare its outputs with msprobe's, cell by cell."""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openpyxl

from tests.conftest import GOLDEN

_TS = re.compile(r"_\d{14}")


@dataclass(frozen=True)
class FlagSet:
    case: str
    name: str

    @property
    def case_dir(self) -> Path:
        return GOLDEN / self.case

    @property
    def expected(self) -> Path:
        return self.case_dir / "expected" / self.name

    def argv(self, out_dir: Path) -> list[str]:
        """msprobe's command, spelled for msq (compat mode), writing into out_dir."""
        cmd = next(line for line in (self.expected / "cmd.txt").read_text().splitlines()
                   if line.strip() and not line.startswith("#"))
        args = shlex.split(cmd)
        if args[0] == "python":
            # the Python API flag set: same as -s
            return ["-f", "pytorch", "compare", "-i", f"expected/{self.name}/compare.json",
                    "-o", str(out_dir), "-s", "--compat", "msprobe-1.1"]
        args = args[1:]
        out = args.index("-o")
        args[out + 1] = str(out_dir)
        return args + ["--compat", "msprobe-1.1", "--no-history"]

    def __str__(self) -> str:
        return f"{self.case}/{self.name}"


def all_flag_sets() -> list[FlagSet]:
    sets = []
    for case in sorted(p for p in GOLDEN.iterdir() if (p / "expected").is_dir()):
        for fs in sorted(p for p in (case / "expected").iterdir() if p.is_dir()):
            sets.append(FlagSet(case.name, fs.name))
    return sets


def strip_ts(name: str) -> str:
    return _TS.sub("", name)


def outputs_by_name(folder: Path, suffix: str) -> dict[str, Path]:
    return {strip_ts(p.name): p for p in folder.glob(f"*{suffix}")}


def read_sheet(path: Path) -> tuple[list[list[Any]], list[str | None]]:
    """Cell values (with openpyxl's types) and the fill colour of each data row."""
    wb = openpyxl.load_workbook(path)
    ws = wb.worksheets[0]
    values: list[list[Any]] = []
    fills: list[str | None] = []
    for r, row in enumerate(ws.iter_rows()):
        values.append([c.value for c in row])
        if r == 0:
            continue
        colours = {c.fill.fgColor.rgb for c in row if c.fill is not None and c.fill.fill_type == "solid"}
        fills.append(colours.pop() if len(colours) == 1 else (None if not colours else str(sorted(colours))))
    return values, fills


def diff_sheets(got: Path, want: Path, limit: int = 8) -> list[str]:
    """Human-readable differences between two workbooks (values, cell types, fills)."""
    gv, gf = read_sheet(got)
    wv, wf = read_sheet(want)
    problems: list[str] = []
    if len(gv) != len(wv):
        problems.append(f"row count {len(gv)} != {len(wv)}")
    for r, (grow, wrow) in enumerate(zip(gv, wv)):
        width = max(len(grow), len(wrow))
        grow = grow + [None] * (width - len(grow))
        wrow = wrow + [None] * (width - len(wrow))
        for c, (g, w) in enumerate(zip(grow, wrow)):
            if g != w or type(g) is not type(w):
                if isinstance(g, float) and isinstance(w, float) and math.isnan(g) and math.isnan(w):
                    continue
                problems.append(f"row {r + 1} col {c + 1} ({wv[0][c] if c < len(wv[0]) else '?'}): "
                                f"got {g!r} want {w!r}")
    for r, (g, w) in enumerate(zip(gf, wf)):
        if g != w:
            problems.append(f"fill of data row {r} (xlsx row {r + 2}): got {g} want {w}")
    return problems[:limit] + ([f"... {len(problems) - limit} more"] if len(problems) > limit else [])


def summary(case: str) -> list[dict[str, Any]]:
    return json.loads((GOLDEN / case / "expected" / "summary.json").read_text())
